//! KAI Scheduler's placement of GPU pods, as the test API server's simulated scheduler does it
//! for pods whose `schedulerName` is `kai-scheduler` (see the KAI Scheduler row of "Controllers (opt-in)" in `kube_api.md`).
//!
//! The rules, from `shared/specs/kai-scheduler/docs/`:
//! - `quickstart_README.md`: a pod is KAI's with `schedulerName: kai-scheduler` and the label
//!   `kai.scheduler/queue` naming its queue; `queues_README.md`: only leaf queues (no child)
//!   schedule. A pod without an existing leaf queue is not placed.
//! - `gpu-sharing_README.md`: the annotation `gpu-fraction: "0.5"` asks for a share of one GPU
//!   device, "other pods with total request of up to 0.5 GPU memory will be able to share this
//!   device" (shares on a device add up to at most 1); `gpu-memory: "2000"` asks for that many
//!   MiB of one device, the rest shared. A device's memory is the node label
//!   `nvidia.com/gpu.memory` (MiB per GPU, which GPU feature discovery or fabric's D.1 sets;
//!   KAI's `NvidiaGPUMemoryLabelName`): without it, the memory form cannot be placed.
//! - `quickstart_pods_gpu-pod.yaml`: a pod with `nvidia.com/gpu` limits takes whole devices.
//!
//! A node offers `status.allocatable["nvidia.com/gpu"]` devices (what the device plugin
//! reports), passes the pod's `nodeSelector`, and its `NoSchedule`/`NoExecute` taints must be
//! tolerated. Replicas are placed one by one, Deployments in creation order (then by name), a
//! share on the first device with room (nodes by name, devices by index). Not modelled: queue
//! quotas and fairness, preemption, reclaim, gangs, the reservation pods, binpack/spread choice.

use serde_json::{Map, Value};

/// The scheduler name that makes a pod KAI's.
pub const SCHEDULER: &str = "kai-scheduler";
/// The pod label that names a pod's queue.
pub const QUEUE_LABEL: &str = "kai.scheduler/queue";
/// The node label with one GPU's memory in MiB.
pub const GPU_MEMORY_LABEL: &str = "nvidia.com/gpu.memory";

/// Where one replica of a Deployment landed.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub namespace: String,
    pub deployment: String,
    pub replica: u32,
    pub node: String,
    /// The device index on the node, when the pod has GPUs.
    pub device: Option<u32>,
    /// The share of that device (1 for a whole one).
    pub share: f64,
}

/// Whether a Deployment's pods are KAI's.
pub fn is_kai(deploy: &Value) -> bool {
    deploy.pointer("/spec/template/spec/schedulerName").and_then(Value::as_str) == Some(SCHEDULER)
}

/// What one pod asks of the GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ask {
    None,
    Whole(u32),
    Fraction(f64),
    MemoryMib(f64),
}

fn ask(template: &Value) -> Option<Ask> {
    let ann = |k: &str| template.pointer("/metadata/annotations").and_then(|a| a.get(k)).and_then(Value::as_str);
    if let Some(f) = ann("gpu-fraction") {
        let f: f64 = f.parse().ok()?;
        return (f > 0.0 && f <= 1.0).then_some(Ask::Fraction(f));
    }
    if let Some(m) = ann("gpu-memory") {
        return m.parse().ok().map(Ask::MemoryMib);
    }
    let whole: u64 = template
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.pointer("/resources/limits/nvidia.com~1gpu"))
        .filter_map(|v| v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_u64()))
        .sum();
    Some(if whole > 0 { Ask::Whole(whole as u32) } else { Ask::None })
}

/// A node as KAI sees it: name, labels, taints and its devices' taken shares.
struct GpuNode<'a> {
    name: &'a str,
    node: &'a Value,
    memory_mib: Option<f64>,
    devices: Vec<f64>,
}

fn gpu_node(n: &Value) -> GpuNode<'_> {
    let count = n
        .pointer("/status/allocatable/nvidia.com~1gpu")
        .and_then(|v| v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_u64()))
        .unwrap_or(0);
    let memory_mib = n
        .pointer("/metadata/labels")
        .and_then(|l| l.get(GPU_MEMORY_LABEL))
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok());
    GpuNode {
        name: n.pointer("/metadata/name").and_then(Value::as_str).unwrap_or(""),
        node: n,
        memory_mib,
        devices: vec![0.0; count as usize],
    }
}

/// Whether the node passes the pod's node selector and its taints are tolerated.
fn fits_node(template: &Value, node: &Value) -> bool {
    let labels = node.pointer("/metadata/labels");
    let selector = template.pointer("/spec/nodeSelector").and_then(Value::as_object);
    let selected = selector.into_iter().flatten().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
    let tolerations: Vec<&Value> =
        template.pointer("/spec/tolerations").and_then(Value::as_array).into_iter().flatten().collect();
    let taints = node.pointer("/spec/taints").and_then(Value::as_array).into_iter().flatten();
    selected
        && taints
            .filter(|t| matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute")))
            .all(|t| tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// Kubernetes's toleration rule: the key matches (an empty key with `Exists` matches all), the
/// value too with `Equal` (the default), and the effect unless the toleration leaves it empty.
pub fn tolerates(tol: &Value, taint: &Value) -> bool {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let exists = s(tol, "operator") == "Exists";
    let key = (exists && s(tol, "key").is_empty()) || s(tol, "key") == s(taint, "key");
    let value = exists || s(tol, "value") == s(taint, "value");
    let effect = s(tol, "effect").is_empty() || s(tol, "effect") == s(taint, "effect");
    key && value && effect
}

/// Whether the pod's queue exists and is a leaf.
fn in_leaf_queue(template: &Value, queues: &[&Value]) -> bool {
    let Some(q) = template.pointer("/metadata/labels").and_then(|l| l.get(QUEUE_LABEL)).and_then(Value::as_str) else {
        return false;
    };
    let name = |v: &Value| v.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string);
    let parent = |v: &Value| v.pointer("/spec/parentQueue").and_then(Value::as_str).map(str::to_string);
    queues.iter().any(|v| name(v).as_deref() == Some(q)) && !queues.iter().any(|v| parent(v).as_deref() == Some(q))
}

/// Places one pod on the first node and device with room; its placement (node, device, share).
fn place_one(nodes: &mut [GpuNode<'_>], template: &Value, ask: Ask) -> Option<(String, Option<u32>, f64)> {
    for n in nodes.iter_mut().filter(|n| fits_node(template, n.node)) {
        let share = match ask {
            Ask::None => return Some((n.name.to_string(), None, 0.0)),
            Ask::Whole(k) => {
                let free: Vec<usize> = (0..n.devices.len()).filter(|d| n.devices[*d] == 0.0).take(k as usize).collect();
                if free.len() == k as usize {
                    free.iter().for_each(|d| n.devices[*d] = 1.0);
                    return Some((n.name.to_string(), free.first().map(|d| *d as u32), 1.0));
                }
                continue;
            }
            Ask::Fraction(f) => f,
            Ask::MemoryMib(m) => match n.memory_mib {
                Some(total) if total > 0.0 => m / total,
                _ => continue,
            },
        };
        if let Some(d) = n.devices.iter().position(|used| used + share <= 1.0 + 1e-9) {
            n.devices[d] += share;
            return Some((n.name.to_string(), Some(d as u32), share));
        }
    }
    None
}

/// Places every replica of the KAI Deployments on the nodes. Replicas that do not fit are
/// absent from the result (their pods stay Pending).
pub fn place(nodes: &[&Value], queues: &[&Value], deployments: &[&Value]) -> Vec<Placement> {
    let mut nodes: Vec<GpuNode<'_>> = nodes.iter().map(|n| gpu_node(n)).collect();
    nodes.sort_by(|a, b| a.name.cmp(b.name));
    let text = |d: &Value, p: &str| d.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    let mut ds: Vec<&Value> = deployments.iter().copied().filter(|d| is_kai(d)).collect();
    ds.sort_by_key(|d| {
        (text(d, "/metadata/creationTimestamp"), text(d, "/metadata/namespace"), text(d, "/metadata/name"))
    });
    let mut out = Vec::new();
    for d in ds {
        let empty = Value::Object(Map::new());
        let template = d.pointer("/spec/template").unwrap_or(&empty);
        let Some(ask) = ask(template).filter(|_| in_leaf_queue(template, queues)) else { continue };
        let replicas = d.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
        for replica in 0..replicas {
            let Some((node, device, share)) = place_one(&mut nodes, template, ask) else { break };
            out.push(Placement {
                namespace: text(d, "/metadata/namespace"),
                deployment: text(d, "/metadata/name"),
                replica,
                node,
                device,
                share,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, gpus: u32, taint: bool) -> Value {
        let mut n = json!({"metadata": {"name": name, "labels": {"gpu.model": "a5000", GPU_MEMORY_LABEL: "24576"}},
            "status": {"allocatable": {"nvidia.com/gpu": gpus.to_string()}}});
        if taint {
            n["spec"] = json!({"taints": [{"key": "fabric.io/gpu", "value": "true", "effect": "NoSchedule"}]});
        }
        n
    }

    fn deploy(name: &str, replicas: u32, annotations: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "ai", "creationTimestamp": "2026-12-01T10:00:00Z"},
            "spec": {"replicas": replicas, "template": {"metadata": {"labels": {QUEUE_LABEL: "q"}, "annotations": annotations},
                "spec": {"schedulerName": SCHEDULER, "nodeSelector": {"gpu.model": "a5000"}, "containers": [{"name": "c"}]}}}})
    }

    fn queues() -> Vec<Value> {
        vec![json!({"metadata": {"name": "site"}}), json!({"metadata": {"name": "q"}, "spec": {"parentQueue": "site"}})]
    }

    fn run(nodes: &[Value], ds: &[Value]) -> Vec<Placement> {
        let q = queues();
        place(&nodes.iter().collect::<Vec<_>>(), &q.iter().collect::<Vec<_>>(), &ds.iter().collect::<Vec<_>>())
    }

    #[test]
    fn two_halves_share_one_device_and_a_sixth_more_does_not() {
        let ds = [
            deploy("a", 1, json!({"gpu-fraction": "0.5"})),
            deploy("b", 1, json!({"gpu-fraction": "0.5"})),
            deploy("c", 1, json!({"gpu-fraction": "0.6"})),
        ];
        let p = run(&[node("n1", 1, false)], &ds);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p.iter().all(|x| x.node == "n1" && x.device == Some(0)));
        let p = run(&[node("n1", 1, false), node("n2", 1, false)], &ds);
        assert_eq!(p.iter().find(|x| x.deployment == "c").map(|x| x.node.as_str()), Some("n2"));
    }

    #[test]
    fn memory_is_a_share_of_the_device_and_needs_the_memory_label() {
        let ds = [deploy("m", 3, json!({"gpu-memory": "8192"})), deploy("x", 1, json!({"gpu-memory": "1"}))];
        assert_eq!(run(&[node("n1", 1, false)], &ds).len(), 3, "3 × 8 GiB of 24 GiB, nothing left");
        let mut bare = node("n1", 1, false);
        bare["metadata"]["labels"].as_object_mut().unwrap().remove(GPU_MEMORY_LABEL);
        assert!(run(&[bare], &ds).is_empty());
    }

    #[test]
    fn queue_scheduler_and_taints_decide() {
        let mut no_queue = deploy("a", 1, json!({"gpu-fraction": "0.5"}));
        no_queue["spec"]["template"]["metadata"]["labels"][QUEUE_LABEL] = json!("site");
        assert!(run(&[node("n1", 1, false)], &[no_queue]).is_empty(), "a parent queue does not schedule");
        let mut other = deploy("a", 1, json!({"gpu-fraction": "0.5"}));
        other["spec"]["template"]["spec"]["schedulerName"] = json!("default-scheduler");
        assert!(run(&[node("n1", 1, false)], &[other]).is_empty(), "not KAI's pods");
        let half = deploy("a", 1, json!({"gpu-fraction": "0.5"}));
        assert!(run(&[node("n1", 1, true)], std::slice::from_ref(&half)).is_empty(), "tainted");
        let mut tolerant = half;
        tolerant["spec"]["template"]["spec"]["tolerations"] =
            json!([{"key": "fabric.io/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]);
        assert_eq!(run(&[node("n1", 1, true)], &[tolerant]).len(), 1);
    }

    #[test]
    fn whole_gpus_take_empty_devices() {
        let mut whole = deploy("a-whole", 2, json!({}));
        whole["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"nvidia.com/gpu": "1"}});
        let half = deploy("b-half", 1, json!({"gpu-fraction": "0.5"}));
        let p = run(&[node("n1", 2, false)], &[whole, half]);
        assert_eq!(p.len(), 2, "two whole GPUs fill the node, the half waits: {p:?}");
        assert!(p.iter().all(|x| x.deployment == "a-whole" && x.share == 1.0));
    }
}
