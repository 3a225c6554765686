//! The command line: global flags and one subcommand per file in `command/`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "fabric",
    version,
    about = "Plan and apply a multi-site K3s fabric (Cilium, WireGuard, Karmada, Kueue) from one topology file",
    long_about = "fabric reads one topology file describing every site, builds the dependency graph of the \
                  seed's steps A.1–D.4, shows what would change (plan) and changes it step by step (apply).",
    after_help = "Examples:\n  fabric --example plan --offline       plan the embedded example, contacting nothing\n  \
                  fabric -f topology.yaml validate      check a topology and show every problem\n  \
                  fabric graph --format mermaid         the step graph as a Mermaid diagram"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

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

#[derive(Debug, Subcommand)]
pub enum Command {
    Validate(crate::command::validate::Opts),
    Graph(crate::command::graph::Opts),
    Plan(crate::command::plan::Opts),
    Render(crate::command::render::Opts),
    Apply(crate::command::apply::Opts),
    Rollback(crate::command::rollback::Opts),
    State(crate::command::state::Opts),
    Verify(crate::command::verify::Opts),
    Completions(crate::command::completions::Opts),
    Man(crate::command::completions::ManOpts),
    Schema(crate::command::schema::Opts),
}

/// Output formats shared by commands that machines read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    Json,
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
