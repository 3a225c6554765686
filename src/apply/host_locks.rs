//! The host locks of a run, held by its SSH sessions (see `live::locks`): taken before a step
//! touches a host, re-taken on a new session before the next change after a reconnect (a new
//! session means the old one's lock ended with it, and someone else may have taken it
//! meanwhile), and ended with the run.
//!
//! Every host of a step is locked at once. The holder prints the host's pending self-reverts
//! once it holds the lock, in the same round trip (`live::locks::hold_lock_reading`); while
//! another run's self-revert is pending there, the run waits
//! (a run killed before it confirmed: its router puts itself back when the timer fires, and the
//! lock of the dead run ended with its connection long before). So a new apply right after a
//! `kill -9` goes through once the dead run's routers have reverted by themselves, and never
//! changes a router under a revert about to fire. On a Linux router that is the run's canary
//! file; on a VyOS router, its commit-confirm's systemd timer and the revert it starts
//! (`live::locks::VYOS_CONFIRM_UNITS`), whoever armed it: VyOS keeps one per router and does
//! not say whose, and no run armed one on a host before taking its lock. Only then does the step
//! read the host again for its rollback point (`apply::pending_changes`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::apply::{ApplyError, Progress, holder};
use crate::desired::Target;
use crate::live::locks::{self, HELD, LOCK_PATH, LOCKED};
use crate::live::observe::Targets;
use crate::live::pool::Pool;
use crate::transport::shell;
use crate::transport::ssh::{Running, Session, Started};

/// How long a run waits for another run's pending self-revert on a host before it gives up:
/// longer than any confirm timeout an operator would give (`--confirm-timeout`, 60 s by default).
pub const PENDING_REVERT_WAIT: Duration = Duration::from_secs(600);

/// One host's lock: the holder running on the session it was taken on.
struct Hold {
    on: Weak<Session>,
    holder: Running,
}

/// The host locks a run holds, and how long it waits for one another run holds
/// (`--lock-timeout`; zero by default: refused at once).
#[derive(Default)]
pub struct HostLocks {
    held: tokio::sync::Mutex<BTreeMap<Target, Hold>>,
    wait: Duration,
}

/// Whether `target` is locked: every host fabric reaches over SSH (a target without SSH access
/// has no lock to take: reaching it fails on its own), VyOS routers included (the holder is a
/// plain shell command, which VyOS runs in its login shell, vbash); Kubernetes APIs are guarded
/// by their Lease (`apply::lease`).
fn locked_host(targets: &Targets, target: &Target) -> bool {
    targets.ssh.contains_key(target)
}

impl HostLocks {
    /// No lock held yet; a lock another run holds is waited for up to `wait` each time one is
    /// taken.
    pub fn waiting(wait: Duration) -> HostLocks {
        HostLocks { held: Default::default(), wait }
    }

    /// Locks every host of `hosts` not locked yet: connects to all at once (a connect is several
    /// round trips no other host need wait for), then takes the locks one after the other in
    /// `hosts`' order, the same order in every run, then waits on all at once while another
    /// run's self-revert is pending there. The order matters: two runs that want overlapping
    /// hosts meet at the first they share and one of them gets every lock; taken all at once,
    /// each could get one and both be refused (seen in CI: `two_applies_at_once`). A lock taken
    /// is kept as it comes, so that the caller ends exactly those, even after another host
    /// refused; the first host's error (in `hosts`' order) is the one returned.
    pub async fn take_all(
        &self,
        pool: &Pool,
        targets: &Targets,
        hosts: &BTreeSet<Target>,
        run: &str,
        progress: Progress<'_>,
    ) -> Result<(), ApplyError> {
        let mut todo = Vec::new();
        {
            let held = self.held.lock().await;
            todo.extend(hosts.iter().filter(|t| locked_host(targets, t) && !held.contains_key(*t)));
        }
        let sessions = futures::future::join_all(todo.iter().map(|t| pool.get(targets, t))).await;
        let mut waits = Vec::with_capacity(todo.len());
        for (target, s) in todo.into_iter().zip(sessions) {
            let s = s?;
            let vyos = targets.is_vyos(target);
            let (holder, first) = self.take_waiting(&s, vyos, run, progress).await?;
            self.held.lock().await.insert(target.clone(), Hold { on: Arc::downgrade(&s), holder });
            waits.push((s, vyos, first));
        }
        let waited = futures::future::join_all(
            waits.iter().map(|(s, vyos, first)| wait_for_other_reverts(s, *vyos, run, first.clone(), progress)),
        );
        waited.await.into_iter().collect()
    }

    /// [`take`], trying again while another run holds the lock, up to the run's wait from now:
    /// the operator is told once per holder; past the wait, the refusal names the holder.
    async fn take_waiting(
        &self,
        s: &Session,
        vyos: bool,
        run: &str,
        progress: Progress<'_>,
    ) -> Result<(Running, locks::Hold), ApplyError> {
        let started = Instant::now();
        let mut told = None;
        loop {
            match take(s, vyos, run).await {
                Err(ApplyError::Locked { target, holder })
                    if started.elapsed() < self.wait && !crate::apply::interrupt::requested() =>
                {
                    if told.as_ref() != Some(&holder) {
                        progress(&crate::apply::waiting_for(&target, &holder, self.wait));
                        told = Some(holder);
                    }
                    tokio::time::sleep(crate::apply::LOCK_RETRY.min(self.wait.saturating_sub(started.elapsed()))).await;
                }
                r => return r,
            }
        }
    }

    /// Before the next change on `target` over `s`: when the run's lock there was taken on
    /// another session (the pool reconnected) or its holder ended (the connection dropped), the
    /// lock is taken again on `s`; held by someone else meanwhile, the change must not be made.
    pub async fn ensure(&self, s: &Arc<Session>, target: &Target, run: &str) -> Result<(), ApplyError> {
        let mut held = self.held.lock().await;
        let Some(h) = held.get_mut(target) else { return Ok(()) };
        let same = h.on.upgrade().is_some_and(|on| Arc::ptr_eq(&on, s));
        if same && h.holder.alive() {
            return Ok(());
        }
        // The pending reverts were waited for when the lock was first taken; a revert armed
        // since is this run's own.
        let (holder, _) = take(s, false, run).await?;
        let old = std::mem::replace(h, Hold { on: Arc::downgrade(s), holder });
        drop(held);
        old.holder.end(Duration::from_secs(2)).await;
        Ok(())
    }

    /// Whether every lock is still held on a live session (before a confirmation, which goes
    /// over new connections): the hosts whose lock ended, if any.
    pub async fn lost(&self, hosts: &BTreeSet<Target>) -> Vec<Target> {
        let mut held = self.held.lock().await;
        let mut lost = Vec::new();
        for (t, h) in held.iter_mut().filter(|(t, _)| hosts.contains(*t)) {
            if h.on.strong_count() == 0 || !h.holder.alive() {
                lost.push(t.clone());
            }
        }
        lost
    }

    /// Ends every lock (each holder empties its lock file and exits).
    pub async fn release_all(&self) {
        let held = std::mem::take(&mut *self.held.lock().await);
        futures::future::join_all(held.into_values().map(|h| h.holder.end(Duration::from_secs(10)))).await;
    }
}

/// Takes the lock of the host behind `s` for `run`; the holder then reads the host's pending
/// self-reverts under the lock, in the same round trip ([`locks::hold_lock_reading`]).
async fn take(s: &Session, vyos: bool, run: &str) -> Result<(Running, locks::Hold), ApplyError> {
    let hold = locks::hold_lock_reading(LOCK_PATH, &holder(run), &locks::pending_reverts_for(vyos));
    let cmd = shell::as_root(&s.endpoint.user, &hold);
    match s.start(&cmd, locks::READ_UNDER_LOCK, Duration::from_secs(20)).await? {
        Started::Running(r, said) if said.lines().next() == Some(HELD) => {
            let read = said.lines().skip(1).filter(|l| *l != locks::READ_UNDER_LOCK).collect::<Vec<_>>().join("\n");
            Ok((r, locks::parse_hold(&read)))
        }
        // Anything else before the end of its read is not the holder's.
        Started::Running(r, said) => {
            r.end(Duration::from_secs(10)).await;
            Err(ApplyError::LockFailed {
                target: s.endpoint.target.clone(),
                stderr: format!("unexpected answer {said:?}"),
            })
        }
        // Refused: the holder's line, then the exit status.
        Started::Ended(o) if o.status == LOCKED => {
            Err(ApplyError::Locked { target: s.endpoint.target.clone(), holder: o.stdout_str().trim().to_string() })
        }
        Started::Ended(o) => Err(ApplyError::LockFailed { target: s.endpoint.target.clone(), stderr: o.stderr_str() }),
    }
}

/// Waits until no self-revert of another run is pending on the host behind `s` (bounded by
/// [`PENDING_REVERT_WAIT`]), starting from `first`, what the lock holder read as it took the
/// lock, and reading again each second while one is; a VyOS router whose commit-confirm state
/// cannot be read is refused at once.
async fn wait_for_other_reverts(
    s: &Session,
    vyos: bool,
    run: &str,
    first: locks::Hold,
    progress: Progress<'_>,
) -> Result<(), ApplyError> {
    let cmd = shell::as_root(&s.endpoint.user, &locks::pending_reverts_for(vyos));
    let started = Instant::now();
    let mut said = false;
    let mut hold = first;
    loop {
        if let Some(why) = hold.unknown {
            return Err(ApplyError::LockFailed { target: s.endpoint.target.clone(), stderr: why });
        }
        let others = others_pending(&hold.pending_reverts, run);
        if others.is_empty() {
            return Ok(());
        }
        if started.elapsed() > PENDING_REVERT_WAIT {
            return Err(ApplyError::LockFailed {
                target: s.endpoint.target.clone(),
                stderr: format!(
                    "another run's self-revert is still pending after {} s: {}",
                    PENDING_REVERT_WAIT.as_secs(),
                    others.join(", ")
                ),
            });
        }
        if !said {
            progress(&format!(
                "{}: waiting for another run's pending self-revert before changing it ({}; at most {} min)",
                s.endpoint.target,
                others.join(", "),
                PENDING_REVERT_WAIT.as_secs() / 60
            ));
            said = true;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let o = s.run(&cmd, None, Duration::from_secs(15)).await?;
        hold = locks::parse_hold(&o.stdout_str());
    }
}

/// The pending self-reverts that are not `run`'s: canaries `/run/fabric-confirm-<if>-<run>` of
/// other runs, and a VyOS router's commit-confirm (it names no run).
fn others_pending(pending: &[String], run: &str) -> Vec<String> {
    let mine = format!("-{run}");
    pending.iter().filter(|c| !c.ends_with(&mine)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_own_self_reverts_do_not_hold_it_back() {
        let pending = ["/run/fabric-confirm-wg0-20261202T1000Z-1".to_string(), "/run/fabric-confirm-wg0-r2".into()];
        assert_eq!(others_pending(&pending, "r2"), ["/run/fabric-confirm-wg0-20261202T1000Z-1"]);
        assert!(others_pending(&pending[1..], "r2").is_empty());
        let vyos = locks::parse_hold("unit commit-confirm.timer active\nunit commit-confirm.service inactive\n");
        assert_eq!(others_pending(&vyos.pending_reverts, "r2"), ["VyOS commit-confirm (commit-confirm.timer active)"]);
    }
}
