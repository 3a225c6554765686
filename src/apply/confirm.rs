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
use crate::desired::{ProviderKind, Resource, Target};
use crate::live::observe::Targets;
use crate::providers::{self, Observed};
use crate::sh;
use crate::transport::shell::{self, Sh};
use crate::transport::ssh::Session;

/// Why a router's change could not be confirmed. Each router reverts by itself when its
/// confirmation does not come.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfirmError {
    /// The topology gives no SSH access to the router.
    #[error("{target}: no SSH access")]
    NoAccess { target: String },
    /// A new connection to the router fails (the change may have cut the management path).
    #[error("cannot confirm on {target}: {reason}")]
    Unreachable { target: String, reason: String },
    /// The confirming command ran and failed.
    #[error("confirm on {target} failed: {stderr}")]
    Failed { target: String, stderr: String },
}

/// The file whose presence keeps an interface's scheduled restoration due.
fn canary(iface: &str) -> String {
    format!("/run/fabric-confirm-{iface}")
}

/// Saves the interface's current file and schedules its restoration unless confirmed. A router
/// that had to revert by itself also releases the run's lock: that run cannot reach it anymore.
pub fn arm_linux_revert(iface: &str, seconds: u32, holder: &str) -> Sh {
    let c = providers::wg_conf_path(iface);
    let p = format!("{c}.fabric-prev");
    let backup = sh!("if [ -e {} ]; then cp -p -- {} {}; else rm -f -- {}; fi", c, c, p, p);
    let revert = sh!(
        "if [ -e {} ]; then mv -f -- {} {}; {}; else {}; fi; {}",
        p,
        p,
        c,
        providers::wg_restart(iface),
        providers::wg_remove(iface),
        shell::release_lock(LOCK_PATH, holder)
    );
    sh!("{} && {}", backup, shell::schedule_revert(&canary(iface), seconds, &revert))
}

/// Cancels the scheduled restoration and drops the saved file.
pub fn disarm_linux_revert(iface: &str) -> Sh {
    sh!(
        "{} && rm -f -- {}",
        shell::cancel_revert(&canary(iface)),
        format!("{}.fabric-prev", providers::wg_conf_path(iface))
    )
}

/// Confirms every router the step changed, each over a new connection: a change that cut the
/// management path fails here, and the router reverts by itself when its timer runs out.
pub(super) async fn confirm(applied: &[(Resource, Observed)], targets: &Targets) -> Result<(), ConfirmError> {
    let mut by_target: BTreeMap<Target, Vec<&Resource>> = BTreeMap::new();
    for (r, _) in applied {
        by_target.entry(r.target().clone()).or_default().push(r);
    }
    for (target, rs) in by_target {
        let needs = rs.iter().any(|r| matches!(r.provider, ProviderKind::Wireguard | ProviderKind::Vyos));
        if !needs {
            continue;
        }
        let ep = targets.ssh.get(&target).ok_or_else(|| ConfirmError::NoAccess { target: target.to_string() })?;
        let fresh = Session::connect(ep)
            .await
            .map_err(|e| ConfirmError::Unreachable { target: target.to_string(), reason: e.to_string() })?;
        for r in rs {
            let o = match r.provider {
                ProviderKind::Wireguard => {
                    let cmd = shell::as_root(&fresh.endpoint.user, &disarm_linux_revert(providers::wg_interface(r)));
                    fresh.run(&cmd, None, Duration::from_secs(20)).await
                }
                ProviderKind::Vyos => {
                    fresh
                        .run(&providers::vbash(), Some(providers::VYOS_CONFIRM.as_bytes()), Duration::from_secs(60))
                        .await
                }
                _ => continue,
            };
            match o {
                Ok(o) if o.status == 0 => {}
                Ok(o) => return Err(ConfirmError::Failed { target: target.to_string(), stderr: o.stderr_str() }),
                Err(e) => return Err(ConfirmError::Unreachable { target: target.to_string(), reason: e.to_string() }),
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

    #[tokio::test]
    async fn a_router_without_access_cannot_be_confirmed() {
        let wg = Resource {
            address: "router.sp/wireguard:wg0".into(),
            site: None,
            provider: ProviderKind::Wireguard,
            summary: String::new(),
            sensitive: false,
            desired: crate::desired::Desired::Wireguard(String::new()),
            file: None,
        };
        let e = confirm(&[(wg, Observed::Absent)], &Targets::default()).await.unwrap_err();
        assert_eq!(e, ConfirmError::NoAccess { target: "router.sp".into() });
        assert_eq!(e.to_string(), "router.sp: no SSH access");
        let e = ConfirmError::Failed { target: "router.sp".into(), stderr: "no such file".into() };
        assert_eq!(e.to_string(), "confirm on router.sp failed: no such file");
        let e = ConfirmError::Unreachable { target: "router.sp".into(), reason: "timed out".into() };
        assert_eq!(e.to_string(), "cannot confirm on router.sp: timed out");
    }
}
