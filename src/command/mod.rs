//! One module per subcommand: its options and its `run`.

pub mod apply;
pub mod args;
pub mod causes;
pub mod cli;
pub mod completions;
pub mod events;
pub mod fmt;
pub mod graph;
pub mod lock;
pub mod plan;
pub mod render;
pub mod rollback;
pub mod rotate;
pub mod rotate_credentials;
pub mod rotate_wireguard;
pub mod runs;
pub mod schema;
pub mod show;
pub mod state;
pub mod stdout;
pub mod validate;
pub mod verify;

use std::path::PathBuf;
use std::process::ExitCode;

use miette::{Diagnostic, Report};

use crate::command::cli::{Cli, Command, Global};
use crate::live::observe::{Live, Targets};
use crate::operation::Workspace;
use crate::operation::read::ReadReport;
use crate::providers::Observed;
use crate::style::{Style, terminal_safe};
use crate::topology::{self, LoadError, Loaded};
use crate::transport::ssh_config::SshConfig;

/// The example topology, embedded so the README's first command works from any directory.
pub const EXAMPLE: &str = include_str!("../../topology.example.yaml");
pub const EXAMPLE_NAME: &str = "topology.example.yaml (embedded)";

/// Exit codes, as terraform's: 0 success (nothing to do), 1 any error (a usage error
/// included: terraform exits 1 there, where clap would exit 2, the code of "changes"), 2
/// changes (only with `--detailed-exitcode`). fabric adds 3: partial, some of what the command
/// reports could not be read (the rest is shown and the unknown part named), so that neither
/// "no changes" nor "changes" is ever said about what was not read.
pub enum Done {
    Ok,
    Changes,
}

/// The exit status of a partial result ([`partial`]).
pub const EXIT_PARTIAL: u8 = 3;

/// The exit status of a command line clap refused or answered itself: 0 for `--help` and
/// `--version` (clap prints them on stdout), 1 for every usage error.
pub fn usage_exit_code(e: &clap::Error) -> ExitCode {
    if e.use_stderr() { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

pub fn run(cli: Cli) -> Result<Done, Report> {
    let Cli { global, command } = cli;
    crate::transport::retry::set_verbose(global.verbose > 0);
    match command {
        Command::Validate(o) => validate::run(&global, o),
        Command::Fmt(o) => fmt::run(&global, o),
        Command::Graph(o) => graph::run(&global, o),
        Command::Plan(o) => plan::run(&global, o),
        Command::Render(o) => render::run(&global, o),
        Command::Apply(o) => apply::run(&global, o),
        Command::Show(o) => show::run(&global, o),
        Command::Rollback(o) => rollback::run(&global, o),
        Command::State(o) => state::run(&global, o),
        Command::Verify(o) => verify::run(&global, o),
        Command::Completions(o) => completions::run(&cli::completions(o.shell)),
        Command::Man(_) => completions::man(cli::man_page()),
        Command::Schema(o) => schema::run(&global, o),
        Command::Lock(o) => lock::run(&global, o),
        Command::Runs(o) => runs::run(&global, o),
        Command::Rotate(o) => rotate::run(&global, o),
    }
}

pub fn exit_code(r: &Result<Done, Report>) -> ExitCode {
    match r {
        Ok(Done::Ok) => ExitCode::SUCCESS,
        Ok(Done::Changes) => ExitCode::from(2),
        // As a shell reports a command ended by SIGINT; the journal says what was put back.
        Err(_) if crate::apply::interrupt::requested() => ExitCode::from(130),
        Err(r) if r.downcast_ref::<UsageError>().is_some_and(|u| u.partial) => ExitCode::from(EXIT_PARTIAL),
        Err(_) => ExitCode::from(1),
    }
}

/// A command-line level error with a hint, rendered like every other diagnostic. A partial one
/// says what part of the command's report could not be read (the rest was shown): the command
/// exits [`EXIT_PARTIAL`] rather than 1.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
pub struct UsageError {
    pub message: String,
    #[help]
    pub help: Option<String>,
    #[diagnostic(code)]
    pub code: Option<String>,
    pub partial: bool,
}

pub fn usage(code: &str, message: impl Into<String>, help: impl Into<String>) -> Report {
    Report::new(UsageError {
        message: message.into(),
        help: Some(help.into()),
        code: Some(code.into()),
        partial: false,
    })
}

/// [`usage`] for a partial result: what was read is shown, this names the rest.
pub fn partial(code: &str, message: impl Into<String>, help: impl Into<String>) -> Report {
    Report::new(UsageError { message: message.into(), help: Some(help.into()), code: Some(code.into()), partial: true })
}

/// The end of a command that reads `total` targets and could not read those in `unread` (each
/// `target: reason`): success when it read them all, an error (1) when it read none, partial
/// (3) otherwise. `what` says what is unknown of an unread target ("their locks are").
pub fn unread_outcome(code: &str, total: usize, unread: &[String], what: &str) -> Result<Done, Report> {
    if unread.is_empty() {
        return Ok(Done::Ok);
    }
    let help = format!("{}\n(restore the link or the credentials named, then run it again)", unread.join("\n"));
    if unread.len() >= total {
        return Err(usage(code, format!("none of the {total} target(s) could be read: {what} unknown"), help));
    }
    Err(partial(code, format!("{} of {total} target(s) could not be read: {what} unknown", unread.len()), help))
}

pub fn topology_path(g: &Global) -> PathBuf {
    g.topology.clone().unwrap_or_else(|| PathBuf::from("topology.yaml"))
}

/// The topology's name as messages give it: the file -f names (or ./topology.yaml), or the
/// embedded example's.
pub fn topology_name(g: &Global) -> String {
    if g.example { EXAMPLE_NAME.to_string() } else { topology_path(g).display().to_string() }
}

/// Loads the topology the flags name, printing warnings (unless -q); on failure prints every
/// diagnostic and returns the summary error.
pub fn load(g: &Global) -> Result<Loaded, Report> {
    let result = if g.example {
        topology::load_str(EXAMPLE_NAME, EXAMPLE.to_string())
    } else {
        let path = topology_path(g);
        if !path.exists() && g.topology.is_none() {
            return Err(usage(
                "fabric::no-topology",
                "no topology.yaml in this directory",
                "name a file with -f FILE (or $FABRIC_TOPOLOGY), or try the embedded example with --example",
            ));
        }
        topology::load_file(&path)
    };
    loaded(result, g)
}

/// The workspace of another topology file (`plan --base`), loaded and checked like `-f`'s.
pub fn workspace_of(g: &Global, path: &std::path::Path) -> Result<Workspace, Report> {
    Ok(Workspace::new(loaded(topology::load_file(path), g)?)?)
}

/// A loaded topology, or its problems printed and the error that ends the command.
fn loaded(result: Result<Loaded, LoadError>, g: &Global) -> Result<Loaded, Report> {
    match result {
        Ok(l) => {
            if !g.quiet {
                print_diags(&l.warnings, g);
            }
            Ok(l)
        }
        Err(LoadError::Invalid { file, diags }) => {
            print_diags(&diags, g);
            let e = LoadError::Invalid { file, diags };
            Err(usage("topology::invalid", e.to_string(), "fix the problems above, then run `fabric validate` again"))
        }
        Err(e @ LoadError::Io { .. }) => Err(usage("topology::io", e.to_string(), "check the path given with -f")),
        Err(e @ (LoadError::NotRegular { .. } | LoadError::TooLarge { .. })) => {
            Err(usage("topology::io", e.to_string(), "give a topology file (-f FILE): a regular file of at most 1 MiB"))
        }
    }
}

/// The workspace of the topology the flags name: loaded, its graph built and its desired state
/// computed once. The embedded example is marked offline-only.
pub fn workspace(g: &Global) -> Result<Workspace, Report> {
    let mut ws = Workspace::new(load(g)?)?;
    ws.offline_only = g.example;
    Ok(ws)
}

/// The targets of a workspace: SSH endpoints from the ssh config the flags name, and the
/// topology's kubeconfigs. What the ssh config asks that fabric does not do is a warning (unless
/// -q), naming its file and line.
pub fn targets(g: &Global, ws: &Workspace) -> Result<Targets, Report> {
    let t = Targets::from_topology(ws.topology(), &ssh_config(g)?).map_err(bad_ssh_config)?;
    if !g.quiet {
        for w in &t.warnings {
            eprintln!("warning: ssh config: {}", terminal_safe(w, false));
        }
    }
    Ok(t)
}

/// The ssh config fabric reads, as `ssh` reads it: --ssh-config / $FABRIC_SSH_CONFIG alone (as
/// `ssh -F`), else ~/.ssh/config then /etc/ssh/ssh_config.
pub fn ssh_config(g: &Global) -> Result<SshConfig, Report> {
    let Some(path) = &g.ssh_config else {
        return SshConfig::load_default(&crate::transport::ssh_config::Local::current()).map_err(bad_ssh_config);
    };
    if !path.exists() {
        return Err(usage(
            "fabric::ssh-config",
            format!("cannot read {}", path.display()),
            "check the path given with --ssh-config",
        ));
    }
    SshConfig::load(path).map_err(bad_ssh_config)
}

/// An ssh config fabric cannot use: where and why (the file's text made terminal-safe).
fn bad_ssh_config(e: crate::transport::ssh_config::ConfigError) -> Report {
    usage(
        "fabric::ssh-config",
        terminal_safe(&e.to_string(), false),
        "fix that line of the ssh config, or name another file with --ssh-config",
    )
}

/// `-v`: what was read and how long it took; `-vv`: every resource's state (never a secret's
/// content: sensitive states are read by presence only).
pub fn print_read(g: &Global, report: &ReadReport, live: &Live) {
    if g.verbose == 0 {
        return;
    }
    eprintln!("fabric: read {} target(s) in {} ms", report.per_target.len(), report.took.as_millis());
    for (t, n) in &report.per_target {
        match live.unreachable.get(t) {
            Some(reason) => eprintln!("fabric:   {t}: unreachable: {}", terminal_safe(reason, false)),
            None => eprintln!(
                "fabric:   {t}: {n} resource(s){}",
                if live.keys.contains_key(t) { ", public key" } else { "" }
            ),
        }
    }
    if g.verbose > 1 {
        for (address, state) in &live.observed {
            let what = match state {
                Observed::Absent => "absent".to_string(),
                Observed::Present(t) => format!("present, {} bytes", t.len()),
            };
            eprintln!("fabric:     {address}: {what}");
        }
    }
}

/// Prints the consistency pass's findings: errors always (the command fails on them), warnings
/// unless -q.
/// Checks the topology's chart pins where the charts are published (online plans and apply):
/// a version that is not there is an error at its `versions:` line (see `operation::charts`).
pub fn check_chart_pins(g: &Global, ws: &Workspace, plan: &crate::plan::model::Plan) -> Result<(), Report> {
    use crate::operation::charts::{INDEXES_ENV, check_pins, indexes_from_env, planned_helm_charts};
    let charts = planned_helm_charts(plan);
    if charts.is_empty() {
        return Ok(());
    }
    let Some(at) = indexes_from_env() else {
        if !g.quiet {
            eprintln!("warning: the chart versions under `versions:` were not checked ({INDEXES_ENV}=off)");
        }
        return Ok(());
    };
    let diags = check_pins(ws, &at, &charts);
    print_findings(&diags, g);
    let bad = diags.iter().filter(|d| d.problem.severity == topology::problem::Severity::Error).count();
    if bad > 0 {
        return Err(usage(
            "plan::chart-version",
            format!("{bad} pinned chart version(s) are not published where their HelmChart points"),
            "pin versions the charts' indexes list (above); K3s's install Job would fail on these",
        ));
    }
    Ok(())
}

pub fn print_findings(diags: &[topology::problem::Diag], g: &Global) {
    let shown: Vec<topology::problem::Diag> = diags
        .iter()
        .filter(|d| !g.quiet || d.problem.severity == topology::problem::Severity::Error)
        .cloned()
        .collect();
    print_diags(&shown, g);
}

/// Prints diagnostics on stderr, each warning's cause once (`causes`).
pub fn print_diags(diags: &[topology::problem::Diag], g: &Global) {
    for d in &causes::once_per_cause(diags) {
        eprintln!("{}", render_diag(d, Style::stderr(g.no_color).color));
    }
}

/// Renders a diagnostic with miette's graphical handler (colors only when asked). What it
/// quotes (a host's stderr, an API server's message) is made safe for the terminal.
pub fn render_diag(d: &dyn Diagnostic, color: bool) -> String {
    let theme = if color { miette::GraphicalTheme::unicode() } else { miette::GraphicalTheme::unicode_nocolor() };
    let handler = miette::GraphicalReportHandler::new_themed(theme).with_context_lines(1);
    let mut s = String::new();
    // Writing into a String cannot fail.
    let _ = handler.render_report(&mut s, d);
    crate::style::terminal_safe(&s, color)
}

/// The progress lines of a long command (rollback, rotations) on stderr, made safe for the
/// terminal, unless `-q`.
fn progress_lines(quiet: bool) -> impl Fn(&str) {
    move |line: &str| {
        if !quiet {
            eprintln!("fabric: {}", crate::style::terminal_safe(line, false));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> clap::Error {
        cli::Cli::try_parse_from(args).expect_err("clap answers by itself")
    }

    /// A usage error exits 1 (2 is "changes" with --detailed-exitcode); help and version exit 0.
    #[test]
    fn usage_errors_exit_1_and_help_exits_0() {
        for args in [
            &["fabric", "plan", "--offline", "--fromat", "markdown"][..],
            &["fabric", "plan", "--offline", "--format", "md"],
            &["fabric", "plan", "--base", "b.yaml"],
            &["fabric", "bogus"],
            &["fabric"],
        ] {
            assert_eq!(usage_exit_code(&parse(args)), ExitCode::from(1), "{args:?}");
        }
        for args in
            [&["fabric", "--help"][..], &["fabric", "--version"], &["fabric", "plan", "-h"], &["fabric", "help"]]
        {
            assert_eq!(usage_exit_code(&parse(args)), ExitCode::SUCCESS, "{args:?}");
        }
    }

    #[test]
    fn what_could_not_be_read_decides_between_0_1_and_3() {
        let code = |r: Result<Done, Report>| exit_code(&r);
        assert_eq!(code(unread_outcome("x::y", 3, &[], "their locks are")), ExitCode::SUCCESS);
        let some = unread_outcome("x::y", 3, &["cluster.sp: refused".into()], "their locks are");
        assert_eq!(
            some.as_ref().err().map(ToString::to_string).as_deref(),
            Some("1 of 3 target(s) could not be read: their locks are unknown")
        );
        assert_eq!(code(some), ExitCode::from(EXIT_PARTIAL));
        let none = unread_outcome("x::y", 1, &["cluster.sp: refused".into()], "their locks are");
        assert_eq!(code(none), ExitCode::from(1));
    }
}
