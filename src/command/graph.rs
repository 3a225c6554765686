//! `fabric graph`: the steps of this topology and their dependencies.

use clap::{Args, ValueEnum};
use miette::Report;

use super::Done;
use crate::catalog::view;
use crate::command::args::Global;

/// Print the step graph (A.1–D.4 and G.1, instantiated per site) of the topology
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

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let ws = super::workspace(g)?;
    let graph = &ws.graph;
    let out = match o.format {
        GraphFormat::Text => view::text(graph),
        GraphFormat::Dot => view::dot(graph),
        GraphFormat::Mermaid => view::mermaid(graph),
        GraphFormat::Json => view::json(graph),
    };
    crate::out!("{out}");
    Ok(Done::Ok)
}
