//! The NVIDIA parts of a GPU node's pods (D.1, C.6): the `nvidia` RuntimeClass and the NVIDIA
//! device plugin's chart. (What a node needs before K3s starts is `desired::gpu_runtime`.)
//!
//! The upstream facts they rely on, and where upstream decides them:
//! - The RuntimeClass `nvidia` is K3s's own (k3s-io/k3s `manifests/runtimes.yaml`), whose
//!   handler K3s configures in containerd when it finds `nvidia-container-runtime` at its start
//!   (k3s-io/k3s `pkg/agent/containerd/nvidia.go`); K3s sets no default runtime, so a pod without
//!   it runs under runc and sees no GPU driver (k3s-io/k3s issue 8700).
//! - The device plugin's chart selects nodes by NFD/GFD labels by default; fabric gives it its
//!   own GPU nodes' affinity and the `nvidia` runtime instead.

use serde_json::{Value, json};

use super::objects::*;
use crate::topology::Topology;

/// The RuntimeClass GPU pods run with: K3s's own (k3s-io/k3s manifests/runtimes.yaml, handler
/// `nvidia`), whose handler K3s configures in containerd when it starts on a host with
/// `nvidia-container-runtime` (k3s-io/k3s pkg/agent/containerd/nvidia.go). Without it a pod runs
/// under runc, without the driver's libraries (k3s-io/k3s issue 8700).
pub const NVIDIA_RUNTIME_CLASS: &str = "nvidia";

/// Node affinity to the GPU nodes: those with fabric's `gpu.model` label (D.1).
fn gpu_node_affinity() -> Value {
    json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{ "matchExpressions": [{ "key": GPU_MODEL_LABEL, "operator": "Exists" }] }] } } })
}

/// The NVIDIA device plugin (D.1), which makes `nvidia.com/gpu` allocatable on the GPU nodes.
/// Its chart selects nodes by NFD/GFD labels by default, which these nodes need not have: it
/// runs on fabric's GPU nodes instead, with the `nvidia` runtime.
pub fn nvidia_device_plugin_chart(t: &Topology, version: &str) -> Value {
    let values = json!({ "runtimeClassName": NVIDIA_RUNTIME_CLASS, "affinity": gpu_node_affinity() });
    helm_chart(t, "nvidia-device-plugin", &NVIDIA_DEVICE_PLUGIN_CHART, version, "nvidia-device-plugin", &values)
}
