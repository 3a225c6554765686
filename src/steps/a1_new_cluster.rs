//! A.1 — K3s with Cilium on a new cluster (seed: "K3s SP com Cilium").
//!
//! The K3s server config turns Flannel, network policy, kube-proxy and servicelb off; Cilium
//! comes as a K3s HelmChart with the site's values (Cluster Mesh included, so B.2 only adds
//! the peers). A.2 makes the same on a running cluster, node by node.

use futures::future::BoxFuture;

use super::verify::{Verdict, get, id, rolled_out};
use super::{CheckResult, Step, VerifyCx, sites_of};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::cilium;
use crate::desired::{Desired, K3S_NODE_TOKEN, Out, text, yaml};
use crate::desired::k3s_install::Role;
use crate::topology::model::NodeRole;

pub struct A1;

impl Step for A1 {
    fn id(&self) -> &'static str {
        "A.1"
    }

    fn desired(&self, inst: &Instance, out: &mut Out<'_>) {
        k3s_with_cilium(inst, out);
        agents(inst, out);
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(cilium_healthy(cx))
    }
}

/// The K3s server config of every control-plane node of the new cluster, K3s itself from the
/// air-gap bundle, and Cilium's HelmChart with its values file.
pub(super) fn k3s_with_cilium(inst: &Instance, out: &mut Out<'_>) {
    let t = out.t;
    for s in sites_of(t, inst) {
        let text = yaml::to_string(&text::k3s_server_config(s));
        for n in s.cluster.nodes.iter().filter(|n| n.role == NodeRole::ControlPlane) {
            out.file(
                &n.name,
                &s.name,
                "/etc/rancher/k3s/config.yaml",
                Desired::File(text.clone()),
                "K3s server config: flannel-backend none, no network policy, no kube-proxy/servicelb (K3s restarts when it changes)",
                Some(format!("config/k3s/{}/server.yaml", s.name)),
            );
            if n.ssh.is_some() {
                super::k3s::install(out, &n.name, &s.name, Role::Server, Some(Target::cluster(&s.name)));
            }
        }
    }
    cilium_chart(inst, out);
}

/// The other nodes of the new cluster (GPU nodes, workers) join it as K3s agents once its
/// servers run: the agent config (the cluster's server, the node's address), the join token
/// copied at apply time from a server (never rendered), and K3s from the air-gap bundle. A node
/// without `ssh` cannot be joined: `validate` refuses it (`topology::rules`). Unlike A.3/A.4's
/// hosts they are not tainted: they are the cluster's own capacity (D.1 labels the GPU nodes).
/// Only A.1: on an existing cluster they run already, and a new-cluster migration moves them
/// in the cutover (A.5).
fn agents(inst: &Instance, out: &mut Out<'_>) {
    let t = out.t;
    for s in sites_of(t, inst) {
        let server = s.cluster.nodes.iter().find(|n| n.role == NodeRole::ControlPlane && n.ssh.is_some());
        for n in s.cluster.nodes.iter().filter(|n| n.role != NodeRole::ControlPlane && n.ssh.is_some()) {
            let cfg = text::k3s_moved_agent_config(s, &n.address.to_string(), JOIN_TOKEN);
            out.file(
                &n.name,
                &s.name,
                "/etc/rancher/k3s/config.yaml",
                Desired::File(yaml::to_string(&cfg)),
                format!("K3s agent config joining `{}` (the agent restarts when it changes)", s.cluster.name),
                Some(format!("config/k3s/{}/agent-{}.yaml", s.name, n.name)),
            );
            let source = server.map(|c| Target::host(&c.name).at(format!("file:{K3S_NODE_TOKEN}")));
            let summary = match server {
                Some(c) => format!("K3s join token, copied from {}", c.name),
                None => "K3s join token (no control-plane host with SSH to copy it from)".to_string(),
            };
            out.file(&n.name, &s.name, JOIN_TOKEN, Desired::Secret(source), summary, None);
            super::k3s::install(out, &n.name, &s.name, Role::Agent, None);
        }
    }
}

/// Where an agent's join token is written (`token-file` of its config).
const JOIN_TOKEN: &str = "/etc/rancher/k3s/token";

/// Cilium's HelmChart in each site of the instance, with the seed's values file (the whole
/// configuration of the site, mesh included).
pub(super) fn cilium_chart(inst: &Instance, out: &mut Out<'_>) {
    let t = out.t;
    for s in sites_of(t, inst) {
        let summary = format!("Cilium {} (cluster {} id {})", t.versions.cilium, s.cluster.name, s.cluster.id);
        out.kube(
            Some(&s.name),
            cilium::cilium_helm_chart(t, s),
            summary,
            Some(format!("apps/cilium/helmchart-{}.yaml", s.name)),
        );
        let mut values = cilium::cilium_values(t, s);
        o::merge(&mut values, &cilium::clustermesh_values(t, s));
        out.extra(format!("apps/cilium/values-{}.yaml", s.name), yaml::to_string(&values));
    }
}

/// Cilium's agents (every one ready) and operator (rolled out) in each site of the instance.
pub(super) async fn cilium_healthy(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let mut out = Vec::new();
    for s in cx.sites() {
        let target = Target::cluster(&s.name);
        let (verdict, evidence) =
            match get(cx.targets, &target, id("apps/v1", "DaemonSet", "cilium", Some("kube-system"))).await {
                Err(e) => (Verdict::Fail, format!("{target}: {e}")),
                Ok(None) => (Verdict::Fail, format!("{target}: DaemonSet kube-system/cilium does not exist")),
                Ok(Some(ds)) => {
                    let want = ds["status"]["desiredNumberScheduled"].as_i64().unwrap_or(0);
                    let ready = ds["status"]["numberReady"].as_i64().unwrap_or(0);
                    let v = if want > 0 && ready == want { Verdict::Pass } else { Verdict::Fail };
                    (v, format!("{target}: cilium agents ready {ready}/{want}"))
                }
            };
        out.push(CheckResult { step: cx.key.into(), check: "Cilium agents healthy".into(), verdict, evidence });
        let op = id("apps/v1", "Deployment", "cilium-operator", Some("kube-system"));
        out.push(rolled_out(cx.targets, cx.key, &target, "Cilium operator healthy", op).await);
    }
    out
}
