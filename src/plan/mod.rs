//! Plans: what would change, per step and resource, and how it is shown.

pub mod model;
pub mod select;
pub mod view;

use std::collections::BTreeSet;

use petgraph::graph::NodeIndex;

use crate::catalog::{StepGraph, refusal};
use crate::resources;
use crate::topology::Topology;
use model::{Change, Mode, Plan, StepPlan};

/// A plan that reads nothing: every resource of the selected steps is planned as absent.
pub fn offline(t: &Topology, file: &str, g: &StepGraph, selected: &BTreeSet<NodeIndex>, sites: &[String]) -> Plan {
    let refused = refusal::refusals(g, t);
    let mut steps = Vec::new();
    for &n in g.order.iter().filter(|n| selected.contains(n)) {
        let inst = &g.graph[n];
        let refusal = refused.get(&n).map(|p| p.message.clone());
        let changes = if refusal.is_some() {
            Vec::new()
        } else {
            resources::for_instance(inst, t)
                .iter()
                .filter(|r| sites.is_empty() || r.site.as_ref().is_none_or(|s| sites.contains(s)))
                .map(Change::create)
                .collect()
        };
        steps.push(StepPlan {
            key: inst.key(),
            id: inst.spec.id.clone(),
            site: inst.site.clone(),
            phase: inst.phase.clone(),
            title: inst.spec.title.clone(),
            risk: inst.spec.risk,
            needs: g.dependencies(n).iter().map(|d| g.graph[*d].key()).collect(),
            changes,
            refused: refusal,
        });
    }
    let mut plan = Plan {
        format_version: model::FORMAT_VERSION,
        fabric: t.name.clone(),
        topology_file: file.to_string(),
        mode: Mode::Offline,
        steps,
        unreachable: Vec::new(),
        summary: Default::default(),
    };
    plan.summarize();
    plan
}
