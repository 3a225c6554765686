//! What each step produces: resources with stable addresses and their desired state.
//!
//! This is the single source of truth for both `fabric render` (the GitOps files) and plan/apply
//! (the desired state diffed against live state). Each step's module (`steps/`) writes its
//! resources through [`Out`], walking the topology, so a new site, node, service or queue yields new resources without
//! code changes. An address is `<target>/<provider path>`, e.g.
//! `cluster.sp/kube-system/HelmChart/cilium`, `router.franca/vyos:interfaces wireguard wg0`,
//! `host.sp-cp1/file:/etc/rancher/k3s/config.yaml`.

use std::collections::BTreeMap;

use serde::Serialize;

pub use crate::addr::{Address, Target};
use crate::transport::shell::Sh;
use serde_json::Value;

pub mod argocd;
pub mod backup;
pub mod charts;
pub mod cilium;
pub mod consistency;
pub mod drbd;
pub mod gpu_runtime;
pub mod k3s_install;
pub mod kai;
pub mod karmada;
pub mod kinds;
pub mod kueue;
pub mod nft;
pub mod node_migration;
pub mod nvidia;
pub mod objects;
pub mod refs;
pub mod tensorzero;
pub mod text;
pub mod upgrade;
pub mod vyos;
pub mod yaml;

use crate::topology::Topology;
use crate::topology::model::*;
use objects as o;

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
    Command { probe: Sh, apply: Sh },
    /// K3s from the air-gap bundle (provider `command`; see `desired::k3s_install`).
    K3sInstall(Box<k3s_install::K3sInstall>),
    /// One node of a running cluster moved from Flannel to Cilium (provider `command`; see
    /// `desired::node_migration`).
    NodeMigration(Box<node_migration::NodeMigration>),
    /// A secret file fabric copies at apply time from another host's file (its address,
    /// `host.<name>/file:<path>`; None when there is none): never rendered, never shown.
    Secret(Option<Address>),
    /// A Kubernetes object fabric created that the topology no longer has (its identity):
    /// planned as a deletion.
    Prune(Value),
}

/// One unit of desired state.
#[derive(Debug, Clone, Serialize)]
pub struct Resource {
    /// Stable address, unique in the fabric; its target says where it lives.
    pub address: Address,
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
    /// Where it lives: `router.<site>`, `host.<name>`, `cluster.<site>` or `karmada`.
    pub fn target(&self) -> &Target {
        &self.address.target
    }

    /// A router's WireGuard interface (wg-quick or VyOS): it holds the router's key pair.
    pub fn is_wireguard_interface(&self) -> bool {
        self.provider == ProviderKind::Wireguard
            || self.address.vyos().is_some_and(|p| p.starts_with("interfaces wireguard "))
    }

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

/// What a step's `desired` writes into: resources in order, and the extra files render adds.
pub struct Out<'a> {
    p: Produced,
    pub t: &'a Topology,
}

fn ns_path(ns: Option<&str>, kind: &str, name: &str) -> String {
    match ns {
        Some(ns) => format!("{ns}/{kind}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

impl<'a> Out<'a> {
    pub fn new(t: &'a Topology) -> Out<'a> {
        Out { p: Produced::default(), t }
    }
    pub fn done(self) -> Produced {
        self.p
    }
    pub fn push(&mut self, r: Resource) {
        self.p.resources.push(r);
    }
    /// A Kubernetes object in a site's cluster (or in Karmada when `site` is None).
    pub fn kube(&mut self, site: Option<&str>, obj: Value, summary: impl Into<String>, file: Option<String>) {
        self.kube_at(Target::api(site), site, obj, summary, file);
    }
    /// An object of the Kubernetes API `target` (a cluster that is not a site's: Karmada's VM),
    /// counted as `site`'s.
    pub fn kube_at(
        &mut self,
        target: Target,
        site: Option<&str>,
        obj: Value,
        summary: impl Into<String>,
        file: Option<String>,
    ) {
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let ns = obj["metadata"]["namespace"].as_str().map(String::from);
        self.push(Resource {
            address: target.at(ns_path(ns.as_deref(), &kind, &name)),
            site: site.map(String::from),
            provider: ProviderKind::Kube,
            summary: summary.into(),
            sensitive: kind == "Secret",
            desired: Desired::Kube(obj),
            file,
        });
    }
    pub fn file(
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
            address: Target::host(host).at(format!("file:{path}")),
            site: Some(site.into()),
            provider: ProviderKind::File,
            summary: summary.into(),
            sensitive,
            desired,
            file,
        });
    }
    pub fn command(&mut self, target: Target, site: &str, name: &str, probe: Sh, apply: Sh, summary: &str) {
        self.push(Resource {
            address: target.at(format!("command:{name}")),
            site: Some(site.into()),
            provider: ProviderKind::Command,
            summary: summary.into(),
            sensitive: false,
            desired: Desired::Command { probe, apply },
            file: None,
        });
    }
    pub fn extra(&mut self, path: String, content: String) {
        let f = ExtraFile { path, content };
        if !self.p.files.contains(&f) {
            self.p.files.push(f);
        }
    }
}

/// Karmada members: the listed sites, or every site.
pub fn members(t: &Topology) -> Vec<&Site> {
    let m = &t.federation.karmada.members;
    t.sites.iter().filter(|s| m.is_empty() || m.contains(&s.name)).collect()
}

/// An identity for `who` in a cluster (or Karmada when `site` is None): a ServiceAccount bound to
/// `role`, and its token Secret (`<sa>-token`), which the cluster fills and fabric copies from.
pub fn identity(o: &mut Out, site: Option<&str>, sa: &str, ns: &str, role: &str, who: &str) {
    let t = o.t;
    o.kube(site, o::service_account(t, sa, ns), format!("{who}'s identity"), None);
    o.kube(site, o::cluster_role_binding(t, sa, sa, ns, role), format!("{role} for {who}"), None);
    o.kube(site, sa_token(t, &format!("{sa}-token"), ns, sa), "service-account token", None);
}

/// A ServiceAccount token Secret: created empty, filled by the cluster's token controller.
pub fn sa_token(t: &Topology, name: &str, ns: &str, sa: &str) -> Value {
    let mut token = o::secret_placeholder(t, name, ns, "kubernetes.io/service-account-token");
    token["metadata"]["annotations"] = serde_json::json!({ "kubernetes.io/service-account.name": sa });
    token
}

/// Where Karmada's control plane runs: the host site's cluster, or, with `karmada_host:
/// dedicated-vm`, the single-node K3s on the VM (a cluster of its own, `cluster.<vm name>`);
/// with the site it belongs to (for `--site`).
pub fn karmada_host(t: &Topology) -> (Target, &str) {
    let k = &t.federation.karmada;
    match (&k.vm, t.decisions.karmada_host) {
        (Some(vm), KarmadaHostChoice::DedicatedVm) => (Target::cluster(&vm.name), k.host_site.as_str()),
        _ => (Target::cluster(&k.host_site), k.host_site.as_str()),
    }
}

/// The host of an `https://host:port/path` URL (an IPv6 literal without its brackets).
pub fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or_default().to_string();
    }
    authority.split(':').next().unwrap_or_default().to_string()
}

/// The namespaces of these services, sorted, each once.
pub fn namespaces<'a>(services: impl Iterator<Item = &'a Service>) -> Vec<String> {
    let mut ns: Vec<String> = services.map(|s| s.namespace.clone()).collect();
    ns.sort();
    ns.dedup();
    ns
}

/// The GPU model of a site's cluster (the first GPU node's).
pub fn gpu_model(s: &Site) -> Option<&str> {
    crate::topology::gpus::site_gpu(s).map(|g| g.model.as_str())
}

/// ResourceFlavor name of a site: `gpu-<model>`, or `default` without GPUs.
pub fn flavor(s: &Site) -> String {
    gpu_model(s).map(|m| format!("gpu-{m}")).unwrap_or_else(|| "default".into())
}

/// Where MultiKueue's manager runs: its cluster (`cluster.<manager>`, a site's or Karmada's
/// VM's) and the site it counts as for `--site` (the VM's is Karmada's host site, as in C.1).
pub fn multikueue_manager(t: &Topology) -> Option<(Target, &str)> {
    let mk = t.multikueue.as_ref()?;
    let site = if t.multikueue_vm().is_some() { &t.federation.karmada.host_site } else { &mk.manager };
    Some((Target::cluster(&mk.manager), site.as_str()))
}

/// The ResourceFlavor of the dispatching queue at Karmada's VM: no node labels, since no Job
/// runs there (the workers' own queues choose their GPUs).
pub const DISPATCH_FLAVOR: &str = "default";

/// The dispatching ClusterQueue at the manager: a manager site's own queue of that name, or, at
/// Karmada's VM, one made from the workers' queues of that name (its GPU quota their total: the
/// quota at the manager only bounds how many Jobs are out for dispatch, and Kueue's MultiKueue
/// concept asks for "the total quotas in the worker clusters"). Its LocalQueues are the workers',
/// each once, in the workers' order: MultiKueue creates a Job in a worker under its namespace
/// and LocalQueue name. Its rendered quotas are [`dispatch_quota`]'s.
pub fn dispatch_queue(t: &Topology) -> Option<ClusterQueue> {
    let mk = t.multikueue.as_ref()?;
    let of = |site: &str| t.sites.iter().find(|s| s.name == site)?.queues.iter().find(|q| q.name == mk.queue);
    if t.multikueue_vm().is_none() {
        return of(&mk.manager).cloned();
    }
    let queues: Vec<&ClusterQueue> = mk.workers.iter().filter_map(|w| of(w)).collect();
    if queues.is_empty() {
        return None;
    }
    let mut local_queues: Vec<LocalQueue> = Vec::new();
    for l in queues.iter().flat_map(|q| &q.local_queues) {
        if !local_queues.iter().any(|x| x.name == l.name && x.namespace == l.namespace) {
            local_queues.push(l.clone());
        }
    }
    Some(ClusterQueue {
        name: mk.queue.clone(),
        gpu_quota: queues.iter().map(|q| q.gpu_quota).sum(),
        cpu_quota: None,
        memory_gib_quota: None,
        local_queues,
    })
}

/// The dispatching queue's quotas at the manager (`topology::queues::dispatch_quota`): a
/// manager site's own numbers where it sets them, else the workers' total.
pub fn dispatch_quota(t: &Topology) -> Option<crate::topology::queues::Quota> {
    let mk = t.multikueue.as_ref()?;
    let manager =
        t.sites.iter().find(|s| s.name == mk.manager).and_then(|s| s.queues.iter().find(|q| q.name == mk.queue));
    Some(crate::topology::queues::dispatch_quota(t, mk, manager))
}

/// A ClusterQueue's quotas as the plan shows them.
pub fn quota_summary(q: &crate::topology::queues::Quota) -> String {
    format!(
        "{} GPUs, {} cpu, {} memory",
        q.gpus,
        kueue::cpu_quantity(q.cpu_milli),
        kueue::memory_quantity(q.memory_mib)
    )
}

/// The cohort of a site's ClusterQueues: they lend one another the GPUs they leave unused.
pub fn cohort(s: &Site) -> String {
    format!("{}-gpu", s.name)
}

/// Whether `q` is the MultiKueue queue of its site (made with its admission check by D.3).
pub fn is_dispatch_queue(t: &Topology, s: &Site, q: &ClusterQueue) -> bool {
    t.multikueue.as_ref().is_some_and(|m| m.manager == s.name && m.queue == q.name)
}

/// The labels K3s itself sets on a node of a site's cluster (the hostname, the OS, the
/// control-plane role on servers): what a node carries before any step labels it. The labels
/// fabric sets are objects of the steps that set them (D.1's Nodes, `objects::gpu_labels`) and
/// the `node-label`s of external workloads ([`workload_labels`]).
pub fn k3s_node_labels(_s: &Site, n: &Node) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("kubernetes.io/hostname".to_string(), n.name.clone());
    out.insert("kubernetes.io/os".to_string(), "linux".to_string());
    if n.role == NodeRole::ControlPlane {
        out.insert("node-role.kubernetes.io/control-plane".to_string(), "true".to_string());
    }
    out
}

/// The labels fabric gives an external workload joining as a K3s agent (its `node-label`s, A.3/A.4).
pub fn workload_labels(w: &ExternalWorkload) -> BTreeMap<String, String> {
    let kind = match w.kind {
        WorkloadKind::Vm => "vm",
        WorkloadKind::BareMetal => "bare-metal",
    };
    let mut out = BTreeMap::new();
    out.insert(o::EXTERNAL_LABEL.to_string(), kind.to_string());
    if let Some(g) = &w.gpu {
        out.insert(o::GPU_MODEL_LABEL.to_string(), g.model.clone());
    }
    out
}

/// The static routes through the tunnel, with what each is for: every other site's LAN, then,
/// when DRBD crosses the sites directly, a host route per remote storage host (`desired::drbd`),
/// so the storage path stays on the tunnel whatever more specific route to the other LAN a site
/// adds later.
pub fn routes(t: &Topology, s: &Site) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = t
        .sites
        .iter()
        .filter(|p| p.name != s.name)
        .map(|p| (p.lan.to_string(), format!("route to {}", p.name)))
        .collect();
    if let Some(d) = drbd::direct(t, s) {
        out.extend(d.remote.iter().map(|a| (format!("{a}/32"), format!("route to storage host {a} (DRBD)"))));
    }
    out
}

/// One Kubernetes object as a resource of `site`'s cluster (None: Karmada), for tests.
#[cfg(test)]
pub(crate) fn kube_resource(t: &Topology, site: Option<&str>, obj: Value, file: Option<&str>) -> Resource {
    let mut out = Out::new(t);
    out.kube(site, obj, "test", file.map(String::from));
    out.done().resources.remove(0)
}
