//! The command line: global flags and one subcommand per file in `command/`.

use clap::{CommandFactory, Parser, Subcommand};
use clap_complete::Shell;

pub use super::args::{Format, Global, SelectionArgs};

#[derive(Debug, Parser)]
#[command(
    name = "fabric",
    version,
    about = "Plan and apply a multi-site K3s fabric (Cilium, WireGuard, Karmada, Kueue) from one topology file",
    long_about = "fabric reads one topology file describing every site, builds the dependency graph of the \
                  seed's steps A.1–D.4 (and the gateway's G.1), shows what would change (plan) and changes it step by step (apply).",
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

#[derive(Debug, Subcommand)]
pub enum Command {
    Validate(crate::command::validate::Opts),
    Fmt(crate::command::fmt::Opts),
    Graph(crate::command::graph::Opts),
    Plan(crate::command::plan::Opts),
    Render(crate::command::render::Opts),
    Apply(crate::command::apply::Opts),
    Show(crate::command::show::Opts),
    Rollback(crate::command::rollback::Opts),
    State(crate::command::state::Opts),
    Verify(crate::command::verify::Opts),
    Completions(crate::command::completions::Opts),
    Man(crate::command::completions::ManOpts),
    Schema(crate::command::schema::Opts),
    Lock(crate::command::lock::Opts),
    Runs(crate::command::runs::Opts),
    Rotate(crate::command::rotate::Opts),
}

/// A shell's completion script, generated from the CLI definition (so it never drifts).
pub fn completions(shell: Shell) -> String {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "fabric", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The manual page (roff), generated from the CLI definition.
pub fn man_page() -> Result<String, std::io::Error> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_know_every_subcommand() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script = completions(shell);
            for cmd in ["validate", "graph", "plan", "render", "apply", "rollback", "schema"] {
                assert!(script.contains(cmd), "{shell:?} completion lacks {cmd}");
            }
        }
        assert!(completions(Shell::Bash).contains("--detailed-exitcode"));
    }

    #[test]
    fn man_page_has_the_commands() {
        let page = man_page().unwrap();
        assert!(page.starts_with(".ie") || page.contains(".TH fabric"), "{}", &page[..200.min(page.len())]);
        for cmd in ["validate", "plan", "apply", "rollback"] {
            assert!(page.contains(cmd), "man page lacks {cmd}");
        }
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
