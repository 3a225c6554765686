//! `fabric schema`: the JSON Schema of the topology file, generated from the loader's types.

use clap::Args;
use miette::Report;

use super::Done;
use crate::cli::Global;

/// Print the JSON Schema of the topology file (for editors: yaml-language-server)
#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  fabric schema > topology.schema.json\n  # then, first line of topology.yaml:\n  # yaml-language-server: $schema=./topology.schema.json"
)]
pub struct Opts {}

pub fn run(_g: &Global, _o: Opts) -> Result<Done, Report> {
    println!("{}", serde_json::to_string_pretty(crate::topology::schema()).expect("schema serializes"));
    Ok(Done::Ok)
}
