//! What each step produces: resources with stable addresses and their desired state.
//!
//! This is the single source of truth for both `fabric render` (the GitOps files) and plan/apply
//! (the desired state diffed against live state). The catalog names generators (`produces:`);
//! each walks the topology, so a new site, node, service or queue yields new resources without
//! code changes. An address is `<target>/<provider path>`, e.g.
//! `cluster.sp/kube-system/HelmChart/cilium`, `router.franca/vyos:interfaces wireguard wg0`,
//! `host.sp-cp1/file:/etc/rancher/k3s/config.yaml`.

use serde::Serialize;
use serde_json::Value;

use crate::catalog::Instance;
pub mod objects;
pub mod text;
pub mod vyos;
pub mod yaml;

use crate::topology::Topology;
use crate::topology::model::*;
use objects as o;

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

/// Where a K3s server keeps the token agents join with.
pub const K3S_NODE_TOKEN: &str = "/var/lib/rancher/k3s/server/node-token";

/// Which provider reads, diffs and applies a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    File,
    Vyos,
    Wireguard,
    Kube,
    Command,
}

/// The desired state of a resource.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", content = "value", rename_all = "lowercase")]
pub enum Desired {
    /// A whole Kubernetes object (applied server-side).
    Kube(Value),
    /// A file's content.
    File(String),
    /// VyOS `set` commands of a managed subtree.
    Vyos(Vec<String>),
    /// A wg-quick configuration (Linux routers).
    Wireguard(String),
    /// A command that makes the state so, with the probe that tells whether it is.
    Command { probe: String, apply: String },
    /// A secret file fabric copies at apply time from another host's file (its address,
    /// `host.<name>/file:<path>`; empty when there is none): never rendered, never shown.
    Secret(String),
    /// A Kubernetes object fabric created that the topology no longer has (its identity):
    /// planned as a deletion.
    Prune(Value),
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
    #[serde(skip)]
    pub desired: Desired,
    /// The file of the GitOps repository `fabric render` writes it to, if any.
    #[serde(skip)]
    pub file: Option<String>,
}

impl Resource {
    /// The desired Kubernetes object, for a resource that is one (not a pruned identity).
    pub fn kube_object(&self) -> Option<&Value> {
        match &self.desired {
            Desired::Kube(o) => Some(o),
            _ => None,
        }
    }
}

/// A file of the GitOps repository that is not itself a resource (Helm values files).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraFile {
    pub path: String,
    pub content: String,
}

#[derive(Default)]
pub struct Produced {
    pub resources: Vec<Resource>,
    pub files: Vec<ExtraFile>,
}

struct Out<'a> {
    p: Produced,
    t: &'a Topology,
}

fn ns_path(ns: Option<&str>, kind: &str, name: &str) -> String {
    match ns {
        Some(ns) => format!("{ns}/{kind}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

impl Out<'_> {
    fn push(&mut self, r: Resource) {
        self.p.resources.push(r);
    }
    /// A Kubernetes object in a site's cluster (or in Karmada when `site` is None).
    fn kube(&mut self, site: Option<&str>, obj: Value, summary: impl Into<String>, file: Option<String>) {
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let ns = obj["metadata"]["namespace"].as_str().map(String::from);
        let target = site.map(|s| format!("cluster.{s}")).unwrap_or_else(|| "karmada".into());
        self.push(Resource {
            address: format!("{target}/{}", ns_path(ns.as_deref(), &kind, &name)),
            target,
            site: site.map(String::from),
            provider: ProviderKind::Kube,
            summary: summary.into(),
            sensitive: kind == "Secret",
            desired: Desired::Kube(obj),
            file,
        });
    }
    fn file(
        &mut self,
        host: &str,
        site: &str,
        path: &str,
        desired: Desired,
        summary: impl Into<String>,
        file: Option<String>,
    ) {
        let sensitive = matches!(desired, Desired::Secret(_));
        self.push(Resource {
            address: format!("host.{host}/file:{path}"),
            target: format!("host.{host}"),
            site: Some(site.into()),
            provider: ProviderKind::File,
            summary: summary.into(),
            sensitive,
            desired,
            file,
        });
    }
    fn command(&mut self, target: String, site: &str, name: &str, probe: String, apply: String, summary: &str) {
        self.push(Resource {
            address: format!("{target}/command:{name}"),
            target,
            site: Some(site.into()),
            provider: ProviderKind::Command,
            summary: summary.into(),
            sensitive: false,
            desired: Desired::Command { probe, apply },
            file: None,
        });
    }
    fn extra(&mut self, path: String, content: String) {
        let f = ExtraFile { path, content };
        if !self.p.files.contains(&f) {
            self.p.files.push(f);
        }
    }
}

/// The resources `inst` produces, in a stable order.
pub fn for_instance(inst: &Instance, t: &Topology) -> Vec<Resource> {
    produce(inst, t).resources
}

/// Resources and extra files of `inst`.
pub fn produce(inst: &Instance, t: &Topology) -> Produced {
    let mut out = Out { p: Produced::default(), t };
    for g in &inst.spec.produces {
        generate(g, inst, &mut out);
    }
    out.p
}

fn sites_of<'a>(t: &'a Topology, inst: &Instance) -> Vec<&'a Site> {
    t.sites.iter().filter(|s| inst.site.as_ref().is_none_or(|n| *n == s.name)).collect()
}

/// Karmada members: the listed sites, or every site.
pub fn members(t: &Topology) -> Vec<&Site> {
    let m = &t.federation.karmada.members;
    t.sites.iter().filter(|s| m.is_empty() || m.contains(&s.name)).collect()
}

fn generate(name: &str, inst: &Instance, o: &mut Out) {
    let t = o.t;
    match name {
        "k3s-server-config" => {
            for s in sites_of(t, inst) {
                let text = yaml::to_string(&text::k3s_server_config(s));
                for n in s.cluster.nodes.iter().filter(|n| n.role == NodeRole::ControlPlane) {
                    o.file(
                        &n.name,
                        &s.name,
                        "/etc/rancher/k3s/config.yaml",
                        Desired::File(text.clone()),
                        "K3s server config: flannel-backend none, no network policy, no kube-proxy/servicelb (K3s restarts when it changes)",
                        Some(format!("config/k3s/{}/server.yaml", s.name)),
                    );
                }
            }
        }
        "cilium-helmchart" => {
            for s in sites_of(t, inst) {
                let summary = format!("Cilium {} (cluster {} id {})", t.versions.cilium, s.cluster.name, s.cluster.id);
                o.kube(
                    Some(&s.name),
                    o::cilium_helm_chart(t, s),
                    summary,
                    Some(format!("apps/cilium/helmchart-{}.yaml", s.name)),
                );
                // The seed's values file: the whole configuration of the site, mesh included.
                let mut values = o::cilium_values(t, s);
                o::merge(&mut values, &o::clustermesh_values(t, s));
                o.extra(format!("apps/cilium/values-{}.yaml", s.name), yaml::to_string(&values));
            }
        }
        "join-vms" | "join-bare-metal" => {
            let kind = if name == "join-vms" { WorkloadKind::Vm } else { WorkloadKind::BareMetal };
            for s in sites_of(t, inst) {
                for (i, w) in s.external_workloads.iter().enumerate().filter(|(_, w)| w.kind == kind) {
                    join(o, s, w, i);
                }
            }
        }
        "wireguard-tunnel" => {
            for s in &t.sites {
                tunnel(o, s);
            }
        }
        "clustermesh" => {
            // One CA for the whole mesh: the first site's (kept when Cilium already made one,
            // generated otherwise), copied into every other cluster at apply time.
            let ca_site = t.sites.first().map(|s| s.name.clone()).unwrap_or_default();
            for s in &t.sites {
                let mut secret = o::secret_placeholder(t, "cilium-ca", "kube-system", "Opaque");
                let summary = if s.name == ca_site {
                    secret["metadata"]["annotations"] = serde_json::json!({ o::GENERATE: "ca" });
                    "Cluster Mesh CA shared by every cluster (kept if present, else generated)".to_string()
                } else {
                    secret["metadata"]["annotations"] = serde_json::json!({
                        o::COPY_FROM: format!("cluster.{ca_site}/kube-system/cilium-ca"),
                        o::COPY_KEYS: "ca.crt=ca.crt,ca.key=ca.key",
                    });
                    format!("Cluster Mesh CA, copied from {ca_site}")
                };
                o.kube(Some(&s.name), secret, summary, None);
                let cfg = o::helm_chart_config(t, "cilium", &o::clustermesh_values(t, s));
                let peers: Vec<&str> =
                    t.sites.iter().filter(|p| p.name != s.name).map(|p| p.cluster.name.as_str()).collect();
                let summary = format!(
                    "clustermesh-apiserver on NodePort {}, peers: {}",
                    t.mesh.clustermesh_port.0,
                    peers.join(", ")
                );
                o.kube(Some(&s.name), cfg, summary, Some(format!("apps/cilium/clustermesh-{}.yaml", s.name)));
            }
        }
        "global-service-test" => {
            for s in &t.sites {
                let (deploy, svc) = o::global_test_service(t);
                let file = Some("apps/tests/global-service.yaml".to_string());
                o.kube(Some(&s.name), deploy, "test backend", file.clone());
                o.kube(Some(&s.name), svc, "service.cilium.io/global: \"true\"", file);
            }
        }
        "karmada-control-plane" => {
            let host = t.federation.karmada.host_site.as_str();
            o.kube(Some(host), o::namespace(t, "karmada-system"), "Karmada namespace", None);
            let gate = if t.federation.karmada.failover { "on" } else { "off" };
            let summary = format!("Karmada {} with the Failover feature gate {gate}", t.versions.karmada);
            o.kube(Some(host), o::karmada_helm_chart(t), summary, Some("apps/karmada/helmchart.yaml".into()));
            o.extra("apps/karmada/values.yaml".into(), yaml::to_string(&o::karmada_values(t)));
        }
        "karmada-members" => {
            o.kube(None, o::namespace(t, "karmada-cluster"), "namespace of the members' credentials", None);
            for s in members(t) {
                let site = Some(s.name.as_str());
                o.kube(site, o::namespace(t, "karmada-cluster"), "namespace of Karmada's identity", None);
                let who = "Karmada (push mode)";
                identity(o, site, "karmada-member", "karmada-cluster", "cluster-admin", who);
                // Karmada's credentials for the member: copied at apply time from the member's
                // token (never rendered, shown or journaled); the annotations say from where.
                let mut creds = o::secret_placeholder(t, &s.cluster.name, "karmada-cluster", "Opaque");
                creds["metadata"]["annotations"] = serde_json::json!({
                    o::COPY_FROM: format!("cluster.{}/karmada-cluster/karmada-member-token", s.name),
                    o::COPY_KEYS: "token=token,ca.crt=caBundle",
                });
                o.kube(None, creds, "member credentials (from the token)", None);
                let summary = format!(
                    "member `{}` at https://{}:{}",
                    s.cluster.name, s.cluster.api_address, s.cluster.api_port.0
                );
                o.kube(None, o::karmada_cluster(t, s), summary, Some(format!("apps/karmada/clusters/{}.yaml", s.name)));
            }
        }
        "argocd-karmada" => {
            let a = &t.federation.argocd;
            let sites: Vec<&Site> = match t.decisions.argocd {
                ArgoCdChoice::PerCluster => t.sites.iter().collect(),
                _ => t.sites.iter().filter(|s| s.name == a.site).collect(),
            };
            // ArgoCD's identity in the Karmada API: a ServiceAccount whose token the Karmada
            // API fills, shaped into ArgoCD's cluster secret at apply time.
            identity(o, None, "argocd-manager", "kube-system", "cluster-admin", "ArgoCD");
            // The services' namespaces in Karmada: ArgoCD deploys into them, the policies of
            // C.5/C.6 live in them, and Karmada propagates them to the members.
            for ns in namespaces(t.services.iter()) {
                o.kube(None, o::namespace(t, &ns), "namespace ArgoCD deploys services into", None);
            }
            let server = karmada_server(t);
            for s in sites {
                o.kube(Some(&s.name), o::namespace(t, &a.namespace), "ArgoCD's namespace", None);
                let mut secret = o::secret_placeholder(t, "karmada-api", &a.namespace, "Opaque");
                secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"] = serde_json::json!("cluster");
                secret["metadata"]["annotations"] = serde_json::json!({
                    o::COPY_FROM: "karmada/kube-system/argocd-manager-token",
                    o::COPY_AS: "argocd-cluster",
                    o::SERVER: server,
                    o::CLUSTER_NAME: "karmada",
                });
                o.kube(Some(&s.name), secret, format!("ArgoCD cluster `karmada` at {server}"), None);
                let summary = format!("{} @ {} path {} → Karmada API", a.repo, a.revision, a.path);
                o.kube(
                    Some(&s.name),
                    o::argocd_application(t),
                    summary,
                    Some(format!("apps/argocd/application-{}.yaml", s.name)),
                );
            }
        }
        "karmada-estimator" if t.federation.karmada.estimator => {
            // The chart renders estimators only for members whose client certificates are in its
            // values (`schedulerEstimator.memberClusters`); fabric's members authenticate with
            // ServiceAccount tokens, so fabric runs one estimator per member itself, with a
            // kubeconfig made from that token, named as the scheduler looks them up
            // (`karmada-scheduler-estimator-<cluster>` in karmada-system), and turns the
            // scheduler's use of them on (a HelmChartConfig over C.1's chart).
            let host = Some(t.federation.karmada.host_site.as_str());
            let file = Some("apps/karmada/estimator.yaml".to_string());
            for s in members(t) {
                let c = &s.cluster.name;
                let mut kc = o::secret_placeholder(t, &format!("{c}-kubeconfig"), "karmada-system", "Opaque");
                let server = format!("https://{}:{}", s.cluster.api_address, s.cluster.api_port.0);
                kc["metadata"]["annotations"] = serde_json::json!({
                    o::COPY_FROM: format!("cluster.{}/karmada-cluster/karmada-member-token", s.name),
                    o::COPY_AS: "kubeconfig",
                    o::SERVER: server,
                });
                o.kube(host, kc, format!("the estimator's kubeconfig for {server}"), None);
                let (deploy, svc) = o::scheduler_estimator(t, c);
                o.kube(host, deploy, format!("estimates free capacity in `{c}`"), file.clone());
                o.kube(host, svc, "where the scheduler reaches it (port 10352)", file.clone());
            }
            let values = serde_json::json!({ "scheduler": { "enableSchedulerEstimator": true } });
            o.kube(host, o::helm_chart_config(t, "karmada", &values), "the scheduler asks the estimators", file);
        }
        "propagation-policies" => {
            for c in &t.placement {
                for ns in namespaces(t.services.iter().filter(|s| s.class == c.name)) {
                    let services: Vec<&Service> =
                        t.services.iter().filter(|s| s.class == c.name && s.namespace == ns).collect();
                    let names: Vec<&str> = services.iter().map(|s| s.name.as_str()).collect();
                    let summary =
                        format!("{} placement of {}", format!("{:?}", c.strategy).to_lowercase(), names.join(", "));
                    let file = Some(format!("apps/karmada/propagation-policies/{}.yaml", c.name));
                    o.kube(None, o::propagation_policy(t, c, &ns, &services), summary, file);
                }
            }
        }
        "override-policies" => {
            for s in members(t) {
                let Some(model) = gpu_model(s) else { continue };
                for ns in namespaces(t.services.iter().filter(|s| s.gpus > 0)) {
                    let services: Vec<&Service> =
                        t.services.iter().filter(|x| x.gpus > 0 && x.namespace == ns).collect();
                    let file = Some(format!("apps/karmada/override-policies/{}.yaml", s.name));
                    o.kube(
                        None,
                        o::override_policy(t, s, &ns, &services, model),
                        format!("gpu.model={model} at {}", s.name),
                        file,
                    );
                }
            }
        }
        "failover" if t.federation.karmada.failover => {
            let file = Some("apps/karmada/failover/cluster-taint-policy.yaml".to_string());
            o.kube(None, o::cluster_taint_policy(t), "NoExecute taint on members that are not Ready", file);
        }
        "kueue-local" => {
            for s in sites_of(t, inst) {
                let site = Some(s.name.as_str());
                let queues_file = Some(format!("apps/kueue/cluster-queues/gpu-{}.yaml", s.name));
                o.kube(
                    site,
                    o::kueue_helm_chart(t, s),
                    format!("Kueue {}", t.versions.kueue),
                    Some(format!("apps/kueue/helmchart-{}.yaml", s.name)),
                );
                o.extra(format!("apps/kueue/values-{}.yaml", s.name), yaml::to_string(&o::kueue_values(t, s)));
                // Kueue's namespace (the chart creates it too) and those of the LocalQueues.
                let mut nss: Vec<&str> = vec!["kueue-system"];
                nss.extend(s.queues.iter().flat_map(|q| q.local_queues.iter().map(|l| l.namespace.as_str())));
                let mut seen = std::collections::BTreeSet::new();
                for ns in nss.into_iter().filter(|n| seen.insert(*n)) {
                    o.kube(site, o::namespace(t, ns), "namespace", None);
                }
                let fl = flavor(s);
                o.kube(site, o::resource_flavor(t, s, &fl), "GPU flavor of the site", queues_file.clone());
                for q in &s.queues {
                    if is_dispatch_queue(t, s, q) {
                        continue; // created with its admission check by D.3
                    }
                    o.kube(
                        site,
                        o::cluster_queue(t, s, q, &fl, None),
                        format!("{} GPUs", q.gpu_quota),
                        queues_file.clone(),
                    );
                    for l in &q.local_queues {
                        o.kube(site, o::local_queue(t, l, &q.name), format!("→ {}", q.name), queues_file.clone());
                    }
                }
            }
        }
        "multikueue-config" => {
            if let Some(mk) = &t.multikueue {
                let m = Some(mk.manager.as_str());
                let file = Some("apps/karmada/multikueue/multikueue-config.yaml".to_string());
                o.kube(m, o::admission_check(t), "MultiKueue admission check", file.clone());
                o.kube(m, o::multikueue_config(t, mk), format!("workers: {}", mk.workers.join(", ")), file.clone());
                for w in &mk.workers {
                    let Some(ws) = t.sites.iter().find(|s| s.name == *w) else { continue };
                    // MultiKueue's identity in the worker, with what it needs to run the
                    // dispatched jobs there; its token becomes the manager's kubeconfig Secret.
                    let site = Some(w.as_str());
                    o.kube(site, o::multikueue_worker_role(t), "what MultiKueue may do in the worker", None);
                    identity(o, site, "multikueue-worker", "kueue-system", "multikueue-worker", "MultiKueue");
                    let server = format!("https://{}:{}", ws.cluster.api_address, ws.cluster.api_port.0);
                    let mut secret = o::secret_placeholder(t, &format!("multikueue-{w}"), "kueue-system", "Opaque");
                    secret["metadata"]["annotations"] = serde_json::json!({
                        o::COPY_FROM: format!("cluster.{w}/kueue-system/multikueue-worker-token"),
                        o::COPY_AS: "kubeconfig",
                        o::SERVER: server,
                    });
                    o.kube(m, secret, format!("worker kubeconfig for {server}"), None);
                    o.kube(m, o::multikueue_cluster(t, w), format!("worker `{w}`"), file.clone());
                }
            }
        }
        "multikueue-queue" => {
            if let Some(mk) = &t.multikueue
                && let Some(s) = t.sites.iter().find(|s| s.name == mk.manager)
                && let Some(q) = s.queues.iter().find(|q| q.name == mk.queue)
            {
                let file = Some("apps/karmada/multikueue/multikueue-config.yaml".to_string());
                let cq = o::cluster_queue(t, s, q, &flavor(s), Some("multikueue"));
                o.kube(Some(&s.name), cq, format!("{} GPUs, dispatched by MultiKueue", q.gpu_quota), file.clone());
                for l in &q.local_queues {
                    o.kube(Some(&s.name), o::local_queue(t, l, &q.name), format!("→ {}", q.name), file.clone());
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
                let file = Some("apps/tests/multikueue-job.yaml".to_string());
                o.kube(
                    Some(&mk.manager),
                    o::multikueue_test_job(t, l),
                    format!("1 GPU through LocalQueue {}", l.name),
                    file,
                );
            }
        }
        "gateway-config" => {
            if let Some(g) = &t.gateway {
                let toml = text::tensorzero_toml(t, g);
                o.extra("apps/tensorzero/tensorzero.toml".into(), toml.clone());
                let site = Some(g.site.as_str());
                let file = Some("apps/tensorzero/gateway.yaml".to_string());
                o.kube(site, o::namespace(t, "tensorzero"), "gateway namespace", file.clone());
                let models: Vec<&str> = g.models.iter().map(|m| m.name.as_str()).collect();
                let cm = o::config_map(t, "tensorzero-config", "tensorzero", "tensorzero.toml", &toml);
                o.kube(site, cm, format!("{} model(s): {}", models.len(), models.join(", ")), file.clone());
                let summary = format!("TensorZero {}", t.versions.tensorzero.as_deref().unwrap_or("(unpinned)"));
                o.kube(site, o::gateway_deployment(t, g), summary, file);
                gateway_site_services(o, g);
            }
        }
        // The catalog check refuses names outside GENERATORS, so nothing else reaches here.
        _ => {}
    }
}

/// An identity for `who` in a cluster (or Karmada when `site` is None): a ServiceAccount bound to
/// `role`, and its token Secret (`<sa>-token`), which the cluster fills and fabric copies from.
fn identity(o: &mut Out, site: Option<&str>, sa: &str, ns: &str, role: &str, who: &str) {
    let t = o.t;
    o.kube(site, o::service_account(t, sa, ns), format!("{who}'s identity"), None);
    o.kube(site, o::cluster_role_binding(t, sa, sa, ns, role), format!("{role} for {who}"), None);
    o.kube(site, sa_token(t, &format!("{sa}-token"), ns, sa), "service-account token", None);
}

/// A ServiceAccount token Secret: created empty, filled by the cluster's token controller.
fn sa_token(t: &Topology, name: &str, ns: &str, sa: &str) -> Value {
    let mut token = o::secret_placeholder(t, name, ns, "kubernetes.io/service-account-token");
    token["metadata"]["annotations"] = serde_json::json!({ "kubernetes.io/service-account.name": sa });
    token
}

/// The Karmada API as other clusters reach it: the host site's API address on the chart's NodePort.
pub fn karmada_server(t: &Topology) -> String {
    let host = t.sites.iter().find(|s| s.name == t.federation.karmada.host_site);
    match (&t.federation.karmada.vm, host) {
        (Some(vm), _) => format!("https://{}:{}", vm.address, o::KARMADA_API_NODE_PORT),
        (None, Some(s)) => format!("https://{}:{}", s.cluster.api_address, o::KARMADA_API_NODE_PORT),
        (None, None) => String::new(),
    }
}

/// How a VM or bare-metal host joins (A.3/A.4), per `mesh.join`.
fn join(o: &mut Out, s: &Site, w: &ExternalWorkload, index: usize) {
    let t = o.t;
    match t.mesh.join {
        JoinMethod::K3sAgent => {
            let cfg = yaml::to_string(&text::k3s_agent_config(s, w));
            let summary = format!(
                "K3s agent config joining `{}` with a NoSchedule taint (the agent restarts when it changes)",
                s.cluster.name
            );
            o.file(
                &w.name,
                &s.name,
                "/etc/rancher/k3s/config.yaml",
                Desired::File(cfg),
                summary,
                Some(format!("config/k3s/{}/agent-{}.yaml", s.name, w.name)),
            );
            // The join token is copied at apply time from a server of the site (never shown).
            let server = s.cluster.nodes.iter().find(|n| n.role == NodeRole::ControlPlane && n.ssh.is_some());
            let source = server.map(|n| format!("host.{}/file:{K3S_NODE_TOKEN}", n.name)).unwrap_or_default();
            let summary = match server {
                Some(n) => format!("K3s join token, copied from {}", n.name),
                None => "K3s join token (no control-plane host with SSH to copy it from)".to_string(),
            };
            o.file(&w.name, &s.name, "/etc/rancher/k3s/token", Desired::Secret(source), summary, None);
            o.command(
                format!("host.{}", w.name),
                &s.name,
                "k3s-agent",
                "systemctl is-active --quiet k3s-agent".into(),
                // The agent runs the servers' version: K3s supports no skew the other way.
                format!(
                    "curl -sfL https://get.k3s.io | INSTALL_K3S_VERSION={} INSTALL_K3S_EXEC=agent sh -",
                    crate::transport::shell::quote(&t.versions.k3s)
                ),
                "install and start k3s-agent",
            );
        }
        JoinMethod::CiliumExternalWorkloads => {
            let cew = o::cilium_external_workload(t, s, w, index);
            o.kube(
                Some(&s.name),
                cew,
                format!("external workload {}", w.address),
                Some(format!("apps/cilium/external-workloads-{}.yaml", s.name)),
            );
            o.command(
                format!("host.{}", w.name),
                &s.name,
                "cilium-agent",
                "docker inspect -f '{{.State.Running}}' cilium".into(),
                "cilium clustermesh vm install install-external-workload.sh && ./install-external-workload.sh".into(),
                "install cilium-agent as an external workload",
            );
        }
    }
}

/// B.1 at one router.
fn tunnel(o: &mut Out, s: &Site) {
    let t = o.t;
    let target = format!("router.{}", s.name);
    let wg = &s.router.wireguard;
    match s.router.kind {
        RouterKind::Vyos => {
            let all = vyos::commands(t, s);
            let file = Some(format!("config/vyos/wireguard/{}.conf", s.name));
            let iface = format!("interfaces wireguard {}", wg.interface);
            let pick = |prefix: &str| -> Vec<String> {
                all.iter().filter(|c| c.starts_with(&format!("set {prefix}"))).cloned().collect()
            };
            o.push(Resource {
                address: format!("{target}/vyos:{iface}"),
                target: target.clone(),
                site: Some(s.name.clone()),
                provider: ProviderKind::Vyos,
                summary: format!(
                    "{} {} port {}, private key generated on the router",
                    wg.interface, wg.address, wg.listen_port.0
                ),
                sensitive: false,
                desired: Desired::Vyos(pick(&iface)),
                file: file.clone(),
            });
            for p in t.sites.iter().filter(|p| p.name != s.name) {
                let route = format!("protocols static route {}", p.lan);
                o.push(Resource {
                    address: format!("{target}/vyos:{route}"),
                    target: target.clone(),
                    site: Some(s.name.clone()),
                    provider: ProviderKind::Vyos,
                    summary: format!("route to {} via {}", p.name, wg.interface),
                    sensitive: false,
                    desired: Desired::Vyos(pick(&route)),
                    file: file.clone(),
                });
            }
            o.push(Resource {
                address: format!("{target}/vyos:system config-management commit-confirm"),
                target: target.clone(),
                site: Some(s.name.clone()),
                provider: ProviderKind::Vyos,
                summary: "commit-confirm reverts by reload".into(),
                sensitive: false,
                desired: Desired::Vyos(pick("system config-management commit-confirm")),
                file,
            });
            // The whole file, comments included, is what render writes.
            o.extra(format!("config/vyos/wireguard/{}.conf", s.name), vyos::conf_file(t, s));
        }
        RouterKind::Linux => {
            o.push(Resource {
                address: format!("{target}/wireguard:{}", wg.interface),
                target: target.clone(),
                site: Some(s.name.clone()),
                provider: ProviderKind::Wireguard,
                summary: format!(
                    "{} {} port {}, key generated on the host",
                    wg.interface, wg.address, wg.listen_port.0
                ),
                sensitive: false,
                desired: Desired::Wireguard(text::wireguard_conf(t, s)),
                file: Some(format!("config/wireguard/{}.conf", s.name)),
            });
            for p in t.sites.iter().filter(|p| p.name != s.name) {
                o.command(
                    target.clone(),
                    &s.name,
                    &format!("route {}", p.lan),
                    format!("ip route show {} dev {}", p.lan, wg.interface),
                    format!("ip route replace {} dev {}", p.lan, wg.interface),
                    &format!("route to {} via {}", p.name, wg.interface),
                );
            }
        }
    }
}

/// Per-site global services the gateway addresses (`<service>-<site>`), in every cluster that
/// runs a backend and in the gateway's.
fn gateway_site_services(o: &mut Out, g: &Gateway) {
    let t = o.t;
    let mut done: Vec<(String, String)> = vec![];
    for m in &g.models {
        let Some(svc) = t.services.iter().find(|s| s.name == m.service) else { continue };
        let sites: Vec<&str> =
            m.routes.iter().map(|r| r.site.as_str()).chain(m.fallback.iter().map(String::as_str)).collect();
        for site in sites {
            let name = text::site_service(&svc.name, site);
            for cluster_site in [site, g.site.as_str()] {
                if done.contains(&(cluster_site.to_string(), name.clone())) {
                    continue;
                }
                done.push((cluster_site.to_string(), name.clone()));
                let mut obj = o::object(t, "v1", "Service", &name, Some(&svc.namespace));
                obj["metadata"] = serde_json::json!({
                    "name": name, "namespace": svc.namespace,
                    "labels": obj["metadata"]["labels"].clone(),
                    "annotations": { "service.cilium.io/global": "true", "service.cilium.io/shared": (cluster_site == site).to_string() },
                });
                obj.insert(
                    "spec".into(),
                    serde_json::json!({ "selector": { "app": svc.name, "fabric.io/site": site }, "ports": [{ "port": svc.port.0 }] }),
                );
                let summary = format!("{} backends at {site}, for the gateway", svc.name);
                o.kube(
                    Some(cluster_site),
                    Value::Object(obj),
                    summary,
                    Some("apps/tensorzero/site-services.yaml".into()),
                );
            }
        }
    }
}

fn namespaces<'a>(services: impl Iterator<Item = &'a Service>) -> Vec<String> {
    let mut ns: Vec<String> = services.map(|s| s.namespace.clone()).collect();
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
