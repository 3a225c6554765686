//! What a step costs beyond its risk, where the operator decides (issue #22 item 9): shown on
//! the plan's risk line of the instance it concerns. The choices stay the operator's; fabric only
//! says what they cost, from the upstream rules cited beside each.

use super::sites_of;
use crate::catalog::Instance;
use crate::desired::drbd;
use crate::topology::Topology;
use crate::topology::model::{DrbdChoice, Site, WorkloadKind};

/// The costs of `inst` in `t`, one sentence each (none for a per-node part: its site's
/// instance says them once).
pub fn of(t: &Topology, inst: &Instance) -> Vec<String> {
    if inst.node.is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for s in sites_of(t, inst) {
        let hypervisors = match inst.spec.id.as_str() {
            // A.1 joins every node of a new cluster; A.2 moves every node of a running one onto
            // Cilium: a node that is also a Proxmox host becomes a hypervisor running Cilium.
            "A.1" | "A.2" => {
                s.cluster.nodes.iter().filter(|n| is_hypervisor(&n.runs)).map(|n| n.name.as_str()).collect()
            }
            "A.4" => s
                .external_workloads
                .iter()
                .filter(|w| w.kind == WorkloadKind::BareMetal && is_hypervisor(&w.runs))
                .map(|w| w.name.as_str())
                .collect(),
            _ => Vec::new(),
        };
        if !hypervisors.is_empty() {
            out.push(hypervisor_cost(&hypervisors));
        }
        if matches!(inst.spec.id.as_str(), "A.1" | "A.2" | "A.4") && same_site_encrypted(t, s) {
            out.push(
                "drbd_cross_site: cilium turns on Cilium's node-to-node WireGuard encryption, which encrypts all \
                 traffic between nodes, this site's own DRBD replication and Proxmox corosync included, not only \
                 the cross-site path; `direct` keeps Cilium out of it (the sites' tunnel already encrypts between \
                 the sites)"
                    .to_string(),
            );
        }
    }
    out
}

/// A host that runs Proxmox (`runs: [proxmox]`).
fn is_hypervisor(runs: &[String]) -> bool {
    runs.iter().any(|r| r == "proxmox")
}

/// The cost of a hypervisor joined as a K3s node: the kubelet and Cilium's agent on it, and
/// Cilium's eBPF programs on its network-facing devices (tc ingress/egress hooks "attached to a
/// networking interface", cilium/cilium Documentation/network/ebpf/intro.rst; fabric's values
/// also turn kube-proxy replacement on, which serves NodePorts there), so a Cilium fault or
/// upgrade reaches the hypervisor's own traffic.
fn hypervisor_cost(hosts: &[&str]) -> String {
    format!(
        "Proxmox hosts {} run the kubelet and Cilium's agent, whose eBPF programs sit on the hypervisor's host network devices: a Cilium fault or upgrade reaches the hypervisor's own traffic",
        hosts.join(", ")
    )
}

/// True when `drbd_cross_site: cilium` encrypts node traffic inside site `s` too: Cilium's
/// node-to-node encryption covers Node → remote Node traffic (cilium/cilium
/// Documentation/security/network/encryption-wireguard.rst, "Which traffic is encrypted"),
/// with no selector by destination (only a per-node opt-out, `node-encryption-opt-out-labels`,
/// which takes a node out of node encryption altogether, cross-site included). It costs
/// something at `s` when `s` has two storage hosts or more (DRBD and corosync between them).
fn same_site_encrypted(t: &Topology, s: &Site) -> bool {
    t.decisions.drbd_cross_site == DrbdChoice::Cilium && drbd::cilium_encryption(t) && drbd::hosts(s).len() >= 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, StepGraph};

    fn costs(text: &str, key: &str) -> Vec<String> {
        let t = crate::topology::load_str("t.yaml", text.to_string()).unwrap().topology;
        let g = StepGraph::build(&Catalog::embedded().unwrap(), &t).unwrap();
        let inst = g.instances().find(|i| i.key() == key).unwrap_or_else(|| panic!("{key}"));
        of(&t, inst)
    }

    const EXAMPLE: &str = include_str!("../../topology.example.yaml");

    #[test]
    fn the_seeds_choices_state_their_costs() {
        let a1 = costs(EXAMPLE, "A.1@sp");
        assert_eq!(a1.len(), 2, "{a1:?}");
        assert!(a1[0].starts_with("Proxmox hosts pve-ippri-31, pve-ippri-33, pve-ippri-34 run the kubelet"), "{a1:?}");
        assert!(a1[1].contains("this site's own DRBD replication and Proxmox corosync"), "{a1:?}");
        let a4 = costs(EXAMPLE, "A.4@franca");
        assert!(a4[0].starts_with("Proxmox hosts pve-labri-31, pve-labri-32, pve-labri-33 run"), "{a4:?}");
        assert!(a4[1].contains("`direct` keeps Cilium out of it"), "{a4:?}");
        // A.2 at Franca: its nodes run no Proxmox, but the encryption covers Franca's storage hosts.
        let a2 = costs(EXAMPLE, "A.2@franca");
        assert_eq!(a2.len(), 1, "{a2:?}");
        assert!(costs(EXAMPLE, "A.2@franca/franca-gpu1").is_empty(), "said once, at the site's instance");
        assert!(costs(EXAMPLE, "A.3@franca").is_empty(), "VMs are no hypervisors");
        // `direct`: no Cilium encryption, no such cost; the hypervisors' cost stays.
        let direct = EXAMPLE.replace("drbd_cross_site: cilium", "drbd_cross_site: direct");
        let a1 = costs(&direct, "A.1@sp");
        assert_eq!(a1.len(), 1, "{a1:?}");
        assert!(a1[0].starts_with("Proxmox hosts"), "{a1:?}");
    }
}
