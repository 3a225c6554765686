//! Flags every subcommand shares: the global ones, output formats, the step selection. Kept
//! apart from `cli` (which names every subcommand) so that subcommands import these without
//! importing each other.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Debug, Args)]
pub struct Global {
    /// Topology file [default: ./topology.yaml]
    #[arg(short = 'f', long = "topology", global = true, env = "FABRIC_TOPOLOGY", value_name = "FILE")]
    pub topology: Option<PathBuf>,
    /// Use the embedded example topology (the whole seed); only offline work is allowed with it
    #[arg(long, global = true, conflicts_with = "topology")]
    pub example: bool,
    /// ssh_config file for hosts' addresses, users, keys, known_hosts [default: ~/.ssh/config]
    #[arg(long, global = true, env = "FABRIC_SSH_CONFIG", value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,
    /// Directory for run journals [default: ./.fabric]
    #[arg(long, global = true, env = "FABRIC_STATE_DIR", value_name = "DIR", default_value = ".fabric")]
    pub state_dir: PathBuf,
    /// Never color output (NO_COLOR is honoured too)
    #[arg(long, global = true)]
    pub no_color: bool,
    /// More output: -v what was read and how long it took, -vv every resource's state
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Less output: errors and the result only
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

/// Output formats shared by commands that machines read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people at a terminal (also spelled `text`)
    #[value(alias = "text")]
    Human,
    /// For machines (docs/plan-format.md for plans)
    Json,
    /// For pull-request comments
    Markdown,
}

/// The step selection shared by plan and apply.
#[derive(Debug, Clone, Args)]
pub struct SelectionArgs {
    /// Only steps of this phase (A, B, C, D, G); repeatable
    #[arg(long = "phase", value_name = "P")]
    pub phases: Vec<String>,
    /// Only this step (A.3) or step instance (A.3@sp); repeatable
    #[arg(long = "step", value_name = "S")]
    pub steps: Vec<String>,
    /// Only this site's steps and resources; repeatable
    #[arg(long = "site", value_name = "NAME")]
    pub sites: Vec<String>,
    /// Also select every step the selected ones need
    #[arg(long)]
    pub with_deps: bool,
}

impl From<SelectionArgs> for crate::plan::select::Selection {
    fn from(a: SelectionArgs) -> Self {
        crate::plan::select::Selection { phases: a.phases, steps: a.steps, sites: a.sites, with_deps: a.with_deps }
    }
}
