//! `fabric completions` and `fabric man`: generated from the CLI definition, so they never drift.

use clap::Args;
use clap_complete::Shell;
use miette::Report;

use super::{Done, usage};

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

/// Prints the script `cli::completions` made for the shell `Opts` names.
pub fn run(script: &str) -> Result<Done, Report> {
    crate::out!("{script}");
    Ok(Done::Ok)
}

/// Prints the page `cli::man_page` made.
pub fn man(page: Result<String, std::io::Error>) -> Result<Done, Report> {
    let page =
        page.map_err(|e| usage("fabric::man", format!("cannot render the manual page: {e}"), "please report this"))?;
    crate::out!("{page}");
    Ok(Done::Ok)
}
