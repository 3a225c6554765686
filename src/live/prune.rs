//! Objects fabric created that the topology no longer has: found by fabric's labels in each
//! Kubernetes API of the selected steps, and planned as deletions of the step that makes
//! objects of that kind there. Nothing fabric did not create (no label) is ever deleted.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::NodeIndex;

use crate::catalog::StepGraph;
use crate::desired::{Address, Desired, Produced, ProviderKind, Resource, Target};
use crate::live::observe::Targets;

fn address(target: &Target, id: &serde_json::Value) -> Address {
    let kind = id["kind"].as_str().unwrap_or_default();
    let name = id["metadata"]["name"].as_str().unwrap_or_default();
    match id["metadata"]["namespace"].as_str() {
        Some(ns) => target.at(format!("{ns}/{kind}/{name}")),
        None => target.at(format!("{kind}/{name}")),
    }
}

/// The orphans of the `selected` steps, by step: objects labelled as made by fabric `fabric`
/// in the APIs the selected steps write to (`keep` says which resources are at the selected
/// sites) that no instance of `desired` makes any more.
pub async fn orphans(
    fabric: &str,
    g: &StepGraph,
    desired: &BTreeMap<NodeIndex, Produced>,
    selected: &BTreeSet<NodeIndex>,
    keep: impl Fn(&Resource) -> bool,
    targets: &Targets,
) -> BTreeMap<NodeIndex, Vec<Resource>> {
    // Everything the topology produces, and which steps make which kind in which API.
    let mut wanted = BTreeSet::new();
    let mut makers: BTreeMap<(Target, String), Vec<NodeIndex>> = BTreeMap::new();
    for &n in &g.order {
        for r in desired.get(&n).map(|p| p.resources.clone()).unwrap_or_default() {
            if let Desired::Kube(o) = &r.desired {
                let kind = o["kind"].as_str().unwrap_or_default().to_string();
                makers.entry((r.target().clone(), kind)).or_default().push(n);
            }
            wanted.insert(r.address);
        }
    }
    let apis: BTreeSet<Target> = selected
        .iter()
        .filter_map(|n| desired.get(n))
        .flat_map(|p| &p.resources)
        .filter(|r| r.provider == ProviderKind::Kube && keep(r))
        .map(|r| r.target().clone())
        .collect();
    let mut out: BTreeMap<NodeIndex, Vec<Resource>> = BTreeMap::new();
    for target in apis {
        let Some(access) = targets.kube.get(&target) else { continue };
        // An API that cannot be reached or listed is reported by the observation itself.
        let Ok(client) = crate::providers::kube::client(&target, access).await else { continue };
        let listed = crate::providers::kube::list_managed(&client, fabric);
        let Ok(ids) = crate::providers::kube::for_cluster(&target, listed).await else { continue };
        for id in ids {
            let addr = address(&target, &id);
            if wanted.contains(&addr) {
                continue;
            }
            let kind = id["kind"].as_str().unwrap_or_default().to_string();
            let Some(step) =
                makers.get(&(target.clone(), kind)).and_then(|ns| ns.iter().find(|n| selected.contains(n)))
            else {
                continue;
            };
            out.entry(*step).or_default().push(Resource {
                address: addr,
                site: target.site().map(String::from),
                provider: ProviderKind::Kube,
                summary: "no longer in the topology".into(),
                sensitive: false,
                desired: Desired::Prune(id),
                file: None,
            });
        }
    }
    out
}
