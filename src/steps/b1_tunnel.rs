//! B.1 — the WireGuard tunnel between the sites' routers (seed: "VyOS WireGuard site-to-site").
//!
//! VyOS routers get `set` commands (interface, routes to the other LANs, commit-confirm);
//! Linux routers a wg-quick file and routes. Private keys are generated on the routers and never
//! leave them. The check after apply is the seed's: each LAN reaches the others through the
//! tunnel; a failure reverts the step before it is confirmed.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::future::BoxFuture;

use super::verify::Verdict;
use super::{CheckCx, CheckError, CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::sh;
use crate::transport::shell::Sh;
use crate::catalog::Instance;
use crate::desired::{Desired, Out, ProviderKind, Resource, text, vyos};
use crate::live::pool::Pool;
use crate::topology::model::*;

pub struct B1;

impl Step for B1 {
    fn id(&self) -> &'static str {
        "B.1"
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        for s in &out.t.sites {
            tunnel(out, s);
        }
    }

    fn check<'a>(&'a self, cx: &'a CheckCx<'a>) -> Option<BoxFuture<'a, Result<String, CheckError>>> {
        Some(Box::pin(lan_to_lan(cx)))
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(async move {
            // The same check, over connections of its own, from every site.
            let pool = Pool::default();
            let routers: Vec<Resource> = cx.t.sites.iter().map(router_marker).collect();
            let check = CheckCx { t: cx.t, pool: &pool, targets: cx.targets, resources: &routers };
            let r = lan_to_lan(&check).await;
            pool.close().await;
            let (verdict, evidence) = match r {
                Ok(e) => (Verdict::Pass, e),
                Err(e) => (Verdict::Fail, e.to_string()),
            };
            vec![CheckResult { step: cx.key.into(), check: "LAN to LAN through the tunnel".into(), verdict, evidence }]
        })
    }
}

/// A stand-in resource naming a site's router, so that verify checks from every site.
fn router_marker(s: &Site) -> Resource {
    Resource {
        address: Target::router(&s.name).at("verify"),
        site: Some(s.name.clone()),
        provider: ProviderKind::Command,
        summary: String::new(),
        sensitive: false,
        desired: Desired::Command { probe: Sh::lit("true"), apply: Sh::lit("true") },
        file: None,
    }
}

/// The seed's validation: each site's LAN reaches every other site's LAN through the tunnel.
/// From a host with SSH at the site (a node), ping a node of each other site; a site without
/// such a host is checked from its router. Every site checks at the same time (each from its own
/// host). A fresh tunnel shakes hands in one round trip once its ends came up one after the other
/// (`apply::tunnel_ends`); a lost handshake is retried by WireGuard every 5 s, so each pair may
/// take up to 20 s.
async fn lan_to_lan(cx: &CheckCx<'_>) -> Result<String, CheckError> {
    let touched: BTreeSet<&Target> = cx.resources.iter().map(|r| r.target()).collect();
    let sites = cx.t.sites.iter().filter(|s| touched.contains(&Target::router(&s.name)));
    // All finish before the first failure in site order is reported: the same one however the
    // sites' checks race.
    let mut evidence = Vec::new();
    for found in futures::future::join_all(sites.map(|s| from_site(cx, s))).await {
        evidence.extend(found?);
    }
    Ok(evidence.join(", "))
}

/// [`lan_to_lan`] from one site: what it found, pair by pair.
async fn from_site(cx: &CheckCx<'_>, s: &Site) -> Result<Vec<String>, CheckError> {
    let (from, vyos) = match s.cluster.nodes.iter().find(|n| n.ssh.is_some()) {
        Some(n) => (Target::host(&n.name), false),
        None => (Target::router(&s.name), s.router.kind == RouterKind::Vyos),
    };
    if vyos {
        return Ok(vec![format!("{from}: no LAN host with SSH to check from")]);
    }
    let session = cx.pool.get(cx.targets, &from).await?;
    let mut evidence = Vec::new();
    for p in cx.t.sites.iter().filter(|p| p.name != s.name) {
        let addr = match (matches!(from, Target::Host(_)), p.cluster.nodes.first()) {
            (true, Some(n)) => n.address,
            _ => p.router.wireguard.address.addr,
        };
        let o = session.run(&first_reply(addr), None, Duration::from_secs(40)).await?;
        if o.status != 0 {
            return Err(CheckError::NoPath { from: from.to_string(), site: p.name.clone(), addr: addr.to_string() });
        }
        // The MTU: a packet of the tunnel's full size, which must not be fragmented.
        let mtu = s.router.wireguard.tunnel_mtu().min(p.router.wireguard.tunnel_mtu());
        let o = session.run(&full_size_ping(addr, mtu), None, Duration::from_secs(20)).await?;
        if o.status != 0 {
            return Err(CheckError::Mtu { from: from.to_string(), site: p.name.clone(), addr: addr.to_string(), mtu });
        }
        evidence.push(format!("{from} → {addr} ok ({mtu}-byte packets, don't fragment)"));
    }
    Ok(evidence)
}

/// Pings `addr` every 200 ms until the first reply, for up to 20 s: a request lost while the
/// tunnel's first handshake runs costs 200 ms, not a 2 s wait. iputils PING(8): with `-w
/// deadline`, `-c count` waits for count ECHO_REPLY packets until the deadline; 200 ms is the
/// shortest `-i` interval allowed to a user who is not root.
pub fn first_reply(addr: std::net::Ipv4Addr) -> Sh {
    sh!("ping -c 1 -i 0.2 -w 20 {} >/dev/null 2>&1", addr)
}

/// A ping of `mtu` bytes (IPv4 header 20 + ICMP header 8 + payload) with don't-fragment set,
/// three tries: it passes only if the tunnel carries a full-size packet whole.
pub fn full_size_ping(addr: std::net::Ipv4Addr, mtu: u16) -> Sh {
    let payload = mtu.saturating_sub(28);
    sh!("for i in 1 2 3; do ping -c 1 -W 2 -M do -s {} {} >/dev/null 2>&1 && exit 0; done; exit 1", payload, addr)
}

/// B.1 at one router.
fn tunnel(o: &mut Out<'_>, s: &Site) {
    match s.router.kind {
        RouterKind::Vyos => vyos_tunnel(o, s),
        RouterKind::Linux => linux_tunnel(o, s),
    }
}

/// A VyOS router: its subtrees, applied in one commit-confirm.
fn vyos_tunnel(o: &mut Out<'_>, s: &Site) {
    let t = o.t;
    let target = Target::router(&s.name);
    let wg = &s.router.wireguard;
    let all = vyos::commands(t, s);
    let file = Some(format!("config/vyos/wireguard/{}.conf", s.name));
    let iface = format!("interfaces wireguard {}", wg.interface);
    // `set <subtree> …` lines only: `rule 5` must not take `rule 50`'s.
    let pick = |prefix: &str| -> Vec<String> {
        all.iter().filter(|c| c.starts_with(&format!("set {prefix} "))).cloned().collect()
    };
    o.push(Resource {
        address: target.at(format!("vyos:{iface}")),
        site: Some(s.name.clone()),
        provider: ProviderKind::Vyos,
        summary: format!(
            "{} {} port {} mtu {}, private key generated on the router",
            wg.interface,
            wg.address,
            wg.listen_port.0,
            wg.tunnel_mtu()
        ),
        sensitive: false,
        desired: Desired::Vyos(pick(&iface)),
        file: file.clone(),
    });
    for (prefix, what) in crate::desired::routes(t, s) {
        let route = format!("protocols static route {prefix}");
        o.push(Resource {
            address: target.at(format!("vyos:{route}")),
            site: Some(s.name.clone()),
            provider: ProviderKind::Vyos,
            summary: format!("{what} via {}", wg.interface),
            sensitive: false,
            desired: Desired::Vyos(pick(&route)),
            file: file.clone(),
        });
    }
    for rule in vyos::underlay::rules(t, s) {
        o.push(Resource {
            address: target.at(format!("vyos:{}", rule.subtree)),
            site: Some(s.name.clone()),
            provider: ProviderKind::Vyos,
            summary: rule.summary,
            sensitive: false,
            desired: Desired::Vyos(rule.lines),
            file: file.clone(),
        });
    }
    // The whole file, comments included, is what render writes.
    o.extra(format!("config/vyos/wireguard/{}.conf", s.name), vyos::conf_file(t, s));
}

/// A Linux router: a wg-quick file, forwarding, the firewall and the routes.
fn linux_tunnel(o: &mut Out<'_>, s: &Site) {
    let t = o.t;
    let target = Target::router(&s.name);
    let wg = &s.router.wireguard;
    o.push(Resource {
        address: target.at(format!("wireguard:{}", wg.interface)),
        site: Some(s.name.clone()),
        provider: ProviderKind::Wireguard,
        summary: format!(
            "{} {} port {}, key generated on the host",
            wg.interface, wg.address, wg.listen_port.0
        ),
        sensitive: false,
        desired: Desired::Wireguard(text::wireguard_conf(t, s)),
        file: Some(format!("config/wireguard/{}.conf", s.name)),
    });
    // Forwarding between the tunnel and the LAN; its state before is journaled, so a
    // rollback turns it off again where fabric turned it on (wg-quick's PostUp sets it
    // too, for reboots).
    o.command(
        target.clone(),
        &s.name,
        "ip-forward",
        Sh::lit("[ \"$(sysctl -n net.ipv4.ip_forward)\" = 1 ]"),
        Sh::lit("sysctl -q -w net.ipv4.ip_forward=1"),
        "IPv4 forwarding on (turned off again on rollback if it was off)",
    );
    // The firewall lets the tunnel through (see `desired::nft`); its rules are removed
    // again on rollback (`providers::undo_of`).
    let rules = crate::desired::nft::rules(t, s);
    o.command(
        target.clone(),
        &s.name,
        "nftables",
        crate::providers::nft::probe(&rules),
        crate::providers::nft::apply(&rules),
        &format!(
            "nftables: WireGuard (UDP {}) in, {} ↔ {} forwarded, in every input/forward chain (rules tagged `{}`)",
            wg.listen_port.0,
            s.lan,
            wg.interface,
            rules.tag()
        ),
    );
    for (prefix, what) in crate::desired::routes(t, s) {
        o.command(
            target.clone(),
            &s.name,
            &format!("route {prefix}"),
            // `ip route show` succeeds with no output when there is no such route.
            sh!("[ -n \"$(ip route show {} dev {})\" ]", prefix.clone(), wg.interface.clone()),
            sh!("ip route replace {} dev {}", prefix.clone(), wg.interface.clone()),
            &format!("{what} via {}", wg.interface),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_ping_retries_every_200_ms_until_a_reply() {
        assert_eq!(first_reply("172.30.2.10".parse().unwrap()), "ping -c 1 -i 0.2 -w 20 172.30.2.10 >/dev/null 2>&1");
    }

    #[test]
    fn the_full_size_ping_does_not_fragment() {
        let cmd = full_size_ping("172.30.2.10".parse().unwrap(), 1420);
        assert_eq!(
            cmd,
            "for i in 1 2 3; do ping -c 1 -W 2 -M do -s 1392 172.30.2.10 >/dev/null 2>&1 && exit 0; done; exit 1"
        );
    }

    #[test]
    fn a_linux_router_gets_its_mtu_and_its_firewall_rules() {
        let t = crate::topology::load_str("t.yaml", include_str!("../../tests/data/lab-linux.yaml").to_string())
            .unwrap()
            .topology;
        let conf = text::wireguard_conf(&t, &t.sites[0]);
        assert!(conf.contains("\nMTU = 1420\n"), "{conf}");
        let r = crate::desired::nft::rules(&t, &t.sites[0]);
        assert_eq!(
            r.input,
            ["iifname \"wg0\" ip protocol icmp accept", "ip saddr 198.18.2.2 udp dport 51820 accept"]
        );
        assert_eq!(
            r.forward,
            ["iifname \"wg0\" ip daddr 172.30.1.0/24 accept", "oifname \"wg0\" ip saddr 172.30.1.0/24 accept"]
        );
    }
}
