//! What runs now, from what plan read (live or from a snapshot): each node's K3s version (its
//! install's read, `desired::k3s_install::read`, which prints the binary's `--version`), each
//! chart's HelmChart `spec.version`, and the kubelet of every other Node of the clusters whose
//! K3s is planned (`status.nodeInfo.kubeletVersion`, read by [`read_kubelets`]: a node fabric
//! does not install still has to stay within the skew policy of the API servers it upgrades).
//! `desired::upgrade` checks the topology's `versions:` against it.

use std::collections::BTreeMap;

use crate::desired::Target;
use crate::desired::upgrade::{Kubelet, Running, RunningNode, System};
use crate::live::observe::{Live, Targets};
use crate::providers::Observed;
use crate::topology::Topology;
use crate::topology::model::NodeRole;

/// The running versions `live` shows for `t`'s nodes and charts, and the other kubelets of its
/// clusters; what was not read is left out.
pub fn running(t: &Topology, live: &Live) -> Running {
    let (observed, kubelets) = (&live.observed, &live.kubelets);
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
        // The cluster's other kubelets: those whose version no install read gave.
        if let Some(nodes) = kubelets.get(&Target::cluster(&s.name)) {
            for (node, version) in nodes {
                if !out.nodes.iter().any(|n| &n.node == node && n.site == s.name) {
                    out.kubelets.push(Kubelet { site: s.name.clone(), node: node.clone(), version: version.clone() });
                }
            }
        }
        for system in [System::Cilium, System::Kueue, System::Karmada] {
            let addr = Target::cluster(&s.name).at(format!("kube-system/HelmChart/{}", system.key()));
            let Some(Observed::Present(text)) = observed.get(&addr) else { continue };
            if let Some(v) = crate::desired::upgrade::chart_version(text) {
                out.charts.push((system, s.name.clone(), v));
            }
        }
    }
    out
}

/// Each Node's kubelet version in `clusters`, by cluster and node name. A cluster that cannot be
/// listed is left out (its K3s install reads, or its unreachability, say the rest).
pub async fn read_kubelets(clusters: &[Target], targets: &Targets) -> BTreeMap<Target, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for c in clusters {
        let Some(access) = targets.kube.get(c) else { continue };
        let listed = crate::providers::kube::for_cluster(c, async {
            let client = crate::providers::kube::client(c, access).await.ok()?;
            let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
            let params = kube::api::ListParams::default();
            crate::providers::kube::call("list Nodes", || nodes.list(&params)).await.ok()
        })
        .await;
        let Some(list) = listed else { continue };
        let versions = list
            .items
            .into_iter()
            .filter_map(|n| {
                let version = n.status?.node_info?.kubelet_version;
                Some((n.metadata.name?, version))
            })
            .collect();
        out.insert(c.clone(), versions);
    }
    out
}

/// The clusters whose K3s `resources` install or upgrade and that answer (not brought up by
/// this run, not unreachable): those whose kubelets [`read_kubelets`] reads.
pub fn k3s_clusters(resources: &[crate::desired::Resource], live: &Live) -> Vec<Target> {
    let mut out: Vec<Target> = resources
        .iter()
        .filter(|r| r.address.command() == Some("k3s-install"))
        .filter_map(|r| r.site.as_deref().map(Target::cluster))
        .filter(|c| !live.bootstrap.contains_key(c) && !live.unreachable.contains_key(c))
        .collect();
    out.sort();
    out.dedup();
    out
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
        let mut live = Live { observed, ..Default::default() };
        live.kubelets.insert(
            Target::cluster(&s.name),
            [(n.name.clone(), "v1.32.9+k3s1".to_string()), ("not-in-the-topology".into(), "v1.30.2".into())].into(),
        );
        let r = running(t, &live);
        assert_eq!(r.nodes.len(), 1);
        assert_eq!((r.nodes[0].node.as_str(), r.nodes[0].version.as_str()), (n.name.as_str(), "v1.32.9+k3s1"));
        assert_eq!(r.charts, vec![(System::Cilium, s.name.clone(), "1.17.9".to_string())]);
        // The install's read names the topology's node; the other Node comes from its kubelet.
        assert_eq!(
            r.kubelets,
            vec![Kubelet { site: s.name.clone(), node: "not-in-the-topology".into(), version: "v1.30.2".into() }]
        );
    }
}
