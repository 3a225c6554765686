//! The apply operation, in two parts so the command can show the plan and ask in between:
//! [`prepare`] reads live state and plans (refusing a stale planfile), [`run`] journals and
//! applies the steps with rollback points.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Observation, OpError, Workspace};
use crate::apply::journal::{self, Entry, Journal};
use crate::apply::{self as engine, Progress, StepWork};
use crate::live::observe::Targets;
use crate::plan::model::{Action, Mode, Plan};
use crate::plan::planfile;
use crate::plan::select::Selection;

/// What to apply: the flags' selection, or a plan written by `plan --out`.
pub enum Request<'a> {
    Selection(Selection),
    Planfile(&'a Path),
}

/// Live state read and planned, ready to be approved and applied.
pub struct Ready {
    pub observation: Observation,
    pub plan: Plan,
}

impl Ready {
    /// Why this plan must not be applied as it is (the plan is worth showing first).
    pub fn blocked(&self) -> Option<OpError> {
        if self.plan.summary.refused_steps > 0 {
            return Some(OpError::Refused);
        }
        if !self.plan.unreachable.is_empty() {
            return Some(OpError::Unreachable(self.plan.unreachable.iter().map(|u| u.target.to_string()).collect()));
        }
        None
    }
}

/// Reads and plans. With a planfile, its selection is used and apply goes on only if the
/// topology and everything the plan observed are still the same.
pub fn prepare(
    ws: &Workspace,
    req: Request<'_>,
    targets: &Targets,
    rt: &tokio::runtime::Runtime,
) -> Result<Ready, OpError> {
    let (sel, expected) = match req {
        Request::Selection(s) => (s, None),
        Request::Planfile(path) => {
            let p = planfile::read(path)?;
            // A plan made from live state or from a snapshot names what it observed.
            let fingerprint = match p.mode {
                Mode::Live { fingerprint } | Mode::Observed { fingerprint, .. } => fingerprint,
                Mode::Offline | Mode::Base { .. } => return Err(OpError::OfflinePlanfile),
            };
            (p.selection, Some((p.topology_digest, fingerprint)))
        }
    };
    let observation = rt.block_on(ws.observe(sel, targets))?;
    let plan = ws.plan_of(&observation);
    if let Some((digest, fingerprint)) = expected {
        if digest != ws.digest {
            return Err(OpError::StaleTopology);
        }
        if fingerprint != observation.live.fingerprint() {
            return Err(OpError::StaleLive);
        }
    }
    Ok(Ready { observation, plan })
}

/// How to apply.
#[derive(Debug, Clone)]
pub struct Options {
    pub state_dir: PathBuf,
    pub confirm_timeout: Duration,
    pub force_conflicts: bool,
    pub wait_timeout: Duration,
}

/// A finished run.
pub struct Applied {
    pub run: String,
    /// Keys of the steps that changed something.
    pub changed: Vec<String>,
    pub journal: PathBuf,
}

/// Journals the run and applies the plan's steps in order; a failed step is reverted to its
/// rollback point and stops the run.
pub fn run(
    ws: &Workspace,
    ready: Ready,
    opts: &Options,
    targets: &Targets,
    progress: Progress<'_>,
    rt: &tokio::runtime::Runtime,
) -> Result<Applied, OpError> {
    bundle_preflight(ws, &ready)?;
    let run = journal::new_run_id();
    let mut j = Journal::create(&opts.state_dir, &run)
        .map_err(|source| OpError::JournalCreate { dir: opts.state_dir.display().to_string(), source })?;
    let user = std::env::var("USER").unwrap_or_default();
    j.record(&Entry::Start {
        run: run.clone(),
        fabric: ws.topology().name.clone(),
        topology_digest: ws.digest.clone(),
        user,
    })?;
    let Ready { observation: o, .. } = ready;
    let steps: Vec<StepWork> = ws
        .in_order(&o.selected)
        .map(|n| StepWork {
            key: ws.instance(n).key(),
            id: ws.instance(n).spec.id.clone(),
            needs: ws.needs(n),
            resources: ws
                .resources(n, &o.selection)
                .into_iter()
                .chain(o.orphans.get(&n).into_iter().flatten().filter(|r| o.selection.keeps(r)).cloned())
                .collect(),
        })
        .filter(|s| !s.resources.is_empty())
        .collect();
    let engine_opts = engine::Options {
        run: run.clone(),
        state_dir: opts.state_dir.clone(),
        confirm_timeout: opts.confirm_timeout,
        force_conflicts: opts.force_conflicts,
        wait_timeout: opts.wait_timeout,
    };
    let result = rt.block_on(async {
        crate::apply::interrupt::listen();
        engine::run(ws.topology(), &steps, targets, o.live, &engine_opts, &mut j, progress).await
    });
    match result {
        Ok(changed) => Ok(Applied { run, changed, journal: j.path.clone() }),
        Err(error) => Err(OpError::Apply { run, error: Box::new(error) }),
    }
}

/// Every K3s bundle file an install of this run will copy is read and checked against its
/// digest before anything starts: a wrong or missing file stops the run with nothing changed
/// (the provider checks again as it copies).
fn bundle_preflight(ws: &Workspace, ready: &Ready) -> Result<(), OpError> {
    let changing: std::collections::BTreeSet<&crate::addr::Address> = ready
        .plan
        .steps
        .iter()
        .flat_map(|s| &s.changes)
        .filter(|c| c.action != Action::NoOp)
        .map(|c| &c.address)
        .collect();
    let mut checked = std::collections::BTreeSet::new();
    for n in ws.in_order(&ready.observation.selected) {
        for r in ws.resources(n, &ready.observation.selection) {
            let crate::desired::Desired::K3sInstall(k) = &r.desired else { continue };
            if !changing.contains(&r.address) {
                continue;
            }
            for u in k.uploads() {
                if checked.insert(u.local.clone()) {
                    crate::providers::airgap::read_checked(&r, u).map_err(|e| OpError::Bundle(e.to_string()))?;
                }
            }
        }
    }
    Ok(())
}
