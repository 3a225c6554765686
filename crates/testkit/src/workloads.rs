//! What kube-controller-manager, the scheduler and the kubelets make of a Deployment, a
//! ReplicaSet and a StatefulSet, for the simulated controllers of [`crate::kube_api`]: the
//! ReplicaSets a Deployment's rollout keeps and their sizes, the Pods a ReplicaSet or StatefulSet
//! creates from its template, the Node the scheduler binds each to, and the statuses they report.
//! Pure functions over JSON objects; the API double stores what they return. See the workload
//! rows of "Controllers (opt-in)" in `kube_api.md`.
//!
//! What it follows (kubernetes/kubernetes):
//! * the selector: `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`
//!   `LabelSelectorAsSelector` (`matchLabels` and `matchExpressions` ANDed; operators `In`,
//!   `NotIn`, `Exists`, `DoesNotExist`), and the API's refusal of a selector that is empty or does
//!   not select the pod template's labels (`pkg/apis/apps/validation/validation.go`
//!   `ValidateDeploymentSpec`, `ValidateReplicaSetSpec`, `ValidateStatefulSetSpec`: "empty
//!   selector is invalid for deployment", "`selector` does not match template `labels`");
//! * the Deployment's rollout: `pkg/controller/deployment/rolling.go` (`rolloutRolling`,
//!   `reconcileNewReplicaSet`, `reconcileOldReplicaSets`, `cleanupUnhealthyReplicas`,
//!   `scaleDownOldReplicaSetsForRollingUpdate`), `recreate.go` (`rolloutRecreate`: old
//!   ReplicaSets to 0, the new one up once no old pod is left), `util/deployment_util.go`
//!   (`NewRSNewReplicas`, `MaxUnavailable`, `MaxSurge`, `ResolveFenceposts`: 25% surge rounded up,
//!   25% unavailable rounded down, 1 unavailable when both are 0; `DeploymentComplete`), `sync.go`
//!   (`getNewReplicaSet`: `<deployment>-<pod-template-hash>`, the `pod-template-hash` label on the
//!   ReplicaSet, its selector and template, the `deployment.kubernetes.io/revision` annotation;
//!   `calculateStatus`), `progress.go` (`syncRolloutStatus`: `Progressing` reasons
//!   `NewReplicaSetCreated`, `ReplicaSetUpdated`, `NewReplicaSetAvailable`; a ReplicaSet's
//!   `ReplicaFailure` copied into the Deployment's);
//! * the ReplicaSet's Pods: `pkg/controller/replicaset/replica_set.go` (`manageReplicas`:
//!   create the missing ones, delete the extra ones, unscheduled then not ready first,
//!   `getPodsToDelete`), `replica_set_utils.go` (`calculateStatus`: `replicas`,
//!   `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas`, `observedGeneration`; a
//!   `ReplicaFailure` condition when a create fails), `pkg/controller/controller_utils.go`
//!   (`GetPodFromTemplate`: the template's labels, annotations and spec, `generateName`
//!   `<replicaset>-`, a controller `ownerReference`);
//! * the StatefulSet's Pods: `pkg/controller/statefulset/stateful_set_utils.go` (`getPodName`
//!   `<set>-<ordinal>`, `newVersionedStatefulSetPod`: labels `controller-revision-hash`,
//!   `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index`, `hostname`, `subdomain`
//!   = `serviceName`), `stateful_set_control.go` (`updateStatefulSet`: with the default
//!   `OrderedReady` policy ordinal N is created only once 0..N-1 are Running and Ready, scaled
//!   down from the highest ordinal; the default `RollingUpdate` replaces the highest-ordinal pod of
//!   an old revision once every pod is Ready; status `replicas`, `readyReplicas`,
//!   `currentReplicas`, `updatedReplicas`, `availableReplicas`, `currentRevision`,
//!   `updateRevision`);
//! * the scheduler's filters: `pkg/scheduler/framework/plugins/nodeunschedulable/
//!   node_unschedulable.go` (a cordoned Node only for pods tolerating
//!   `node.kubernetes.io/unschedulable:NoSchedule`), `nodeaffinity/node_affinity.go`
//!   (`nodeSelector` and required node affinity, the same rule as [`crate::daemonset`]),
//!   `tainttoleration/taint_toleration.go` (every `NoSchedule`/`NoExecute` taint tolerated), and
//!   the not-ready taint the node lifecycle controller puts on a NotReady Node
//!   (`pkg/controller/nodelifecycle/node_lifecycle_controller.go`, `doNoScheduleTaintingPass`:
//!   `node.kubernetes.io/not-ready:NoSchedule`); every pod tolerates not-ready and unreachable
//!   `NoExecute` (`plugin/pkg/admission/defaulttolerationseconds/admission.go`). Of the Nodes
//!   left, the one running fewest pods (`noderesources/least_allocated.go` with the default
//!   requests of pods that state none, `pkg/scheduler/util/pod_resources.go`), ties by name;
//! * the pod GC: a pod bound to a Node that no longer exists is deleted
//!   (`pkg/controller/podgc/gc_controller.go` `gcOrphaned`).
//!
//! Deviations are listed in `kube_api.md`; the main ones: the pod-template-hash is not
//! `ComputeHash`'s FNV hash, the scheduler ties go by name (upstream: at random), resources are
//! not fitted to Nodes (except by KAI Scheduler, `crate::kai`), `minReadySeconds` is 0 and a
//! rollout never times out (`progressDeadlineSeconds`).

use serde_json::{Value, json};

use crate::daemonset;

/// The label a Deployment puts on its ReplicaSets and their pods (`apps/v1`
/// `DefaultDeploymentUniqueLabelKey`).
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The revision annotation of a Deployment and its ReplicaSets (`deployment_util.go`
/// `RevisionAnnotation`).
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// The label of a StatefulSet's (and DaemonSet's) pods naming their template revision
/// (`apps/v1` `ControllerRevisionHashLabelKey`).
pub const REVISION_HASH: &str = "controller-revision-hash";

fn text<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn int(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// `spec.replicas` of a workload (default 1, `pkg/apis/apps/v1/defaults.go`).
pub fn replicas(w: &Value) -> i64 {
    w.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1).max(0)
}

/// `LabelSelectorAsSelector`: every `matchLabels` pair and every `matchExpressions` requirement.
/// An absent selector selects nothing; an empty one everything.
pub fn selects(selector: Option<&Value>, labels: &Value) -> bool {
    let Some(sel) = selector.filter(|s| s.is_object()) else { return false };
    let pairs = sel.get("matchLabels").and_then(Value::as_object);
    let labels_ok = pairs.is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let exprs = sel.get("matchExpressions").and_then(Value::as_array).cloned().unwrap_or_default();
    labels_ok
        && exprs.iter().all(|e| {
            let have = labels.get(text(e, "/key")).and_then(Value::as_str);
            let values: Vec<&str> =
                e.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
            match text(e, "/operator") {
                "In" => have.is_some_and(|h| values.contains(&h)),
                "NotIn" => have.is_none_or(|h| !values.contains(&h)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
}

/// What the API refuses in a Deployment's, ReplicaSet's, StatefulSet's or DaemonSet's selector
/// (`ValidateDeploymentSpec` and its siblings in `pkg/apis/apps/validation/validation.go`):
/// `(field, message)`.
pub fn selector_problem(w: &Value) -> Option<(String, String)> {
    let kind = text(w, "/kind").to_ascii_lowercase();
    let sel = w.pointer("/spec/selector");
    let empty = sel.and_then(Value::as_object).is_none_or(|s| {
        s.get("matchLabels").and_then(Value::as_object).is_none_or(|m| m.is_empty())
            && s.get("matchExpressions").and_then(Value::as_array).is_none_or(|e| e.is_empty())
    });
    if empty {
        return Some(("spec.selector".into(), format!("Required value: empty selector is invalid for {kind}")));
    }
    let labels = w.pointer("/spec/template/metadata/labels").cloned().unwrap_or_else(|| json!({}));
    if !selects(sel, &labels) {
        return Some((
            "spec.template.metadata.labels".into(),
            format!("Invalid value: {labels}: `selector` does not match template `labels`"),
        ));
    }
    None
}

/// A controller `ownerReference` to `owner` (apps/v1 `kind`).
fn owner_ref(owner: &Value, kind: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": kind, "name": text(owner, "/metadata/name"),
        "uid": text(owner, "/metadata/uid"), "controller": true, "blockOwnerDeletion": true})
}

/// The controller `ownerReference` of `obj`, as (kind, name, uid).
pub fn controller_of(obj: &Value) -> Option<(String, String, String)> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r["controller"] == true)
        .map(|r| (text(r, "/kind").to_string(), text(r, "/name").to_string(), text(r, "/uid").to_string()))
}

/// `GetPodFromTemplate`: a Pod named `name` from `owner`'s (of `kind`) pod template, with
/// `extra` labels over the template's.
pub fn pod_from_template(owner: &Value, kind: &str, name: &str, extra: &[(&str, &str)]) -> Value {
    let t = owner.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
    let mut labels = t.pointer("/metadata/labels").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
    for (k, v) in extra {
        labels[*k] = json!(v);
    }
    let mut metadata = json!({"name": name, "namespace": text(owner, "/metadata/namespace"), "labels": labels,
        "ownerReferences": [owner_ref(owner, kind)]});
    if let Some(a) = t.pointer("/metadata/annotations").filter(|a| a.is_object()) {
        metadata["annotations"] = a.clone();
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": t.get("spec").cloned().unwrap_or_else(|| json!({}))})
}

/// The Pods among `objects` of namespace `ns` labelled `app: <app>`, as (name, node, Ready), by
/// name: what tests read of a workload.
pub fn app_pods(objects: &[Value], ns: &str, app: &str) -> Vec<(String, String, bool)> {
    let mut out: Vec<(String, String, bool)> = objects
        .iter()
        .filter(|o| o["kind"] == "Pod" && o["metadata"]["namespace"] == ns && o["metadata"]["labels"]["app"] == app)
        .map(|p| (text(p, "/metadata/name").to_string(), text(p, "/spec/nodeName").to_string(), daemonset::ready(p)))
        .collect();
    out.sort();
    out
}

// ---- the scheduler ----------------------------------------------------------------------------

/// The Node the default scheduler binds a pod with spec `spec` to, among `nodes`, given the
/// `pods` already bound (by `spec.nodeName`); else the reason it stays Pending, as the
/// scheduler's `FitError` words it ("0/3 nodes are available: ...").
pub fn schedule(spec: &Value, nodes: &[Value], pods: &[Value]) -> Result<String, String> {
    let mut reasons: std::collections::BTreeMap<String, usize> = Default::default();
    let mut fit: Vec<(usize, &str)> = Vec::new();
    for node in nodes {
        let name = text(node, "/metadata/name");
        match node_filter(spec, node) {
            Err(why) => *reasons.entry(why).or_default() += 1,
            Ok(()) => fit.push((pods.iter().filter(|p| text(p, "/spec/nodeName") == name).count(), name)),
        }
    }
    fit.sort();
    if let Some((_, name)) = fit.first() {
        return Ok(name.to_string());
    }
    let why: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    let tail = if why.is_empty() { String::new() } else { format!(" {}.", why.join(", ")) };
    Err(format!("0/{} nodes are available:{tail}", nodes.len()))
}

/// The scheduler's filters for one Node, in the framework's order.
fn node_filter(spec: &Value, node: &Value) -> Result<(), String> {
    let mut tolerations = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        tolerations.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
    }
    let cordon = json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"});
    if node.pointer("/spec/unschedulable") == Some(&json!(true)) && !tolerations.iter().any(|t| tolerates(t, &cordon)) {
        return Err("node(s) were unschedulable".into());
    }
    let labels = node.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}));
    if !daemonset::node_selector_holds(spec.get("nodeSelector"), &labels)
        || !daemonset::required_affinity_holds(
            spec.pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"),
            &labels,
        )
    {
        return Err("node(s) didn't match Pod's node affinity/selector".into());
    }
    let mut taints: Vec<Value> = node.pointer("/spec/taints").and_then(Value::as_array).cloned().unwrap_or_default();
    if !node_ready(node) {
        taints.push(json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}));
    }
    for taint in &taints {
        let hard = matches!(taint.get("effect").and_then(Value::as_str), Some("NoSchedule" | "NoExecute"));
        if hard && !tolerations.iter().any(|t| tolerates(t, taint)) {
            let (k, v) = (text(taint, "/key"), text(taint, "/value"));
            let shown = if v.is_empty() { k.to_string() } else { format!("{k}: {v}") };
            return Err(format!("node(s) had untolerated taint {{{shown}}}"));
        }
    }
    Ok(())
}

fn tolerates(t: &Value, taint: &Value) -> bool {
    daemonset::tolerates(t, taint)
}

/// A Node's `Ready` condition.
pub fn node_ready(node: &Value) -> bool {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The status of a pod no Node takes (`PodScheduled` False, reason `Unschedulable`).
pub fn pending_status(why: &str) -> Value {
    json!({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why}]})
}

// ---- ReplicaSets ------------------------------------------------------------------------------

/// The pods a ReplicaSet of `want` replicas deletes from `pods` (`getPodsToDelete`: unscheduled
/// before scheduled, not ready before ready, then the newest by name): their names.
pub fn pods_to_delete(pods: &[Value], want: i64) -> Vec<String> {
    let extra = pods.len() as i64 - want;
    if extra <= 0 {
        return Vec::new();
    }
    let mut ranked: Vec<&Value> = pods.iter().collect();
    ranked.sort_by_key(|p| {
        (!text(p, "/spec/nodeName").is_empty(), daemonset::ready(p), std::cmp::Reverse(text(p, "/metadata/name")))
    });
    ranked.iter().take(extra as usize).map(|p| text(p, "/metadata/name").to_string()).collect()
}

/// `calculateStatus` of a ReplicaSet with `pods` (`replicas` always shown, the other counts
/// only when not 0, as the API's `omitempty` fields).
pub fn replicaset_status(rs: &Value, pods: &[Value], failure: Option<Value>) -> Value {
    let sel = rs.pointer("/spec/selector");
    let template_labels = rs.pointer("/spec/template/metadata/labels").cloned().unwrap_or_else(|| json!({}));
    let fully = pods
        .iter()
        .filter(|p| {
            let l = p.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}));
            selects(sel, &l) && template_labels.as_object().is_none_or(|m| m.iter().all(|(k, v)| l.get(k) == Some(v)))
        })
        .count() as i64;
    let ready = pods.iter().filter(|p| daemonset::ready(p)).count() as i64;
    let mut st = json!({"replicas": pods.len() as i64, "observedGeneration": int(rs, "/metadata/generation").max(1)});
    for (f, n) in [("fullyLabeledReplicas", fully), ("readyReplicas", ready), ("availableReplicas", ready)] {
        if n > 0 {
            st[f] = json!(n);
        }
    }
    if let Some(c) = failure {
        st["conditions"] = json!([c]);
    }
    st
}

// ---- Deployments ------------------------------------------------------------------------------

/// `intstr.GetScaledValueFromIntOrPercent`: an integer, or a percentage of `total` rounded up or
/// down.
fn scaled(v: Option<&Value>, total: i64, round_up: bool, default: &str) -> i64 {
    let v = v.cloned().unwrap_or_else(|| json!(default));
    if let Some(n) = v.as_i64() {
        return n;
    }
    let pct: i64 = v.as_str().and_then(|s| s.strip_suffix('%')).and_then(|p| p.parse().ok()).unwrap_or(0);
    if round_up { (pct * total + 99) / 100 } else { pct * total / 100 }
}

/// `ResolveFenceposts` of a RollingUpdate Deployment: (max surge, max unavailable).
pub fn fenceposts(d: &Value) -> (i64, i64) {
    let want = replicas(d);
    let ru = d.pointer("/spec/strategy/rollingUpdate");
    let surge = scaled(ru.and_then(|r| r.get("maxSurge")), want, true, "25%");
    let mut unavailable = scaled(ru.and_then(|r| r.get("maxUnavailable")), want, false, "25%");
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    (surge, unavailable)
}

/// Whether the Deployment rolls by `Recreate` (else `RollingUpdate`, the default).
pub fn recreate(d: &Value) -> bool {
    text(d, "/spec/strategy/type") == "Recreate"
}

/// `MaxUnavailable`: 0 for Recreate or no replicas, at most `spec.replicas`.
pub fn max_unavailable(d: &Value) -> i64 {
    if recreate(d) || replicas(d) == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas(d))
}

/// The ReplicaSet a Deployment makes for its current template, of hash `hash`, revision
/// `revision`, `size` replicas (`getNewReplicaSet`).
pub fn new_replicaset(d: &Value, hash: &str, revision: i64, size: i64) -> Value {
    let name = format!("{}-{hash}", text(d, "/metadata/name"));
    let mut template = d.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
    template["metadata"]["labels"][POD_TEMPLATE_HASH] = json!(hash);
    let mut selector = d.pointer("/spec/selector").cloned().unwrap_or_else(|| json!({}));
    selector["matchLabels"][POD_TEMPLATE_HASH] = json!(hash);
    let labels = template["metadata"]["labels"].clone();
    let (surge, _) = fenceposts(d);
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": text(d, "/metadata/namespace"), "labels": labels,
            "annotations": {REVISION: revision.to_string(),
                "deployment.kubernetes.io/desired-replicas": replicas(d).to_string(),
                "deployment.kubernetes.io/max-replicas": (replicas(d) + if recreate(d) { 0 } else { surge }).to_string()},
            "ownerReferences": [owner_ref(d, "Deployment")]},
        "spec": {"replicas": size, "minReadySeconds": d.pointer("/spec/minReadySeconds").cloned().unwrap_or(json!(0)),
            "selector": selector, "template": template}})
}

/// A ReplicaSet's `spec.replicas`.
pub fn size(rs: &Value) -> i64 {
    replicas(rs)
}

/// The sizes a Deployment's rollout gives its ReplicaSets this round: `new` (with its status),
/// `old` (oldest first, with their status). Returns the new size and the old sizes
/// (`rolloutRolling`/`rolloutRecreate`, one step).
pub fn rollout(d: &Value, new: &Value, old: &[Value]) -> (i64, Vec<i64>) {
    let want = replicas(d);
    let mut old_sizes: Vec<i64> = old.iter().map(size).collect();
    let new_size = size(new);
    if d.pointer("/spec/paused") == Some(&json!(true)) {
        return (new_size, old_sizes);
    }
    if recreate(d) {
        // Old ReplicaSets to 0; the new one up once no old pod is left.
        old_sizes.iter_mut().for_each(|s| *s = 0);
        let old_pods: i64 = old.iter().map(|r| int(r, "/status/replicas")).sum();
        let all_old_zero = old.iter().all(|r| size(r) == 0);
        return (if all_old_zero && old_pods == 0 { want } else { new_size }, old_sizes);
    }
    // reconcileNewReplicaSet.
    if new_size > want {
        return (want, old_sizes);
    }
    if new_size < want {
        let (surge, _) = fenceposts(d);
        let current: i64 = new_size + old_sizes.iter().sum::<i64>();
        let max_total = want + surge;
        if current < max_total {
            let up = (max_total - current).min(want - new_size);
            return (new_size + up, old_sizes);
        }
    }
    // reconcileOldReplicaSets.
    let old_count: i64 = old_sizes.iter().sum();
    if old_count == 0 {
        return (new_size, old_sizes);
    }
    let all_count = old_count + new_size;
    let min_available = want - max_unavailable(d);
    let new_unavailable = new_size - int(new, "/status/availableReplicas");
    let mut max_down = all_count - min_available - new_unavailable;
    if max_down <= 0 {
        return (new_size, old_sizes);
    }
    // cleanupUnhealthyReplicas: unavailable old replicas first.
    let mut cleaned = 0;
    for (i, r) in old.iter().enumerate() {
        if cleaned >= max_down {
            break;
        }
        let unhealthy = old_sizes[i] - int(r, "/status/availableReplicas");
        if old_sizes[i] == 0 || unhealthy <= 0 {
            continue;
        }
        let down = (max_down - cleaned).min(unhealthy);
        old_sizes[i] -= down;
        cleaned += down;
    }
    max_down -= cleaned;
    // scaleDownOldReplicaSetsForRollingUpdate.
    let available: i64 =
        int(new, "/status/availableReplicas") + old.iter().map(|r| int(r, "/status/availableReplicas")).sum::<i64>();
    if available > min_available && max_down > 0 {
        let mut left = available - min_available;
        for s in old_sizes.iter_mut() {
            if left <= 0 {
                break;
            }
            let down = (*s).min(left);
            *s -= down;
            left -= down;
        }
    }
    (new_size, old_sizes)
}

/// `calculateStatus` of a Deployment over its ReplicaSets (`new` among them): the counts (only
/// when not 0) and `observedGeneration`; conditions are the caller's.
pub fn deployment_counts(d: &Value, new: Option<&Value>, all: &[Value]) -> Value {
    let sum = |ptr: &str| all.iter().map(|r| int(r, ptr)).sum::<i64>();
    let available = sum("/status/availableReplicas");
    let total: i64 = all.iter().map(size).sum();
    let mut st = json!({"observedGeneration": int(d, "/metadata/generation").max(1)});
    for (f, n) in [
        ("replicas", sum("/status/replicas")),
        ("updatedReplicas", new.map(|r| int(r, "/status/replicas")).unwrap_or(0)),
        ("readyReplicas", sum("/status/readyReplicas")),
        ("availableReplicas", available),
        ("unavailableReplicas", (total - available).max(0)),
    ] {
        if n > 0 {
            st[f] = json!(n);
        }
    }
    st
}

/// `DeploymentComplete`: every replica updated and available, none old, the spec observed.
pub fn complete(d: &Value, status: &Value) -> bool {
    let want = replicas(d);
    int(status, "/updatedReplicas") == want
        && int(status, "/replicas") == want
        && int(status, "/availableReplicas") == want
        && int(status, "/observedGeneration") >= int(d, "/metadata/generation")
}

// ---- StatefulSets -----------------------------------------------------------------------------

/// The ordinal of a StatefulSet pod named `<set>-<ordinal>`.
pub fn ordinal(set: &str, pod: &str) -> Option<i64> {
    pod.strip_prefix(set)?.strip_prefix('-')?.parse().ok()
}

/// `newVersionedStatefulSetPod`: the pod of ordinal `i` at revision `revision`.
pub fn stateful_pod(s: &Value, i: i64, revision: &str) -> Value {
    let set = text(s, "/metadata/name");
    let name = format!("{set}-{i}");
    let index = i.to_string();
    let mut pod = pod_from_template(
        s,
        "StatefulSet",
        &name,
        &[
            (REVISION_HASH, revision),
            ("statefulset.kubernetes.io/pod-name", &name),
            ("apps.kubernetes.io/pod-index", &index),
        ],
    );
    pod["spec"]["hostname"] = json!(name);
    if let Some(svc) = s.pointer("/spec/serviceName").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        pod["spec"]["subdomain"] = json!(svc);
    }
    pod
}

/// Whether the StatefulSet creates its pods one by one (`OrderedReady`, the default).
pub fn ordered(s: &Value) -> bool {
    text(s, "/spec/podManagementPolicy") != "Parallel"
}

/// The StatefulSet's status over its `pods` (by ordinal), the template's `revision`.
pub fn statefulset_status(s: &Value, pods: &[Value], revision: &str, current_before: &str) -> Value {
    let rev = |p: &&Value| text(p, &format!("/metadata/labels/{REVISION_HASH}")).to_string();
    let updated = pods.iter().filter(|p| rev(p) == revision).count() as i64;
    let ready = pods.iter().filter(|p| daemonset::ready(p)).count() as i64;
    let done = updated == pods.len() as i64 && pods.len() as i64 == replicas(s);
    let current_rev = if done || current_before.is_empty() { revision.to_string() } else { current_before.to_string() };
    let current = pods.iter().filter(|p| rev(p) == current_rev).count() as i64;
    let mut st = json!({"observedGeneration": int(s, "/metadata/generation").max(1), "replicas": pods.len() as i64,
        "currentRevision": current_rev, "updateRevision": revision, "collisionCount": 0});
    for (f, n) in [
        ("readyReplicas", ready),
        ("currentReplicas", current),
        ("updatedReplicas", updated),
        ("availableReplicas", ready),
    ] {
        if n > 0 {
            st[f] = json!(n);
        }
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy(replicas: i64, strategy: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default", "uid": "u", "generation": 1},
            "spec": {"replicas": replicas, "strategy": strategy, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}}}})
    }

    fn rs(size: i64, available: i64, pods: i64) -> Value {
        json!({"spec": {"replicas": size}, "status": {"replicas": pods, "availableReplicas": available}})
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        assert_eq!(fenceposts(&deploy(3, json!({}))), (1, 0));
        assert_eq!(fenceposts(&deploy(4, json!({}))), (1, 1));
        let zero = json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}});
        assert_eq!(fenceposts(&deploy(4, zero)), (0, 1), "never both 0");
        assert_eq!(max_unavailable(&deploy(2, json!({"type": "Recreate"}))), 0);
    }

    #[test]
    fn a_rolling_update_surges_then_scales_the_old_set_down_as_the_new_one_becomes_available() {
        let d = deploy(3, json!({}));
        // New template: one surge pod first (3 + 1 allowed).
        assert_eq!(rollout(&d, &rs(0, 0, 0), &[rs(3, 3, 3)]), (1, vec![3]));
        // The surge pod is not available yet: nothing may go (minAvailable 3).
        assert_eq!(rollout(&d, &rs(1, 0, 1), &[rs(3, 3, 3)]), (1, vec![3]));
        // Available: one old pod goes.
        assert_eq!(rollout(&d, &rs(1, 1, 1), &[rs(3, 3, 3)]), (1, vec![2]));
        // Then the new one grows again, and so on to 3/0.
        assert_eq!(rollout(&d, &rs(1, 1, 1), &[rs(2, 2, 3)]), (2, vec![2]));
        assert_eq!(rollout(&d, &rs(3, 3, 3), &[rs(0, 0, 0)]), (3, vec![0]));
    }

    #[test]
    fn recreate_scales_the_new_set_up_only_once_no_old_pod_is_left() {
        let d = deploy(2, json!({"type": "Recreate"}));
        assert_eq!(rollout(&d, &rs(0, 0, 0), &[rs(2, 2, 2)]), (0, vec![0]));
        assert_eq!(rollout(&d, &rs(0, 0, 0), &[rs(0, 0, 1)]), (0, vec![0]), "a pod still terminating");
        assert_eq!(rollout(&d, &rs(0, 0, 0), &[rs(0, 0, 0)]), (2, vec![0]));
    }

    #[test]
    fn a_selector_must_select_the_template() {
        let mut d = deploy(1, json!({}));
        d["kind"] = json!("Deployment");
        assert_eq!(selector_problem(&d), None);
        d["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
        let (field, msg) = selector_problem(&d).unwrap();
        assert_eq!(field, "spec.template.metadata.labels");
        assert!(msg.contains("`selector` does not match template `labels`"), "{msg}");
        d["spec"]["selector"] = json!({});
        assert!(selector_problem(&d).unwrap().1.contains("empty selector is invalid for deployment"));
        let expr = json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]});
        assert!(selects(Some(&expr), &json!({"app": "web"})));
        assert!(!selects(Some(&expr), &json!({"app": "db"})));
        assert!(!selects(None, &json!({"app": "web"})), "no selector selects nothing");
    }

    #[test]
    fn the_scheduler_skips_cordoned_tainted_and_unselected_nodes_and_spreads_by_pod_count() {
        let node = |n: &str, spec: Value| {
            json!({"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n, "disk": "ssd"}}, "spec": spec,
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        };
        let nodes = [
            node("a", json!({"unschedulable": true})),
            node("b", json!({"taints": [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]})),
            node("c", json!({})),
            node("d", json!({})),
        ];
        let on = |n: &str| json!({"spec": {"nodeName": n}});
        assert_eq!(schedule(&json!({}), &nodes, &[on("c")]), Ok("d".into()));
        assert_eq!(schedule(&json!({}), &nodes, &[]), Ok("c".into()), "ties by name");
        let tolerant = json!({"tolerations": [{"key": "gpu", "operator": "Exists"}]});
        assert_eq!(schedule(&tolerant, &nodes, &[on("c"), on("d")]), Ok("b".into()));
        let nowhere = json!({"nodeSelector": {"disk": "hdd"}});
        let err = schedule(&nowhere, &nodes, &[]).unwrap_err();
        assert_eq!(
            err,
            "0/4 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, 1 node(s) were unschedulable."
        );
        let only_a = json!({"nodeSelector": {"kubernetes.io/hostname": "a"}});
        assert!(schedule(&only_a, &nodes, &[]).unwrap_err().contains("1 node(s) were unschedulable"));
    }

    #[test]
    fn a_replicaset_deletes_unscheduled_and_unready_pods_first() {
        let pod = |n: &str, node: &str, ready: bool| {
            json!({"metadata": {"name": n}, "spec": {"nodeName": node},
                "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
        };
        let pods = [pod("a", "n1", true), pod("b", "", false), pod("c", "n1", false), pod("d", "n2", true)];
        assert_eq!(pods_to_delete(&pods, 2), ["b", "c"]);
        assert_eq!(pods_to_delete(&pods, 4), Vec::<String>::new());
    }

    #[test]
    fn statefulset_pods_are_numbered_and_named_for_their_service() {
        let s = json!({"metadata": {"name": "db", "namespace": "data", "uid": "u"},
            "spec": {"serviceName": "db", "template": {"metadata": {"labels": {"app": "db"}}, "spec": {}}}});
        let p = stateful_pod(&s, 2, "db-abc");
        assert_eq!(p["metadata"]["name"], "db-2");
        assert_eq!(p["metadata"]["labels"]["apps.kubernetes.io/pod-index"], "2");
        assert_eq!(p["metadata"]["labels"][REVISION_HASH], "db-abc");
        assert_eq!(p["spec"]["subdomain"], "db");
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "StatefulSet");
        assert_eq!(ordinal("db", "db-12"), Some(12));
        assert_eq!(ordinal("db", "dbx-1"), None);
    }
}
