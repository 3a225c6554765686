//! The step graph of one topology: catalog steps instantiated per site, with their dependencies.
//!
//! Built by ordered passes, each of which only adds to what the previous one made:
//! 1. instances: every fabric step once, every site step at each site where its `when` holds;
//! 2. `needs` edges: to the same site's instance when both steps are per site, else to all;
//! 3. `needs_any` edges: to whichever alternatives exist at the same site (one must);
//! 4. order: a topological order that keeps catalog order among independent steps, so output is
//!    stable and reads like the seed's table.
//!
//! Then, once every instance's resources are known, [`StepGraph::add_derived`] adds the edges
//! that follow from what the resources refer to (`desired::refs`), and orders again.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};

use super::spec::{Catalog, Scope, StepSpec};
use crate::topology::Topology;
use crate::topology::model::{MultiKueue, WorkloadKind};

/// One step at one site (or for the whole fabric).
#[derive(Debug, Clone)]
pub struct Instance {
    pub spec: StepSpec,
    pub phase: String,
    pub site: Option<String>,
    /// The node of a step rolled out node by node (A.2 in place: one rollback point per node).
    pub node: Option<String>,
}

impl Instance {
    /// Display and selection key: `A.3@sp`, `A.2@franca/franca-gpu1` for one node's part, or
    /// `B.1` for fabric steps.
    pub fn key(&self) -> String {
        match (&self.site, &self.node) {
            (Some(s), Some(n)) => format!("{}@{}/{}", self.spec.id, s, n),
            (Some(s), None) => format!("{}@{}", self.spec.id, s),
            (None, _) => self.spec.id.clone(),
        }
    }
}

/// The nodes a site step is rolled out over, one instance each after the site's, in this order
/// (the catalog's `per_node`): with `cluster_migration: in-place`, A.2 moves every node of the
/// running cluster, the control plane first (its server config turns Flannel off for the nodes
/// after it); with `new-cluster`, the cutover (A.5) moves every node that is not a new server.
pub fn rollout_nodes(spec: &StepSpec, t: &Topology, site: &str) -> Vec<String> {
    use crate::topology::model::{MigrationChoice, NodeRole};
    let Some(s) = t.sites.iter().find(|s| s.name == site) else { return vec![] };
    let choice = t.decisions.cluster_migration.get(site);
    let (cp, rest): (Vec<_>, Vec<_>) = s.cluster.nodes.iter().partition(|n| n.role == NodeRole::ControlPlane);
    let nodes: Vec<_> = match (spec.per_node.as_deref(), choice) {
        _ if !s.cluster.existing => vec![],
        (Some("in-place"), Some(MigrationChoice::InPlace)) => cp.into_iter().chain(rest).collect(),
        (Some("new-cluster"), Some(MigrationChoice::NewCluster)) => rest,
        _ => vec![],
    };
    nodes.into_iter().map(|n| n.name.clone()).collect()
}

#[derive(Debug)]
pub struct StepGraph {
    pub graph: DiGraph<Instance, ()>,
    /// Every instance, dependencies first.
    pub order: Vec<NodeIndex>,
    /// The edges added from what resources refer to (neither in `phases/` nor in a step's
    /// code), with why: `(from, to) → what `to` needs that `from` makes`.
    pub derived: BTreeMap<(NodeIndex, NodeIndex), String>,
}

/// Something instance `to` needs that only other instances make (`providers`, any of which
/// will do), as `desired::refs` finds it.
#[derive(Debug, Clone)]
pub struct Want {
    pub to: NodeIndex,
    pub providers: Vec<NodeIndex>,
    /// What is needed, for `fabric graph` and errors (`LocalQueue research/batch at cluster.franca`).
    pub why: String,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GraphError {
    #[error("step {step} needs one of {alternatives} at site `{site}`, but none of them applies there")]
    NoAlternative { step: String, alternatives: String, site: String },
    #[error("the step graph has a cycle through {}", .steps.join(", "))]
    Cycle { steps: Vec<String> },
    #[error("{step} needs {why}, which only {providers} make(s), and they depend on {step}")]
    DerivedCycle { step: String, why: String, providers: String },
}

/// Whether condition `when` holds at `site` (or for the fabric when `site` is None).
fn holds(when: &str, t: &Topology, site: Option<&str>) -> bool {
    let s = site.and_then(|n| t.sites.iter().find(|s| s.name == n));
    match (when, s) {
        ("new-cluster", Some(s)) => !s.cluster.existing,
        ("existing-cluster", Some(s)) => s.cluster.existing,
        // A running cluster that a new one replaces (`cluster_migration: new-cluster`).
        ("replaced-cluster", Some(s)) => s.cluster.existing && s.cluster.previous.is_some(),
        ("has-vms", Some(s)) => s.external_workloads.iter().any(|w| w.kind == WorkloadKind::Vm),
        ("has-bare-metal", Some(s)) => s.external_workloads.iter().any(|w| w.kind == WorkloadKind::BareMetal),
        ("multikueue", Some(s)) => t.multikueue.as_ref().is_some_and(|m| mk_sites(m).contains(&s.name.as_str())),
        ("multikueue", None) => t.multikueue.is_some(),
        ("gateway", Some(s)) => t.gateway.as_ref().is_some_and(|g| g.site == s.name),
        ("gateway", None) => t.gateway.is_some(),
        // KAI Scheduler is pinned and the site has GPU nodes.
        ("gpu-sharing", Some(s)) => crate::topology::gpus::kai_installed(t, s),
        // More than one site: a tunnel and a Cluster Mesh need a peer (a one-site fabric has
        // neither, and no public address anyone dials).
        ("multi-site", _) => t.sites.len() > 1,
        // Site conditions on a fabric step: true when some site satisfies them.
        (w, None) => t.sites.iter().any(|s| holds(w, t, Some(&s.name))),
        _ => false,
    }
}

/// `needs` with each step that has no instance in `graph` replaced by its own needs, in turn.
fn applying_needs(catalog: &Catalog, graph: &DiGraph<Instance, ()>, needs: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo: Vec<String> = needs.to_vec();
    let mut seen = BTreeSet::new();
    while let Some(id) = todo.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        if graph.node_weights().any(|i| i.spec.id == id) {
            out.push(id);
        } else if let Some(spec) = catalog.phases.iter().flat_map(|p| &p.steps).find(|s| s.id == id) {
            todo.extend(spec.needs.iter().cloned());
        }
    }
    out
}

fn mk_sites(m: &MultiKueue) -> Vec<&str> {
    std::iter::once(m.manager.as_str()).chain(m.workers.iter().map(String::as_str)).collect()
}

impl StepGraph {
    pub fn build(catalog: &Catalog, t: &Topology) -> Result<StepGraph, GraphError> {
        let mut graph = DiGraph::new();
        // Pass 1: instances.
        for phase in &catalog.phases {
            for spec in &phase.steps {
                let applies = |site: Option<&str>| spec.when.as_deref().is_none_or(|w| holds(w, t, site));
                let mut add = |site: Option<&str>| {
                    let instance = |node: Option<String>| Instance {
                        spec: spec.clone(),
                        phase: phase.phase.clone(),
                        site: site.map(String::from),
                        node,
                    };
                    // The site's own instance, then its nodes', each after the one before.
                    let mut last = graph.add_node(instance(None));
                    for node in site.map(|s| rollout_nodes(spec, t, s)).unwrap_or_default() {
                        let next = graph.add_node(instance(Some(node)));
                        graph.update_edge(last, next, ());
                        last = next;
                    }
                };
                match spec.scope {
                    Scope::Fabric if applies(None) => {
                        add(None);
                    }
                    Scope::Site => {
                        for s in &t.sites {
                            if applies(Some(&s.name)) {
                                add(Some(&s.name));
                            }
                        }
                    }
                    Scope::Fabric => {}
                }
            }
        }
        let nodes: Vec<NodeIndex> = graph.node_indices().collect();
        // A step rolled out node by node is done when its last node is: a step after it needs
        // that one (which needs the others), not each.
        let find = |g: &DiGraph<Instance, ()>, id: &str| -> Vec<NodeIndex> {
            let all: Vec<NodeIndex> = nodes.iter().copied().filter(|n| g[*n].spec.id == id).collect();
            let later_at_site = |n: &NodeIndex| all.iter().any(|m| m > n && g[*m].site == g[*n].site);
            all.iter().copied().filter(|n| !later_at_site(n)).collect()
        };
        // Pass 2: `needs`. A need on a step that applies nowhere in this topology is a need on
        // what that step needs: C.1 needs B.2, and a one-site fabric has no Cluster Mesh, so
        // C.1 needs the host cluster B.2 would have brought (A.1/A.2).
        for &n in &nodes {
            let site = graph[n].site.clone();
            let needs = applying_needs(catalog, &graph, &graph[n].spec.needs);
            for dep in needs {
                for d in find(&graph, &dep) {
                    let same_site_only = site.is_some() && graph[d].site.is_some();
                    if !same_site_only || graph[d].site == site {
                        graph.update_edge(d, n, ());
                    }
                }
            }
        }
        // Pass 3: `needs_any`, always at the same site.
        for &n in &nodes {
            let alternatives = graph[n].spec.needs_any.clone();
            if alternatives.is_empty() {
                continue;
            }
            let site = graph[n].site.clone();
            let found: Vec<NodeIndex> = alternatives
                .iter()
                .flat_map(|a| find(&graph, a))
                .filter(|d| site.is_none() || graph[*d].site == site)
                .collect();
            if found.is_empty() {
                return Err(GraphError::NoAlternative {
                    step: graph[n].key(),
                    alternatives: alternatives.join(" or "),
                    site: site.unwrap_or_default(),
                });
            }
            for d in found {
                graph.update_edge(d, n, ());
            }
        }
        // Pass 4: stable topological order.
        let order = order(&graph)?;
        Ok(StepGraph { graph, order, derived: BTreeMap::new() })
    }

    /// Adds the edges `wants` call for, in order: a want already met by a dependency (direct or
    /// not) adds nothing; otherwise an edge comes from its first provider in graph order that
    /// does not itself depend on the wanting instance. When every provider does, the resources
    /// contradict each other (a bug in a step): that is an error, never a silent cycle.
    pub fn add_derived(&mut self, wants: &[Want]) -> Result<(), GraphError> {
        for w in wants {
            let ancestors = self.with_ancestors(&BTreeSet::from([w.to]));
            if w.providers.iter().any(|p| ancestors.contains(p)) {
                continue;
            }
            let position = |n: &NodeIndex| self.order.iter().position(|o| o == n);
            let mut usable: Vec<NodeIndex> = w
                .providers
                .iter()
                .copied()
                .filter(|p| !self.with_ancestors(&BTreeSet::from([*p])).contains(&w.to))
                .collect();
            usable.sort_by_key(position);
            let Some(&from) = usable.first() else {
                let providers: Vec<String> = w.providers.iter().map(|p| self.graph[*p].key()).collect();
                return Err(GraphError::DerivedCycle {
                    step: self.graph[w.to].key(),
                    why: w.why.clone(),
                    providers: providers.join(", "),
                });
            };
            self.graph.update_edge(from, w.to, ());
            self.derived.insert((from, w.to), w.why.clone());
            self.order = order(&self.graph)?;
        }
        Ok(())
    }

    /// Why the edge `from → to` exists when it was derived from the resources.
    pub fn derived_why(&self, from: NodeIndex, to: NodeIndex) -> Option<&str> {
        self.derived.get(&(from, to)).map(String::as_str)
    }

    pub fn instances(&self) -> impl Iterator<Item = &Instance> {
        self.order.iter().map(|n| &self.graph[*n])
    }

    /// Keys of the direct dependencies of `n`, in order.
    pub fn dependencies(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut deps: Vec<NodeIndex> = self.graph.neighbors_directed(n, Direction::Incoming).collect();
        deps.sort_by_key(|d| self.order.iter().position(|o| o == d));
        deps
    }

    /// `n` and everything it transitively needs.
    pub fn with_ancestors(&self, selected: &BTreeSet<NodeIndex>) -> BTreeSet<NodeIndex> {
        let mut out = selected.clone();
        let mut stack: Vec<NodeIndex> = selected.iter().copied().collect();
        while let Some(n) = stack.pop() {
            for d in self.graph.neighbors_directed(n, Direction::Incoming) {
                if out.insert(d) {
                    stack.push(d);
                }
            }
        }
        out
    }

    pub fn find(&self, key: &str) -> Option<NodeIndex> {
        self.order.iter().copied().find(|n| self.graph[*n].key() == key)
    }
}

/// A stable topological order (Kahn, smallest insertion index first): catalog order among
/// independent steps.
fn order(graph: &DiGraph<Instance, ()>) -> Result<Vec<NodeIndex>, GraphError> {
    let mut indegree: Vec<usize> =
        graph.node_indices().map(|n| graph.neighbors_directed(n, Direction::Incoming).count()).collect();
    let mut ready: BTreeSet<NodeIndex> = graph.node_indices().filter(|n| indegree[n.index()] == 0).collect();
    let mut order = Vec::with_capacity(graph.node_count());
    while let Some(n) = ready.pop_first() {
        order.push(n);
        for m in graph.neighbors_directed(n, Direction::Outgoing) {
            indegree[m.index()] -= 1;
            if indegree[m.index()] == 0 {
                ready.insert(m);
            }
        }
    }
    if order.len() != graph.node_count() {
        let steps = graph.node_indices().filter(|n| !order.contains(n)).map(|n| graph[n].key()).collect();
        return Err(GraphError::Cycle { steps });
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "phase: X\ntitle: x\nseed_title: x\nsteps:\n  \
        - { id: X.1, title: a, seed_title: a, risk: low, scope: fabric }\n  \
        - { id: X.2, title: b, seed_title: b, risk: low, scope: fabric, needs: [X.1] }\n";

    fn graph() -> StepGraph {
        let c = Catalog::from_sources(&[("x.yaml", TWO)]).unwrap();
        let t = crate::topology::load_str("t", include_str!("../../topology.example.yaml").into()).unwrap().topology;
        StepGraph::build(&c, &t).unwrap()
    }

    #[test]
    fn a_derived_edge_is_added_once_with_why_and_reorders() {
        let mut g = graph();
        let (x1, x2) = (g.find("X.1").unwrap(), g.find("X.2").unwrap());
        // Already met by the table's edge: nothing added.
        g.add_derived(&[Want { to: x2, providers: vec![x1], why: "Secret a/b at karmada".into() }]).unwrap();
        assert!(g.derived.is_empty());
        let mut g = graph();
        g.graph.clear_edges();
        g.order = order(&g.graph).unwrap();
        g.add_derived(&[Want { to: x1, providers: vec![x2], why: "Secret a/b at karmada".into() }]).unwrap();
        assert_eq!(g.derived_why(x2, x1), Some("Secret a/b at karmada"));
        assert_eq!(g.order, vec![x2, x1]);
    }

    #[test]
    fn a_derived_edge_that_would_close_a_cycle_is_an_error() {
        let mut g = graph();
        let (x1, x2) = (g.find("X.1").unwrap(), g.find("X.2").unwrap());
        let e = g.add_derived(&[Want { to: x1, providers: vec![x2], why: "LocalQueue q/q at cluster.sp".into() }]);
        assert_eq!(
            e,
            Err(GraphError::DerivedCycle {
                step: "X.1".into(),
                why: "LocalQueue q/q at cluster.sp".into(),
                providers: "X.2".into()
            })
        );
        assert!(g.derived.is_empty());
    }
}
