//! B.3 — test global services (seed: "Testar Global Services"): a backend and a Service
//! annotated `service.cilium.io/global: "true"` in every cluster.

use futures::future::BoxFuture;

use super::verify::{ReadError, Verdict, get, id, ready_endpoints};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::Out;
use crate::desired::cilium;

pub struct B3;

impl Step for B3 {
    fn id(&self) -> &'static str {
        "B.3"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["B.2"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        for s in &t.sites {
            let (deploy, svc) = cilium::global_test_service(t);
            let file = Some("apps/tests/global-service.yaml".to_string());
            out.kube(Some(&s.name), deploy, "test backend", file.clone());
            out.kube(Some(&s.name), svc, "service.cilium.io/global: \"true\"", file);
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(global_service(cx))
    }
}

/// The test global service has ready backends in every cluster (its EndpointSlices), so Cilium
/// can balance it across the mesh.
async fn global_service(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let (_, svc) = cilium::global_test_service(cx.t);
    let (name, ns) = (
        svc["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        svc["metadata"]["namespace"].as_str().unwrap_or("default").to_string(),
    );
    let mut out = Vec::new();
    for s in &cx.t.sites {
        let target = Target::cluster(&s.name);
        let (verdict, evidence) = match ready_backends(cx, &target, &ns, &name).await {
            Ok(0) => (Verdict::Fail, format!("{target}: {ns}/{name} has no ready backend here")),
            Ok(n) => (Verdict::Pass, format!("{target}: {ns}/{name} has {n} ready backend(s)")),
            Err(e) => (Verdict::Fail, format!("{target}: {e}")),
        };
        out.push(CheckResult { step: cx.key.into(), check: "global service has backends".into(), verdict, evidence });
    }
    out
}

/// The ready endpoints of the global Service `ns/name` in one cluster.
async fn ready_backends(cx: &VerifyCx<'_>, target: &Target, ns: &str, name: &str) -> Result<usize, ReadError> {
    let live = get(cx.targets, target, id("v1", "Service", name, Some(ns)))
        .await?
        .ok_or_else(|| ReadError(format!("Service {ns}/{name} does not exist")))?;
    if live["metadata"]["annotations"][cilium::GLOBAL_ANNOTATION] != "true" {
        return Err(ReadError(format!("Service {ns}/{name} is not annotated service.cilium.io/global: \"true\"")));
    }
    Ok(ready_endpoints(cx.targets, target, ns, name).await?.iter().map(|(_, _, n)| n).sum())
}
