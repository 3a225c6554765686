//! D.3 — the dispatching queue (seed: "MultiKueue cross-site"): the manager's ClusterQueue with
//! the MultiKueue admission check, and its LocalQueues.

use futures::future::BoxFuture;

use super::verify::{conditions, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::{Out, flavor};

pub struct D3;

impl Step for D3 {
    fn id(&self) -> &'static str {
        "D.3"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["C.1", "D.1"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        let Some(mk) = &t.multikueue else { return };
        let Some(s) = t.sites.iter().find(|s| s.name == mk.manager) else { return };
        let Some(q) = s.queues.iter().find(|q| q.name == mk.queue) else { return };
        let file = Some("apps/karmada/multikueue/multikueue-config.yaml".to_string());
        let cq = o::cluster_queue(t, s, q, &flavor(s), Some("multikueue"));
        out.kube(Some(&s.name), cq, format!("{} GPUs, dispatched by MultiKueue", q.gpu_quota), file.clone());
        for l in &q.local_queues {
            out.kube(Some(&s.name), o::local_queue(t, l, &q.name), format!("→ {}", q.name), file.clone());
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        let objs = match &cx.t.multikueue {
            None => vec![],
            Some(mk) => {
                vec![(Target::cluster(&mk.manager), id("kueue.x-k8s.io/v1beta2", "ClusterQueue", &mk.queue, None))]
            }
        };
        Box::pin(conditions(cx.targets, cx.key, "dispatching ClusterQueue Active", objs, "Active"))
    }
}
