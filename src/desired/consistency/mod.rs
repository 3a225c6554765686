//! The consistency pass: whether the objects fabric makes work *together*, which no schema can
//! tell (each schema checks one object alone).
//!
//! A pure function of the topology, the step graph and every instance's resources. Each rule
//! reads the references model (`desired::refs`: what each resource provides and requires) or
//! the objects themselves, and reports [`Problem`]s that name the topology entry the object
//! comes from ([`origin`]), so `validate`, `render` and `plan` print them at file:line:column.
//!
//! Rules of [`Level::Topology`] need only what the topology names (labels, the objects and
//! queues it names); `validate` runs those. `render` and `plan` run every rule.

mod argocd;
mod names;
mod origin;
mod patch;

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::NodeIndex;

use super::Produced;
use super::refs::{self, Fact};
use crate::catalog::StepGraph;
use crate::topology::Topology;
use crate::topology::problem::Problem;

pub use origin::origin;

/// Which rules run: those the topology alone decides, or every rule (on the objects).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Topology,
    Objects,
}

/// What every rule reads.
pub struct Input<'a> {
    pub t: &'a Topology,
    pub graph: &'a StepGraph,
    pub desired: &'a BTreeMap<NodeIndex, Produced>,
    /// What holds without any step (`refs::ambient`).
    pub given: BTreeSet<Fact>,
    /// Which instances provide each fact.
    pub providers: BTreeMap<Fact, BTreeSet<NodeIndex>>,
}

impl<'a> Input<'a> {
    pub fn new(t: &'a Topology, graph: &'a StepGraph, desired: &'a BTreeMap<NodeIndex, Produced>) -> Input<'a> {
        Input { t, graph, desired, given: refs::ambient(t), providers: refs::providers(t, desired) }
    }

    /// Whether `fact` holds somewhere, whoever makes it.
    pub fn exists(&self, fact: &Fact) -> bool {
        refs::is_given(fact, &self.given) || self.providers.contains_key(fact)
    }

    /// Every resource with its instance, in graph order.
    pub fn resources(&self) -> impl Iterator<Item = (NodeIndex, &'a super::Resource)> + '_ {
        self.graph
            .order
            .iter()
            .filter_map(|n| self.desired.get(n).map(|p| (*n, p)))
            .flat_map(|(n, p)| p.resources.iter().map(move |r| (n, r)))
    }
}

/// Every problem the rules of `level` find, each once, in a stable order.
pub fn check(t: &Topology, graph: &StepGraph, desired: &BTreeMap<NodeIndex, Produced>, level: Level) -> Vec<Problem> {
    let input = Input::new(t, graph, desired);
    let mut out = Vec::new();
    names::check(&input, level, &mut out);
    if level == Level::Objects {
        patch::check(&input, &mut out);
        argocd::check(&input, &mut out);
    }
    let mut seen = BTreeSet::new();
    out.retain(|p| seen.insert((p.code, p.message.clone())));
    out
}

#[cfg(test)]
pub(crate) mod fixture {
    //! A small world for the rules' tests: the example topology, its graph (the table's edges,
    //! none derived) and objects put by hand into chosen instances. (The steps are a layer
    //! above, so the tests do not use their desired state.)
    use serde_json::Value;

    use super::*;
    use crate::catalog::Catalog;

    pub struct Fix {
        pub t: Topology,
        pub g: StepGraph,
        pub d: BTreeMap<NodeIndex, Produced>,
    }

    impl Fix {
        pub fn new() -> Fix {
            Fix::with(include_str!("../../../topology.example.yaml"))
        }

        pub fn with(text: &str) -> Fix {
            let t = crate::topology::load_str("t.yaml", text.to_string()).unwrap().topology;
            let g = StepGraph::build(&Catalog::embedded().unwrap(), &t).unwrap();
            let d = g.order.iter().map(|n| (*n, Produced::default())).collect();
            Fix { t, g, d }
        }

        /// Puts `obj` into the resources of instance `key`, at `site`'s cluster (None: Karmada).
        pub fn put(&mut self, key: &str, site: Option<&str>, obj: Value) -> &mut Fix {
            self.put_file(key, site, obj, None)
        }

        pub fn put_file(&mut self, key: &str, site: Option<&str>, obj: Value, file: Option<&str>) -> &mut Fix {
            let n = self.g.find(key).unwrap();
            let r = crate::desired::kube_resource(&self.t, site, obj, file);
            self.d.entry(n).or_default().resources.push(r);
            self
        }

        pub fn check(&self, level: Level) -> Vec<Problem> {
            check(&self.t, &self.g, &self.d, level)
        }

        /// The codes and messages found, for assertions that show what was found.
        pub fn found(&self, level: Level) -> Vec<(&'static str, String)> {
            self.check(level).into_iter().map(|p| (p.code, p.message)).collect()
        }
    }
}
