//! Karmada's objects (C.1, C.2, C.4 to C.7): the chart's values, the member `Cluster`s, the
//! scheduler estimators, the PropagationPolicies, OverridePolicies and the ClusterTaintPolicy.
//!
//! The upstream facts they rely on, and where upstream decides them:
//! - The chart's API server NodePort (`apiServer.nodePort`), [`KARMADA_API_NODE_PORT`]; its
//!   pre-install Job issues the API server's certificate for exactly `certs.auto.hosts`
//!   (karmada-io/karmada `charts/karmada/templates/_helpers.tpl`, `karmada.certHosts`, used by
//!   `pre-install-job.yaml`), and a list value replaces the chart's default whole, so the
//!   chart's default hosts ([`KARMADA_CHART_CERT_HOSTS`], `charts/karmada/values.yaml`) are kept
//!   ([`karmada_cert_hosts`]); other clusters reach the API at [`karmada_server`].
//! - The controller-manager's flags come from the chart's values ([`controller_manager_values`]):
//!   the chart turns PropagateDeps off and Karmada evicts nothing on a NoExecute taint unless
//!   told to, so fabric turns both on (tests/karmada_chart_flags.rs holds the chart's defaults).
//! - `propagateDeps`: what a workload's pod template names (ConfigMaps, Secrets, a ServiceAccount
//!   other than `default`, PVCs of `volumes`) follows it to its clusters (karmada-io/karmada
//!   `pkg/resourceinterpreter/default/native/dependencies.go`, `pkg/util/helper/pod.go`).
//! - Karmada 1.14+ no longer taints NotReady or unreachable members by itself: a
//!   ClusterTaintPolicy does (C.7), with the `cluster.karmada.io/not-ready` and
//!   `cluster.karmada.io/unreachable` taint keys the placements tolerate.
//! - API groups: `cluster.karmada.io/v1alpha1` (Cluster), `policy.karmada.io/v1alpha1`
//!   (PropagationPolicy, OverridePolicy, ClusterTaintPolicy), validated against the CRD schemas
//!   in `../shared/specs/crds` by the conformance test.
//!
//! The pod template fields an OverridePolicy sets for KAI Scheduler and Cilium are those
//! modules' facts (`desired::kai`, `desired::cilium`).

use serde_json::{Value, json};

use super::cilium::global_service_annotations;
use super::kai::{KAI_SCHEDULER, sharing_annotations};
use super::nvidia::NVIDIA_RUNTIME_CLASS;
use super::objects::*;
use super::{Target, karmada_host, url_host};
use crate::topology::Topology;
use crate::topology::model::*;

/// The namespace of Karmada's control plane (the chart's release namespace, C.1).
pub const KARMADA_NAMESPACE: &str = "karmada-system";
/// Karmada's API version of member `Cluster`s.
pub const CLUSTER_API: &str = "cluster.karmada.io/v1alpha1";
/// Karmada's API version of PropagationPolicy, OverridePolicy and ClusterTaintPolicy.
pub const POLICY_API: &str = "policy.karmada.io/v1alpha1";

/// NodePort of the Karmada API server (the chart's `apiServer.nodePort`).
pub const KARMADA_API_NODE_PORT: u16 = 32443;

/// The Secret in [`KARMADA_NAMESPACE`] that holds the certificates the chart issued (release
/// `karmada`: `{{ $name }}-cert`, written by the `<release>-pre-install` Job of
/// karmada-io/karmada `charts/karmada/templates/pre-install-job.yaml`), and its key with the
/// certificate the API server serves (`karmada-apiserver.yaml`: `--tls-cert-file=.../karmada.crt`).
/// The Secret also holds private keys: only this key is ever looked at.
pub const KARMADA_CERT_SECRET: &str = "karmada-cert";
pub const KARMADA_CERT_KEY: &str = "karmada.crt";

/// Helm values of the Karmada control plane (C.1), with the estimator (C.4) and failover (C.7).
pub fn karmada_values(t: &Topology) -> Value {
    let k = &t.federation.karmada;
    json!({
        "installMode": "host",
        "apiServer": { "serviceType": "NodePort", "nodePort": KARMADA_API_NODE_PORT },
        // The chart's pre-install Job issues the API server's certificate for exactly these
        // hosts (`karmada.certHosts` in charts/karmada/templates/_helpers.tpl, used by
        // pre-install-job.yaml): a list value replaces the chart's default whole, so the default
        // names are kept and every address a client reaches the API at is added.
        "certs": { "auto": { "hosts": karmada_cert_hosts(t) } },
        "scheduler": { "enableSchedulerEstimator": k.estimator },
        "controllerManager": controller_manager_values(k.failover),
    })
}

/// The controller-manager's part of the chart's values. The chart renders every key of
/// `featureGates` into `--feature-gates` and every key of `extraCommandArgs` into a `--K=V` flag
/// (karmada-io/karmada `charts/karmada/templates/_helpers.tpl`,
/// `karmada.controllerManager.featureGates` and `karmada.controllerManager.extraCommandArgs`).
/// - PropagateDeps: the chart's `values.yaml` turns it off (`featureGates: {PropagateDeps:
///   false}`), and without it `propagateDeps: true` in a policy does nothing: the dependencies
///   distributor starts only with the gate (`cmd/controller-manager/app/controllermanager.go`).
///   Every workload policy fabric writes relies on it, so it is always on.
/// - Failover (off by default, `pkg/features/features.go`) starts the taint manager and the
///   ClusterTaintPolicy controller; GracefulEviction (on by default) is kept explicit.
/// - `--enable-no-execute-taint-eviction` (default false, `cmd/controller-manager/app/options/failover.go`):
///   without it the taint manager evicts nothing from a member C.7's ClusterTaintPolicy taints
///   NoExecute. Checked by tests/karmada_chart_flags.rs against the chart's defaults.
fn controller_manager_values(failover: bool) -> Value {
    let mut cm = json!({
        "featureGates": { "PropagateDeps": true, "Failover": failover, "GracefulEviction": failover },
    });
    if failover {
        cm["extraCommandArgs"] = json!({ "enable-no-execute-taint-eviction": true });
    }
    cm
}

pub fn karmada_helm_chart(t: &Topology) -> Value {
    helm_chart(t, "karmada", &KARMADA_CHART, &t.versions.karmada, KARMADA_NAMESPACE, &karmada_values(t))
}

/// The scheduler estimator of one member (C.4) and its Service, as the Karmada chart would make
/// them, but authenticating to the member with the kubeconfig Secret `<cluster>-kubeconfig`
/// (made by fabric from the member's ServiceAccount token).
pub fn scheduler_estimator(t: &Topology, cluster: &str) -> (Value, Value) {
    let name = format!("karmada-scheduler-estimator-{cluster}");
    let labels = json!({ "app": "karmada-scheduler-estimator", "cluster": cluster });
    let kubeconfig = format!("/etc/{cluster}-kubeconfig");
    let deploy = with(
        object(t, "apps/v1", "Deployment", &name, Some(KARMADA_NAMESPACE)),
        "spec",
        json!({
            "replicas": 1,
            "selector": { "matchLabels": labels },
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "automountServiceAccountToken": false,
                    "containers": [{
                        "name": "karmada-scheduler-estimator",
                        "image": format!("docker.io/karmada/karmada-scheduler-estimator:v{}", t.versions.karmada),
                        "command": [
                            "/bin/karmada-scheduler-estimator",
                            format!("--kubeconfig={kubeconfig}"),
                            format!("--cluster-name={cluster}"),
                            "--grpc-auth-cert-file=/etc/karmada/pki/karmada.crt",
                            "--grpc-auth-key-file=/etc/karmada/pki/karmada.key",
                            "--grpc-client-ca-file=/etc/karmada/pki/server-ca.crt",
                            "--metrics-bind-address=0.0.0.0:8080",
                            "--health-probe-bind-address=0.0.0.0:10351",
                        ],
                        "livenessProbe": { "httpGet": { "path": "/healthz", "port": 10351, "scheme": "HTTP" }, "periodSeconds": 15 },
                        "ports": [{ "containerPort": 10352, "name": "grpc", "protocol": "TCP" }],
                        "volumeMounts": [
                            { "name": "karmada-certs", "mountPath": "/etc/karmada/pki", "readOnly": true },
                            { "name": "member-kubeconfig", "subPath": "kubeconfig", "mountPath": kubeconfig },
                        ],
                    }],
                    "volumes": [
                        // The chart's certificates (release `karmada`).
                        { "name": "karmada-certs", "secret": { "secretName": "karmada-cert" } },
                        { "name": "member-kubeconfig", "secret": { "secretName": format!("{cluster}-kubeconfig") } },
                    ],
                },
            },
        }),
    );
    let svc = with(
        object(t, "v1", "Service", &name, Some(KARMADA_NAMESPACE)),
        "spec",
        json!({ "selector": labels, "ports": [{ "protocol": "TCP", "port": 10352, "targetPort": 10352 }] }),
    );
    (deploy, svc)
}

/// A member `Cluster` in push mode; its credentials come from a Secret fabric creates from a
/// ServiceAccount token of the member (never rendered).
pub fn karmada_cluster(t: &Topology, s: &Site) -> Value {
    with(
        object(t, CLUSTER_API, "Cluster", &s.cluster.name, None),
        "spec",
        json!({
            "apiEndpoint": format!("https://{}:{}", s.cluster.api_address, s.cluster.api_port.0),
            "secretRef": { "namespace": "karmada-cluster", "name": s.cluster.name },
            "syncMode": "Push",
            "region": s.name,
        }),
    )
}

fn cluster_names(t: &Topology, sites: &[String]) -> Vec<String> {
    let pick: Vec<&Site> = t.sites.iter().filter(|s| sites.is_empty() || sites.contains(&s.name)).collect();
    pick.iter().map(|s| s.cluster.name.clone()).collect()
}

fn cluster_of(t: &Topology, site: &str) -> String {
    t.sites.iter().find(|s| s.name == site).map(|s| s.cluster.name.clone()).unwrap_or_else(|| site.to_string())
}

/// The PropagationPolicy of one placement class in one namespace (C.5).
/// The Services of a global class are placed by [`global_services_policy`] instead (a resource
/// is matched by one PropagationPolicy).
pub fn propagation_policy(t: &Topology, c: &PlacementClass, ns: &str, services: &[&Service]) -> Value {
    let selectors: Vec<Value> = services
        .iter()
        .flat_map(|s| {
            let workload = json!({ "apiVersion": "apps/v1", "kind": s.workload.kind(), "name": s.name });
            let service = (!c.global).then(|| json!({ "apiVersion": "v1", "kind": "Service", "name": s.name }));
            // What the service is made of that its pod template does not name.
            let parts = s
                .configmaps
                .iter()
                .map(|n| json!({ "apiVersion": "v1", "kind": "ConfigMap", "name": n }))
                .chain(s.secrets.iter().map(|n| json!({ "apiVersion": "v1", "kind": "Secret", "name": n })));
            std::iter::once(workload).chain(service).chain(parts)
        })
        .collect();
    let clusters = cluster_names(t, &c.sites);
    let mut placement = json!({ "clusterAffinity": { "clusterNames": clusters } });
    match c.strategy {
        PlacementStrategy::Spread => {
            let weights: Vec<Value> = c
                .weights
                .iter()
                .map(|(site, w)| json!({ "targetCluster": { "clusterNames": [cluster_of(t, site)] }, "weight": w }))
                .collect();
            placement["replicaScheduling"] = json!({
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": { "staticWeightList": weights },
            });
            placement["spreadConstraints"] =
                json!([{ "spreadByField": "cluster", "maxGroups": clusters.len(), "minGroups": 1 }]);
        }
        PlacementStrategy::Affinity => {
            let prefer = c.prefer.as_deref().map(|p| cluster_of(t, p)).unwrap_or_default();
            placement["clusterAffinity"] = json!({ "clusterNames": [prefer] });
            placement["replicaScheduling"] = json!({ "replicaSchedulingType": "Duplicated" });
        }
        PlacementStrategy::Replicas => {
            placement["replicaScheduling"] = json!({ "replicaSchedulingType": "Duplicated" });
        }
    }
    if let Some(secs) = c.failover_after_seconds {
        placement["clusterTolerations"] = json!([
            { "key": "cluster.karmada.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": secs },
            { "key": "cluster.karmada.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": secs },
        ]);
    }
    // `propagateDeps`: what the workloads' pod templates name (ConfigMaps, Secrets, a
    // ServiceAccount other than `default`, PVCs of `volumes`) follows them to the clusters they
    // are placed in (karmada-io/karmada pkg/resourceinterpreter/default/native/dependencies.go,
    // pkg/util/helper/pod.go). PVCs of a StatefulSet's `volumeClaimTemplates` are not among them.
    let mut spec = json!({ "resourceSelectors": selectors, "placement": placement, "propagateDeps": true });
    if c.failover_after_seconds.is_some() {
        spec["failover"] =
            json!({ "application": { "decisionConditions": { "tolerationSeconds": 60 }, "purgeMode": "Gracefully" } });
    }
    with(object(t, POLICY_API, "PropagationPolicy", &c.name, Some(ns)), "spec", spec)
}

/// Karmada resource selectors of these services' Services.
fn service_selectors(services: &[&Service]) -> Vec<Value> {
    services.iter().map(|s| json!({ "apiVersion": "v1", "kind": "Service", "name": s.name })).collect()
}

/// For a global class (C.5): its Services in every member, wherever the workloads run. A
/// Cilium global service needs a Service of the same name and namespace in each cluster that
/// calls it; the cluster without workloads then reaches the others' backends.
pub fn global_services_policy(t: &Topology, c: &PlacementClass, ns: &str, services: &[&Service]) -> Value {
    let (selectors, clusters) = (service_selectors(services), cluster_names(t, &t.federation.karmada.members));
    with(
        object(t, POLICY_API, "PropagationPolicy", &format!("{}-services", c.name), Some(ns)),
        "spec",
        json!({
            "resourceSelectors": selectors,
            "placement": { "clusterAffinity": { "clusterNames": clusters }, "replicaScheduling": { "replicaSchedulingType": "Duplicated" } },
        }),
    )
}

/// For a global class (C.5): the global-service annotations on its Services in every member
/// (an `annotationsOverrider`, which makes the map when the repository's Service has none).
pub fn global_services_override(t: &Topology, c: &PlacementClass, ns: &str, services: &[&Service]) -> Value {
    let (selectors, clusters) = (service_selectors(services), cluster_names(t, &t.federation.karmada.members));
    with(
        object(t, POLICY_API, "OverridePolicy", &format!("{}-global", c.name), Some(ns)),
        "spec",
        json!({
            "resourceSelectors": selectors,
            "overrideRules": [{
                "targetCluster": { "clusterNames": clusters },
                "overriders": { "annotationsOverrider": [{ "operator": "add", "value": global_service_annotations() }] },
            }],
        }),
    )
}

/// What Karmada changes in one GPU service's pod template at one member (C.6), named as the
/// seed's `vllm-franca`: the member's GPU model as node selector, the site label the gateway
/// addresses backends by, and for a service in a queue KAI Scheduler's fields: the scheduler,
/// the queue label, the sharing annotation (KAI reads them on the pod:
/// `kai-scheduler/docs/quickstart_README.md`, `gpu-sharing_README.md`), and the tolerations.
///
/// Every overrider works whatever shape the repository's Deployment has (a JSON patch's `add`
/// needs the parent): the pod template's `spec` and `labels` always exist; node selector,
/// annotations and tolerations are added whole, so at that member they replace the
/// repository's own (the member's GPUs decide them).
pub fn override_policy(t: &Topology, s: &Site, svc: &Service, gpu_model: &str) -> Value {
    let per_gpu = s.cluster.nodes.iter().filter_map(|n| n.gpu.as_ref()).map(|g| g.memory_gib).max().unwrap_or(0);
    let mut plaintext = vec![
        json!({ "path": "/spec/template/spec/nodeSelector", "operator": "add", "value": { GPU_MODEL_LABEL: gpu_model } }),
        // The gateway addresses each site's backends by this label (see `tensorzero::site_service`).
        json!({ "path": "/spec/template/metadata/labels/fabric.io~1site", "operator": "add", "value": s.name }),
        // The NVIDIA runtime: K3s sets no default runtime, so a pod without it starts under runc
        // and sees no GPU driver (k3s-io/k3s issue 8700).
        json!({ "path": "/spec/template/spec/runtimeClassName", "operator": "add", "value": NVIDIA_RUNTIME_CLASS }),
    ];
    if let Some(q) = &svc.queue {
        plaintext
            .push(json!({ "path": "/spec/template/spec/schedulerName", "operator": "add", "value": KAI_SCHEDULER }));
        plaintext.push(
            json!({ "path": "/spec/template/metadata/labels/kai.scheduler~1queue", "operator": "add", "value": q }),
        );
    }
    if let Some(a) = sharing_annotations(svc) {
        plaintext.push(json!({ "path": "/spec/template/metadata/annotations", "operator": "add", "value": a }));
    }
    let tolerations = gpu_tolerations(s, svc);
    if !tolerations.is_empty() {
        plaintext.push(json!({ "path": "/spec/template/spec/tolerations", "operator": "add", "value": tolerations }));
    }
    // The seed's "resource limits": the model's memory noted on the Deployment.
    let annotations = json!([{ "operator": "add", "value": { "fabric.io/gpu-memory-gib": per_gpu.to_string() } }]);
    let selector = json!({ "apiVersion": "apps/v1", "kind": svc.workload.kind(), "name": svc.name });
    with(
        object(t, POLICY_API, "OverridePolicy", &format!("{}-{}", svc.name, s.name), Some(&svc.namespace)),
        "spec",
        json!({
            "resourceSelectors": [selector],
            "overrideRules": [{
                "targetCluster": { "clusterNames": [s.cluster.name] },
                "overriders": { "plaintext": plaintext, "annotationsOverrider": annotations },
            }],
        }),
    )
}

/// Taints members that are not Ready or unreachable with NoExecute (C.7), which Karmada 1.14+
/// no longer does by itself.
pub fn cluster_taint_policy(t: &Topology) -> Value {
    let clusters = cluster_names(t, &t.federation.karmada.members);
    with(
        object(t, POLICY_API, "ClusterTaintPolicy", "fabric-not-ready", None),
        "spec",
        json!({
            "targetClusters": { "clusterNames": clusters },
            "addOnConditions": [{ "conditionType": "Ready", "operator": "In", "statusValues": ["False", "Unknown"] }],
            "removeOnConditions": [{ "conditionType": "Ready", "operator": "In", "statusValues": ["True"] }],
            "taints": [{ "key": "cluster.karmada.io/not-ready", "effect": "NoExecute" }],
        }),
    )
}

/// The hosts of the Karmada chart's default `certs.auto.hosts` (karmada-io/karmada
/// `charts/karmada/values.yaml`; the chart renders them with `tpl`, so the templates stay).
pub const KARMADA_CHART_CERT_HOSTS: &[&str] = &[
    "kubernetes.default.svc",
    "*.etcd.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}",
    "*.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}",
    "*.{{ .Release.Namespace }}.svc",
    "localhost",
    "127.0.0.1",
];

/// The Karmada API as other clusters reach it: the host site's API address on the chart's NodePort.
pub fn karmada_server(t: &Topology) -> String {
    let host = t.sites.iter().find(|s| s.name == t.federation.karmada.host_site);
    match (&t.federation.karmada.vm, host) {
        (Some(vm), _) => format!("https://{}:{}", vm.address, KARMADA_API_NODE_PORT),
        (None, Some(s)) => format!("https://{}:{}", s.cluster.api_address, KARMADA_API_NODE_PORT),
        (None, None) => String::new(),
    }
}

/// Every name a client reaches Karmada's API server at, for its certificate (C.1): the chart's
/// in-cluster names; the address of [`karmada_server`] (ArgoCD's cluster, the estimators' and
/// MultiKueue's kubeconfigs); every node of the cluster that hosts it (a NodePort answers on
/// each); and the host of the operator's `federation.karmada.kubeconfig.server`, when set.
pub fn karmada_cert_hosts(t: &Topology) -> Vec<String> {
    let mut hosts: Vec<String> = KARMADA_CHART_CERT_HOSTS.iter().map(|h| h.to_string()).collect();
    let mut add = |h: String| {
        if !h.is_empty() && !hosts.contains(&h) {
            hosts.push(h);
        }
    };
    add(url_host(&karmada_server(t)));
    let (target, site) = karmada_host(t);
    match t.federation.karmada.vm.as_ref().filter(|vm| target == Target::cluster(&vm.name)) {
        Some(vm) => add(vm.address.to_string()),
        None => {
            if let Some(s) = t.sites.iter().find(|s| s.name == site) {
                add(s.cluster.api_address.to_string());
                s.cluster.nodes.iter().for_each(|n| add(n.address.to_string()));
            }
        }
    }
    if let Some(server) = &t.federation.karmada.kubeconfig.server {
        add(url_host(server));
    }
    hosts
}

/// The hosts of [`karmada_cert_hosts`] a client connects to, which the certificate Karmada's API
/// server serves must name: all but the chart's templated in-cluster names (its wildcards for
/// the release namespace, which every certificate the chart issued has).
pub fn karmada_client_hosts(t: &Topology) -> Vec<String> {
    karmada_cert_hosts(t).into_iter().filter(|h| !h.contains("{{")).collect()
}
