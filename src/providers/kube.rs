//! The Kubernetes provider: objects in each cluster and in Karmada, through the kube crate.
//!
//! Plan reads the live object and asks the API server for a server-side-apply dry run (field
//! manager `fabric`), so conflicts with another manager and invalid fields show at plan time.
//! The change is what `kubectl diff` shows (`k8s.io/kubectl/pkg/cmd/diff`: the dry run's answer
//! against the live object), restricted to the fields fabric's field manager owns
//! (`metadata.managedFields`): the server's canonical quantities, its defaults and the fields
//! controllers own are no change. A field a controller took over ([`CONTROLLER_FIELDS`]) is left
//! to it. Without a dry-run answer (the kind is not served yet, or the server refuses), live and
//! desired are compared on the desired object's shape. Apply is server-side apply; revert
//! re-applies the prior fields or deletes what did not exist. Secrets are compared by presence
//! only, and their content is never read into a plan.

use crate::addr::Target;
use std::path::PathBuf;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use serde_json::Value;

use crate::providers::secrets::{CopySource, SecretError};
use crate::providers::{Observed, SENSITIVE};
use crate::transport::retry::{self, Transient};

pub const FIELD_MANAGER: &str = "fabric";

/// Why a Kubernetes read or change failed. An API server's refusal keeps its status, so a 404
/// (not found, or a kind not served), a 409 (conflict) and a 422 (invalid) can be told apart
/// from each other and from a connection or credentials failure.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KubeError {
    /// The topology names no kubeconfig for the target.
    #[error("no kubeconfig for {target}")]
    NoAccess { target: String },
    /// The kubeconfig file cannot be read or parsed.
    #[error("cannot read kubeconfig {} for {target}: {reason}", path.display())]
    ConfigUnreadable { target: String, path: PathBuf, reason: String },
    /// The kubeconfig was read but gives no usable configuration (a missing context, bad
    /// credentials entry).
    #[error("kubeconfig {} (context {context:?}) for {target}: {reason}", path.display())]
    Config { target: String, path: PathBuf, context: Option<String>, reason: String },
    /// No client can be built from the configuration (TLS setup, proxy).
    #[error("{target}: {reason}")]
    Client { target: String, reason: String },
    /// The API server answered with an error status.
    #[error("{status} {reason}: {message}")]
    Api { status: u16, reason: String, message: String },
    /// Anything else on the way to the API server: connection, TLS, authentication, decoding.
    #[error("{0}")]
    Transport(String),
    /// An object that cannot be turned into (or read back from) what the API takes.
    #[error("{0}")]
    Object(String),
    /// The data of a Secret fabric copies cannot be made (its source is absent or incomplete).
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// A Node fabric would label is not in the cluster. fabric labels nodes; it never creates
    /// (or deletes) one: the kubelet registers its node when the host joins.
    #[error(
        "node {node} is not in the cluster yet: fabric labels nodes but does not create them (join the host, then plan again)"
    )]
    NodeMissing { node: String },
}

impl KubeError {
    /// The API server's status code, when it answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            KubeError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// A 404: the object, its namespace or its kind does not exist.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// A write that failed this way may still have been applied: the connection dropped before
    /// the answer, or the server failed while handling it.
    pub fn outcome_unknown(&self) -> bool {
        match self {
            KubeError::Transport(_) => true,
            KubeError::Api { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// A 409: another field manager owns the fields, or the object changed meanwhile.
    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    /// The namespace a 404 says does not exist (`namespaces "<ns>" not found`), if that is it.
    pub fn missing_namespace(&self) -> Option<&str> {
        match self {
            KubeError::Api { status: 404, reason, message } if reason == "NotFound" => {
                message.strip_prefix("namespaces \"")?.strip_suffix("\" not found")
            }
            _ => None,
        }
    }

    /// A 404 for the kind itself: the API does not serve it (its CRD is not installed yet). For
    /// a kind of a group the server serves, kube-apiserver answers a Status ([`KIND_NOT_SERVED`]);
    /// for a group or version it does not serve at all, the path has no handler and the answer is
    /// Go's plain-text `404 page not found` ([`GROUP_NOT_SERVED`]), which kube's client keeps as
    /// the message of a Status it could not parse.
    pub fn is_kind_not_served(&self) -> bool {
        matches!(self, KubeError::Api { status: 404, message, .. }
            if message == KIND_NOT_SERVED || message.trim() == GROUP_NOT_SERVED)
    }
}

impl From<&kube::Error> for KubeError {
    fn from(e: &kube::Error) -> KubeError {
        match e {
            kube::Error::Api(s) => {
                KubeError::Api { status: s.code, reason: s.reason.clone(), message: s.message.clone() }
            }
            other => KubeError::Transport(other.to_string()),
        }
    }
}

impl From<kube::Error> for KubeError {
    fn from(e: kube::Error) -> KubeError {
        KubeError::from(&e)
    }
}

impl From<serde_json::Error> for KubeError {
    fn from(e: serde_json::Error) -> KubeError {
        KubeError::Object(e.to_string())
    }
}

tokio::task_local! {
    /// The cluster the calls of the current task go to (`cluster.sp`), for retry lines: a
    /// `kube::Client` does not know the target's name. Set by [`for_cluster`].
    static CLUSTER: String;
}

/// Runs `fut` with its retry lines naming `target`.
pub async fn for_cluster<F: std::future::Future>(target: &Target, fut: F) -> F::Output {
    CLUSTER.scope(target.to_string(), fut).await
}

/// Whether a failed API call may be made again, following Kubernetes' clients:
///
/// * a 429, waiting at least the `retryAfterSeconds` of its Status when it has one
///   (client-go `rest/with_retry.go` `IsNextRetry`/`checkWait`; kube-rs keeps no header of a
///   plain-text answer, kube-client `client/mod.rs` `handle_api_errors`, so the `Retry-After` of
///   kube-apiserver's own 429s, `filters/maxinflight.go` and `priority-and-fairness.go`
///   `tooManyRequests`, is not seen and fabric's backoff applies);
/// * a 503 or 504 (kube-client `client/retry.rs` `is_retryable_status`), and a 500 whose Status
///   says when to come back (client-go's `checkWait`: any 5xx with a Retry-After);
/// * a connection refused, reset or closed before the answer (client-go `rest/request.go`
///   `isErrRetryableFunc`: `IsConnectionReset`, `IsProbableEOF`);
/// * an admission webhook that cannot be reached yet: kube-apiserver's 500 "failed calling
///   webhook" when the webhook's server refuses the connection or its Service has no endpoints
///   (apiserver `pkg/admission/plugin/webhook/errors`, `CallErr`). A chart fabric has just
///   installed registers its webhooks before its pod serves them: Kueue's did, at a real API
///   server (`tests/multikueue_vm.rs`), for the ResourceFlavor applied in the same step.
///
/// A timeout is not retried: it is how an unreachable cluster shows, and it is named at once.
pub fn transient(e: &kube::Error) -> Option<Transient> {
    match e {
        kube::Error::Api(s) => {
            let hint = s.details.as_ref().map(|d| d.retry_after_seconds).filter(|&n| n > 0);
            let webhook_down = s.code == 500
                && s.message.contains("failed calling webhook")
                && ["connection refused", "no endpoints available for service"].iter().any(|m| s.message.contains(m));
            let retryable = matches!(s.code, 429 | 503 | 504) || (s.code >= 500 && hint.is_some()) || webhook_down;
            retryable.then(|| Transient {
                why: KubeError::from(e).to_string(),
                server_hint: hint.map(|n| std::time::Duration::from_secs(u64::from(n))),
            })
        }
        other => dropped(other).then(|| Transient::new(other.to_string())),
    }
}

/// A connection refused, reset or closed before an answer (not a timeout), anywhere in the
/// error's chain of causes.
fn dropped(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind::*;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                ConnectionRefused | ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            );
        }
        if let Some(h) = err.downcast_ref::<hyper::Error>()
            && (h.is_incomplete_message() || h.is_closed() || h.is_canceled())
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// One API call under [`retry::KUBE`]: `what` names it in the retry lines (`get ClusterQueue
/// default`).
pub async fn call<T, F, Fut>(what: &str, op: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    retry::retry(&retry::KUBE, &cluster_name(), what, transient, op).await
}

pub(crate) fn cluster_name() -> String {
    CLUSTER.try_with(Clone::clone).unwrap_or_else(|_| "a cluster".into())
}

/// `kind name` (or `kind ns/name`) of an object, for retry lines.
fn label(obj: &Value) -> String {
    let m = &obj["metadata"];
    let name = m["name"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    match m["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Where a Kubernetes target's credentials are: a kubeconfig file and context.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeAccess {
    pub path: PathBuf,
    pub context: Option<String>,
}

/// `~/` as the home directory, as kubeconfig and bundle paths are written in the topology.
pub(crate) fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(p),
    }
}

impl KubeAccess {
    pub fn new(path: &str, context: Option<&str>) -> KubeAccess {
        KubeAccess { path: expand_home(path), context: context.map(String::from) }
    }
}

/// A client for `target`, from its kubeconfig; the error says which file and context failed.
///
/// kube's own retry is off: it retries a 429/503/504 up to 15 times with up to 1000 s between
/// attempts and says nothing (kube-client `client/retry.rs` `RetryPolicy::server_retry`),
/// minutes in which a partition or a Service without endpoints would go unreported. fabric's
/// calls retry instead where it is safe, within [`retry::KUBE`] and with a line per retry under
/// `-v` ([`call`]).
pub async fn client(target: &Target, access: &KubeAccess) -> Result<Client, KubeError> {
    client_with(target, access).await
}

/// A client whose calls a check makes once (a 503 a service proxy answers while a Service has
/// no endpoints is what the check reports): the same client as [`client`], which does not retry
/// by itself; the name says what the caller relies on.
pub async fn client_once(target: &Target, access: &KubeAccess) -> Result<Client, KubeError> {
    client_with(target, access).await
}

async fn client_with(target: &Target, access: &KubeAccess) -> Result<Client, KubeError> {
    let kc = Kubeconfig::read_from(&access.path).map_err(|e| KubeError::ConfigUnreadable {
        target: target.to_string(),
        path: access.path.clone(),
        reason: e.to_string(),
    })?;
    let opts = KubeConfigOptions { context: access.context.clone(), ..Default::default() };
    let mut config = Config::from_custom_kubeconfig(kc, &opts).await.map_err(|e| KubeError::Config {
        target: target.to_string(),
        path: access.path.clone(),
        context: access.context.clone(),
        reason: e.to_string(),
    })?;
    // An unreachable API fails in seconds, as an SSH host does.
    config.connect_timeout = Some(std::time::Duration::from_secs(8));
    config.read_timeout = Some(std::time::Duration::from_secs(30));
    config.default_retry = false;
    Client::try_from(config).map_err(|e| KubeError::Client { target: target.to_string(), reason: e.to_string() })
}

/// The plural resource name of a kind, by the rules Kubernetes' generators follow.
pub fn plural(kind: &str) -> String {
    let k = kind.to_ascii_lowercase();
    if let Some(stem) = k.strip_suffix('y').filter(|s| !s.ends_with(['a', 'e', 'i', 'o', 'u'])) {
        format!("{stem}ies")
    } else if k.ends_with('s') || k.ends_with('x') || k.ends_with("ch") || k.ends_with("sh") {
        format!("{k}es")
    } else {
        format!("{k}s")
    }
}

/// The typed handle for an object's kind and scope.
pub fn api_for(client: &Client, obj: &Value) -> (Api<DynamicObject>, String) {
    let api_version = obj["apiVersion"].as_str().unwrap_or("v1");
    let kind = obj["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural(kind));
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let api = match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    (api, name)
}

/// The part of `live` that has the shape of `desired`: only the fields fabric manages. A map
/// of which live has none of the keys fabric sets is left out, as if absent: re-applied as a
/// rollback point, it then drops fabric's keys instead of claiming the whole map.
pub fn project(live: &Value, desired: &Value) -> Value {
    match (live, desired) {
        (Value::Object(l), Value::Object(d)) => {
            let mut out = serde_json::Map::new();
            for (k, dv) in d {
                if let Some(lv) = l.get(k) {
                    let p = project(lv, dv);
                    let none_of_ours =
                        p.as_object().is_some_and(|m| m.is_empty()) && dv.as_object().is_some_and(|m| !m.is_empty());
                    if !none_of_ours {
                        out.insert(k.clone(), p);
                    }
                }
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(d)) => Value::Array(
            l.iter()
                .enumerate()
                .map(|(i, lv)| match d.get(i).or(d.first()) {
                    Some(dv) => project(lv, dv),
                    None => lv.clone(),
                })
                .collect(),
        ),
        (l, _) => l.clone(),
    }
}

fn text(v: &Value) -> String {
    crate::desired::yaml::to_string(v)
}

/// An API error as one line: status code, reason and the server's message.
pub fn describe(e: &kube::Error) -> String {
    KubeError::from(e).to_string()
}

/// An object as it can be re-created: without server-set metadata and status.
pub fn cleaned(mut v: Value) -> Value {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink"] {
            m.remove(k);
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    v
}

/// The live object with `id`'s identity (apiVersion, kind, name, namespace), None when absent.
pub async fn get(client: &Client, id: &Value) -> Result<Option<Value>, KubeError> {
    let (api, name) = api_for(client, id);
    let got = call(&format!("get {}", label(id)), || api.get_opt(&name)).await?;
    Ok(got.and_then(|o| serde_json::to_value(o).ok()))
}

/// Reads an object that should not exist (pruned): its whole content, to re-create it on revert.
pub async fn read_pruned(client: &Client, identity: &Value) -> Result<Observed, KubeError> {
    let (api, name) = api_for(client, identity);
    match call(&format!("get {}", label(identity)), || api.get_opt(&name)).await? {
        None => Ok(Observed::Absent),
        Some(obj) => {
            let v = serde_json::to_value(&obj)?;
            Ok(Observed::Present(text(&cleaned(v))))
        }
    }
}

/// Deletes an object (absent already is fine).
pub async fn delete(client: &Client, identity: &Value) -> Result<(), KubeError> {
    let (api, name) = api_for(client, identity);
    let dp = DeleteParams::default();
    match call(&format!("delete {}", label(identity)), || api.delete(&name, &dp)).await.map_err(KubeError::from) {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Every object fabric made for `fabric_name` in one API: the prunable kinds
/// (`desired::kinds::prunable`, derived from the catalog of what fabric writes) the API serves, selected by fabric's labels. Returns identities (apiVersion, kind, name, namespace).
pub async fn list_managed(client: &Client, fabric_name: &str) -> Result<Vec<Value>, KubeError> {
    let selector =
        format!("{}=fabric,{}={fabric_name}", crate::desired::objects::MANAGED_BY, crate::desired::objects::PART_OF);
    let mut out = Vec::new();
    for (api_version, kind) in crate::desired::kinds::prunable() {
        let probe = serde_json::json!({ "apiVersion": api_version, "kind": kind, "metadata": { "name": "" } });
        let (api, _) = api_for(client, &probe);
        let lp = kube::api::ListParams::default().labels(&selector);
        match call(&format!("list {kind}"), || api.list(&lp)).await.map_err(KubeError::from) {
            Ok(list) => {
                for o in list.items {
                    let mut meta = serde_json::Map::new();
                    meta.insert("name".into(), Value::from(o.metadata.name.clone().unwrap_or_default()));
                    if let Some(ns) = &o.metadata.namespace {
                        meta.insert("namespace".into(), Value::from(ns.clone()));
                    }
                    out.push(serde_json::json!({ "apiVersion": api_version, "kind": kind, "metadata": meta }));
                }
            }
            // A kind this API does not serve has nothing of fabric's.
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The API server's message for a kind it does not serve.
pub const KIND_NOT_SERVED: &str = "the server could not find the requested resource";

/// The API server's whole answer for a group or version it does not serve (kubernetes
/// `staging/src/k8s.io/apiserver/pkg/server/mux/pathrecorder.go`: the unhandled path goes to
/// `http.NotFound`). Only a real kube-apiserver showed it: the test double answered a Status.
pub const GROUP_NOT_SERVED: &str = "404 page not found";

/// What [`read`] found of one object.
pub struct KubeRead {
    pub observed: Observed,
    /// Why the API server would refuse the change (its dry run's error).
    pub refusal: Option<KubeError>,
    /// The fields fabric sets that it leaves to a controller ([`left_to_controllers`]).
    pub left: Vec<String>,
}

/// Reads the live state of `desired` and the server's answer to a server-side-apply dry run of
/// it: the refusal is the API's error (a 409 conflict, a 422 invalid field, a 404 missing
/// namespace). The observed text is the desired text where the dry run changes nothing that
/// fabric owns, the live value where it does (see [`observed_text`]).
pub async fn read(client: &Client, desired: &Value, sensitive: bool) -> Result<KubeRead, KubeError> {
    let (api, name) = api_for(client, desired);
    let got = call(&format!("get {}", label(desired)), || api.get_opt(&name)).await.map_err(KubeError::from);
    let live = match got {
        Ok(Some(obj)) => Some(serde_json::to_value(&obj)?),
        Ok(None) => None,
        // Its group is not served yet (the chart that installs the CRD comes first): absent.
        Err(e) if e.is_kind_not_served() => None,
        Err(e) => return Err(e),
    };
    if live.is_none() && is_node(desired) {
        let refusal = Some(KubeError::NodeMissing { node: name });
        return Ok(KubeRead { observed: Observed::Absent, refusal, left: Vec::new() });
    }
    // What fabric applies: without the fields a controller took over.
    let applied = match &live {
        Some(l) => leave_to_controllers(desired, l),
        None => desired.clone(),
    };
    // The server-side dry run: the would-be object, or why it would be refused.
    // `fieldValidation=Strict`: without it kube-apiserver's default is Warn (kubernetes/kubernetes
    // `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go`, `fieldValidation`: "" → Warn),
    // which drops a misspelled field with only a warning header: the plan would pass it.
    let pp = PatchParams::apply(FIELD_MANAGER).dry_run().validation_strict();
    let patch = Patch::Apply(&applied);
    let dry_run = call(&format!("dry-run apply {}", label(desired)), || api.patch(&name, &pp, &patch)).await;
    let (dry, refusal) = match dry_run.map_err(KubeError::from) {
        Ok(o) => (Some(serde_json::to_value(&o)?), None),
        // The kind is not served yet: the chart that installs its CRD comes first (apply waits
        // for the kind), so this is not a refusal.
        Err(e) if e.is_kind_not_served() => (None, None),
        Err(e) => (None, Some(e)),
    };
    let observed = match &live {
        None => Observed::Absent,
        Some(_) if sensitive => Observed::Present(SENSITIVE.into()),
        Some(l) => Observed::Present(text(&observed_text(desired, l, dry.as_ref()))),
    };
    let left = live.as_ref().map(|l| left_to_controllers(desired, l)).unwrap_or_default();
    Ok(KubeRead { observed, refusal, left })
}

/// Fields fabric leaves to the controller that takes them over, as `(apiVersion, kind, field,
/// manager)`: once `manager` owns the field (per `metadata.managedFields`) and fabric does not,
/// plan does not compare it and apply does not send it.
///
/// * A Job in a Kueue LocalQueue is created suspended and Kueue unsuspends it when it admits
///   it: `kubernetes-sigs/kueue` `pkg/controller/jobframework/reconciler.go` (`startJob`,
///   through `pkg/util/client/client.go` `Patch`: a merge patch without a field owner), so
///   kube-apiserver names the manager from the user agent, `kueue/<version> (...)`
///   (`pkg/util/useragent/useragent.go`, set in `cmd/kueue/main.go`): `kueue`, operation
///   Update, which takes `spec.suspend` from fabric.
pub const CONTROLLER_FIELDS: &[(&str, &str, &[&str], &str)] = &[("batch/v1", "Job", &["spec", "suspend"], "kueue")];

/// The [`CONTROLLER_FIELDS`] of `desired`'s kind that their controller owns in `live` (and fabric
/// does not), as `(field path, manager)`.
fn taken_by_controllers(desired: &Value, live: &Value) -> Vec<(&'static [&'static str], &'static str)> {
    let ours = managed_fields(live, is_fabric_apply);
    CONTROLLER_FIELDS
        .iter()
        .filter(|(api_version, kind, _, _)| desired["apiVersion"] == *api_version && desired["kind"] == *kind)
        .filter(|(_, _, path, manager)| {
            let theirs = managed_fields(live, |e| e["manager"] == *manager && e.get("subresource").is_none());
            owns(&theirs, path) && !owns(&ours, path)
        })
        .map(|(_, _, path, manager)| (*path, *manager))
        .collect()
}

/// `desired` without the [`CONTROLLER_FIELDS`] their controller owns in `live` (and fabric does
/// not).
pub fn leave_to_controllers(desired: &Value, live: &Value) -> Value {
    let mut out = desired.clone();
    for (path, _) in taken_by_controllers(desired, live) {
        remove_field(&mut out, path);
    }
    out
}

/// What plan says of the fields it leaves to their controller, one line each, in terraform's
/// words: `spec.suspend: left to kueue`. Only a field fabric sets is named (a controller's field
/// fabric never writes is no news).
pub fn left_to_controllers(desired: &Value, live: &Value) -> Vec<String> {
    taken_by_controllers(desired, live)
        .into_iter()
        .filter(|(path, _)| path.iter().try_fold(desired, |v, k| v.get(*k)).is_some())
        .map(|(path, manager)| format!("{}: left to {manager}", path.join(".")))
        .collect()
}

fn remove_field(v: &mut Value, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = v;
    for p in parents {
        match cur.get_mut(*p) {
            Some(c) => cur = c,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(*last);
    }
}

fn is_fabric_apply(entry: &Value) -> bool {
    entry["manager"] == FIELD_MANAGER && entry["operation"] == "Apply" && entry.get("subresource").is_none()
}

/// The union of the FieldsV1 sets of the `metadata.managedFields` entries `which` selects.
pub fn managed_fields(obj: &Value, which: impl Fn(&Value) -> bool) -> Value {
    let mut set = Value::Object(Default::default());
    for e in obj.pointer("/metadata/managedFields").and_then(Value::as_array).into_iter().flatten() {
        if which(e) && e["fieldsType"] == "FieldsV1" {
            union_fields(&mut set, &e["fieldsV1"]);
        }
    }
    set
}

fn union_fields(into: &mut Value, more: &Value) {
    let (Some(a), Some(b)) = (into.as_object_mut(), more.as_object()) else { return };
    for (k, v) in b {
        union_fields(a.entry(k.clone()).or_insert_with(|| Value::Object(Default::default())), v);
    }
}

/// Whether a FieldsV1 set holds the field at `path` (object keys), or a field above it.
fn owns(set: &Value, path: &[&str]) -> bool {
    let mut cur = set;
    for p in path {
        match cur.get(format!("f:{p}")) {
            Some(c) if c.as_object().is_some_and(|m| m.is_empty()) => return true,
            Some(c) => cur = c,
            None => return false,
        }
    }
    true
}

/// The part of `v` a FieldsV1 set names (structured-merge-diff's encoding: `f:<field>`,
/// `k:<keys>` for an item of a map list, `v:<value>` for an item of a set, `i:<index>`, and `.`
/// for the item itself). A leaf of the set keeps its whole value.
pub fn restrict(v: &Value, set: &Value) -> Value {
    let Some(fields) = set.as_object().filter(|m| !m.is_empty()) else { return v.clone() };
    match v {
        Value::Object(m) => {
            let mut out = serde_json::Map::new();
            for (k, sub) in fields {
                if let Some(name) = k.strip_prefix("f:")
                    && let Some(c) = m.get(name)
                {
                    out.insert(name.to_string(), restrict(c, sub));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let hit = fields.iter().find(|(k, _)| {
                    if let Some(keys) = k.strip_prefix("k:") {
                        serde_json::from_str::<serde_json::Map<String, Value>>(keys)
                            .is_ok_and(|keys| keys.iter().all(|(kk, kv)| item.get(kk) == Some(kv)))
                    } else if let Some(val) = k.strip_prefix("v:") {
                        serde_json::from_str::<Value>(val).is_ok_and(|val| &val == item)
                    } else if let Some(n) = k.strip_prefix("i:") {
                        n.parse::<usize>() == Ok(i)
                    } else {
                        false
                    }
                });
                if let Some((k, sub)) = hit {
                    let mut r = restrict(item, sub);
                    // A map list's item keeps its keys: which item it is.
                    if let (Some(keys), Some(o)) = (k.strip_prefix("k:"), r.as_object_mut())
                        && let Ok(keys) = serde_json::from_str::<serde_json::Map<String, Value>>(keys)
                    {
                        o.extend(keys);
                    }
                    out.push(r);
                }
            }
            Value::Array(out)
        }
        other => other.clone(),
    }
}

/// The live object as the plan shows it. Given the dry run's answer, the fields fabric's
/// manager owns (live or after the apply) are compared as `kubectl diff` compares them, live
/// against the dry run; equal, the desired text stands for the live one (the server's canonical
/// forms and defaults are no change), else each field shows as live has it where the dry run
/// would change it. Without a dry run: live on the desired object's shape ([`project`]).
pub fn observed_text(desired: &Value, live: &Value, dry: Option<&Value>) -> Value {
    let Some(dry) = dry else { return project(live, desired) };
    let mut ours = managed_fields(live, is_fabric_apply);
    union_fields(&mut ours, &managed_fields(dry, is_fabric_apply));
    if ours.as_object().is_none_or(|m| m.is_empty()) {
        return project(live, desired);
    }
    if restrict(&cleaned(live.clone()), &ours) == restrict(&cleaned(dry.clone()), &ours) {
        return desired.clone();
    }
    // A field the dry run leaves as it is (a controller's too) shows as desired; one fabric
    // owns and no longer applies (the dry run removes it) shows as live has it.
    blend(desired, live, dry, &ours)
}

/// `desired`'s shape with live's values where the dry run changes them, desired's elsewhere;
/// plus the object fields of live that fabric owns (`ours`, FieldsV1) and the dry run removes.
fn blend(desired: &Value, live: &Value, dry: &Value, ours: &Value) -> Value {
    let no_fields = Value::Object(Default::default());
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => {
            let mut out = serde_json::Map::new();
            for (k, dv) in d {
                if let Some(lv) = l.get(k) {
                    let sub = ours.get(format!("f:{k}")).unwrap_or(&no_fields);
                    let b = blend(dv, lv, dry.get(k).unwrap_or(&Value::Null), sub);
                    // As in `project`: a map with none of fabric's keys is left out.
                    let none_of_ours =
                        b.as_object().is_some_and(|m| m.is_empty()) && dv.as_object().is_some_and(|m| !m.is_empty());
                    if !none_of_ours {
                        out.insert(k.clone(), b);
                    }
                }
            }
            for (k, lv) in l {
                if !d.contains_key(k) && dry.get(k).is_none() && ours.get(format!("f:{k}")).is_some() {
                    out.insert(k.clone(), lv.clone());
                }
            }
            Value::Object(out)
        }
        (Value::Array(d), Value::Array(l))
            if d.len() == l.len() && dry.as_array().is_some_and(|y| y.len() == l.len()) =>
        {
            Value::Array(
                d.iter()
                    .zip(l)
                    .zip(dry.as_array().into_iter().flatten())
                    .map(|((d, l), y)| blend(d, l, y, &no_fields))
                    .collect(),
            )
        }
        _ if live == dry => desired.clone(),
        _ => project(live, desired),
    }
}

/// A Node (whose labels fabric sets, and which it must never create or delete).
fn is_node(obj: &Value) -> bool {
    obj["apiVersion"] == "v1" && obj["kind"] == "Node"
}

/// Server-side apply of `desired`; `force` takes fields over from other managers. A Node is
/// only ever changed, never created: one that is gone is refused.
pub async fn apply(client: &Client, desired: &Value, force: bool) -> Result<(), KubeError> {
    let (api, name) = api_for(client, desired);
    let get = format!("get {}", label(desired));
    if is_node(desired) && call(&get, || api.get_opt(&name)).await?.is_none() {
        return Err(KubeError::NodeMissing { node: name });
    }
    // Strict, as the dry run above: an unknown field is refused, never dropped silently.
    let mut pp = PatchParams::apply(FIELD_MANAGER).validation_strict();
    if force {
        pp = pp.force();
    }
    // A field a controller took over stays the controller's (unless forced).
    let leaves_some = CONTROLLER_FIELDS.iter().any(|(a, k, _, _)| desired["apiVersion"] == *a && desired["kind"] == *k);
    let live = if leaves_some && !force { call(&get, || api.get_opt(&name)).await? } else { None };
    let applied = match live {
        Some(live) => leave_to_controllers(desired, &serde_json::to_value(&live)?),
        None => desired.clone(),
    };
    // A server-side apply of the same object by the same manager is idempotent, so it may be
    // sent again; but a write whose answer was lost (reset, 5xx) may have landed: it is read
    // again before deciding, never assumed either way.
    let what = format!("apply {}", label(desired));
    let lost = std::sync::atomic::AtomicBool::new(false);
    let patch = Patch::Apply(&applied);
    call(&what, || async {
        if lost.swap(false, std::sync::atomic::Ordering::SeqCst) && landed(&api, &name, &applied).await {
            retry::notice(&format!("retry: {}: {what}: the answer was lost; read back: applied", cluster_name()));
            return Ok(());
        }
        let r = api.patch(&name, &pp, &patch).await.map(drop);
        if let Err(e) = &r {
            // A 429 was refused before it was processed (the filters run before the handler).
            let refused = matches!(e, kube::Error::Api(s) if s.code == 429);
            lost.store(!refused && transient(e).is_some(), std::sync::atomic::Ordering::SeqCst);
        }
        r
    })
    .await?;
    Ok(())
}

/// Whether the live object already has every field of `applied` as applied (read back after a
/// write whose answer was lost). Fields the server canonicalizes may differ: then it is applied
/// again, which changes nothing.
async fn landed(api: &Api<DynamicObject>, name: &str, applied: &Value) -> bool {
    match api.get_opt(name).await {
        Ok(Some(o)) => serde_json::to_value(&o).is_ok_and(|live| project(&live, applied) == *applied),
        _ => false,
    }
}

/// Puts an object back: delete it when it did not exist, else re-apply its prior fields.
pub async fn revert(client: &Client, desired: &Value, prior: &Observed) -> Result<(), KubeError> {
    match prior {
        // A Node is the kubelet's: putting fabric's labels back never deletes it.
        Observed::Absent if is_node(desired) => Ok(()),
        Observed::Absent => delete(client, desired).await,
        Observed::Present(t) if t == SENSITIVE => Ok(()),
        Observed::Present(t) => {
            let v: Value = serde_saphyr::from_str::<crate::topology::tree::Node>(t)
                .map_err(|e| KubeError::Object(e.to_string()))?
                .to_json();
            apply(client, &v, true).await
        }
    }
}

/// The `data` of a Secret, None when it does not exist. Only ever held in memory.
pub async fn secret_data(
    client: &Client,
    ns: &str,
    name: &str,
) -> Result<Option<serde_json::Map<String, Value>>, KubeError> {
    let id = serde_json::json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": name, "namespace": ns } });
    let (api, _) = api_for(client, &id);
    let Some(secret) = call(&format!("get Secret {ns}/{name}"), || api.get_opt(name)).await? else { return Ok(None) };
    let v = serde_json::to_value(&secret)?;
    Ok(Some(v["data"].as_object().cloned().unwrap_or_default()))
}

/// Why the Secrets `obj`'s pods read keys from ([`secrets::secret_key_refs`]) cannot give them,
/// for those not in `made` (the Secrets fabric makes itself at this target): the first absent
/// Secret or missing key. Only key names are looked at; nothing of the data is kept or shown.
pub async fn missing_secret_keys(
    client: &Client,
    obj: &Value,
    made: &std::collections::BTreeSet<(String, String)>,
) -> Result<Option<KubeError>, KubeError> {
    for (ns, name, key) in crate::providers::secrets::secret_key_refs(obj) {
        if made.contains(&(ns.clone(), name.clone())) {
            continue;
        }
        let data = secret_data(client, &ns, &name).await?;
        if let Some(why) = crate::providers::secrets::key_problem(data.as_ref(), &ns, &name, &key) {
            return Ok(Some(why.into()));
        }
    }
    Ok(None)
}

/// The Secret `obj` with its data copied from its source (see [`secrets::copy_source`]). The
/// data is only ever in memory; errors never contain it.
pub async fn with_copied_data(obj: &Value, source: &Client, from: &CopySource) -> Result<Value, KubeError> {
    let data = secret_data(source, &from.namespace, &from.name)
        .await?
        .ok_or_else(|| SecretError::SourceAbsent { address: from.address() })?;
    let mut obj = obj.clone();
    obj["data"] = Value::Object(crate::providers::secrets::copied_data(&data, from)?);
    Ok(obj)
}

/// Whether the live copy `obj` differs from what its source gives now (a rotated token, a CA
/// another tool made): compared in memory, never shown.
pub async fn copy_differs(dest: &Client, obj: &Value, source: &Client, from: &CopySource) -> Result<bool, KubeError> {
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let Some(have) = secret_data(dest, ns, name).await? else { return Ok(true) };
    let Some(src) = secret_data(source, &from.namespace, &from.name).await? else { return Ok(true) };
    Ok(!crate::providers::secrets::copy_matches(&have, &src, from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status_error(code: u16, reason: &str, retry_after: Option<u32>) -> kube::Error {
        let mut s = kube::core::Status::failure("x", reason).with_code(code);
        if let Some(n) = retry_after {
            s.details = serde_json::from_value(json!({ "retryAfterSeconds": n })).ok();
        }
        kube::Error::Api(s.boxed())
    }

    fn io_error(kind: std::io::ErrorKind) -> kube::Error {
        kube::Error::Service(Box::new(std::io::Error::new(kind, "x")))
    }

    #[test]
    fn what_kubernetes_clients_retry_is_transient() {
        let hint = |e: &kube::Error| transient(e).map(|t| t.server_hint);
        assert_eq!(hint(&status_error(429, "TooManyRequests", Some(3))), Some(Some(std::time::Duration::from_secs(3))));
        assert_eq!(hint(&status_error(429, "Failed to parse error data", None)), Some(None));
        assert_eq!(hint(&status_error(503, "ServiceUnavailable", None)), Some(None));
        assert_eq!(hint(&status_error(504, "Timeout", None)), Some(None));
        // A 500 only when the server says when to come back (client-go `checkWait`).
        assert_eq!(hint(&status_error(500, "InternalError", Some(1))), Some(Some(std::time::Duration::from_secs(1))));
        assert_eq!(hint(&status_error(500, "InternalError", None)), None);
        // A webhook whose server is not up yet (a chart just installed), as kube-apiserver says it.
        let webhook = |why: &str| {
            api_error(
                500,
                "InternalError",
                &format!(
                    "Internal error occurred: failed calling webhook \"mresourceflavor.kb.io\": failed to call webhook: Post \"https://kueue-webhook-service.kueue-system.svc:443/mutate\": {why}"
                ),
            )
        };
        for why in [
            "dial tcp 10.43.0.7:443: connect: connection refused",
            "no endpoints available for service \"kueue-webhook-service\"",
        ] {
            assert_eq!(hint(&webhook(why)), Some(None), "{why}");
        }
        // A webhook that answered and refused is the webhook's verdict, not retried.
        assert_eq!(
            hint(&api_error(
                500,
                "InternalError",
                "Internal error occurred: failed calling webhook \"x\": the server rejected our request"
            )),
            None
        );
        for code in [400, 403, 404, 409, 422] {
            assert_eq!(hint(&status_error(code, "x", None)), None, "{code}");
        }
        use std::io::ErrorKind::*;
        for k in [ConnectionRefused, ConnectionReset, ConnectionAborted, BrokenPipe, UnexpectedEof] {
            assert!(transient(&io_error(k)).is_some(), "{k:?}");
        }
        // A timeout is how an unreachable cluster shows: named at once, not retried.
        assert!(transient(&io_error(TimedOut)).is_none());
    }

    #[test]
    fn a_write_fails_with_an_unknown_outcome_when_the_answer_is_lost_or_the_server_failed() {
        assert!(KubeError::Transport("connection closed before message completed".into()).outcome_unknown());
        assert!(KubeError::from(status_error(503, "ServiceUnavailable", None)).outcome_unknown());
        assert!(!KubeError::from(status_error(422, "Invalid", None)).outcome_unknown());
        assert!(!KubeError::from(status_error(429, "TooManyRequests", None)).outcome_unknown());
    }

    #[test]
    fn plurals() {
        for (k, p) in [
            ("HelmChart", "helmcharts"),
            ("PropagationPolicy", "propagationpolicies"),
            ("ClusterTaintPolicy", "clustertaintpolicies"),
            ("ClusterQueue", "clusterqueues"),
            ("MultiKueueConfig", "multikueueconfigs"),
            ("Namespace", "namespaces"),
            ("Ingress", "ingresses"),
            ("Gateway", "gateways"),
        ] {
            assert_eq!(plural(k), p);
        }
    }

    #[test]
    fn projection_keeps_only_managed_fields() {
        let live = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "resourceVersion": "7", "managedFields": [], "labels": {"x": "1", "y": "2"}},
            "spec": {"a": 1, "b": [{"n": 1, "extra": 2}]}, "status": {"ok": true}});
        let desired = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"a": 2, "b": [{"n": 1}]}});
        assert_eq!(
            project(&live, &desired),
            json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"a": 1, "b": [{"n": 1}]}})
        );
    }

    fn entry(manager: &str, operation: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": operation, "apiVersion": "batch/v1", "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    #[test]
    fn restrict_follows_fields_v1_with_keyed_items() {
        // As a real API server encodes a container list (`x-kubernetes-list-type: map`).
        let obj = json!({"spec": {"containers": [
            {"name": "a", "image": "x:1", "imagePullPolicy": "IfNotPresent"},
            {"name": "b", "image": "y:1"}], "finalizers": ["p", "q"], "n": [1, 2]}});
        let set = json!({"f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}}},
            "f:finalizers": {"v:\"q\"": {}}, "f:n": {"i:1": {}}}});
        assert_eq!(
            restrict(&obj, &set),
            json!({"spec": {"containers": [{"name": "a", "image": "x:1"}], "finalizers": ["q"], "n": [2]}})
        );
        // A leaf keeps its whole value (an atomic list, a map owned as a whole).
        assert_eq!(restrict(&obj, &json!({"f:spec": {"f:n": {}}})), json!({"spec": {"n": [1, 2]}}));
    }

    fn job(suspend: bool, gpu: Value, managers: Value) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "t", "namespace": "b", "managedFields": managers},
            "spec": {"suspend": suspend, "backoffLimit": 0, "completions": 1,
                "template": {"spec": {"containers": [{"name": "p", "resources": {"limits": {"nvidia.com/gpu": gpu}}}]}}}})
    }

    #[test]
    fn a_field_kueue_took_over_is_left_to_it_and_nothing_else() {
        let fabric_all =
            entry("fabric", "Apply", json!({"f:spec": {"f:suspend": {}, "f:backoffLimit": {}, "f:template": {}}}));
        let fabric_rest = entry("fabric", "Apply", json!({"f:spec": {"f:backoffLimit": {}, "f:template": {}}}));
        let kueue = entry("kueue", "Update", json!({"f:spec": {"f:suspend": {}}}));
        let desired = job(true, json!(1), Value::Null);
        let desired = {
            let mut d = desired;
            d["metadata"].as_object_mut().unwrap().remove("managedFields");
            d
        };
        // Kueue owns suspend, fabric does not: fabric leaves it out, and plan says so.
        let live = job(false, json!("1"), json!([fabric_rest.clone(), kueue.clone()]));
        assert!(leave_to_controllers(&desired, &live)["spec"].get("suspend").is_none());
        assert_eq!(left_to_controllers(&desired, &live), ["spec.suspend: left to kueue"]);
        // ... only of a field fabric sets.
        let mut unset = desired.clone();
        unset["spec"].as_object_mut().unwrap().remove("suspend");
        assert!(left_to_controllers(&unset, &live).is_empty());
        // fabric still owns it (Kueue shares it, or never touched it): fabric keeps it.
        let live = job(true, json!("1"), json!([fabric_all.clone()]));
        assert_eq!(leave_to_controllers(&desired, &live)["spec"]["suspend"], true);
        assert!(left_to_controllers(&desired, &live).is_empty());
        // Another manager than Kueue (a hand edit) is no controller fabric yields to.
        let kubectl = entry("kubectl-edit", "Update", json!({"f:spec": {"f:suspend": {}}}));
        let live = job(false, json!("1"), json!([fabric_rest, kubectl]));
        assert_eq!(leave_to_controllers(&desired, &live)["spec"]["suspend"], true);
    }

    #[test]
    fn the_dry_run_against_live_on_fabrics_fields_decides_the_change() {
        let desired = {
            let mut d = job(true, json!(1), Value::Null);
            d["metadata"].as_object_mut().unwrap().remove("managedFields");
            d
        };
        let fabric = entry("fabric", "Apply", json!({"f:spec": {"f:backoffLimit": {}, "f:template": {}}}));
        let kueue = entry("kueue", "Update", json!({"f:spec": {"f:suspend": {}}}));
        // The server's canonical "1", its defaults and Kueue's suspend: no change; the observed
        // text is the desired one.
        let live = job(false, json!("1"), json!([fabric.clone(), kueue.clone()]));
        let dry = live.clone();
        assert_eq!(observed_text(&desired, &live, Some(&dry)), desired);
        // The dry run changes a field fabric owns: that field shows as live has it, the others
        // as desired (no canonical-form noise).
        let mut drifted = live.clone();
        drifted["spec"]["backoffLimit"] = json!(3);
        let shown = observed_text(&desired, &drifted, Some(&dry));
        assert_eq!(shown["spec"]["backoffLimit"], 3);
        assert_eq!(shown["spec"]["template"], desired["spec"]["template"]);
        assert_eq!(shown["spec"]["suspend"], true, "Kueue's field is not shown as a change");
        // A field fabric owns and no longer applies: the dry run removes it, the plan shows it.
        let fabric_more = entry(
            "fabric",
            "Apply",
            json!({"f:spec": {"f:backoffLimit": {}, "f:template": {}, "f:ttlSecondsAfterFinished": {}}}),
        );
        let mut had = job(false, json!("1"), json!([fabric_more, kueue.clone()]));
        had["spec"]["ttlSecondsAfterFinished"] = json!(60);
        let shown = observed_text(&desired, &had, Some(&dry));
        assert_eq!(shown["spec"]["ttlSecondsAfterFinished"], 60, "{shown:#}");
        assert_ne!(shown, desired);
        // Without a dry-run answer: live on the desired object's shape, as before.
        assert_eq!(observed_text(&desired, &live, None)["spec"]["suspend"], false);
    }

    fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure(message, reason).with_code(code).boxed())
    }

    #[test]
    fn api_errors_keep_their_status() {
        let e = KubeError::from(api_error(404, "NotFound", "namespaces \"ai\" not found"));
        assert_eq!(
            e,
            KubeError::Api { status: 404, reason: "NotFound".into(), message: "namespaces \"ai\" not found".into() }
        );
        assert!(e.is_not_found() && !e.is_conflict() && !e.is_kind_not_served());
        assert_eq!(e.missing_namespace(), Some("ai"));
        // The one line plans and errors have always shown.
        assert_eq!(e.to_string(), "404 NotFound: namespaces \"ai\" not found");
        let e = KubeError::from(api_error(404, "NotFound", KIND_NOT_SERVED));
        assert!(e.is_not_found() && e.is_kind_not_served());
        assert_eq!(e.missing_namespace(), None);
        assert_eq!(e.to_string(), "404 NotFound: the server could not find the requested resource");
        // A group the server does not serve at all: Go's plain 404, kept by kube's client as the
        // message of a Status it could not parse.
        let e = KubeError::from(api_error(404, "Failed to parse error data", "404 page not found\n"));
        assert!(e.is_not_found() && e.is_kind_not_served());
        let e = KubeError::from(api_error(409, "Conflict", "Apply failed with 1 conflict"));
        assert!(e.is_conflict() && !e.is_not_found());
        assert_eq!(e.status(), Some(409));
        assert_eq!(describe(&api_error(422, "Invalid", "spec.x: Invalid value")), "422 Invalid: spec.x: Invalid value");
    }

    #[test]
    fn other_failures_have_no_status() {
        let e = KubeError::from(kube::Error::LinesCodecMaxLineLengthExceeded);
        assert_eq!(e.status(), None);
        assert!(!e.is_not_found());
        assert_eq!(e.to_string(), kube::Error::LinesCodecMaxLineLengthExceeded.to_string());
    }

    #[tokio::test]
    async fn kubeconfig_failures_name_the_file_and_target() {
        let access = KubeAccess::new("/nonexistent/kubeconfig", Some("site-a"));
        let Err(e) = client(&Target::cluster("sp"), &access).await else { panic!("a missing kubeconfig is an error") };
        assert!(matches!(&e, KubeError::ConfigUnreadable { target, .. } if target == "cluster.sp"), "{e:?}");
        assert!(e.to_string().starts_with("cannot read kubeconfig /nonexistent/kubeconfig for cluster.sp: "), "{e}");
        let e = KubeError::Config {
            target: "karmada".into(),
            path: "/k".into(),
            context: Some("x".into()),
            reason: "no context".into(),
        };
        assert_eq!(e.to_string(), "kubeconfig /k (context Some(\"x\")) for karmada: no context");
        assert_eq!(KubeError::NoAccess { target: "cluster.rio".into() }.to_string(), "no kubeconfig for cluster.rio");
    }
}
