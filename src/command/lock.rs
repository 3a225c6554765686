//! `fabric lock status` and `fabric lock release`: see and break the hosts' locks.

use clap::{Args, Subcommand};
use miette::Report;

use super::Done;
use crate::command::args::Global;
use crate::operation::lock as lock_op;
use crate::style::{Style, terminal_safe};

/// See or break the locks an apply or rollback takes
///
/// Every operator's apply or rollback takes the Lease fabric-system/fabric-apply of the clusters
/// that guard its steps (a per-site step: its site's cluster; a step that spans sites: the
/// federation's host cluster), renewed while it runs and expiring 60 s after a run dies. It also
/// locks every SSH host it changes through its SSH session (flock on /run/lock/fabric.lock,
/// naming the run, user, machine, pid and time): the lock ends with the connection, so a killed
/// run leaves none. A lock whose session lingers while its holder is gone (its process died on
/// this machine, it is older than 6 h), or a Lease not renewed within its duration, is stale.
#[derive(Debug, Args)]
pub struct Opts {
    #[command(subcommand)]
    pub command: LockCommand,
}

#[derive(Debug, Subcommand)]
pub enum LockCommand {
    Status(StatusOpts),
    Release(ReleaseOpts),
}

/// Show every host's lock (holder, stale or not) and pending self-reverts
///
/// A target that could not be read shows `?`: its lock is unknown. Exit status: 0 when every
/// target was read, 3 when some could not be (they are named), 1 when none could.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  fabric lock status\n  fabric lock status --format json")]
pub struct StatusOpts {
    /// Output format
    #[arg(long, value_enum, default_value_t = crate::command::verify::VerifyFormat::Human)]
    pub format: crate::command::verify::VerifyFormat,
}

/// Remove stale locks (their holder is gone); with --force, every lock
///
/// Exit status: 0 when every target was read, 3 when some could not be (their locks, if any,
/// are still there: they are named), 1 when none could.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  fabric lock release\n  fabric lock release --force   # break-glass: only when the holder is known dead"
)]
pub struct ReleaseOpts {
    /// Also remove locks whose holder may still run (break-glass)
    #[arg(long)]
    pub force: bool,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let ws = super::workspace(g)?;
    let targets = super::targets(g, &ws)?;
    let rt = crate::operation::runtime()?;
    match o.command {
        LockCommand::Status(s) => {
            let held = lock_op::status(&ws, &targets, &rt)?;
            let leases = lock_op::leases(&ws, &targets, &rt)?;
            // A `?` line is a lock not known, never a free one: the exit status says so too.
            let unread: Vec<String> = leases
                .iter()
                .filter_map(|l| l.unreachable.as_ref().map(|e| format!("{} Lease: {e}", l.target)))
                .chain(held.iter().filter_map(|h| h.unreachable.as_ref().map(|e| format!("{}: {e}", h.target))))
                .collect();
            let outcome = super::unread_outcome("lock::unread", leases.len() + held.len(), &unread, "their locks are");
            if s.format == crate::command::verify::VerifyFormat::Json {
                let v = serde_json::json!({ "hosts": held, "leases": leases });
                crate::outln!("{}", serde_json::to_string_pretty(&v).expect("locks serialize"));
                return outcome;
            }
            let st = Style::stdout(g.no_color);
            for l in &leases {
                let line = match (&l.unreachable, &l.lease) {
                    (Some(e), _) => format!("{}  {} Lease: unreachable: {e}", st.yellow("?"), l.target),
                    (None, Some(s)) if !s.holder.is_empty() && s.expired() => format!(
                        "{}  {} Lease: held by {} (stale: not renewed for {} s, its duration is {} s)",
                        st.yellow("!"),
                        l.target,
                        s.holder,
                        s.renewed_secs_ago,
                        s.duration_secs
                    ),
                    (None, Some(s)) if !s.holder.is_empty() => format!(
                        "{}  {} Lease: held by {} (renewed {} s ago)",
                        st.red("L"),
                        l.target,
                        s.holder,
                        s.renewed_secs_ago
                    ),
                    (None, _) => format!("{}  {} Lease: free", st.green("-"), l.target),
                };
                crate::outln!("{}", terminal_safe(&line, st.color));
            }
            for h in &held {
                let line = match (&h.unreachable, &h.lock) {
                    (Some(e), _) => format!("{}  {}: unreachable: {e}", st.yellow("?"), h.target),
                    (None, None) => format!("{}  {}: free", st.green("-"), h.target),
                    (None, Some(l)) => match &l.stale {
                        Some(why) => format!("{}  {}: held by {} (stale: {why})", st.yellow("!"), h.target, l.holder),
                        None => format!("{}  {}: held by {}", st.red("L"), h.target, l.holder),
                    },
                };
                crate::outln!("{}", terminal_safe(&line, st.color));
                for c in &h.pending_reverts {
                    crate::outln!("{}", terminal_safe(&format!("   pending self-revert: {c}"), false));
                }
            }
            outcome
        }
        LockCommand::Release(r) => {
            let done = lock_op::release(&ws, &targets, r.force, &rt)?;
            for (t, holder) in &done.released {
                crate::outln!("{}", terminal_safe(&format!("released {t}: {holder}"), false));
            }
            if done.released.is_empty() && !g.quiet {
                // About what was read only: an unread target's lock is unknown (the exit says so).
                crate::outln!(
                    "No lock to release{}{}.",
                    if done.unread.is_empty() { "" } else { " among the targets read" },
                    if r.force { "" } else { " (none is stale; --force breaks a live one)" }
                );
            }
            super::unread_outcome("lock::unread", done.total, &done.unread, "their locks are")
        }
    }
}
