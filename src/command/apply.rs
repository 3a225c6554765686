//! `fabric apply`: change the targets step by step, with rollback points.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use miette::Report;

use super::events::{self, Stream, Summary};
use super::{Done, usage};
use crate::command::args::Global;
use crate::operation::apply::{self as apply_op, Request};
use crate::operation::preflight;
use crate::plan::{planfile, view};
use crate::style::{Style, terminal_safe};

/// Apply the changes of the selected steps, in order, with rollback points
///
/// Checks everything local first (a terminal to ask at, or --auto-approve, or PLANFILE; the
/// PLANFILE's fabric release and topology; open decisions; the bundle's digests), then reads
/// live state, shows the plan and asks for `yes` (unless --auto-approve). Every step is
/// journaled under .fabric/runs before it changes anything; a failed change or check reverts
/// the step and stops. Routers revert by themselves unless fabric confirms the change over a
/// new connection within --confirm-timeout. With PLANFILE (from `plan --out`), the topology is
/// the one the plan records (unless -f), nothing is asked (the plan was reviewed), and the
/// plan's steps are applied only if nothing it observed has changed since.
///
/// A lock another run holds (a cluster's Lease, a host's lock) refuses the run naming its holder,
/// or with --lock-timeout is waited for. With --json (or --format json), stdout carries one JSON
/// event per line (docs/errors.md, "Machine-readable output") and nothing is asked: it needs
/// --auto-approve or a PLANFILE.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  fabric apply --step B.1\n  fabric plan --step B.1 --out b1.plan && fabric apply b1.plan\n  \
                        fabric apply --phase B --site sp --auto-approve\n  \
                        fabric apply --step D.1@sp --auto-approve --lock-timeout 5m --json   wait for a colleague's lock; JSON events"
)]
pub struct Opts {
    /// A plan written by `fabric plan --out`: applied without asking; refused when stale
    #[arg(value_name = "PLANFILE")]
    pub planfile: Option<PathBuf>,
    #[command(flatten)]
    pub selection: crate::command::args::SelectionArgs,
    /// Do not ask for confirmation
    #[arg(long)]
    pub auto_approve: bool,
    /// Take over fields another field manager owns in Kubernetes objects (server-side apply force)
    #[arg(long)]
    pub force_conflicts: bool,
    /// Seconds a router waits for confirmation before reverting by itself (VyOS rounds up to minutes)
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub confirm_timeout: u64,
    /// Seconds to wait for each applied Kubernetes object to be done (a chart's install Job
    /// complete, a Deployment rolled out, a Karmada Cluster Ready, a ClusterQueue Active, a kind
    /// served); past it the step fails and is reverted
    #[arg(long, value_name = "SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub wait_timeout: u64,
    #[command(flatten)]
    pub run: crate::command::args::RunArgs,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    events::streamed(o.run.json(), "apply", &super::topology_name(g), |stream| apply(g, &o, stream))
}

/// The apply itself; with `stream`, its events go there as JSON lines and nothing else is
/// printed on stdout.
fn apply(g: &Global, o: &Opts, stream: Option<&Stream>) -> Result<(Done, Summary), Report> {
    let (ws, req) = local_checks(g, o)?;
    let reviewed = matches!(req, Request::Planfile(_));
    let targets = super::targets(g, &ws)?;
    let rt = crate::operation::runtime()?;
    let mut phase = crate::apply::timeline::Phase::start();
    let mut ready = apply_op::prepare(&ws, req, &targets, &rt)?;
    phase.end("read and plan");
    // Before anything changes: the pinned chart versions exist where K3s will fetch them.
    super::check_chart_pins(g, &ws, &ready.plan)?;
    super::print_read(g, &ready.observation.report, &ready.observation.live);
    let st = Style::stdout(g.no_color);
    // The plan as people read it, on stdout (never with --json: stdout carries the events).
    let show = |quiet: bool| {
        if stream.is_none() && !quiet {
            crate::out!("{}", terminal_safe(&view::human(&ready.plan, &st, view::Unchanged::Hidden), st.color));
        }
    };
    if let Some(blocked) = ready.blocked() {
        show(false);
        return Err(blocked.into());
    }
    let pending = ready.pending_reverts();
    if !ready.plan.has_changes() && pending.is_empty() {
        let message = "No changes. The live state matches the topology.";
        if !g.quiet && stream.is_none() {
            crate::outln!("{message}");
        }
        return Ok((Done::Ok, Summary { outcome: "no-changes", run: None, steps: vec![], message: message.into() }));
    }
    if !ready.plan.has_changes() {
        // A killed run's change that its router is about to put back reads as "no change":
        // the run waits for the revert and reads again before deciding.
        let line = format!(
            "No changes now, but a self-revert of an earlier run is pending on {}: applying once it has fired.",
            pending.join(", ")
        );
        match stream {
            Some(s) => s.message(&line),
            None => crate::outln!("{}", terminal_safe(&line, st.color)),
        }
    }
    show(g.quiet && (o.auto_approve || reviewed));
    if let Some(s) = stream {
        s.planned(&ready.plan);
    }
    // A planfile was reviewed when it was made: applied without asking again, as terraform's
    // `apply PLANFILE` (the read above refused it if live state moved since).
    if !o.auto_approve && !reviewed {
        let asked = std::time::Instant::now();
        approve()?;
        // The read's connections carry the locks and changes, unless they idled at the prompt
        // longer than a NAT or an sshd's ClientAlive setting may keep them: then apply connects
        // anew rather than find out at the first lock.
        if asked.elapsed() > KEEP_CONNECTIONS_AT_PROMPT {
            ready.observation.kept.clear();
        }
    }
    let opts = apply_op::Options {
        state_dir: g.state_dir.clone(),
        confirm_timeout: Duration::from_secs(o.confirm_timeout),
        force_conflicts: o.force_conflicts,
        wait_timeout: Duration::from_secs(o.wait_timeout),
    };
    // A spinner on a terminal; plain lines otherwise (CI logs); JSON events with --json.
    let quiet = g.quiet;
    let bar = (stream.is_none() && std::io::stderr().is_terminal() && !quiet).then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(indicatif::ProgressStyle::with_template("{spinner} {elapsed:>3} {msg}").expect("valid template"));
        b.enable_steady_tick(Duration::from_millis(120));
        b
    });
    let spinner = bar.clone();
    let progress = move |line: &str| match (&spinner, stream) {
        (_, Some(s)) => s.message(line),
        _ if line.chars().any(char::is_control) => println_progress(&spinner, quiet, &terminal_safe(line, false)),
        (Some(b), _) if line.contains("applying") => b.set_message(line.to_string()),
        (Some(b), _) => b.println(format!("fabric: {line}")),
        (None, None) if !quiet => eprintln!("fabric: {line}"),
        (None, None) => {}
    };
    let sink = events::sink(stream);
    let hooks = events::hooks(&progress, &sink, stream, o.run.lock_timeout);
    phase.end("show and approve");
    let result = apply_op::run(&ws, ready, &opts, &targets, hooks, &rt);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    // `-v`: where the time went, phase by phase, whatever the outcome.
    if g.verbose > 0 {
        for line in crate::apply::timeline::lines(&crate::apply::timeline::take()) {
            eprintln!("fabric: {line}");
        }
    }
    let done = result?;
    let message = format!(
        "Apply complete: {} step(s) changed. Run {}; journal {}",
        done.changed.len(),
        done.run,
        done.journal.display()
    );
    if !g.quiet && stream.is_none() {
        crate::outln!("{message}");
    }
    Ok((Done::Ok, Summary { outcome: "applied", run: Some(done.run), steps: done.changed, message }))
}

/// Every check this machine can make by itself, before any connection, in the order an operator
/// fixes them: the planfile readable, approval possible (a terminal, --auto-approve or a
/// planfile), the topology (-f, else the one the planfile records), the planfile made by this
/// fabric from that topology, then the steps' decisions and the bundle's digests.
fn local_checks(g: &Global, o: &Opts) -> Result<(crate::operation::Workspace, Request), Report> {
    let plan = o.planfile.as_deref().map(planfile::read).transpose().map_err(crate::operation::OpError::from)?;
    if plan.is_none() && !o.auto_approve && o.run.json() {
        return Err(usage(
            "apply::approve",
            "apply --json asks nothing (stdout carries its events), so it needs --auto-approve or a PLANFILE; nothing was read",
            "add --auto-approve, or apply a reviewed plan (`fabric plan --out PLANFILE`, then `fabric apply PLANFILE --json`)",
        ));
    }
    if plan.is_none() && !o.auto_approve {
        needs_terminal()?;
    }
    let ws = match plan.as_ref().and_then(|p| p.topology_path.as_deref()) {
        Some(path) if g.topology.is_none() && !g.example => super::workspace_of(g, Path::new(path))?,
        _ => super::workspace(g)?,
    };
    let req = match (plan, &o.planfile) {
        (Some(plan), Some(path)) => Request::Planfile(preflight::planfile(&ws, path, plan)?),
        _ => Request::Selection(o.selection.clone().into()),
    };
    preflight::local(&ws, req.selection())?;
    Ok((ws, req))
}

/// Longest the approval prompt may take for apply to keep the read's connections.
const KEEP_CONNECTIONS_AT_PROMPT: Duration = Duration::from_secs(30);

/// A progress line that needed escaping: printed whole, never as the spinner's message.
fn println_progress(spinner: &Option<indicatif::ProgressBar>, quiet: bool, line: &str) {
    match spinner {
        Some(b) => b.println(format!("fabric: {line}")),
        None if !quiet => eprintln!("fabric: {line}"),
        None => {}
    }
}

/// Approval needs a terminal to ask at (checked before anything is read).
fn needs_terminal() -> Result<(), Report> {
    needs_terminal_for(
        "apply",
        "add --auto-approve (CI), apply a reviewed plan (`fabric plan --out PLANFILE`, then `fabric apply PLANFILE`), \
         or run it at a terminal",
    )
}

/// [`needs_terminal`] for `command` (`apply`, `rotate wireguard`): its first check, before any
/// file or connection, when it would ask for `yes`; `help` says what to do instead.
pub(super) fn needs_terminal_for(command: &str, help: &str) -> Result<(), Report> {
    if std::io::stdin().is_terminal() {
        return Ok(());
    }
    Err(usage(
        "apply::approve",
        format!("{command} needs approval and stdin is not a terminal; nothing was read"),
        help,
    ))
}

/// Asks for `yes` at the terminal, as terraform does (apply, rotate).
pub(super) fn approve() -> Result<(), Report> {
    needs_terminal()?;
    crate::out!("\nDo you want to perform these actions? Only 'yes' will be accepted to approve.\n  Enter a value: ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if answer.trim() != "yes" {
        crate::outln!("Apply cancelled.");
        return Err(usage("apply::cancelled", "apply cancelled", "nothing was changed"));
    }
    Ok(())
}
