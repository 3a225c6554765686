//! What plan and apply share: loading, selecting, reading live state.

use std::collections::BTreeSet;

use miette::Report;
use petgraph::graph::NodeIndex;
use sha2::{Digest, Sha256};

use crate::catalog::{Catalog, StepGraph};
use crate::command::cli::Global;
use crate::command::{load, usage};
use crate::desired;
use crate::live::observe::{self, Live, Targets};
use crate::plan::diff;
use crate::plan::model::Action;
use crate::plan::select::Selection;
use crate::topology::Loaded;
use crate::transport::ssh_config::SshConfig;

pub struct Prepared {
    pub loaded: Loaded,
    pub catalog: Catalog,
    pub graph: StepGraph,
    pub selected: BTreeSet<NodeIndex>,
    pub selection: Selection,
    pub targets: Targets,
    pub live: Live,
    /// Objects fabric made that the topology no longer has, by the step that deletes them.
    pub orphans: std::collections::BTreeMap<NodeIndex, Vec<crate::desired::Resource>>,
}

pub fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// The ssh config fabric reads: --ssh-config / $FABRIC_SSH_CONFIG, else ~/.ssh/config.
pub fn ssh_config(g: &Global) -> Result<SshConfig, Report> {
    let path = match &g.ssh_config {
        Some(p) => p.clone(),
        None => match std::env::var_os("HOME") {
            Some(h) => std::path::Path::new(&h).join(".ssh/config"),
            None => return Ok(SshConfig::default()),
        },
    };
    if !path.exists() {
        if g.ssh_config.is_some() {
            return Err(usage(
                "fabric::ssh-config",
                format!("cannot read {}", path.display()),
                "check the path given with --ssh-config",
            ));
        }
        return Ok(SshConfig::default());
    }
    SshConfig::load(&path).map_err(|e| {
        usage("fabric::ssh-config", format!("cannot read {}: {e}", path.display()), "check the file's permissions")
    })
}

pub fn runtime() -> Result<tokio::runtime::Runtime, Report> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().map_err(|e| {
        usage("fabric::runtime", format!("cannot start the async runtime: {e}"), "check the process limits")
    })
}

/// Loads, selects and reads the live state of the selected steps (and of the dependencies the
/// selection leaves out, to know whether they still have pending changes).
pub fn prepare(g: &Global, selection: Selection, rt: &tokio::runtime::Runtime) -> Result<Prepared, Report> {
    if g.example {
        return Err(usage(
            "plan::needs-offline",
            "the example topology is never read live",
            "it holds production addresses: plan it with --offline, or write a topology of your own",
        ));
    }
    let loaded = load(g)?;
    let t = &loaded.topology;
    let (catalog, graph) = crate::command::graph::build(t)?;
    // What the flags select (without deciding about pending dependencies yet), and the steps
    // those need: their live state decides whether they still have pending changes.
    let chosen = selection
        .resolve(&catalog, &graph, t, |_| false)
        .map_err(|e| usage("plan::selection", e.to_string(), e.help()))?;
    let rs = crate::plan::selected_resources(t, &graph, &chosen, &selection.sites);
    let deps: BTreeSet<NodeIndex> =
        chosen.iter().flat_map(|n| graph.dependencies(*n)).filter(|d| !chosen.contains(d)).collect();
    let mut all = rs.clone();
    for d in &deps {
        let drs = desired::for_instance(&graph.graph[*d], t);
        all.extend(
            drs.into_iter()
                .filter(|r| selection.sites.is_empty() || r.site.as_ref().is_none_or(|s| selection.sites.contains(s))),
        );
    }
    let targets = Targets::from_topology(t, &ssh_config(g)?);
    let orphans = rt.block_on(crate::live::prune::orphans(t, &graph, &chosen, &selection.sites, &targets));
    all.extend(orphans.values().flatten().cloned());
    let keys = observe::key_targets(&all);
    let started = std::time::Instant::now();
    let live = rt.block_on(observe::observe(&all, &keys, &targets));
    if g.verbose > 0 {
        let mut per_target: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
        for r in &all {
            *per_target.entry(r.target.as_str()).or_default() += 1;
        }
        for k in &keys {
            per_target.entry(k.as_str()).or_default();
        }
        eprintln!("fabric: read {} target(s) in {} ms", per_target.len(), started.elapsed().as_millis());
        for (t, n) in &per_target {
            match live.unreachable.get(*t) {
                Some(reason) => eprintln!("fabric:   {t}: unreachable: {reason}"),
                None => eprintln!(
                    "fabric:   {t}: {n} resource(s){}",
                    if live.keys.contains_key(*t) { ", public key" } else { "" }
                ),
            }
        }
        if g.verbose > 1 {
            for (address, state) in &live.observed {
                let what = match state {
                    crate::providers::Observed::Absent => "absent".to_string(),
                    crate::providers::Observed::Present(t) => format!("present, {} bytes", t.len()),
                };
                eprintln!("fabric:     {address}: {what}");
            }
        }
    }
    // A dependency has pending changes when one of its resources (at the selected sites) would
    // change. One that cannot be read is not counted: its target is reported unreachable, and a
    // step with resources there is refused at apply, so a site that is down does not stop the
    // other from being planned and applied.
    let sites = &selection.sites;
    let pending = |n: NodeIndex| {
        desired::for_instance(&graph.graph[n], t)
            .iter()
            .filter(|r| sites.is_empty() || r.site.as_ref().is_none_or(|s| sites.contains(s)))
            .any(|r| diff::change(r, &live).is_some_and(|c| c.action != Action::NoOp))
    };
    let selected = selection
        .resolve(&catalog, &graph, t, pending)
        .map_err(|e| usage("plan::selection", e.to_string(), e.help()))?;
    Ok(Prepared { loaded, catalog, graph, selected, selection, targets, live, orphans })
}

impl Prepared {
    /// The plan of the prepared selection against the live state read.
    pub fn plan(&self, sites: &[String]) -> crate::plan::model::Plan {
        let mut p = crate::plan::build(
            &self.loaded.topology,
            &self.loaded.file,
            &self.graph,
            &self.selected,
            sites,
            Some(&self.live),
            &self.orphans,
        );
        p.topology_digest = digest(&self.loaded.text);
        p
    }
}
