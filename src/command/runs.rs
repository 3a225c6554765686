//! `fabric runs`: every operator's runs, from this machine and from the clusters.

use clap::Args;
use miette::Report;

use super::Done;
use crate::command::args::Global;
use crate::operation::runs as runs_op;
use crate::style::{Style, terminal_safe};

/// List the runs of every operator: who, when, what and how it ended
///
/// Each apply shares its journal (never secret content) in the clusters whose Lease it holds,
/// as fabric-system/fabric-run-<run>; this lists those and this machine's .fabric/runs, newest
/// first. `fabric rollback RUN-ID` works on any of them, from any machine. Exit status: 0 when
/// every cluster was read, 3 when some could not be (the runs shared there are unknown: they are
/// named) or a journal found could not be read (listed as `? unreadable` with its path), 1 when
/// no cluster could be read or the runs folder cannot be listed (no folder is "No runs.").
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  fabric runs\n  fabric runs --format json\n  fabric rollback 20261130T061502Z-4242"
)]
pub struct Opts {
    /// Output format
    #[arg(long, value_enum, default_value_t = crate::command::verify::VerifyFormat::Human)]
    pub format: crate::command::verify::VerifyFormat,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let ws = super::workspace(g)?;
    let targets = super::targets(g, &ws)?;
    let rt = crate::operation::runtime()?;
    let runs_op::Listed { runs, unread, unreadable } = runs_op::list(&ws, &targets, &g.state_dir, &rt)?;
    // Runs shared in a cluster that was not read are unknown, never "no runs"; so are those
    // whose journal was found and could not be read (exit 3, each named).
    let outcome =
        super::unread_outcome("runs::unread", runs_op::shared_sources(&targets), &unread, "the runs shared there are")
            .and_then(|done| match unreadable.is_empty() {
                true => Ok(done),
                false => Err(super::partial(
                    "runs::unreadable",
                    format!("{} run journal(s) could not be read: those runs are unknown", unreadable.len()),
                    format!("{}\n(each is listed as `? unreadable`: repair or remove it)", unreadable.join("\n")),
                )),
            });
    if o.format == crate::command::verify::VerifyFormat::Json {
        let v = serde_json::json!({ "runs": runs, "unread": unread, "unreadable": unreadable });
        crate::outln!("{}", serde_json::to_string_pretty(&v).expect("runs serialize"));
        return outcome;
    }
    let st = Style::stdout(g.no_color);
    if runs.is_empty() {
        let all_read = unread.is_empty() && unreadable.is_empty();
        crate::outln!("{}", if all_read { "No runs." } else { "No runs in what could be read." });
    }
    for u in &unreadable {
        crate::outln!("{}", terminal_safe(&format!("?  unreadable: {u}"), st.color));
    }
    for r in &runs {
        let who = if r.user.is_empty() { "?" } else { &r.user };
        let line = format!(
            "{}  {:<11} by {:<12} {}  [{}]",
            st.bold(&r.run),
            r.outcome,
            who,
            if r.steps.is_empty() { "(no step changed)".to_string() } else { r.steps.join(", ") },
            r.seen_in.join(", ")
        );
        crate::outln!("{}", terminal_safe(&line, st.color));
    }
    outcome
}
