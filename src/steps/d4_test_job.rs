//! D.4 — a test Job through MultiKueue (seed: "MultiKueue cross-site"): one GPU, and cpu and
//! memory as every real Job asks, in the dispatching queue's first LocalQueue; verify finds its copy in a worker, or the Job finished
//! there (its status, which MultiKueue copies back), after the dispatching queue's and the
//! workers' configuration. Verify only reads: it never sends a Job.

use futures::future::BoxFuture;

use super::verify::{ReadError, Verdict, conditions, get, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::{Out, dispatch_queue, multikueue_manager};
use crate::desired::kueue;
use crate::topology::Topology;
use crate::topology::model::LocalQueue;
use serde_json::Value;

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
        let (Some((m, msite)), Some(l)) = (multikueue_manager(t), test_queue(t)) else { return };
        let file = Some("apps/tests/multikueue-job.yaml".to_string());
        let summary = format!("1 GPU, {} cpu, {} memory through LocalQueue {}", kueue::TEST_JOB_CPU, kueue::TEST_JOB_MEMORY, l.name);
        out.kube_at(m, Some(msite), kueue::multikueue_test_job(t, &l), summary, file);
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(async move {
            let mut out = configured(cx).await;
            out.extend(dispatched(cx).await);
            out
        })
    }
}

/// What the test Job goes through, read rather than tried (a test Job of verify's own would take
/// a GPU from real work): the dispatching ClusterQueue `Active` (Kueue reports there a MultiKueue
/// check it refuses, such as one scoped to some flavors) and each worker's MultiKueueCluster.
async fn configured(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let Some(mk) = &cx.t.multikueue else { return vec![] };
    let manager = Target::cluster(&mk.manager);
    let cq = vec![(manager.clone(), id(kueue::KUEUE_API, "ClusterQueue", &mk.queue, None))];
    let mut out = conditions(cx.targets, cx.key, "dispatching ClusterQueue Active", cq, "Active").await;
    let mkcs = mk.workers.iter().map(|w| (manager.clone(), id(kueue::KUEUE_API, "MultiKueueCluster", w, None)));
    out.extend(conditions(cx.targets, cx.key, "MultiKueue worker Active", mkcs.collect(), "Active").await);
    out
}

/// The LocalQueue the test Job is sent to: the dispatching queue's first.
fn test_queue(t: &Topology) -> Option<LocalQueue> {
    dispatch_queue(t)?.local_queues.into_iter().next()
}

/// Where the test Job is: MultiKueue dispatched it to a worker (its copy is there, with the
/// name and namespace of the manager's), or it finished there (MultiKueue copies the worker's
/// status to the manager's Job and then deletes the worker's copy: Kueue's
/// `batchjob_adapter.go` `SyncJob` and `workload.go` `reconcileGroup`).
async fn dispatched(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let (Some(mk), Some(l)) = (&cx.t.multikueue, test_queue(cx.t)) else { return vec![] };
    let job = |ns: &str| id("batch/v1", "Job", kueue::TEST_JOB_NAME, Some(ns));
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for w in &mk.workers {
        let target = Target::cluster(w);
        match get(cx.targets, &target, job(&l.namespace)).await {
            Ok(Some(_)) => found.push(w.clone()),
            Ok(None) => {}
            Err(e) => errors.push(format!("{target}: {e}")),
        }
    }
    let manager = Target::cluster(&mk.manager);
    let local = get(cx.targets, &manager, job(&l.namespace)).await;
    let (verdict, evidence) = judge(&Seen { ns: &l.namespace, manager: &mk.manager, workers: &mk.workers, local, found, errors });
    vec![CheckResult { step: cx.key.into(), check: "test Job dispatched to a worker".into(), verdict, evidence }]
}

/// What verify read of the test Job.
struct Seen<'a> {
    ns: &'a str,
    manager: &'a str,
    workers: &'a [String],
    /// The manager's Job.
    local: Result<Option<Value>, ReadError>,
    /// The workers that have its copy.
    found: Vec<String>,
    errors: Vec<String>,
}

/// The verdict on what was read: a copy in a worker, or a finished Job at the manager, passes.
fn judge(s: &Seen<'_>) -> (Verdict, String) {
    let name = format!("{}/{}", s.ns, kueue::TEST_JOB_NAME);
    let terminal = |ty: &str| {
        let local = s.local.as_ref().ok().and_then(Option::as_ref);
        local.and_then(|j| {
            let conds = j["status"]["conditions"].as_array()?;
            conds.iter().find(|c| c["type"] == ty && c["status"] == "True").map(|c| c["message"].as_str().unwrap_or("").to_string())
        })
    };
    if !s.found.is_empty() {
        return (Verdict::Pass, format!("{name} dispatched to {}", s.found.join(", ")));
    }
    if terminal("Complete").is_some() {
        let e = format!("{name} completed in a worker (MultiKueue copied its status to {}; it removes a finished Job's copy)", s.manager);
        return (Verdict::Pass, e);
    }
    if let Some(why) = terminal("Failed") {
        return (Verdict::Fail, format!("{name} failed in a worker: {why}"));
    }
    if !s.errors.is_empty() {
        return (Verdict::Fail, s.errors.join("; "));
    }
    match &s.local {
        Err(e) => (Verdict::Fail, format!("{}: {e}", Target::cluster(s.manager))),
        Ok(None) => (Verdict::Skip, format!("no test Job {name} in {}: `fabric apply --step D.4` sends one", s.manager)),
        Ok(Some(_)) => (
            Verdict::Fail,
            format!(
                "{name} is in no worker ({}): not dispatched yet (queued in {}: does a worker's queue have room?)",
                s.workers.join(", "),
                s.manager
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seen(local: Option<Value>, found: &[&str]) -> (Verdict, String) {
        let found = found.iter().map(|s| s.to_string()).collect();
        judge(&Seen { ns: "batch", manager: "franca", workers: &["sp".into()], local: Ok(local), found, errors: vec![] })
    }

    fn with(ty: &str, message: &str) -> Value {
        json!({"status": {"conditions": [{"type": ty, "status": "True", "message": message}]}})
    }

    #[test]
    fn a_copy_in_a_worker_or_a_finished_job_passes() {
        assert_eq!(seen(Some(json!({})), &["sp"]), (Verdict::Pass, "batch/fabric-multikueue-test dispatched to sp".into()));
        let (v, e) = seen(Some(with("Complete", "")), &[]);
        assert_eq!(v, Verdict::Pass);
        assert!(e.contains("completed in a worker"), "{e}");
    }

    #[test]
    fn a_failed_or_queued_job_fails_with_its_reason_and_none_is_skipped() {
        let (v, e) = seen(Some(with("Failed", "Job has reached the specified backoff limit")), &[]);
        assert_eq!((v, e.contains("backoff limit")), (Verdict::Fail, true), "{e}");
        let (v, e) = seen(Some(json!({"spec": {"suspend": true}})), &[]);
        assert_eq!((v, e.contains("is in no worker (sp): not dispatched yet (queued in franca")), (Verdict::Fail, true), "{e}");
        let (v, e) = seen(None, &[]);
        assert_eq!((v, e.contains("fabric apply --step D.4")), (Verdict::Skip, true), "{e}");
        let workers = ["sp".to_string()];
        let errors = vec!["cluster.sp: down".to_string()];
        let r = judge(&Seen { ns: "batch", manager: "franca", workers: &workers, local: Ok(None), found: vec![], errors });
        assert_eq!(r, (Verdict::Fail, "cluster.sp: down".into()));
        let local = Err(ReadError("connection refused".into()));
        let r = judge(&Seen { ns: "batch", manager: "franca", workers: &workers, local, found: vec![], errors: vec![] });
        assert_eq!(r, (Verdict::Fail, "cluster.franca: connection refused".into()));
    }
}
