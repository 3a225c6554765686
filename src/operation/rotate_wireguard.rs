//! The rotation of the tunnel's WireGuard keys (`fabric rotate wireguard`), in two parts like
//! apply: [`prepare`] reads B.1 as plan does and refuses unless the tunnel is in sync (a rotation
//! changes keys only: a drifted router is B.1's business first); [`run`] journals the run and
//! rotates (`apply::rotate`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use super::{Observation, OpError, Workspace};
use crate::apply::journal::Entry;
use crate::apply::rotate::{self as engine, Rotated};
use crate::apply::{ApplyError, Progress};
use crate::desired::{Resource, Target};
use crate::live::observe::Targets;
use crate::plan::select::Selection;

/// Why a rotation did not start or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    #[error(transparent)]
    Op(#[from] OpError),
    #[error("there is no site `{0}`")]
    UnknownSite(String),
    #[error("the tunnel is not in sync with the topology: {0}")]
    NotInSync(String),
    #[error("{error} (run {run})")]
    Rotate { run: String, error: Box<ApplyError> },
}

impl RotateError {
    /// What to do about it.
    pub fn help(&self) -> String {
        match self {
            RotateError::Op(e) => e.to_string(),
            RotateError::UnknownSite(_) => "name a site of the topology (`fabric graph` lists them)".into(),
            RotateError::NotInSync(_) => {
                "`fabric plan --step B.1` shows what differs; apply B.1 first, then rotate".into()
            }
            RotateError::Rotate { error, .. } => error.help(),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            RotateError::Op(_) => "rotate::read",
            RotateError::UnknownSite(_) => "rotate::site",
            RotateError::NotInSync(_) => "rotate::not-in-sync",
            RotateError::Rotate { .. } => "rotate::failed",
        }
    }
}

/// The tunnel read and found in sync, ready to rotate.
pub struct Prepared {
    observation: Observation,
    resources: Vec<Resource>,
    /// The sites whose router gets a new key pair.
    pub sites: BTreeSet<String>,
}

impl Prepared {
    /// The routers that change, and how.
    pub fn summary(&self, ws: &Workspace) -> Vec<String> {
        ws.topology()
            .sites
            .iter()
            .map(|s| {
                let target = Target::router(&s.name);
                let key = self.observation.live.keys.get(&target).map(|k| k.to_string()).unwrap_or_default();
                if self.sites.contains(&s.name) {
                    format!("{target}: a new key pair made on the router (public key now {key})")
                } else {
                    format!("{target}: keeps its key, learns its peers' new public keys")
                }
            })
            .collect()
    }
}

/// Reads B.1 at every site (both ends of the tunnel change, whatever `sites` says) and checks
/// that it is in sync; `sites` (empty: every site) names the routers that get new keys.
pub fn prepare(
    ws: &Workspace,
    sites: &[String],
    targets: &Targets,
    rt: &tokio::runtime::Runtime,
) -> Result<Prepared, RotateError> {
    let t = ws.topology();
    if let Some(bad) = sites.iter().find(|s| !t.sites.iter().any(|k| &k.name == *s)) {
        return Err(RotateError::UnknownSite(bad.clone()));
    }
    let sel = Selection { steps: vec!["B.1".into()], ..Default::default() };
    let observation = rt.block_on(ws.observe(sel, targets))?;
    let plan = ws.plan_of(&observation);
    if !plan.unreachable.is_empty() {
        let names: Vec<String> = plan.unreachable.iter().map(|u| u.target.to_string()).collect();
        return Err(RotateError::NotInSync(format!("{} could not be read", names.join(", "))));
    }
    if plan.has_changes() {
        let changed: Vec<String> = plan
            .steps
            .iter()
            .flat_map(|s| &s.changes)
            .filter(|c| c.action != crate::plan::model::Action::NoOp)
            .map(|c| c.address.to_string())
            .collect();
        return Err(RotateError::NotInSync(format!("B.1 would change {}", changed.join(", "))));
    }
    let pending: Vec<String> = observation
        .live
        .held
        .iter()
        .filter(|(_, h)| !h.pending_reverts.is_empty())
        .map(|(t, _)| t.to_string())
        .collect();
    if !pending.is_empty() {
        return Err(RotateError::NotInSync(format!(
            "a self-revert of an earlier run is pending on {}",
            pending.join(", ")
        )));
    }
    let resources: Vec<Resource> = ws
        .in_order(&observation.selected)
        .filter(|n| ws.instance(*n).spec.id == "B.1")
        .flat_map(|n| ws.resources(n, &Selection::default()))
        .collect();
    let sites = if sites.is_empty() {
        t.sites.iter().map(|s| s.name.clone()).collect()
    } else {
        sites.iter().cloned().collect()
    };
    Ok(Prepared { observation, resources, sites })
}

/// How to rotate.
pub struct Options {
    pub state_dir: PathBuf,
    pub confirm_timeout: Duration,
}

/// A rotation done.
pub struct Done {
    pub run: String,
    pub journal: PathBuf,
    pub rotated: Rotated,
}

/// Journals the run and rotates.
pub fn run(
    ws: &Workspace,
    prepared: Prepared,
    opts: &Options,
    targets: &Targets,
    progress: Progress<'_>,
    rt: &tokio::runtime::Runtime,
) -> Result<Done, RotateError> {
    let (run, mut j) = super::apply::start_journal(ws, &opts.state_dir)?;
    let req = engine::Request {
        t: ws.topology(),
        targets,
        resources: &prepared.resources,
        live: &prepared.observation.live,
        sites: prepared.sites.clone(),
        run: run.clone(),
        confirm_timeout: opts.confirm_timeout,
    };
    let result = rt.block_on(engine::run(&req, &mut j, progress));
    if let Err(e) = j.write(&Entry::End { run: run.clone(), ok: result.is_ok() }) {
        progress(&format!("warning: cannot write the run's end to the journal {}: {e}", j.path.display()));
    }
    match result {
        Ok(rotated) => Ok(Done { run, journal: j.path.clone(), rotated }),
        Err(error) => Err(RotateError::Rotate { run, error: Box::new(error) }),
    }
}
