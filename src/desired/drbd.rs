//! The cross-site storage path, as `decisions.drbd_cross_site` says (seed: "DRBD cross-site via
//! Cilium ou rede direta").
//!
//! The storage hosts are the cluster nodes and external workloads that run a LINSTOR satellite
//! (`runs: [linstor-satellite]`, or `drbd`). DRBD runs in their host network, so the two choices are:
//! - `cilium`: Cilium's transparent encryption in WireGuard mode, with node-to-node encryption
//!   on: without it Cilium encrypts only traffic between pods, and DRBD is not a pod
//!   (Cilium docs, "WireGuard Transparent Encryption", "Node-to-Node Encryption"). Cluster Mesh
//!   needs every cluster to run it ("mixed mode is currently not supported"), so it is on in
//!   every site's Cilium.
//! - `direct`: no encryption of Cilium's; the routers carry DRBD's ports between the two sites'
//!   storage hosts through the sites' tunnel, with a host route per remote storage host (so the
//!   storage path stays on the tunnel even where a more specific route to the other LAN
//!   appears) and firewall rules that accept exactly that traffic.
//!
//! Either way the choice changes something only where storage hosts exist at two sites or more.

use std::net::Ipv4Addr;

use crate::topology::Topology;
use crate::topology::model::{DrbdChoice, ExternalWorkload, Site};

/// The TCP ports DRBD resources get from LINSTOR: its `TcpPortAutoRange`, 7000-7999 unless the
/// operator changed it (LINSTOR User Guide, "Configuring the TCP port range for DRBD").
pub const PORTS: (u16, u16) = (7000, 7999);

/// What marks a host as a storage host: it runs a LINSTOR satellite or DRBD.
pub fn runs_storage(runs: &[String]) -> bool {
    runs.iter().any(|r| r == "linstor-satellite" || r == "drbd")
}

/// What marks an external workload as a storage host.
pub fn is_storage(w: &ExternalWorkload) -> bool {
    runs_storage(&w.runs)
}

/// A site's storage hosts' addresses: its cluster nodes that run storage too (a Proxmox host
/// that is also a GPU node, say), then its external workloads that do.
pub fn hosts(s: &Site) -> Vec<Ipv4Addr> {
    let nodes = s.cluster.nodes.iter().filter(|n| runs_storage(&n.runs)).map(|n| n.address);
    nodes.chain(s.external_workloads.iter().filter(|w| is_storage(w)).map(|w| w.address)).collect()
}

/// True when storage hosts exist at two sites or more: only then does DRBD cross a site.
pub fn crosses_sites(t: &Topology) -> bool {
    t.sites.iter().filter(|s| !hosts(s).is_empty()).count() >= 2
}

/// Cilium's transparent encryption (WireGuard, node-to-node), when DRBD crosses the sites
/// through Cilium.
pub fn cilium_encryption(t: &Topology) -> bool {
    t.decisions.drbd_cross_site == DrbdChoice::Cilium && crosses_sites(t)
}

/// The direct path at one site's router: this site's storage hosts and the other sites'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Direct {
    pub local: Vec<Ipv4Addr>,
    pub remote: Vec<Ipv4Addr>,
}

impl Direct {
    /// DRBD's port range as nft and VyOS write it.
    pub fn ports() -> String {
        format!("{}-{}", PORTS.0, PORTS.1)
    }
}

/// The direct path of `s`'s router, when DRBD crosses the sites directly and `s` has storage
/// hosts.
pub fn direct(t: &Topology, s: &Site) -> Option<Direct> {
    if t.decisions.drbd_cross_site != DrbdChoice::Direct {
        return None;
    }
    let local = hosts(s);
    let remote: Vec<Ipv4Addr> = t.sites.iter().filter(|p| p.name != s.name).flat_map(hosts).collect();
    (!local.is_empty() && !remote.is_empty()).then_some(Direct { local, remote })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(drbd: &str) -> Topology {
        let text = include_str!("../../topology.example.yaml")
            .replace("drbd_cross_site: cilium", &format!("drbd_cross_site: {drbd}"));
        crate::topology::load_str("t.yaml", text).unwrap().topology
    }

    #[test]
    fn the_example_has_storage_at_both_sites() {
        let t = example("cilium");
        assert!(crosses_sites(&t));
        assert!(cilium_encryption(&t));
        assert!(direct(&t, &t.sites[0]).is_none());
    }

    #[test]
    fn direct_names_the_storage_hosts_of_both_sides() {
        let t = example("direct");
        assert!(!cilium_encryption(&t));
        let d = direct(&t, &t.sites[0]).unwrap();
        assert_eq!(d.local, ["192.168.0.41", "192.168.0.42", "192.168.0.43"].map(|a| a.parse::<Ipv4Addr>().unwrap()));
        assert_eq!(d.remote, ["192.168.2.41", "192.168.2.43", "192.168.2.44"].map(|a| a.parse::<Ipv4Addr>().unwrap()));
    }

    #[test]
    fn undecided_changes_nothing_yet() {
        let t = example("undecided");
        assert!(!cilium_encryption(&t));
        assert!(t.sites.iter().all(|s| direct(&t, s).is_none()));
    }
}
