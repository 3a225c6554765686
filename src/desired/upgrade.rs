//! Upgrades: what a change in `versions:` may do to what runs, in which order, and what upstream
//! forbids. Pure: the running versions come in as [`Running`] (read live by plan, or from a
//! snapshot), and the answers are problems at the `versions.<name>` line or an ordered list of
//! nodes. The backup taken before anything that can lose state is `desired::backup`'s.
//!
//! The rules, each with the upstream text that decides it:
//!
//! - **K3s**: "upgrade server nodes first one at a time, then any agent nodes", and "the
//!   Kubernetes version skew policy applies. Ensure that your plan does not skip intermediate
//!   minor versions" (docs.k3s.io, "Manual Upgrades"). The policy (kubernetes/website
//!   `content/en/releases/version-skew-policy.md`): "kubelet must not be newer than
//!   kube-apiserver", "may be up to three minor versions older" ([`KUBELET_RULE`], checked for
//!   every Node of the cluster, the topology's or not), and HA API servers stay within one minor. Kubernetes has no supported
//!   control-plane downgrade, so an older `versions.k3s` than what runs is refused too (rollback
//!   of an upgrade restores the backup instead: `desired::backup`).
//! - **Cilium**: "The only tested rollback and upgrade path is between consecutive minor
//!   releases. Always perform rollbacks and upgrades between one minor release at a time"
//!   (cilium/cilium `Documentation/operations/upgrade-warning.rst`, included by the Upgrade
//!   Guide). One minor up or down is allowed; a skip is refused.
//! - **Kueue**: each minor's notes are written against the one before it ("Changes since
//!   v0.14.0", "Urgent Upgrade Notes ... you MUST read this before you upgrade":
//!   kubernetes-sigs/kueue `CHANGELOG/CHANGELOG-0.15.md`), and before 1.0 a minor is the
//!   breaking release: fabric goes one minor at a time and never down.
//! - **Karmada**: "The MINOR release might introduce minor breaking changes with a workaround",
//!   and the upgrading instruction is a chain of consecutive minors (karmada-io/karmada
//!   `docs/upgrading/README.md`, "Details Upgrading Instruction": v0.8 to v0.9, v0.9 to v0.10, …):
//!   one minor at a time, never down (its API server's etcd holds the federation's objects).
//!
//! CRDs, per chart (Helm installs a chart's `crds/` folder once and never upgrades it):
//! [`chart_crds`] says what upgrades each chart's CRDs when fabric changes its HelmChart's
//! version (the helm-controller runs `helm upgrade` with the chart's hooks), or that they must
//! be applied by hand first; plan shows it beside the change ([`chart_upgrade_lines`]).

use serde::Serialize;

use crate::path;
use crate::topology::Topology;
use crate::topology::model::NodeRole;
use crate::topology::problem::Problem;
use crate::topology::rules::parse_version;

/// A system whose version `versions:` pins and whose upgrade has rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum System {
    K3s,
    Cilium,
    Kueue,
    Karmada,
}

impl System {
    pub const ALL: [System; 4] = [System::K3s, System::Cilium, System::Kueue, System::Karmada];

    /// The key under `versions:`.
    pub fn key(self) -> &'static str {
        match self {
            System::K3s => "k3s",
            System::Cilium => "cilium",
            System::Kueue => "kueue",
            System::Karmada => "karmada",
        }
    }

    fn wanted(self, t: &Topology) -> &str {
        match self {
            System::K3s => &t.versions.k3s,
            System::Cilium => &t.versions.cilium,
            System::Kueue => &t.versions.kueue,
            System::Karmada => &t.versions.karmada,
        }
    }

    /// The upstream rule a refusal cites.
    pub fn rule(self) -> &'static str {
        match self {
            System::K3s => {
                "K3s upgrades one minor at a time, servers first (docs.k3s.io \"Manual Upgrades\"; Kubernetes version-skew policy)"
            }
            System::Cilium => {
                "Cilium upgrades and rolls back one minor at a time (Cilium Upgrade Guide: \"The only tested rollback and upgrade path is between consecutive minor releases\")"
            }
            System::Kueue => {
                "Kueue's upgrade notes are per minor, each against the one before (kubernetes-sigs/kueue CHANGELOG, \"Urgent Upgrade Notes\")"
            }
            System::Karmada => {
                "Karmada upgrades minor by minor (karmada-io/karmada docs/upgrading, \"Details Upgrading Instruction\")"
            }
        }
    }

    /// Whether one minor back is an upstream-supported path (only Cilium says so).
    fn minor_rollback(self) -> bool {
        self == System::Cilium
    }
}

/// What runs now, as plan reads it: each system's version where it runs (K3s per node, the
/// charts by their HelmChart's `spec.version`), per site.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Running {
    /// `(site, node, role, version)` of each node whose K3s was read.
    pub nodes: Vec<RunningNode>,
    /// `(system, site, version)` of each chart read.
    pub charts: Vec<(System, String, String)>,
    /// The kubelet of every other Node of the clusters whose K3s is planned (nodes the topology
    /// does not hold, or whose install was not read), from `status.nodeInfo.kubeletVersion`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kubelets: Vec<Kubelet>,
}

/// A Node's kubelet as its cluster reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Kubelet {
    pub site: String,
    pub node: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunningNode {
    pub site: String,
    pub node: String,
    pub server: bool,
    pub version: String,
}

/// Why a change from `running` to `wanted` is refused, or `None` when upstream allows it.
pub fn refusal(system: System, running: &str, wanted: &str) -> Option<String> {
    let (Some(r), Some(w)) = (parse_version(running), parse_version(wanted)) else { return None };
    let (rm, wm) = ((r.0, r.1), (w.0, w.1));
    if wm < rm {
        let one_back = r.0 == w.0 && r.1 == w.1 + 1;
        if system.minor_rollback() && one_back {
            return None;
        }
        return Some(match system {
            System::K3s => format!(
                "{wanted} is older than the K3s {running} that runs: Kubernetes has no supported control-plane downgrade (roll back with `fabric rollback`, which restores the backup taken before the upgrade)"
            ),
            _ => format!("{wanted} is more than one minor below the {running} that runs"),
        });
    }
    if w.0 != r.0 || w.1 > r.1 + 1 {
        let next = format!("{}.{}", r.0, r.1 + 1);
        return Some(format!("{running} runs, and {wanted} skips minor {next}: upgrade to a {next}.x release first"));
    }
    None
}

/// Every refusal of `t`'s versions against what runs, at the `versions.<name>` line.
pub fn problems(t: &Topology, running: &Running) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut refuse = |system: System, message: String, help: String| {
        out.push(
            Problem::error("topology::skew", path!["versions", system.key()], message)
                .label("upstream's upgrade rules forbid this from what runs")
                .help(help),
        );
    };
    // K3s: every node against the wanted version (a node already upgraded by hand counts).
    let wanted = System::K3s.wanted(t);
    let mut seen = std::collections::BTreeSet::new();
    let newer = |v: &str| parse_version(v) > parse_version(wanted);
    // An agent ahead of `wanted` is the skew below, said once.
    for n in running.nodes.iter().filter(|n| n.server || !newer(&n.version)) {
        if let Some(why) = refusal(System::K3s, &n.version, wanted)
            && seen.insert(why.clone())
        {
            refuse(System::K3s, format!("{}: {why}", n.node), System::K3s.rule().to_string());
        }
    }
    // An agent newer than its servers will be once the servers run `wanted`.
    for a in running.nodes.iter().filter(|n| !n.server) {
        if newer(&a.version) {
            refuse(
                System::K3s,
                format!(
                    "agent {} runs K3s {}, newer than the servers would run ({wanted}): \"kubelet must not be newer than kube-apiserver\"",
                    a.node, a.version
                ),
                "Kubernetes version-skew policy (kubelet); pin versions.k3s at least the newest agent's".into(),
            );
        }
    }
    // Every other kubelet against the API servers `wanted` would make, once a server changes.
    let server_change = running.nodes.iter().any(|n| n.server && n.version != wanted);
    for k in running.kubelets.iter().filter(|_| server_change) {
        if let Some(why) = kubelet_skew(&k.version, wanted) {
            refuse(
                System::K3s,
                format!("{}: node {} (kubelet {}): {why}", k.site, k.node, k.version),
                KUBELET_RULE.into(),
            );
        }
    }
    for (system, site, version) in &running.charts {
        if let Some(why) = refusal(*system, version, system.wanted(t)) {
            refuse(*system, format!("{site}: {why}"), system.rule().to_string());
        }
    }
    out
}

/// The kubelet's skew rule, word for word (kubernetes/website
/// `content/en/releases/version-skew-policy.md`, "Supported version skew", "kubelet").
pub const KUBELET_RULE: &str = "Kubernetes version-skew policy, kubelet: \"`kubelet` must not be newer than `kube-apiserver`.\" \
     and \"`kubelet` may be up to three minor versions older than `kube-apiserver` (`kubelet` < 1.25 may only be up to \
     two minor versions older than `kube-apiserver`).\" Upgrade or drain and remove that node first";

/// Why a kubelet at `kubelet` would be out of the skew policy with API servers at `apiserver`
/// (minor versions: the policy speaks of them), or `None`.
pub fn kubelet_skew(kubelet: &str, apiserver: &str) -> Option<String> {
    let (k, a) = (parse_version(kubelet)?, parse_version(apiserver)?);
    if (k.0, k.1) > (a.0, a.1) {
        return Some(format!("newer than the API servers would run ({apiserver})"));
    }
    // Within one major version; `< 1.25` may be two minors older only.
    let allowed = if (k.0, k.1) < (1, 25) { 2 } else { 3 };
    (k.0 != a.0 || a.1 - k.1 > allowed).then(|| {
        format!(
            "more than {} minor versions older than the API servers would run ({apiserver})",
            if allowed == 2 { "two" } else { "three" }
        )
    })
}

/// The nodes of a site's cluster in the order an upgrade takes them: servers, then agents, one
/// at a time, each in the topology's order (docs.k3s.io "Manual Upgrades").
pub fn node_order(site: &crate::topology::model::Site) -> Vec<(&str, bool)> {
    let server = |n: &&crate::topology::model::Node| n.role == NodeRole::ControlPlane;
    let nodes = &site.cluster.nodes;
    nodes
        .iter()
        .filter(server)
        .chain(nodes.iter().filter(|n| !server(n)))
        .map(|n| (n.name.as_str(), server(&n)))
        .collect()
}

/// `spec.version` of a HelmChart as the provider reads it (YAML, possibly with fabric's comment).
pub fn chart_version(text: &str) -> Option<String> {
    let v = serde_saphyr::from_str::<crate::topology::tree::Node>(text).ok()?.to_json();
    v["spec"]["version"].as_str().map(String::from)
}

/// `(running, wanted)` when applying `desired` over `prior` changes a running chart's version.
pub fn version_change(prior: &crate::providers::Observed, desired: &serde_json::Value) -> Option<(String, String)> {
    let crate::providers::Observed::Present(text) = prior else { return None };
    let running = chart_version(text)?;
    let wanted = desired["spec"]["version"].as_str()?.to_string();
    (running != wanted).then_some((running, wanted))
}

/// How a chart's CRDs reach their new version when fabric changes its HelmChart's version. Helm
/// installs a chart's `crds/` folder once and never upgrades it ("There is no support at this
/// time for upgrading or deleting CRDs using Helm": helm.sh, "Custom Resource Definitions",
/// "Some caveats and explanations", which argo-helm's README cites); the K3s helm-controller
/// runs `helm upgrade` with the chart's hooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Crds {
    /// The chart's own upgrade upgrades them (why, with the upstream file).
    ByChart(&'static str),
    /// Helm would leave them old: the HelmChart is not changed until they are applied by hand.
    ByHand(String),
}

/// The first argo-cd chart with its CRDs in `templates/crds` (argoproj/argo-helm
/// `charts/argo-cd/README.md`: "Starting with 5.2.0, the CRDs have been moved to
/// `<chart>/templates`"); before it they sat in `crds/`.
const ARGOCD_TEMPLATED_CRDS: (u64, u64, u64) = (5, 2, 0);

/// [`Crds`] of the HelmChart `chart` (its `metadata.name`) going to `wanted`, per chart, from
/// each upstream chart; `None` for a chart fabric does not make.
pub fn chart_crds(chart: &str, wanted: &str) -> Option<Crds> {
    Some(match chart {
        // kubernetes-sigs/kueue charts/kueue/templates/crd/*.yaml: templates, not `crds/`.
        "kueue" => {
            Crds::ByChart("Kueue's CRDs are chart templates (charts/kueue/templates/crd): helm upgrade upgrades them")
        }
        // karmada-io/karmada charts/karmada/templates/pre-upgrade-job.yaml and post-install-job.yaml.
        "karmada" => Crds::ByChart(
            "Karmada's CRDs live in its own API server: the chart's pre-upgrade Job (templates/pre-upgrade-job.yaml) applies the CRD patches and static resources there",
        ),
        // cilium/cilium pkg/k8s/apis/cilium.io/client: the operator registers its CRDs at start.
        "cilium" => Crds::ByChart(
            "Cilium's CRDs are registered by cilium-operator when it starts: the new operator upgrades them",
        ),
        // NVIDIA/KAI-Scheduler deployments/kai-scheduler/templates/crd-upgrader.yaml.
        "kai-scheduler" => Crds::ByChart(
            "KAI Scheduler's CRDs (chart crds/) are upgraded by the chart's crd-upgrader pre-upgrade Job (templates/crd-upgrader.yaml)",
        ),
        // argoproj/argo-helm charts/argo-cd/templates/crds/*.yaml: `{{- if .Values.crds.install }}`,
        // `crds.install: true` in values.yaml ("Install and upgrade CRDs"); fabric keeps the default.
        "argocd" if parse_version(wanted).is_some_and(|v| v < ARGOCD_TEMPLATED_CRDS) => Crds::ByHand(format!(
            "argo-cd chart {wanted} keeps its CRDs in crds/, which helm upgrade never upgrades: apply the new CRDs first \
             (`kubectl apply --server-side -k \"https://github.com/argoproj/argo-cd/manifests/crds?ref=<appVersion>\"`, \
             argo-helm charts/argo-cd README, \"Custom resource definitions\"), or pin a chart of 5.2.0 or later"
        )),
        "argocd" => Crds::ByChart(
            "ArgoCD's CRDs are chart templates (charts/argo-cd/templates/crds, `crds.install: true`): helm upgrade upgrades them",
        ),
        // NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin: no crds/ and no CRD
        // template; its NFD subchart (which has CRDs) only with nfd.enabled or gfd.enabled
        // (Chart.yaml `condition`), both off in its values.yaml and in fabric's.
        "nvidia-device-plugin" => {
            Crds::ByChart("the NVIDIA device plugin's chart has no CRDs (its NFD subchart is off)")
        }
        _ => return None,
    })
}

/// What plan says of a HelmChart whose version changes from `running` to `wanted`: the upgrade,
/// its CRDs, and the backup taken first (Karmada's etcd).
pub fn chart_upgrade_lines(chart: &str, running: &str, wanted: &str) -> Vec<String> {
    let mut out = vec![format!("upgrade: {chart} chart {running} → {wanted}")];
    match chart_crds(chart, wanted) {
        Some(Crds::ByChart(why)) => out.push(format!("CRDs: {why}")),
        Some(Crds::ByHand(why)) => out.push(format!("CRDs: refused until done by hand: {why}")),
        None => {}
    }
    if chart == "karmada" {
        out.push(crate::desired::backup::karmada_plan_line());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_minor_up_is_allowed_and_a_skip_is_refused() {
        assert_eq!(refusal(System::K3s, "v1.32.9+k3s1", "v1.33.5+k3s1"), None);
        assert_eq!(refusal(System::K3s, "v1.33.1+k3s1", "v1.33.5+k3s1"), None);
        let skip = refusal(System::K3s, "v1.31.4+k3s1", "v1.33.5+k3s1").unwrap();
        assert!(skip.contains("skips minor 1.32"), "{skip}");
        assert!(refusal(System::Cilium, "1.16.5", "1.18.4").unwrap().contains("skips minor 1.17"));
        assert!(refusal(System::Kueue, "0.13.4", "0.15.2").unwrap().contains("skips minor 0.14"));
        assert!(refusal(System::Karmada, "1.13.0", "1.15.0").unwrap().contains("skips minor 1.14"));
        assert_eq!(refusal(System::Karmada, "1.14.2", "1.15.0"), None);
    }

    #[test]
    fn down_is_refused_except_one_cilium_minor() {
        let down = refusal(System::K3s, "v1.33.5+k3s1", "v1.32.9+k3s1").unwrap();
        assert!(down.contains("no supported control-plane downgrade"), "{down}");
        assert_eq!(refusal(System::Cilium, "1.18.4", "1.17.9"), None);
        assert!(refusal(System::Cilium, "1.18.4", "1.16.9").is_some());
        assert!(refusal(System::Kueue, "0.15.2", "0.14.9").is_some());
        // Patch down within a minor: not a skew.
        assert_eq!(refusal(System::K3s, "v1.33.5+k3s1", "v1.33.4+k3s1"), None);
    }

    fn topology() -> Topology {
        crate::topology::load_str("t.yaml", include_str!("../../topology.example.yaml").to_string())
            .unwrap_or_else(|e| panic!("{e}"))
            .topology
    }

    fn node(node: &str, server: bool, version: &str) -> RunningNode {
        RunningNode { site: "franca".into(), node: node.into(), server, version: version.into() }
    }

    #[test]
    fn problems_name_the_versions_line_and_the_rule() {
        let t = topology();
        let ok = Running { nodes: vec![node("s1", true, "v1.32.9+k3s1")], ..Default::default() };
        assert!(problems(&t, &ok).is_empty());
        let skip = Running {
            nodes: vec![node("s1", true, "v1.31.4+k3s1")],
            charts: vec![(System::Cilium, "sp".into(), "1.16.5".into())],
            kubelets: vec![],
        };
        let p = problems(&t, &skip);
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].path.to_string(), "versions.k3s");
        assert!(p[0].help.as_deref().unwrap().contains("Manual Upgrades"));
        assert_eq!(p[1].path.to_string(), "versions.cilium");
        assert!(p[1].message.starts_with("sp: 1.16.5 runs"), "{}", p[1].message);
    }

    #[test]
    fn an_agent_newer_than_the_servers_will_be_is_refused() {
        let t = topology();
        let r = Running {
            nodes: vec![node("s1", true, "v1.33.1+k3s1"), node("w1", false, "v1.34.1+k3s1")],
            ..Default::default()
        };
        let p = problems(&t, &r);
        assert!(p.iter().any(|p| p.message.contains("agent w1 runs K3s v1.34.1+k3s1, newer")), "{p:?}");
    }

    #[test]
    fn every_chart_fabric_makes_says_how_its_crds_are_upgraded() {
        for chart in ["cilium", "kueue", "karmada", "kai-scheduler", "argocd", "nvidia-device-plugin"] {
            assert!(matches!(chart_crds(chart, "9.9.9"), Some(Crds::ByChart(_))), "{chart}");
        }
        assert_eq!(chart_crds("other", "1.0.0"), None);
        // argo-cd before 5.2.0 kept its CRDs in crds/: by hand, with the command.
        let Some(Crds::ByHand(why)) = chart_crds("argocd", "5.1.9") else { panic!("argo-cd 5.1.9") };
        assert!(why.contains("manifests/crds?ref=") && why.contains("5.2.0"), "{why}");
        assert!(matches!(chart_crds("argocd", "5.2.0"), Some(Crds::ByChart(_))));
    }

    #[test]
    fn a_chart_upgrade_is_shown_with_its_crds_and_karmadas_backup() {
        let l = chart_upgrade_lines("karmada", "1.15.0", "1.16.0");
        assert_eq!(l[0], "upgrade: karmada chart 1.15.0 → 1.16.0");
        assert!(l[1].starts_with("CRDs: Karmada's CRDs live in its own API server"), "{l:?}");
        assert!(l[2].starts_with("backup: Karmada etcd snapshot → "), "{l:?}");
        let l = chart_upgrade_lines("kueue", "0.14.2", "0.15.2");
        assert_eq!(l.len(), 2, "no backup for Kueue: {l:?}");
        assert!(chart_upgrade_lines("argocd", "5.1.0", "5.1.9")[1].starts_with("CRDs: refused until done by hand"));
    }

    #[test]
    fn a_kubelet_newer_or_more_than_three_minors_older_is_out_of_the_policy() {
        assert_eq!(kubelet_skew("v1.33.5+k3s1", "v1.33.5+k3s1"), None);
        assert_eq!(kubelet_skew("v1.33.9+k3s1", "v1.33.5+k3s1"), None, "a patch ahead is the same minor");
        assert_eq!(kubelet_skew("v1.30.1", "v1.33.5+k3s1"), None, "three minors older");
        assert!(kubelet_skew("v1.34.0", "v1.33.5+k3s1").unwrap().starts_with("newer"));
        assert!(kubelet_skew("v1.29.9", "v1.33.5+k3s1").unwrap().contains("more than three"));
        // Before 1.25, two minors only.
        assert_eq!(kubelet_skew("v1.24.3", "v1.26.0"), None);
        assert!(kubelet_skew("v1.24.3", "v1.27.0").unwrap().contains("more than two"));
        assert!(kubelet_skew("not a version", "v1.33.5").is_none());
    }

    #[test]
    fn a_server_change_is_refused_for_any_node_whose_kubelet_it_would_leave_out_of_skew() {
        let t = topology();
        let kubelet =
            |node: &str, version: &str| Kubelet { site: "franca".into(), node: node.into(), version: version.into() };
        let mut r = Running {
            nodes: vec![node("s1", true, "v1.32.9+k3s1")],
            charts: vec![],
            kubelets: vec![kubelet("old-box", "v1.29.4+k3s1"), kubelet("new-box", "v1.34.1"), kubelet("ok", "v1.31.2")],
        };
        let p = problems(&t, &r);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p[0].message.contains("node old-box (kubelet v1.29.4+k3s1): more than three minor versions older"),
            "{p:?}"
        );
        assert!(p[1].message.contains("node new-box (kubelet v1.34.1): newer"), "{p:?}");
        assert!(p[0].help.as_deref().unwrap().contains("may be up to three minor versions older"));
        assert_eq!(p[0].path.to_string(), "versions.k3s");
        // No server changes: the kubelets are not this plan's doing.
        r.nodes[0].version = t.versions.k3s.clone();
        assert!(problems(&t, &r).is_empty());
    }

    #[test]
    fn servers_come_first() {
        let t = topology();
        for s in &t.sites {
            let order = node_order(s);
            let first_agent = order.iter().position(|(_, server)| !server).unwrap_or(order.len());
            assert!(order[first_agent..].iter().all(|(_, server)| !server), "{order:?}");
            assert_eq!(order.len(), s.cluster.nodes.len());
        }
    }
}
