//! C.5 — propagation policies (seed: "Policies + failover"): each placement class's services
//! placed at its sites by Karmada, one PropagationPolicy per class and namespace.

use futures::future::BoxFuture;

use super::verify::{Verdict, get, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
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
                out.kube(None, o::propagation_policy(t, c, &ns, &services), summary, file);
            }
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(propagated(cx))
    }
}

/// A propagated Deployment is present in every member its class places it at.
async fn propagated(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let t = cx.t;
    let mut out = Vec::new();
    for svc in &t.services {
        let Some(class) = t.placement.iter().find(|c| c.name == svc.class) else { continue };
        for m in members(t).iter().filter(|m| class.sites.is_empty() || class.sites.contains(&m.name)) {
            let target = Target::cluster(&m.name);
            let oid = id("apps/v1", "Deployment", &svc.name, Some(&svc.namespace));
            let (verdict, evidence) = match get(cx.targets, &target, oid).await {
                Err(e) => (Verdict::Fail, format!("{target}: {e}")),
                Ok(None) => {
                    (Verdict::Fail, format!("{target}: Deployment {}/{} not propagated", svc.namespace, svc.name))
                }
                Ok(Some(_)) => (Verdict::Pass, format!("{target}: Deployment {}/{} present", svc.namespace, svc.name)),
            };
            out.push(CheckResult { step: cx.key.into(), check: format!("{} propagated", svc.name), verdict, evidence });
        }
    }
    out
}
