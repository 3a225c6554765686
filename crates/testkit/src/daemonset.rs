//! What the DaemonSet controller and the kubelets make of a DaemonSet, for the simulated
//! controllers of [`crate::kube_api`]: which Nodes get one of its Pods, the Pod it creates there,
//! and the status the Node's kubelet reports for it. Pure functions over JSON objects; the API
//! double stores what they return. See the DaemonSet row of "Controllers (opt-in)" in `kube_api.md`.
//!
//! What it follows (kubernetes/kubernetes):
//! * which Nodes: `pkg/controller/daemon/daemon_controller.go` `NodeShouldRunDaemonPod` →
//!   `predicates`: the pod's `nodeName` if set, its `nodeSelector` and required node affinity
//!   (`component-helpers/scheduling/corev1/nodeaffinity`, `GetRequiredNodeAffinity(pod).Match`:
//!   every `nodeSelector` label, and one of the `nodeSelectorTerms` whose `matchExpressions` all
//!   hold), and every `NoSchedule`/`NoExecute` taint of the Node tolerated
//!   (`v1helper.FindMatchingUntoleratedTaint`), with the tolerations every daemon pod gets
//!   (`pkg/controller/daemon/util/daemonset_util.go` `AddOrUpdateDaemonPodTolerations`:
//!   not-ready and unreachable `NoExecute`, disk/memory/pid-pressure and unschedulable
//!   `NoSchedule`, network-unavailable for host-network pods), so a cordoned or NotReady Node
//!   keeps its daemon pod;
//! * the Pod: named `<daemonset>-<5 random characters>` (`generateName`), the template's labels
//!   and spec, `spec.nodeName` set (the controller binds it itself), a controller
//!   `ownerReference` to the DaemonSet and the label `controller-revision-hash` of its template
//!   (`pkg/controller/daemon/util`, `CreatePodTemplate`);
//! * its status, as the kubelet reports it (`pkg/kubelet/status/generate.go`
//!   `GeneratePodReadyCondition`: Ready only when every container is ready, else reason
//!   `ContainersNotReady`, "containers with unready status: [...]"), and as the node lifecycle
//!   controller marks the pods of a NotReady Node (`pkg/controller/nodelifecycle`,
//!   `MarkPodsNotReady`: Ready False).

use serde_json::{Value, json};

/// Whether a daemon pod with pod spec `spec` should run on `node`.
pub fn should_run(spec: &Value, node: &Value) -> bool {
    let name = node.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    if let Some(want) = spec.get("nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        return want == name;
    }
    let labels = node.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}));
    node_selector_holds(spec.get("nodeSelector"), &labels)
        && required_affinity_holds(
            spec.pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"),
            &labels,
        )
        && taints_tolerated(spec, node)
}

pub(crate) fn node_selector_holds(selector: Option<&Value>, labels: &Value) -> bool {
    selector.and_then(Value::as_object).is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

/// `nodeSelectorTerms` are ORed, each term's `matchExpressions` ANDed (an empty term matches
/// nothing); operators In, NotIn, Exists, DoesNotExist (Gt/Lt: not used by fabric's objects,
/// treated as not matching).
pub(crate) fn required_affinity_holds(required: Option<&Value>, labels: &Value) -> bool {
    let Some(terms) = required.and_then(|r| r.get("nodeSelectorTerms")).and_then(Value::as_array) else {
        return true;
    };
    terms.iter().any(|t| {
        let exprs = t.get("matchExpressions").and_then(Value::as_array).cloned().unwrap_or_default();
        !exprs.is_empty()
            && exprs.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                let have = labels.get(key).and_then(Value::as_str);
                let values: Vec<&str> =
                    e.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
                match e.get("operator").and_then(Value::as_str).unwrap_or_default() {
                    "In" => have.is_some_and(|h| values.contains(&h)),
                    "NotIn" => have.is_none_or(|h| !values.contains(&h)),
                    "Exists" => have.is_some(),
                    "DoesNotExist" => have.is_none(),
                    _ => false,
                }
            })
    })
}

/// The tolerations every daemon pod gets besides its own (`AddOrUpdateDaemonPodTolerations`).
fn daemon_tolerations(spec: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
    .iter()
    .map(|(k, e)| json!({"key": k, "operator": "Exists", "effect": e}))
    .collect();
    if spec.get("hostNetwork") == Some(&json!(true)) {
        out.push(
            json!({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}),
        );
    }
    out
}

/// Kubernetes's toleration rule (`k8s.io/api/core/v1` `Toleration.ToleratesTaint`): an empty
/// effect matches every effect; `Exists` with no key matches every taint; `Equal` (the
/// default) needs the same key and value.
pub(crate) fn tolerates(t: &Value, taint: &Value) -> bool {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let effect = s(t, "effect");
    if !effect.is_empty() && effect != s(taint, "effect") {
        return false;
    }
    let key = s(t, "key");
    if !key.is_empty() && key != s(taint, "key") {
        return false;
    }
    match s(t, "operator").as_str() {
        "Exists" => true,
        "" | "Equal" => s(t, "value") == s(taint, "value"),
        _ => false,
    }
}

fn taints_tolerated(spec: &Value, node: &Value) -> bool {
    let mut tolerations: Vec<Value> = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    tolerations.extend(daemon_tolerations(spec));
    node.pointer("/spec/taints").and_then(Value::as_array).into_iter().flatten().all(|taint| {
        !matches!(taint.get("effect").and_then(Value::as_str), Some("NoSchedule" | "NoExecute"))
            || tolerations.iter().any(|t| tolerates(t, taint))
    })
}

/// The Pod the controller creates for DaemonSet `ds` (stored, with uid) on `node`, named `name`,
/// of template revision `hash`.
pub fn pod(ds: &Value, node: &str, name: &str, hash: &str) -> Value {
    let ns = ds.pointer("/metadata/namespace").cloned().unwrap_or(json!("default"));
    let mut labels = ds.pointer("/spec/template/metadata/labels").cloned().unwrap_or_else(|| json!({}));
    labels["controller-revision-hash"] = json!(hash);
    let mut spec = ds.pointer("/spec/template/spec").cloned().unwrap_or_else(|| json!({}));
    spec["nodeName"] = json!(node);
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                "name": ds.pointer("/metadata/name").cloned().unwrap_or_default(),
                "uid": ds.pointer("/metadata/uid").cloned().unwrap_or_default(),
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": spec})
}

/// The status the kubelet of a Node reports for `pod`: `node_ready` is the Node's Ready
/// condition; `crashing` the containers that exit at start on that Node (they wait in
/// `CrashLoopBackOff`).
pub fn pod_status(pod: &Value, node_ready: bool, crashing: &[String]) -> Value {
    let containers = pod.pointer("/spec/containers").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut unready = Vec::new();
    let statuses: Vec<Value> = containers
        .iter()
        .map(|c| {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
            let crash = crashing.iter().any(|x| x == name);
            if crash {
                unready.push(name.to_string());
            }
            let state = if crash { json!({"waiting": {"reason": "CrashLoopBackOff"}}) } else { json!({"running": {}}) };
            json!({"name": name, "image": image, "imageID": "", "ready": !crash && node_ready,
                "restartCount": if crash { 4 } else { 0 }, "started": !crash, "state": state})
        })
        .collect();
    let ready = if !node_ready {
        json!({"type": "Ready", "status": "False"})
    } else if unready.is_empty() {
        json!({"type": "Ready", "status": "True"})
    } else {
        json!({"type": "Ready", "status": "False", "reason": "ContainersNotReady",
            "message": format!("containers with unready status: [{}]", unready.join(" "))})
    };
    json!({"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}, ready],
        "containerStatuses": statuses})
}

/// Whether a Pod is Ready (its `Ready` condition).
pub fn ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type") == Some(&json!("Ready")) && c.get("status") == Some(&json!("True")))
}
