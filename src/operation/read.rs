//! Reading the live state a selection needs: the selected steps' resources, those of the
//! dependencies the selection leaves out (to know whether they still have pending changes), the
//! objects to prune, and the routers' public keys. One SSH connection per host, all at once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use petgraph::graph::NodeIndex;

use super::{OpError, Workspace};
use crate::desired::{Resource, Target};
use crate::live::observe::{self, Live, Targets};
use crate::live::{local_files, prune};
use crate::plan::model::{Action, Mode, Plan};
use crate::plan::select::Selection;
use crate::plan::{self, diff};

/// What was read for a selection.
/// The step that labels the GPU nodes and installs the device plugin (it needs their NVIDIA
/// runtime).
const GPU_STEP: &str = "D.1";

fn i_site<'a>(input: &'a crate::plan::StepInput<'_>) -> Option<&'a String> {
    input.inst.site.as_ref()
}

pub struct Observation {
    pub selection: Selection,
    pub selected: BTreeSet<NodeIndex>,
    pub live: Live,
    /// Objects fabric made that the topology no longer has, by the step that deletes them.
    pub orphans: BTreeMap<NodeIndex, Vec<Resource>>,
    /// How long the read took, and what it read per target (for `-v`).
    pub report: ReadReport,
    /// The hosts' connections, kept open for apply ([`Workspace::observe_for_apply`]); empty
    /// for a plan.
    pub kept: observe::Kept,
}

#[derive(Default)]
pub struct ReadReport {
    pub took: Duration,
    /// Target → number of resources read (0 for a router read only for its public key).
    pub per_target: BTreeMap<Target, usize>,
}

impl Workspace {
    /// Reads the live state of `sel` and resolves it: a selected step whose unselected
    /// dependency still has changes is refused unless `--with-deps`.
    pub async fn observe(&self, sel: Selection, targets: &Targets) -> Result<Observation, OpError> {
        self.observe_keeping(sel, targets, false).await
    }

    /// [`Workspace::observe`] for apply: each host's connection stays open for its locks and
    /// changes (one connection per host per run).
    pub async fn observe_for_apply(&self, sel: Selection, targets: &Targets) -> Result<Observation, OpError> {
        self.observe_keeping(sel, targets, true).await
    }

    async fn observe_keeping(
        &self,
        sel: Selection,
        targets: &Targets,
        keep_connections: bool,
    ) -> Result<Observation, OpError> {
        self.live_allowed("it holds production addresses: plan it with --offline, or write a topology of your own")?;
        // What the flags select (without deciding about pending dependencies yet), and the steps
        // those need: their live state decides whether they still have pending changes.
        let chosen = self.select(&sel, |_| false)?;
        let deps: BTreeSet<NodeIndex> =
            chosen.iter().flat_map(|n| self.graph.dependencies(*n)).filter(|d| !chosen.contains(d)).collect();
        let refused = crate::catalog::refusal::refusals(&self.graph, self.topology());
        let mut all: Vec<Resource> =
            self.in_order(&chosen).filter(|n| !refused.contains_key(n)).flat_map(|n| self.resources(n, &sel)).collect();
        // This machine's files first: a missing kubeconfig or key is not an unreachable site.
        // Only the selected steps' targets (and the peers whose keys they name) count, as in
        // the plan: a dependency's target that cannot be read is not counted.
        let wanted: BTreeSet<Target> =
            all.iter().map(|r| r.target().clone()).chain(observe::key_targets(&all)).collect();
        all.extend(deps.iter().flat_map(|d| self.resources(*d, &sel)));
        let servers = local_files::bootstrapping(&all);
        let missing = local_files::missing(targets, &wanted, &servers.keys().cloned().collect());
        if !missing.is_empty() {
            return Err(OpError::LocalFiles(missing));
        }
        let keep = |r: &Resource| sel.keeps(r);
        let orphans = prune::orphans(&self.topology().name, &self.graph, &self.desired, &chosen, keep, targets).await;
        all.extend(orphans.values().flatten().cloned());
        let keys = observe::key_targets(&all);
        let started = std::time::Instant::now();
        let (live, kept) = if keep_connections {
            observe::observe_keeping(&all, &keys, targets).await
        } else {
            (observe::observe(&all, &keys, targets).await, observe::Kept::new())
        };
        let missing = local_files::missing_after_read(targets, &wanted, &live, &servers);
        if !missing.is_empty() {
            return Err(OpError::LocalFiles(missing));
        }
        let mut report = ReadReport { took: started.elapsed(), ..Default::default() };
        for r in &all {
            *report.per_target.entry(r.target().clone()).or_default() += 1;
        }
        for k in &keys {
            report.per_target.entry(k.clone()).or_default();
        }
        // A dependency has pending changes when one of its resources (at the selected sites)
        // would change. One that cannot be read is not counted: its target is reported
        // unreachable, and a step with resources there is refused at apply, so a site that is
        // down does not stop the other from being planned and applied.
        let pending = |n: NodeIndex| {
            self.resources(n, &sel).iter().any(|r| diff::change(r, &live).is_some_and(|c| c.action != Action::NoOp))
        };
        let selected = self.select(&sel, pending)?;
        let mut live = live;
        live.gpu_runtime = observe::read_gpu_runtimes(&self.gpu_nodes_of(&selected), targets).await;
        live.karmada_cert = self.read_karmada_cert(&selected, targets, &live).await;
        live.mesh_ca = self.read_mesh_ca(&selected, targets, &live).await;
        // Every kubelet of a cluster whose K3s is planned: the skew check covers nodes the
        // topology does not hold (`live::versions`).
        let clusters = crate::live::versions::k3s_clusters(&all, &live);
        live.kubelets = crate::live::versions::read_kubelets(&clusters, targets).await;
        Ok(Observation { selection: sel, selected, live, orphans, report, kept })
    }

    /// The plan of an observation.
    pub fn plan_of(&self, o: &Observation) -> Plan {
        let header = self.header(&o.selection, Mode::Live { fingerprint: o.live.fingerprint() });
        let mut inputs = self.plan_inputs(&o.selected, &o.selection, &o.orphans);
        let mut warnings = key_warnings(self.topology(), &o.live);
        self.refuse_gpu_steps(&mut inputs, &o.live, &mut warnings);
        self.refuse_karmada_cert(&mut inputs, &o.live, &mut warnings);
        warnings.extend(super::mesh_ca::warning(&o.live));
        let mut plan = plan::build(header, inputs, Some(&o.live));
        plan.warnings = warnings;
        plan
    }

    /// D.1 of a site with a GPU node that lacks the NVIDIA driver or container toolkit (as `live`
    /// read them) is refused, naming the node: K3s reads them only when it starts
    /// (docs/design.md); a node that could not be read is a warning.
    pub(super) fn refuse_gpu_steps(
        &self,
        inputs: &mut [crate::plan::StepInput<'_>],
        live: &Live,
        warnings: &mut Vec<String>,
    ) {
        for input in inputs.iter_mut().filter(|i| i.inst.spec.id == GPU_STEP && i.refused.is_none()) {
            let Some(site) = self.topology().sites.iter().find(|s| Some(&s.name) == i_site(input)) else { continue };
            let mut missing = Vec::new();
            for (node, _) in crate::desired::gpu_runtime::gpu_nodes(site) {
                match live.gpu_runtime.get(&crate::addr::Target::host(node)) {
                    Some(observe::GpuRuntime::Missing(why)) => missing.push(format!("GPU node {node}: {why}")),
                    Some(observe::GpuRuntime::Unread(why)) => warnings.push(format!(
                        "{}: the NVIDIA driver and container toolkit of GPU node {node} were not checked: {why}",
                        input.inst.key()
                    )),
                    _ => {}
                }
            }
            if !missing.is_empty() {
                input.refused = Some(format!(
                    "{}; install them on the node and restart its K3s (K3s finds the NVIDIA runtime only when it starts), then plan again",
                    missing.join("; ")
                ));
                input.resources.clear();
            }
        }
    }

    /// The GPU nodes (`host.<name>`) of the sites whose D.1 is among `selected`.
    fn gpu_nodes_of(&self, selected: &BTreeSet<NodeIndex>) -> Vec<Target> {
        let t = self.topology();
        selected
            .iter()
            .map(|n| self.instance(*n))
            .filter(|i| i.spec.id == GPU_STEP)
            .filter_map(|i| t.sites.iter().find(|s| i.site.as_deref() == Some(s.name.as_str())))
            .flat_map(crate::desired::gpu_runtime::gpu_nodes)
            .map(|(node, _)| Target::host(node))
            .collect()
    }
}

/// A router whose live WireGuard public key is not the one the topology records: the rendered
/// VyOS files name the topology's, which the peers would then refuse. Apply always uses the live
/// key, so this is a warning (update the topology), not a refusal.
pub fn key_warnings(t: &crate::topology::Topology, live: &crate::live::observe::Live) -> Vec<String> {
    let mut out = bootstrap_notes(t, live);
    out.extend(router_key_warnings(t, live));
    out
}

/// A cluster that does not run yet: what apply does first.
fn bootstrap_notes(t: &crate::topology::Topology, live: &crate::live::observe::Live) -> Vec<String> {
    live.bootstrap
        .iter()
        .map(|(cluster, host)| {
            let path = t
                .sites
                .iter()
                .find(|s| crate::addr::Target::cluster(&s.name) == *cluster)
                .map(|s| s.cluster.kubeconfig.path.clone())
                .unwrap_or_default();
            format!(
                "{cluster} does not run yet: apply installs K3s on {host} first, then writes its kubeconfig \
                 to {path} (if that file does not exist) and waits for the API before the cluster's objects"
            )
        })
        .collect()
}

fn router_key_warnings(t: &crate::topology::Topology, live: &crate::live::observe::Live) -> Vec<String> {
    t.sites
        .iter()
        .filter_map(|s| {
            let recorded = s.router.wireguard.public_key.as_ref()?;
            let target = crate::addr::Target::router(&s.name);
            let actual = live.keys.get(&target)?;
            (actual != recorded).then(|| {
                format!(
                    "{target}: its WireGuard public key is {actual}, but the topology records {recorded} \
                     (sites[].router.wireguard.public_key of `{}`): put the live key there and run `fabric render`",
                    s.name
                )
            })
        })
        .collect()
}
