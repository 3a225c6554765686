//! The workspace: everything resolved once from the arguments (the loaded topology, the catalog
//! with the steps' own dependencies, the step graph, and what every instance makes), so that no
//! operation recomputes desired state or re-parses a selection.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::NodeIndex;

use super::{OpError, digest};
use crate::catalog::{Catalog, Instance, StepGraph, refusal};
use crate::desired::consistency::{self, Level};
use crate::desired::{Produced, Resource};
use crate::plan::select::Selection;
use crate::plan::{Header, StepInput, model::Mode};
use crate::steps;
use crate::topology::problem::Diag;
use crate::topology::{Loaded, Topology};

pub struct Workspace {
    pub loaded: Loaded,
    pub catalog: Catalog,
    pub graph: StepGraph,
    /// What each instance makes, by graph node.
    pub desired: BTreeMap<NodeIndex, Produced>,
    /// SHA-256 of the topology file's text.
    pub digest: String,
    /// The embedded example: it holds production addresses, so nothing of it is ever read or
    /// changed live (every live operation checks this before it connects anywhere).
    pub offline_only: bool,
}

impl Workspace {
    /// Resolves the catalog (the table plus the steps' own dependencies), the graph of this
    /// topology and the desired state of every instance.
    pub fn new(loaded: Loaded) -> Result<Workspace, OpError> {
        let catalog = steps::with_code_needs(Catalog::embedded()?);
        let (graph, desired) = steps::resolve(&catalog, &loaded.topology)?;
        let digest = digest(&loaded.text);
        Ok(Workspace { loaded, catalog, graph, desired, digest, offline_only: false })
    }

    /// The consistency pass over every object (`render`, `plan`).
    pub fn consistency(&self) -> Vec<Diag> {
        let found = consistency::check(self.topology(), &self.graph, &self.desired, Level::Objects);
        found.into_iter().map(|p| self.loaded.diag(p)).collect()
    }

    /// Refuses live work on the embedded example (`help` says what to do instead).
    pub fn live_allowed(&self, help: &'static str) -> Result<(), OpError> {
        if self.offline_only { Err(OpError::ExampleIsOffline { help }) } else { Ok(()) }
    }

    pub fn topology(&self) -> &Topology {
        &self.loaded.topology
    }

    pub fn instance(&self, n: NodeIndex) -> &Instance {
        &self.graph.graph[n]
    }

    /// The resources instance `n` makes at the selected sites.
    pub fn resources(&self, n: NodeIndex, sel: &Selection) -> Vec<Resource> {
        self.desired.get(&n).map(|p| p.resources.iter().filter(|r| sel.keeps(r)).cloned().collect()).unwrap_or_default()
    }

    /// The selected instances; `pending` says whether an unselected dependency still has changes.
    pub fn select(&self, sel: &Selection, pending: impl Fn(NodeIndex) -> bool) -> Result<BTreeSet<NodeIndex>, OpError> {
        Ok(sel.resolve(&self.catalog, &self.graph, self.topology(), pending)?)
    }

    /// The selected instances in graph order.
    pub fn in_order<'a>(&'a self, selected: &'a BTreeSet<NodeIndex>) -> impl Iterator<Item = NodeIndex> + 'a {
        self.graph.order.iter().copied().filter(|n| selected.contains(n))
    }

    /// Keys of the steps instance `n` needs.
    pub fn needs(&self, n: NodeIndex) -> Vec<String> {
        self.graph.dependencies(n).iter().map(|d| self.graph.graph[*d].key()).collect()
    }

    /// What the plan builder takes: each selected step with its resources (and the orphans it
    /// deletes) at the selected sites, refused steps with their reason.
    pub fn plan_inputs(
        &self,
        selected: &BTreeSet<NodeIndex>,
        sel: &Selection,
        orphans: &BTreeMap<NodeIndex, Vec<Resource>>,
    ) -> Vec<StepInput<'_>> {
        let refused = refusal::refusals(&self.graph, self.topology());
        self.in_order(selected)
            .map(|n| {
                let refusal = refused.get(&n).map(|p| p.message.clone());
                let resources = match refusal {
                    Some(_) => Vec::new(),
                    None => self
                        .resources(n, sel)
                        .into_iter()
                        .chain(orphans.get(&n).into_iter().flatten().filter(|r| sel.keeps(r)).cloned())
                        .collect(),
                };
                let costs = crate::steps::costs::of(self.topology(), self.instance(n));
                StepInput { inst: self.instance(n), needs: self.needs(n), refused: refusal, resources, costs }
            })
            .collect()
    }

    /// The topology file's absolute path, as a plan records it for `apply PLANFILE`; None for
    /// the embedded example (it has no file).
    pub fn topology_path(&self) -> Option<String> {
        if self.offline_only {
            return None;
        }
        std::fs::canonicalize(&self.loaded.file).ok().map(|p| p.display().to_string())
    }

    /// The header of a plan of this workspace.
    pub fn header(&self, sel: &Selection, mode: Mode) -> Header {
        Header {
            fabric: self.topology().name.clone(),
            topology_file: self.loaded.file.clone(),
            topology_digest: self.digest.clone(),
            topology_path: self.topology_path(),
            selection: sel.clone(),
            mode,
        }
    }
}
