//! How VMs and bare-metal hosts join their site's cluster (A.3, A.4), per `mesh.join`: a K3s
//! agent with a NoSchedule taint (the join token copied from a server at apply time), or the
//! Cilium external-workload path the seed names (gone upstream since Cilium 1.18; kept for
//! topologies that pin an older Cilium).

use super::verify::{Verdict, condition, get, id, skip};
use super::{CheckResult, VerifyCx, sites_of};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::cilium;
use crate::desired::k3s_install::Role;
use crate::desired::objects as o;
use crate::desired::{Desired, K3S_NODE_TOKEN, Out, text, yaml};
use crate::topology::model::*;
use crate::transport::shell::Sh;

/// Every external workload of `kind` at the instance's sites.
pub(super) fn join_all(inst: &Instance, out: &mut Out<'_>, kind: WorkloadKind) {
    for s in sites_of(out.t, inst) {
        for (i, w) in s.external_workloads.iter().enumerate().filter(|(_, w)| w.kind == kind) {
            join(out, s, w, i);
        }
    }
}

/// How a VM or bare-metal host joins (A.3/A.4), per `mesh.join`.
fn join(o: &mut Out<'_>, s: &Site, w: &ExternalWorkload, index: usize) {
    let t = o.t;
    match t.mesh.join {
        JoinMethod::K3sAgent => {
            let cfg = yaml::to_string(&text::k3s_agent_config(s, w));
            let summary = format!(
                "K3s agent config joining `{}` with a NoSchedule taint (the agent restarts when it changes)",
                s.cluster.name
            );
            o.file(
                &w.name,
                &s.name,
                "/etc/rancher/k3s/config.yaml",
                Desired::File(cfg),
                summary,
                Some(format!("config/k3s/{}/agent-{}.yaml", s.name, w.name)),
            );
            // The join token is copied at apply time from a server of the site (never shown).
            let server = s.cluster.nodes.iter().find(|n| n.role == NodeRole::ControlPlane && n.ssh.is_some());
            let source = server.map(|n| Target::host(&n.name).at(format!("file:{K3S_NODE_TOKEN}")));
            let summary = match server {
                Some(n) => format!("K3s join token, copied from {}", n.name),
                None => "K3s join token (no control-plane host with SSH to copy it from)".to_string(),
            };
            o.file(&w.name, &s.name, "/etc/rancher/k3s/token", Desired::Secret(source), summary, None);
            // The agent runs the servers' version (`versions.k3s`, the bundle's): K3s supports
            // no skew the other way. Without a bundle, K3s must be on the host already.
            super::k3s::install(o, &w.name, &s.name, Role::Agent, None);
        }
        JoinMethod::CiliumExternalWorkloads => {
            let cew = cilium::cilium_external_workload(t, s, w, index);
            o.kube(
                Some(&s.name),
                cew,
                format!("external workload {}", w.address),
                Some(format!("apps/cilium/external-workloads-{}.yaml", s.name)),
            );
            o.command(
                Target::host(&w.name),
                &s.name,
                "cilium-agent",
                Sh::lit("docker inspect -f '{{.State.Running}}' cilium"),
                Sh::lit("cilium clustermesh vm install install-external-workload.sh && ./install-external-workload.sh"),
                "install cilium-agent as an external workload",
            );
        }
    }
}

/// `join: k3s-agent`: each VM or bare-metal host is a Ready node of its site's cluster,
/// tainted so that only what tolerates it runs there. Other join methods have no automatic check.
pub(super) async fn joined(cx: &VerifyCx<'_>, kind: WorkloadKind) -> Vec<CheckResult> {
    if cx.t.mesh.join != JoinMethod::K3sAgent {
        return skip(cx.key);
    }
    let (taint_key, _) = o::EXTERNAL_TAINT.split_once('=').unwrap_or_default();
    let mut out = Vec::new();
    for s in cx.sites() {
        let target = Target::cluster(&s.name);
        for w in s.external_workloads.iter().filter(|w| w.kind == kind) {
            let (verdict, evidence) = match get(cx.targets, &target, id("v1", "Node", &w.name, None)).await {
                Err(e) => (Verdict::Fail, format!("{target}: {e}")),
                Ok(None) => (Verdict::Fail, format!("{target}: no node `{}` (has its k3s-agent joined?)", w.name)),
                Ok(Some(node)) => {
                    let tainted = node["spec"]["taints"]
                        .as_array()
                        .is_some_and(|ts| ts.iter().any(|t| t["key"] == taint_key && t["effect"] == "NoSchedule"));
                    match condition(&node, "Ready") {
                        Some((r, _)) if r == "True" && tainted => {
                            (Verdict::Pass, format!("{target}: node {} Ready, tainted {taint_key}", w.name))
                        }
                        Some((r, _)) if r == "True" => {
                            (Verdict::Fail, format!("{target}: node {} is Ready but not tainted {taint_key}", w.name))
                        }
                        Some((r, d)) => (Verdict::Fail, format!("{target}: node {} Ready={r} ({d})", w.name)),
                        None => (Verdict::Fail, format!("{target}: node {} reports no Ready condition", w.name)),
                    }
                }
            };
            out.push(CheckResult { step: cx.key.into(), check: format!("{} joined", w.name), verdict, evidence });
        }
    }
    out
}
