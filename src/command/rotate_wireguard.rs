//! `fabric rotate wireguard`: new WireGuard key pairs for the tunnel's routers.

use std::time::Duration;

use clap::Args;
use miette::Report;

use super::{Done, usage};
use crate::command::args::Global;
use crate::operation::rotate_wireguard::{self as rotate_op, RotateError};
use crate::style::terminal_safe;

/// Give the tunnel's routers new WireGuard key pairs, both ends switched together
///
/// Each new key pair is made on its router (the private key never leaves it; only public keys
/// travel, and the journal under .fabric/runs records those). Every router is prepared first,
/// then all switch at once; B.1's check must pass through the new keys and each router is
/// confirmed over a new connection within --confirm-timeout, or every router goes back to its
/// old key (a Linux router at once, a VyOS router when its commit-confirm timer fires). Pings
/// across the tunnel measure how long it carried nothing, and the command prints it. B.1 must be
/// in sync first (`fabric plan --step B.1`). It shows the routers and asks for `yes` (unless
/// --auto-approve; with no terminal to ask at, it refuses before reading anything, as apply does).
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  fabric rotate wireguard\n  fabric rotate wireguard --site sp --auto-approve\n  \
                        fabric rotate wireguard --confirm-timeout 300")]
pub struct Opts {
    /// Only this site's router gets a new key pair (its peers still learn its new public key)
    #[arg(long, value_name = "SITE")]
    pub site: Vec<String>,
    /// Do not ask for confirmation
    #[arg(long)]
    pub auto_approve: bool,
    /// Seconds a router waits for confirmation before going back to its old key by itself (VyOS rounds up to minutes)
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub confirm_timeout: u64,
}

/// The error as a diagnostic: an operation's own (code and help as plan and apply give them), or
/// the rotation's.
fn report(e: RotateError) -> Report {
    let e = match e {
        RotateError::Op(op) => return Report::new(op),
        e => e,
    };
    let help = e.help();
    usage(e.code(), terminal_safe(&e.to_string(), false), help)
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    // As apply: no terminal to ask at is found before anything is read or connected to.
    if !o.auto_approve {
        super::apply::needs_terminal_for(
            "rotate wireguard",
            "add --auto-approve (CI), or run it at a terminal (it shows what it will change, then asks)",
        )?;
    }
    let ws = super::workspace(g)?;
    let targets = super::targets(g, &ws)?;
    let rt = crate::operation::runtime()?;
    let prepared = rotate_op::prepare(&ws, &o.site, &targets, &rt).map_err(report)?;
    if !g.quiet || !o.auto_approve {
        crate::outln!("fabric will rotate the tunnel's WireGuard keys:");
        for line in prepared.summary(&ws) {
            crate::outln!("  {}", terminal_safe(&line, false));
        }
    }
    if !o.auto_approve {
        super::apply::approve()?;
    }
    let progress = super::progress_lines(g.quiet);
    let opts =
        rotate_op::Options { state_dir: g.state_dir.clone(), confirm_timeout: Duration::from_secs(o.confirm_timeout) };
    let done = rotate_op::run(&ws, prepared, &opts, &targets, &progress, &rt).map_err(report)?;
    let r = &done.rotated;
    for (router, old, new) in &r.keys {
        crate::outln!("{router}: public key {old} → {new}");
        let recorded = ws
            .topology()
            .sites
            .iter()
            .find(|s| crate::desired::Target::router(&s.name) == *router)
            .and_then(|s| s.router.wireguard.public_key.as_ref());
        if recorded.is_some() {
            crate::outln!("  update sites[].router.wireguard.public_key to the new key for `fabric render`");
        }
    }
    match &r.loss {
        Ok(l) => crate::outln!("{}", l.line()),
        Err(why) => crate::outln!("loss window not measured: {}", terminal_safe(&why.0, false)),
    }
    crate::outln!(
        "Rotation complete: {} router key(s) renewed, checked ({}) and confirmed. Run {}; journal {}",
        r.keys.len(),
        terminal_safe(&r.check, false),
        done.run,
        done.journal.display()
    );
    Ok(Done::Ok)
}
