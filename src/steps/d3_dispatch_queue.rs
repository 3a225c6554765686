//! D.3 — the dispatching queue (seed: "MultiKueue cross-site"): the manager's ClusterQueue with
//! the MultiKueue admission check, and its LocalQueues (at Karmada's VM, the workers').

use futures::future::BoxFuture;

use super::verify::{conditions, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::{DISPATCH_FLAVOR, Out, cohort, dispatch_queue, flavor, multikueue_manager};

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
        let (Some(mk), Some((m, msite)), Some(q)) = (&t.multikueue, multikueue_manager(t), dispatch_queue(t)) else {
            return;
        };
        let file = Some("apps/karmada/multikueue/multikueue-config.yaml".to_string());
        // A manager site's queue keeps its site's flavor and cohort; at Karmada's VM the queue
        // is alone, on a flavor without GPUs, its quota the workers' total.
        let cq = match t.sites.iter().find(|s| s.name == mk.manager) {
            Some(s) => o::cluster_queue(t, Some(&cohort(s)), &q, &flavor(s), Some("multikueue")),
            None => o::cluster_queue(t, None, &q, DISPATCH_FLAVOR, Some("multikueue")),
        };
        let summary = format!("{} GPUs, dispatched by MultiKueue to {}", q.gpu_quota, mk.workers.join(", "));
        out.kube_at(m.clone(), Some(msite), cq, summary, file.clone());
        for l in &q.local_queues {
            out.kube_at(m.clone(), Some(msite), o::local_queue(t, l, &q.name), format!("→ {}", q.name), file.clone());
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
