//! `fabric rotate credentials`: renew the credentials fabric copied or generated.

use clap::Args;
use miette::Report;

use super::Done;
use crate::command::args::Global;
use crate::operation::rotate_credentials as rotate_op;
use crate::style::terminal_safe;

/// Renew the credentials fabric copied or generated, with a rollback point
///
/// Copies again every Secret fabric copies (Karmada's member credentials, ArgoCD's cluster
/// secret, the estimators' and MultiKueue's worker kubeconfigs) from its source as it is now,
/// and renews the Cluster Mesh CA with an overlap, one stage per run: 1. a new CA added beside
/// the old in the trust bundle of the certificates cilium-certgen issued; 2. the new CA signs
/// (its copies follow) and those certificates are issued again; 3. the old CA removed. Run it
/// again for the next stage once the agents have the new bundle. With --k3s-token, the K3s join
/// token of each cluster fabric installed is renewed too: a new one generated on the first
/// server and `k3s token rotate` run there, the other servers restarted one at a time (Ready
/// between), the agents' token files written again (they join with it when they restart); the
/// old token kept on each host (docs/runbook.md, "Rotating credentials").
///
/// Shows what will be renewed (never a value) and asks for `yes` (unless --auto-approve; with
/// no terminal to ask at, it refuses before reading anything, as apply does). The
/// old data of every Secret is kept beside it (`<name>.prior-<run>`) until the next rotation;
/// `fabric rollback RUN-ID` puts it back. The journal never holds a secret.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  fabric rotate credentials\n  fabric rotate credentials --site sp --auto-approve\n  \
                  fabric rotate credentials --site sp --k3s-token    also the K3s join token\n  \
                  fabric rollback 20261202T133000Z-4242     put a rotation's old data back"
)]
pub struct Opts {
    /// Only the credentials copied at this site or from its cluster (the mesh CA, shared by
    /// every site, is then left out)
    #[arg(long, value_name = "NAME")]
    pub site: Option<String>,
    /// Also renew the K3s join token of each cluster fabric installed (restarts its other
    /// servers)
    #[arg(long)]
    pub k3s_token: bool,
    /// Do not ask for confirmation
    #[arg(long)]
    pub auto_approve: bool,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    // As apply: no terminal to ask at is found before anything is read or connected to.
    if !o.auto_approve {
        super::apply::needs_terminal_for(
            "rotate credentials",
            "add --auto-approve (CI), or run it at a terminal (it shows what it will change, then asks)",
        )?;
    }
    let ws = super::workspace(g)?;
    let targets = super::targets(g, &ws)?;
    let rt = crate::operation::runtime()?;
    let rotation = rotate_op::read(&ws, o.site.as_deref(), o.k3s_token, &targets, &rt)?;
    let color = crate::style::Style::stdout(g.no_color).color;
    if !g.quiet || !o.auto_approve {
        crate::outln!("fabric rotate credentials: what will be renewed (values are never shown)\n");
        for line in rotate_op::lines(&rotation) {
            crate::outln!("{}", terminal_safe(&line, color));
        }
    }
    if !rotation.has_changes() {
        if !g.quiet {
            crate::outln!("\nNothing to renew.");
        }
        return Ok(Done::Ok);
    }
    if !o.auto_approve {
        super::apply::approve()?;
    }
    let progress = super::progress_lines(g.quiet);
    let opts = rotate_op::Options { state_dir: g.state_dir.clone() };
    let done = rotate_op::run(&ws, rotation, &opts, &targets, &progress, &rt)?;
    if !g.quiet {
        crate::outln!(
            "Rotation complete: {} step(s) renewed. Run {}; journal {} (`fabric rollback {}` puts the old data back)",
            done.renewed.len(),
            done.run,
            done.journal.display(),
            done.run
        );
    }
    Ok(Done::Ok)
}
