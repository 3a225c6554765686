//! D.4 — a test Job through MultiKueue (seed: "MultiKueue cross-site"): one GPU asked for in the
//! dispatching queue's first LocalQueue; verify finds its copy in a worker.

use futures::future::BoxFuture;

use super::verify::{Verdict, get, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::Out;
use crate::desired::objects as o;
use crate::topology::Topology;
use crate::topology::model::LocalQueue;

pub struct D4;

impl Step for D4 {
    fn id(&self) -> &'static str {
        "D.4"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["C.1", "D.1"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        let (Some(mk), Some(l)) = (&t.multikueue, test_queue(t)) else { return };
        let file = Some("apps/tests/multikueue-job.yaml".to_string());
        let summary = format!("1 GPU through LocalQueue {}", l.name);
        out.kube(Some(&mk.manager), o::multikueue_test_job(t, l), summary, file);
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(dispatched(cx))
    }
}

/// The LocalQueue the test Job is sent to: the dispatching queue's first.
fn test_queue(t: &Topology) -> Option<&LocalQueue> {
    let mk = t.multikueue.as_ref()?;
    t.sites
        .iter()
        .find(|s| s.name == mk.manager)
        .and_then(|s| s.queues.iter().find(|q| q.name == mk.queue))
        .and_then(|q| q.local_queues.first())
}

/// MultiKueue dispatched the test Job to a worker (its copy exists there, with the name and
/// namespace of the manager's).
async fn dispatched(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let (Some(mk), Some(l)) = (&cx.t.multikueue, test_queue(cx.t)) else { return vec![] };
    let ns = l.namespace.clone();
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for w in &mk.workers {
        let target = Target::cluster(w);
        match get(cx.targets, &target, id("batch/v1", "Job", "fabric-multikueue-test", Some(&ns))).await {
            Ok(Some(_)) => found.push(w.clone()),
            Ok(None) => {}
            Err(e) => errors.push(format!("{target}: {e}")),
        }
    }
    let (verdict, evidence) = match (found.is_empty(), errors.is_empty()) {
        (false, _) => (Verdict::Pass, format!("{ns}/fabric-multikueue-test dispatched to {}", found.join(", "))),
        (true, true) => (
            Verdict::Fail,
            format!("{ns}/fabric-multikueue-test is in no worker ({}): not dispatched yet", mk.workers.join(", ")),
        ),
        (true, false) => (Verdict::Fail, errors.join("; ")),
    };
    vec![CheckResult { step: cx.key.into(), check: "test Job dispatched to a worker".into(), verdict, evidence }]
}
