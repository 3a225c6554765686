//! `fabric rollback`: put back what an apply changed, from its journal.

use clap::Args;
use miette::Report;

use super::Done;
use crate::command::args::Global;
use crate::operation::rollback as rollback_op;

/// Revert an apply's recorded rollback points, newest step first
///
/// Without RUN-ID, the newest run in .fabric/runs. A RUN-ID this machine does not have is
/// fetched from the clusters it was shared in (`fabric runs` lists every operator's runs).
/// Secrets are never restored from a journal: a `fabric rotate credentials` run's Secrets are put
/// back from the old data it kept beside each in the cluster.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  fabric rollback\n  fabric rollback 20261130T061502Z-4242")]
pub struct Opts {
    /// The run to revert (a file name under .fabric/runs, without .jsonl)
    #[arg(value_name = "RUN-ID")]
    pub run: Option<String>,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let ws = super::workspace(g)?;
    let targets = super::targets(g, &ws)?;
    let rt = crate::operation::runtime()?;
    // Another operator's run: its journal comes from the clusters it was shared in.
    if let Some(r) = o.run.as_deref().filter(|r| crate::apply::journal::is_run_id(r)) {
        ws.live_allowed("it holds production addresses: roll back runs of a topology of your own")?;
        if crate::operation::runs::fetch(&targets, &g.state_dir, r, &rt)? && !g.quiet {
            eprintln!("fabric: run {r} is another machine's: its journal was fetched from the clusters");
        }
    }
    let run = rollback_op::choose_run(&g.state_dir, o.run)?;
    let progress = super::progress_lines(g.quiet);
    let done = rollback_op::run(&ws, &g.state_dir, &run, &targets, &progress, &rt)?;
    if done.steps.is_empty() {
        crate::outln!("Nothing to roll back in run {run}.");
    } else {
        crate::outln!("Rolled back run {run}: {} step(s).", done.steps.len());
    }
    Ok(Done::Ok)
}
