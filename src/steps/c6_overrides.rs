//! C.6 — override policies (seed: "Policies + failover"): in each member, the GPU services run
//! on that site's GPU model (a node selector Karmada adds per member).

use futures::future::BoxFuture;

use super::verify::{Verdict, get, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::{Out, gpu_model, members};
use crate::topology::model::Service;

pub struct C6;

impl Step for C6 {
    fn id(&self) -> &'static str {
        "C.6"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["C.3"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        for s in members(t) {
            let Some(model) = gpu_model(s) else { continue };
            let file = Some(format!("apps/karmada/override-policies/{}.yaml", s.name));
            for svc in t.services.iter().filter(|x| x.uses_gpu()) {
                let policy = o::override_policy(t, s, svc, model);
                out.kube(None, policy, summary(svc, model, &s.name), file.clone());
            }
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(gpu_selectors(cx))
    }
}

/// What a service's policy does at a member, for the plan.
fn summary(svc: &Service, model: &str, site: &str) -> String {
    let mut s = format!("{} on gpu.model={model} at {site}", svc.name);
    if let Some(q) = &svc.queue {
        s.push_str(&format!(", KAI queue {q}"));
    }
    match (svc.gpu_fraction, svc.gpu_memory_mib) {
        (Some(f), _) => s.push_str(&format!(", {f} of a GPU")),
        (None, Some(m)) => s.push_str(&format!(", {m} MiB of a GPU")),
        (None, None) => {}
    }
    s
}

/// In each member, the GPU services Karmada propagated carry that member's GPU model as their
/// node selector (what the override policies add).
async fn gpu_selectors(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let t = cx.t;
    let label = o::GPU_MODEL_LABEL;
    let mut out = Vec::new();
    for m in members(t) {
        let Some(model) = gpu_model(m) else { continue };
        let target = Target::cluster(&m.name);
        for svc in t.services.iter().filter(|s| s.uses_gpu()) {
            let placed = t
                .placement
                .iter()
                .find(|c| c.name == svc.class)
                .is_some_and(|c| c.sites.is_empty() || c.sites.contains(&m.name));
            if !placed {
                continue;
            }
            let oid = id("apps/v1", "Deployment", &svc.name, Some(&svc.namespace));
            let (verdict, evidence) = match get(cx.targets, &target, oid).await {
                Err(e) => (Verdict::Fail, format!("{target}: {e}")),
                Ok(None) => {
                    (Verdict::Fail, format!("{target}: Deployment {}/{} not propagated", svc.namespace, svc.name))
                }
                Ok(Some(d)) => match d["spec"]["template"]["spec"]["nodeSelector"][label].as_str() {
                    Some(v) if v == model => (Verdict::Pass, format!("{target}: {} runs on {label}={model}", svc.name)),
                    other => (
                        Verdict::Fail,
                        format!("{target}: {} has {label}={}, expected {model}", svc.name, other.unwrap_or("(none)")),
                    ),
                },
            };
            let check = format!("{} on the site's GPUs", svc.name);
            out.push(CheckResult { step: cx.key.into(), check, verdict, evidence });
        }
    }
    out
}
