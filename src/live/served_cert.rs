//! Certificates fabric reads from Secrets for their expiry (and names): the one Karmada's API
//! server serves, as plan reads it (C.1), from the Secret the Karmada chart wrote at install
//! (`desired::karmada::KARMADA_CERT_SECRET`), and the Cluster Mesh CA fabric made (B.2,
//! [`MESH_CA_SECRET`]). Only the public certificate is kept: a Secret is read whole, so its
//! private keys are fetched with it but dropped at once, never kept, shown, logged or written.

use crate::addr::Target;
use crate::desired::karmada::{KARMADA_CERT_KEY, KARMADA_CERT_SECRET, KARMADA_NAMESPACE};
use crate::providers::cert::{self, CertNames};
use crate::providers::kube::KubeAccess;

/// The namespace of Cilium's Cluster Mesh CA.
pub const MESH_CA_NAMESPACE: &str = "kube-system";
/// The Secret of Cilium's Cluster Mesh CA. cilium-certgen loads it (`--ca-secret-name=cilium-ca`:
/// cilium/cilium `install/kubernetes/cilium/templates/clustermesh-apiserver/tls-cronjob/_job-spec.tpl`)
/// and signs the clustermesh-apiserver's certificates with it.
pub const MESH_CA_SECRET: &str = "cilium-ca";
/// Its certificate: certgen reads `ca.crt` and `ca.key` (cilium/certgen
/// `internal/generate/generate.go`, `caCrtField`, `CA.LoadFromSecret`).
pub const MESH_CA_KEY: &str = "ca.crt";

/// What was read of a certificate kept in a Secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServedCert {
    /// The certificate's names and expiry.
    Read(CertNames),
    /// No such Secret: Karmada is not installed by its chart yet (whose install issues it), or
    /// B.2 has not made the mesh CA yet.
    Absent,
    /// Why it could not be read: not checked.
    Unread(String),
}

/// Reads Karmada's served certificate at `target` (the cluster that hosts Karmada).
pub async fn read_karmada_cert(target: &Target, access: Option<&KubeAccess>) -> ServedCert {
    read_secret_cert(target, access, KARMADA_NAMESPACE, KARMADA_CERT_SECRET, KARMADA_CERT_KEY).await
}

/// Reads the Cluster Mesh CA at `target` (the first site's cluster, where B.2 generates it).
pub async fn read_mesh_ca(target: &Target, access: Option<&KubeAccess>) -> ServedCert {
    read_secret_cert(target, access, MESH_CA_NAMESPACE, MESH_CA_SECRET, MESH_CA_KEY).await
}

/// The first certificate of key `key` of Secret `ns/name` at `target`.
pub async fn read_secret_cert(
    target: &Target,
    access: Option<&KubeAccess>,
    ns: &str,
    name: &str,
    key: &str,
) -> ServedCert {
    let Some(access) = access else {
        return ServedCert::Unread(format!("no kubeconfig is configured for {target}"));
    };
    let client = match crate::providers::kube::client_once(target, access).await {
        Ok(c) => c,
        Err(e) => return ServedCert::Unread(e.to_string()),
    };
    match crate::providers::kube::secret_data(&client, ns, name).await {
        Ok(Some(data)) => cert_of(&data, ns, name, key),
        Ok(None) => ServedCert::Absent,
        Err(e) => ServedCert::Unread(e.to_string()),
    }
}

/// The certificate of key `key` of a Secret's `data` (read as the API returns it); everything
/// else of the data is dropped with it by the caller.
pub fn cert_of(data: &serde_json::Map<String, serde_json::Value>, ns: &str, name: &str, key: &str) -> ServedCert {
    let at = format!("Secret {ns}/{name}, key {key}");
    let Some(b64) = data.get(key).and_then(|v| v.as_str()) else {
        return ServedCert::Unread(format!("{at} is missing"));
    };
    let pem = match decoded(b64) {
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
