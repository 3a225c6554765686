//! The Cluster Mesh CA's rotation, in certificates (pure: `operation::rotate_credentials` reads
//! and writes the Secrets).
//!
//! Which keys decide what (cilium/cilium and cilium/certgen):
//! - cilium-certgen signs the clustermesh-apiserver's certificates with `cilium-ca`: it reads
//!   `ca.crt` as a chain whose *first* certificate signs (with `ca.key`) and whose *last* is the
//!   root it writes as each issued Secret's `ca.crt` (cilium/certgen
//!   `internal/generate/generate.go`: `CA.loadKeyPair`, `CA.Leaf`, `CA.Root`,
//!   `Cert.StoreAsSecret`). Two unrelated CAs in `cilium-ca`'s `ca.crt` would therefore be
//!   misread (the new one taken as an intermediate of the old): the old and new CA are never
//!   put there together.
//! - The issued Secrets are `clustermesh-apiserver-{server,admin,remote,local}-cert`
//!   (cilium/cilium `install/kubernetes/cilium/templates/clustermesh-apiserver/tls-cronjob/_job-spec.tpl`,
//!   `CILIUM_CERTGEN_CONFIG`), and their `ca.crt` is what peers trust: the agent projects
//!   `clustermesh-apiserver-remote-cert`'s `ca.crt` as `common-etcd-client-ca.crt`, the
//!   `trusted-ca-file` of every remote cluster's etcd configuration (cilium/cilium
//!   `install/kubernetes/cilium/templates/cilium-agent/daemonset.yaml`, volume
//!   `clustermesh-secrets`; `templates/clustermesh-config/_helpers.tpl`,
//!   `clustermesh-config-generate-etcd-cfg`). A trust file with several certificates trusts each
//!   (Go's `x509.CertPool.AppendCertsFromPEM` reads every block), so the overlap is made there:
//!   the new CA added beside the old in those `ca.crt`, the certificates issued again by the
//!   new CA, the old CA removed in a later run.

use crate::providers::secrets::SecretError;

/// The Secrets cilium-certgen issues from `cilium-ca` in each cluster (`_job-spec.tpl`).
pub const ISSUED_SECRETS: [&str; 4] = [
    "clustermesh-apiserver-server-cert",
    "clustermesh-apiserver-admin-cert",
    "clustermesh-apiserver-remote-cert",
    "clustermesh-apiserver-local-cert",
];

/// The certificates of a PEM text, each as its own PEM block (other blocks are left out).
pub fn certificates(pem: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find("-----BEGIN CERTIFICATE-----") {
        let tail = &rest[start..];
        let Some(end) = tail.find("-----END CERTIFICATE-----") else { break };
        let end = end + "-----END CERTIFICATE-----".len();
        out.push(format!("{}\n", &tail[..end]));
        rest = &tail[end..];
    }
    out
}

/// A certificate's base64 body without line breaks, to compare certificates whatever their
/// line lengths.
fn body(cert: &str) -> String {
    cert.lines().filter(|l| !l.starts_with("-----")).collect::<String>().split_whitespace().collect()
}

/// Whether `bundle` holds `cert` (its first certificate).
pub fn holds(bundle: &str, cert: &str) -> bool {
    let Some(want) = certificates(cert).first().map(|c| body(c)) else { return false };
    certificates(bundle).iter().any(|c| body(c) == want)
}

/// `bundle` with `cert` added after its certificates (unchanged when it holds it already).
pub fn with(bundle: &str, cert: &str) -> String {
    let mut out: Vec<String> = certificates(bundle);
    if !holds(bundle, cert) {
        out.extend(certificates(cert).into_iter().take(1));
    }
    out.concat()
}

/// A certificate issued again by another CA: the same subject name, SANs, extended key usages
/// and validity length as `issued` (as cilium-certgen made it), a new key, signed by the CA of
/// `ca_cert`/`ca_key` (PEM; the CA fabric generated, `providers::secrets::ca`). Returns the
/// certificate and its key (PEM).
pub fn reissue(issued: &str, ca_cert: &str, ca_key: &str) -> Result<(String, String), SecretError> {
    use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, KeyPair, KeyUsagePurpose};
    use x509_parser::extensions::GeneralName;
    let (_, block) = x509_parser::pem::parse_x509_pem(issued.as_bytes()).map_err(|e| sign(&e))?;
    let old = block.parse_x509().map_err(|e| sign(&e))?;
    let mut params = named_as(&old);
    let mut sans = Vec::new();
    for name in old.subject_alternative_name().map_err(|e| sign(&e))?.iter().flat_map(|s| &s.value.general_names) {
        match name {
            GeneralName::DNSName(d) => sans.push(d.to_string()),
            GeneralName::IPAddress(b) if b.len() == 4 => {
                sans.push(std::net::IpAddr::from(<[u8; 4]>::try_from(*b).unwrap_or_default()).to_string())
            }
            GeneralName::IPAddress(b) if b.len() == 16 => {
                sans.push(std::net::IpAddr::from(<[u8; 16]>::try_from(*b).unwrap_or_default()).to_string())
            }
            _ => {}
        }
    }
    params.subject_alt_names = CertificateParams::new(sans).map_err(|e| sign(&e))?.subject_alt_names;
    if let Ok(Some(eku)) = old.extended_key_usage() {
        if eku.value.server_auth {
            params.extended_key_usages.push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if eku.value.client_auth {
            params.extended_key_usages.push(ExtendedKeyUsagePurpose::ClientAuth);
        }
    }
    // certgen's usages: "signing", "key encipherment" besides the extended ones.
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    // Old and new CA have the same name (certgen's `--ca-common-name=Cilium CA`): the authority
    // key identifier says which of the bundle's CAs signed (without it OpenSSL tries only the
    // first CA of that name).
    params.use_authority_key_identifier_extension = true;
    let length = (old.validity().not_after.timestamp() - old.validity().not_before.timestamp()).max(3600) as u64;
    let now = std::time::SystemTime::now();
    params.not_before = now.into();
    params.not_after = (now + std::time::Duration::from_secs(length)).into();
    let issuer = issuer(ca_cert, ca_key)?;
    let key = KeyPair::generate().map_err(|e| SecretError::KeyGeneration(e.to_string()))?;
    let cert = params.signed_by(&key, &issuer).map_err(|e| sign(&e))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Why a certificate could not be read or signed (never its content).
fn sign(e: &dyn std::fmt::Display) -> SecretError {
    SecretError::Signing(e.to_string())
}

/// Parameters with the subject's common name of `cert` (the only attribute of the names
/// cilium-certgen and `providers::secrets::ca` give).
fn named_as(cert: &x509_parser::certificate::X509Certificate<'_>) -> rcgen::CertificateParams {
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    if let Some(cn) = cert.subject().iter_common_name().next().and_then(|c| c.as_str().ok()) {
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    }
    params
}

/// The issuer of a CA fabric generated: its subject's common name (the only attribute
/// `providers::secrets::ca` sets) and its key.
fn issuer(ca_cert: &str, ca_key: &str) -> Result<rcgen::Issuer<'static, rcgen::KeyPair>, SecretError> {
    use rcgen::{BasicConstraints, IsCa, KeyPair};
    let (_, block) = x509_parser::pem::parse_x509_pem(ca_cert.as_bytes()).map_err(|e| sign(&e))?;
    let ca = block.parse_x509().map_err(|e| sign(&e))?;
    let mut params = named_as(&ca);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // A key that is not the CA's own would sign certificates nobody can verify.
    let key = KeyPair::from_pem(ca_key).map_err(|_| SecretError::Signing("the CA's key is not a PEM key".into()))?;
    if key.public_key_raw() != ca.public_key().subject_public_key.data.as_ref() {
        return Err(SecretError::Signing("the CA's key does not belong to its certificate".into()));
    }
    Ok(rcgen::Issuer::new(params, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(ca: &(String, String), sans: &[&str], server: bool) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, "clustermesh-apiserver.cilium.io");
        p.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        p.signed_by(&key, &issuer(&ca.0, &ca.1).unwrap()).unwrap().pem()
    }

    /// `openssl verify -CAfile` of `cert` against the trust file `cas`.
    fn openssl_verifies(cas: &str, cert: &str) -> bool {
        let dir = std::env::temp_dir().join(format!(
            "fabric-ca-bundle-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cas.pem"), cas).unwrap();
        std::fs::write(dir.join("cert.pem"), cert).unwrap();
        let ok = std::process::Command::new("openssl")
            .args(["verify", "-CAfile"])
            .arg(dir.join("cas.pem"))
            .arg(dir.join("cert.pem"))
            .output()
            .expect("openssl runs")
            .status
            .success();
        let _ = std::fs::remove_dir_all(&dir);
        ok
    }

    #[test]
    fn a_bundle_holds_each_certificate_once() {
        let (old, new) =
            (crate::providers::secrets::ca("Cilium CA").unwrap(), crate::providers::secrets::ca("Cilium CA").unwrap());
        let both = with(&old.0, &new.0);
        assert_eq!(certificates(&both).len(), 2);
        assert!(holds(&both, &old.0) && holds(&both, &new.0));
        assert_eq!(with(&both, &new.0), both, "added once");
        assert!(!holds(&old.0, &new.0));
        // Line lengths do not matter, a private key block is no certificate.
        let rewrapped = old.0.replace('\n', "\r\n");
        assert!(holds(&both, &rewrapped));
        assert!(certificates(&old.1).is_empty());
    }

    #[test]
    fn an_issued_certificate_is_issued_again_by_the_new_ca_with_its_names() {
        let (old, new) =
            (crate::providers::secrets::ca("Cilium CA").unwrap(), crate::providers::secrets::ca("Cilium CA").unwrap());
        let issued = leaf(&old, &["clustermesh-apiserver.cilium.io", "*.mesh.cilium.io", "127.0.0.1"], true);
        let (cert, key) = reissue(&issued, &new.0, &new.1).unwrap();
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        let (_, b) = x509_parser::pem::parse_x509_pem(cert.as_bytes()).unwrap();
        let c = b.parse_x509().unwrap();
        let (_, nb) = x509_parser::pem::parse_x509_pem(new.0.as_bytes()).unwrap();
        let new_ca = nb.parse_x509().unwrap();
        assert_eq!(c.issuer(), new_ca.subject());
        // OpenSSL's own verification: the new CA (alone or in a bundle with the old) accepts
        // it, the old alone does not.
        assert!(openssl_verifies(&new.0, &cert), "signed by the new CA");
        assert!(openssl_verifies(&with(&old.0, &new.0), &cert), "trusted through the bundle");
        assert!(!openssl_verifies(&old.0, &cert), "not by the old");
        assert!(openssl_verifies(&with(&old.0, &new.0), &issued), "the old one, through the bundle");
        let names = crate::providers::cert::parse(cert.as_bytes()).unwrap();
        assert_eq!(names.dns, ["clustermesh-apiserver.cilium.io", "*.mesh.cilium.io"]);
        assert_eq!(names.ips, ["127.0.0.1".parse::<std::net::IpAddr>().unwrap()]);
        assert!(c.extended_key_usage().unwrap().unwrap().value.server_auth);
        assert_eq!(c.subject().iter_common_name().next().unwrap().as_str().unwrap(), "clustermesh-apiserver.cilium.io");
        // Another CA's key is refused, never used to sign.
        assert!(reissue(&issued, &new.0, &old.1).is_err());
    }
}
