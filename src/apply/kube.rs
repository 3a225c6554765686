//! Applying one step's changes to one Kubernetes target, in order: wait for each object's kind
//! to be served, fill in the Secrets fabric makes (copied or generated, in memory only),
//! server-side apply, then wait until the controllers say the object is done.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::apply::wait::{self, Budget, WaitError};
use crate::desired::{Desired, Resource, Target};
use crate::providers::kube::{self as k, KubeAccess, KubeError};
use crate::providers::secrets::{self, SecretError};
use crate::providers::{Observed, PendingChange};

/// Why the Secret to apply could not be made: its source's API, its data, or the wait for its
/// source to be filled. Never carries the data itself.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SecretApplyError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error(transparent)]
    Wait(#[from] WaitError),
}

/// What a target's changes need besides the target itself.
pub struct Context {
    pub step: String,
    pub force: bool,
    /// Every Kubernetes target's access, for the sources of copied Secrets.
    pub accesses: BTreeMap<Target, KubeAccess>,
    pub budget: Budget,
    pub progress: UnboundedSender<String>,
}

impl Context {
    /// A progress line of the step.
    fn report(&self, line: String) {
        let _ = self.progress.send(format!("{}: {line}", self.step));
    }
}

/// The prior object's `spec`, from its journaled text.
fn prior_spec(prior: &Observed) -> Option<Value> {
    let Observed::Present(t) = prior else { return None };
    let v = serde_saphyr::from_str::<crate::topology::tree::Node>(t).ok()?.to_json();
    Some(v["spec"].clone())
}

/// The Secret to apply for `obj` (fabric's own kinds of Secret), with its data where fabric
/// provides it. Errors never contain secret data.
async fn secret_to_apply(
    cx: &Context,
    client: &kube::Client,
    obj: &Value,
    prior: &Observed,
) -> Result<(Value, bool), SecretApplyError> {
    if obj["type"] == "kubernetes.io/service-account-token" {
        // Filled by the cluster's token controller; fabric never sets its data.
        return Ok((obj.clone(), false));
    }
    if let Some(from) = secrets::copy_source(obj) {
        let access =
            cx.accesses.get(&from.target).ok_or_else(|| KubeError::NoAccess { target: from.target.to_string() })?;
        let source = k::client(&from.target, access).await?;
        // A ServiceAccount token is filled by the cluster moments after it is created (maybe in
        // this very step): wait for it like for any controller.
        let report = |line: String| cx.report(line);
        let what = format!("the source of {}", obj["metadata"]["name"].as_str().unwrap_or_default());
        let copied = std::sync::Mutex::new(None);
        wait::poll(&what, &cx.budget, &report, || async {
            Ok::<_, std::convert::Infallible>(match k::with_copied_data(obj, &source, &from).await {
                Ok(o) => {
                    *copied.lock().expect("copy") = Some(o);
                    wait::Readiness::Ready("filled".into())
                }
                Err(why) => wait::Readiness::Pending(why.to_string()),
            })
        })
        .await?;
        // The copy is fabric's by definition: take the keys over from whoever wrote them.
        let copied = copied.into_inner().expect("copy").unwrap_or_else(|| obj.clone());
        return Ok((copied, true));
    }
    if let Some(what) = secrets::generated(obj) {
        let mut out = obj.clone();
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        // Generated once: a Secret that exists keeps its content (fabric re-applies it so that
        // its ownership of the data stays as it was).
        out["data"] = match (prior, k::secret_data(client, ns, name).await?) {
            (Observed::Present(_), Some(live)) => Value::Object(live),
            _ => Value::Object(secrets::generate(what)?),
        };
        return Ok((out, false));
    }
    Err(SecretError::NoSource.into())
}

/// What one target's apply did: what was applied (to revert on failure), the objects still to
/// wait for, and the first failure.
pub type Outcome = (Vec<(Resource, Observed)>, Vec<(Resource, Value)>, Option<String>);

/// Applies `items` to `target` in order. A chart's install Job and a kind being served are
/// waited for at once (later objects need them); the other waits are returned, to run once the
/// whole step is applied (a Karmada Cluster is Ready only once its credentials are copied).
pub async fn apply_target(cx: &Context, target: &Target, access: &KubeAccess, items: Vec<PendingChange>) -> Outcome {
    let mut later = Vec::new();
    let (ok, failure) = k::for_cluster(target, apply_in_order(cx, target, access, items, &mut later)).await;
    (ok, later, failure)
}

/// Waits until every object of `objs` (on `target`) is done; the first failure.
pub async fn wait_all(
    cx: &Context,
    target: &Target,
    access: &KubeAccess,
    objs: Vec<(Resource, Value)>,
) -> Option<String> {
    let client = match k::client(target, access).await {
        Ok(c) => c,
        Err(e) => return Some(e.to_string()),
    };
    let report = |line: String| cx.report(line);
    k::for_cluster(target, async {
        for (r, obj) in objs {
            match wait::ready(&client, &obj, None, &cx.budget, &report).await {
                Ok(evidence) => report(format!("{} ready: {evidence}", r.address)),
                Err(e) => return Some(format!("{}: {e}", r.address)),
            }
        }
        None
    })
    .await
}

async fn apply_in_order(
    cx: &Context,
    target: &Target,
    access: &KubeAccess,
    items: Vec<PendingChange>,
    later: &mut Vec<(Resource, Value)>,
) -> (Vec<(Resource, Observed)>, Option<String>) {
    let client = match k::client(target, access).await {
        Ok(c) => c,
        Err(e) => return (Vec::new(), Some(e.to_string())),
    };
    let report = |line: String| cx.report(line);
    let mut served: BTreeSet<(String, String)> = BTreeSet::new();
    let mut ok: Vec<(Resource, Observed)> = Vec::new();
    for PendingChange { resource: r, prior, .. } in items {
        // Stopped (a signal, the step's Lease lost): no further change; what was made reverts.
        if let Some(why) = cx.budget.stop.why() {
            return (ok, Some(format!("{why}; {} not changed", r.address)));
        }
        let obj = match &r.desired {
            Desired::Prune(id) => {
                match k::delete(&client, id).await {
                    Ok(()) => ok.push((r, prior)),
                    Err(e) => return (ok, Some(format!("{}: {e}", r.address))),
                }
                continue;
            }
            Desired::Kube(obj) => obj.clone(),
            _ => continue,
        };
        // A chart in this step may be what installs the kind: wait until the API serves it.
        let kind =
            (obj["apiVersion"].as_str().unwrap_or("").to_string(), obj["kind"].as_str().unwrap_or("").to_string());
        if !served.contains(&kind) {
            if let Err(e) = wait::kind_served(&client, &obj, &cx.budget, &report).await {
                return (ok, Some(format!("{}: {e}", r.address)));
            }
            served.insert(kind);
        }
        let (obj, force) = if r.sensitive {
            match secret_to_apply(cx, &client, &obj, &prior).await {
                Ok((o, f)) => (o, f || cx.force),
                Err(e) => return (ok, Some(format!("{}: {e}", r.address))),
            }
        } else {
            (obj, cx.force)
        };
        // A chart change runs a new install Job; remember the old one to tell them apart.
        let chart = matches!(obj["kind"].as_str(), Some("HelmChart" | "HelmChartConfig"));
        let old_job = if chart && prior_spec(&prior).as_ref() != Some(&obj["spec"]) {
            wait::job_uid(&client, &obj).await
        } else {
            None
        };
        if let Err(e) = k::apply(&client, &obj, force).await {
            // The retries ended without an answer: the change may have landed, so it is put
            // back with the rest (putting back what did not change changes nothing).
            if e.outcome_unknown() {
                ok.push((r.clone(), prior));
            }
            return (ok, Some(format!("{}: {e}", r.address)));
        }
        ok.push((r.clone(), prior));
        if chart {
            match wait::ready(&client, &obj, old_job, &cx.budget, &report).await {
                Ok(evidence) => report(format!("{} ready: {evidence}", r.address)),
                Err(e) => return (ok, Some(format!("{}: {e}", r.address))),
            }
        } else if wait::waits_for(obj["kind"].as_str().unwrap_or_default()) {
            later.push((r, obj));
        }
    }
    (ok, None)
}
