//! `fabric rollback`: put back what an apply changed, from its journal.

use clap::Args;
use miette::Report;

use super::Done;
use super::events::{self, Stream, Summary};
use crate::command::args::Global;
use crate::operation::rollback as rollback_op;

/// Revert an apply's recorded rollback points, newest step first
///
/// Without RUN-ID, the newest run in .fabric/runs. A RUN-ID this machine does not have is
/// fetched from the clusters it was shared in (`fabric runs` lists every operator's runs).
/// Secrets are never restored from a journal: a `fabric rotate credentials` run's Secrets are put
/// back from the old data it kept beside each in the cluster. The rollback takes the same locks
/// as an apply: one another run holds refuses it naming the holder, or with --lock-timeout is
/// waited for. With --json (or --format json), stdout carries one JSON event per line
/// (docs/errors.md, "Machine-readable output").
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  fabric rollback\n  fabric rollback 20261130T061502Z-4242\n  \
                  fabric rollback --lock-timeout 2m --json   wait for a colleague's lock; JSON events")]
pub struct Opts {
    /// The run to revert (a file name under .fabric/runs, without .jsonl)
    #[arg(value_name = "RUN-ID")]
    pub run: Option<String>,
    #[command(flatten)]
    pub events: crate::command::args::RunArgs,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    events::streamed(o.events.json(), "rollback", &super::topology_name(g), |stream| rollback(g, &o, stream))
}

/// The rollback itself; with `stream`, its events go there as JSON lines and nothing else is
/// printed on stdout.
fn rollback(g: &Global, o: &Opts, stream: Option<&Stream>) -> Result<(Done, Summary), Report> {
    let ws = super::workspace(g)?;
    let targets = super::targets(g, &ws)?;
    let rt = crate::operation::runtime()?;
    let lines = super::progress_lines(g.quiet);
    let progress = |line: &str| match stream {
        Some(s) => s.message(line),
        None => lines(line),
    };
    // Another operator's run: its journal comes from the clusters it was shared in.
    if let Some(r) = o.run.as_deref().filter(|r| crate::apply::journal::is_run_id(r)) {
        ws.live_allowed("it holds production addresses: roll back runs of a topology of your own")?;
        if crate::operation::runs::fetch(&targets, &g.state_dir, r, &rt)? {
            progress(&format!("run {r} is another machine's: its journal was fetched from the clusters"));
        }
    }
    let run = rollback_op::choose_run(&g.state_dir, o.run.clone())?;
    let sink = events::sink(stream);
    let hooks = events::hooks(&progress, &sink, stream, o.events.lock_timeout);
    let done = rollback_op::run(&ws, &g.state_dir, &run, &targets, hooks, &rt)?;
    let (outcome, message) = match done.steps.is_empty() {
        true => ("nothing-to-roll-back", format!("Nothing to roll back in run {run}.")),
        false => ("rolled-back", format!("Rolled back run {run}: {} step(s).", done.steps.len())),
    };
    if stream.is_none() {
        crate::outln!("{message}");
    }
    Ok((Done::Ok, Summary { outcome, run: Some(run), steps: done.steps, message }))
}
