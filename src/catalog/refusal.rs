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
fn unsupported(inst: &Instance, t: &Topology) -> Option<(Path, String, &'static str)> {
    let d = &t.decisions;
    // `new-cluster` builds a second cluster beside the running one; what A.2 does is migrate the
    // running one (its K3s config rewritten, K3s restarted): the very outage the choice avoids.
    if inst.spec.decisions.iter().any(|k| k == "cluster_migration")
        && let Some(site) = &inst.site
        && d.cluster_migration.get(site) == Some(&MigrationChoice::NewCluster)
    {
        return Some((
            path!["decisions", "cluster_migration", site],
            format!(
                "step {} ({}) would rewrite the running cluster's K3s config and restart it, the outage \
                 `new-cluster` exists to avoid: building the new cluster beside it is not in this build",
                inst.key(),
                inst.spec.title
            ),
            "choose `in-place` for the seed's migration in a maintenance window, or describe the new cluster \
             as the site's cluster (`existing: false`, its new hosts as nodes: A.1 builds it with Cilium) and \
             leave the running one out of the topology until you retire it (docs/runbook.md)",
        ));
    }
    if inst.spec.decisions.iter().any(|k| k == "karmada_host") && d.karmada_host == KarmadaHostChoice::DedicatedVm {
        return Some((
            path!["decisions", "karmada_host"],
            format!(
                "step {} ({}) cannot install Karmada on a dedicated VM: this build installs it in a host cluster only",
                inst.key(),
                inst.spec.title
            ),
            "choose `host-cluster`, or install Karmada on the VM yourself (karmadactl init), point \
             `federation.karmada.kubeconfig` at it and apply the later steps with --step",
        ));
    }
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
