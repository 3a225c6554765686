//! What a run (an apply, a rollback) reports as it goes, as typed events: people see each as the
//! progress line it stands for, a machine gets them as they are (`fabric apply --json`, whose
//! view is `command::events`). Other progress (waits, Leases, retries) stays plain lines.
//! Nothing here ever holds secret content: addresses, actions, step keys and the reasons the
//! engine already prints.

use crate::desired::Desired;
use crate::providers::{Observed, PendingChange};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A step starts: its hosts are locked next, then read again for its rollback point.
    StepStart { step: String },
    /// Read again under its locks, the step has nothing to change.
    StepNoChanges { step: String },
    /// A change of the step is sent to its target.
    ApplyStart { step: String, address: String, action: Action },
    /// The step's own check passed, with its evidence.
    CheckPassed { step: String, evidence: String },
    /// The step failed (`reason`) and is put back to its rollback point.
    StepErrored { step: String, reason: String },
    /// The step is applied, checked and confirmed.
    StepDone { step: String },
    /// A rollback put the step back to its rollback point.
    StepRolledBack { step: String },
}

/// What a change does to its resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Create,
    Update,
    Delete,
}

impl Action {
    /// The change's action: a pruned object deleted, an absent one created, else updated.
    pub fn of(c: &PendingChange) -> Action {
        match (&c.resource.desired, &c.prior) {
            (Desired::Prune(_), _) => Action::Delete,
            (_, Observed::Absent) => Action::Create,
            _ => Action::Update,
        }
    }
}

impl Event {
    /// The progress line people see for it; None for what only a machine is told.
    pub fn line(&self) -> Option<String> {
        match self {
            Event::StepStart { .. } => None,
            Event::StepNoChanges { step } => Some(format!("{step}: no changes")),
            Event::ApplyStart { step, address, .. } => Some(format!("{step}: applying {address}")),
            Event::CheckPassed { step, evidence } => Some(format!("{step}: check passed: {evidence}")),
            Event::StepErrored { step, reason } => Some(format!("{step}: {reason}; reverting")),
            Event::StepDone { step } => Some(format!("{step}: done")),
            Event::StepRolledBack { step } => Some(format!("{step}: rolled back")),
        }
    }
}

/// Where typed events go (`--json`); without it, their lines go to the run's progress.
pub type Events<'a> = &'a (dyn Fn(&Event) + Sync);

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines people saw before events existed are the same.
    #[test]
    fn each_event_stands_for_its_progress_line() {
        let step = "D.1@sp".to_string();
        assert_eq!(Event::StepStart { step: step.clone() }.line(), None);
        assert_eq!(Event::StepDone { step: step.clone() }.line().as_deref(), Some("D.1@sp: done"));
        let e = Event::StepErrored { step, reason: "check failed: x".into() };
        assert_eq!(e.line().as_deref(), Some("D.1@sp: check failed: x; reverting"));
    }
}
