//! Every kind of Kubernetes object fabric writes, in one place, and whether fabric deletes an
//! object of it that the topology no longer has (prune). `tests/prune_kinds.rs` renders every
//! test topology and fails when fabric writes a kind this list does not classify, so a new kind
//! is either pruned or excluded here with its reason, never forgotten.

/// What becomes of a fabric-labelled object of a kind once the topology no longer has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prune {
    /// Deleted (planned as a deletion of the step that wrote it).
    Yes,
    /// Left in place, for this reason.
    Never(&'static str),
}

/// (apiVersion, kind, prune) of every kind fabric writes, and of the kinds it deliberately never
/// deletes.
pub const WRITTEN: &[(&str, &str, Prune)] = &[
    ("helm.cattle.io/v1", "HelmChart", Prune::Yes),
    ("helm.cattle.io/v1", "HelmChartConfig", Prune::Yes),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor", Prune::Yes),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue", Prune::Yes),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue", Prune::Yes),
    ("kueue.x-k8s.io/v1beta2", "AdmissionCheck", Prune::Yes),
    ("kueue.x-k8s.io/v1beta2", "MultiKueueConfig", Prune::Yes),
    ("kueue.x-k8s.io/v1beta2", "MultiKueueCluster", Prune::Yes),
    ("scheduling.run.ai/v2", "Queue", Prune::Yes),
    ("policy.karmada.io/v1alpha1", "PropagationPolicy", Prune::Yes),
    ("policy.karmada.io/v1alpha1", "OverridePolicy", Prune::Yes),
    ("policy.karmada.io/v1alpha1", "ClusterTaintPolicy", Prune::Yes),
    ("cluster.karmada.io/v1alpha1", "Cluster", Prune::Yes),
    ("cilium.io/v2", "CiliumExternalWorkload", Prune::Yes),
    ("apps/v1", "Deployment", Prune::Yes),
    ("v1", "Service", Prune::Yes),
    ("v1", "ConfigMap", Prune::Yes),
    ("v1", "ServiceAccount", Prune::Yes),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", Prune::Yes),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", Prune::Yes),
    ("batch/v1", "Job", Prune::Yes),
    ("argoproj.io/v1alpha1", "Application", Prune::Yes),
    (
        "v1",
        "Namespace",
        Prune::Never("deleting a namespace deletes everything in it, workloads and data fabric did not make"),
    ),
    (
        "v1",
        "Secret",
        Prune::Never("its data is not fabric's to drop: copied credentials, generated CA keys, tokens others use"),
    ),
    ("v1", "Node", Prune::Never("the kubelet registers and owns Nodes; fabric only sets labels and taints on them")),
    (
        "node.k8s.io/v1",
        "RuntimeClass",
        Prune::Never(
            "K3s ships and keeps its own (`nvidia` and the others, k3s-io/k3s manifests/runtimes.yaml); fabric no longer writes one, and one it wrote before is K3s's now",
        ),
    ),
];

/// The kinds fabric deletes again when they leave the topology.
pub fn prunable() -> impl Iterator<Item = (&'static str, &'static str)> {
    WRITTEN.iter().filter(|(_, _, p)| *p == Prune::Yes).map(|(a, k, _)| (*a, *k))
}

/// Whether fabric deletes an object of this kind once the topology no longer has it.
pub fn is_prunable(api_version: &str, kind: &str) -> bool {
    prunable().any(|(a, k)| a == api_version && k == kind)
}

/// How fabric treats a kind it writes: None for a kind this list does not classify.
pub fn classify(api_version: &str, kind: &str) -> Option<Prune> {
    WRITTEN.iter().find(|(a, k, _)| *a == api_version && *k == kind).map(|(_, _, p)| *p)
}
