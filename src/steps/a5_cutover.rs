//! A.5 — the cutover of `cluster_migration: new-cluster` (the seed's safe option, "criar K3s
//! Franca novo com Cilium, redeployar via ArgoCD"): A.2 built the new cluster on the topology's
//! server hosts, with Cilium from the start; phase C joins it to the federation and fills it;
//! the running cluster is left alone until the operator runs this step (`--step A.5@<site>`:
//! it is `explicit`, never part of a phase or a whole run).
//!
//! One instance per moving node (`A.5@franca/franca-gpu1`, each a rollback point, each after the
//! one before): the node leaves the previous cluster (cordoned and drained there, its Node
//! removed, its K3s agent stopped, Flannel's leftovers removed), gets the new cluster's agent
//! config and join token (the agent restarts into the new cluster), and is Ready there with its
//! Cilium agent. Put back on failure: the old agent config restarts the agent into the previous
//! cluster, where it is uncordoned.
//!
//! What it does not move: data. A node's local volumes stay on its disk, and the previous
//! cluster's PersistentVolumes, PVCs and DRBD/LINSTOR resources stay in the previous cluster;
//! workloads come back in the new cluster from Git (ArgoCD → Karmada), with their data restored
//! or re-attached by their owners (docs/runbook.md).

use futures::future::BoxFuture;

use super::{CheckResult, Step, VerifyCx, sites_of};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::node_migration::{NodeMigration, Stage};
use crate::desired::{Desired, K3S_NODE_TOKEN, Out, ProviderKind, Resource, text, yaml};
use crate::topology::model::{NodeRole, Site};

pub struct A5;

/// Where a moved node keeps the new cluster's join token (a path of its own, so that putting
/// the old agent config back finds the old token where it was).
pub const JOIN_TOKEN: &str = "/etc/rancher/k3s/fabric-join-token";

impl Step for A5 {
    fn id(&self) -> &'static str {
        "A.5"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["A.2"]
    }

    fn desired(&self, inst: &Instance, out: &mut Out<'_>) {
        let Some(node) = &inst.node else { return };
        for s in sites_of(out.t, inst) {
            if let Some(n) = s.cluster.nodes.iter().find(|n| n.name == *node && n.role != NodeRole::ControlPlane) {
                move_node(out, s, &n.name, &n.address.to_string());
            }
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(super::a1_new_cluster::cilium_healthy(cx))
    }
}

fn stage(out: &mut Out<'_>, s: &Site, node: &str, stage: Stage, cluster: Target, summary: String) {
    let name = if stage == Stage::Leave { "cutover-leave" } else { "cutover-join" };
    out.push(Resource {
        address: Target::host(node).at(format!("command:{name}")),
        site: Some(s.name.clone()),
        provider: ProviderKind::Command,
        summary,
        sensitive: false,
        file: None,
        desired: Desired::NodeMigration(Box::new(NodeMigration {
            node: node.into(),
            cluster,
            server_config: None,
            stage,
        })),
    });
}

/// The node's four resources, applied in this order on its host.
fn move_node(out: &mut Out<'_>, s: &Site, node: &str, address: &str) {
    stage(
        out,
        s,
        node,
        Stage::Leave,
        Target::previous_cluster(&s.name),
        "leave the previous cluster: cordon, drain, remove the Node there, stop K3s, remove Flannel's leftovers \
         (data volumes stay where they are: local volumes on this disk, PVs in the previous cluster)"
            .to_string(),
    );
    let server = s.cluster.nodes.iter().find(|n| n.role == NodeRole::ControlPlane && n.ssh.is_some());
    let source = server.map(|n| Target::host(&n.name).at(format!("file:{K3S_NODE_TOKEN}")));
    let from = server.map_or("(no server host with SSH)".to_string(), |n| n.name.clone());
    out.file(node, &s.name, JOIN_TOKEN, Desired::Secret(source), format!("the new cluster's join token, copied from {from}"), None);
    out.file(
        node,
        &s.name,
        "/etc/rancher/k3s/config.yaml",
        Desired::File(yaml::to_string(&text::k3s_moved_agent_config(s, address, JOIN_TOKEN))),
        format!("K3s agent config joining the new cluster `{}` (the agent restarts into it)", s.cluster.name),
        Some(format!("config/k3s/{}/agent-{node}.yaml", s.name)),
    );
    stage(
        out,
        s,
        node,
        Stage::Join,
        Target::cluster(&s.name),
        format!("Ready in the new cluster `{}` with its Cilium agent, uncordoned", s.cluster.name),
    );
}
