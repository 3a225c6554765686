//! `fabric completions` and `fabric man`: generated from the CLI definition, so they never drift.

use clap::{Args, CommandFactory};
use clap_complete::Shell;
use miette::Report;

use super::{Done, usage};
use crate::command::cli::Cli;

/// Print a shell completion script
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  fabric completions bash > /etc/bash_completion.d/fabric\n  \
                        fabric completions zsh > \"${fpath[1]}/_fabric\"\n  fabric completions fish > ~/.config/fish/completions/fabric.fish")]
pub struct Opts {
    /// The shell
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Print the manual page (roff)
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  fabric man > /usr/local/share/man/man1/fabric.1 && man fabric")]
pub struct ManOpts {}

pub fn completions(shell: Shell) -> String {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "fabric", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

pub fn man_page() -> Result<String, std::io::Error> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

pub fn run(o: Opts) -> Result<Done, Report> {
    print!("{}", completions(o.shell));
    Ok(Done::Ok)
}

pub fn man(_o: ManOpts) -> Result<Done, Report> {
    let page = man_page()
        .map_err(|e| usage("fabric::man", format!("cannot render the manual page: {e}"), "please report this"))?;
    print!("{page}");
    Ok(Done::Ok)
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
