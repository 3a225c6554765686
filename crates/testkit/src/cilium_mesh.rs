//! What Cilium's Cluster Mesh shows in the Kubernetes API of a cluster about the global services
//! of another: with EndpointSlice synchronisation on (Helm `clustermesh.enableEndpointSliceSynchronization`,
//! beta and off by default), the cilium-operator of the importing cluster writes an
//! EndpointSlice per remote cluster for every global Service annotated
//! `service.cilium.io/global-sync-endpoint-slices: "true"` (headless global Services without the
//! annotation too). Source: Cilium's "Multi-cluster Services / Synchronizing Kubernetes
//! EndpointSlice (Beta)" documentation, and `pkg/clustermesh/endpointslicesync` (the slices are
//! labelled with the Service's labels, `kubernetes.io/service-name`,
//! `endpointslice.kubernetes.io/managed-by: endpointslice-mesh-controller.cilium.io` and
//! `multicluster.kubernetes.io/source-cluster: <remote cluster>`). Remote backends count only
//! when the exporting cluster's Service is global too and shared (`service.cilium.io/shared`
//! not "false"), as the documentation's global/shared table has it.
//!
//! Without synchronisation Cilium still balances to remote backends inside its agents, but no
//! API object shows them: a test of what `fabric verify` reads must not assume otherwise.
//! Modelled as one reconcile, run when a test calls [`sync`]; the agents' datapath is not.

use serde_json::{Value, json};

use crate::kube_api::TestApiServer;

pub const MESH_MANAGER: &str = "endpointslice-mesh-controller.cilium.io";
const LOCAL_MANAGER: &str = "endpointslice-controller.k8s.io";
const SOURCE_CLUSTER: &str = "multicluster.kubernetes.io/source-cluster";

/// One reconcile of the cilium-operator of the cluster behind `to`, importing from the cluster
/// `from_cluster` (behind `from`). Returns how many slices it wrote.
pub fn sync(from: &TestApiServer, from_cluster: &str, to: &TestApiServer) -> usize {
    if !sync_enabled(to) {
        return 0;
    }
    let exported: Vec<Value> = from.objects();
    let mut written = 0;
    for svc in to.objects().iter().filter(|o| o["kind"] == "Service" && wants_slices(o)) {
        let (ns, name) = (
            svc["metadata"]["namespace"].as_str().unwrap_or("default"),
            svc["metadata"]["name"].as_str().unwrap_or(""),
        );
        let remote = from.object("v1", "Service", Some(ns), name);
        let shared = remote.as_ref().is_some_and(|r| {
            annotation(r, "service.cilium.io/global") == "true" && annotation(r, "service.cilium.io/shared") != "false"
        });
        let slices: Vec<&Value> = exported
            .iter()
            .filter(|o| o["kind"] == "EndpointSlice" && o["metadata"]["namespace"] == ns)
            .filter(|o| {
                label(o, "kubernetes.io/service-name") == name
                    && label(o, "endpointslice.kubernetes.io/managed-by") == LOCAL_MANAGER
            })
            .collect();
        let endpoints: Vec<Value> = if shared {
            slices
                .iter()
                .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
                .map(|mut e| {
                    // The remote pods are not this cluster's objects.
                    if let Some(m) = e.as_object_mut() {
                        m.remove("targetRef");
                    }
                    e
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut labels = svc["metadata"]["labels"].as_object().cloned().unwrap_or_default();
        labels.insert("kubernetes.io/service-name".into(), json!(name));
        labels.insert("endpointslice.kubernetes.io/managed-by".into(), json!(MESH_MANAGER));
        labels.insert(SOURCE_CLUSTER.into(), json!(from_cluster));
        let ports = slices.first().map(|s| s["ports"].clone()).unwrap_or(Value::Null);
        let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{name}-{from_cluster}"), "namespace": ns, "labels": labels},
            "addressType": "IPv4", "endpoints": if endpoints.is_empty() { Value::Null } else { Value::Array(endpoints) }, "ports": ports});
        to.put_raw_as(slice, "cilium-operator");
        written += 1;
    }
    written
}

/// Whether the cluster's Cilium (its HelmChart or HelmChartConfig `kube-system/cilium`) has
/// EndpointSlice synchronisation on.
fn sync_enabled(api: &TestApiServer) -> bool {
    ["HelmChart", "HelmChartConfig"].iter().any(|kind| {
        api.object("helm.cattle.io/v1", kind, Some("kube-system"), "cilium").is_some_and(|o| {
            let values = o["spec"]["valuesContent"].as_str().unwrap_or_default();
            serde_saphyr::from_str::<Value>(values)
                .is_ok_and(|v| v["clustermesh"]["enableEndpointSliceSynchronization"] == true)
        })
    })
}

/// A global Service whose remote backends this cluster asks for as EndpointSlices.
fn wants_slices(svc: &Value) -> bool {
    let headless = svc["spec"]["clusterIP"] == "None";
    let asked = annotation(svc, "service.cilium.io/global-sync-endpoint-slices");
    annotation(svc, "service.cilium.io/global") == "true" && (asked == "true" || (headless && asked != "false"))
}

fn annotation<'a>(o: &'a Value, k: &str) -> &'a str {
    o["metadata"]["annotations"][k].as_str().unwrap_or_default()
}

fn label<'a>(o: &'a Value, k: &str) -> &'a str {
    o["metadata"]["labels"][k].as_str().unwrap_or_default()
}
