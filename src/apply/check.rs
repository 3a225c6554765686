//! A step's checks against live state once it is applied, before it is confirmed: a step whose
//! check fails is reverted like one whose change failed. `fabric verify` runs the same checks on
//! their own.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::apply::{Pool, StepWork};
use crate::live::observe::Targets;
use crate::topology::Topology;

/// The step's check on its own (for `fabric verify`), with connections of its own.
pub async fn check_step(step: &StepWork, t: &Topology, targets: &Targets) -> Result<Option<String>, String> {
    let pool = Pool::default();
    let r = check(step, t, &pool, targets).await;
    pool.close().await;
    r
}

/// The step's post-apply check against live state; Ok(None) when the step has none here.
pub(super) async fn check(
    step: &StepWork,
    t: &Topology,
    pool: &Pool,
    targets: &Targets,
) -> Result<Option<String>, String> {
    if step.id != "B.1" {
        return Ok(None);
    }
    // The seed's validation: each site's LAN reaches every other site's LAN through the tunnel.
    // From a host with SSH at the site (a node), ping a node of each other site; a site without
    // such a host is checked from its router. A fresh handshake can take a few seconds, so each
    // pair is retried for up to 20 s.
    let touched: BTreeSet<&str> = step.resources.iter().map(|r| r.target.as_str()).collect();
    let mut evidence = Vec::new();
    for s in t.sites.iter().filter(|s| touched.contains(format!("router.{}", s.name).as_str())) {
        let (from, vyos) = match s.cluster.nodes.iter().find(|n| n.ssh.is_some()) {
            Some(n) => (format!("host.{}", n.name), false),
            None => (format!("router.{}", s.name), s.router.kind == crate::topology::model::RouterKind::Vyos),
        };
        if vyos {
            evidence.push(format!("{from}: no LAN host with SSH to check from"));
            continue;
        }
        let session = pool.get(targets, &from).await.map_err(|e| e.to_string())?;
        for p in t.sites.iter().filter(|p| p.name != s.name) {
            let addr = match (from.starts_with("host."), p.cluster.nodes.first()) {
                (true, Some(n)) => n.address,
                _ => p.router.wireguard.address.addr,
            };
            let cmd = format!(
                "for i in 1 2 3 4 5 6 7 8 9 10; do ping -c 1 -W 2 {addr} >/dev/null 2>&1 && exit 0; done; exit 1"
            );
            let o = session.run(&cmd, None, Duration::from_secs(40)).await.map_err(|e| e.to_string())?;
            if o.status != 0 {
                return Err(format!("{from} cannot reach {} ({addr}) through the tunnel", p.name));
            }
            evidence.push(format!("{from} → {addr} ok"));
        }
    }
    Ok(Some(evidence.join(", ")))
}
