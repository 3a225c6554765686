//! `fabric show PLANFILE`: a saved plan, as `plan` printed it (terraform's `show PLANFILE`).

use std::path::PathBuf;

use clap::Args;
use miette::Report;

use super::Done;
use crate::command::args::{Format, Global};
use crate::operation::OpError;

/// Show a plan saved by `fabric plan --out`, without reading the topology or any target
///
/// Prints what the plan recorded when it was made: its steps and changes, what was unreachable,
/// the fabric release and topology file it was made from. `fabric apply PLANFILE` applies it
/// without asking again (and refuses it if the live state or the topology changed since).
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  fabric plan --step B.1 --out b1.plan && fabric show b1.plan\n  \
                        fabric show b1.plan --format markdown\n  fabric show b1.plan --format json")]
pub struct Opts {
    /// A plan written by `fabric plan --out`
    #[arg(value_name = "PLANFILE")]
    pub planfile: PathBuf,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Also show the resources and steps without changes (hidden by default)
    #[arg(long)]
    pub show_unchanged: bool,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let p = crate::plan::planfile::read(&o.planfile).map_err(OpError::from)?;
    super::plan::print(g, &p, o.format, o.show_unchanged);
    Ok(Done::Ok)
}
