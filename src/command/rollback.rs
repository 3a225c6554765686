//! `fabric rollback`: put back what an apply changed, from its journal.

use std::collections::BTreeMap;

use clap::Args;
use miette::Report;

use super::{Done, load, usage};
use crate::apply::Pool;
use crate::apply::journal::{self, Entry, Journal};
use crate::apply::revert;
use crate::command::cli::Global;
use crate::live::observe::Targets;

/// Revert an apply's recorded rollback points, newest step first
///
/// Without RUN-ID, the newest run in .fabric/runs. Secrets are never restored from a journal.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  fabric rollback\n  fabric rollback 20261130T061502Z-4242")]
pub struct Opts {
    /// The run to revert (a file name under .fabric/runs, without .jsonl)
    #[arg(value_name = "RUN-ID")]
    pub run: Option<String>,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let run = match o.run.or_else(|| Journal::latest(&g.state_dir)) {
        Some(r) => r,
        None => {
            return Err(usage(
                "rollback::none",
                format!("no run journal in {}", journal::runs_dir(&g.state_dir).display()),
                "apply first, or give --state-dir",
            ));
        }
    };
    let path = journal::runs_dir(&g.state_dir).join(format!("{run}.jsonl"));
    let entries = Journal::read(&path).map_err(|e| {
        usage(
            "rollback::journal",
            format!("cannot read {}: {e}", path.display()),
            "give a run id listed in .fabric/runs",
        )
    })?;
    let steps = journal::steps_to_roll_back(&entries);
    if steps.is_empty() {
        println!("Nothing to roll back in run {run}.");
        return Ok(Done::Ok);
    }
    let loaded = load(g)?;
    let targets = Targets::from_topology(&loaded.topology, &crate::operation::workspace::ssh_config(g)?);
    let rt = crate::operation::workspace::runtime()?;
    let mut j = Journal::create(&g.state_dir, &run)
        .map_err(|e| usage("rollback::journal", e.to_string(), "make .fabric writable"))?;
    let mut failed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    rt.block_on(async {
        let pool = Pool::default();
        for (step, priors) in &steps {
            let applied: Vec<_> = priors.iter().map(|p| (revert::resource_from_prior(p), p.prior.clone())).collect();
            let left = revert::revert_all(&applied, &pool, &targets).await;
            if left.is_empty() {
                let _ = j.write(&Entry::RolledBack { run: run.clone(), step: step.clone() });
                if !g.quiet {
                    eprintln!("fabric: {step}: rolled back");
                }
            } else {
                failed.insert(step.clone(), left);
            }
        }
        pool.close().await;
    });
    if failed.is_empty() {
        println!("Rolled back run {run}: {} step(s).", steps.len());
        Ok(Done::Ok)
    } else {
        let what: Vec<String> = failed.iter().map(|(s, l)| format!("{s}: {}", l.join("; "))).collect();
        Err(usage(
            "rollback::failed",
            format!("rollback of run {run} is incomplete: {}", what.join(" | ")),
            "fix the named targets and run rollback again",
        ))
    }
}
