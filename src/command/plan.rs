//! `fabric plan`: what apply would change, per step and resource.

use std::path::PathBuf;

use clap::Args;
use miette::Report;

use super::{Done, load, usage};
use crate::command::cli::{Format, Global};
use crate::desired;
use crate::plan::model::{Plan, SelectionRecord};
use crate::plan::{self, select::Selection, view};
use crate::style::Style;

/// Show what `apply` would change, step by step
///
/// Reads every target of the selected steps (one SSH connection per host, all at once), diffs
/// live against desired state and prints the changes. A target that cannot be reached is
/// reported with the reason and the rest is still planned. Exit status: 0 no changes, 1 error
/// (including a refused step), 2 changes with --detailed-exitcode. `--offline` reads nothing:
/// every resource is planned as absent.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  fabric --example plan --offline\n  fabric plan --step B.1 --out b1.plan\n  \
                        fabric plan --offline --phase B --with-deps\n  \
                        fabric plan --offline --site sp --format markdown --detailed-exitcode\n  \
                        fabric plan --observed state.json --format markdown --detailed-exitcode")]
pub struct Opts {
    #[command(flatten)]
    pub selection: crate::command::cli::SelectionArgs,
    /// Read nothing live: plan every resource as absent (for CI without credentials)
    #[arg(long, conflicts_with = "observed")]
    pub offline: bool,
    /// Read nothing live: plan against a snapshot from `fabric state snapshot`
    #[arg(long, value_name = "FILE")]
    pub observed: Option<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Exit 2 when there are changes, 0 when there are none
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Also write the plan (JSON) to this file, for `fabric apply PLANFILE`
    #[arg(long, value_name = "PLANFILE")]
    pub out: Option<PathBuf>,
}

pub fn selection_record(s: &Selection) -> SelectionRecord {
    SelectionRecord { phases: s.phases.clone(), steps: s.steps.clone(), sites: s.sites.clone(), with_deps: s.with_deps }
}

/// Makes the plan the flags ask for (live, offline, or against a snapshot).
pub fn make(
    g: &Global,
    selection: Selection,
    offline: bool,
    observed: Option<&std::path::Path>,
) -> Result<Plan, Report> {
    let mut p = if let Some(file) = observed {
        let snap = super::state::read(file)?;
        let loaded = load(g)?;
        let t = &loaded.topology;
        if snap.topology_digest != crate::operation::workspace::digest(&loaded.text) && !g.quiet {
            eprintln!(
                "note: {} was taken with another version of the topology; the plan compares the current topology with that state",
                file.display()
            );
        }
        let (catalog, graph) = super::graph::build(t)?;
        let live = snap.live.clone();
        let pending = |n| {
            desired::for_instance(&graph.graph[n], t).iter().any(|r| match crate::plan::diff::change(r, &live) {
                Some(c) => c.action != crate::plan::model::Action::NoOp,
                None => true,
            })
        };
        let selected = selection
            .resolve(&catalog, &graph, t, pending)
            .map_err(|e| usage("plan::selection", e.to_string(), e.help()))?;
        let mut p =
            plan::build(t, &loaded.file, &graph, &selected, &selection.sites, Some(&live), &snap.orphans(&graph));
        p.mode =
            crate::plan::model::Mode::Observed { file: file.display().to_string(), fingerprint: live.fingerprint() };
        p.topology_digest = crate::operation::workspace::digest(&loaded.text);
        p
    } else if offline {
        let loaded = load(g)?;
        let t = &loaded.topology;
        let (catalog, graph) = super::graph::build(t)?;
        // Offline, nothing is known to exist: a step with resources always has pending changes.
        let pending = |n| !desired::for_instance(&graph.graph[n], t).is_empty();
        let selected = selection
            .resolve(&catalog, &graph, t, pending)
            .map_err(|e| usage("plan::selection", e.to_string(), e.help()))?;
        let mut p = plan::offline(t, &loaded.file, &graph, &selected, &selection.sites);
        p.topology_digest = crate::operation::workspace::digest(&loaded.text);
        p
    } else {
        let rt = crate::operation::workspace::runtime()?;
        let prep = crate::operation::workspace::prepare(g, selection.clone(), &rt)?;
        prep.plan(&selection.sites)
    };
    p.selection = selection_record(&selection);
    Ok(p)
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let Opts { selection, offline, observed, format, detailed_exitcode, out } = o;
    let p = make(g, selection.into(), offline, observed.as_deref())?;
    let text = match format {
        Format::Human => view::human(&p, &Style::stdout(g.no_color)),
        Format::Json => view::json(&p),
        Format::Markdown => view::markdown(&p),
    };
    if !(g.quiet && format == Format::Human) {
        print!("{text}");
    }
    if let Some(path) = out {
        std::fs::write(&path, view::json(&p)).map_err(|e| {
            usage(
                "plan::out",
                format!("cannot write {}: {e}", path.display()),
                "check the directory exists and is writable",
            )
        })?;
    }
    if !p.unreachable.is_empty() {
        let names: Vec<String> = p.unreachable.iter().map(|u| format!("{}: {}", u.target, u.reason)).collect();
        return Err(usage(
            "plan::unreachable",
            format!("{} target(s) could not be read; the rest is planned above", p.unreachable.len()),
            format!("{}\n(apply the other sites with --site; the unreachable ones keep their state)", names.join("\n")),
        ));
    }
    let server_refused: Vec<String> = p
        .steps
        .iter()
        .flat_map(|s| &s.changes)
        .filter_map(|c| c.refused.as_ref().map(|r| format!("{}: {r}", c.address)))
        .collect();
    if !server_refused.is_empty() {
        return Err(usage(
            "plan::server-refused",
            format!("the API server would refuse {} change(s)", server_refused.len()),
            format!(
                "{}\n(a conflict with another field manager needs `apply --force-conflicts`; an invalid field is a bug in fabric's objects: please report it)",
                server_refused.join("\n")
            ),
        ));
    }
    if p.summary.refused_steps > 0 {
        return Err(usage(
            "plan::refused",
            format!("{} selected step(s) refused: a decision they need is undecided", p.summary.refused_steps),
            "decide it in the topology's `decisions:`, or leave those steps out with --phase/--step/--site",
        ));
    }
    Ok(if detailed_exitcode && p.has_changes() { Done::Changes } else { Done::Ok })
}
