//! The rollback operation: put back what an apply changed, from its journal, newest step first.
//! Secrets are never restored from a journal (it never holds them).

use std::path::Path;

use std::collections::BTreeSet;

use super::{OpError, Workspace};
use crate::addr::Target;
use crate::apply::event::Event;
use crate::apply::journal::{self, Entry, Journal};
use crate::apply::{Hooks, lease, revert};
use crate::live::observe::Targets;
use crate::live::pool::Pool;

/// What a rollback did.
pub struct RolledBack {
    pub run: String,
    /// Steps put back, in the order they were (newest first); empty when there was nothing to do.
    pub steps: Vec<String>,
}

/// The run to roll back: the one named, or the newest in `state_dir`.
pub fn choose_run(state_dir: &Path, run: Option<String>) -> Result<String, OpError> {
    let run = run
        .or_else(|| Journal::latest(state_dir))
        .ok_or_else(|| OpError::NoRun(journal::runs_dir(state_dir).display().to_string()))?;
    // Only a run id is joined into a path: `../../x` names no run.
    if !journal::is_run_id(&run) {
        return Err(OpError::NotARunId(run));
    }
    Ok(run)
}

/// Reverts every step of `run` that is still applied. Each step put back is journaled before
/// the next is touched; a journal that cannot be written stops the rollback (and says so), since
/// the journal is what a later rollback or apply trusts. A lock another run holds is waited for
/// as `hooks` says (`--lock-timeout`).
pub fn run(
    ws: &Workspace,
    state_dir: &Path,
    run: &str,
    targets: &Targets,
    hooks: Hooks<'_>,
    rt: &tokio::runtime::Runtime,
) -> Result<RolledBack, OpError> {
    let progress = hooks.progress;
    ws.live_allowed("it holds production addresses: roll back runs of a topology of your own")?;
    let path = journal::runs_dir(state_dir).join(format!("{run}.jsonl"));
    let entries =
        Journal::read(&path).map_err(|source| OpError::ReadJournal { path: path.display().to_string(), source })?;
    let steps = journal::steps_to_roll_back(&entries);
    if steps.is_empty() {
        return Ok(RolledBack { run: run.into(), steps: vec![] });
    }
    let mut j = Journal::create(state_dir, run)
        .map_err(|source| OpError::JournalCreate { dir: state_dir.display().to_string(), source })?;
    let mut failed = Vec::new();
    let mut done = Vec::new();
    // The hosts the rollback touches are locked like an apply's, for the whole rollback: it must
    // not run while an apply (or another rollback) changes them.
    let hosts: BTreeSet<Target> = steps.iter().flat_map(|(_, ps)| ps.iter().map(|p| p.target.clone())).collect();
    let holder_run = format!("{run} (rollback)");
    let result: Result<(), OpError> = rt.block_on(async {
        let pool = Pool::default();
        let locks = crate::apply::HostLocks::waiting(hooks.lock_timeout);
        // The same Leases as an apply of these steps would take, then the host locks.
        let guards: BTreeSet<Target> = steps.iter().map(|(k, _)| lease::guard_of(ws.topology(), k)).collect();
        let mut leases = None;
        let holder = crate::apply::holder(&holder_run);
        let taken =
            crate::apply::take_leases(targets, &guards, &holder, lease::Times::default(), hooks.lock_timeout, progress);
        let mut result = match taken.await {
                Ok(held) => {
                    leases = Some(held);
                    match locks.take_all(&pool, targets, &hosts, &holder_run, progress).await {
                        Ok(()) => Ok(()),
                        Err(error) => Err(OpError::Apply { run: run.into(), error: Box::new(error) }),
                    }
                }
                Err(error) => Err(OpError::Apply { run: run.into(), error: Box::new(error) }),
            };
        for (step, priors) in steps.iter().filter(|_| result.is_ok()) {
            let applied: Vec<_> = priors.iter().map(|p| (revert::resource_from_prior(p), p.prior.clone())).collect();
            let left = revert::revert_all(&applied, run, &pool, targets).await;
            if !left.is_empty() {
                failed.push(format!("{step}: {}", left.join("; ")));
                continue;
            }
            if let Err(e) = j.record(&Entry::RolledBack { run: run.into(), step: step.clone() }) {
                result = Err(e.into());
                break;
            }
            // Kubernetes has no control-plane downgrade: a K3s upgrade went back by its backup.
            for p in priors {
                if let Some(dir) = crate::apply::upgrade::backup_of(&p.prior) {
                    progress(&format!(
                        "{step}: {}: K3s cannot be downgraded: the backup taken before the upgrade ({dir}) was restored; what the cluster did since it was taken is lost",
                        p.address
                    ));
                }
            }
            hooks.emit(Event::StepRolledBack { step: step.clone() });
            done.push(step.clone());
        }
        locks.release_all().await;
        if let Some(mut held) = leases {
            // Every operator sees the run rolled back (`fabric runs`).
            if let Ok(text) = std::fs::read_to_string(&j.path) {
                for f in held.share_journal(run, &text).await {
                    progress(&format!("warning: the run's journal is not shared in {f}"));
                }
            }
            held.release().await;
        }
        pool.close().await;
        result
    });
    result?;
    if !failed.is_empty() {
        return Err(OpError::RollbackIncomplete { run: run.into(), failed });
    }
    Ok(RolledBack { run: run.into(), steps: done })
}
