//! The ends of a WireGuard tunnel are brought up one after the other, not at the same instant.
//!
//! Each end starts with `PersistentKeepalive`, so each sends a handshake initiation as soon as it
//! is up. When both come up together (B.1 applied to every router at once), the two initiations
//! cross on the WAN and neither handshake completes: each end consumes the other's initiation,
//! which replaces its own handshake state and index, so the response to its own initiation is
//! then dropped (wireguard-go `device/noise-protocol.go`, `ConsumeMessageResponse`: "if
//! handshake.state != handshakeInitiationCreated { return false }", after `CreateMessageResponse`
//! gave the handshake a new index; the kernel's `drivers/net/wireguard/noise.c`,
//! `wg_noise_handshake_consume_response`, checks `HANDSHAKE_CREATED_INITIATION` the same way).
//! Both ends then wait for their retransmit timer, 5 s plus up to a third of a second of jitter
//! (`device/timers.go`, `RekeyTimeout`, `RekeyTimeoutJitterMaxMs`), and cross again whenever
//! the two jitters fall within the WAN's delay of each other. On the lab (25 ms each way) B.1's
//! check waited 4.2 s for every fresh tunnel and 15–20 s in about one run of five, a few times
//! past its 20 s and reverted a good tunnel.
//!
//! Brought up one after the other, the first end's initiation goes to a peer that is not there
//! yet; the second end's, sent once it is up, is answered at once: the tunnel is up in one round
//! trip. So the first router whose WireGuard interface changes gets a round of its own (all its
//! changes, in order), before the other routers' changes.

use crate::desired::Target;
use crate::providers::PendingChange;

/// `rounds` with, in each round where the WireGuard interfaces of two or more targets change,
/// the first such target (in the round's order) moved to a round of its own just before it.
pub fn one_end_first(rounds: Vec<Vec<PendingChange>>) -> Vec<Vec<PendingChange>> {
    let mut out = Vec::new();
    for round in rounds {
        let mut ends: Vec<&Target> = Vec::new();
        // A change of a WireGuard interface (a Linux router's wg-quick file, a VyOS router's
        // `interfaces wireguard` subtree) brings it up or restarts it.
        for c in round.iter().filter(|c| c.resource.is_wireguard_interface()) {
            if !ends.contains(&c.resource.target()) {
                ends.push(c.resource.target());
            }
        }
        if ends.len() < 2 {
            out.push(round);
            continue;
        }
        let first = ends[0].clone();
        let (mine, others): (Vec<_>, Vec<_>) = round.into_iter().partition(|c| c.resource.target() == &first);
        out.push(mine);
        out.push(others);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::{Desired, ProviderKind, Resource};
    use crate::providers::Observed;
    use crate::transport::shell::Sh;

    fn change(address: &str, desired: Desired) -> PendingChange {
        let resource = Resource {
            address: address.into(),
            site: None,
            provider: match &desired {
                Desired::Wireguard(_) => ProviderKind::Wireguard,
                Desired::Vyos(_) => ProviderKind::Vyos,
                _ => ProviderKind::Command,
            },
            summary: String::new(),
            sensitive: false,
            desired,
            file: None,
        };
        PendingChange { resource, prior: Observed::Absent, text: String::new() }
    }

    fn names(rounds: &[Vec<PendingChange>]) -> Vec<Vec<String>> {
        rounds.iter().map(|r| r.iter().map(|c| c.resource.address.to_string()).collect()).collect()
    }

    #[test]
    fn the_first_router_comes_up_alone_then_the_others_together() {
        let wg = || Desired::Wireguard("[Interface]".into());
        let route = || Desired::Command { probe: Sh::lit("true"), apply: Sh::lit("true") };
        let vyos = || Desired::Vyos(vec!["set interfaces wireguard wg0 port '51820'".into()]);
        let round = vec![
            change("router.franca/wireguard:wg0", wg()),
            change("router.franca/command:route 172.30.2.0/24", route()),
            change("router.rio/vyos:interfaces wireguard wg0", vyos()),
            change("router.sp/wireguard:wg0", wg()),
            change("router.sp/command:route 172.30.1.0/24", route()),
        ];
        assert_eq!(
            names(&one_end_first(vec![round])),
            vec![
                vec!["router.franca/wireguard:wg0", "router.franca/command:route 172.30.2.0/24"],
                vec![
                    "router.rio/vyos:interfaces wireguard wg0",
                    "router.sp/wireguard:wg0",
                    "router.sp/command:route 172.30.1.0/24"
                ],
            ]
        );
    }

    /// One end changing (the other already up, or a route only) keeps its round: nothing to
    /// cross. A VyOS subtree that is not a WireGuard interface is no tunnel end.
    #[test]
    fn one_end_or_none_keeps_the_round() {
        let fw = || Desired::Vyos(vec!["set firewall ipv4 name WAN rule 5 action 'accept'".into()]);
        let rounds = vec![
            vec![change("router.franca/wireguard:wg0", Desired::Wireguard(String::new()))],
            vec![change("router.franca/vyos:firewall", fw()), change("router.sp/vyos:firewall", fw())],
        ];
        let before = names(&rounds);
        assert_eq!(names(&one_end_first(rounds)), before);
    }
}
