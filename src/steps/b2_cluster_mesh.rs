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
    out
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
