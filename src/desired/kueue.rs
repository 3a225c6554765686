//! Kueue's objects (D.1 to D.4): its chart's values, ResourceFlavors, ClusterQueues,
//! LocalQueues, MultiKueue's AdmissionCheck, config, clusters and worker role, and D.4's test Job.
//!
//! The upstream facts they rely on, and where upstream decides them:
//! - fabric writes Kueue's API as `kueue.x-k8s.io/v1beta2` (v1beta1 is deprecated and gone in
//!   0.20; `topology::rules` refuses an older Kueue), validated against the CRD schemas in
//!   `../shared/specs/crds` by the conformance test.
//! - Kueue admits a Job only when its ClusterQueue covers every resource the Job's pods request
//!   (kubernetes-sigs/kueue `pkg/scheduler/flavorassigner/flavorassigner.go`,
//!   `findFlavorForPodSets`; see `topology::queues`): every queue covers cpu, memory and
//!   `nvidia.com/gpu`.
//! - Kueue adds a flavor's node labels and tolerations to the pods it admits with it.
//! - The chart's defaults serve v1beta2 and integrate batch/Job; MultiKueue is a beta gate, on
//!   by default; the dispatcher stays the default, AllAtOnce (docs/design.md, "Local first").
//! - A Job is queued by the label `kueue.x-k8s.io/queue-name`; MultiKueue's manager needs, in a
//!   worker, the rights of Kueue's MultiKueue setup guide ([`multikueue_worker_role`]).

use serde_json::{Value, json};

use super::nvidia::NVIDIA_RUNTIME_CLASS;
use super::objects::*;
use crate::topology::Topology;
use crate::topology::model::*;
use crate::topology::queues::Quota;

/// Kueue's API version (v1beta2; `topology::rules` refuses a Kueue without it).
pub const KUEUE_API: &str = "kueue.x-k8s.io/v1beta2";

/// The dispatching queue's flavor at Karmada's VM ([`crate::desired::DISPATCH_FLAVOR`]): no
/// node labels or tolerations, which Kueue would add to Jobs that run elsewhere.
pub fn dispatch_flavor(t: &Topology) -> Value {
    with(object(t, KUEUE_API, "ResourceFlavor", crate::desired::DISPATCH_FLAVOR, None), "spec", json!({}))
}

pub fn resource_flavor(t: &Topology, s: &Site, flavor: &str) -> Value {
    let mut spec = json!({});
    if let Some(model) = crate::desired::gpu_model(s) {
        spec["nodeLabels"] = json!({ GPU_MODEL_LABEL: model });
        // Kueue adds a flavor's tolerations to the pods it admits with it: the batch Jobs may
        // use the GPU nodes kept for GPU work.
        if s.cluster.gpu_taint {
            spec["tolerations"] = json!([toleration(GPU_TAINT)]);
        }
    }
    with(object(t, KUEUE_API, "ResourceFlavor", flavor, None), "spec", spec)
}

/// A ClusterQueue on one flavor covering cpu, memory and `nvidia.com/gpu` with `quota`
/// (`topology::queues`: Kueue admits a Job only when its queue covers every resource it
/// requests); in `cohort` (`<site>-gpu` for a site's queues, which lend one another what they
/// leave unused), and with the admission check (MultiKueue's) if any.
pub fn cluster_queue(
    t: &Topology,
    cohort: Option<&str>,
    name: &str,
    quota: &Quota,
    flavor: &str,
    admission_check: Option<&str>,
) -> Value {
    let covered = json!(["cpu", "memory", "nvidia.com/gpu"]);
    let resources = json!([
        { "name": "cpu", "nominalQuota": cpu_quantity(quota.cpu_milli) },
        { "name": "memory", "nominalQuota": memory_quantity(quota.memory_mib) },
        { "name": "nvidia.com/gpu", "nominalQuota": quota.gpus },
    ]);
    let mut spec = json!({ "namespaceSelector": {} });
    if let Some(c) = cohort {
        spec["cohortName"] = json!(c);
    }
    spec["resourceGroups"] =
        json!([{ "coveredResources": covered, "flavors": [{ "name": flavor, "resources": resources }] }]);
    if let Some(ac) = admission_check {
        spec["admissionChecksStrategy"] = json!({ "admissionChecks": [{ "name": ac }] });
    }
    with(object(t, KUEUE_API, "ClusterQueue", name, None), "spec", spec)
}

/// Millicores as a Kubernetes quantity: whole cores when whole (`30`), else `7500m`.
pub fn cpu_quantity(milli: u64) -> String {
    if milli.is_multiple_of(1000) { (milli / 1000).to_string() } else { format!("{milli}m") }
}

/// MiB as a Kubernetes quantity: `96Gi` when whole GiB, else `1536Mi`.
pub fn memory_quantity(mib: u64) -> String {
    if mib.is_multiple_of(1024) { format!("{}Gi", mib / 1024) } else { format!("{mib}Mi") }
}

pub fn local_queue(t: &Topology, l: &LocalQueue, cq: &str) -> Value {
    with(object(t, KUEUE_API, "LocalQueue", &l.name, Some(&l.namespace)), "spec", json!({ "clusterQueue": cq }))
}

/// The Kueue manager's configuration fabric gives every cluster: the chart's default
/// (`managerConfig.controllerManagerConfigYaml` of kueue 0.15.2's `values.yaml`) with Kueue's
/// integrations cut to `batch/job`. The chart's default integrates eleven more frameworks
/// (JobSet, Kubeflow, Ray, AppWrapper...), and a MultiKueue manager watches the kind of every
/// integrated framework in each worker: a worker without JobSet's CRD stays Inactive ("no matches
/// for kind JobSet in version jobset.x-k8s.io/v1alpha2", kueue v0.15.2
/// `pkg/controller/admissionchecks/multikueue/multikueuecluster.go`), and no Job is dispatched.
/// The seed's batch work is `batch/v1` Jobs. Seen only with the real Kueue manager
/// (tests/realkube_apply.rs); the simulator had no such rule. The chart's template adds
/// `internalCertManagement` itself when the config has none (`templates/manager/manager-config.yaml`).
pub const KUEUE_MANAGER_CONFIG: &str = "\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 5
    LocalQueue.kueue.x-k8s.io: 1
    ClusterQueue.kueue.x-k8s.io: 1
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 50
  burst: 100
integrations:
  frameworks:
  - batch/job
";

/// The Kueue chart's values of a cluster, `manager` when it is MultiKueue's manager.
pub fn kueue_values(manager: bool) -> Value {
    // The chart serves v1beta2; the manager's configuration is [`KUEUE_MANAGER_CONFIG`]. A
    // MultiKueue manager turns the MultiKueue gate on explicitly (it is beta, on by default, and
    // the cluster depends on it). The dispatcher stays Kueue's default, AllAtOnce: in Kueue 0.15
    // Incremental nominates three workers a round, in name order, so with two workers it does the
    // same (docs/design.md, "Local first").
    let mut v = json!({
        "controllerManager": { "replicas": 1 },
        "managerConfig": { "controllerManagerConfigYaml": KUEUE_MANAGER_CONFIG },
    });
    if manager {
        v["controllerManager"]["featureGates"] = json!([{ "name": "MultiKueue", "enabled": true }]);
    }
    v
}

pub fn kueue_helm_chart(t: &Topology, manager: bool) -> Value {
    helm_chart(t, "kueue", &KUEUE_CHART, &t.versions.kueue, "kueue-system", &kueue_values(manager))
}

pub fn admission_check(t: &Topology) -> Value {
    with(
        object(t, KUEUE_API, "AdmissionCheck", "multikueue", None),
        "spec",
        json!({
            "controllerName": "kueue.x-k8s.io/multikueue",
            "parameters": { "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "multikueue" },
        }),
    )
}

pub fn multikueue_config(t: &Topology, mk: &MultiKueue) -> Value {
    with(object(t, KUEUE_API, "MultiKueueConfig", "multikueue", None), "spec", json!({ "clusters": mk.workers }))
}

/// A worker, whose kubeconfig is in a Secret of the manager (referenced, never rendered).
pub fn multikueue_cluster(t: &Topology, worker: &str) -> Value {
    with(
        object(t, KUEUE_API, "MultiKueueCluster", worker, None),
        "spec",
        json!({ "clusterSource": { "kubeConfig": { "locationType": "Secret", "location": format!("multikueue-{worker}") } } }),
    )
}

/// The D.4 test Job's name (in the test LocalQueue's namespace).
pub const TEST_JOB_NAME: &str = "fabric-multikueue-test";

/// What the D.4 test Job's pod requests besides its GPU.
pub const TEST_JOB_CPU: &str = "100m";
pub const TEST_JOB_MEMORY: &str = "64Mi";

/// How long the D.4 test Job may hold its GPU at the most (`activeDeadlineSeconds`).
pub const TEST_JOB_DEADLINE_SECONDS: u32 = 600;

/// The D.4 test Job: one GPU for the moment it takes to start and exit, then it frees it. It never retries
/// (`backoffLimit: 0`) and is stopped at [`TEST_JOB_DEADLINE_SECONDS`] whatever happens, so it
/// cannot keep a site's GPU from real work. The finished Job stays as D.4's evidence (no
/// `ttlSecondsAfterFinished`: fabric owns it, and a Job that deleted itself would show as to
/// create again in every plan); MultiKueue removes the worker's copy once it finishes.
pub fn multikueue_test_job(t: &Topology, l: &LocalQueue) -> Value {
    let mut job = object(t, "batch/v1", "Job", TEST_JOB_NAME, Some(&l.namespace));
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = json!(l.name);
    with(
        job,
        "spec",
        json!({
            "suspend": true,
            "backoffLimit": 0,
            "activeDeadlineSeconds": TEST_JOB_DEADLINE_SECONDS,
            "template": { "spec": {
                "restartPolicy": "Never",
                // A GPU pod needs the NVIDIA runtime: under K3s's default runc it gets the device
                // but not the driver's libraries (k3s-io/k3s issue 8700). Neither Kueue nor
                // MultiKueue adds the field (the worker's copy is the manager's Job as written),
                // so every GPU Job names the RuntimeClass K3s ships (`desired::nvidia`).
                "runtimeClassName": NVIDIA_RUNTIME_CLASS,
                "containers": [{ "name": "probe", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                    // agnhost's `entrypoint-tester` prints its arguments and exits.
                    "args": ["entrypoint-tester", "fabric D.4"],
                    // What a real Job asks: cpu and memory as well as its GPU, all of which
                    // the queue must cover for Kueue to admit it (`topology::queues`).
                    "resources": {
                        "requests": { "cpu": TEST_JOB_CPU, "memory": TEST_JOB_MEMORY },
                        "limits": { "memory": TEST_JOB_MEMORY, "nvidia.com/gpu": 1 },
                    } }],
            } },
        }),
    )
}

/// What MultiKueue's manager may do in a worker: create the dispatched jobs and their Kueue
/// workloads and follow their status (after Kueue's MultiKueue setup guide).
pub fn multikueue_worker_role(t: &Topology) -> Value {
    let mut m = object(t, "rbac.authorization.k8s.io/v1", "ClusterRole", "multikueue-worker", None);
    let rw = json!(["create", "delete", "get", "list", "watch", "update", "patch"]);
    let ro = json!(["get", "list", "watch"]);
    m.insert(
        "rules".into(),
        json!([
            { "apiGroups": ["batch"], "resources": ["jobs"], "verbs": rw },
            { "apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"] },
            { "apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": rw },
            { "apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"] },
            { "apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": rw },
            { "apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"] },
            { "apiGroups": [""], "resources": ["pods"], "verbs": ro },
            { "apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"] },
        ]),
    );
    Value::Object(m)
}
