//! Renewing a K3s cluster's join token (`fabric rotate credentials`), over SSH, on the hosts
//! fabric installed: the command lines (pure builders) and the host side of each stage.
//!
//! What K3s does, and so the order here (k3s-io/k3s):
//! - `k3s token rotate --new-token NEW` asks the local server (`--server`, default
//!   `https://127.0.0.1:6443`) to re-encrypt the bootstrap data with NEW; the old token is
//!   read from `<data-dir>/server/token` when `--token` is not given (`pkg/cli/token/token.go`,
//!   `Rotate` and `serverAccess`; the flags in `pkg/cli/cmds/token.go`, `NewTokenCommands`).
//! - The server's `/var/lib/rancher/k3s/server/token` is updated with the new value; the other
//!   servers get it with the bootstrap data "upon restart", and are restarted one at a time
//!   (`docs/adrs/server-token-rotation.md`, "Token Rotation Workflow", step 3). fabric's servers
//!   have no `token:` in their config (`desired::text::k3s_server_config`): nothing to edit there.
//! - A.1/A.3 copy agents' tokens from `server/node-token`, which K3s keeps as a symlink to
//!   `server/token` ("backwards compatibility": k3s-io/k3s `pkg/server/server.go`,
//!   `printTokens`, which replaces a non-symlink `node-token` with the link), so a later apply
//!   copies the rotated token, not the old one.
//! - Agents send their token (`token-file`, `/etc/rancher/k3s/token`, written by A.1/A.3) only
//!   when they (re)join: the file is updated so that their next restart joins with the new one
//!   (`Rotate` ends "restart k3s nodes with new token"). Running agents are not restarted.
//!
//! The new token is generated on the first server (from its `/dev/urandom`), never on the
//! operator's machine; it crosses fabric's memory only from the server's token file to the
//! agents' stdin, never printed, logged or journaled. Each host keeps the old file beside the
//! new (`<file>.prior-<run>`, mode 0600): the rollback point, put back by [`undo`].

use crate::apply::Failed;
use std::time::Duration;

use crate::transport::shell::{self, Sh};
use crate::transport::ssh::Session;

/// Where a K3s server keeps its token (ADR "server-token-rotation").
pub const SERVER_TOKEN: &str = "/var/lib/rancher/k3s/server/token";
/// Where fabric writes an agent's join token (its config's `token-file`).
pub const AGENT_TOKEN: &str = "/etc/rancher/k3s/token";
/// The journal's address (`host.<name>/command:<this>`) of the first server's rotation.
pub const ROTATED: &str = "k3s-token-rotate";
/// The journal's address of an agent's token file written again.
pub const AGENT_FILE: &str = "k3s-token-file";
/// The journal's address of another server restarted with the new token.
pub const RESTARTED: &str = "k3s-token-restart";

const TIMEOUT: Duration = Duration::from_secs(120);

/// Where a host keeps the old token of `path` for run `run`.
pub fn kept(path: &str, run: &str) -> String {
    format!("{path}.prior-{}", run.to_ascii_lowercase())
}

/// On the first server: the old token kept (0600), a new one generated there, `k3s token
/// rotate --new-token` run. Nothing is written to stdout (the CLI's own lines are dropped: they
/// never hold the token, but nothing from here is shown). A failed rotation drops the copy.
pub fn rotate(run: &str) -> Sh {
    Sh::fill(
        "set -e; umask 077; t={}; k={}; cp {} \"$k\"; chmod 600 \"$k\"; \
         new=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'); \
         if ! k3s token rotate --new-token \"$new\" >/dev/null; then rm -f \"$k\"; exit 1; fi",
        &[&SERVER_TOKEN, &kept(SERVER_TOKEN, run).as_str(), &SERVER_TOKEN],
    )
}

/// Restarts a server's K3s (the bootstrap data, new token included, is read on start).
pub fn restart_server() -> Sh {
    Sh::lit("systemctl restart k3s")
}

/// On an agent: the old token file kept (0600, once per run), the new one from stdin written in
/// its place (0600).
pub fn write_agent(run: &str) -> Sh {
    Sh::fill(
        "set -e; umask 077; f={}; k={}; [ -e \"$k\" ] || cp \"$f\" \"$k\"; chmod 600 \"$k\"; \
         cat > \"$f.next\"; chmod 600 \"$f.next\"; mv \"$f.next\" \"$f\"",
        &[&AGENT_TOKEN, &kept(AGENT_TOKEN, run).as_str()],
    )
}

/// What puts a host back for `command` (one of [`ROTATED`], [`RESTARTED`], [`AGENT_FILE`]):
/// the first server rotates back to the token it kept (the datastore's bootstrap data follows
/// only a rotation, not a file copy); another server restarts again (after it, as a rollback
/// goes newest first and the servers are journaled before it); an agent's file is moved back.
/// Nothing kept: nothing to do.
pub fn undo(command: &str, run: &str) -> Option<Sh> {
    match command {
        RESTARTED => Some(restart_server()),
        ROTATED => Some(Sh::fill(
            "set -e; k={}; [ -e \"$k\" ] || exit 0; \
             k3s token rotate --new-token \"$(cat \"$k\")\" >/dev/null; rm -f \"$k\"",
            &[&kept(SERVER_TOKEN, run).as_str()],
        )),
        AGENT_FILE => Some(Sh::fill(
            "set -e; k={}; [ -e \"$k\" ] || exit 0; mv \"$k\" {}",
            &[&kept(AGENT_TOKEN, run).as_str(), &AGENT_TOKEN],
        )),
        _ => None,
    }
}

/// Runs `cmd` as root on `s` (with `stdin`); its stdout, or why it failed (exit status and
/// stderr: neither holds a token, as nothing here echoes one).
pub async fn run_root(s: &Session, cmd: &Sh, stdin: Option<&[u8]>) -> Result<String, Failed> {
    let host = s.endpoint.target.clone();
    let o = s.run(&shell::as_root(&s.endpoint.user, cmd), stdin, TIMEOUT).await.map_err(|e| format!("{host}: {e}"))?;
    if o.status != 0 {
        return Err(Failed::from(format!("{host}: exit {}: {}", o.status, o.stderr_str().trim())));
    }
    Ok(o.stdout_str())
}

/// The first server's token now (to write to the agents; held in memory only).
pub async fn read_server_token(s: &Session) -> Result<Vec<u8>, Failed> {
    let host = s.endpoint.target.clone();
    let o = s
        .run(&shell::as_root(&s.endpoint.user, &shell::read_file(SERVER_TOKEN)), None, TIMEOUT)
        .await
        .map_err(|e| format!("{host}: {e}"))?;
    if o.status != 0 || o.stdout.is_empty() {
        return Err(Failed::from(format!("{host}: {SERVER_TOKEN} cannot be read (exit {})", o.status)));
    }
    Ok(o.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rotation_keeps_the_old_token_and_generates_the_new_one_on_the_server() {
        let cmd = rotate("20261202T150000Z-7");
        let s = cmd.as_str();
        assert!(s.contains("cp /var/lib/rancher/k3s/server/token \"$k\""), "{s}");
        assert!(s.contains("k=/var/lib/rancher/k3s/server/token.prior-20261202t150000z-7"), "{s}");
        assert!(s.contains("/dev/urandom") && s.contains("k3s token rotate --new-token \"$new\" >/dev/null"), "{s}");
        assert!(!s.contains("--token "), "the old token is read by k3s from its file: {s}");
    }

    #[test]
    fn an_agent_keeps_its_old_file_once_and_rollback_moves_it_back() {
        let w = write_agent("R1");
        assert!(w.as_str().contains("[ -e \"$k\" ] || cp \"$f\" \"$k\""), "{}", w.as_str());
        let u = undo(AGENT_FILE, "R1").unwrap();
        assert_eq!(
            u.as_str(),
            "set -e; k=/etc/rancher/k3s/token.prior-r1; [ -e \"$k\" ] || exit 0; mv \"$k\" /etc/rancher/k3s/token"
        );
        let s = undo(ROTATED, "R1").unwrap();
        assert!(s.as_str().contains("k3s token rotate --new-token \"$(cat \"$k\")\""), "{}", s.as_str());
        assert!(undo("k3s-install", "R1").is_none());
    }
}
