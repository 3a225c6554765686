//! fabric: plan and apply a multi-site research fabric from one topology file.

#![deny(clippy::too_many_lines)]

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match fabric::command::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Printing to a closed pipe is not worth a second error.
            let _ = e.print();
            return fabric::command::usage_exit_code(&e);
        }
    };
    let color = fabric::style::Style::stderr(cli.global.no_color).color;
    let result = fabric::command::run(cli);
    if let Err(report) = &result {
        eprintln!("{}", fabric::command::render_diag(report.as_ref(), color));
    }
    fabric::command::exit_code(&result)
}
