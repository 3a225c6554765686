//! What each step produces: resources with stable addresses at their targets.
//!
//! The catalog names generators (`produces:`); each generator walks the topology, so a new site,
//! node, service or queue yields new resources without code changes. An address is
//! `<target>/<provider-specific path>`, e.g. `cluster.sp/kube-system/HelmChart/cilium`,
//! `router.franca/vyos:interfaces wireguard wg0`, `host.sp-cp1/file:/etc/rancher/k3s/config.yaml`.

use serde::Serialize;

use crate::catalog::Instance;
use crate::topology::Topology;
use crate::topology::model::*;

/// Generator names the catalog may use.
pub const GENERATORS: &[&str] = &[
    "k3s-server-config",
    "cilium-helmchart",
    "join-vms",
    "join-bare-metal",
    "wireguard-tunnel",
    "clustermesh",
    "global-service-test",
    "karmada-control-plane",
    "karmada-members",
    "argocd-karmada",
    "karmada-estimator",
    "propagation-policies",
    "override-policies",
    "failover",
    "kueue-local",
    "multikueue-config",
    "multikueue-queue",
    "multikueue-test-job",
    "gateway-config",
];

/// Which provider reads, diffs and applies a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    File,
    Vyos,
    Wireguard,
    Kube,
    Command,
}

/// One unit of desired state.
#[derive(Debug, Clone, Serialize)]
pub struct Resource {
    /// Stable address, unique in the fabric.
    pub address: String,
    /// Where it lives: `router.<site>`, `host.<name>`, `cluster.<site>` or `karmada`.
    pub target: String,
    /// The site the target belongs to (for `--site`); None for the Karmada API.
    pub site: Option<String>,
    pub provider: ProviderKind,
    /// One line for the plan.
    pub summary: String,
    /// Holds a secret: its content is never shown, logged or journaled.
    pub sensitive: bool,
}

struct Out<'a> {
    list: Vec<Resource>,
    t: &'a Topology,
}

impl Out<'_> {
    fn push(
        &mut self,
        target: String,
        site: Option<&str>,
        provider: ProviderKind,
        path: String,
        summary: String,
        sensitive: bool,
    ) {
        let sep = match provider {
            ProviderKind::Kube => "/",
            ProviderKind::File => "/file:",
            ProviderKind::Vyos => "/vyos:",
            ProviderKind::Wireguard => "/wireguard:",
            ProviderKind::Command => "/command:",
        };
        self.list.push(Resource {
            address: format!("{target}{sep}{path}"),
            target,
            site: site.map(String::from),
            provider,
            summary,
            sensitive,
        });
    }
    fn kube(&mut self, site: &str, ns: Option<&str>, kind: &str, name: &str, summary: impl Into<String>) {
        let path = match ns {
            Some(ns) => format!("{ns}/{kind}/{name}"),
            None => format!("{kind}/{name}"),
        };
        self.push(format!("cluster.{site}"), Some(site), ProviderKind::Kube, path, summary.into(), kind == "Secret");
    }
    fn karmada(&mut self, ns: Option<&str>, kind: &str, name: &str, summary: impl Into<String>) {
        let path = match ns {
            Some(ns) => format!("{ns}/{kind}/{name}"),
            None => format!("{kind}/{name}"),
        };
        self.push("karmada".into(), None, ProviderKind::Kube, path, summary.into(), kind == "Secret");
    }
    fn file(&mut self, host: &str, site: &str, path: &str, summary: impl Into<String>, sensitive: bool) {
        self.push(format!("host.{host}"), Some(site), ProviderKind::File, path.into(), summary.into(), sensitive);
    }
}

/// The resources `inst` produces, in a stable order.
pub fn for_instance(inst: &Instance, t: &Topology) -> Vec<Resource> {
    let mut out = Out { list: Vec::new(), t };
    for g in &inst.spec.produces {
        generate(g, inst, &mut out);
    }
    out.list
}

fn generate(name: &str, inst: &Instance, o: &mut Out) {
    let t = o.t;
    match name {
        "k3s-server-config" => {
            for s in sites_of(t, inst) {
                for n in s.cluster.nodes.iter().filter(|n| n.role == NodeRole::ControlPlane) {
                    o.file(
                        &n.name,
                        &s.name,
                        "/etc/rancher/k3s/config.yaml",
                        "K3s server config: flannel-backend none, no network policy, no kube-proxy/servicelb",
                        false,
                    );
                }
            }
        }
        "cilium-helmchart" => {
            for s in sites_of(t, inst) {
                o.kube(
                    &s.name,
                    Some("kube-system"),
                    "HelmChart",
                    "cilium",
                    format!("Cilium {} (cluster {} id {})", t.versions.cilium, s.cluster.name, s.cluster.id),
                );
            }
        }
        "join-vms" | "join-bare-metal" => {
            let kind = if name == "join-vms" { WorkloadKind::Vm } else { WorkloadKind::BareMetal };
            for s in sites_of(t, inst) {
                for w in s.external_workloads.iter().filter(|w| w.kind == kind) {
                    match t.mesh.join {
                        JoinMethod::K3sAgent => {
                            o.file(
                                &w.name,
                                &s.name,
                                "/etc/rancher/k3s/config.yaml",
                                format!("K3s agent config joining `{}` with a NoSchedule taint", s.cluster.name),
                                false,
                            );
                            o.file(&w.name, &s.name, "/etc/rancher/k3s/token", "K3s join token", true);
                            o.push(
                                format!("host.{}", w.name),
                                Some(&s.name),
                                ProviderKind::Command,
                                "k3s-agent".into(),
                                "install and start k3s-agent".into(),
                                false,
                            );
                        }
                        JoinMethod::CiliumExternalWorkloads => {
                            o.kube(
                                &s.name,
                                None,
                                "CiliumExternalWorkload",
                                &w.name,
                                format!("external workload {}", w.address),
                            );
                            o.push(
                                format!("host.{}", w.name),
                                Some(&s.name),
                                ProviderKind::Command,
                                "cilium-agent".into(),
                                "install cilium-agent as an external workload".into(),
                                false,
                            );
                        }
                    }
                }
            }
        }
        "wireguard-tunnel" => {
            for s in &t.sites {
                let target = format!("router.{}", s.name);
                let wg = &s.router.wireguard;
                match s.router.kind {
                    RouterKind::Vyos => {
                        o.push(
                            target.clone(),
                            Some(&s.name),
                            ProviderKind::Vyos,
                            format!("interfaces wireguard {}", wg.interface),
                            format!(
                                "{} {} port {}, private key generated on the router",
                                wg.interface, wg.address, wg.listen_port.0
                            ),
                            false,
                        );
                        for peer in t.sites.iter().filter(|p| p.name != s.name) {
                            o.push(
                                target.clone(),
                                Some(&s.name),
                                ProviderKind::Vyos,
                                format!("protocols static route {}", peer.lan),
                                format!("route to {} via {}", peer.name, peer.router.wireguard.address.addr),
                                false,
                            );
                        }
                    }
                    RouterKind::Linux => {
                        o.push(
                            target.clone(),
                            Some(&s.name),
                            ProviderKind::Wireguard,
                            wg.interface.clone(),
                            format!(
                                "{} {} port {}, key generated on the host",
                                wg.interface, wg.address, wg.listen_port.0
                            ),
                            false,
                        );
                        for peer in t.sites.iter().filter(|p| p.name != s.name) {
                            o.push(
                                target.clone(),
                                Some(&s.name),
                                ProviderKind::Command,
                                format!("route {}", peer.lan),
                                format!("route to {} via {}", peer.name, peer.router.wireguard.address.addr),
                                false,
                            );
                        }
                    }
                }
            }
        }
        "clustermesh" => {
            for s in &t.sites {
                o.kube(&s.name, Some("kube-system"), "Secret", "cilium-ca", "Cluster Mesh CA shared by every cluster");
                o.kube(
                    &s.name,
                    Some("kube-system"),
                    "HelmChartConfig",
                    "cilium",
                    format!("clustermesh-apiserver on NodePort {}, peers: {}", t.mesh.clustermesh_port.0, peers(t, s)),
                );
                o.kube(
                    &s.name,
                    Some("kube-system"),
                    "Secret",
                    "cilium-clustermesh",
                    "credentials to reach the other clusters' clustermesh-apiservers",
                );
            }
        }
        "global-service-test" => {
            for s in &t.sites {
                o.kube(&s.name, Some("default"), "Deployment", "fabric-echo", "test backend");
                o.kube(&s.name, Some("default"), "Service", "fabric-echo", "service.cilium.io/global: \"true\"");
            }
        }
        "karmada-control-plane" => {
            let host = &t.federation.karmada.host_site;
            o.kube(host, None, "Namespace", "karmada-system", "Karmada namespace");
            o.kube(
                host,
                Some("kube-system"),
                "HelmChart",
                "karmada",
                format!(
                    "Karmada {} with the Failover feature gate {}",
                    t.versions.karmada,
                    if t.federation.karmada.failover { "on" } else { "off" }
                ),
            );
        }
        "karmada-members" => {
            for s in members(t) {
                o.kube(
                    &s.name,
                    Some("karmada-cluster"),
                    "ServiceAccount",
                    "karmada-member",
                    "identity Karmada uses in the member",
                );
                o.kube(&s.name, None, "ClusterRoleBinding", "karmada-member", "cluster-admin for Karmada's push mode");
                o.kube(&s.name, Some("karmada-cluster"), "Secret", "karmada-member-token", "service-account token");
                o.karmada(Some("karmada-cluster"), "Secret", &s.cluster.name, "member credentials (from the token)");
                o.karmada(
                    None,
                    "Cluster",
                    &s.cluster.name,
                    format!(
                        "member `{}` at https://{}:{}",
                        s.cluster.name, s.cluster.api_address, s.cluster.api_port.0
                    ),
                );
            }
        }
        "argocd-karmada" => {
            let a = &t.federation.argocd;
            let sites: Vec<&Site> = match t.decisions.argocd {
                ArgoCdChoice::PerCluster => t.sites.iter().collect(),
                _ => t.sites.iter().filter(|s| s.name == a.site).collect(),
            };
            for s in sites {
                o.kube(
                    &s.name,
                    Some(&a.namespace),
                    "Secret",
                    "karmada-api",
                    "ArgoCD cluster secret for the Karmada API",
                );
                o.kube(
                    &s.name,
                    Some(&a.namespace),
                    "Application",
                    "fabric-apps",
                    format!("{} @ {} path {} → Karmada API", a.repo, a.revision, a.path),
                );
            }
        }
        "karmada-estimator" => {
            let host = &t.federation.karmada.host_site;
            for s in members(t) {
                o.kube(
                    host,
                    Some("karmada-system"),
                    "Deployment",
                    &format!("karmada-scheduler-estimator-{}", s.cluster.name),
                    "GPU capacity estimator",
                );
            }
        }
        "propagation-policies" => {
            for c in &t.placement {
                for ns in namespaces_of(t, &c.name) {
                    o.karmada(
                        Some(&ns),
                        "PropagationPolicy",
                        &c.name,
                        format!("{:?} placement of {}", c.strategy, services_of(t, &c.name, &ns).join(", "))
                            .to_lowercase(),
                    );
                }
            }
        }
        "override-policies" => {
            for s in members(t) {
                for ns in gpu_namespaces(t) {
                    o.karmada(
                        Some(&ns),
                        "OverridePolicy",
                        &format!("gpu-{}", s.name),
                        format!("gpu.model={} at {}", gpu_model(s).unwrap_or("-"), s.name),
                    );
                }
            }
        }
        "failover" if t.federation.karmada.failover => {
            o.karmada(None, "ClusterTaintPolicy", "fabric-not-ready", "NoExecute taint on members that are not Ready");
        }
        "kueue-local" => {
            for s in sites_of(t, inst) {
                o.kube(&s.name, Some("kube-system"), "HelmChart", "kueue", format!("Kueue {}", t.versions.kueue));
                o.kube(&s.name, None, "ResourceFlavor", &flavor(s), "GPU flavor of the site");
                for q in &s.queues {
                    if is_dispatch_queue(t, s, q) {
                        continue; // created with its admission check by D.3
                    }
                    o.kube(&s.name, None, "ClusterQueue", &q.name, format!("{} GPUs", q.gpu_quota));
                    for l in &q.local_queues {
                        o.kube(&s.name, Some(&l.namespace), "LocalQueue", &l.name, format!("→ {}", q.name));
                    }
                }
            }
        }
        "multikueue-config" => {
            if let Some(mk) = &t.multikueue {
                let m = &mk.manager;
                o.kube(m, None, "AdmissionCheck", "multikueue", "MultiKueue admission check");
                o.kube(m, None, "MultiKueueConfig", "multikueue", format!("workers: {}", mk.workers.join(", ")));
                for w in &mk.workers {
                    o.kube(m, Some("kueue-system"), "Secret", &format!("multikueue-{w}"), "worker kubeconfig");
                    o.kube(m, None, "MultiKueueCluster", w, format!("worker `{w}`"));
                }
            }
        }
        "multikueue-queue" => {
            if let Some(mk) = &t.multikueue
                && let Some(s) = t.sites.iter().find(|s| s.name == mk.manager)
                && let Some(q) = s.queues.iter().find(|q| q.name == mk.queue)
            {
                o.kube(
                    &s.name,
                    None,
                    "ClusterQueue",
                    &q.name,
                    format!("{} GPUs, dispatched by MultiKueue", q.gpu_quota),
                );
                for l in &q.local_queues {
                    o.kube(&s.name, Some(&l.namespace), "LocalQueue", &l.name, format!("→ {}", q.name));
                }
            }
        }
        "multikueue-test-job" => {
            if let Some(mk) = &t.multikueue
                && let Some(l) = t
                    .sites
                    .iter()
                    .find(|s| s.name == mk.manager)
                    .and_then(|s| s.queues.iter().find(|q| q.name == mk.queue))
                    .and_then(|q| q.local_queues.first())
            {
                o.kube(
                    &mk.manager,
                    Some(&l.namespace),
                    "Job",
                    "fabric-multikueue-test",
                    format!("1 GPU through LocalQueue {}", l.name),
                );
            }
        }
        "gateway-config" => {
            if let Some(g) = &t.gateway {
                o.kube(
                    &g.site,
                    Some("tensorzero"),
                    "ConfigMap",
                    "tensorzero-config",
                    format!(
                        "{} model(s): {}",
                        g.models.len(),
                        g.models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                );
                o.kube(
                    &g.site,
                    Some("tensorzero"),
                    "Deployment",
                    "tensorzero-gateway",
                    format!("TensorZero {}", t.versions.tensorzero.as_deref().unwrap_or("(unpinned)")),
                );
            }
        }
        // The catalog check refuses names outside GENERATORS, so nothing else reaches here.
        _ => {}
    }
}

fn sites_of<'a>(t: &'a Topology, inst: &Instance) -> Vec<&'a Site> {
    t.sites.iter().filter(|s| inst.site.as_ref().is_none_or(|n| *n == s.name)).collect()
}

/// Karmada members: the listed sites, or every site.
pub fn members(t: &Topology) -> Vec<&Site> {
    let m = &t.federation.karmada.members;
    t.sites.iter().filter(|s| m.is_empty() || m.contains(&s.name)).collect()
}

fn peers(t: &Topology, s: &Site) -> String {
    t.sites.iter().filter(|p| p.name != s.name).map(|p| p.cluster.name.as_str()).collect::<Vec<_>>().join(", ")
}

fn namespaces_of(t: &Topology, class: &str) -> Vec<String> {
    let mut ns: Vec<String> = t.services.iter().filter(|s| s.class == class).map(|s| s.namespace.clone()).collect();
    ns.sort();
    ns.dedup();
    ns
}

fn services_of(t: &Topology, class: &str, ns: &str) -> Vec<String> {
    t.services.iter().filter(|s| s.class == class && s.namespace == ns).map(|s| s.name.clone()).collect()
}

fn gpu_namespaces(t: &Topology) -> Vec<String> {
    let mut ns: Vec<String> = t.services.iter().filter(|s| s.gpus > 0).map(|s| s.namespace.clone()).collect();
    ns.sort();
    ns.dedup();
    ns
}

/// The GPU model of a site's cluster (the first GPU node's).
pub fn gpu_model(s: &Site) -> Option<&str> {
    s.cluster.nodes.iter().find_map(|n| n.gpu.as_ref()).map(|g| g.model.as_str())
}

/// ResourceFlavor name of a site: `gpu-<model>`, or `default` without GPUs.
pub fn flavor(s: &Site) -> String {
    gpu_model(s).map(|m| format!("gpu-{m}")).unwrap_or_else(|| "default".into())
}

fn is_dispatch_queue(t: &Topology, s: &Site, q: &ClusterQueue) -> bool {
    t.multikueue.as_ref().is_some_and(|m| m.manager == s.name && m.queue == q.name)
}
