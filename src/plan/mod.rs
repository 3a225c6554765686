//! Plans: what would change, per step and resource, and how it is shown.
//!
//! A plan is built from the steps an operation selected, each with its resources already
//! limited to the selected sites, against live state (or against nothing, offline). It is data:
//! views only read it, and `planfile` writes and reads it back whole.

pub mod diff;
pub mod metrics;
pub mod model;
pub mod planfile;
pub mod select;
pub mod view;

use std::collections::BTreeSet;

use crate::catalog::Instance;
use crate::desired::Resource;
use crate::live::observe::Live;
use model::{Mode, Plan, StepPlan, Unreachable};
use select::Selection;

/// One selected step as the plan sees it.
pub struct StepInput<'a> {
    pub inst: &'a Instance,
    /// Keys of the steps it needs.
    pub needs: Vec<String>,
    /// Why it cannot run (an open decision); a refused step plans no change.
    pub refused: Option<String>,
    /// Its resources at the selected sites, objects to prune included.
    pub resources: Vec<Resource>,
    /// What the step costs beyond its risk, as the topology's choices make it (`steps::costs`).
    pub costs: Vec<String>,
}

/// What a plan says about where it comes from.
pub struct Header {
    pub fabric: String,
    pub topology_file: String,
    pub topology_digest: String,
    /// The topology file's absolute path (None for the embedded example).
    pub topology_path: Option<String>,
    pub selection: Selection,
    pub mode: Mode,
}

/// The plan of `steps` against `live`, or offline (every resource absent) when `live` is None.
pub fn build(h: Header, steps: Vec<StepInput<'_>>, live: Option<&Live>) -> Plan {
    let steps: Vec<StepPlan> = steps.into_iter().map(|s| step_plan(s, live)).collect();
    let mut plan = Plan {
        format_version: model::FORMAT_VERSION.to_string(),
        fabric: h.fabric,
        topology_file: h.topology_file,
        topology_digest: h.topology_digest,
        fabric_version: model::FABRIC_VERSION.to_string(),
        topology_path: h.topology_path,
        selection: h.selection,
        mode: h.mode,
        steps,
        unreachable: Vec::new(),
        held: Vec::new(),
        warnings: Vec::new(),
        summary: Default::default(),
    };
    // Only targets that hold selected resources count; a peer read only for its public key keeps
    // its last known key (see `diff::desired_with_keys`).
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
    if let Some(l) = live {
        plan.held = held(&plan, l);
    }
    plan.summarize();
    plan
}

/// The locks and pending self-reverts on the hosts the plan's changes touch.
fn held(plan: &Plan, live: &Live) -> Vec<model::Held> {
    let touched: BTreeSet<&crate::addr::Target> =
        plan.steps.iter().flat_map(|s| s.changes.iter().map(|c| &c.target)).collect();
    live.held
        .iter()
        .filter(|(t, _)| touched.contains(t))
        .map(|(t, h)| {
            let lock = h.lock.as_ref().map(|l| {
                crate::live::locks::HeldLock::parse(
                    l,
                    &crate::live::locks::here(),
                    crate::live::locks::now(),
                    &crate::live::locks::alive,
                )
            });
            model::Held {
                target: t.clone(),
                stale: lock.as_ref().and_then(|l| l.stale.clone()),
                lock: lock.map(|l| l.holder),
                pending_reverts: h.pending_reverts.clone(),
            }
        })
        .collect()
}

fn step_plan(s: StepInput<'_>, live: Option<&Live>) -> StepPlan {
    let inst = s.inst;
    let mut unreachable = Vec::new();
    let changes = match (&s.refused, live) {
        (Some(_), _) => Vec::new(),
        // Offline, every resource is absent: a create whose diff is the whole new object (a
        // secret's content never: `diff::change` leaves sensitive resources without one).
        (None, None) => {
            let nothing = Live::default();
            s.resources.iter().filter_map(|r| diff::change(r, &nothing)).collect()
        }
        (None, Some(live)) => {
            for r in &s.resources {
                if live.unreachable.contains_key(r.target()) && !unreachable.contains(r.target()) {
                    unreachable.push(r.target().clone());
                }
            }
            s.resources.iter().filter_map(|r| diff::change(r, live)).collect()
        }
    };
    StepPlan {
        key: inst.key(),
        id: inst.spec.id.clone(),
        site: inst.site.clone(),
        phase: inst.phase.clone(),
        title: inst.spec.title.clone(),
        risk: inst.spec.risk,
        costs: s.costs,
        needs: s.needs,
        changes,
        refused: s.refused,
        unreachable,
        status: Default::default(),
    }
}
