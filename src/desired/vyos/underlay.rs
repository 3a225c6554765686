//! The tunnel's underlay on a VyOS router: what its firewall and source NAT must let through.
//!
//! A hardened VyOS drops by default (`firewall ipv4 input filter default-action drop`, the same
//! for `forward`), and a source NAT rule without an outbound interface would rewrite LAN-to-LAN
//! packets. So B.1 owns a few rules, at fixed numbers, in each rule set:
//! - `firewall ipv4 input filter`: rule 50 accepts ICMP arriving through the tunnel (B.1's check
//!   pings a router's tunnel address where a site has no LAN host); rules 51… accept WireGuard's
//!   UDP port from each peer's public address, or from anywhere when a peer's is dynamic;
//! - `firewall ipv4 forward filter`: rule 50 accepts the tunnel into this LAN, rule 51 this LAN
//!   into the tunnel. WireGuard already drops a packet whose source is not in its peer's
//!   `allowed-ips`, so the interface alone names the peers' LANs;
//! - `nat source`: rule 50 excludes everything leaving through the tunnel from source NAT (an
//!   exclude rule is `return` in VyOS's nftables: the operator's masquerade rules after it never
//!   see the packet). It is always there: harmless without source NAT, and fabric cannot know
//!   whether an operator adds a masquerade rule later.
//!
//! With `decisions.drbd_cross_site: direct` (`desired::drbd`), the storage path between the
//! sites' storage hosts has rules of its own, 52–55, over two address groups
//! (`fabric-drbd-local`, `fabric-drbd-remote`): DRBD's TCP ports, each way, connections and their
//! replies (a forward filter keeps no state unless a rule asks for it). Rules 50/51 already let
//! the LANs through; these keep the storage path open by port when the operator narrows those
//! (see `docs/runbook.md`), and make it visible in the plan.
//!
//! VyOS evaluates rules by number, so 50 comes before the usual catch-all rules (100 and up);
//! `docs/runbook.md` lists the numbers, which the operator must leave to fabric.

use super::{quote as q, word};
use crate::topology::Topology;
use crate::topology::model::Site;

/// The first rule number fabric owns in each rule set.
pub const FIRST_RULE: u32 = 50;

/// One rule: its subtree (the resource fabric manages) and its `set` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub subtree: String,
    pub summary: String,
    pub lines: Vec<String>,
}

impl Rule {
    fn new(subtree: String, summary: String, fields: &[(&str, Option<String>)]) -> Rule {
        let lines = fields
            .iter()
            .map(|(k, v)| match v {
                Some(v) => format!("set {subtree} {k} {v}"),
                None => format!("set {subtree} {k}"),
            })
            .collect();
        Rule { subtree, summary, lines }
    }
}

/// Every rule of a site's router, in a stable order.
pub fn rules(t: &Topology, s: &Site) -> Vec<Rule> {
    let wg = &s.router.wireguard;
    let iface = || Some(q(&wg.interface));
    let accept = || Some(q("accept"));
    let desc = |what: &str| Some(q(format!("fabric {}: {what}", t.name)));
    let input = |n: u32| format!("firewall ipv4 input filter rule {}", word(&n.to_string()));
    let forward = |n: u32| format!("firewall ipv4 forward filter rule {}", word(&n.to_string()));
    let mut out = vec![Rule::new(
        input(FIRST_RULE),
        format!("accept ICMP through {}", wg.interface),
        &[
            ("action", accept()),
            ("description", desc("ICMP through the tunnel")),
            ("inbound-interface name", iface()),
            ("protocol", Some(q("icmp"))),
        ],
    )];
    for (i, from) in peer_sources(t, s).into_iter().enumerate() {
        let mut fields = vec![
            ("action", accept()),
            ("description", desc("WireGuard")),
            ("destination port", Some(q(wg.listen_port.0))),
            ("protocol", Some(q("udp"))),
        ];
        let summary = match from {
            Some(a) => {
                fields.push(("source address", Some(q(a))));
                format!("accept WireGuard (UDP {}) from {a}", wg.listen_port.0)
            }
            None => format!("accept WireGuard (UDP {}) from any address (a peer's is dynamic)", wg.listen_port.0),
        };
        out.push(Rule::new(input(FIRST_RULE + 1 + i as u32), summary, &fields));
    }
    out.push(Rule::new(
        forward(FIRST_RULE),
        format!("forward {} into {}", wg.interface, s.lan),
        &[
            ("action", accept()),
            ("description", desc("the other sites into this LAN")),
            ("destination address", Some(q(s.lan))),
            ("inbound-interface name", iface()),
        ],
    ));
    out.push(Rule::new(
        forward(FIRST_RULE + 1),
        format!("forward {} into {}", s.lan, wg.interface),
        &[
            ("action", accept()),
            ("description", desc("this LAN to the other sites")),
            ("outbound-interface name", iface()),
            ("source address", Some(q(s.lan))),
        ],
    ));
    out.extend(drbd_rules(t, s));
    out.push(Rule::new(
        format!("nat source rule {FIRST_RULE}"),
        format!("no source NAT through {}", wg.interface),
        &[
            ("description", desc("no source NAT between the sites")),
            ("exclude", None),
            ("outbound-interface name", iface()),
        ],
    ));
    out
}

/// The address groups of the storage hosts.
pub const DRBD_LOCAL: &str = "fabric-drbd-local";
pub const DRBD_REMOTE: &str = "fabric-drbd-remote";

/// The direct storage path (`decisions.drbd_cross_site: direct`): the two address groups, then
/// forward rules 52–55 for DRBD's ports, each way, connections and replies.
fn drbd_rules(t: &Topology, s: &Site) -> Vec<Rule> {
    let Some(d) = crate::desired::drbd::direct(t, s) else { return vec![] };
    let wg = &s.router.wireguard;
    let group = |name: &str, members: &[std::net::Ipv4Addr], what: &str| {
        let subtree = format!("firewall group address-group {}", word(name));
        let mut lines = vec![format!("set {subtree} description {}", q(format!("fabric {}: {what}", t.name)))];
        lines.extend(members.iter().map(|a| format!("set {subtree} address {}", q(a))));
        Rule { subtree, summary: format!("{what}: {}", list(members)), lines }
    };
    let mut out = vec![
        group(DRBD_LOCAL, &d.local, "storage hosts of this site"),
        group(DRBD_REMOTE, &d.remote, "storage hosts of the other sites"),
    ];
    let ports = crate::desired::drbd::Direct::ports();
    let legs = [
        ("inbound-interface name", DRBD_REMOTE, DRBD_LOCAL, "destination port", "DRBD from the other sites"),
        ("inbound-interface name", DRBD_REMOTE, DRBD_LOCAL, "source port", "DRBD replies from the other sites"),
        ("outbound-interface name", DRBD_LOCAL, DRBD_REMOTE, "destination port", "DRBD to the other sites"),
        ("outbound-interface name", DRBD_LOCAL, DRBD_REMOTE, "source port", "DRBD replies to the other sites"),
    ];
    for (i, (dir, from, to, port, what)) in legs.into_iter().enumerate() {
        let n = FIRST_RULE + 2 + i as u32;
        out.push(Rule::new(
            format!("firewall ipv4 forward filter rule {}", word(&n.to_string())),
            format!("accept {what} (TCP {ports} {port}, {})", wg.interface),
            &[
                ("action", Some(q("accept"))),
                ("description", Some(q(format!("fabric {}: {what}", t.name)))),
                ("destination group address-group", Some(q(to))),
                (dir, Some(q(&wg.interface))),
                (port, Some(q(&ports))),
                ("protocol", Some(q("tcp"))),
                ("source group address-group", Some(q(from))),
            ],
        ));
    }
    out
}

fn list(a: &[std::net::Ipv4Addr]) -> String {
    a.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")
}

/// Where WireGuard may come from: each peer's public address, or one `None` (anywhere) when some
/// peer's address is dynamic (it dials from wherever it is).
fn peer_sources(t: &Topology, s: &Site) -> Vec<Option<std::net::Ipv4Addr>> {
    let peers: Vec<Option<std::net::Ipv4Addr>> =
        t.sites.iter().filter(|p| p.name != s.name).map(|p| super::endpoint(t, p)).collect();
    if peers.iter().any(Option::is_none) { vec![None] } else { peers }
}

/// The `set` lines of every rule.
pub fn commands(t: &Topology, s: &Site) -> Vec<String> {
    rules(t, s).into_iter().flat_map(|r| r.lines).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Topology {
        crate::topology::load_str("t.yaml", include_str!("../../../topology.example.yaml").to_string())
            .unwrap()
            .topology
    }

    #[test]
    fn a_dynamic_peer_is_let_in_from_anywhere_a_fixed_one_from_its_address() {
        let t = example();
        // sp (dynamic) dials franca: franca accepts WireGuard from anywhere.
        let franca = rules(&t, &t.sites[0]);
        assert_eq!(franca[1].subtree, "firewall ipv4 input filter rule 51");
        assert!(!franca[1].lines.iter().any(|l| l.contains("source address")), "{:?}", franca[1].lines);
        // franca is fixed: sp accepts it from franca's address only.
        let sp = rules(&t, &t.sites[1]);
        assert!(sp[1].lines.contains(&"set firewall ipv4 input filter rule 51 source address '200.145.122.96'".into()));
        let subtrees: Vec<&str> = sp.iter().map(|r| r.subtree.as_str()).collect();
        assert_eq!(
            subtrees,
            [
                "firewall ipv4 input filter rule 50",
                "firewall ipv4 input filter rule 51",
                "firewall ipv4 forward filter rule 50",
                "firewall ipv4 forward filter rule 51",
                "nat source rule 50",
            ]
        );
        assert!(sp[4].lines.contains(&"set nat source rule 50 exclude".into()));
    }

    #[test]
    fn the_direct_storage_path_has_its_groups_rules_and_host_routes() {
        let text = include_str!("../../../topology.example.yaml")
            .replace("drbd_cross_site: cilium", "drbd_cross_site: direct");
        let t = crate::topology::load_str("t.yaml", text).unwrap().topology;
        let franca = rules(&t, &t.sites[0]);
        let subtrees: Vec<&str> = franca.iter().map(|r| r.subtree.as_str()).collect();
        for want in [
            "firewall group address-group fabric-drbd-local",
            "firewall group address-group fabric-drbd-remote",
            "firewall ipv4 forward filter rule 52",
            "firewall ipv4 forward filter rule 55",
        ] {
            assert!(subtrees.contains(&want), "{want} missing from {subtrees:?}");
        }
        let remote = franca.iter().find(|r| r.subtree.ends_with("fabric-drbd-remote")).unwrap();
        assert!(
            remote.lines.contains(&"set firewall group address-group fabric-drbd-remote address '192.168.2.41'".into())
        );
        let r52 = franca.iter().find(|r| r.subtree.ends_with("rule 52")).unwrap();
        for want in [
            "set firewall ipv4 forward filter rule 52 destination port '7000-7999'",
            "set firewall ipv4 forward filter rule 52 inbound-interface name 'wg0'",
            "set firewall ipv4 forward filter rule 52 source group address-group 'fabric-drbd-remote'",
            "set firewall ipv4 forward filter rule 52 destination group address-group 'fabric-drbd-local'",
        ] {
            assert!(r52.lines.contains(&want.to_string()), "{want} missing from {:?}", r52.lines);
        }
        let all = super::super::commands(&t, &t.sites[0]);
        assert!(all.contains(&"set protocols static route 192.168.2.43/32 interface wg0".into()), "{all:?}");
        // With the storage path through Cilium, none of it.
        let t = example();
        assert!(
            !super::super::commands(&t, &t.sites[0]).iter().any(|c| c.contains("drbd") || c.contains("/32 interface"))
        );
    }

    #[test]
    fn the_tunnel_mtu_is_set_on_the_interface() {
        let t = example();
        let all = super::super::commands(&t, &t.sites[1]);
        assert!(all.contains(&"set interfaces wireguard wg0 mtu '1420'".into()), "{all:?}");
    }
}
