//! VyOS 1.4+ configuration of a site's WireGuard link, as `set` commands: the interface, the
//! routes, and its underlay (firewall rules that let the tunnel through, no source NAT on it).
//!
//! Pure builders: the exact commands are tested offline and every one is checked against VyOS's
//! interface definitions (firewall and nat included). The private key is never part of them: the
//! router generates its own (`generate pki wireguard key-pair install interface wg0`) and fabric
//! reads back only the public key; plan and apply put the live key in place of the placeholder,
//! render the key the topology records (or a commented-out line saying how to get it).

pub mod underlay;

use crate::topology::Topology;
use crate::topology::model::{PublicAddressChoice, Site};

/// Placeholder for a peer's public key until plan reads it from the peer router.
pub fn public_key_placeholder(site: &str) -> String {
    format!("<public-key:router.{site}>")
}

/// Quotes a value as `show configuration commands` prints it, and as `vbash` (bash) reads it
/// back as one word: single quotes, a quote inside as `'\''`. A character no configuration
/// value holds (a control character: the topology refuses them) becomes U+FFFD, so no value
/// can end a line of the script and start another command.
pub fn quote(v: impl std::fmt::Display) -> String {
    let v: String = v.to_string().chars().map(|c| if c.is_control() { '\u{fffd}' } else { c }).collect();
    format!("'{}'", v.replace('\'', r"'\''"))
}

/// A tag node's name (a peer's site): bare when it is a plain word, as VyOS prints it, else
/// quoted.
pub fn word(v: &str) -> String {
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        v.to_string()
    } else {
        quote(v)
    }
}

fn q(v: impl std::fmt::Display) -> String {
    quote(v)
}

/// The site's public address, when other sites may dial it.
pub fn endpoint(t: &Topology, s: &Site) -> Option<std::net::Ipv4Addr> {
    let fixed = t.decisions.public_address.get(&s.name) == Some(&PublicAddressChoice::Fixed);
    s.router.public_address.filter(|_| fixed)
}

/// Persistent keepalive of a router's peers: 25 s unless the topology says otherwise (0: none).
/// A site behind a dynamic address needs it to be reachable at all; on a fixed address it makes
/// a peer that roamed to another port (or restarted) find its way back within one interval
/// instead of waiting for traffic from the other side.
pub fn keepalive(_t: &Topology, s: &Site) -> Option<u16> {
    match s.router.wireguard.keepalive {
        Some(0) => None,
        Some(k) => Some(k),
        None => Some(25),
    }
}

/// The managed subtrees, in a stable order: the interface with its peers, then the routes.
pub fn commands(t: &Topology, s: &Site) -> Vec<String> {
    let wg = &s.router.wireguard;
    let base = format!("set interfaces wireguard {}", word(&wg.interface));
    let mut out = vec![
        format!("{base} address {}", q(wg.address)),
        format!("{base} description {}", q(format!("fabric {}: site-to-site", t.name))),
        format!("{base} port {}", q(wg.listen_port.0)),
    ];
    for p in t.sites.iter().filter(|p| p.name != s.name) {
        let peer = format!("{base} peer {}", word(&p.name));
        out.push(format!("{peer} allowed-ips {}", q(format!("{}/32", p.router.wireguard.address.addr))));
        out.push(format!("{peer} allowed-ips {}", q(p.lan)));
        if let Some(addr) = endpoint(t, p) {
            out.push(format!("{peer} address {}", q(addr)));
            out.push(format!("{peer} port {}", q(p.router.wireguard.listen_port.0)));
        }
        if let Some(k) = keepalive(t, s) {
            out.push(format!("{peer} persistent-keepalive {}", q(k)));
        }
        out.push(format!("{peer} public-key {}", q(public_key_placeholder(&p.name))));
    }
    out.push(format!("{base} mtu {}", q(wg.tunnel_mtu())));
    for (prefix, _) in crate::desired::routes(t, s) {
        out.push(format!("set protocols static route {prefix} interface {}", word(&wg.interface)));
    }
    out.extend(underlay::commands(t, s));
    // No `system config-management commit-confirm action reload`: VyOS 1.4 (sagitta) has no
    // such node (vyos-1x `interface-definitions/system_config-management.xml.in` on sagitta
    // defines only commit-archive and commit-revisions; `action` came with T5976, PR #4128, on
    // `current`), so the line would be `is not valid` there, which fails the step
    // (`providers::vyos_error`). An unconfirmed commit-confirm then reverts as 1.4 always does:
    // a reboot to the saved configuration (`config_mgmt.py` `commit_confirm`), which is the one
    // before the step, since fabric saves only after `confirm` (`apply::confirm`).
    out
}

/// The rendered file `config/vyos/wireguard/<site>.conf`: the commands, with each peer's public
/// key from the topology. A key the topology does not have yet leaves its command commented out
/// (VyOS refuses the placeholder), with how to fill it in.
pub fn conf_file(t: &Topology, s: &Site) -> String {
    let iface = &s.router.wireguard.interface;
    let mut out = format!(
        "# Rendered by fabric from topology `{}`; do not edit: change the topology and run `fabric render`.\n\
         # VyOS 1.4+ for site `{}`: WireGuard {iface}, routes to the other sites, and the firewall and\n\
         # NAT rules the tunnel needs (step B.1).\n\
         # The private key is generated on the router and never leaves it:\n\
         #   generate pki wireguard key-pair install interface {iface}\n",
        t.name, s.name
    );
    for c in commands(t, s) {
        match t.sites.iter().find(|p| c.contains(&q(public_key_placeholder(&p.name)))) {
            Some(p) => match &p.router.wireguard.public_key {
                Some(k) => out.push_str(&c.replace(&q(public_key_placeholder(&p.name)), &q(k))),
                None => {
                    out.push_str(&format!(
                        "# The public key of `{}` is not in the topology yet: run `fabric apply --step B.1`, which\n\
                         # prints it, put it under sites[].router.wireguard.public_key of `{}`, and render again.\n# ",
                        p.name, p.name
                    ));
                    out.push_str(&c);
                }
            },
            None => out.push_str(&c),
        }
        out.push('\n');
    }
    out
}
