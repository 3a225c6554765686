//! C.5 — propagation policies (seed: "Policies + failover"): each placement class's services
//! placed at its sites by Karmada, one PropagationPolicy per class and namespace.

use futures::future::BoxFuture;

use super::verify::{ReadError, Verdict, get, id, ready_endpoints};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::{cilium, karmada};
use crate::desired::{Out, members, namespaces};
use crate::topology::model::Service;

pub struct C5;

impl Step for C5 {
    fn id(&self) -> &'static str {
        "C.5"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["C.3"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        for c in &t.placement {
            for ns in namespaces(t.services.iter().filter(|s| s.class == c.name)) {
                let services: Vec<&Service> =
                    t.services.iter().filter(|s| s.class == c.name && s.namespace == ns).collect();
                let names: Vec<&str> = services.iter().map(|s| s.name.as_str()).collect();
                let summary =
                    format!("{} placement of {}", format!("{:?}", c.strategy).to_lowercase(), names.join(", "));
                let file = Some(format!("apps/karmada/propagation-policies/{}.yaml", c.name));
                out.kube(None, karmada::propagation_policy(t, c, &ns, &services), summary, file.clone());
                if c.global {
                    let summary = format!("Services {} in every member", names.join(", "));
                    out.kube(None, karmada::global_services_policy(t, c, &ns, &services), summary, file.clone());
                    let summary = "service.cilium.io/global: \"true\" on them".to_string();
                    out.kube(None, karmada::global_services_override(t, c, &ns, &services), summary, file);
                }
            }
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(async move {
            let mut out = propagated(cx).await;
            out.extend(global_reach(cx).await);
            out
        })
    }
}

/// A propagated workload (the service's Deployment or StatefulSet) is present in every member
/// its class places it at.
async fn propagated(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let t = cx.t;
    let mut out = Vec::new();
    for svc in &t.services {
        let Some(class) = t.placement.iter().find(|c| c.name == svc.class) else { continue };
        for m in members(t).iter().filter(|m| class.sites.is_empty() || class.sites.contains(&m.name)) {
            let target = Target::cluster(&m.name);
            let kind = svc.workload.kind();
            let oid = id("apps/v1", kind, &svc.name, Some(&svc.namespace));
            let (verdict, evidence) = match get(cx.targets, &target, oid).await {
                Err(e) => (Verdict::Fail, format!("{target}: {e}")),
                Ok(None) => (Verdict::Fail, format!("{target}: {kind} {}/{} not propagated", svc.namespace, svc.name)),
                Ok(Some(_)) => (Verdict::Pass, format!("{target}: {kind} {}/{} present", svc.namespace, svc.name)),
            };
            out.push(CheckResult { step: cx.key.into(), check: format!("{} propagated", svc.name), verdict, evidence });
        }
    }
    out
}

/// The services of a global class reach every member: each member has the Service, annotated
/// global, and a member without the workloads has the other clusters' backends. Cilium merges
/// remote backends in its agents; the Kubernetes API shows them only as the EndpointSlices
/// Cluster Mesh synchronises (managed by `endpointslice-mesh-controller.cilium.io`, labelled
/// with their source cluster), which is what this reads.
async fn global_reach(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let t = cx.t;
    let mut out = Vec::new();
    for c in t.placement.iter().filter(|c| c.global) {
        for svc in t.services.iter().filter(|s| s.class == c.name) {
            for m in members(t) {
                let runs_here = c.sites.is_empty() || c.sites.contains(&m.name);
                let target = Target::cluster(&m.name);
                let (verdict, evidence) = match reach(cx, &target, &svc.namespace, &svc.name, runs_here).await {
                    Ok(e) => (Verdict::Pass, format!("{target}: {e}")),
                    Err(e) => (Verdict::Fail, format!("{target}: {e}")),
                };
                let check = format!("{} reachable (global)", svc.name);
                out.push(CheckResult { step: cx.key.into(), check, verdict, evidence });
            }
        }
    }
    out
}

/// What makes `ns/name` reachable in one member, or why it is not.
async fn reach(cx: &VerifyCx<'_>, target: &Target, ns: &str, name: &str, runs_here: bool) -> Result<String, ReadError> {
    let live = get(cx.targets, target, id("v1", "Service", name, Some(ns)))
        .await?
        .ok_or_else(|| ReadError(format!("Service {ns}/{name} does not exist")))?;
    if live["metadata"]["annotations"][cilium::GLOBAL_ANNOTATION] != "true" {
        return Err(ReadError(format!("Service {ns}/{name} is not annotated service.cilium.io/global: \"true\"")));
    }
    if runs_here {
        return Ok(format!("Service {ns}/{name} global, its backends run here"));
    }
    let mut remote: Vec<(String, usize)> = Vec::new();
    for (manager, source, n) in ready_endpoints(cx.targets, target, ns, name).await? {
        if manager == MESH_SLICES && n > 0 {
            remote.push((source, n));
        }
    }
    if remote.is_empty() {
        return Err(ReadError(format!(
            "Service {ns}/{name} is global but has no backend from another cluster (is Cluster Mesh connected, with EndpointSlice synchronisation?)"
        )));
    }
    let from: Vec<String> = remote.iter().map(|(c, n)| format!("{n} from {c}")).collect();
    Ok(format!("Service {ns}/{name} global, backends: {}", from.join(", ")))
}

/// The manager of the EndpointSlices Cilium's Cluster Mesh writes for remote backends.
const MESH_SLICES: &str = "endpointslice-mesh-controller.cilium.io";
