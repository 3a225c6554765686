//! `fabric apply`: change the targets step by step, with rollback points.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use miette::Report;

use super::{Done, usage};
use crate::apply::journal::{self, Entry, Journal};
use crate::apply::{self, Options, StepWork};
use crate::command::cli::Global;
use crate::plan::select::Selection;
use crate::plan::view;
use crate::style::Style;

/// Apply the changes of the selected steps, in order, with rollback points
///
/// Reads live state, shows the plan and asks for `yes` (unless --auto-approve). Every step is
/// journaled under .fabric/runs before it changes anything; a failed change or check reverts
/// the step and stops. Routers revert by themselves unless fabric confirms the change over a
/// new connection within --confirm-timeout. With PLANFILE (from `plan --out`), the plan's steps
/// are applied only if nothing it observed has changed since.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  fabric apply --step B.1\n  fabric plan --step B.1 --out b1.plan && fabric apply b1.plan\n  \
                        fabric apply --phase B --site sp --auto-approve"
)]
pub struct Opts {
    /// A plan written by `fabric plan --out`; refused when stale
    #[arg(value_name = "PLANFILE")]
    pub planfile: Option<PathBuf>,
    #[command(flatten)]
    pub selection: crate::command::cli::SelectionArgs,
    /// Do not ask for confirmation
    #[arg(long)]
    pub auto_approve: bool,
    /// Take over fields another field manager owns in Kubernetes objects (server-side apply force)
    #[arg(long)]
    pub force_conflicts: bool,
    /// Seconds a router waits for confirmation before reverting by itself (VyOS rounds up to minutes)
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub confirm_timeout: u64,
    /// Seconds to wait for each applied Kubernetes object to be done (a chart's install Job
    /// complete, a Deployment rolled out, a Karmada Cluster Ready, a ClusterQueue Active, a kind
    /// served); past it the step fails and is reverted
    #[arg(long, value_name = "SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub wait_timeout: u64,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let mut selection: Selection = o.selection.into();
    let mut expected: Option<(String, String)> = None;
    if let Some(path) = &o.planfile {
        let text = std::fs::read_to_string(path).map_err(|e| {
            usage(
                "apply::planfile",
                format!("cannot read {}: {e}", path.display()),
                "give a file written by `fabric plan --out`",
            )
        })?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            usage(
                "apply::planfile",
                format!("{} is not a plan: {e}", path.display()),
                "give a file written by `fabric plan --out`",
            )
        })?;
        let rec: crate::plan::model::SelectionRecord = serde_json::from_value(v["selection"].clone()).map_err(|e| {
            usage("apply::planfile", format!("{}: {e}", path.display()), "re-create it with `fabric plan --out`")
        })?;
        let mode: crate::plan::model::Mode = serde_json::from_value(v["mode"].clone()).map_err(|e| {
            usage("apply::planfile", format!("{}: {e}", path.display()), "re-create it with `fabric plan --out`")
        })?;
        // A plan made from live state or from a snapshot names what it observed; apply re-reads
        // and goes on only if that is still what is live.
        let fingerprint = match mode {
            crate::plan::model::Mode::Live { fingerprint } | crate::plan::model::Mode::Observed { fingerprint, .. } => {
                fingerprint
            }
            crate::plan::model::Mode::Offline => {
                return Err(usage(
                    "apply::planfile",
                    "an offline plan cannot be applied",
                    "make the plan without --offline",
                ));
            }
        };
        selection = Selection { phases: rec.phases, steps: rec.steps, sites: rec.sites, with_deps: rec.with_deps };
        expected = Some((v["topology_digest"].as_str().unwrap_or_default().to_string(), fingerprint));
    }
    let rt = crate::operation::workspace::runtime()?;
    let prep = crate::operation::workspace::prepare(g, selection.clone(), &rt)?;
    let t = &prep.loaded.topology;
    let p = prep.plan(&selection.sites);
    if p.summary.refused_steps > 0 {
        print!("{}", view::human(&p, &Style::stdout(g.no_color)));
        return Err(usage(
            "plan::refused",
            "selected steps are refused: a decision they need is undecided",
            "decide it under `decisions:`, or narrow the selection",
        ));
    }
    if let Some((digest, fingerprint)) = &expected {
        if *digest != crate::operation::workspace::digest(&prep.loaded.text) {
            return Err(usage("apply::stale", "the topology changed since the plan was made", "make a new plan"));
        }
        if *fingerprint != prep.live.fingerprint() {
            return Err(usage(
                "apply::stale",
                "the plan is stale: the live state changed since it was made",
                "run `fabric plan` again and review the new changes",
            ));
        }
    }
    if !p.unreachable.is_empty() {
        print!("{}", view::human(&p, &Style::stdout(g.no_color)));
        let names: Vec<&str> = p.unreachable.iter().map(|u| u.target.as_str()).collect();
        return Err(usage(
            "apply::unreachable",
            format!("cannot apply: {} could not be read", names.join(", ")),
            "apply the reachable sites with --site, or restore the link first",
        ));
    }
    if !p.has_changes() {
        if !g.quiet {
            println!("No changes. The live state matches the topology.");
        }
        return Ok(Done::Ok);
    }
    if !g.quiet || !o.auto_approve {
        print!("{}", view::human(&p, &Style::stdout(g.no_color)));
    }
    if !o.auto_approve {
        if !std::io::stdin().is_terminal() {
            return Err(usage(
                "apply::approve",
                "apply needs approval and stdin is not a terminal",
                "add --auto-approve (CI), or run it at a terminal",
            ));
        }
        print!("\nDo you want to perform these actions? Only 'yes' will be accepted to approve.\n  Enter a value: ");
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if answer.trim() != "yes" {
            println!("Apply cancelled.");
            return Err(usage("apply::cancelled", "apply cancelled", "nothing was changed"));
        }
    }
    let run_id = journal::new_run_id();
    let mut j = Journal::create(&g.state_dir, &run_id).map_err(|e| {
        usage(
            "apply::journal",
            format!("cannot create the journal in {}: {e}", g.state_dir.display()),
            "make the directory writable",
        )
    })?;
    let user = std::env::var("USER").unwrap_or_default();
    j.write(&Entry::Start {
        run: run_id.clone(),
        fabric: t.name.clone(),
        topology_digest: crate::operation::workspace::digest(&prep.loaded.text),
        user,
    })
    .map_err(|e| usage("apply::journal", e.to_string(), "make the directory writable"))?;
    let steps: Vec<StepWork> = prep
        .graph
        .order
        .iter()
        .filter(|n| prep.selected.contains(n))
        .map(|n| {
            let inst = &prep.graph.graph[*n];
            StepWork {
                key: inst.key(),
                id: inst.spec.id.clone(),
                needs: prep.graph.dependencies(*n).iter().map(|d| prep.graph.graph[*d].key()).collect(),
                resources: crate::desired::for_instance(inst, t)
                    .into_iter()
                    .chain(prep.orphans.get(n).cloned().unwrap_or_default())
                    .filter(|r| {
                        selection.sites.is_empty() || r.site.as_ref().is_none_or(|s| selection.sites.contains(s))
                    })
                    .collect(),
            }
        })
        .filter(|s| !s.resources.is_empty())
        .collect();
    let opts = Options {
        run: run_id.clone(),
        state_dir: g.state_dir.clone(),
        confirm_timeout: Duration::from_secs(o.confirm_timeout),
        force_conflicts: o.force_conflicts,
        wait_timeout: Duration::from_secs(o.wait_timeout),
    };
    // A spinner on a terminal; plain lines otherwise (CI logs).
    let quiet = g.quiet;
    let bar = (std::io::stderr().is_terminal() && !quiet).then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(indicatif::ProgressStyle::with_template("{spinner} {elapsed:>3} {msg}").expect("valid template"));
        b.enable_steady_tick(Duration::from_millis(120));
        b
    });
    let spinner = bar.clone();
    let progress = move |line: &str| match &spinner {
        Some(b) if line.contains("applying") => b.set_message(line.to_string()),
        Some(b) => b.println(format!("fabric: {line}")),
        None if !quiet => eprintln!("fabric: {line}"),
        None => {}
    };
    let result = rt.block_on(apply::run(t, &steps, &prep.targets, prep.live.clone(), &opts, &mut j, &progress));
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    match result {
        Ok(done) => {
            if !g.quiet {
                println!("Apply complete: {} step(s) changed. Run {run_id}; journal {}", done.len(), j.path.display());
            }
            Ok(Done::Ok)
        }
        Err(e) => Err(usage("apply::failed", format!("{e} (run {run_id})"), e.help())),
    }
}
