//! Operations: plan, apply, rollback, verify, snapshot and render as whole units of work over a
//! [`Workspace`] (the topology, catalog, graph and desired state, resolved once from the
//! arguments). Commands parse flags, call one operation and pick a view; an operation owns the
//! flow and reports failures as [`OpError`], each with a code and what to do.

pub mod apply;
pub mod charts;
pub mod karmada_cert;
pub mod lock;
pub mod mesh_ca;
pub mod plan;
pub mod preflight;
pub mod read;
pub mod render;
pub mod rollback;
pub mod rotate_credentials;
pub mod rotate_wireguard;
pub mod runs;
pub mod snapshot;
pub mod verify;
pub mod workspace;

use miette::Diagnostic;

pub use read::Observation;
pub use workspace::Workspace;

use crate::apply::ApplyError;
use crate::apply::journal::JournalError;
use crate::catalog::graph::GraphError;
use crate::catalog::spec::CatalogError;
use crate::live::snapshot::SnapshotError;
use crate::plan::planfile::PlanfileError;
use crate::plan::select::SelectError;

/// Why an operation stopped. Messages and codes are those users and scripts see.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error("{0}")]
    Catalog(#[from] CatalogError),
    #[error("{0}")]
    Graph(#[from] GraphError),
    #[error("{0}")]
    Selection(#[from] SelectError),
    /// The example holds production addresses: it is never read live.
    #[error("the example topology is never read live")]
    ExampleIsOffline { help: &'static str },
    /// A file on this machine that a read needs (a kubeconfig, an SSH key the topology names)
    /// cannot be used: found before any connection.
    #[error("{}", .0.join("; "))]
    LocalFiles(Vec<String>),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("{0}")]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Planfile(#[from] PlanfileError),
    #[error("an offline plan cannot be applied")]
    OfflinePlanfile,
    /// The planfile was made from another topology, or from this file before it changed: the
    /// message names both and their digests.
    #[error("{0}")]
    StaleTopology(String),
    /// The planfile was made by another fabric release, whose objects may differ.
    #[error("{planfile} was made by {made_by}; this is fabric {this}")]
    OtherFabric { planfile: String, made_by: String, this: &'static str },
    /// Selected steps wait on a decision (found before anything is read): `key: why (file:line)`.
    #[error("{} selected step(s) wait on a decision: {}", .0.len(), .0.join("; "))]
    Undecided(Vec<String>),
    #[error("the plan is stale: the live state changed since it was made")]
    StaleLive,
    #[error("selected steps are refused: a decision they need is undecided or unsupported")]
    Refused,
    #[error("cannot apply: {} could not be read", .0.join(", "))]
    Unreachable(Vec<String>),
    #[error("cannot create the journal in {dir}: {source}")]
    JournalCreate { dir: String, source: std::io::Error },
    #[error("{0}")]
    Journal(#[from] JournalError),
    #[error("{error} (run {run})")]
    Apply { run: String, error: Box<ApplyError> },
    /// A file of the K3s bundle is missing, could not be downloaded, or is not the one the
    /// topology records: found before the run starts, so nothing was changed.
    #[error("{0}; nothing was applied")]
    Bundle(String),
    #[error("no run journal in {0}")]
    NoRun(String),
    #[error("`{0}` is not a run id")]
    NotARunId(String),
    #[error("cannot read {path}: {source}")]
    ReadJournal { path: String, source: std::io::Error },
    /// The state directory's runs folder exists but cannot be listed (`fabric runs`).
    #[error("cannot read the runs folder {path}: {source}")]
    RunsDir { path: String, source: std::io::Error },
    #[error("rollback of run {run} is incomplete: {}", .failed.join(" | "))]
    RollbackIncomplete { run: String, failed: Vec<String> },
    /// `fabric rotate credentials` stopped at a step (never with secret data in `reason`).
    #[error("rotation stopped: {reason} (run {run})")]
    Rotate { run: String, reason: String },
}

impl Diagnostic for OpError {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        let code = match self {
            OpError::Catalog(_) => "catalog::invalid",
            OpError::Graph(_) => "graph::invalid",
            OpError::Selection(_) => "plan::selection",
            OpError::ExampleIsOffline { .. } => "plan::needs-offline",
            OpError::LocalFiles(_) => "fabric::local-file",
            OpError::Runtime(_) => "fabric::runtime",
            OpError::Snapshot(SnapshotError::Write { .. }) => "state::write",
            OpError::Snapshot(_) => "state::read",
            OpError::Planfile(_) | OpError::OfflinePlanfile => "apply::planfile",
            OpError::StaleTopology(_) | OpError::StaleLive => "apply::stale",
            OpError::OtherFabric { .. } => "apply::planfile",
            OpError::Refused | OpError::Undecided(_) => "plan::refused",
            OpError::Unreachable(_) => "apply::unreachable",
            OpError::JournalCreate { .. } | OpError::Journal(_) => "apply::journal",
            OpError::Apply { .. } => "apply::failed",
            OpError::Bundle(_) => "apply::k3s-bundle",
            OpError::NoRun(_) => "rollback::none",
            OpError::NotARunId(_) => "rollback::run-id",
            OpError::ReadJournal { .. } => "rollback::journal",
            OpError::RunsDir { .. } => "runs::folder",
            OpError::RollbackIncomplete { .. } => "rollback::failed",
            OpError::Rotate { .. } => "rotate::failed",
        };
        Some(Box::new(code))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        let help: String = match self {
            OpError::Catalog(_) => "the embedded catalog in phases/ is broken: fix it and rebuild".into(),
            OpError::Graph(_) => "check the sites' clusters (`existing`) and external workloads".into(),
            OpError::Selection(e) => e.help(),
            OpError::ExampleIsOffline { help } => (*help).into(),
            OpError::LocalFiles(_) => {
                "put the file there, or correct its path in the topology (`kubeconfig.path`, `ssh.identity_file`); \
                 nothing was read"
                    .into()
            }
            OpError::Runtime(_) => "check the process limits".into(),
            OpError::Snapshot(e) => e.help().into(),
            OpError::Planfile(PlanfileError::Read { .. }) => "give a file written by `fabric plan --out`".into(),
            OpError::Planfile(PlanfileError::Write { .. }) => "check the directory exists and is writable".into(),
            OpError::Planfile(_) => "re-create it with `fabric plan --out`".into(),
            OpError::OfflinePlanfile => "make the plan without --offline".into(),
            OpError::StaleTopology(_) => {
                "make a new plan of this topology (`fabric plan --out PLANFILE`), or give the topology the plan \
                 was made from with -f"
                    .into()
            }
            OpError::OtherFabric { .. } => "make the plan again with this fabric (`fabric plan --out PLANFILE`)".into(),
            OpError::StaleLive => "run `fabric plan` again and review the new changes".into(),
            OpError::Refused | OpError::Undecided(_) => {
                "decide it under `decisions:` (`fabric validate` points at the line), or narrow the selection; \
                 nothing was read"
                    .into()
            }
            OpError::Unreachable(_) => "apply the reachable sites with --site, or restore the link first".into(),
            OpError::JournalCreate { .. } | OpError::Journal(_) => "make the directory writable".into(),
            OpError::Apply { error, .. } => error.help(),
            OpError::Bundle(_) => {
                "check the URL or fetch the release's file again, or record its digest under k3s_airgap (sha256sum FILE)"
                    .into()
            }
            OpError::NoRun(_) => "apply first, or give --state-dir".into(),
            OpError::NotARunId(_) => "give a run id as listed in .fabric/runs (like 20261130T061502Z-4242)".into(),
            OpError::ReadJournal { .. } => "give a run id listed in .fabric/runs".into(),
            OpError::RunsDir { .. } => {
                "fabric keeps each run's journal there: make it a directory this user can read, or name the state directory with --state-dir".into()
            }
            OpError::RollbackIncomplete { .. } => "fix the named targets and run rollback again".into(),
            OpError::Rotate { .. } => {
                "the step named was put back from the old data the run kept; fix the cause and rotate again (`fabric rollback RUN-ID` undoes the steps renewed before it)".into()
            }
        };
        Some(Box::new(help))
    }
}

/// The async runtime operations that read or change targets run on.
pub fn runtime() -> Result<tokio::runtime::Runtime, OpError> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().map_err(OpError::Runtime)
}

/// SHA-256 of a text, in hex (the topology's digest in plans, snapshots and journals).
pub fn digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}
