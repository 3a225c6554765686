//! What a resource provides and what it requires, read from the object itself.
//!
//! A Kubernetes object provides its own identity (kind, namespace, name) and, depending on its
//! kind, more: a Namespace provides the namespace, a K3s HelmChart the API groups its chart
//! installs ([`CHARTS`]), a workload's pod template the labels its pods carry, a Karmada
//! OverridePolicy the labels and node selectors it adds in its member. It requires its
//! namespace, its kind's API group, and whatever it names: Secrets, ConfigMaps, queues, flavors,
//! admission checks, labels a selector or nodeSelector asks for… The step graph's derived edges
//! (`steps::derive`) and the consistency pass (`desired::consistency`) both read this model, so
//! what makes an edge and what is checked cannot drift apart.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::NodeIndex;
use serde_json::Value;

use super::kai::KAI_QUEUE_LABEL;
use super::tensorzero::GATEWAY_NAMESPACE;
use super::{Produced, Resource, Target, k3s_node_labels, workload_labels};
use crate::catalog::Want;
use crate::topology::Topology;

/// Something one resource makes and another may need.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Thing {
    /// A named object (`namespace` None: cluster-scoped).
    Object {
        kind: String,
        namespace: Option<String>,
        name: String,
    },
    Namespace(String),
    /// An API group the target serves (`kueue.x-k8s.io`); the core groups are always served.
    Group(String),
    /// A label some node of the cluster carries.
    NodeLabel {
        key: String,
        value: String,
    },
    /// A label some pod of the cluster carries.
    PodLabel {
        key: String,
        value: String,
    },
}

impl std::fmt::Display for Thing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Thing::Object { kind, namespace: Some(ns), name } => write!(f, "{kind} {ns}/{name}"),
            Thing::Object { kind, namespace: None, name } => write!(f, "{kind} {name}"),
            Thing::Namespace(n) => write!(f, "namespace {n}"),
            Thing::Group(g) => write!(f, "API group {g}"),
            Thing::NodeLabel { key, value } => write!(f, "node label {key}={value}"),
            Thing::PodLabel { key, value } => write!(f, "pod label {key}={value}"),
        }
    }
}

/// A thing at a target (`cluster.sp`, `karmada`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fact {
    pub at: Target,
    pub thing: Thing,
}

/// A fact a resource requires, and the field that names it (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub fact: Fact,
    pub field: String,
    /// Other targets where the same thing would do as well (a Cilium global service's
    /// backends may be in any cluster of the mesh).
    pub elsewhere: Vec<Target>,
}

impl Need {
    /// The fact, and the same thing at each alternative target.
    pub fn facts(&self) -> impl Iterator<Item = Fact> + '_ {
        std::iter::once(self.fact.clone())
            .chain(self.elsewhere.iter().map(|at| Fact { at: at.clone(), thing: self.fact.thing.clone() }))
    }
}

/// A Service Cilium merges across the mesh: its backends may be in any cluster
/// (`service.cilium.io/global: "true"`; with `shared: "false"` its own cluster's are not even
/// offered to the others, so a selector matching no local pod is what it is for).
fn is_global_service(o: &Value) -> bool {
    o["kind"] == "Service" && o["metadata"]["annotations"][super::cilium::GLOBAL_ANNOTATION] == "true"
}

/// Which API groups a chart installs, where: in the cluster that runs it, or in the Karmada API
/// it creates (the Karmada chart in `installMode: host` serves Karmada's groups from its own
/// API server, not from the host cluster). Read from the charts' CRDs in `../shared/specs`.
pub const CHARTS: &[(&str, &[&str], &[&str])] = &[
    ("cilium", &["cilium.io"], &[]),
    ("kueue", &["kueue.x-k8s.io"], &[]),
    ("kai-scheduler", &["scheduling.run.ai", "kai.scheduler"], &[]),
    ("argo-cd", &["argoproj.io"], &[]),
    (
        "karmada",
        &[],
        &[
            "apps.karmada.io",
            "autoscaling.karmada.io",
            "cluster.karmada.io",
            "config.karmada.io",
            "networking.karmada.io",
            "policy.karmada.io",
            "remedy.karmada.io",
            "search.karmada.io",
            "work.karmada.io",
        ],
    ),
];

/// Secrets a chart's own templates make in its target namespace (what fabric's objects mount).
const CHART_SECRETS: &[(&str, &str)] = &[("karmada", "karmada-cert")];

/// API groups every Kubernetes API server serves (the GA built-in groups), the Karmada API
/// included (it is a kube-apiserver).
pub const CORE_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "rbac.authorization.k8s.io",
    "networking.k8s.io",
    "policy",
    "coordination.k8s.io",
    "apiextensions.k8s.io",
    "admissionregistration.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "autoscaling",
    "discovery.k8s.io",
    "events.k8s.io",
    "node.k8s.io",
    "certificates.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "apiregistration.k8s.io",
];

/// Namespaces every API server has from the start.
const BUILTIN_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The API group of an `apiVersion` (`""` for `v1`).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// What exists without any step: in every cluster what an API server has from the start, K3s's
/// own `helm.cattle.io`, the labels K3s gives each node ([`k3s_node_labels`]) and those external
/// workloads join with ([`workload_labels`]). Labels a step applies to Nodes are that step's.
pub fn ambient(t: &Topology) -> BTreeSet<Fact> {
    let mut out = BTreeSet::new();
    for s in &t.sites {
        let at = Target::cluster(&s.name);
        builtin(&at, &mut |at, thing| {
            out.insert(Fact { at: at.clone(), thing });
        });
        out.insert(Fact { at: at.clone(), thing: Thing::Group("helm.cattle.io".into()) });
        for n in &s.cluster.nodes {
            for (key, value) in k3s_node_labels(s, n) {
                out.insert(Fact { at: at.clone(), thing: Thing::NodeLabel { key, value } });
            }
        }
        for (key, value) in s.external_workloads.iter().flat_map(workload_labels) {
            out.insert(Fact { at: at.clone(), thing: Thing::NodeLabel { key, value } });
        }
    }
    // The Secrets the topology says the operator creates (the gateway's cloud keys and
    // rate-limit URL): fabric never makes them; plan checks each has its key
    // (`live::observe`, `providers::kube::missing_secret_keys`).
    for (at, ns, r) in operator_secrets(t) {
        out.insert(Fact { at, thing: object("Secret", Some(ns), &r.secret) });
    }
    // Karmada's dedicated VM runs a K3s of its own (C.1): the same as any K3s from the start.
    let (host, _) = super::karmada_host(t);
    if !t.sites.iter().any(|s| Target::cluster(&s.name) == host) {
        builtin(&host, &mut |at, thing| {
            out.insert(Fact { at: at.clone(), thing });
        });
        out.insert(Fact { at: host.clone(), thing: Thing::Group("helm.cattle.io".into()) });
    }
    out
}

/// The Secrets (target, namespace, key reference) the topology names for the operator to
/// create: the gateway's cloud API keys and its rate-limit backend's URL.
pub fn operator_secrets(t: &Topology) -> Vec<(Target, &'static str, &crate::topology::model::SecretKeyRef)> {
    let Some(g) = &t.gateway else { return vec![] };
    let at = Target::cluster(&g.site);
    let clouds = g.models.iter().filter_map(|m| m.cloud.as_ref().map(|c| &c.api_key));
    clouds.chain(g.rate_limit.as_ref().map(|r| &r.url)).map(|r| (at.clone(), GATEWAY_NAMESPACE, r)).collect()
}

/// What every API server has from the start: the core groups, the builtin namespaces and
/// ClusterRoles. A cluster has them ambiently; the Karmada API once its chart runs (C.1).
fn builtin(at: &Target, add: &mut impl FnMut(&Target, Thing)) {
    CORE_GROUPS.iter().for_each(|g| add(at, Thing::Group((*g).into())));
    BUILTIN_NAMESPACES.iter().for_each(|ns| add(at, Thing::Namespace((*ns).into())));
    for role in ["cluster-admin", "admin", "edit", "view"] {
        add(at, object("ClusterRole", None, role));
    }
}

/// Whether `fact` holds without any step (an ambient fact).
pub fn is_given(fact: &Fact, ambient: &BTreeSet<Fact>) -> bool {
    ambient.contains(fact)
}

/// The site whose cluster Karmada calls `cluster` (its `cluster.name`).
fn member_target(t: &Topology, cluster: &str) -> Option<Target> {
    t.sites.iter().find(|s| s.cluster.name == cluster).map(|s| Target::cluster(&s.name))
}

fn s(v: &Value) -> Option<&str> {
    v.as_str().filter(|x| !x.is_empty())
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn object(kind: &str, namespace: Option<&str>, name: &str) -> Thing {
    Thing::Object { kind: kind.into(), namespace: namespace.map(String::from), name: name.into() }
}

/// What `r` provides (nothing for what is not a Kubernetes object).
pub fn provides(t: &Topology, r: &Resource) -> Vec<Fact> {
    let Some(o) = r.kube_object() else { return vec![] };
    let at = r.target().clone();
    let kind = o["kind"].as_str().unwrap_or_default();
    let ns = s(&o["metadata"]["namespace"]);
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    let mut out = vec![Fact { at: at.clone(), thing: object(kind, ns, name) }];
    let mut add = |at: &Target, thing: Thing| out.push(Fact { at: at.clone(), thing });
    match kind {
        "Namespace" => {
            add(&at, Thing::Namespace(name.into()));
            // Karmada creates every namespace of its API in every member (namespace
            // auto-provisioning, on by default since Karmada 0.4).
            if at == Target::Karmada {
                for m in super::members(t) {
                    add(&Target::cluster(&m.name), Thing::Namespace(name.into()));
                }
            }
        }
        "HelmChart" => chart_provides(&at, &o["spec"], &mut add),
        "Node" => {
            for (k, v) in o["metadata"]["labels"].as_object().into_iter().flatten() {
                add(&at, Thing::NodeLabel { key: k.clone(), value: v.as_str().unwrap_or_default().into() });
            }
        }
        "OverridePolicy" | "ClusterOverridePolicy" => {
            for (member, label) in override_labels(t, o, "/spec/template/metadata/labels/") {
                add(&member, Thing::PodLabel { key: label.0, value: label.1 });
            }
        }
        "PropagationPolicy" => propagated_pod_labels(t, o, &mut add),
        _ => {}
    }
    if let Some(tpl) = pod_template(o) {
        for (k, v) in tpl["metadata"]["labels"].as_object().into_iter().flatten() {
            add(&at, Thing::PodLabel { key: k.clone(), value: v.as_str().unwrap_or_default().into() });
        }
    }
    out
}

fn chart_provides(at: &Target, spec: &Value, add: &mut impl FnMut(&Target, Thing)) {
    // A chart of a repository is named; an OCI chart is its whole `oci://…/<name>` reference.
    let chart = spec["chart"].as_str().unwrap_or_default();
    let chart = chart.rsplit('/').next().unwrap_or(chart);
    let target_ns = s(&spec["targetNamespace"]);
    if let (true, Some(ns)) = (spec["createNamespace"].as_bool().unwrap_or(false), target_ns) {
        add(at, Thing::Namespace(ns.into()));
    }
    if chart == "karmada" {
        builtin(&Target::Karmada, add);
    }
    for (name, here, karmada) in CHARTS.iter().filter(|(n, _, _)| *n == chart) {
        here.iter().for_each(|g| add(at, Thing::Group((*g).into())));
        karmada.iter().for_each(|g| add(&Target::Karmada, Thing::Group((*g).into())));
        for (_, secret) in CHART_SECRETS.iter().filter(|(c, _)| c == name) {
            add(at, object("Secret", target_ns, secret));
        }
    }
}

/// The workloads a PropagationPolicy places are the topology's services, whose pods carry
/// `app: <service name>` (the convention the services' manifests follow, docs/topology.md):
/// in each cluster it places them in, those pods exist.
fn propagated_pod_labels(t: &Topology, o: &Value, add: &mut impl FnMut(&Target, Thing)) {
    let placement = &o["spec"]["placement"];
    let clusters = items(&placement["clusterAffinity"]["clusterNames"]);
    for sel in items(&o["spec"]["resourceSelectors"])
        .iter()
        .filter(|x| matches!(x["kind"].as_str(), Some("Deployment" | "StatefulSet")))
    {
        let Some(name) = s(&sel["name"]) else { continue };
        for c in clusters.iter().filter_map(|c| c.as_str()).filter_map(|c| member_target(t, c)) {
            add(&c, Thing::PodLabel { key: "app".into(), value: name.into() });
        }
    }
}

/// The pod template of a workload (Deployment, StatefulSet, DaemonSet, Job) or a CronJob.
pub fn pod_template(o: &Value) -> Option<&Value> {
    match o["kind"].as_str()? {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => Some(&o["spec"]["template"]),
        "CronJob" => Some(&o["spec"]["jobTemplate"]["spec"]["template"]),
        _ => None,
    }
}

/// `(member, (key, value))` for each label a plaintext `add`/`replace` of an OverridePolicy sets
/// under `prefix` in that member: one key (`<prefix><key>`, JSON pointer escaping) or the whole
/// map (the prefix's own path with an object value).
fn override_labels(t: &Topology, o: &Value, prefix: &str) -> Vec<(Target, (String, String))> {
    let mut out = Vec::new();
    for rule in items(&o["spec"]["overrideRules"]) {
        let members: Vec<Target> = items(&rule["targetCluster"]["clusterNames"])
            .iter()
            .filter_map(|c| c.as_str())
            .filter_map(|c| member_target(t, c))
            .collect();
        for p in items(&rule["overriders"]["plaintext"]) {
            if p["operator"] != "add" && p["operator"] != "replace" {
                continue;
            }
            let path = p["path"].as_str().unwrap_or_default();
            let pairs: Vec<(String, String)> = match (path.strip_prefix(prefix), &p["value"]) {
                // One label: `…/labels/<key>` with its value.
                (Some(key), Value::String(v)) if !key.is_empty() && !key.contains('/') => {
                    vec![(key.replace("~1", "/").replace("~0", "~"), v.clone())]
                }
                // The whole map at once: `…/labels` with an object.
                (None, Value::Object(m)) if path == prefix.trim_end_matches('/') => {
                    m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect()
                }
                _ => continue,
            };
            for m in &members {
                out.extend(pairs.iter().map(|kv| (m.clone(), kv.clone())));
            }
        }
    }
    out
}

/// What `r` requires (nothing for what is not a Kubernetes object).
pub fn requires(t: &Topology, r: &Resource) -> Vec<Need> {
    let Some(o) = r.kube_object() else { return vec![] };
    let at = r.target().clone();
    let ns = s(&o["metadata"]["namespace"]);
    let mut out = Vec::new();
    let mut need = |at: &Target, thing: Thing, field: &str| {
        out.push(Need { fact: Fact { at: at.clone(), thing }, field: field.into(), elsewhere: vec![] });
    };
    if let Some(ns) = ns {
        need(&at, Thing::Namespace(ns.into()), "metadata.namespace");
    }
    need(&at, Thing::Group(group_of(o["apiVersion"].as_str().unwrap_or_default()).into()), "apiVersion");
    if let Some(tpl) = pod_template(o) {
        pod_needs(&at, ns, &tpl["spec"], &mut need);
    }
    if let Some(q) = s(&o["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]) {
        need(&at, object("LocalQueue", ns, q), "metadata.labels[kueue.x-k8s.io/queue-name]");
    }
    if let Some(from) = s(&o["metadata"]["annotations"][super::objects::COPY_FROM]) {
        copy_source(from, &mut need);
    }
    kind_needs(t, &at, ns, o, &mut need);
    for text in o["data"].as_object().into_iter().flatten().filter_map(|(_, v)| v.as_str()) {
        for (svc_ns, svc) in service_urls(text) {
            need(&at, object("Service", Some(&svc_ns), &svc), "data (a URL of the Service)");
        }
    }
    if is_global_service(o) {
        let mesh: Vec<Target> = t.sites.iter().map(|s| Target::cluster(&s.name)).filter(|c| *c != at).collect();
        for n in out.iter_mut().filter(|n| matches!(n.fact.thing, Thing::PodLabel { .. })) {
            n.elsewhere.clone_from(&mesh);
        }
    }
    out
}

/// A Secret's copy source `<target>/<namespace>/<name>`.
fn copy_source(from: &str, need: &mut impl FnMut(&Target, Thing, &str)) {
    let Ok(addr) = from.parse::<super::Address>() else { return };
    let mut parts = addr.path.splitn(2, '/');
    if let (Some(ns), Some(name)) = (parts.next(), parts.next()) {
        need(&addr.target, object("Secret", Some(ns), name), "metadata.annotations[fabric.io/copy-from]");
    }
}

fn pod_needs(at: &Target, ns: Option<&str>, spec: &Value, need: &mut impl FnMut(&Target, Thing, &str)) {
    for (k, v) in spec["nodeSelector"].as_object().into_iter().flatten() {
        let thing = Thing::NodeLabel { key: k.clone(), value: v.as_str().unwrap_or_default().into() };
        need(at, thing, "spec.template.spec.nodeSelector");
    }
    if let Some(pc) = s(&spec["priorityClassName"]) {
        need(at, object("PriorityClass", None, pc), "spec.template.spec.priorityClassName");
    }
    if let Some(sa) = s(&spec["serviceAccountName"]) {
        need(at, object("ServiceAccount", ns, sa), "spec.template.spec.serviceAccountName");
    }
    for v in items(&spec["volumes"]) {
        if let Some(n) = s(&v["secret"]["secretName"]) {
            need(at, object("Secret", ns, n), "spec.template.spec.volumes[].secret");
        }
        if let Some(n) = s(&v["configMap"]["name"]) {
            need(at, object("ConfigMap", ns, n), "spec.template.spec.volumes[].configMap");
        }
    }
    for c in items(&spec["containers"]).iter().chain(items(&spec["initContainers"])) {
        for e in items(&c["envFrom"]) {
            if let Some(n) = s(&e["secretRef"]["name"]) {
                need(at, object("Secret", ns, n), "containers[].envFrom[].secretRef");
            }
            if let Some(n) = s(&e["configMapRef"]["name"]) {
                need(at, object("ConfigMap", ns, n), "containers[].envFrom[].configMapRef");
            }
        }
        for e in items(&c["env"]) {
            if let Some(n) = s(&e["valueFrom"]["secretKeyRef"]["name"]) {
                need(at, object("Secret", ns, n), "containers[].env[].valueFrom.secretKeyRef");
            }
            if let Some(n) = s(&e["valueFrom"]["configMapKeyRef"]["name"]) {
                need(at, object("ConfigMap", ns, n), "containers[].env[].valueFrom.configMapKeyRef");
            }
        }
    }
}

/// The Services (namespace, name) that in-cluster URLs in `text` address:
/// `scheme://<name>.<namespace>.svc[.cluster.local][:port]…`.
pub fn service_urls(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("://") {
        let host: String =
            text[i + 3..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.').collect();
        let parts: Vec<&str> = host.split('.').collect();
        if let [name, ns, "svc", ..] = parts.as_slice() {
            let found = ((*ns).to_string(), (*name).to_string());
            if !out.contains(&found) {
                out.push(found);
            }
        }
    }
    out
}

/// What each kind names in its spec.
fn kind_needs(t: &Topology, at: &Target, ns: Option<&str>, o: &Value, need: &mut impl FnMut(&Target, Thing, &str)) {
    let spec = &o["spec"];
    match o["kind"].as_str().unwrap_or_default() {
        "Service" => {
            for (k, v) in spec["selector"].as_object().into_iter().flatten() {
                let thing = Thing::PodLabel { key: k.clone(), value: v.as_str().unwrap_or_default().into() };
                need(at, thing, "spec.selector");
            }
        }
        "LocalQueue" => {
            if let Some(cq) = s(&spec["clusterQueue"]) {
                need(at, object("ClusterQueue", None, cq), "spec.clusterQueue");
            }
        }
        "ClusterQueue" => cluster_queue_needs(at, spec, need),
        "ResourceFlavor" => {
            for (k, v) in spec["nodeLabels"].as_object().into_iter().flatten() {
                let thing = Thing::NodeLabel { key: k.clone(), value: v.as_str().unwrap_or_default().into() };
                need(at, thing, "spec.nodeLabels");
            }
        }
        "AdmissionCheck" => {
            let p = &spec["parameters"];
            if let (Some(kind), Some(name)) = (s(&p["kind"]), s(&p["name"])) {
                need(at, object(kind, None, name), "spec.parameters");
            }
        }
        "MultiKueueConfig" => {
            for c in items(&spec["clusters"]).iter().filter_map(|c| c.as_str()) {
                need(at, object("MultiKueueCluster", None, c), "spec.clusters");
            }
        }
        "MultiKueueCluster" => {
            let kc = &spec["clusterSource"]["kubeConfig"];
            if let (Some("Secret"), Some(name)) = (kc["locationType"].as_str(), s(&kc["location"])) {
                // Kueue reads worker kubeconfigs from its own namespace.
                need(at, object("Secret", Some("kueue-system"), name), "spec.clusterSource.kubeConfig.location");
            }
        }
        "HelmChartConfig" => {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            need(at, object("HelmChart", ns, name), "metadata.name (the HelmChart it layers over)");
        }
        "ClusterRoleBinding" | "RoleBinding" => binding_needs(at, o, need),
        "Cluster" => {
            let r = &spec["secretRef"];
            if let (Some(sns), Some(name)) = (s(&r["namespace"]), s(&r["name"])) {
                need(at, object("Secret", Some(sns), name), "spec.secretRef");
            }
        }
        "PropagationPolicy" | "ClusterPropagationPolicy" => {
            for c in items(&spec["placement"]["clusterAffinity"]["clusterNames"]).iter().filter_map(|c| c.as_str()) {
                need(at, object("Cluster", None, c), "spec.placement.clusterAffinity.clusterNames");
            }
        }
        "OverridePolicy" | "ClusterOverridePolicy" => override_needs(t, at, o, need),
        _ => {}
    }
}

fn cluster_queue_needs(at: &Target, spec: &Value, need: &mut impl FnMut(&Target, Thing, &str)) {
    for g in items(&spec["resourceGroups"]) {
        for f in items(&g["flavors"]).iter().filter_map(|f| s(&f["name"])) {
            need(at, object("ResourceFlavor", None, f), "spec.resourceGroups[].flavors[].name");
        }
    }
    let checks = items(&spec["admissionChecksStrategy"]["admissionChecks"]).iter().filter_map(|c| s(&c["name"]));
    for c in checks.chain(items(&spec["admissionChecks"]).iter().filter_map(|c| c.as_str())) {
        need(at, object("AdmissionCheck", None, c), "spec.admissionChecksStrategy");
    }
}

fn binding_needs(at: &Target, o: &Value, need: &mut impl FnMut(&Target, Thing, &str)) {
    let role = &o["roleRef"];
    if let (Some(kind), Some(name)) = (s(&role["kind"]), s(&role["name"])) {
        let ns = if kind == "Role" { s(&o["metadata"]["namespace"]) } else { None };
        need(at, object(kind, ns, name), "roleRef");
    }
    for sub in items(&o["subjects"]).iter().filter(|x| x["kind"] == "ServiceAccount") {
        if let (Some(ns), Some(name)) = (s(&sub["namespace"]), s(&sub["name"])) {
            need(at, object("ServiceAccount", Some(ns), name), "subjects");
        }
    }
}

/// An OverridePolicy names its members (Karmada Clusters) and, through the node selectors its
/// overriders add, node labels in those members.
fn override_needs(t: &Topology, at: &Target, o: &Value, need: &mut impl FnMut(&Target, Thing, &str)) {
    for rule in items(&o["spec"]["overrideRules"]) {
        for c in items(&rule["targetCluster"]["clusterNames"]).iter().filter_map(|c| c.as_str()) {
            need(at, object("Cluster", None, c), "spec.overrideRules[].targetCluster.clusterNames");
        }
    }
    for (member, (key, value)) in override_labels(t, o, "/spec/template/spec/nodeSelector/") {
        need(&member, Thing::NodeLabel { key, value }, "spec.overrideRules[].overriders.plaintext");
    }
    // KAI Scheduler places a pod only in an existing queue of its member (its queue label).
    for (member, (key, queue)) in override_labels(t, o, "/spec/template/metadata/labels/") {
        if key == KAI_QUEUE_LABEL {
            need(
                &member,
                object("Queue", None, &queue),
                "spec.overrideRules[].overriders.plaintext (kai.scheduler/queue)",
            );
        }
    }
}

/// Who provides each fact: the instances whose resources provide it.
pub fn providers(t: &Topology, desired: &BTreeMap<NodeIndex, Produced>) -> BTreeMap<Fact, BTreeSet<NodeIndex>> {
    let mut out: BTreeMap<Fact, BTreeSet<NodeIndex>> = BTreeMap::new();
    for (n, p) in desired {
        for f in p.resources.iter().flat_map(|r| provides(t, r)) {
            out.entry(f).or_default().insert(*n);
        }
    }
    out
}

/// What each instance (in `order`) needs that only other instances make: the input of the
/// graph's derived edges. A need the instance meets itself, or that holds without any step,
/// wants nothing; a need nobody meets wants nothing either (the consistency pass reports it).
pub fn wants(t: &Topology, order: &[NodeIndex], desired: &BTreeMap<NodeIndex, Produced>) -> Vec<Want> {
    let given = ambient(t);
    let by = providers(t, desired);
    let mut out = Vec::new();
    for n in order {
        let Some(p) = desired.get(n) else { continue };
        let mut seen = BTreeSet::new();
        for need in p.resources.iter().flat_map(|r| requires(t, r)) {
            if need.facts().any(|f| is_given(&f, &given)) || !seen.insert(need.fact.clone()) {
                continue;
            }
            let makers: BTreeSet<NodeIndex> = need.facts().filter_map(|f| by.get(&f)).flatten().copied().collect();
            if makers.is_empty() || makers.contains(n) {
                continue;
            }
            let why = format!("{} at {}", need.fact.thing, need.fact.at);
            out.push(Want { to: *n, providers: makers.into_iter().collect(), why });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn t() -> Topology {
        crate::topology::load_str("t", include_str!("../../topology.example.yaml").into()).unwrap().topology
    }

    fn res(t: &Topology, site: Option<&str>, obj: Value) -> Resource {
        crate::desired::kube_resource(t, site, obj, None)
    }

    #[test]
    fn a_cluster_queue_needs_its_flavor_and_admission_check_and_a_local_queue_its_cluster_queue() {
        let t = t();
        let cq = res(
            &t,
            Some("sp"),
            json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": { "name": "q" },
            "spec": { "resourceGroups": [{ "flavors": [{ "name": "f" }] }], "admissionChecksStrategy": { "admissionChecks": [{ "name": "mk" }] } } }),
        );
        let things: Vec<String> = requires(&t, &cq).iter().map(|n| n.fact.thing.to_string()).collect();
        assert_eq!(things, ["API group kueue.x-k8s.io", "ResourceFlavor f", "AdmissionCheck mk"]);
        let lq = res(
            &t,
            Some("sp"),
            json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": { "name": "l", "namespace": "ml" }, "spec": { "clusterQueue": "q" } }),
        );
        let things: Vec<String> = requires(&t, &lq).iter().map(|n| n.fact.thing.to_string()).collect();
        assert_eq!(things, ["namespace ml", "API group kueue.x-k8s.io", "ClusterQueue q"]);
    }

    #[test]
    fn in_cluster_urls_name_services() {
        let text = "url = \"http://vllm-sp.ai.svc.cluster.local:8000/v1/\"\nx = \"https://example.org/a.svc\"\ny = \"http://q.data.svc:6333\"";
        assert_eq!(service_urls(text), [("ai".to_string(), "vllm-sp".to_string()), ("data".into(), "q".into())]);
    }

    #[test]
    fn charts_serve_their_groups_where_they_run_and_karmadas_in_the_karmada_api() {
        let t = t();
        let chart = |name: &str| {
            res(
                &t,
                Some("franca"),
                json!({ "apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
                "metadata": { "name": name, "namespace": "kube-system" },
                "spec": { "chart": name, "targetNamespace": format!("{name}-system"), "createNamespace": true } }),
            )
        };
        let kueue = provides(&t, &chart("kueue"));
        assert!(kueue.contains(&Fact { at: Target::cluster("franca"), thing: Thing::Group("kueue.x-k8s.io".into()) }));
        assert!(
            kueue.contains(&Fact { at: Target::cluster("franca"), thing: Thing::Namespace("kueue-system".into()) })
        );
        let karmada = provides(&t, &chart("karmada"));
        assert!(karmada.contains(&Fact { at: Target::Karmada, thing: Thing::Group("policy.karmada.io".into()) }));
        assert!(karmada.contains(&Fact { at: Target::Karmada, thing: Thing::Group("apps".into()) }));
        assert!(!karmada.iter().any(|f| f.thing == Thing::Group("helm.cattle.io".into())));
    }

    #[test]
    fn an_override_policy_sets_pod_labels_and_needs_node_labels_in_its_member() {
        let t = t();
        let sp = t.sites.iter().find(|s| s.name == "sp").unwrap().cluster.name.clone();
        let op = res(
            &t,
            None,
            json!({ "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": { "name": "o", "namespace": "ai" },
            "spec": { "overrideRules": [{ "targetCluster": { "clusterNames": [sp] }, "overriders": { "plaintext": [
                { "path": "/spec/template/metadata/labels/fabric.io~1site", "operator": "add", "value": "sp" },
                { "path": "/spec/template/spec/nodeSelector/gpu.model", "operator": "add", "value": "a5000" },
                { "path": "/spec/template/spec/nodeSelector", "operator": "add", "value": { "gpu.count": "1" } } ] } }] } }),
        );
        let label = Thing::PodLabel { key: "fabric.io/site".into(), value: "sp".into() };
        assert!(provides(&t, &op).contains(&Fact { at: Target::cluster("sp"), thing: label }));
        for (key, value) in [("gpu.model", "a5000"), ("gpu.count", "1")] {
            let node = Thing::NodeLabel { key: key.into(), value: value.into() };
            assert!(
                requires(&t, &op).iter().any(|n| n.fact == Fact { at: Target::cluster("sp"), thing: node.clone() })
            );
        }
    }
}
