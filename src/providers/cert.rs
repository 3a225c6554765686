//! The names a server certificate covers, read from its PEM (public data only: a private key is
//! never passed here), and whether a client's host is among them.
//!
//! Parsing is x509-parser's (`parse_x509_pem`, `X509Certificate::subject_alternative_name`).
//! Matching follows what the clients fabric configures do, Go's `crypto/x509`
//! (`Certificate.VerifyHostname`, used by client-go, ArgoCD and Kueue): an IP address matches an
//! IP SAN only; a name matches a DNS SAN case-insensitively, where a SAN `*.b.c` stands for
//! exactly one leftmost label (`matchHostnames`); the subject's CN is not consulted.

use std::net::IpAddr;

use x509_parser::extensions::GeneralName;

/// Below this many days to a certificate's `notAfter`, plan and verify warn (issue #26).
pub const EXPIRY_WARNING_DAYS: i64 = 30;

/// Where a certificate stands against the [`EXPIRY_WARNING_DAYS`] rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// At least [`EXPIRY_WARNING_DAYS`] days left (whole days).
    Valid { days: i64 },
    /// Under [`EXPIRY_WARNING_DAYS`] days left, not expired yet (whole days, 0 on the last day).
    Soon { days: i64 },
    /// `notAfter` is past.
    Expired,
}

/// [`Expiry`] of a certificate ending at `not_after`, at time `now` (both Unix seconds).
pub fn expiry(not_after: i64, now: i64) -> Expiry {
    let left = not_after - now;
    if left < 0 {
        Expiry::Expired
    } else if left < EXPIRY_WARNING_DAYS * 86_400 {
        Expiry::Soon { days: left / 86_400 }
    } else {
        Expiry::Valid { days: left / 86_400 }
    }
}

/// Why a certificate could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertError {
    #[error("not a PEM certificate: {0}")]
    Pem(String),
    #[error("not an X.509 certificate: {0}")]
    Der(String),
}

/// What a certificate says about where it may be served: its Subject Alternative Names and the
/// end of its validity.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CertNames {
    pub dns: Vec<String>,
    pub ips: Vec<IpAddr>,
    /// `notAfter`, seconds since the Unix epoch.
    pub not_after: i64,
}

impl CertNames {
    /// Whether a client that connects to `host` (a name or an IP address) accepts the certificate.
    pub fn covers(&self, host: &str) -> bool {
        match host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            Ok(ip) => self.ips.contains(&ip),
            Err(_) => self.dns.iter().any(|san| name_matches(san, host)),
        }
    }
}

/// Go's `matchHostnames`: equal labels, case-insensitively, a trailing dot ignored; a leftmost
/// `*` label of the SAN matches one label of the host.
fn name_matches(san: &str, host: &str) -> bool {
    let (san, host) = (san.trim_end_matches('.').to_ascii_lowercase(), host.trim_end_matches('.').to_ascii_lowercase());
    let (s, h): (Vec<&str>, Vec<&str>) = (san.split('.').collect(), host.split('.').collect());
    s.len() == h.len()
        && !host.is_empty()
        && s.iter().zip(&h).enumerate().all(|(i, (a, b))| a == b || (i == 0 && *a == "*" && !b.is_empty()))
}

/// The first certificate of `pem`.
pub fn parse(pem: &[u8]) -> Result<CertNames, CertError> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|e| CertError::Pem(e.to_string()))?;
    if block.label != "CERTIFICATE" {
        return Err(CertError::Pem(format!("a `{}` block, not a CERTIFICATE", block.label)));
    }
    let cert = block.parse_x509().map_err(|e| CertError::Der(e.to_string()))?;
    let mut out = CertNames { dns: Vec::new(), ips: Vec::new(), not_after: cert.validity().not_after.timestamp() };
    let san = cert.subject_alternative_name().map_err(|e| CertError::Der(e.to_string()))?;
    for name in san.iter().flat_map(|s| &s.value.general_names) {
        match name {
            GeneralName::DNSName(d) => out.dns.push(d.to_string()),
            GeneralName::IPAddress(b) => match b.len() {
                4 => out.ips.push(IpAddr::from(<[u8; 4]>::try_from(*b).unwrap_or_default())),
                16 => out.ips.push(IpAddr::from(<[u8; 16]>::try_from(*b).unwrap_or_default())),
                n => return Err(CertError::Der(format!("an IP SAN of {n} bytes"))),
            },
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(sans: &[&str]) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn the_thirty_day_rule_at_its_boundaries() {
        let (day, now) = (86_400, 1_800_000_000);
        assert_eq!(expiry(now + 30 * day, now), Expiry::Valid { days: 30 });
        assert_eq!(expiry(now + 30 * day - 1, now), Expiry::Soon { days: 29 });
        assert_eq!(expiry(now, now), Expiry::Soon { days: 0 });
        assert_eq!(expiry(now - 1, now), Expiry::Expired);
    }

    #[test]
    fn names_and_addresses_are_read_apart() {
        let c = parse(cert(&["localhost", "*.karmada-system.svc", "192.168.0.10", "fd00::1"]).as_bytes()).unwrap();
        assert_eq!(c.dns, vec!["localhost", "*.karmada-system.svc"]);
        assert_eq!(c.ips, vec!["192.168.0.10".parse::<IpAddr>().unwrap(), "fd00::1".parse().unwrap()]);
        assert!(c.not_after > 0);
        assert!(c.covers("192.168.0.10") && c.covers("[fd00::1]") && c.covers("LOCALHOST"));
        assert!(c.covers("karmada-apiserver.karmada-system.svc"));
        // One label only, never the bare parent; an address is never matched by a name.
        assert!(!c.covers("a.b.karmada-system.svc") && !c.covers("karmada-system.svc"));
        assert!(!c.covers("192.168.0.11") && !c.covers("127.0.0.1"));
    }

    #[test]
    fn what_is_no_certificate_is_an_error_without_its_text() {
        let key = rcgen::KeyPair::generate().unwrap().serialize_pem();
        let e = parse(key.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("PRIVATE KEY` block"), "{e}");
        assert!(!e.contains(key.lines().nth(1).unwrap()), "the key's text is never in an error");
        assert!(parse(b"garbage").is_err());
        let bad = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(matches!(parse(bad.as_bytes()), Err(CertError::Der(_))));
    }
}
