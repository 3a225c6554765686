//! D.3 — the dispatching queue (seed: "MultiKueue cross-site"): the manager's ClusterQueue with
//! the MultiKueue admission check, and its LocalQueues (at Karmada's VM, the workers'). Its plan
//! says where its Jobs go (the workers) beside D.1's, whose queues run theirs at the site.

use futures::future::BoxFuture;

use super::verify::{conditions, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::kueue;
use crate::desired::{DISPATCH_FLAVOR, Out, dispatch_queue, dispatch_quota, multikueue_manager, quota_summary};

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
        let (Some(mk), Some((m, msite)), Some(q), Some(quota)) =
            (&t.multikueue, multikueue_manager(t), dispatch_queue(t), dispatch_quota(t))
        else {
            return;
        };
        let file = Some("apps/karmada/multikueue/multikueue-config.yaml".to_string());
        // At a manager site as at Karmada's VM the queue is alone (no cohort), on a flavor
        // without node labels (D.1): no Job of it runs at the manager, and in the site's cohort
        // its budget would be lent to the site's own queues beyond the site's GPUs.
        let cq = kueue::cluster_queue(t, None, &q.name, &quota, DISPATCH_FLAVOR, Some("multikueue"));
        let workers = mk.workers.join(", ");
        let summary = format!("{}, dispatched by MultiKueue to {workers}", quota_summary(&quota));
        out.kube_at(m.clone(), Some(msite), cq, summary, file.clone());
        for l in &q.local_queues {
            let summary = format!("→ {}: its Jobs are dispatched to {workers}, never run at {}", q.name, mk.manager);
            out.kube_at(m.clone(), Some(msite), kueue::local_queue(t, l, &q.name), summary, file.clone());
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        let objs = match &cx.t.multikueue {
            None => vec![],
            Some(mk) => {
                vec![(Target::cluster(&mk.manager), id(kueue::KUEUE_API, "ClusterQueue", &mk.queue, None))]
            }
        };
        Box::pin(conditions(cx.targets, cx.key, "dispatching ClusterQueue Active", objs, "Active"))
    }
}
