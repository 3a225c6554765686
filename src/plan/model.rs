//! The plan: desired against observed, per step and resource.
//!
//! Like terraform's plan, this is data that views only read. Fields that drive apply (`changes`,
//! `observed_fingerprint` later) are separate from display-only text (`summary`).

use serde::{Deserialize, Serialize};

use super::select::Selection;
use crate::addr::{Address, Target};
use crate::desired::{ProviderKind, Resource};

/// The format of `--format json` and planfiles (docs/plan-format.md): the minor version grows
/// when fields are added, the major one when a consumer must change. 1.1 added `held`; 1.4
/// added `changes[].upgrade`; 1.5 added `steps[].status` and `summary.unknown_steps`; 1.6 added `fabric_version` and
/// `topology_path`.
pub const FORMAT_VERSION: &str = "1.6";

/// This fabric's release, recorded in the plans it makes.
pub const FABRIC_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Create,
    Update,
    Delete,
    NoOp,
}

impl Action {
    pub fn symbol(self) -> &'static str {
        match self {
            Action::Create => "+",
            Action::Update => "~",
            Action::Delete => "-",
            Action::NoOp => " ",
        }
    }
    pub fn word(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::NoOp => "no-op",
        }
    }
}

/// How the plan learned the live state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Mode {
    /// Nothing was read: every resource is planned as absent.
    Offline,
    /// Targets were read (SSH, Kubernetes API); `fingerprint` digests what was observed (apply
    /// compares it).
    Live { fingerprint: String },
    /// Nothing was read: the state comes from a snapshot file (`fabric state snapshot`).
    Observed { file: String, fingerprint: String },
    /// Nothing was read: the change from what the base topology (`file`, e.g. the pull
    /// request's target branch) would write to what this one would. Never applied.
    Base { file: String },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Change {
    pub address: Address,
    pub action: Action,
    pub provider: ProviderKind,
    pub target: Target,
    /// Display only.
    pub summary: String,
    pub sensitive: bool,
    /// Unified diff of live against desired (never for sensitive resources); display only.
    pub diff: Option<String>,
    /// Why the API server would refuse this change (its dry run failed): a conflict with
    /// another field manager, or an invalid field.
    pub refused: Option<String>,
    /// Fields fabric sets that it leaves to the controller that took them over, one line each
    /// (`spec.suspend: left to kueue`); display only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_to_controllers: Vec<String>,
    /// A chart's version change: the upgrade, how its CRDs follow, the backup taken first (one
    /// line each, `desired::upgrade::chart_upgrade_lines`); display only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upgrade: Vec<String>,
}

impl Change {
    pub fn create(r: &Resource) -> Change {
        Change {
            address: r.address.clone(),
            action: Action::Create,
            provider: r.provider,
            target: r.target().clone(),
            summary: r.summary.clone(),
            sensitive: r.sensitive,
            diff: None,
            refused: None,
            left_to_controllers: Vec::new(),
            upgrade: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepPlan {
    /// `A.3@sp`, or `B.1` for a fabric-wide step.
    pub key: String,
    pub id: String,
    pub site: Option<String>,
    pub phase: String,
    pub title: String,
    pub risk: crate::catalog::spec::Risk,
    /// What the step costs beyond its risk where the operator decides (hypervisors running
    /// Cilium, node-to-node encryption inside a site): shown on the plan's risk line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub costs: Vec<String>,
    /// Keys of the steps this one needs.
    pub needs: Vec<String>,
    pub changes: Vec<Change>,
    /// Why the step cannot run (an open decision); such a step has no changes.
    pub refused: Option<String>,
    /// Targets of this step that could not be read: their resources are not in `changes`.
    pub unreachable: Vec<Target>,
    /// What the step's line says, set by [`Plan::summarize`] from the fields above (display
    /// only: a consumer need not derive "unknown" from `unreachable` itself).
    #[serde(default)]
    pub status: StepStatus,
}

/// A step's state in a plan. `Unknown` is never "no changes": a target of the step was not
/// read, so what it would change there is not known (whatever was read is in `changes`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepStatus {
    Changes,
    #[default]
    NoChanges,
    Unknown,
    Refused,
}

impl StepPlan {
    /// The status its fields say: refused first (nothing was planned), then unknown (a target
    /// was not read), then whether a known change is there.
    pub fn status_of(&self) -> StepStatus {
        if self.refused.is_some() {
            StepStatus::Refused
        } else if !self.unreachable.is_empty() {
            StepStatus::Unknown
        } else if self.changes.iter().any(|c| c.action != Action::NoOp) {
            StepStatus::Changes
        } else {
            StepStatus::NoChanges
        }
    }
}

impl StepPlan {
    /// B.1 (the tunnel, low risk, fabric-wide) with `changes` (for tests of plans and views).
    #[cfg(test)]
    pub fn tunnel(changes: Vec<Change>) -> StepPlan {
        StepPlan {
            key: "B.1".into(),
            id: "B.1".into(),
            site: None,
            phase: "B".into(),
            title: "tunnel".into(),
            risk: crate::catalog::spec::Risk::Low,
            costs: vec![],
            needs: vec![],
            changes,
            refused: None,
            unreachable: vec![],
            status: StepStatus::default(),
        }
    }
}

impl Plan {
    /// An offline plan of `steps` on the lab's topology file, not summarized (for tests of views).
    #[cfg(test)]
    pub fn of_steps(steps: Vec<StepPlan>) -> Plan {
        Plan {
            format_version: FORMAT_VERSION.into(),
            fabric: "lab".into(),
            topology_file: "t.yaml".into(),
            topology_digest: String::new(),
            fabric_version: FABRIC_VERSION.into(),
            topology_path: None,
            selection: Default::default(),
            mode: Mode::Offline,
            steps,
            unreachable: vec![],
            held: vec![],
            warnings: vec![],
            summary: Summary::default(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Summary {
    pub create: usize,
    pub update: usize,
    pub delete: usize,
    pub no_op: usize,
    pub refused_steps: usize,
    /// Steps with a target that was not read (1.5).
    #[serde(default)]
    pub unknown_steps: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Unreachable {
    pub target: Target,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub format_version: String,
    pub fabric: String,
    pub topology_file: String,
    /// SHA-256 of the topology file: a plan applies only to the topology it was made from.
    pub topology_digest: String,
    /// (1.6) The fabric release that made the plan: `apply PLANFILE` refuses a plan another
    /// release made, as the same topology may make other objects there. Empty in older plans.
    #[serde(default)]
    pub fabric_version: String,
    /// (1.6) The topology file's absolute path when the plan was made, so that `apply
    /// PLANFILE` needs no `-f` and names the file a mismatch is about. None for the embedded
    /// example and in older plans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_path: Option<String>,
    /// The selection the plan was made for, so `apply PLANFILE` works on the same steps.
    pub selection: Selection,
    pub mode: Mode,
    pub steps: Vec<StepPlan>,
    pub unreachable: Vec<Unreachable>,
    /// Locks and pending self-reverts on the plan's hosts: another apply or rollback may be
    /// running, or one died and left them (display only; `fabric lock` works on them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<Held>,
    /// What the operator should know that is not a change: a router's live WireGuard key that
    /// differs from the one the topology records (render writes the topology's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub summary: Summary,
}

/// What a host of the plan holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Held {
    pub target: Target,
    /// The lock's holder, and why it is stale if it is.
    pub lock: Option<String>,
    pub stale: Option<String>,
    pub pending_reverts: Vec<String>,
}

impl Plan {
    pub fn summarize(&mut self) {
        let mut s = Summary::default();
        for step in &mut self.steps {
            step.status = step.status_of();
            match step.status {
                StepStatus::Refused => s.refused_steps += 1,
                StepStatus::Unknown => s.unknown_steps += 1,
                StepStatus::Changes | StepStatus::NoChanges => {}
            }
            for c in &step.changes {
                match c.action {
                    Action::Create => s.create += 1,
                    Action::Update => s.update += 1,
                    Action::Delete => s.delete += 1,
                    Action::NoOp => s.no_op += 1,
                }
            }
        }
        self.summary = s;
    }

    pub fn has_changes(&self) -> bool {
        self.summary.create + self.summary.update + self.summary.delete > 0
    }
}
