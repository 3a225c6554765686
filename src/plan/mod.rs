//! Plans: what would change, per step and resource, and how it is shown.

pub mod diff;
pub mod model;
pub mod select;
pub mod view;

use std::collections::BTreeSet;

use petgraph::graph::NodeIndex;

use crate::catalog::{StepGraph, refusal};
use crate::desired;
use crate::topology::Topology;
use model::{Change, Mode, Plan, SelectionRecord, StepPlan, Unreachable};

use crate::live::observe::Live;

/// A plan that reads nothing: every resource of the selected steps is planned as absent.
pub fn offline(t: &Topology, file: &str, g: &StepGraph, selected: &BTreeSet<NodeIndex>, sites: &[String]) -> Plan {
    build(t, file, g, selected, sites, None, &Default::default())
}

/// The resources of the selected, non-refused steps (limited to `sites` when given).
pub fn selected_resources(
    t: &Topology,
    g: &StepGraph,
    selected: &BTreeSet<NodeIndex>,
    sites: &[String],
) -> Vec<desired::Resource> {
    let refused = refusal::refusals(g, t);
    g.order
        .iter()
        .filter(|n| selected.contains(n) && !refused.contains_key(n))
        .flat_map(|n| desired::for_instance(&g.graph[*n], t))
        .filter(|r| sites.is_empty() || r.site.as_ref().is_none_or(|s| sites.contains(s)))
        .collect()
}

/// A plan against live state (`live` from `engine::observe`), or offline when `live` is None.
pub fn build(
    t: &Topology,
    file: &str,
    g: &StepGraph,
    selected: &BTreeSet<NodeIndex>,
    sites: &[String],
    live: Option<&Live>,
    orphans: &std::collections::BTreeMap<NodeIndex, Vec<desired::Resource>>,
) -> Plan {
    let refused = refusal::refusals(g, t);
    let mut steps = Vec::new();
    for &n in g.order.iter().filter(|n| selected.contains(n)) {
        let inst = &g.graph[n];
        let refusal = refused.get(&n).map(|p| p.message.clone());
        let mut unreachable = Vec::new();
        let changes = if refusal.is_some() {
            Vec::new()
        } else {
            let rs: Vec<desired::Resource> = desired::for_instance(inst, t)
                .into_iter()
                .chain(orphans.get(&n).cloned().unwrap_or_default())
                .filter(|r| sites.is_empty() || r.site.as_ref().is_none_or(|s| sites.contains(s)))
                .collect();
            match live {
                None => rs.iter().map(Change::create).collect(),
                Some(live) => {
                    for r in &rs {
                        if live.unreachable.contains_key(&r.target) && !unreachable.contains(&r.target) {
                            unreachable.push(r.target.clone());
                        }
                    }
                    rs.iter().filter_map(|r| diff::change(r, live)).collect()
                }
            }
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
            unreachable,
        });
    }
    let mut plan = Plan {
        format_version: model::FORMAT_VERSION,
        fabric: t.name.clone(),
        topology_file: file.to_string(),
        topology_digest: String::new(),
        selection: SelectionRecord::default(),
        mode: match live {
            None => Mode::Offline,
            Some(l) => Mode::Live { fingerprint: l.fingerprint() },
        },
        steps,
        unreachable: Vec::new(),
        summary: Default::default(),
    };
    // Only targets that hold selected resources count; a peer read only for its public key keeps
    // its last known key (see `engine::diff::desired_with_keys`).
    if let Some(l) = live {
        let mut seen = BTreeSet::new();
        for step in &plan.steps {
            for t in &step.unreachable {
                if seen.insert(t.clone()) {
                    plan.unreachable.push(Unreachable { target: t.clone(), reason: l.unreachable[t].clone() });
                }
            }
        }
    }
    plan.summarize();
    plan
}
