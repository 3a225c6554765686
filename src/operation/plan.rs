//! The plan operation: what apply would change, from live state, from a snapshot, or offline.

use std::path::Path;

use super::{OpError, Workspace};
use crate::live::observe::Targets;
use crate::live::snapshot;
use crate::plan::model::{Action, Mode, Plan};
use crate::plan::select::Selection;
use crate::plan::{self, diff};

/// Where a plan's live state comes from.
pub enum Source<'a> {
    /// Nothing is read: every resource is planned as absent (CI without credentials).
    Offline,
    /// A snapshot written by `fabric state snapshot`.
    Snapshot(&'a Path),
    /// The targets themselves.
    Live { targets: &'a Targets, rt: &'a tokio::runtime::Runtime },
}

/// A plan, a note for the operator when the snapshot was taken from another topology, and what
/// was read (live plans only).
pub struct Planned {
    pub plan: Plan,
    pub note: Option<String>,
    pub observation: Option<super::Observation>,
}

pub fn make(ws: &Workspace, sel: Selection, source: Source<'_>) -> Result<Planned, OpError> {
    match source {
        Source::Offline => {
            // Offline, nothing is known to exist: a step with resources always has pending changes.
            let pending = |n| ws.desired.get(&n).is_some_and(|p| !p.resources.is_empty());
            let selected = ws.select(&sel, pending)?;
            let inputs = ws.plan_inputs(&selected, &sel, &Default::default());
            Ok(Planned {
                plan: plan::build(ws.header(&sel, Mode::Offline), inputs, None),
                note: None,
                observation: None,
            })
        }
        Source::Snapshot(file) => from_snapshot(ws, sel, file),
        Source::Live { targets, rt } => {
            let o = rt.block_on(ws.observe(sel, targets))?;
            Ok(Planned { plan: ws.plan_of(&o), note: None, observation: Some(o) })
        }
    }
}

fn from_snapshot(ws: &Workspace, sel: Selection, file: &Path) -> Result<Planned, OpError> {
    let snap = snapshot::read(file)?;
    let note = (snap.topology_digest != ws.digest).then(|| {
        format!(
            "{} was taken with another version of the topology; the plan compares the current topology with that state",
            file.display()
        )
    });
    let live = snap.live.clone();
    // A dependency whose resource the snapshot does not hold is pending: nothing says it is done.
    let pending = |n| {
        ws.resources(n, &Selection::default()).iter().any(|r| match diff::change(r, &live) {
            Some(c) => c.action != Action::NoOp,
            None => true,
        })
    };
    let selected = ws.select(&sel, pending)?;
    let mode = Mode::Observed { file: file.display().to_string(), fingerprint: live.fingerprint() };
    let inputs = ws.plan_inputs(&selected, &sel, &snap.orphans(&ws.graph));
    let mut plan = plan::build(ws.header(&sel, mode), inputs, Some(&live));
    plan.warnings = super::read::key_warnings(ws.topology(), &live);
    Ok(Planned { plan, note, observation: None })
}
