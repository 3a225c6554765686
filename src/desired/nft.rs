//! The tunnel's underlay on a Linux router: the nftables rules B.1 needs, as rule texts.
//!
//! nftables runs every base chain hooked at input (or forward), and a drop in any one of them is
//! final: an accept in a table of fabric's own cannot open an operator's chain that drops by
//! default. So fabric inserts its rules at the top of every filter chain hooked at input or
//! forward (tables of family `ip` and `inet`), each rule tagged with a comment that names it as
//! fabric's, and never touches a rule without that comment. Without such a chain nothing filters,
//! and there is nothing to insert. `providers::nft` holds the commands; this module the rules.

use sha2::{Digest, Sha256};

use crate::topology::Topology;
use crate::topology::model::Site;

/// Start of the comment on every rule fabric inserts: what the probe and the undo look for.
pub const TAG_PREFIX: &str = "fabric-b1 ";

/// The rules of one router, by hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NftRules {
    /// For chains hooked at input.
    pub input: Vec<String>,
    /// For chains hooked at forward.
    pub forward: Vec<String>,
}

impl NftRules {
    /// The comment of these rules: [`TAG_PREFIX`] and a digest of the rules, so that a rule set
    /// of an older topology reads as drift and is replaced whole.
    pub fn tag(&self) -> String {
        let mut h = Sha256::new();
        for r in self.input.iter().chain([String::from("--")].iter()).chain(&self.forward) {
            h.update(r.as_bytes());
            h.update(b"\n");
        }
        let d = h.finalize();
        format!("{TAG_PREFIX}{}", d.iter().take(4).map(|b| format!("{b:02x}")).collect::<String>())
    }
}

/// The rules of a site's router: the same as on VyOS (see `desired::vyos::underlay`).
/// Interface names are validated by the topology (letters, digits, `-`, `_`), so they sit inside
/// nft's double quotes as they are.
pub fn rules(t: &Topology, s: &Site) -> NftRules {
    let wg = &s.router.wireguard;
    let port = wg.listen_port.0;
    let peers: Vec<Option<std::net::Ipv4Addr>> =
        t.sites.iter().filter(|p| p.name != s.name).map(|p| super::vyos::endpoint(t, p)).collect();
    let mut input = vec![format!("iifname \"{}\" ip protocol icmp accept", wg.interface)];
    if peers.iter().any(Option::is_none) {
        input.push(format!("udp dport {port} accept"));
    } else {
        input.extend(peers.iter().flatten().map(|a| format!("ip saddr {a} udp dport {port} accept")));
    }
    let mut forward = vec![
        format!("iifname \"{}\" ip daddr {} accept", wg.interface, s.lan),
        format!("oifname \"{}\" ip saddr {} accept", wg.interface, s.lan),
    ];
    forward.extend(drbd_rules(t, s));
    NftRules { input, forward }
}

/// DRBD between the storage hosts, when it crosses the sites directly (`desired::drbd`): TCP on
/// DRBD's ports, both ways through the tunnel, connections and their replies (the rules keep
/// no state of their own).
fn drbd_rules(t: &Topology, s: &Site) -> Vec<String> {
    let Some(d) = super::drbd::direct(t, s) else { return vec![] };
    let set =
        |a: &[std::net::Ipv4Addr]| format!("{{ {} }}", a.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", "));
    let (local, remote, ports, wg) =
        (set(&d.local), set(&d.remote), super::drbd::Direct::ports(), &s.router.wireguard.interface);
    let mut out = Vec::new();
    for port in ["dport", "sport"] {
        out.push(format!("iifname \"{wg}\" ip saddr {remote} ip daddr {local} tcp {port} {ports} accept"));
        out.push(format!("oifname \"{wg}\" ip saddr {local} ip daddr {remote} tcp {port} {ports} accept"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab's Linux topology with a storage host at each site (`172.30.<i>.20`), DRBD direct.
    pub(crate) fn lab_with_storage() -> Topology {
        let mut text = include_str!("../../tests/data/lab-linux.yaml")
            .replace("drbd_cross_site: cilium", "drbd_cross_site: direct");
        for (i, site) in ["franca", "sp"].iter().enumerate() {
            let node = format!("ssh: {{ host: {site}-lan }} }}\n");
            let store = format!(
                "{node}    external_workloads:\n      - {{ name: {site}-store, kind: bare-metal, address: 172.30.{}.20, runs: [linstor-satellite], ssh: {{ host: {site}-lan }} }}\n",
                i + 1
            );
            text = text.replacen(&node, &store, 1);
        }
        crate::topology::load_str("t.yaml", text).unwrap().topology
    }

    #[test]
    fn the_direct_storage_path_is_let_through_by_port_both_ways() {
        let t = lab_with_storage();
        let r = rules(&t, &t.sites[0]);
        assert_eq!(
            &r.forward[2..],
            [
                "iifname \"wg0\" ip saddr { 172.30.2.20 } ip daddr { 172.30.1.20 } tcp dport 7000-7999 accept",
                "oifname \"wg0\" ip saddr { 172.30.1.20 } ip daddr { 172.30.2.20 } tcp dport 7000-7999 accept",
                "iifname \"wg0\" ip saddr { 172.30.2.20 } ip daddr { 172.30.1.20 } tcp sport 7000-7999 accept",
                "oifname \"wg0\" ip saddr { 172.30.1.20 } ip daddr { 172.30.2.20 } tcp sport 7000-7999 accept",
            ]
        );
        // Through Cilium, or without storage hosts at both sites: only the tunnel's own rules.
        let lab = crate::topology::load_str("t.yaml", include_str!("../../tests/data/lab-linux.yaml").to_string())
            .unwrap()
            .topology;
        assert_eq!(rules(&lab, &lab.sites[0]).forward.len(), 2);
        assert_ne!(r.tag(), rules(&lab, &lab.sites[0]).tag(), "a changed rule set reads as drift");
        let routes = crate::desired::routes(&t, &t.sites[0]);
        assert_eq!(routes[1].0, "172.30.2.20/32");
    }
}
