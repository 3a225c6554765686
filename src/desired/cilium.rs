//! Cilium's objects (A.1, A.2, B.2, B.3): its chart's values, Cluster Mesh's, external
//! workloads, the global test service, and the annotations that make a Service global.
//!
//! The upstream facts they rely on (the values are validated against the chart's values schema
//! in `../shared/specs` by the conformance test):
//! - Without kube-proxy Cilium reaches the API through K3s's local proxy on every node
//!   (`k8sServiceHost: 127.0.0.1`, `k8sServicePort: 6444`).
//! - `MTU` is the device MTU Cilium assumes; it subtracts its own VXLAN/Geneve overhead for the
//!   pod routes, and has no per-destination MTU for pod traffic.
//! - Node-to-node WireGuard encryption (`encryption.nodeEncryption`) is what covers DRBD in the
//!   hosts' network namespace, and every cluster of a Cluster Mesh must run it (`desired::drbd`;
//!   what it covers: `steps::costs`, after cilium/cilium `Documentation`).
//! - Cluster Mesh: the clustermesh-apiserver as a NodePort, its certificates issued by the
//!   chart's cronJob from the shared CA Secret `kube-system/cilium-ca`;
//!   `enableEndpointSliceSynchronization` (beta, off by default) writes a global Service's
//!   remote backends into local EndpointSlices for the Services annotated
//!   [`GLOBAL_SYNC_ANNOTATION`].
//! - A global service is a Service annotated [`GLOBAL_ANNOTATION`] in every cluster, with
//!   [`SHARED_ANNOTATION`] and [`AFFINITY_ANNOTATION`] (the seed's table).

use serde_json::{Value, json};

use super::objects::*;
use crate::topology::Topology;
use crate::topology::model::*;

/// Cilium's annotation making a Service global: its backends in every cluster of the mesh.
pub const GLOBAL_ANNOTATION: &str = "service.cilium.io/global";
/// Cilium's annotation sharing (`"true"`) or not this cluster's backends of a global Service.
pub const SHARED_ANNOTATION: &str = "service.cilium.io/shared";
/// Cilium's annotation preferring (`local`) this cluster's backends of a global Service.
pub const AFFINITY_ANNOTATION: &str = "service.cilium.io/affinity";

/// Cilium values of a site without Cluster Mesh (steps A.1/A.2).
pub fn cilium_values(t: &Topology, s: &Site) -> Value {
    let mut v = json!({
        "cluster": { "name": s.cluster.name, "id": s.cluster.id },
        "ipam": { "mode": "kubernetes" },
        // K3s without kube-proxy: Cilium reaches the API through K3s's local proxy on every node.
        "kubeProxyReplacement": !s.cluster.kube_proxy,
        "k8sServiceHost": "127.0.0.1",
        "k8sServicePort": 6444,
        "operator": { "replicas": 1 },
        // The device MTU Cilium assumes (it subtracts its own VXLAN/Geneve overhead for the pod
        // routes): the smallest tunnel between the sites, so a pod's packet to the other site
        // fits through WireGuard (B.1) without fragmenting. Inside a site this costs 80 bytes
        // of a 1500-byte frame; Cilium has no per-destination MTU for pod traffic.
        "MTU": inter_site_mtu(t),
    });
    if t.mesh.hubble {
        v["hubble"] = json!({ "enabled": true, "relay": { "enabled": true }, "ui": { "enabled": true } });
    }
    if super::drbd::cilium_encryption(t) {
        // DRBD between the sites through Cilium (`decisions.drbd_cross_site: cilium`): DRBD runs
        // in the storage hosts' network namespace, which only node-to-node encryption covers.
        // Every cluster of a Cluster Mesh must run it (see `desired::drbd`).
        v["encryption"] = json!({ "enabled": true, "type": "wireguard", "nodeEncryption": true });
    }
    v
}

/// The smallest tunnel MTU of the fabric's routers (`sites[].router.wireguard.mtu`).
pub fn inter_site_mtu(t: &Topology) -> u16 {
    t.sites.iter().map(|s| s.router.wireguard.tunnel_mtu()).min().unwrap_or(crate::topology::model::DEFAULT_TUNNEL_MTU)
}

/// Cluster Mesh values of a site (step B.2): its clustermesh-apiserver and every other cluster.
pub fn clustermesh_values(t: &Topology, s: &Site) -> Value {
    let peers: Vec<Value> = t
        .sites
        .iter()
        .filter(|p| p.name != s.name)
        .map(|p| json!({ "name": p.cluster.name, "ips": [p.cluster.api_address.to_string()], "port": t.mesh.clustermesh_port.0 }))
        .collect();
    json!({
        "clustermesh": {
            "useAPIServer": true,
            "apiserver": {
                "service": { "type": "NodePort", "nodePort": t.mesh.clustermesh_port.0 },
                // Certificates are issued from the shared CA (Secret kube-system/cilium-ca, the
                // same in every cluster, created by fabric and never rendered).
                "tls": { "auto": { "enabled": true, "method": "cronJob" } },
            },
            "config": { "enabled": true, "clusters": peers },
            // Remote backends of global services as local EndpointSlices (beta upstream, off by
            // default): the Kubernetes API then shows what each cluster reaches, which is what
            // `verify` reads. Only the Services annotated for it are synchronised.
            "enableEndpointSliceSynchronization": t.placement.iter().any(|c| c.global),
        },
    })
}

/// Cilium's HelmChart, a bootstrap chart: K3s started with `--flannel-backend=none` has no CNI,
/// so its nodes are NotReady with the `node.kubernetes.io/not-ready` taint until Cilium runs.
/// helm-controller gives only a bootstrap chart's install Job the tolerations of that taint,
/// host networking and the control-plane node selector (k3s-io/helm-controller
/// `pkg/controllers/chart/chart.go`, `job()`); an ordinary install Job is never scheduled and
/// the chart never installs (seen on the real helm-controller: `tests/realkube_apply.rs`).
pub fn cilium_helm_chart(t: &Topology, s: &Site) -> Value {
    let mut chart = helm_chart(t, "cilium", &CILIUM_CHART, &t.versions.cilium, "kube-system", &cilium_values(t, s));
    chart["spec"]["bootstrap"] = Value::Bool(true);
    chart
}

pub fn cilium_external_workload(t: &Topology, s: &Site, w: &ExternalWorkload, index: usize) -> Value {
    // Each workload gets a /30 for its tunnel device and health endpoint from the top /24 of the
    // site's pod CIDR, which fabric leaves to external workloads.
    let base = u32::from(s.cluster.pod_cidr.network) | (!0u32 >> s.cluster.pod_cidr.len) & !0xff;
    let cidr = format!("{}/30", std::net::Ipv4Addr::from(base + 4 * index as u32));
    with(object(t, "cilium.io/v2", "CiliumExternalWorkload", &w.name, None), "spec", json!({ "ipv4-alloc-cidr": cidr }))
}

pub fn global_test_service(t: &Topology) -> (Value, Value) {
    let labels = json!({ "app": "fabric-echo" });
    let deploy = json!({
        "replicas": 1,
        "selector": { "matchLabels": labels },
        "template": {
            "metadata": { "labels": labels },
            "spec": { "containers": [{ "name": "echo", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53", "args": ["netexec", "--http-port=8080"], "ports": [{ "containerPort": 8080 }] }] },
        },
    });
    let mut svc = object(t, "v1", "Service", "fabric-echo", Some("default"));
    svc["metadata"]["annotations"] = json!({ GLOBAL_ANNOTATION: "true", SHARED_ANNOTATION: "true" });
    let svc = with(svc, "spec", json!({ "selector": labels, "ports": [{ "port": 80, "targetPort": 8080 }] }));
    (with(object(t, "apps/v1", "Deployment", "fabric-echo", Some("default")), "spec", deploy), svc)
}

/// The annotations that make a Service a Cilium global service, as the seed's table has them:
/// backends of every cluster (`global`), this cluster's shared with the others (`shared`),
/// local ones preferred and remote ones the fallback (`affinity: local`); and the remote
/// backends written into local EndpointSlices (`global-sync-endpoint-slices`, with Cluster
/// Mesh's `enableEndpointSliceSynchronization`), so the Kubernetes API shows them.
pub fn global_service_annotations() -> Value {
    json!({
        GLOBAL_ANNOTATION: "true",
        SHARED_ANNOTATION: "true",
        AFFINITY_ANNOTATION: "local",
        GLOBAL_SYNC_ANNOTATION: "true",
    })
}

/// Cilium's annotation asking for a global Service's remote backends as local EndpointSlices.
pub const GLOBAL_SYNC_ANNOTATION: &str = "service.cilium.io/global-sync-endpoint-slices";
