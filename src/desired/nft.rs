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
    let forward = vec![
        format!("iifname \"{}\" ip daddr {} accept", wg.interface, s.lan),
        format!("oifname \"{}\" ip saddr {} accept", wg.interface, s.lan),
    ];
    NftRules { input, forward }
}
