//! `fabric plan`: what apply would change, per step and resource.

use std::path::PathBuf;

use clap::Args;
use miette::Report;

use super::{Done, usage};
use crate::command::args::{Format, Global};
use crate::operation::plan::{self as plan_op, Source};
use crate::plan::{planfile, view};
use crate::style::{Style, terminal_safe};

/// Show what `apply` would change, step by step
///
/// Reads every target of the selected steps (one SSH connection per host, all at once), diffs
/// live against desired state and prints the changes. A target that cannot be reached is
/// reported with the reason, its steps marked `? unknown`, and the rest is still planned. Exit
/// status: 0 success (no changes), 1 error (a usage error or a refused step included), 2 changes
/// (only with --detailed-exitcode), 3 partial: a target could not be read, so some steps'
/// changes are unknown (with or without --detailed-exitcode). `--offline` reads nothing:
/// every resource is planned as absent; with `--base FILE` as well, the plan is the change from
/// that topology to this one (a pull request's, for review). A plan is refused (exit 1) when the
/// objects would not work together (the consistency pass, docs/errors.md).
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  fabric --example plan --offline\n  fabric plan --step B.1 --out b1.plan\n  \
                        fabric plan --offline --phase B --with-deps\n  \
                        fabric plan --offline --site sp --format markdown --detailed-exitcode\n  \
                        fabric plan --offline --base base.yaml --format markdown --detailed-exitcode\n  \
                        fabric plan --observed state.json --format markdown --detailed-exitcode")]
pub struct Opts {
    #[command(flatten)]
    pub selection: crate::command::args::SelectionArgs,
    /// Read nothing live: plan every resource as absent (for CI without credentials)
    #[arg(long, conflicts_with = "observed")]
    pub offline: bool,
    /// Read nothing live: plan against a snapshot from `fabric state snapshot`
    #[arg(long, value_name = "FILE")]
    pub observed: Option<PathBuf>,
    /// With --offline: plan the change from the topology FILE (a pull request's base, e.g.
    /// `git show origin/main:topology.yaml > base.yaml`) to this one, instead of from nothing
    #[arg(long, value_name = "FILE", requires = "offline")]
    pub base: Option<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Also show the resources and steps without changes (hidden by default; `--out` keeps them)
    #[arg(long)]
    pub show_unchanged: bool,
    /// Exit 2 when there are changes, 0 when there are none (3 stays 3: something was not read)
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Also write the plan (JSON) to this file, for `fabric apply PLANFILE`
    #[arg(long, value_name = "PLANFILE")]
    pub out: Option<PathBuf>,
    /// Also write the plan's figures as Prometheus metrics (text format) to FILE, replaced
    /// atomically, for node-exporter's textfile collector (examples/drift-check/)
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let Opts { selection, offline, observed, base, format, show_unchanged, detailed_exitcode, out, metrics } = o;
    let ws = super::workspace(g)?;
    let found = ws.consistency();
    super::print_findings(&found, g);
    if let Some(e) = super::validate::consistency_error(&found) {
        return Err(e);
    }
    let planned = match (offline, observed.as_deref(), base.as_deref()) {
        (true, _, Some(file)) => {
            let base = super::workspace_of(g, file)?;
            plan_op::make(&ws, selection.into(), Source::Base { base: &base, file })?
        }
        (true, _, None) => plan_op::make(&ws, selection.into(), Source::Offline)?,
        (false, Some(file), _) => {
            let planned = plan_op::make(&ws, selection.into(), Source::Snapshot(file))?;
            super::check_chart_pins(g, &ws, &planned.plan)?;
            planned
        }
        (false, None, _) => {
            let targets = super::targets(g, &ws)?;
            let rt = crate::operation::runtime()?;
            let planned = plan_op::make(&ws, selection.into(), Source::Live { targets: &targets, rt: &rt })?;
            // Online: the pinned chart versions, where K3s will fetch them.
            super::check_chart_pins(g, &ws, &planned.plan)?;
            planned
        }
    };
    if let Some(o) = &planned.observation {
        super::validate::skew_refusal(g, &ws.loaded, &o.live)?;
    }
    if let Some(note) = planned.note.filter(|_| !g.quiet) {
        eprintln!("note: {note}");
    }
    if let Some(o) = &planned.observation {
        super::print_read(g, &o.report, &o.live);
    }
    if let Some(path) = &metrics {
        let live = planned.observation.as_ref().map(|o| &o.live);
        let text = crate::plan::metrics::render(&planned.plan, &metric_facts(g, &ws, live));
        crate::plan::metrics::write_atomic(path, &text).map_err(|e| {
            usage(
                "plan::metrics",
                format!("cannot write {}: {e}", path.display()),
                "check the directory exists and is writable",
            )
        })?;
    }
    let p = planned.plan;
    print(g, &p, format, show_unchanged);
    if let Some(path) = out {
        planfile::write(&path, &p)
            .map_err(|e| usage("plan::out", e.to_string(), "check the directory exists and is writable"))?;
    }
    let server_refused: Vec<String> = p
        .steps
        .iter()
        .flat_map(|s| &s.changes)
        .filter_map(|c| c.refused.as_ref().map(|r| format!("{}: {r}", c.address)))
        .collect();
    if !server_refused.is_empty() {
        return Err(usage(
            "plan::server-refused",
            format!("the API server would refuse {} change(s)", server_refused.len()),
            format!(
                "{}\n(a conflict with another field manager needs `apply --force-conflicts`; an invalid field is a bug in fabric's objects: please report it)",
                server_refused.join("\n")
            ),
        ));
    }
    if p.summary.refused_steps > 0 {
        return Err(usage(
            "plan::refused",
            format!(
                "{} selected step(s) refused: a decision they need is undecided, or decided but not supported by this build, or a host is not ready for them (the step says which)",
                p.summary.refused_steps
            ),
            "`fabric validate` points at the decision's line; decide it (or choose a supported option) in \
             the topology's `decisions:`; a D.1 refused for a GPU node needs the NVIDIA driver and container \
             toolkit on that node, then its K3s restarted; or leave those steps out with --phase/--step/--site",
        ));
    }
    // After the errors (exit 1): what was not read makes the plan partial (exit 3), never "no
    // changes" (0) nor "changes" (2), with or without --detailed-exitcode.
    if !p.unreachable.is_empty() {
        let names: Vec<String> = p.unreachable.iter().map(|u| format!("{}: {}", u.target, u.reason)).collect();
        return Err(super::partial(
            "plan::unreachable",
            format!(
                "{} target(s) could not be read: the changes of {} step(s) are unknown (marked `?` above); the rest is planned",
                p.unreachable.len(),
                p.summary.unknown_steps
            ),
            format!("{}\n(apply the other sites with --site; the unreachable ones keep their state)", names.join("\n")),
        ));
    }
    Ok(if detailed_exitcode && p.has_changes() { Done::Changes } else { Done::Ok })
}

/// Prints a plan in `format` on stdout (`plan`, `show`), unchanged resources hidden unless asked.
/// `-q` leaves the human view its summary line only (machine formats are the output itself).
pub(super) fn print(g: &Global, p: &crate::plan::model::Plan, format: Format, show_unchanged: bool) {
    let unchanged = if show_unchanged { view::Unchanged::Shown } else { view::Unchanged::Hidden };
    let text = match format {
        Format::Human if g.quiet => format!("{}\n", view::summary_line(p)),
        Format::Human => view::human(p, &Style::stdout(g.no_color), unchanged),
        Format::Json => view::json(p, unchanged),
        Format::Markdown => view::markdown(p, unchanged),
    };
    crate::out!("{}", terminal_safe(&text, format == Format::Human && Style::stdout(g.no_color).color));
}

/// What the metrics say besides the plan: the sites, the last apply that ended well (this
/// machine's journals), the certificates read (Karmada's, when C.1 is planned; the mesh CA,
/// when B.2 is).
fn metric_facts(
    g: &Global,
    ws: &crate::operation::Workspace,
    live: Option<&crate::live::observe::Live>,
) -> crate::plan::metrics::Facts {
    use crate::live::served_cert::ServedCert;
    use crate::plan::metrics::CertExpiry;
    let certificates = [
        (
            live.and_then(|l| l.karmada_cert.as_ref()),
            crate::desired::karmada::KARMADA_NAMESPACE,
            crate::desired::karmada::KARMADA_CERT_SECRET,
        ),
        (
            live.and_then(|l| l.mesh_ca.as_ref()),
            crate::live::served_cert::MESH_CA_NAMESPACE,
            crate::live::served_cert::MESH_CA_SECRET,
        ),
    ]
    .into_iter()
    .filter_map(|(cert, ns, name)| match cert {
        Some(ServedCert::Read(names)) => Some(CertExpiry { name: format!("{ns}/{name}"), not_after: names.not_after }),
        _ => None,
    })
    .collect();
    crate::plan::metrics::Facts {
        sites: ws.topology().sites.iter().map(|s| s.name.clone()).collect(),
        last_successful_apply: crate::apply::journal::last_success(&g.state_dir),
        certificates,
        now: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64),
    }
}
