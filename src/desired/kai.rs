//! KAI Scheduler's objects (D.5): its chart's values and its `Queue`s, and the names a pod gives
//! to be placed by it (which Karmada's OverridePolicies set at each member, C.6).
//!
//! The upstream facts they rely on, and where upstream decides them:
//! - A pod is placed by KAI when its `schedulerName` is [`KAI_SCHEDULER`] and names its leaf
//!   queue with the label [`KAI_QUEUE_LABEL`] (`kai-scheduler/docs/quickstart_README.md`).
//! - A shared GPU is asked for with the pod annotations [`KAI_FRACTION`] (a share of one device)
//!   or [`KAI_MEMORY`] (MiB of its memory), with the chart's `global.gpuSharing` on
//!   (`gpu-sharing_README.md`).
//! - Queues are `scheduling.run.ai/v2` with `quota`, `limit` (`-1`: none) and `overQuotaWeight`
//!   per resource, and `parentQueue`; validated against the CRD schema in `../shared/specs/crds`
//!   by the conformance test.
//! - KAI reads a node's GPU memory from `nvidia.com/gpu.memory` (MiB), which fabric sets
//!   (`objects::NVIDIA_GPU_MEMORY_LABEL`); its GPU reservation pods tolerate nothing (its
//!   binder's `createResourceReservationPod`), hence a `NoSchedule` GPU taint
//!   (`objects::GPU_TAINT`, tested there).

use serde_json::{Value, json};

use super::objects::*;
use crate::topology::Topology;
use crate::topology::model::*;

/// KAI Scheduler's API version of `Queue`s.
pub const QUEUE_API: &str = "scheduling.run.ai/v2";

/// KAI Scheduler's name, which a pod's `schedulerName` gives to have KAI place it.
pub const KAI_SCHEDULER: &str = "kai-scheduler";

/// KAI Scheduler's pod label naming the (leaf) queue a pod is scheduled in.
pub const KAI_QUEUE_LABEL: &str = "kai.scheduler/queue";

/// KAI Scheduler's pod annotations for a shared GPU: a share of one device, or MiB of its memory.
pub const KAI_FRACTION: &str = "gpu-fraction";
pub const KAI_MEMORY: &str = "gpu-memory";

/// The pod annotations of a service that shares a GPU (`gpu-sharing_README.md`).
pub fn sharing_annotations(svc: &Service) -> Option<Value> {
    match (svc.gpu_fraction, svc.gpu_memory_mib) {
        (Some(f), _) => Some(json!({ KAI_FRACTION: f.to_string() })),
        (None, Some(mib)) => Some(json!({ KAI_MEMORY: mib.to_string() })),
        (None, None) => None,
    }
}

/// KAI Scheduler's namespace (D.5).
pub const KAI_NAMESPACE: &str = "kai-scheduler";

/// KAI Scheduler's chart values (D.5): GPU sharing on.
pub fn kai_values() -> Value {
    json!({ "global": { "gpuSharing": true } })
}

pub fn kai_helm_chart(t: &Topology, version: &str) -> Value {
    helm_chart(t, "kai-scheduler", &KAI_CHART, version, KAI_NAMESPACE, &kai_values())
}

/// A KAI Scheduler queue (`scheduling.run.ai/v2`): `gpus` guaranteed, no limit on CPU or
/// memory (KAI's `-1`), under `parent` when given.
pub fn kai_queue(t: &Topology, name: &str, parent: Option<&str>, gpus: u32) -> Value {
    let open = json!({ "quota": 0, "limit": -1, "overQuotaWeight": 1 });
    let mut spec = json!({ "resources": {
        "gpu": { "quota": gpus, "limit": -1, "overQuotaWeight": 1 },
        "cpu": open, "memory": open,
    } });
    if let Some(p) = parent {
        spec["parentQueue"] = json!(p);
    }
    with(object(t, QUEUE_API, "Queue", name, None), "spec", spec)
}
