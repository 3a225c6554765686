//! Confirmation, after deploy-rs: before a router changes, the router itself is told to revert
//! unless confirmed (VyOS `commit-confirm`; on Linux a detached job with a canary file), and the
//! confirmation travels over a *new* SSH connection. A change that cuts the management path can
//! therefore not be confirmed, and the router puts itself back.
//!
//! Arming VyOS is part of its commit (`providers::apply_vyos`); this module holds what arms and
//! disarms the Linux routers' job, and the confirmation itself.

use std::collections::BTreeMap;
use std::time::Duration;

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
    /// The router's own timer fired before the confirmation: it reverted by itself.
    #[error("{target} had already reverted by itself (its confirmation came too late)")]
    Reverted { target: String },
    /// A VyOS router was confirmed (it no longer reverts by itself) but its configuration could
    /// not be saved: a reboot would bring back the old one.
    #[error("{target} was confirmed but its configuration was not saved: {detail}")]
    NotSaved { target: String, detail: String },
}

/// The file whose presence keeps an interface's scheduled restoration due: one per run and
/// interface, so a timer an earlier run left can never be taken for this run's.
pub(crate) fn canary(iface: &str, run: &str) -> String {
    format!("/run/fabric-confirm-{iface}-{run}")
}

/// Saves the interface's current file and schedules its restoration unless confirmed. (The run's
/// host lock is not the job's business: it ends with the run's SSH session, `live::locks`.)
pub fn arm_linux_revert(iface: &str, run: &str, seconds: u32) -> Sh {
    let c = providers::wg_conf_path(iface);
    let p = format!("{c}.fabric-prev");
    let backup = sh!("if [ -e {} ]; then cp -p -- {} {}; else rm -f -- {}; fi", c, c, p, p);
    let revert = sh!(
        "if [ -e {} ]; then mv -f -- {} {}; {}; else {}; fi",
        p,
        p,
        c,
        providers::wg_restart(iface),
        providers::wg_remove(iface)
    );
    sh!("{} && {}", backup, shell::schedule_revert(&canary(iface, run), seconds, &revert))
}

/// Cancels the scheduled restoration and drops the saved file; exits [`shell::LOST`] when the
/// router had already reverted by itself.
pub fn disarm_linux_revert(iface: &str, run: &str) -> Sh {
    sh!(
        "{} && rm -f -- {}",
        shell::cancel_revert(&canary(iface, run)),
        format!("{}.fabric-prev", providers::wg_conf_path(iface))
    )
}

/// A confirmation that did not go through, and whether some router was confirmed before it
/// failed: such a router no longer reverts by itself, so the step must be put back explicitly.
#[derive(Debug)]
pub struct Unconfirmed {
    pub error: ConfirmError,
    pub any_confirmed: bool,
}

/// Confirms every router the step changed, over new connections, in two phases: first every
/// router is reached (a change that cut a management path fails here, before anything is
/// confirmed, and every router reverts by itself when its timer runs out), then each is
/// confirmed. A Linux router whose timer fired first says so ([`shell::LOST`]).
pub(super) async fn confirm(applied: &[(Resource, Observed)], run: &str, targets: &Targets) -> Result<(), Unconfirmed> {
    let mut by_target: BTreeMap<Target, Vec<&Resource>> = BTreeMap::new();
    for (r, _) in applied.iter().filter(|(r, _)| matches!(r.provider, ProviderKind::Wireguard | ProviderKind::Vyos)) {
        by_target.entry(r.target().clone()).or_default().push(r);
    }
    let none = |error| Unconfirmed { error, any_confirmed: false };
    let mut endpoints = Vec::new();
    for (target, rs) in by_target {
        let ep = targets.ssh.get(&target).ok_or_else(|| none(ConfirmError::NoAccess { target: target.to_string() }))?;
        endpoints.push((target, rs, ep));
    }
    // Every router connected at once (each connect is several round trips), each through the
    // retried connect (`live::connect`: a router whose sshd is restarting is tried again, one
    // that timed out is named at once); nothing is confirmed until all are, and then one after
    // the other.
    let connected =
        futures::future::join_all(endpoints.iter().map(|(_, _, ep)| crate::live::connect::connect(ep))).await;
    let mut sessions = Vec::new();
    let mut unreachable = None;
    for ((target, rs, _), c) in endpoints.into_iter().zip(connected) {
        match c {
            Ok(s) => sessions.push((target, rs, s)),
            Err(e) => {
                unreachable = unreachable
                    .or(Some(ConfirmError::Unreachable { target: target.to_string(), reason: e.to_string() }))
            }
        }
    }
    if let Some(e) = unreachable {
        for (_, _, s) in sessions {
            s.close().await;
        }
        return Err(none(e));
    }
    let mut confirmed = 0;
    let mut failure = None;
    for (target, rs, fresh) in &sessions {
        if failure.is_none() {
            match confirm_router(fresh, target, rs, run).await {
                Ok(()) => {
                    confirmed += 1;
                    if confirmed == 1 {
                        crate::apply::pause::at("confirming").await;
                    }
                }
                Err(e) => {
                    // Confirmed before the save failed: that router no longer reverts by itself.
                    if matches!(e, ConfirmError::NotSaved { .. }) {
                        confirmed += 1;
                    }
                    failure = Some(e)
                }
            }
        }
    }
    // Closed once every router is confirmed, all at once: a close is no part of a confirmation.
    futures::future::join_all(sessions.into_iter().map(|(_, _, s)| s.close())).await;
    match failure {
        None => Ok(()),
        Some(error) => Err(Unconfirmed { error, any_confirmed: confirmed > 0 }),
    }
}

/// A VyOS router's confirmation: `confirm`, read for what it says (it exits 0 both when it
/// stopped the timer and when there was none: vyos-1x `python/vyos/config_mgmt.py` `confirm`),
/// then `save` once confirmed, so that a reboot keeps the change. `No confirm pending` means the
/// router's timer already fired and the change is gone: reported as such, never as confirmed,
/// and nothing is saved.
async fn confirm_vyos(fresh: &Session, target: &Target) -> Result<(), ConfirmError> {
    let t = target.to_string();
    let unreachable =
        |e: crate::transport::ssh::SshError| ConfirmError::Unreachable { target: t.clone(), reason: e.to_string() };
    let o = fresh
        .run(&providers::vbash(), Some(providers::VYOS_CONFIRM.as_bytes()), Duration::from_secs(60))
        .await
        .map_err(unreachable)?;
    let said = |o: &crate::transport::ssh::Output| {
        let out = o.stdout_str();
        let last: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
        format!("exit {}: {} {}", o.status, last.join(" / "), o.stderr_str()).trim().to_string()
    };
    match providers::vyos_confirmed(&o.stdout_str()) {
        Some(true) if o.status == 0 => {}
        Some(false) => return Err(ConfirmError::Reverted { target: t }),
        _ => return Err(ConfirmError::Failed { target: t, stderr: said(&o) }),
    }
    let o = fresh
        .run(&providers::vbash(), Some(providers::VYOS_SAVE.as_bytes()), Duration::from_secs(60))
        .await
        .map_err(unreachable)?;
    if o.status != 0 || providers::vyos_error(&o.stdout_str(), &o.stderr_str()).is_some() {
        return Err(ConfirmError::NotSaved { target: t, detail: said(&o) });
    }
    Ok(())
}

/// One router's confirmation over its fresh connection.
async fn confirm_router(fresh: &Session, target: &Target, rs: &[&Resource], run: &str) -> Result<(), ConfirmError> {
    if rs.iter().any(|r| r.provider == ProviderKind::Vyos) {
        // One confirm covers the router's whole commit.
        return confirm_vyos(fresh, target).await;
    }
    for r in rs {
        let o = match r.provider {
            ProviderKind::Wireguard => {
                let cmd = shell::as_root(&fresh.endpoint.user, &disarm_linux_revert(providers::wg_interface(r), run));
                fresh.run(&cmd, None, Duration::from_secs(20)).await
            }
            _ => continue,
        };
        match o {
            Ok(o) if o.status == 0 => {}
            Ok(o) if o.status == shell::LOST => return Err(ConfirmError::Reverted { target: target.to_string() }),
            Ok(o) => return Err(ConfirmError::Failed { target: target.to_string(), stderr: o.stderr_str() }),
            Err(e) => return Err(ConfirmError::Unreachable { target: target.to_string(), reason: e.to_string() }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_revert_is_armed_with_a_canary() {
        let run = "20261201T000000Z-7";
        let cmd = arm_linux_revert("wg0", run, 30);
        assert!(cmd.starts_with("if [ -e /etc/wireguard/wg0.conf ]; then cp -p -- /etc/wireguard/wg0.conf /etc/wireguard/wg0.conf.fabric-prev; else rm -f -- /etc/wireguard/wg0.conf.fabric-prev; fi && touch -- /run/fabric-confirm-wg0-20261201T000000Z-7 && ( setsid sh -c "), "{cmd}");
        assert!(cmd.contains("sleep 30;"), "{cmd}");
        assert!(!cmd.contains("/run/lock/fabric.lock"), "the lock ends with the session, not with the job: {cmd}");
        let disarm = disarm_linux_revert("wg0", run);
        assert!(disarm.starts_with("if mv -- /run/fabric-confirm-wg0-20261201T000000Z-7 /run/fabric-confirm-wg0-20261201T000000Z-7.confirmed"), "{disarm}");
        assert!(disarm.ends_with("&& rm -f -- /etc/wireguard/wg0.conf.fabric-prev"), "{disarm}");
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
        let e = confirm(&[(wg, Observed::Absent)], "r", &Targets::default()).await.unwrap_err().error;
        assert_eq!(e, ConfirmError::NoAccess { target: "router.sp".into() });
        assert_eq!(e.to_string(), "router.sp: no SSH access");
        let e = ConfirmError::Failed { target: "router.sp".into(), stderr: "no such file".into() };
        assert_eq!(e.to_string(), "confirm on router.sp failed: no such file");
        let e = ConfirmError::Unreachable { target: "router.sp".into(), reason: "timed out".into() };
        assert_eq!(e.to_string(), "cannot confirm on router.sp: timed out");
    }
}
