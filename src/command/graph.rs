//! `fabric graph`: the steps of this topology and their dependencies.

use clap::{Args, ValueEnum};
use miette::Report;

use super::{Done, load, usage};
use crate::catalog::{Catalog, StepGraph, view};
use crate::command::cli::Global;

/// Print the step graph (A.1–D.4 instantiated per site) of the topology
///
/// Per-site steps appear once per site as `STEP@SITE` (`A.3@sp`); fabric-wide steps as `STEP`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  fabric --example graph\n  fabric graph --format dot | dot -Tsvg > steps.svg\n  fabric graph --format mermaid"
)]
pub struct Opts {
    /// Output format
    #[arg(long, value_enum, default_value_t = GraphFormat::Text)]
    pub format: GraphFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    Text,
    Dot,
    Mermaid,
    Json,
}

pub fn build(t: &crate::topology::Topology) -> Result<(Catalog, StepGraph), Report> {
    let catalog = Catalog::embedded().map_err(|e| {
        usage("catalog::invalid", e.to_string(), "the embedded catalog in phases/ is broken: fix it and rebuild")
    })?;
    let graph = StepGraph::build(&catalog, t).map_err(|e| {
        usage("graph::invalid", e.to_string(), "check the sites' clusters (`existing`) and external workloads")
    })?;
    Ok((catalog, graph))
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let loaded = load(g)?;
    let (_, graph) = build(&loaded.topology)?;
    let out = match o.format {
        GraphFormat::Text => view::text(&graph),
        GraphFormat::Dot => view::dot(&graph),
        GraphFormat::Mermaid => view::mermaid(&graph),
        GraphFormat::Json => view::json(&graph),
    };
    print!("{out}");
    Ok(Done::Ok)
}
