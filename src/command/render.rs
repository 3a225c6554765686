//! `fabric render`: write the GitOps repository's files from the topology.

use std::path::PathBuf;

use clap::Args;
use miette::Report;

use super::{Done, usage};
use crate::command::args::Global;
use crate::operation::render::{self, Status};
use crate::style::Style;

/// Write the seed's artifacts (Cilium, VyOS, Karmada, Kueue, K3s, ArgoCD, TensorZero files)
///
/// The files are the same desired state that plan and apply use. With --check nothing is
/// written: exit 1 and list the files that differ from DIR (the CI guard that the repository
/// matches the topology), exit 0 when identical. Files fabric rendered earlier that the topology
/// no longer produces are removed (or, with --check, listed as stale). Nothing is written when
/// the objects would not work together (the consistency pass, docs/errors.md).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  fabric --example render --out /tmp/devops\n  fabric -f topology.yaml render --out . --check"
)]
pub struct Opts {
    /// Root of the GitOps repository to write into
    #[arg(long, value_name = "DIR", default_value = "rendered")]
    pub out: PathBuf,
    /// Write nothing; exit 1 if any file differs
    #[arg(long)]
    pub check: bool,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let ws = super::workspace(g)?;
    let found = ws.consistency();
    super::print_findings(&found, g);
    if let Some(e) = super::validate::consistency_error(&found) {
        return Err(e);
    }
    let artifacts = ws.render();
    let io = |e: std::io::Error, what: &str| {
        usage("render::io", format!("{what}: {e}"), "check that the directory exists and is writable")
    };
    let status = render::compare(&artifacts, &o.out).map_err(|e| io(e, &format!("cannot read {}", o.out.display())))?;
    let st = Style::stdout(g.no_color);
    let changed: Vec<&(String, Status)> = status.iter().filter(|(_, s)| *s != Status::Same).collect();
    for (path, s) in &changed {
        let line = match s {
            Status::Missing => st.green(&format!("+ {path}")),
            Status::Differs => st.yellow(&format!("~ {path}")),
            Status::Stale => st.red(&format!("- {path}")),
            Status::Same => continue,
        };
        if !g.quiet || o.check {
            crate::outln!("{line}");
        }
    }
    let dir = o.out.display();
    if o.check {
        if changed.is_empty() {
            if !g.quiet {
                crate::outln!("{} files in {dir} match the topology", artifacts.len());
            }
            return Ok(Done::Ok);
        }
        return Err(usage(
            "render::differs",
            format!("{} of the rendered files differ from {dir}", changed.len()),
            format!("run `fabric render --out {dir}` and commit the result"),
        ));
    }
    for a in &artifacts {
        if status.iter().any(|(p, s)| *p == a.path && *s == Status::Same) {
            continue;
        }
        let p = o.out.join(&a.path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(e, &format!("cannot create {}", parent.display())))?;
        }
        std::fs::write(&p, &a.content).map_err(|e| io(e, &format!("cannot write {}", p.display())))?;
    }
    for (path, s) in &status {
        if *s == Status::Stale {
            let p = o.out.join(path);
            std::fs::remove_file(&p).map_err(|e| io(e, &format!("cannot remove {}", p.display())))?;
        }
    }
    if !g.quiet {
        crate::outln!("{} files rendered into {dir}, {} changed", artifacts.len(), changed.len());
    }
    Ok(Done::Ok)
}
