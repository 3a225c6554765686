//! Waits after apply: an object is applied when the API accepted it, but it is *done* when the
//! controller behind it says so. fabric waits, with a timeout and progress, for
//! - a kind to be served before applying an object of it (a CRD Established, an aggregated API
//!   registered), so a step can install a chart and then use its kinds;
//! - a K3s HelmChart's (or HelmChartConfig's) install Job to complete: the Job that ran for
//!   *this* change, so a new Job when the chart's spec changed;
//! - a Deployment or DaemonSet to be rolled out (as `kubectl rollout status` decides);
//! - a Karmada Cluster to be Ready; a Kueue ClusterQueue, LocalQueue, AdmissionCheck or
//!   MultiKueueCluster to be Active.
//!
//! [`readiness`] is a pure function of the live objects; the async part only polls.

use std::time::{Duration, Instant};

use kube::Client;
use serde_json::{Value, json};

use crate::providers::kube::{self as k, KubeError};

/// Why a wait ended without the object being done. Reads that fail while waiting are retried
/// until the budget is spent, so the last one shows in [`WaitError::Timeout`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WaitError {
    /// The budget was spent; `last` is the last state seen (or why it could not be read).
    #[error("{what}: not ready after {} s: {last}", waited.as_secs())]
    Timeout { what: String, waited: Duration, last: String },
    /// It will not become ready without a change (a failed install Job).
    #[error("{what}: {reason}")]
    Failed { what: String, reason: String },
    /// The run was asked to stop (SIGINT, SIGTERM) while it waited.
    #[error("{what}: interrupted while waiting")]
    Interrupted { what: String },
    /// The run lost the Lease that guards its step while it waited (`lease::Watch`).
    #[error("{what}: stopped while waiting: {why}")]
    Stopped { what: String, why: String },
}

/// What the controllers say about an object.
#[derive(Debug, Clone, PartialEq)]
pub enum Readiness {
    Ready(String),
    /// Not yet, and why.
    Pending(String),
    /// It will not become ready without a change (a failed install Job).
    Failed(String),
}

/// The status condition `type` of an object, as (status, reason or message).
pub fn condition(obj: &Value, kind: &str) -> Option<(String, String)> {
    obj["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind).map(|c| {
        let detail = c["message"].as_str().or(c["reason"].as_str()).unwrap_or_default().to_string();
        (c["status"].as_str().unwrap_or_default().to_string(), detail)
    })
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// Kinds fabric waits for after applying them, with the condition or rule that says done.
pub fn waits_for(kind: &str) -> bool {
    matches!(
        kind,
        "HelmChart"
            | "HelmChartConfig"
            | "Deployment"
            | "DaemonSet"
            | "Cluster"
            | "ClusterQueue"
            | "LocalQueue"
            | "AdmissionCheck"
            | "MultiKueueCluster"
    )
}

/// Whether the live object `obj` (with `status`) is done, by its kind's rule.
pub fn readiness(obj: &Value) -> Readiness {
    let kind = obj["kind"].as_str().unwrap_or_default();
    let st = &obj["status"];
    match kind {
        // kubectl's rollout status (kubernetes/kubernetes staging/src/k8s.io/kubectl/pkg/
        // polymorphichelpers/rollout_status.go, `DeploymentStatusViewer.Status`): the new spec
        // observed, a rollout past its progress deadline failed, then updated, old and
        // available replicas counted from what the deployment controller writes
        // (pkg/controller/deployment/sync.go `calculateStatus`, progress.go).
        "Deployment" => {
            let want = obj["spec"]["replicas"].as_i64().unwrap_or(1);
            let generation = int(&obj["metadata"]["generation"]);
            if int(&st["observedGeneration"]) < generation {
                return Readiness::Pending("the controller has not seen the new spec yet".into());
            }
            let timed_out = st["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Progressing" && c["reason"] == "ProgressDeadlineExceeded");
            if timed_out {
                let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                return Readiness::Failed(format!("deployment \"{name}\" exceeded its progress deadline"));
            }
            let (updated, available) = (int(&st["updatedReplicas"]), int(&st["availableReplicas"]));
            if updated < want {
                Readiness::Pending(format!("{updated} of {want} replicas updated"))
            } else if int(&st["replicas"]) > updated {
                Readiness::Pending(format!("{} old replicas pending termination", int(&st["replicas"]) - updated))
            } else if available < updated {
                Readiness::Pending(format!("{available} of {updated} updated replicas available"))
            } else {
                Readiness::Ready(format!("{available}/{want} replicas available"))
            }
        }
        // kubectl's `DaemonSetStatusViewer.Status` (same file as above): every desired pod
        // updated and available (the DaemonSet controller's `updateDaemonSetStatus`).
        "DaemonSet" => {
            let want = int(&st["desiredNumberScheduled"]);
            if int(&st["observedGeneration"]) < int(&obj["metadata"]["generation"]) {
                return Readiness::Pending("the controller has not seen the new spec yet".into());
            }
            let (updated, available) = (int(&st["updatedNumberScheduled"]), int(&st["numberAvailable"]));
            if updated < want || available < want {
                Readiness::Pending(format!("{available} of {want} pods available, {updated} updated"))
            } else {
                Readiness::Ready(format!("{available}/{want} pods available"))
            }
        }
        "Cluster" => cond(obj, "Ready"),
        "ClusterQueue" | "LocalQueue" | "AdmissionCheck" | "MultiKueueCluster" => cond(obj, "Active"),
        "Job" => {
            if let Some((s, d)) = condition(obj, "Failed")
                && s == "True"
            {
                return Readiness::Failed(format!(
                    "Job {} failed: {d}",
                    obj["metadata"]["name"].as_str().unwrap_or("")
                ));
            }
            match condition(obj, "Complete") {
                Some((s, _)) if s == "True" => Readiness::Ready("install job complete".into()),
                _ if int(&st["succeeded"]) > 0 => Readiness::Ready("install job complete".into()),
                _ => Readiness::Pending(format!("install job running ({} active)", int(&st["active"]))),
            }
        }
        _ => Readiness::Ready("nothing to wait for".into()),
    }
}

fn cond(obj: &Value, kind: &str) -> Readiness {
    match condition(obj, kind) {
        Some((s, _)) if s == "True" => Readiness::Ready(format!("{kind}=True")),
        Some((s, d)) => Readiness::Pending(format!("{kind}={s} ({d})")),
        None => Readiness::Pending(format!("no {kind} condition yet (is its controller running?)")),
    }
}

/// The install Job a HelmChart or HelmChartConfig change runs (K3s's helm-controller names it
/// `helm-install-<chart>`, in the chart's namespace).
pub fn install_job(obj: &Value) -> Value {
    let name = format!("helm-install-{}", obj["metadata"]["name"].as_str().unwrap_or_default());
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or("kube-system");
    json!({ "apiVersion": "batch/v1", "kind": "Job", "metadata": { "name": name, "namespace": ns } })
}

/// The uid of the install Job before a chart change (None without one): after the change,
/// only a Job with another uid is the one that ran for it.
pub async fn job_uid(client: &Client, obj: &Value) -> Option<String> {
    let job = k::get(client, &install_job(obj)).await.ok().flatten()?;
    job["metadata"]["uid"].as_str().map(String::from)
}

/// Whether the API serves `obj`'s kind (for a CRD: it is Established).
pub async fn served(client: &Client, obj: &Value) -> Result<bool, KubeError> {
    let api_version = obj["apiVersion"].as_str().unwrap_or("v1");
    let kind = obj["kind"].as_str().unwrap_or_default();
    let list = if api_version.contains('/') {
        client.list_api_group_resources(api_version).await
    } else {
        client.list_core_api_resources(api_version).await
    };
    match list.map_err(KubeError::from) {
        Ok(l) => Ok(l.resources.iter().any(|r| r.kind == kind)),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// How long to wait, how often to look, and what ends a wait early (a signal, a lost Lease).
#[derive(Debug, Clone)]
pub struct Budget {
    pub timeout: Duration,
    pub interval: Duration,
    pub stop: crate::apply::interrupt::Stop,
}

/// Polls `probe` until it is Ready (Ok with the evidence), Failed, or the budget is spent.
/// `report` gets a line when the state changes and every 10 s while it does not.
/// A probe that fails (a read while a component restarts) counts as not ready yet.
pub async fn poll<F, Fut, E>(
    what: &str,
    budget: &Budget,
    report: &(dyn Fn(String) + Send + Sync),
    mut probe: F,
) -> Result<String, WaitError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Readiness, E>>,
    E: std::fmt::Display,
{
    let start = Instant::now();
    let mut last = String::new();
    let mut last_report = Instant::now();
    loop {
        let state = probe().await;
        let line = match &state {
            Ok(Readiness::Ready(e)) => return Ok(e.clone()),
            Ok(Readiness::Failed(e)) => return Err(WaitError::Failed { what: what.to_string(), reason: e.clone() }),
            Ok(Readiness::Pending(why)) => why.clone(),
            // A read can fail while a component restarts: keep trying until the budget ends.
            Err(e) => format!("cannot read it: {e}"),
        };
        match budget.stop.why() {
            Some(why) if why == "interrupted" => return Err(WaitError::Interrupted { what: what.to_string() }),
            Some(why) => return Err(WaitError::Stopped { what: what.to_string(), why }),
            None => {}
        }
        if start.elapsed() >= budget.timeout {
            return Err(WaitError::Timeout { what: what.to_string(), waited: budget.timeout, last: line });
        }
        if line != last || last_report.elapsed() >= Duration::from_secs(10) {
            report(format!("waiting for {what}: {line} ({} s)", start.elapsed().as_secs()));
            last = line;
            last_report = Instant::now();
        }
        tokio::time::sleep(budget.interval).await;
    }
}

/// Waits until the API serves the kind of `obj`.
pub async fn kind_served(
    client: &Client,
    obj: &Value,
    budget: &Budget,
    report: &(dyn Fn(String) + Send + Sync),
) -> Result<(), WaitError> {
    let what = format!("kind {} ({})", obj["kind"].as_str().unwrap_or(""), obj["apiVersion"].as_str().unwrap_or(""));
    poll(&what, budget, report, || async {
        Ok::<_, KubeError>(if served(client, obj).await? {
            Readiness::Ready("served".into())
        } else {
            Readiness::Pending("not served yet (its CRD is not installed or not Established)".into())
        })
    })
    .await
    .map(|_| ())
}

/// Waits until the applied object `obj` is done. `old_job` is the install Job's uid before a
/// chart change that needs a new Job. Returns the evidence.
pub async fn ready(
    client: &Client,
    obj: &Value,
    old_job: Option<String>,
    budget: &Budget,
    report: &(dyn Fn(String) + Send + Sync),
) -> Result<String, WaitError> {
    let kind = obj["kind"].as_str().unwrap_or_default();
    let what = format!(
        "{kind} {}{}",
        obj["metadata"]["namespace"].as_str().map(|n| format!("{n}/")).unwrap_or_default(),
        obj["metadata"]["name"].as_str().unwrap_or_default()
    );
    if matches!(kind, "HelmChart" | "HelmChartConfig") {
        let job_id = install_job(obj);
        let job_name = job_id["metadata"]["name"].as_str().unwrap_or_default().to_string();
        return poll(&what, budget, report, || async {
            let Some(job) = k::get(client, &job_id).await? else {
                return Ok(Readiness::Pending(format!("install job {job_name} not created yet")));
            };
            if old_job.is_some() && job["metadata"]["uid"].as_str() == old_job.as_deref() {
                return Ok(Readiness::Pending(format!("install job {job_name} not re-run yet for this change")));
            }
            Ok::<_, KubeError>(match readiness(&job) {
                Readiness::Ready(_) => Readiness::Ready(format!("install job {job_name} complete")),
                other => other,
            })
        })
        .await;
    }
    if !waits_for(kind) {
        return Ok("nothing to wait for".into());
    }
    poll(&what, budget, report, || async {
        Ok::<_, KubeError>(match k::get(client, obj).await? {
            Some(live) => readiness(&live),
            None => Readiness::Pending("does not exist".into()),
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(generation: i64, status: Value) -> Value {
        json!({"kind": "Deployment", "metadata": {"name": "d", "generation": generation}, "spec": {"replicas": 2}, "status": status})
    }

    #[test]
    fn deployments_follow_rollout_status() {
        assert!(
            matches!(readiness(&dep(2, json!({"observedGeneration": 1}))), Readiness::Pending(w) if w.contains("not seen"))
        );
        let s = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 2});
        assert_eq!(readiness(&dep(2, s)), Readiness::Pending("1 of 2 replicas updated".into()));
        let s = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 2});
        assert!(matches!(readiness(&dep(2, s)), Readiness::Pending(w) if w.contains("old replicas")));
        let s = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1});
        assert!(matches!(readiness(&dep(2, s)), Readiness::Pending(_)));
        let s = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
        assert_eq!(readiness(&dep(2, s)), Readiness::Ready("2/2 replicas available".into()));
        // Past its progress deadline: failed, as kubectl's rollout status says.
        let s = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]});
        assert_eq!(readiness(&dep(2, s)), Readiness::Failed("deployment \"d\" exceeded its progress deadline".into()));
    }

    #[test]
    fn daemonsets_follow_rollout_status() {
        let ds = |st: Value| json!({"kind": "DaemonSet", "metadata": {"generation": 1}, "status": st});
        let st = json!({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2,
            "numberReady": 2, "numberAvailable": 1});
        assert_eq!(readiness(&ds(st)), Readiness::Pending("1 of 2 pods available, 2 updated".into()));
        let st = json!({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2,
            "numberReady": 2, "numberAvailable": 2});
        assert_eq!(readiness(&ds(st)), Readiness::Ready("2/2 pods available".into()));
    }

    #[test]
    fn conditions_decide_queues_and_clusters() {
        let cq = |s: &str| json!({"kind": "ClusterQueue", "status": {"conditions": [{"type": "Active", "status": s, "reason": "FlavorNotFound", "message": "flavor gpu-a100 not found"}]}});
        assert_eq!(readiness(&cq("True")), Readiness::Ready("Active=True".into()));
        assert_eq!(readiness(&cq("False")), Readiness::Pending("Active=False (flavor gpu-a100 not found)".into()));
        let cluster = json!({"kind": "Cluster", "status": {}});
        assert!(matches!(readiness(&cluster), Readiness::Pending(w) if w.contains("no Ready condition")));
    }

    #[tokio::test]
    async fn waits_end_in_typed_errors_with_the_same_text() {
        let budget = &Budget { timeout: Duration::ZERO, interval: Duration::from_millis(1), stop: Default::default() };
        let quiet = |_: String| {};
        let pending = || async { Ok::<_, KubeError>(Readiness::Pending("not served yet".into())) };
        let e = poll("kind X (v1)", budget, &quiet, pending).await.unwrap_err();
        assert_eq!(
            e,
            WaitError::Timeout { what: "kind X (v1)".into(), waited: Duration::ZERO, last: "not served yet".into() }
        );
        assert_eq!(e.to_string(), "kind X (v1): not ready after 0 s: not served yet");
        // A read that keeps failing is retried, and its last error is what the timeout shows.
        let refused = || async { Err::<Readiness, _>(KubeError::Transport("connection refused".into())) };
        let e = poll("Cluster sp", budget, &quiet, refused).await.unwrap_err();
        assert_eq!(e.to_string(), "Cluster sp: not ready after 0 s: cannot read it: connection refused");
        let failed = || async { Ok::<_, KubeError>(Readiness::Failed("Job helm-install-kueue failed: x".into())) };
        let e = poll("HelmChart kube-system/kueue", budget, &quiet, failed).await.unwrap_err();
        assert!(matches!(&e, WaitError::Failed { .. }), "{e:?}");
        assert_eq!(e.to_string(), "HelmChart kube-system/kueue: Job helm-install-kueue failed: x");
    }

    #[test]
    fn jobs_complete_or_fail() {
        let job = |c: &str| json!({"kind": "Job", "metadata": {"name": "helm-install-cilium"}, "status": {"conditions": [{"type": c, "status": "True", "message": "BackoffLimitExceeded"}]}});
        assert!(matches!(readiness(&job("Complete")), Readiness::Ready(_)));
        assert!(
            matches!(readiness(&job("Failed")), Readiness::Failed(m) if m.contains("helm-install-cilium failed: BackoffLimitExceeded"))
        );
        assert!(matches!(readiness(&json!({"kind": "Job", "status": {"active": 1}})), Readiness::Pending(_)));
        assert_eq!(
            install_job(&json!({"kind": "HelmChart", "metadata": {"name": "kueue", "namespace": "kube-system"}}))["metadata"],
            json!({"name": "helm-install-kueue", "namespace": "kube-system"})
        );
    }
}
