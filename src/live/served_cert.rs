//! The certificate Karmada's API server serves, as plan reads it (C.1): from the Secret the
//! Karmada chart wrote at install (`desired::karmada::KARMADA_CERT_SECRET`), only its public
//! certificate. The Secret's private keys are fetched with it (a Secret is read whole) but
//! dropped at once: never kept, shown, logged or written.

use crate::addr::Target;
use crate::desired::karmada::{KARMADA_CERT_KEY, KARMADA_CERT_SECRET, KARMADA_NAMESPACE};
use crate::providers::cert::{self, CertNames};
use crate::providers::kube::KubeAccess;

/// What was read of the served certificate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServedCert {
    /// The certificate's names and expiry.
    Read(CertNames),
    /// No such Secret: Karmada is not installed by its chart yet, whose install issues it.
    Absent,
    /// Why it could not be read: not checked.
    Unread(String),
}

/// Reads Karmada's served certificate at `target` (the cluster that hosts Karmada).
pub async fn read_karmada_cert(target: &Target, access: Option<&KubeAccess>) -> ServedCert {
    let Some(access) = access else {
        return ServedCert::Unread(format!("no kubeconfig is configured for {target}"));
    };
    let client = match crate::providers::kube::client_once(target, access).await {
        Ok(c) => c,
        Err(e) => return ServedCert::Unread(e.to_string()),
    };
    let data = match crate::providers::kube::secret_data(&client, KARMADA_NAMESPACE, KARMADA_CERT_SECRET).await {
        Ok(Some(d)) => d,
        Ok(None) => return ServedCert::Absent,
        Err(e) => return ServedCert::Unread(e.to_string()),
    };
    let crt = data.get(KARMADA_CERT_KEY).and_then(|v| v.as_str()).map(str::to_string);
    drop(data);
    let at = format!("Secret {KARMADA_NAMESPACE}/{KARMADA_CERT_SECRET}, key {KARMADA_CERT_KEY}");
    let Some(b64) = crt else { return ServedCert::Unread(format!("{at} is missing")) };
    let pem = match decoded(&b64) {
        Ok(pem) => pem,
        Err(e) => return ServedCert::Unread(format!("{at}: not base64: {e}")),
    };
    match cert::parse(&pem) {
        Ok(names) => ServedCert::Read(names),
        Err(why) => ServedCert::Unread(format!("{at}: {why}")),
    }
}

/// A Secret value's bytes (the API's base64; the chart's Job writes the PEM base64-encoded).
fn decoded(b64: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::Engine as _;
    let compact: String = b64.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD.decode(compact)
}
