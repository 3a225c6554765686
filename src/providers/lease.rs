//! The lock every operator sees: a Kubernetes `Lease` (coordination.k8s.io/v1),
//! `fabric-system/fabric-apply`, in a cluster. Its holder is the run's holder text (run id,
//! user, machine, pid), renewed while the run lasts; a run that dies stops renewing it, and
//! once `leaseDurationSeconds` have passed since the last renewal any run may take it over.
//! Taking and renewing are writes with the object's `resourceVersion`, so of two runs racing
//! for the same Lease the API server lets exactly one through (409 Conflict for the other).
//!
//! Which Lease guards what is the apply layer's business (`apply::lease`); this module only
//! reads and writes one.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, PostParams};

use super::kube::KubeError;
use crate::transport::retry::{self, Transient};

/// Where the Lease lives, in every cluster.
pub const NAMESPACE: &str = "fabric-system";
pub const NAME: &str = "fabric-apply";

/// Why a Lease was not taken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LeaseError {
    /// Another run holds it, and its last renewal is recent enough.
    #[error("held by {holder}")]
    Held { holder: String },
    #[error(transparent)]
    Kube(#[from] KubeError),
}

/// A Lease as `fabric lock status` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LeaseState {
    /// Empty when released.
    pub holder: String,
    /// Seconds since the last renewal.
    pub renewed_secs_ago: i64,
    pub duration_secs: i64,
}

impl LeaseState {
    /// Whether its holder stopped renewing it for longer than its duration.
    pub fn expired(&self) -> bool {
        self.renewed_secs_ago > self.duration_secs
    }
}

fn api(client: &Client) -> Api<Lease> {
    Api::namespaced(client.clone(), NAMESPACE)
}

fn kube_err(e: kube::Error) -> KubeError {
    KubeError::from(&e)
}

/// The Lease's state, None when it does not exist.
pub async fn read(client: &Client) -> Result<Option<LeaseState>, KubeError> {
    let Some(l) = api(client).get_opt(NAME).await.map_err(kube_err)? else { return Ok(None) };
    Ok(Some(state(&l.spec.unwrap_or_default(), Timestamp::now())))
}

fn state(spec: &LeaseSpec, now: Timestamp) -> LeaseState {
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()).map(|t| t.0);
    LeaseState {
        holder: spec.holder_identity.clone().unwrap_or_default(),
        renewed_secs_ago: renewed.map_or(i64::MAX / 2, |t| now.duration_since(t).as_secs()),
        duration_secs: i64::from(spec.lease_duration_seconds.unwrap_or(0)),
    }
}

/// Takes the Lease for `holder` (creating it, and its namespace, when absent), or says who
/// holds it. Taking over an expired or released Lease counts a transition.
///
/// A try whose read or write met a transient failure (`super::kube::transient`: a connection
/// dropped before the answer, 429, 503) is tried again from the read, within
/// [`retry::KUBE`]: a create or replace whose answer was lost is then seen as this run's own
/// Lease and renewed, never sent blind. client-go's elector does the same (kubernetes/client-go
/// `tools/leaderelection/leaderelection.go` `tryAcquireOrRenew`: Get, then Create when absent or
/// Update, tried again every RetryPeriod).
pub async fn acquire(client: &Client, holder: &str, duration_secs: i32) -> Result<(), LeaseError> {
    ensure_namespace(client).await?;
    let what = format!("take Lease {NAMESPACE}/{NAME}");
    retry::retry(
        &retry::KUBE,
        &super::kube::cluster_name(),
        &what,
        |t: &Try| t.transient.clone(),
        || acquire_once(client, holder, duration_secs),
    )
    .await
    .map_err(|t| t.error)
}

/// A try at taking the Lease that failed, and whether it may be tried again.
struct Try {
    error: LeaseError,
    transient: Option<Transient>,
}

impl Try {
    fn kube(e: kube::Error) -> Try {
        Try { transient: super::kube::transient(&e), error: LeaseError::Kube(kube_err(e)) }
    }
}

/// One try of [`acquire`]: read the Lease, then create or replace it.
async fn acquire_once(client: &Client, holder: &str, duration_secs: i32) -> Result<(), Try> {
    let api = api(client);
    let now = MicroTime(Timestamp::now());
    let Some(mut lease) = api.get_opt(NAME).await.map_err(Try::kube)? else {
        let spec = LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(duration_secs),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(0),
            ..Default::default()
        };
        let meta = ObjectMeta { name: Some(NAME.into()), namespace: Some(NAMESPACE.into()), ..Default::default() };
        return match api.create(&PostParams::default(), &Lease { metadata: meta, spec: Some(spec) }).await {
            Ok(_) => Ok(()),
            Err(e) => Err(lost_try(client, e).await),
        };
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    let current = state(spec, now.0);
    if !current.holder.is_empty() && current.holder != holder && !current.expired() {
        return Err(Try { error: LeaseError::Held { holder: current.holder }, transient: None });
    }
    if current.holder != holder {
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.holder_identity = Some(holder.into());
    spec.lease_duration_seconds = Some(duration_secs);
    spec.renew_time = Some(now);
    // The object's resourceVersion rides along: a run that wrote it meanwhile wins.
    match api.replace(NAME, &PostParams::default(), &lease).await {
        Ok(_) => Ok(()),
        Err(e) => Err(lost_try(client, e).await),
    }
}

/// A failed create or replace: transient ones are tried again, others say who won (see
/// [`lost_race`]).
async fn lost_try(client: &Client, e: kube::Error) -> Try {
    match super::kube::transient(&e) {
        Some(t) => Try { error: LeaseError::Kube(kube_err(e)), transient: Some(t) },
        None => Try { error: lost_race(client, kube_err(e)).await, transient: None },
    }
}

/// A create or replace that failed: when another run got there first (409), who it was.
async fn lost_race(client: &Client, e: KubeError) -> LeaseError {
    if e.is_conflict()
        && let Ok(Some(s)) = read(client).await
    {
        return LeaseError::Held { holder: s.holder };
    }
    LeaseError::Kube(e)
}

/// Renews `holder`'s Lease; `Held` when another run has taken it over meanwhile.
pub async fn renew(client: &Client, holder: &str) -> Result<(), LeaseError> {
    let api = api(client);
    let Some(mut lease) = api.get_opt(NAME).await.map_err(kube_err)? else {
        return Err(LeaseError::Held { holder: "nobody (it was deleted)".into() });
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    match spec.holder_identity.as_deref() {
        Some(h) if h == holder => {}
        other => return Err(LeaseError::Held { holder: other.unwrap_or_default().to_string() }),
    }
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    api.replace(NAME, &PostParams::default(), &lease).await.map_err(|e| LeaseError::Kube(kube_err(e)))?;
    Ok(())
}

/// Releases the Lease if `holder` still holds it (one taken over meanwhile stays); whether it
/// did.
pub async fn release(client: &Client, holder: &str) -> Result<bool, KubeError> {
    let api = api(client);
    let Some(mut lease) = api.get_opt(NAME).await.map_err(kube_err)? else { return Ok(false) };
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(holder) {
        return Ok(false);
    }
    spec.holder_identity = None;
    // Released now: the next run need not wait for an expiry.
    spec.renew_time = Some(MicroTime(
        Timestamp::now() - SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0)) + 1),
    ));
    match api.replace(NAME, &PostParams::default(), &lease).await.map_err(kube_err) {
        Ok(_) => Ok(true),
        Err(e) if e.is_conflict() => Ok(false),
        Err(e) => Err(e),
    }
}

/// fabric's namespace for its Lease (and run history), made when absent.
async fn ensure_namespace(client: &Client) -> Result<(), KubeError> {
    let ns = serde_json::json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NAMESPACE,
        "labels": { crate::desired::objects::MANAGED_BY: "fabric" } } });
    let id = serde_json::json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NAMESPACE } });
    if super::kube::get(client, &id).await?.is_none() {
        super::kube::apply(client, &ns, false).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_expires_once_its_duration_passed_since_the_last_renewal() {
        let now = Timestamp::now();
        let spec = |ago: i64| LeaseSpec {
            holder_identity: Some("run a".into()),
            lease_duration_seconds: Some(60),
            renew_time: Some(MicroTime(now - SignedDuration::from_secs(ago))),
            ..Default::default()
        };
        assert!(!state(&spec(10), now).expired());
        assert!(state(&spec(61), now).expired());
        let never = LeaseSpec { holder_identity: Some("x".into()), ..Default::default() };
        assert!(state(&never, now).expired(), "a Lease that was never renewed holds nothing");
    }
}
