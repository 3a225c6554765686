//! `fabric validate`: every problem of a topology at once.

use clap::{Args, ValueEnum};
use miette::Report;

use super::{Done, load};
use crate::catalog::{Catalog, StepGraph, refusal};
use crate::command::args::Global;
use crate::desired::consistency::{self, Level};
use crate::steps;
use crate::topology::problem::{Diag, DiagJson, Problem, Severity};
use crate::topology::{self, LoadError};

/// Check a topology file: YAML, structure, names, references, prefixes, quotas, versions, decisions, consistency
///
/// Exit status: 0 when valid (warnings allowed), 1 when there is any error. Every problem is
/// reported at once, each with file:line:column and a hint. Consistency: every label the
/// objects select on is set, and every object, queue or namespace they name is made by a step
/// they depend on (render and plan also check kinds, overrider paths and ArgoCD's folder).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  fabric -f topology.yaml validate\n  fabric validate --format json | jq '.[] | .message'"
)]
pub struct Opts {
    /// Output format of the diagnostics
    #[arg(long, value_enum, default_value_t = ValidateFormat::Human)]
    pub format: ValidateFormat,
    /// Also check `versions:` against what runs, as a snapshot (`fabric state snapshot`) read
    /// it: a version change upstream's upgrade rules forbid is refused at its line
    #[arg(long, value_name = "FILE")]
    pub observed: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ValidateFormat {
    Human,
    Json,
}

/// Warnings that validate adds on top of the loader's: steps that plan and apply will refuse.
pub fn refusal_warnings(l: &topology::Loaded) -> Result<Vec<Diag>, Report> {
    let catalog = Catalog::embedded().map_err(|e| {
        super::usage("catalog::invalid", e.to_string(), "the embedded catalog is broken: please report this")
    })?;
    let graph = StepGraph::build(&catalog, &l.topology).map_err(|e| {
        super::usage("graph::invalid", e.to_string(), "check the sites' clusters and external workloads")
    })?;
    let refusals = refusal::refusals(&graph, &l.topology);
    // One warning per open decision, naming every step it blocks.
    let mut by_field: Vec<(String, Problem, Vec<String>)> = Vec::new();
    for (n, p) in refusals {
        let key = p.path.to_string();
        let step = graph.graph[n].key();
        match by_field.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, _, steps)) => steps.push(step),
            None => by_field.push((key, p, vec![step])),
        }
    }
    Ok(by_field
        .into_iter()
        .map(|(field, p, steps)| {
            let w = if p.code == "plan::unsupported" {
                Problem::warning("plan::unsupported", p.path.clone(), p.message.clone()).label(p.label.clone())
            } else {
                Problem::warning(
                    "plan::undecided",
                    p.path.clone(),
                    format!("`{field}` is undecided: plan and apply will refuse {}", steps.join(", ")),
                )
                .label("undecided")
            };
            l.diag(w.help(p.help.unwrap_or_default()))
        })
        .collect())
}

/// The consistency pass's findings that the topology alone decides (`Level::Topology`).
pub fn consistency_diags(l: &topology::Loaded) -> Result<Vec<Diag>, Report> {
    let catalog = steps::with_code_needs(Catalog::embedded().map_err(|e| {
        super::usage("catalog::invalid", e.to_string(), "the embedded catalog is broken: please report this")
    })?);
    let (graph, desired) = steps::resolve(&catalog, &l.topology).map_err(|e| {
        super::usage("graph::invalid", e.to_string(), "check the sites' clusters and external workloads")
    })?;
    let found = consistency::check(&l.topology, &graph, &desired, Level::Topology);
    Ok(found.into_iter().map(|p| l.diag(p)).collect())
}

/// The error that ends a command whose diagnostics hold consistency errors (printed above it).
pub fn consistency_error(diags: &[Diag]) -> Option<Report> {
    let errors = diags.iter().filter(|d| d.problem.severity == Severity::Error).count();
    (errors > 0).then(|| {
        super::usage(
            "consistency::failed",
            format!("{errors} consistency error(s): the objects would not work together"),
            "fix the topology lines shown above (docs/errors.md explains each code)",
        )
    })
}

/// What `--observed` read, when given.
fn observed(o: &Opts) -> Result<Option<crate::live::observe::Live>, Report> {
    let Some(file) = &o.observed else { return Ok(None) };
    let snap = crate::live::snapshot::read(file).map_err(|e| super::usage("state::read", e.to_string(), e.help()))?;
    Ok(Some(snap.live))
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    if o.format == ValidateFormat::Human {
        let loaded = load(g)?;
        if let Some(live) = observed(&o)? {
            skew_refusal(g, &loaded, &live)?;
        }
        let extra = refusal_warnings(&loaded)?;
        let found = consistency_diags(&loaded)?;
        if !g.quiet {
            super::print_diags(&extra, g);
        }
        super::print_findings(&found, g);
        if let Some(e) = consistency_error(&found) {
            return Err(e);
        }
        let warnings = loaded.warnings.len() + extra.len() + found.len();
        if !g.quiet {
            let t = &loaded.topology;
            crate::outln!(
                "{}: valid ({} sites, {} services, {} warning{})",
                loaded.file,
                t.sites.len(),
                t.services.len(),
                warnings,
                if warnings == 1 { "" } else { "s" }
            );
        }
        return Ok(Done::Ok);
    }
    // JSON: the same diagnostics as data on stdout, exit 1 on any error.
    let file;
    let result = if g.example {
        file = super::EXAMPLE_NAME.to_string();
        topology::load_str(&file, super::EXAMPLE.to_string())
    } else {
        file = super::topology_path(g).display().to_string();
        topology::load_file(&super::topology_path(g))
    };
    let (diags, ok) = match result {
        Ok(l) => {
            let mut d = l.warnings.clone();
            d.extend(refusal_warnings(&l)?);
            d.extend(consistency_diags(&l)?);
            if let Some(live) = observed(&o)? {
                d.extend(skew_diags(&l, &live));
            }
            let ok = !d.iter().any(|d| d.problem.severity == Severity::Error);
            (d, ok)
        }
        Err(LoadError::Invalid { diags, .. }) => {
            let ok = !diags.iter().any(|d| d.problem.severity == Severity::Error);
            (diags, ok)
        }
        Err(e) => {
            return Err(super::usage("topology::io", e.to_string(), "give a regular file of at most 1 MiB with -f"));
        }
    };
    let json: Vec<DiagJson> = diags.iter().map(DiagJson::from).collect();
    crate::outln!("{}", serde_json::json!({ "file": file, "valid": ok, "diagnostics": json }));
    if ok {
        Ok(Done::Ok)
    } else {
        Err(super::usage("topology::invalid", format!("{file} is not valid"), "see the diagnostics printed as JSON"))
    }
}

/// The `versions:` lines upstream's upgrade rules forbid from what `live` shows runs
/// (`desired::upgrade`).
pub fn skew_diags(
    l: &crate::topology::Loaded,
    live: &crate::live::observe::Live,
) -> Vec<crate::topology::problem::Diag> {
    let running = crate::live::versions::running(&l.topology, live);
    crate::desired::upgrade::problems(&l.topology, &running).into_iter().map(|p| l.diag(p)).collect()
}

/// Refuses, at the `versions:` line, a change upstream's upgrade rules forbid from what runs:
/// nothing is planned past it.
pub fn skew_refusal(g: &Global, l: &crate::topology::Loaded, live: &crate::live::observe::Live) -> Result<(), Report> {
    let diags = skew_diags(l, live);
    if diags.is_empty() {
        return Ok(());
    }
    super::print_diags(&diags, g);
    Err(super::usage(
        "plan::skew",
        format!("{} version change(s) upstream's upgrade rules forbid from what runs", diags.len()),
        "change the `versions:` line shown above to a release the rule allows (one minor at a time), apply it, then the next",
    ))
}
