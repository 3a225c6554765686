//! B.2 — Cilium Cluster Mesh (seed: "Cilium Cluster Mesh"): one CA for every cluster (the first
//! site's, kept when Cilium made one, generated otherwise, copied into the others at apply time)
//! and each cluster's clustermesh-apiserver with its peers.

use futures::future::BoxFuture;
use serde_json::Value;

use super::verify::{Verdict, get, id, rolled_out, secret};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::Out;
use crate::desired::objects as o;
use crate::desired::cilium;
use crate::live::served_cert::{MESH_CA_KEY, MESH_CA_NAMESPACE, MESH_CA_SECRET, ServedCert, cert_of};
use crate::topology::model::Site;

pub struct B2;

impl Step for B2 {
    fn id(&self) -> &'static str {
        "B.2"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["A.1", "A.2", "B.1"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        let ca_site = t.sites.first().map(|s| s.name.clone()).unwrap_or_default();
        for s in &t.sites {
            let mut secret = o::secret_placeholder(t, "cilium-ca", "kube-system", "Opaque");
            let summary = if s.name == ca_site {
                secret["metadata"]["annotations"] = serde_json::json!({ o::GENERATE: "ca" });
                "Cluster Mesh CA shared by every cluster (kept if present, else generated)".to_string()
            } else {
                secret["metadata"]["annotations"] = serde_json::json!({
                    o::COPY_FROM: Target::cluster(&ca_site).at("kube-system/cilium-ca").to_string(),
                    o::COPY_KEYS: "ca.crt=ca.crt,ca.key=ca.key",
                });
                format!("Cluster Mesh CA, copied from {ca_site}")
            };
            out.kube(Some(&s.name), secret, summary, None);
            let cfg = o::helm_chart_config(t, "cilium", &cilium::clustermesh_values(t, s));
            let peers: Vec<&str> =
                t.sites.iter().filter(|p| p.name != s.name).map(|p| p.cluster.name.as_str()).collect();
            let summary =
                format!("clustermesh-apiserver on NodePort {}, peers: {}", t.mesh.clustermesh_port.0, peers.join(", "));
            out.kube(Some(&s.name), cfg, summary, Some(format!("apps/cilium/clustermesh-{}.yaml", s.name)));
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(clustermesh(cx))
    }
}

/// In every cluster the clustermesh-apiserver runs and is exposed on the topology's port, the
/// cluster knows every other cluster (a key per peer in `cilium-clustermesh`), and the CA is the
/// same everywhere. Secret contents are compared in memory and never shown.
async fn clustermesh(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let (t, key) = (cx.t, cx.key);
    let mut out = Vec::new();
    let mut cas: Vec<(Target, Option<serde_json::Map<String, Value>>)> = Vec::new();
    for s in &t.sites {
        let target = Target::cluster(&s.name);
        let dep = id("apps/v1", "Deployment", "clustermesh-apiserver", Some("kube-system"));
        out.push(rolled_out(cx.targets, key, &target, "clustermesh-apiserver running", dep).await);
        out.push(exposed(cx, &target).await);
        out.push(knows_peers(cx, s, &target).await);
        cas.push((target.clone(), secret(cx.targets, &target, "kube-system", "cilium-ca").await.ok().flatten()));
    }
    let first = cas.first().and_then(|(_, d)| d.as_ref()).and_then(|d| d.get("ca.crt").cloned());
    let (verdict, evidence) = match cas.iter().find(|(_, d)| d.as_ref().and_then(|d| d.get("ca.crt")) != first.as_ref())
    {
        _ if first.is_none() => (Verdict::Fail, "no cilium-ca in the first cluster".to_string()),
        Some((t, _)) => (Verdict::Fail, format!("{t}: cilium-ca differs from the first cluster's (or is missing)")),
        None => (Verdict::Pass, format!("the same cilium-ca in {} clusters", cas.len())),
    };
    out.push(CheckResult { step: key.into(), check: "one CA for the mesh".into(), verdict, evidence });
    // The CA's expiry, from the first cluster's Secret (where fabric generates it).
    let served = match cas.first() {
        Some((_, Some(data))) => cert_of(data, MESH_CA_NAMESPACE, MESH_CA_SECRET, MESH_CA_KEY),
        _ => ServedCert::Absent,
    };
    let (verdict, evidence) = mesh_ca_expiry(&served, now());
    out.push(CheckResult { step: key.into(), check: "the mesh CA's expiry".into(), verdict, evidence });
    out
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The mesh CA's expiry as verify reports it (at time `now`): a pass with its date, a warning
/// under [`crate::providers::cert::EXPIRY_WARNING_DAYS`] days, a failure once expired, absent or
/// unreadable. fabric generates it for 3 years (`providers::secrets::ca`, as cilium-certgen's
/// CA); docs/runbook.md, "Rotating credentials", says how to renew it.
pub fn mesh_ca_expiry(served: &ServedCert, now: i64) -> (Verdict, String) {
    let at = format!("Secret {MESH_CA_NAMESPACE}/{MESH_CA_SECRET} ({MESH_CA_KEY})");
    let runbook = "docs/runbook.md, \"Rotating credentials\" (fabric rotate credentials)";
    crate::steps::verify::cert_expiry(&at, runbook, "B.2 generates it", served, now)
}

/// The clustermesh-apiserver Service on the topology's NodePort.
async fn exposed(cx: &VerifyCx<'_>, target: &Target) -> CheckResult {
    let port = cx.t.mesh.clustermesh_port.0;
    let svc = id("v1", "Service", "clustermesh-apiserver", Some("kube-system"));
    let (verdict, evidence) = match get(cx.targets, target, svc).await {
        Err(e) => (Verdict::Fail, format!("{target}: {e}")),
        Ok(None) => (Verdict::Fail, format!("{target}: Service kube-system/clustermesh-apiserver does not exist")),
        Ok(Some(svc)) => {
            let ports: Vec<i64> = svc["spec"]["ports"]
                .as_array()
                .map(|ps| ps.iter().filter_map(|p| p["nodePort"].as_i64()).collect())
                .unwrap_or_default();
            if ports.contains(&i64::from(port)) {
                (Verdict::Pass, format!("{target}: clustermesh-apiserver on NodePort {port}"))
            } else {
                (Verdict::Fail, format!("{target}: clustermesh-apiserver NodePorts {ports:?}, expected {port}"))
            }
        }
    };
    CheckResult { step: cx.key.into(), check: "clustermesh-apiserver exposed".into(), verdict, evidence }
}

/// Which clusters this one connects to: the keys of `cilium-clustermesh` (names only).
async fn knows_peers(cx: &VerifyCx<'_>, s: &Site, target: &Target) -> CheckResult {
    let peers: Vec<&str> = cx.t.sites.iter().filter(|p| p.name != s.name).map(|p| p.cluster.name.as_str()).collect();
    let (verdict, evidence) = match secret(cx.targets, target, "kube-system", "cilium-clustermesh").await {
        Err(e) => (Verdict::Fail, format!("{target}: {e}")),
        Ok(None) => (Verdict::Fail, format!("{target}: Secret kube-system/cilium-clustermesh does not exist")),
        Ok(Some(data)) => {
            let missing: Vec<&str> = peers.iter().copied().filter(|p| !data.contains_key(*p)).collect();
            if missing.is_empty() {
                (Verdict::Pass, format!("{target}: connects to {}", peers.join(", ")))
            } else {
                (Verdict::Fail, format!("{target}: no connection configured to {}", missing.join(", ")))
            }
        }
    };
    CheckResult { step: cx.key.into(), check: "knows every other cluster".into(), verdict, evidence }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::cert::CertNames;

    fn read(not_after: i64) -> ServedCert {
        ServedCert::Read(CertNames { dns: vec![], ips: vec![], not_after })
    }

    #[test]
    fn the_mesh_ca_passes_warns_under_thirty_days_and_fails_once_expired() {
        let (day, now) = (86_400, 1_800_000_000);
        let (v, e) = mesh_ca_expiry(&read(now + 30 * day), now);
        assert_eq!(v, Verdict::Pass, "{e}");
        assert!(e.contains("kube-system/cilium-ca") && e.contains("(30 days)"), "{e}");
        let (v, e) = mesh_ca_expiry(&read(now + 30 * day - 1), now);
        assert_eq!(v, Verdict::Warn, "{e}");
        assert!(e.contains("expires in 29 day(s)") && e.contains("fabric rotate credentials"), "{e}");
        let (v, e) = mesh_ca_expiry(&read(now - 1), now);
        assert_eq!(v, Verdict::Fail, "{e}");
        assert!(e.contains("expired"), "{e}");
        assert_eq!(mesh_ca_expiry(&ServedCert::Absent, now).0, Verdict::Fail);
        assert_eq!(mesh_ca_expiry(&ServedCert::Unread("x".into()), now).0, Verdict::Fail);
    }

    /// The certificate is read from the Secret's data as the API returns it (base64 PEM); a
    /// CA made with rcgen near its end warns.
    #[test]
    fn a_near_expiry_ca_in_the_secret_warns() {
        use base64::Engine as _;
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let now = std::time::SystemTime::now();
        params.not_after = (now + std::time::Duration::from_secs(10 * 86_400 + 60)).into();
        let pem = params.self_signed(&key).unwrap().pem();
        let mut data = serde_json::Map::new();
        data.insert("ca.crt".into(), base64::engine::general_purpose::STANDARD.encode(pem).into());
        let served = cert_of(&data, MESH_CA_NAMESPACE, MESH_CA_SECRET, MESH_CA_KEY);
        let (v, e) = mesh_ca_expiry(&served, super::now());
        assert_eq!(v, Verdict::Warn, "{e}");
        assert!(e.contains("expires in 10 day(s)"), "{e}");
    }
}
