//! What every Kubernetes object fabric builds shares: the metadata and labels fabric finds its
//! objects by ([`object`]), fabric's own annotations and node labels, the GPU and external-host
//! taints, the K3s HelmChart wrapper ([`helm_chart`], helm.cattle.io/v1), and plain core objects
//! (Namespace, Secret, ServiceAccount, ClusterRoleBinding, ConfigMap).
//!
//! Each upstream system's objects, and the upstream facts they rely on, are in a module of its
//! own: `desired::cilium`, `desired::karmada`, `desired::argocd`, `desired::kueue`,
//! `desired::kai`, `desired::nvidia`, `desired::tensorzero` (chart sources: `desired::charts`).
//! They build on this module; it imports none of them.
//!
//! Every builder is a pure function of the topology: same input, same bytes. Objects carry the
//! labels fabric uses to find what it created (and so what it may prune). Field names follow the
//! upstream schemas in `../shared/specs/crds`; the conformance test validates every object whose
//! schema is there.

use serde_json::{Map, Value, json};

pub use super::charts::*;
use crate::topology::Topology;
use crate::topology::model::*;

/// Label on every object fabric creates; the value is the fabric's name.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const PART_OF: &str = "app.kubernetes.io/part-of";
/// Taint and label of hosts that join a cluster as external workloads (`mesh.join: k3s-agent`).
pub const EXTERNAL_TAINT: &str = "fabric.io/external-workload=true:NoSchedule";
pub const EXTERNAL_LABEL: &str = "fabric.io/external-workload";
/// On a Secret: the Secret (`<target>/<namespace>/<name>`) whose data fabric copies into it at
/// apply time, and which keys (`from=to,…`).
pub const COPY_FROM: &str = "fabric.io/copy-from";
pub const COPY_KEYS: &str = "fabric.io/copy-keys";
/// On a Secret with a copy source: what fabric makes of the source's `token` and `ca.crt`
/// instead of copying keys (`kubeconfig` or `argocd-cluster`), and the API server it names.
pub const COPY_AS: &str = "fabric.io/copy-as";
pub const SERVER: &str = "fabric.io/server";
/// The cluster name an ArgoCD cluster secret gives the server (Applications' `destination.name`).
pub const CLUSTER_NAME: &str = "fabric.io/cluster-name";
/// On a Secret: fabric generates its content when it does not exist (`ca`: a CA key pair).
pub const GENERATE: &str = "fabric.io/generate";
/// Node label with the GPU model, as the seed's override policies select on.
pub const GPU_MODEL_LABEL: &str = "gpu.model";
/// Node label with the memory of one of the node's GPUs, in GiB.
pub const GPU_MEMORY_LABEL: &str = "gpu.memory-gib";
/// Node label with the number of GPUs of the node.
pub const GPU_COUNT_LABEL: &str = "gpu.count";
/// Node label with one GPU's memory in MiB, as NVIDIA's GPU feature discovery names it: KAI
/// Scheduler reads it to turn a pod's `gpu-memory` (MiB) into a share of a device.
pub const NVIDIA_GPU_MEMORY_LABEL: &str = "nvidia.com/gpu.memory";

/// The labels every GPU node carries, set by fabric (D.1): the one set that Karmada's
/// overriders (C.6), Kueue's ResourceFlavors (D.1) and the GPU services' node selectors select
/// on. The seed's own label, `gpu.model`, leads; the memory and count make a node's capacity
/// selectable without knowing models; `nvidia.com/gpu.memory` (MiB) is KAI Scheduler's.
pub fn gpu_labels(g: &Gpu) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(GPU_MODEL_LABEL.into(), json!(g.model));
    m.insert(GPU_MEMORY_LABEL.into(), json!(g.memory_gib.to_string()));
    m.insert(GPU_COUNT_LABEL.into(), json!(g.count.to_string()));
    m.insert(NVIDIA_GPU_MEMORY_LABEL.into(), json!((u64::from(g.memory_gib) * 1024).to_string()));
    m
}

/// A Node's labels as fabric sets them: applied server-side with fabric's field manager, so
/// fabric owns these labels and nothing else of the Node (the kubelet registers and owns it).
/// It carries no managed-by label: the Node is not fabric's, and fabric never creates or
/// deletes one (`providers::kube` refuses a Node that does not exist).
pub fn node_labels(name: &str, labels: Map<String, Value>) -> Value {
    json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": name, "labels": labels } })
}

/// The taint of GPU nodes kept for GPU work (`cluster.gpu_taint`). The key is the GPU's
/// resource name, as Kubernetes's "nodes with special hardware" example has it: the
/// ExtendedResourceToleration admission plugin, where it is on, and the NVIDIA device plugin's
/// chart tolerate it without fabric.
pub const GPU_TAINT: &str = "nvidia.com/gpu=present:NoSchedule";

/// A GPU node as D.1 applies it: its labels, and the GPU taint when the cluster keeps its GPU
/// nodes for GPU work. `spec.taints` is an atomic list in the Node API: fabric then owns it
/// whole, so a taint another manager set makes the apply a conflict rather than dropping it.
pub fn gpu_node(s: &Site, name: &str, labels: Map<String, Value>) -> Value {
    let mut n = node_labels(name, labels);
    if s.cluster.gpu_taint {
        n["spec"] = json!({ "taints": [taint(GPU_TAINT)] });
    }
    n
}

/// A `key=value:Effect` taint as the Node API has it.
fn taint(text: &str) -> Value {
    let (kv, effect) = text.split_once(':').unwrap_or((text, ""));
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    json!({ "key": key, "value": value, "effect": effect })
}

pub fn object(t: &Topology, api: &str, kind: &str, name: &str, ns: Option<&str>) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert("name".into(), json!(name));
    if let Some(ns) = ns {
        meta.insert("namespace".into(), json!(ns));
    }
    meta.insert("labels".into(), json!({ MANAGED_BY: "fabric", PART_OF: t.name }));
    let mut m = Map::new();
    m.insert("apiVersion".into(), json!(api));
    m.insert("kind".into(), json!(kind));
    m.insert("metadata".into(), Value::Object(meta));
    m
}

pub fn with(mut m: Map<String, Value>, key: &str, v: Value) -> Value {
    m.insert(key.into(), v);
    Value::Object(m)
}

/// A K3s HelmChart (helm.cattle.io/v1) installing `source`'s chart with `values` (as YAML text).
pub fn helm_chart(
    t: &Topology,
    name: &str,
    source: &ChartSource,
    version: &str,
    target_ns: &str,
    values: &Value,
) -> Value {
    let mut spec = Map::new();
    if let Some(url) = source.repo_url() {
        spec.insert("repo".into(), json!(url));
    }
    spec.insert("chart".into(), json!(source.chart()));
    spec.insert("version".into(), json!(version));
    spec.insert("targetNamespace".into(), json!(target_ns));
    spec.insert("createNamespace".into(), json!(true));
    spec.insert("valuesContent".into(), json!(super::yaml::to_string(values)));
    with(object(t, "helm.cattle.io/v1", "HelmChart", name, Some("kube-system")), "spec", Value::Object(spec))
}

/// A K3s HelmChartConfig layering `values` over the HelmChart of the same name.
pub fn helm_chart_config(t: &Topology, name: &str, values: &Value) -> Value {
    let spec = json!({ "valuesContent": super::yaml::to_string(values) });
    with(object(t, "helm.cattle.io/v1", "HelmChartConfig", name, Some("kube-system")), "spec", spec)
}

/// Deep merge of `b` into `a` (objects merge, everything else is replaced).
pub fn merge(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in y {
                merge(x.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b.clone(),
    }
}

/// The taints a GPU service's pods tolerate at a site: the GPU nodes' when the cluster taints
/// them, the external hosts' when the service says so.
pub fn gpu_tolerations(s: &Site, svc: &Service) -> Vec<Value> {
    let mut out = Vec::new();
    if s.cluster.gpu_taint {
        out.push(toleration(GPU_TAINT));
    }
    if svc.tolerate_external {
        out.push(toleration(EXTERNAL_TAINT));
    }
    out
}

/// The toleration of a `key=value:Effect` taint.
pub fn toleration(text: &str) -> Value {
    let mut t = taint(text);
    t["operator"] = json!("Equal");
    t
}

// ---- Plain core objects -------------------------------------------------------------------

pub fn namespace(t: &Topology, name: &str) -> Value {
    Value::Object(object(t, "v1", "Namespace", name, None))
}

/// A Secret whose data fabric fills at apply time; rendered without data.
pub fn secret_placeholder(t: &Topology, name: &str, ns: &str, kind: &str) -> Value {
    let mut m = object(t, "v1", "Secret", name, Some(ns));
    m.insert("type".into(), json!(kind));
    Value::Object(m)
}

pub fn service_account(t: &Topology, name: &str, ns: &str) -> Value {
    Value::Object(object(t, "v1", "ServiceAccount", name, Some(ns)))
}

pub fn cluster_role_binding(t: &Topology, name: &str, sa: &str, ns: &str, role: &str) -> Value {
    let mut m = object(t, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", name, None);
    m.insert("roleRef".into(), json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role }));
    m.insert("subjects".into(), json!([{ "kind": "ServiceAccount", "name": sa, "namespace": ns }]));
    Value::Object(m)
}

pub fn config_map(t: &Topology, name: &str, ns: &str, key: &str, text: &str) -> Value {
    let mut m = object(t, "v1", "ConfigMap", name, Some(ns));
    m.insert("data".into(), json!({ key: text }));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KAI Scheduler's GPU reservation pods are bound with `spec.nodeName` and tolerate nothing
    /// (its binder's `createResourceReservationPod`): a `NoSchedule` taint leaves them alone (only
    /// the scheduler checks it), a `NoExecute` one would evict them and break GPU sharing.
    #[test]
    fn the_gpu_taint_is_noschedule_so_kai_reservation_pods_stay() {
        let t = taint(GPU_TAINT);
        assert_eq!(t["effect"], "NoSchedule", "{t}");
        assert_eq!(t["key"], "nvidia.com/gpu");
        let tol = toleration(GPU_TAINT);
        assert_eq!((tol["key"].clone(), tol["effect"].clone()), (t["key"].clone(), t["effect"].clone()));
    }
}
