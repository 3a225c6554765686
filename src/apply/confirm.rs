//! Confirmation, after deploy-rs: before a router changes, the router itself is told to revert
//! unless confirmed (VyOS `commit-confirm`; on Linux a detached job with a canary file), and the
//! confirmation travels over a *new* SSH connection. A change that cuts the management path can
//! therefore not be confirmed, and the router puts itself back.
//!
//! Arming VyOS is part of its commit (`providers::apply_vyos`); this module holds what arms and
//! disarms the Linux routers' job, and the confirmation itself.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::apply::LOCK_PATH;
use crate::desired::{ProviderKind, Resource};
use crate::live::observe::Targets;
use crate::providers::{self, Observed};
use crate::transport::shell::{self, quote};
use crate::transport::ssh::Session;

/// The file whose presence keeps an interface's scheduled restoration due.
fn canary(iface: &str) -> String {
    format!("/run/fabric-confirm-{iface}")
}

/// Saves the interface's current file and schedules its restoration unless confirmed. A router
/// that had to revert by itself also releases the run's lock: that run cannot reach it anymore.
pub fn arm_linux_revert(iface: &str, seconds: u32, holder: &str) -> String {
    let conf = providers::wg_conf_path(iface);
    let prev = format!("{conf}.fabric-prev");
    let (c, p) = (quote(&conf), quote(&prev));
    let backup = format!("if [ -e {c} ]; then cp -p -- {c} {p}; else rm -f -- {p}; fi");
    let revert = format!(
        "if [ -e {p} ]; then mv -f -- {p} {c}; {}; else {}; fi; {}",
        providers::wg_restart(iface),
        providers::wg_remove(iface),
        shell::release_lock(LOCK_PATH, holder)
    );
    format!("{backup} && {}", shell::schedule_revert(&canary(iface), seconds, &revert))
}

/// Cancels the scheduled restoration and drops the saved file.
pub fn disarm_linux_revert(iface: &str) -> String {
    format!(
        "{} && rm -f -- {}",
        shell::cancel_revert(&canary(iface)),
        quote(&format!("{}.fabric-prev", providers::wg_conf_path(iface)))
    )
}

/// Confirms every router the step changed, each over a new connection: a change that cut the
/// management path fails here, and the router reverts by itself when its timer runs out.
pub(super) async fn confirm(applied: &[(Resource, Observed)], targets: &Targets) -> Result<(), String> {
    let mut by_target: BTreeMap<String, Vec<&Resource>> = BTreeMap::new();
    for (r, _) in applied {
        by_target.entry(r.target.clone()).or_default().push(r);
    }
    for (target, rs) in by_target {
        let needs = rs.iter().any(|r| matches!(r.provider, ProviderKind::Wireguard | ProviderKind::Vyos));
        if !needs {
            continue;
        }
        let ep = targets.ssh.get(&target).ok_or_else(|| format!("{target}: no SSH access"))?;
        let fresh = Session::connect(ep).await.map_err(|e| format!("cannot confirm on {target}: {e}"))?;
        for r in rs {
            let o = match r.provider {
                ProviderKind::Wireguard => {
                    let cmd = shell::as_root(&fresh.endpoint.user, &disarm_linux_revert(providers::wg_interface(r)));
                    fresh.run(&cmd, None, Duration::from_secs(20)).await
                }
                ProviderKind::Vyos => {
                    fresh.run("vbash -s", Some(providers::VYOS_CONFIRM.as_bytes()), Duration::from_secs(60)).await
                }
                _ => continue,
            };
            match o {
                Ok(o) if o.status == 0 => {}
                Ok(o) => return Err(format!("confirm on {target} failed: {}", o.stderr_str())),
                Err(e) => return Err(format!("cannot confirm on {target}: {e}")),
            }
            if r.provider == ProviderKind::Vyos {
                break; // one confirm covers the router's whole commit
            }
        }
        fresh.close().await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_revert_is_armed_with_a_canary() {
        let cmd = arm_linux_revert("wg0", 30, "run x");
        assert!(cmd.starts_with("if [ -e /etc/wireguard/wg0.conf ]; then cp -p -- /etc/wireguard/wg0.conf /etc/wireguard/wg0.conf.fabric-prev; else rm -f -- /etc/wireguard/wg0.conf.fabric-prev; fi && touch -- /run/fabric-confirm-wg0 && ( setsid sh -c "), "{cmd}");
        assert!(cmd.contains("sleep 30;"), "{cmd}");
        assert!(cmd.contains("/run/lock/fabric.lock"), "the job releases the run's lock: {cmd}");
        assert_eq!(
            disarm_linux_revert("wg0"),
            "rm -f -- /run/fabric-confirm-wg0 && rm -f -- /etc/wireguard/wg0.conf.fabric-prev"
        );
    }
}
