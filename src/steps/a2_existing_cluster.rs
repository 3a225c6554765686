//! A.2 — Cilium replaces Flannel on a running cluster (seed: "K3s Franca com Cilium", the
//! high-risk step), in place and node by node (`cluster_migration: in-place`; the seed's
//! "migrar in-place com janela de manutencao").
//!
//! `A.2@<site>` installs Cilium (the same chart and values as A.1): its agents start on every
//! node, but no node's containerd uses Cilium's CNI configuration while that node's K3s runs
//! Flannel (`desired::node_migration`). Then one instance per node, `A.2@<site>/<node>`, the
//! control-plane node first (its server config turns Flannel off, so the nodes after it switch
//! when their K3s restarts): cordon, drain, reconfigure, Flannel's leftovers removed, Cilium's
//! agent Ready on the node, uncordon. Each node is its own rollback point, and the first node
//! that fails stops the run with the nodes after it untouched.

use futures::future::BoxFuture;

use super::a1_new_cluster::{cilium_chart, cilium_healthy, k3s_with_cilium};
use super::{CheckResult, Step, VerifyCx, sites_of};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::node_migration::{NodeMigration, Stage};
use crate::desired::{Desired, Out, ProviderKind, Resource, text, yaml};
use crate::topology::model::NodeRole;

pub struct A2;

impl Step for A2 {
    fn id(&self) -> &'static str {
        "A.2"
    }

    fn desired(&self, inst: &Instance, out: &mut Out<'_>) {
        let new_cluster = inst.site.as_ref().is_some_and(|s| {
            out.t.decisions.cluster_migration.get(s) == Some(&crate::topology::model::MigrationChoice::NewCluster)
        });
        match &inst.node {
            // `new-cluster`: the new cluster on its server hosts, as A.1 builds one (the running
            // cluster is not touched: A.5 moves its nodes when the operator says).
            None if new_cluster => k3s_with_cilium(inst, out),
            None => cilium_chart(inst, out),
            Some(node) => migrate_node(inst, out, node),
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(cilium_healthy(cx))
    }
}

/// One node's migration, `host.<node>/command:cni-migration`.
fn migrate_node(inst: &Instance, out: &mut Out<'_>, node: &str) {
    let t = out.t;
    for s in sites_of(t, inst) {
        let Some(n) = s.cluster.nodes.iter().find(|n| n.name == node) else { continue };
        let server = n.role == NodeRole::ControlPlane;
        let m = NodeMigration {
            node: n.name.clone(),
            cluster: Target::cluster(&s.name),
            server_config: server.then(|| yaml::to_string(&text::k3s_server_config(s))),
            stage: Stage::InPlace,
        };
        let summary = if server {
            "cordon, drain, K3s server config without Flannel (K3s restarts), Flannel's interfaces and rules removed, Cilium agent ready, uncordon"
        } else {
            "cordon, drain, K3s agent restarted without Flannel, Flannel's interfaces and rules removed, Cilium agent ready, uncordon"
        };
        out.push(Resource {
            address: Target::host(&n.name).at("command:cni-migration"),
            site: Some(s.name.clone()),
            provider: ProviderKind::Command,
            summary: summary.into(),
            sensitive: false,
            file: server.then(|| format!("config/k3s/{}/server.yaml", s.name)),
            desired: Desired::NodeMigration(Box::new(m)),
        });
    }
}
