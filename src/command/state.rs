//! `fabric state snapshot`: what plan reads, written to a file (`live::snapshot`), so that CI
//! can plan against it (`plan --observed FILE`) without credentials.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use miette::Report;

use super::Done;
use crate::command::args::Global;

/// Work with observed state
#[derive(Debug, Args)]
pub struct Opts {
    #[command(subcommand)]
    pub command: StateCommand,
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    Snapshot(SnapshotOpts),
}

/// Read the live state of the selected steps and write it to a file for `plan --observed`
///
/// A target that cannot be read is recorded as unreachable in the file (a plan from it marks
/// its steps unknown). Exit status: 0 when every target was read, 3 when some could not be
/// (they are named; the file is written), 1 when none could.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  fabric state snapshot --out state.json\n  fabric plan --observed state.json --format markdown --detailed-exitcode"
)]
pub struct SnapshotOpts {
    #[command(flatten)]
    pub selection: crate::command::args::SelectionArgs,
    /// Where to write the snapshot
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let StateCommand::Snapshot(o) = o.command;
    let ws = super::workspace(g)?;
    let targets = super::targets(g, &ws)?;
    let rt = crate::operation::runtime()?;
    let (snap, report) = crate::operation::snapshot::run(&ws, o.selection.into(), &targets, &o.out, &rt)?;
    super::print_read(g, &report, &snap.live);
    if !g.quiet {
        crate::outln!(
            "Wrote {}: {} resource state(s), {} unreachable target(s).",
            o.out.display(),
            snap.live.observed.len(),
            snap.live.unreachable.len()
        );
    }
    // The snapshot is written either way; what it could not read is unknown in it, not absent.
    let unread: Vec<String> = snap.live.unreachable.iter().map(|(t, why)| format!("{t}: {why}")).collect();
    super::unread_outcome("state::unread", report.per_target.len(), &unread, "their state is")
}
