//! What every step's `verify` shares: results, and reading objects' status from a cluster.
//!
//! A check passes, fails, or says plainly that it cannot be checked automatically. Kubernetes
//! checks read the status the cluster's controllers write (a Cluster Ready, a ClusterQueue
//! Active, a DaemonSet fully ready); they never change anything.

use serde_json::{Value, json};

use crate::addr::Target;
use crate::live::observe::Targets;
use crate::providers::kube as k;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    /// Passes, with something to act on soon (a certificate near its expiry).
    Warn,
    Skip,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckResult {
    pub step: String,
    pub check: String,
    pub verdict: Verdict,
    pub evidence: String,
}

pub use crate::apply::wait::condition;

/// Why an object could not be read (the API's own words).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(pub String);

impl ReadError {
    fn of(e: impl std::fmt::Display) -> ReadError {
        ReadError(e.to_string())
    }
}

/// A check that cannot be made automatically for this topology.
pub fn skip(key: &str) -> Vec<CheckResult> {
    vec![CheckResult {
        step: key.into(),
        check: "no automatic check".into(),
        verdict: Verdict::Skip,
        evidence: "none for this step with this topology; see docs/runbook.md".into(),
    }]
}

/// A certificate's expiry as verify reports it (at time `now`): a pass with its date, a warning
/// under [`crate::providers::cert::EXPIRY_WARNING_DAYS`] days, a failure once expired, absent
/// (`absent` says what makes it) or unread. `at` names where it is kept; `runbook` is the
/// section that says how to renew it.
pub fn cert_expiry(
    at: &str,
    runbook: &str,
    absent: &str,
    served: &crate::live::served_cert::ServedCert,
    now: i64,
) -> (Verdict, String) {
    use crate::live::served_cert::ServedCert;
    use crate::providers::cert::{Expiry, expiry};
    match served {
        ServedCert::Read(names) => {
            let when = crate::apply::journal::utc(names.not_after);
            match expiry(names.not_after, now) {
                Expiry::Expired => (Verdict::Fail, format!("{at}: expired {when}; see {runbook}")),
                Expiry::Soon { days } => {
                    (Verdict::Warn, format!("{at}: expires in {days} day(s), {when}; see {runbook}"))
                }
                Expiry::Valid { days } => (Verdict::Pass, format!("{at}: valid until {when} ({days} days)")),
            }
        }
        ServedCert::Absent => (Verdict::Fail, format!("no {at}: {absent}")),
        ServedCert::Unread(why) => (Verdict::Fail, format!("{at} not read: {why}")),
    }
}

/// A client for a Kubernetes target of the topology.
pub async fn client(t: &Targets, target: &Target) -> Result<kube::Client, ReadError> {
    let access = t.kube.get(target).ok_or_else(|| ReadError(format!("no kubeconfig for {target}")))?;
    k::client(target, access).await.map_err(ReadError::of)
}

/// An object of a target, None when it does not exist.
pub async fn get(t: &Targets, target: &Target, id: Value) -> Result<Option<Value>, ReadError> {
    k::get(&client(t, target).await?, &id).await.map_err(ReadError::of)
}

/// An object's identity, as `get` takes it.
pub fn id(api_version: &str, kind: &str, name: &str, ns: Option<&str>) -> Value {
    let mut meta = json!({ "name": name });
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    json!({ "apiVersion": api_version, "kind": kind, "metadata": meta })
}

/// One status condition that must be True on each listed object.
pub async fn conditions(
    targets: &Targets,
    step: &str,
    what: &str,
    objs: Vec<(Target, Value)>,
    cond: &str,
) -> Vec<CheckResult> {
    let mut out = Vec::new();
    for (target, oid) in objs {
        let name = format!(
            "{}/{}",
            oid["kind"].as_str().unwrap_or_default(),
            oid["metadata"]["name"].as_str().unwrap_or_default()
        );
        let (verdict, evidence) = match get(targets, &target, oid).await {
            Err(e) => (Verdict::Fail, format!("{target}: {e}")),
            Ok(None) => (Verdict::Fail, format!("{target}: {name} does not exist")),
            Ok(Some(o)) => match condition(&o, cond) {
                Some((s, _)) if s == "True" => (Verdict::Pass, format!("{target}: {name} {cond}=True")),
                Some((s, d2)) => (Verdict::Fail, format!("{target}: {name} {cond}={s} ({d2})")),
                None => (
                    Verdict::Fail,
                    format!("{target}: {name} has no {cond} condition yet (is its controller running?)"),
                ),
            },
        };
        out.push(CheckResult { step: step.into(), check: format!("{what}: {name}"), verdict, evidence });
    }
    out
}

/// A Deployment rolled out and available, as one result.
pub async fn rolled_out(targets: &Targets, step: &str, target: &Target, check: &str, oid: Value) -> CheckResult {
    let name = format!(
        "Deployment {}/{}",
        oid["metadata"]["namespace"].as_str().unwrap_or_default(),
        oid["metadata"]["name"].as_str().unwrap_or_default()
    );
    let (verdict, evidence) = match get(targets, target, oid).await {
        Err(e) => (Verdict::Fail, format!("{target}: {e}")),
        Ok(None) => (Verdict::Fail, format!("{target}: {name} does not exist")),
        Ok(Some(d)) => match crate::apply::wait::readiness(&d) {
            crate::apply::wait::Readiness::Ready(e) => (Verdict::Pass, format!("{target}: {name} {e}")),
            crate::apply::wait::Readiness::Pending(e) | crate::apply::wait::Readiness::Failed(e) => {
                (Verdict::Fail, format!("{target}: {name}: {e}"))
            }
        },
    };
    CheckResult { step: step.into(), check: check.into(), verdict, evidence }
}

/// A Secret's data (in memory only), None when it does not exist.
pub async fn secret(
    targets: &Targets,
    target: &Target,
    ns: &str,
    name: &str,
) -> Result<Option<serde_json::Map<String, Value>>, ReadError> {
    k::secret_data(&client(targets, target).await?, ns, name).await.map_err(ReadError::of)
}

/// The ready endpoints of a Service's EndpointSlices in one cluster, per slice manager and
/// source cluster (`multicluster.kubernetes.io/source-cluster`, set on the slices Cilium's
/// Cluster Mesh synchronises from other clusters; empty for the cluster's own).
pub async fn ready_endpoints(
    t: &Targets,
    target: &Target,
    ns: &str,
    service: &str,
) -> Result<Vec<(String, String, usize)>, ReadError> {
    let client = client(t, target).await?;
    let probe = id("discovery.k8s.io/v1", "EndpointSlice", "", Some(ns));
    let (api, _) = crate::providers::kube::api_for(&client, &probe);
    let lp = kube::api::ListParams::default().labels(&format!("kubernetes.io/service-name={service}"));
    let slices = api.list(&lp).await.map_err(|e| ReadError(crate::providers::kube::describe(&e)))?;
    Ok(slices
        .items
        .iter()
        .filter_map(|s| serde_json::to_value(s).ok())
        .map(|s| {
            let label = |k: &str| s["metadata"]["labels"][k].as_str().unwrap_or_default().to_string();
            let ready = s["endpoints"]
                .as_array()
                .map(|e| e.iter().filter(|e| e["conditions"]["ready"] != false).count())
                .unwrap_or(0);
            (label("endpointslice.kubernetes.io/managed-by"), label("multicluster.kubernetes.io/source-cluster"), ready)
        })
        .collect())
}
