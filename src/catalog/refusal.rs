//! Steps that cannot run because a decision they need is still open.

use std::collections::BTreeMap;

use petgraph::graph::NodeIndex;

use super::graph::{Instance, StepGraph};
use crate::path;
use crate::topology::Topology;
use crate::topology::model::*;
use crate::topology::problem::Problem;
use crate::topology::tree::Path;

/// The open decisions `inst` needs, as (path of the decision field, what to choose from).
fn open_decisions(inst: &Instance, t: &Topology) -> Vec<(Path, &'static str)> {
    let d = &t.decisions;
    let mut open = Vec::new();
    for key in &inst.spec.decisions {
        match key.as_str() {
            "cluster_migration" => {
                if let Some(site) = &inst.site
                    && d.cluster_migration.get(site).is_none_or(|c| *c == MigrationChoice::Undecided)
                {
                    open.push((path!["decisions", "cluster_migration", site], "in-place or new-cluster"));
                }
            }
            "public_address" => {
                for s in &t.sites {
                    let c = d.public_address.get(&s.name).copied().unwrap_or(PublicAddressChoice::Undecided);
                    if c == PublicAddressChoice::Undecided {
                        open.push((path!["decisions", "public_address", &s.name], "fixed or dynamic"));
                    }
                }
            }
            "karmada_host" if d.karmada_host == KarmadaHostChoice::Undecided => {
                open.push((path!["decisions", "karmada_host"], "host-cluster or dedicated-vm"))
            }
            "argocd" if d.argocd == ArgoCdChoice::Undecided => {
                open.push((path!["decisions", "argocd"], "single or per-cluster"))
            }
            "drbd_cross_site" if d.drbd_cross_site == DrbdChoice::Undecided => {
                open.push((path!["decisions", "drbd_cross_site"], "cilium or direct"))
            }
            _ => {}
        }
    }
    open
}

/// A decided choice this build cannot carry out for `inst`: (decision field, why, what to do).
/// Every choice of the seed's decisions is carried out now (`cluster_migration: new-cluster`
/// was the last one); the refusal stays for a choice a later topology version may add before
/// its steps exist.
fn unsupported(_inst: &Instance, _t: &Topology) -> Option<(Path, String, &'static str)> {
    None
}

/// Every refused instance with the reason, as a problem pointing at the open decision. A step
/// that needs a refused step is refused too, naming it. A choice this build cannot carry out
/// refuses only its own step: what comes after may run against a part installed by hand.
pub fn refusals(g: &StepGraph, t: &Topology) -> BTreeMap<NodeIndex, Problem> {
    let mut out: BTreeMap<NodeIndex, Problem> = BTreeMap::new();
    let mut own = std::collections::BTreeSet::new();
    for &n in &g.order {
        let inst = &g.graph[n];
        if let Some((field, why, help)) = unsupported(inst, t) {
            out.insert(n, Problem::error("plan::unsupported", field, why).label("not supported").help(help));
            own.insert(n);
            continue;
        }
        if let Some((field, choices)) = open_decisions(inst, t).into_iter().next() {
            let p = Problem::error(
                "plan::undecided",
                field.clone(),
                format!("step {} ({}) needs the decision `{field}`, which is undecided", inst.key(), inst.spec.title),
            )
            .label("undecided")
            .help(format!("decide `{field}` ({choices}); docs/runbook.md says what each choice changes"));
            out.insert(n, p);
            continue;
        }
        if let Some(dep) = g.dependencies(n).into_iter().find(|d| out.contains_key(d) && !own.contains(d)) {
            let reason = &out[&dep];
            let p = Problem::error(
                "plan::undecided",
                reason.path.clone(),
                format!("step {} needs step {}, which is refused", inst.key(), g.graph[dep].key()),
            )
            .label("undecided")
            .help(reason.help.clone().unwrap_or_default());
            out.insert(n, p);
        }
    }
    out
}
