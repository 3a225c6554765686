//! What runs now, from what plan read (live or from a snapshot): each node's K3s version (its
//! install's read, `desired::k3s_install::read`, which prints the binary's `--version`) and each
//! chart's HelmChart `spec.version`. `desired::upgrade` checks the topology's `versions:` against
//! it.

use std::collections::BTreeMap;

use crate::desired::upgrade::{Running, RunningNode, System};
use crate::desired::{Address, Target};
use crate::providers::Observed;
use crate::topology::Topology;
use crate::topology::model::NodeRole;

/// The running versions `observed` shows for `t`'s nodes and charts; what was not read is left out.
pub fn running(t: &Topology, observed: &BTreeMap<Address, Observed>) -> Running {
    let mut out = Running::default();
    for s in &t.sites {
        for n in &s.cluster.nodes {
            let addr = Target::host(&n.name).at("command:k3s-install");
            let Some(Observed::Present(text)) = observed.get(&addr) else { continue };
            // `<service> <sha256> <version>`, one line per service (the read keeps nothing else).
            if let Some(version) = text.lines().find_map(|l| l.split(' ').nth(2)) {
                out.nodes.push(RunningNode {
                    site: s.name.clone(),
                    node: n.name.clone(),
                    server: n.role == NodeRole::ControlPlane,
                    version: version.to_string(),
                });
            }
        }
        for system in [System::Cilium, System::Kueue, System::Karmada] {
            let addr = Target::cluster(&s.name).at(format!("kube-system/HelmChart/{}", system.key()));
            let Some(Observed::Present(text)) = observed.get(&addr) else { continue };
            if let Some(v) = chart_version(text) {
                out.charts.push((system, s.name.clone(), v));
            }
        }
    }
    out
}

/// `spec.version` of a HelmChart as the kube provider's read shows it (YAML).
fn chart_version(text: &str) -> Option<String> {
    let v = serde_saphyr::from_str::<crate::topology::tree::Node>(text).ok()?.to_json();
    v["spec"]["version"].as_str().map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_and_charts_are_read_from_what_plan_saw() {
        let l = crate::topology::load_str("t.yaml", include_str!("../../topology.example.yaml").to_string()).unwrap();
        let t = &l.topology;
        let s = &t.sites[0];
        let n = &s.cluster.nodes[0];
        let mut observed = BTreeMap::new();
        observed.insert(
            Target::host(&n.name).at("command:k3s-install"),
            Observed::Present(format!("k3s {} v1.32.9+k3s1\n", "a".repeat(64))),
        );
        observed.insert(
            Target::cluster(&s.name).at("kube-system/HelmChart/cilium"),
            Observed::Present("apiVersion: helm.cattle.io/v1\nkind: HelmChart\nspec:\n  version: 1.17.9\n".into()),
        );
        let r = running(t, &observed);
        assert_eq!(r.nodes.len(), 1);
        assert_eq!((r.nodes[0].node.as_str(), r.nodes[0].version.as_str()), (n.name.as_str(), "v1.32.9+k3s1"));
        assert_eq!(r.charts, vec![(System::Cilium, s.name.clone(), "1.17.9".to_string())]);
    }
}
