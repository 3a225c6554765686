//! Providers: how each kind of resource is read, changed and put back, over one SSH session.
//!
//! Each provider turns live state into a canonical text (what plan diffs against the desired
//! text) and applies a desired text. Remote command lines come from `transport::shell` or from
//! the pure builders below, so they are tested as strings. Nothing secret is ever returned: a
//! WireGuard private key stays on its host, a VyOS `private-key` line is dropped when read.

pub mod airgap;
pub mod bundle;
pub mod ca_bundle;
pub mod cert;
pub mod charts;
pub mod kept_secret;
pub mod kube;
pub mod lease;
pub mod nft;
pub mod secrets;
pub mod wg_rotate;

use std::time::Duration;

use crate::addr::{Address, Target};
use crate::desired::{Desired, ProviderKind, Resource};
use crate::sh;
pub use crate::topology::wgkey::{self, WgKey};
use crate::transport::shell::{self, Sh};
use crate::transport::ssh::{Session, SshError};

/// Live state of one resource.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", content = "text", rename_all = "lowercase")]
pub enum Observed {
    Absent,
    Present(String),
}

/// Placeholder text of secrets: they are compared by presence only.
pub const SENSITIVE: &str = "(sensitive)";

const READ_TIMEOUT: Duration = Duration::from_secs(20);
const APPLY_TIMEOUT: Duration = Duration::from_secs(90);

/// Why a provider failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error(transparent)]
    Ssh(#[from] SshError),
    #[error("{address}: `{what}` failed (exit {status}): {stderr}")]
    Command { address: Address, what: String, status: u32, stderr: String },
    #[error("{address}: {message}")]
    Unsupported { address: Address, message: String },
    /// A router answered its public key with something else: untrusted, never used.
    #[error("{target} answered with something that is not its public key: {source}")]
    NotAKey { target: String, source: wgkey::NotAKey },
}

fn failed(r: &Resource, what: &str, o: &crate::transport::ssh::Output) -> ProviderError {
    failed_at(&r.address, what, o)
}

/// The error of a failed remote command, with stderr and (routers often print their errors
/// there) the end of stdout.
fn failed_at(address: &Address, what: &str, o: &crate::transport::ssh::Output) -> ProviderError {
    let out = o.stdout_str();
    let tail: Vec<&str> = out.lines().rev().filter(|l| !l.trim().is_empty()).take(3).collect();
    let mut detail = o.stderr_str();
    if !tail.is_empty() {
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        detail = format!("{detail} | {}", tail.join(" / "));
    }
    ProviderError::Command { address: address.clone(), what: what.into(), status: o.status, stderr: detail }
}

/// Remote user of the session, for sudo.
fn root(s: &Session, cmd: &Sh) -> Sh {
    shell::as_root(&s.endpoint.user, cmd)
}

/// Path of a file resource (`host.x/file:/etc/y` → `/etc/y`).
pub fn file_path(r: &Resource) -> &str {
    r.address.file().unwrap_or_default()
}

/// WireGuard interface of a wireguard resource (`router.x/wireguard:wg0` → `wg0`).
pub fn wg_interface(r: &Resource) -> &str {
    r.address.wireguard().unwrap_or("wg0")
}

// ---- Pure builders for WireGuard on Linux --------------------------------------------------

pub fn wg_conf_path(iface: &str) -> String {
    format!("/etc/wireguard/{iface}.conf")
}

/// Creates the private key on the host if it has none (0600, never copied off the host) and
/// prints the public key.
pub fn wg_ensure_key(iface: &str) -> Sh {
    let key = format!("/etc/wireguard/{iface}.key");
    sh!("umask 077 && mkdir -p /etc/wireguard && { [ -s {} ] || wg genkey > {}; } && wg pubkey < {}", key, key, key)
}

/// Prints the public key if the host has a private key, else exits [`shell::ABSENT`].
pub fn wg_public_key(iface: &str) -> Sh {
    let key = format!("/etc/wireguard/{iface}.key");
    sh!("if [ -s {} ]; then wg pubkey < {}; else exit 3; fi", key, key)
}

/// (Re)starts the interface from its wg-quick file. wireguard-go serves where the kernel has no
/// WireGuard; its output is redirected so that it does not hold the SSH session open. After the
/// start, one ping to each peer's tunnel address makes this side shake hands at once, so a peer
/// still holding a session with the old instance renegotiates now rather than in 15 s or more.
/// The pings are left running (detached, as `providers::wg_rotate` does): the first end of a
/// new tunnel has no peer up yet (`apply::tunnel_ends`), and waiting for its ping's timeout cost
/// every B.1 a second.
/// Under systemd the interface is enabled at boot (`wg-quick@<if>`, with wireguard-go where the
/// kernel has no WireGuard), so the file written is also what comes back after a reboot.
pub fn wg_restart(iface: &str) -> Sh {
    sh!(
        "wg-quick down {} >/dev/null 2>&1; \
         if ! ip link add fabric-probe type wireguard 2>/dev/null; then export WG_QUICK_USERSPACE_IMPLEMENTATION=wireguard-go; \
         else ip link del fabric-probe; fi; \
         d=$(mktemp -d /run/fabric.XXXXXXXX) || exit 1; \
         if ! wg-quick up {} </dev/null >\"$d/wg-quick.log\" 2>&1; then cat -- \"$d/wg-quick.log\" >&2; rm -rf -- \"$d\"; exit 1; fi; \
         rm -rf -- \"$d\"; \
         for a in $(wg show {} allowed-ips | tr ' \t' '\n\n' | grep '/32$' | cut -d/ -f1); do ( ping -c 1 -W 1 \"$a\" >/dev/null 2>&1 </dev/null & ); done; \
         if [ -d /run/systemd/system ]; then \
         if [ -n \"$WG_QUICK_USERSPACE_IMPLEMENTATION\" ]; then mkdir -p /etc/systemd/system/wg-quick@.service.d && \
         printf '[Service]\\nEnvironment=WG_QUICK_USERSPACE_IMPLEMENTATION=wireguard-go\\n' > /etc/systemd/system/wg-quick@.service.d/fabric-userspace.conf && systemctl daemon-reload; fi; \
         systemctl enable wg-quick@{} >/dev/null 2>&1 || true; fi",
        iface,
        iface,
        iface,
        // systemd's instance name: the interface, as one word.
        iface
    )
}

/// Stops the interface and removes its file (the key stays: it is the host's identity).
pub fn wg_remove(iface: &str) -> Sh {
    sh!("wg-quick down {} >/dev/null 2>&1; rm -f -- {}", iface, wg_conf_path(iface))
}

/// Prints the wg-quick file if the interface is configured and up, else exits ABSENT. A file
/// without a running interface is drift too: it reads as the file with a marker line.
pub fn wg_read(iface: &str) -> Sh {
    let f = wg_conf_path(iface);
    let down = format!("# (interface {iface} is down)");
    sh!(
        "if [ -e {} ]; then cat -- {}; if ! wg show {} >/dev/null 2>&1; then echo {}; fi; else exit 3; fi",
        f,
        f,
        iface,
        down
    )
}

// ---- VyOS ---------------------------------------------------------------------------------

/// VyOS's shell reading a script from stdin (the script is VyOS lines, their values quoted by
/// `desired::vyos::quote`).
pub fn vbash() -> Sh {
    Sh::lit("vbash -s")
}

/// The op-mode read of the running configuration through VyOS's script template.
pub const VYOS_SHOW: &str = "source /opt/vyatta/etc/functions/script-template\nrun show configuration commands\n";

/// The line every `vbash -s` script of fabric's starts with: it makes VyOS's commands (vyatta-cfg
/// `functions/wrapper/script-template`, which sources `/etc/bash_completion.d/vyatta-cfg`, whose
/// `_vyatta_cfg_init` aliases each configuration command and every prefix of it).
pub const VYOS_TEMPLATE: &str = "source /opt/vyatta/etc/functions/script-template\n";

/// The running configuration, as a line of a script after [`VYOS_TEMPLATE`]: `run` is the
/// template's alias for `vyatta_cfg_run run`, which runs `/opt/vyatta/bin/vyatta-op-cmd-wrapper
/// show configuration commands` (vyatta-cfg `functions/interpreter/vyatta-cfg-run`,
/// `vyatta_config_run`), with or without a `configure` session (VyOS's command-scripting
/// documentation: op-mode commands in a script are prefixed with `run`).
pub fn vyos_show_read() -> Sh {
    Sh::lit("run show configuration commands")
}

/// The router's WireGuard public key, as a line of a script after [`VYOS_TEMPLATE`] (VyOS runs
/// `sudo wg show <if> public-key`: it needs the interface to exist).
pub fn vyos_key_read(iface: &str) -> Sh {
    sh!("run show interfaces wireguard {} public-key", iface)
}

/// A plain POSIX sh read as a line of a script after [`VYOS_TEMPLATE`]. There every prefix of a
/// configuration command is an alias in command position (`_vyatta_cfg_init`: `sh` is `show`,
/// `exit` is the template's `eval $(vyatta_exit_configure)`, which returns 0), so a read written
/// for `sh` (`... else exit 3; fi`) would change meaning; `/bin/sh -c` runs it in a shell
/// without them (an alias name cannot hold a `/`).
pub fn vyos_plain_read(cmd: &Sh) -> Sh {
    sh!("/bin/sh -c {}", cmd.as_str().to_string())
}

/// A VyOS router's reads as ONE `vbash -s` script, so one channel: the template sourced once,
/// then `reads` framed as `transport::batch` frames them. Each read runs in a subshell with its
/// stdin from /dev/null: bash leaves the script's next lines in its stdin pipe, so a read that
/// reads stdin would otherwise take them. The template sets no `-e`, so a failing read does not
/// stop the script; its status is in its frame.
pub fn vyos_read_script(reads: &[Sh], tag: &str) -> String {
    format!("{VYOS_TEMPLATE}{}", crate::transport::batch::script(reads, tag))
}

/// The VyOS subtree a resource manages (`router.x/vyos:interfaces wireguard wg0`).
pub fn vyos_subtree(r: &Resource) -> &str {
    r.address.vyos().unwrap_or_default()
}

/// The lines of `show configuration commands` under `subtree`, without secrets, sorted.
pub fn vyos_filter(config: &str, subtree: &str) -> Vec<String> {
    let prefix = format!("set {subtree} ");
    let exact = format!("set {subtree}");
    let mut lines: Vec<String> = config
        .lines()
        .map(str::trim)
        .filter(|l| (l.starts_with(&prefix) || *l == exact) && !l.contains(" private-key "))
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

/// Whether a `set` line is one fabric takes from a router (or a journal) into a script: `set`
/// and words that are either plain (`[A-Za-z0-9._/:@+,=-]`) or one single-quoted value without
/// a quote or a control character inside. Nothing else can reach vbash from a host's answer.
pub fn vyos_line_ok(line: &str) -> bool {
    let Some(path) = line.strip_prefix("set ") else { return false };
    let plain = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b"._/:@+,=-".contains(&b));
    let quoted = |w: &str| {
        w.len() >= 2
            && w.starts_with('\'')
            && w.ends_with('\'')
            && !w[1..w.len() - 1].chars().any(|c| c == '\'' || c.is_control())
    };
    path.chars().filter(|c| *c == '\'').count() % 2 == 0 && vyos_words(path).iter().all(|w| plain(w) || quoted(w))
}

/// Words of a configuration path; a single-quoted value (which may hold spaces) is one word.
fn vyos_words(path: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in path.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                cur.push(c);
            }
            ' ' if !quoted => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// The `delete` commands that remove `gone` lines without touching `keep`: a whole node is
/// deleted when nothing below it stays (VyOS refuses a peer or route left half-configured), but
/// never above one of `roots`, the subtrees fabric manages.
pub fn vyos_deletes(gone: &[String], keep: &[String], roots: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in gone {
        let path = line.trim_start_matches("set ");
        let words = vyos_words(path);
        let Some(root) =
            roots.iter().filter(|r| line.trim_start_matches("set ").starts_with(r.as_str())).max_by_key(|r| r.len())
        else {
            out.push(format!("delete {}", line.trim_start_matches("set ")));
            continue;
        };
        let min = root.split(' ').count();
        let mut chosen = path.to_string();
        for k in min..words.len() {
            let candidate = words[..k].join(" ");
            let prefix = format!("set {candidate} ");
            let exact = format!("set {candidate}");
            if !keep.iter().any(|l| l.starts_with(&prefix) || *l == exact) {
                chosen = candidate;
                break;
            }
        }
        let cmd = format!("delete {chosen}");
        // A node deleted whole covers the lines below it.
        if !out.iter().any(|d| cmd == *d || cmd.starts_with(&format!("{d} "))) {
            out.retain(|d| !d.starts_with(&format!("{cmd} ")));
            out.push(cmd);
        }
    }
    out
}

/// How a router's `commit-confirm` asks before arming its timer, as read from the router
/// ([`vyos_confirm_form`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmForm {
    /// VyOS 1.4 (sagitta): `commit-confirm N` always asks `Proceed ? [Y/n]` on stdin
    /// (vyos-1x `python/vyos/config_mgmt.py` `commit_confirm` → `python/vyos/utils/io.py`
    /// `ask_yes_no`; vyatta-cfg `functions/interpreter/vyatta-cfg-run` on sagitta passes no
    /// `-y`).
    Prompts,
    /// Newer vyatta-cfg (`current`, T9144): `commit-confirm N no-prompt` runs config-mgmt with
    /// `-y`, which skips the question.
    NoPrompt,
}

/// Reads what `commit-confirm` runs on the router: bash prints the function the script-template
/// aliases it to (vyatta-cfg `functions/interpreter/vyatta-cfg-run`).
pub const VYOS_CONFIRM_PROBE: &str =
    "source /opt/vyatta/etc/functions/script-template\ndeclare -f vyatta_config_commit-confirm\n";

/// The form of `commit-confirm` a router supports, from the output of [`VYOS_CONFIRM_PROBE`]:
/// the function calls `config-mgmt commit_confirm` on every version; only the newer one
/// compares an argument with `"no-prompt"` (vyatta-cfg PR #153). None: not a function fabric
/// knows, so fabric does not guess how it asks.
pub fn confirm_form_of(probe_output: &str) -> Option<ConfirmForm> {
    if !probe_output.contains("config-mgmt commit_confirm") {
        return None;
    }
    Some(if probe_output.contains("\"no-prompt\"") { ConfirmForm::NoPrompt } else { ConfirmForm::Prompts })
}

/// The `commit-confirm` line of an apply script. Its stdin is bound to a here-string holding
/// the answer `y`, whatever the form: on 1.4, `config_mgmt.py` reads the answer with Python's
/// `input()`, which fills an 8 KiB buffer from a pipe, so reading the script's own stdin would
/// take the script lines after it too (and a non-answer makes `ask_yes_no` ask again, forever at
/// end of input). bash gives a here-string to that one command only and reads the script
/// itself one byte at a time, so no script line can be read by the prompt. Where the router
/// has `no-prompt`, the question is not asked at all.
pub fn commit_confirm_line(minutes: u32, form: ConfirmForm) -> String {
    match form {
        ConfirmForm::Prompts => format!("commit-confirm {minutes} <<< y"),
        ConfirmForm::NoPrompt => format!("commit-confirm {minutes} no-prompt <<< y"),
    }
}

/// What VyOS prints when a line of a script fails. `vbash -s` goes on after a failing line
/// and the exit status is the last line's (the script-template sets no `-e`; vyatta-cfg
/// `functions/interpreter/vyatta-cfg-run`: a failed `set` returns 0, `vyatta_config_commit`
/// ends in `unset`), so the output is what says a script failed:
/// - `Set failed`, `Delete failed` (vyatta-cfg `src/cli_new.c` `bye`, vyatta-cfg-run
///   `vyatta_cfg_validate_cmd`), `Commit failed` (vyatta-cfg `src/commit/commit-algorithm.cpp`),
///   `[[path]] failed` and `Value validation failed`: a line ending in ` failed`;
/// - `Configuration path: [...] is not valid` / `is ambiguous`, `Invalid command:`,
///   `Ambiguous command:` (vyatta-cfg-run);
/// - `commit-confirm canceled`, `Another confirm is pending` (vyos-1x config_mgmt.py) and
///   `Please respond with yes/y or no/n` (vyos-1x `python/vyos/utils/io.py`);
/// - `No configuration changes to commit` (vyatta-cfg-run): fabric only sends a change, so a
///   router that sees none did not take it;
/// - bash's `command not found`.
///
/// Returns the first such line (it never holds a value fabric sent: VyOS names paths here).
pub fn vyos_error(stdout: &str, stderr: &str) -> Option<String> {
    const MARKS: [&str; 9] = [
        "] is not valid",
        "] is ambiguous",
        "Invalid command:",
        "Ambiguous command:",
        "commit-confirm canceled",
        "Another confirm is pending",
        "Please respond with yes/y or no/n",
        "No configuration changes to commit",
        "command not found",
    ];
    stdout.lines().chain(stderr.lines()).map(str::trim).find_map(|l| {
        let bad = l.ends_with(" failed") || MARKS.iter().any(|m| l.contains(m));
        bad.then(|| l.chars().take(160).collect())
    })
}

/// The line that makes a router's WireGuard key in configure mode (B.1, only where the router
/// shows no key). `install_into_config` (vyos-1x `python/vyos/utils/misc.py`) has a `[y/N]`
/// question before overwriting, but its condition never holds for a new key (the quoted new
/// value is compared with the stored ones) and the question itself would raise a NameError
/// (`{node}`): VyOS 1.4 overwrites without asking (`crates/testkit/src/vyos_double.md`). The
/// here-string answers `n` on that command's own stdin should a VyOS ask, so no script line is
/// ever read as an answer. (`fabric rotate wireguard` answers `y`: `providers::wg_rotate`.)
pub fn vyos_generate_key_line(iface: &str) -> String {
    format!("run generate pki wireguard key-pair install interface {} <<< n", crate::desired::vyos::word(iface))
}

/// What `commit-confirm` prints once its timer is armed (vyos-1x `config_mgmt.py`
/// `commit_confirm`: `Initialized commit-confirm; N minutes to confirm before reboot|reload`).
pub const VYOS_ARMED: &str = "Initialized commit-confirm;";

/// The configuration-mode script that turns `from` into `to` (both sets of `set` lines under
/// the managed `roots`). With `confirm` it ends in `commit-confirm` (see
/// [`commit_confirm_line`]), so the router reverts by itself unless confirmed; without, in
/// `commit` and `save` (to put a step back).
pub fn vyos_script(
    from: &[String],
    to: &[String],
    roots: &[String],
    confirm: Option<(u32, ConfirmForm)>,
    generate_key: Option<&str>,
) -> String {
    let mut s = String::from("source /opt/vyatta/etc/functions/script-template\nconfigure\n");
    let gone: Vec<String> = from.iter().filter(|l| !to.contains(l)).cloned().collect();
    for d in vyos_deletes(&gone, to, roots) {
        s.push_str(&d);
        s.push('\n');
    }
    if let Some(iface) = generate_key {
        s.push_str(&vyos_generate_key_line(iface));
        s.push('\n');
    }
    for line in to.iter().filter(|l| !from.contains(l)) {
        s.push_str(line);
        s.push('\n');
    }
    match confirm {
        Some((m, form)) => {
            s.push_str(&commit_confirm_line(m, form));
            s.push_str("\nexit\n");
        }
        None => s.push_str("commit\nsave\nexit\n"),
    }
    s
}

/// Stops a pending commit-confirm (what `confirm` answers: [`vyos_confirmed`]).
pub const VYOS_CONFIRM: &str = "source /opt/vyatta/etc/functions/script-template\nconfigure\nconfirm\nexit\n";

/// Saves the running configuration, so that a reboot keeps it.
pub const VYOS_SAVE: &str = "source /opt/vyatta/etc/functions/script-template\nconfigure\nsave\nexit\n";

/// What `confirm` answered (vyos-1x `python/vyos/config_mgmt.py` `confirm`, exit 0 in both
/// cases): `Reboot timer stopped` / `Reload timer stopped` when it stopped a pending timer;
/// `No confirm pending` when there was none, i.e. for fabric's own commit-confirm, that the
/// timer had already fired and the router put itself back. None: neither.
pub fn vyos_confirmed(stdout: &str) -> Option<bool> {
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    if lines.iter().any(|l| *l == "Reboot timer stopped" || *l == "Reload timer stopped") {
        Some(true)
    } else if lines.contains(&"No confirm pending") {
        Some(false)
    } else {
        None
    }
}

/// Reads how the router's `commit-confirm` asks ([`confirm_form_of`]).
pub async fn vyos_confirm_form(s: &Session, at: &Address) -> Result<ConfirmForm, ProviderError> {
    let o = s.run(&vbash(), Some(VYOS_CONFIRM_PROBE.as_bytes()), READ_TIMEOUT).await?;
    confirm_form_of(&o.stdout_str()).ok_or_else(|| ProviderError::Unsupported {
        address: at.clone(),
        message: format!(
            "cannot tell how this router's commit-confirm asks (`declare -f vyatta_config_commit-confirm` \
             exited {} without a function calling config-mgmt commit_confirm); fabric does not guess: \
             is this VyOS 1.4 or newer?",
            o.status
        ),
    })
}

/// Checks the output of a script that ran `vbash -s`: a non-zero exit, or any of VyOS's error
/// lines ([`vyos_error`]) whatever the exit status, fails it; with `armed`, so does an output
/// without [`VYOS_ARMED`] (no timer, so nothing would put the router back).
pub(crate) fn vyos_outcome(
    at: &Address,
    what: &str,
    o: &crate::transport::ssh::Output,
    armed: bool,
) -> Result<(), ProviderError> {
    if o.status != 0 {
        return Err(failed_at(at, what, o));
    }
    let (out, err) = (o.stdout_str(), o.stderr_str());
    if let Some(line) = vyos_error(&out, &err) {
        return Err(ProviderError::Unsupported {
            address: at.clone(),
            message: format!("`{what}`: VyOS said: {line}"),
        });
    }
    if armed && !out.contains(VYOS_ARMED) {
        return Err(ProviderError::Unsupported {
            address: at.clone(),
            message: format!("`{what}`: the router did not say its commit-confirm timer was armed"),
        });
    }
    Ok(())
}

// ---- Reading and applying -----------------------------------------------------------------

/// The command that makes a service pick up a changed file, for files read only at start. K3s
/// reads `/etc/rancher/k3s/config.yaml` when it starts: a server (`k3s`) or an agent
/// (`k3s-agent`) that is installed is restarted; one that is not yet installed reads the file when
/// it is.
pub fn restart_after(path: &str) -> Option<Sh> {
    // K3s reads both only at start (K3s docs: configuration file, private registry configuration).
    matches!(path, "/etc/rancher/k3s/config.yaml" | "/etc/rancher/k3s/registries.yaml").then(|| {
        Sh::lit(
            "for u in k3s k3s-agent; do if systemctl cat \"$u\" >/dev/null 2>&1; then systemctl restart \"$u\" || exit 1; fi; done",
        )
    })
}

/// Reads a secret file (the source of a copy). Only ever held in memory; errors carry stderr
/// only, never the file's content.
pub async fn read_secret_file(s: &Session, address: &Address) -> Result<String, ProviderError> {
    let path = address.file().unwrap_or_default();
    let o = s.run(&root(s, &shell::read_file(path)), None, READ_TIMEOUT).await?;
    match o.status {
        0 if !o.stdout_str().trim().is_empty() => Ok(o.stdout_str()),
        0 | shell::ABSENT => Err(ProviderError::Unsupported {
            address: address.clone(),
            message: "the source of this secret does not exist yet (is the server installed?)".into(),
        }),
        status => Err(ProviderError::Command {
            address: address.clone(),
            what: "read".into(),
            status,
            stderr: o.stderr_str(),
        }),
    }
}

/// How one resource is read: a command line, and the script it reads on stdin (VyOS's `vbash -s`).
#[derive(Debug, Clone, PartialEq)]
pub struct ReadCommand {
    pub command: Sh,
    pub stdin: Option<&'static str>,
}

/// The command that reads `r` on a host reached as `user` (pure: [`read_answer`] reads its
/// output). Reads that take no stdin can share one channel (see `transport::batch`).
pub fn read_command(user: &str, r: &Resource) -> Result<ReadCommand, ProviderError> {
    let plain = |cmd: &Sh| Ok(ReadCommand { command: shell::as_root(user, cmd), stdin: None });
    match (&r.provider, &r.desired) {
        (_, Desired::Secret(_)) => plain(&sh!("test -e {}", file_path(r))),
        (ProviderKind::File, _) => plain(&shell::read_file(file_path(r))),
        (ProviderKind::Wireguard, _) => plain(&wg_read(wg_interface(r))),
        (ProviderKind::Command, Desired::Command { probe, .. }) => plain(probe),
        (ProviderKind::Command, Desired::K3sInstall(_)) => plain(&crate::desired::k3s_install::K3sInstall::read()),
        (ProviderKind::Command, Desired::NodeMigration(m)) => plain(&m.read()),
        (ProviderKind::Vyos, _) => Ok(ReadCommand { command: vbash(), stdin: Some(VYOS_SHOW) }),
        (ProviderKind::Kube, _) => Err(ProviderError::Unsupported {
            address: r.address.clone(),
            message: "the Kubernetes provider is not part of this build yet".into(),
        }),
        (ProviderKind::Command, _) => {
            Err(ProviderError::Unsupported { address: r.address.clone(), message: "no probe".into() })
        }
    }
}

/// Reads one resource's live state as canonical text.
pub async fn read(s: &Session, r: &Resource) -> Result<Observed, ProviderError> {
    let c = read_command(&s.endpoint.user, r)?;
    let o = s.run(&c.command, c.stdin.map(str::as_bytes), READ_TIMEOUT).await?;
    read_answer(r, &o)
}

/// The state [`read_command`]'s output says `r` is in.
pub fn read_answer(r: &Resource, o: &crate::transport::ssh::Output) -> Result<Observed, ProviderError> {
    match (&r.provider, &r.desired) {
        (_, Desired::Secret(_)) => {
            Ok(if o.status == 0 { Observed::Present(SENSITIVE.into()) } else { Observed::Absent })
        }
        (ProviderKind::File | ProviderKind::Wireguard, _) => match o.status {
            0 => Ok(Observed::Present(o.stdout_str())),
            shell::ABSENT => Ok(Observed::Absent),
            _ => Err(failed(r, "read", o)),
        },
        (ProviderKind::Command, Desired::Command { .. }) => {
            Ok(if o.status == 0 { Observed::Present("ok\n".into()) } else { Observed::Absent })
        }
        (ProviderKind::Command, Desired::K3sInstall(_)) => match o.status {
            // The host's answer is input: only services and digests are taken.
            0 => Ok(Observed::Present(
                crate::desired::k3s_install::parse_read(&o.stdout_str())
                    .unwrap_or_else(|| "(an answer that is not a K3s service and digest)\n".into()),
            )),
            shell::ABSENT => Ok(Observed::Absent),
            _ => Err(failed(r, "read", o)),
        },
        (ProviderKind::Command, Desired::NodeMigration(m)) => {
            if o.status != 0 {
                return Err(failed(r, "read", o));
            }
            // The host's answer is input: only the lines the read makes are taken.
            Ok(Observed::Present(crate::desired::node_migration::parse_read_at(
                &o.stdout_str(),
                m.server_config.is_some(),
                m.stage,
            )))
        }
        (ProviderKind::Vyos, _) => {
            if o.status != 0 {
                return Err(failed(r, "show configuration commands", o));
            }
            let lines = vyos_filter(&o.stdout_str(), vyos_subtree(r));
            // The router's answer is input: a line becomes `delete …` or, on revert, `set …` in a
            // script vbash runs, so only lines of plain words and quoted values are taken.
            if let Some(bad) = lines.iter().find(|l| !vyos_line_ok(l)) {
                return Err(ProviderError::Unsupported {
                    address: r.address.clone(),
                    message: format!(
                        "the router shows a line fabric does not take: {:?}",
                        bad.chars().take(80).collect::<String>()
                    ),
                });
            }
            Ok(if lines.is_empty() { Observed::Absent } else { Observed::Present(lines.join("\n") + "\n") })
        }
        // [`read_command`] has no read for these: nothing ran.
        (ProviderKind::Kube | ProviderKind::Command, _) => {
            Err(ProviderError::Unsupported { address: r.address.clone(), message: "no read".into() })
        }
    }
}

/// The desired canonical text of a resource, with `<public-key:…>` placeholders resolved by
/// `keys` where known.
pub fn desired_text(r: &Resource, keys: &dyn Fn(&Target) -> Option<String>) -> String {
    if r.sensitive {
        return SENSITIVE.into();
    }
    let text = match &r.desired {
        Desired::File(t) | Desired::Wireguard(t) => t.clone(),
        Desired::Vyos(lines) => {
            let mut l = lines.clone();
            l.sort();
            l.join("\n") + "\n"
        }
        Desired::Command { .. } => "ok\n".into(),
        Desired::K3sInstall(k) => k.text(),
        Desired::NodeMigration(m) => m.text(),
        Desired::Secret(_) => SENSITIVE.into(),
        Desired::Kube(v) => crate::desired::yaml::to_string(v),
        // Should not exist: the desired text is empty (a deletion when it does).
        Desired::Prune(_) => String::new(),
    };
    resolve_keys(&text, keys)
}

/// Replaces `<public-key:router.X>` by the key `keys(router.X)` returns, if any.
pub fn resolve_keys(text: &str, keys: &dyn Fn(&Target) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("<public-key:") {
        out.push_str(&rest[..i]);
        let after = &rest[i + "<public-key:".len()..];
        match after.find('>') {
            Some(j) => {
                match after[..j].parse::<Target>().ok().and_then(|t| keys(&t)) {
                    Some(k) => out.push_str(&k),
                    None => out.push_str(&rest[i..i + "<public-key:".len() + j + 1]),
                }
                rest = &after[j + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Peers' public keys as a router's live configuration names them (`router.<peer>` → key): the
/// last known keys, used when a peer cannot be read (a partition must not rewrite a good peer).
/// Only what parses as a key counts.
pub fn keys_in(observed: &str) -> std::collections::BTreeMap<Target, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut peer: Option<String> = None;
    for line in observed.lines().map(str::trim) {
        // wg-quick files that fabric writes: `[Peer]`, `# <site>`, `PublicKey = <key>`.
        if line == "[Peer]" {
            peer = None;
        } else if let Some(site) = line.strip_prefix("# ").filter(|_| peer.is_none()) {
            peer = Some(site.to_string());
        } else if let (Some(k), Some(site)) = (line.strip_prefix("PublicKey = "), &peer)
            && let Ok(k) = k.parse::<WgKey>()
        {
            out.insert(Target::router(site), k.to_string());
        }
        // VyOS: `set interfaces wireguard wg0 peer <site> public-key '<key>'`.
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() == 8
            && words[0] == "set"
            && words[4] == "peer"
            && words[6] == "public-key"
            && let Ok(k) = words[7].trim_matches('\'').parse::<WgKey>()
        {
            out.insert(Target::router(words[5]), k.to_string());
        }
    }
    out
}

/// Reads a router's WireGuard public key (None when it has no key yet).
/// A router's answer is parsed as a key ([`wgkey::from_output`]): anything else is an error, never
/// text that could reach a peer's configuration.
pub async fn public_key(s: &Session, kind: ProviderKind, iface: &str) -> Result<Option<WgKey>, ProviderError> {
    let o = match kind {
        ProviderKind::Vyos => {
            let script = format!("{VYOS_TEMPLATE}{}\n", vyos_key_read(iface));
            s.run(&vbash(), Some(script.as_bytes()), READ_TIMEOUT).await?
        }
        _ => s.run(&root(s, &wg_public_key(iface)), None, READ_TIMEOUT).await?,
    };
    public_key_answer(&s.endpoint.target, &o)
}

/// A router's public key as its key read answered it (see [`public_key`]).
pub fn public_key_answer(target: &str, o: &crate::transport::ssh::Output) -> Result<Option<WgKey>, ProviderError> {
    if o.status != 0 {
        return Ok(None);
    }
    wgkey::from_output(&o.stdout_str()).map_err(|e| ProviderError::NotAKey { target: target.to_string(), source: e })
}

/// Makes sure a Linux router has its private key; returns the public key.
pub async fn ensure_key(s: &Session, router: &Target, iface: &str) -> Result<WgKey, ProviderError> {
    let o = s.run(&root(s, &wg_ensure_key(iface)), None, READ_TIMEOUT).await?;
    if o.status != 0 {
        return Err(ProviderError::Command {
            address: router.at(format!("wireguard:{iface}")),
            what: "wg genkey".into(),
            status: o.status,
            stderr: o.stderr_str(),
        });
    }
    match wgkey::from_output(&o.stdout_str()) {
        Ok(Some(k)) => Ok(k),
        Ok(None) => {
            Err(ProviderError::NotAKey { target: router.to_string(), source: wgkey::NotAKey { shown: String::new() } })
        }
        Err(source) => Err(ProviderError::NotAKey { target: router.to_string(), source }),
    }
}

/// The line [`wireguard_change`] prints once `before` (the self-revert) is armed.
pub const ARMED: &str = "fabric: armed";
/// The line [`wireguard_change`] prints once the interface's file is written.
pub const WRITTEN: &str = "fabric: written";

/// A WireGuard interface's change in one command (one round trip, not three): `before` (the
/// router's self-revert, `apply::confirm::arm_linux_revert`), then the interface's file from
/// stdin, then its restart, each only once the one before succeeded, each saying so on stdout
/// ([`ARMED`], [`WRITTEN`]) so that a failure names its stage (a failing `sudo` runs none).
pub fn wireguard_change(iface: &str, before: &Sh) -> Sh {
    sh!(
        "{ {}; } || exit 1; echo {}; {} || exit 1; echo {}; {}",
        before.clone(),
        ARMED,
        shell::write_file(&wg_conf_path(iface), 0o600),
        WRITTEN,
        wg_restart(iface)
    )
}

/// Why a [`wireguard_change`] failed: before anything changed (`before` did not run through),
/// or after (the file may be written, the interface restarted or not).
#[derive(Debug)]
pub enum WireguardChangeError {
    NotArmed(String),
    Changed(ProviderError),
}

/// Applies a WireGuard interface's `text` with [`wireguard_change`], `before` armed first.
pub async fn apply_wireguard_armed(
    s: &Session,
    r: &Resource,
    text: &str,
    before: &Sh,
) -> Result<(), WireguardChangeError> {
    let cmd = root(s, &wireguard_change(wg_interface(r), before));
    let o =
        s.run(&cmd, Some(text.as_bytes()), APPLY_TIMEOUT).await.map_err(|e| WireguardChangeError::Changed(e.into()))?;
    let out = o.stdout_str();
    let said = |marker: &str| out.lines().any(|l| l == marker);
    if o.status == 0 && said(WRITTEN) {
        return Ok(());
    }
    // Its own lines are no part of what the commands said.
    let stdout: Vec<&str> = out.lines().filter(|l| *l != ARMED && *l != WRITTEN).collect();
    let o =
        crate::transport::ssh::Output { status: o.status, stdout: stdout.join("\n").into_bytes(), stderr: o.stderr };
    Err(match (said(ARMED), said(WRITTEN)) {
        (false, _) => WireguardChangeError::NotArmed(o.stderr_str()),
        (true, false) => WireguardChangeError::Changed(failed(r, "write", &o)),
        (true, true) => WireguardChangeError::Changed(failed(r, "wg-quick up", &o)),
    })
}

/// Applies a desired text (already resolved) to a resource whose live state is `prior`.
/// `state_dir` holds the K3s bundle files fetched from URLs (`bundle`).
pub async fn apply(
    s: &Session,
    r: &Resource,
    text: &str,
    prior: &Observed,
    confirm_minutes: Option<u32>,
    state_dir: &std::path::Path,
) -> Result<(), ProviderError> {
    match (&r.provider, &r.desired) {
        // `text` is the secret itself here (read from its source by the caller); it goes over
        // stdin, never on a command line, and no error carries it.
        (_, Desired::Secret(_)) => {
            let o =
                s.run(&root(s, &shell::write_file(file_path(r), 0o600)), Some(text.as_bytes()), APPLY_TIMEOUT).await?;
            if o.status != 0 {
                return Err(ProviderError::Command {
                    address: r.address.clone(),
                    what: "write".into(),
                    status: o.status,
                    stderr: o.stderr_str(),
                });
            }
            Ok(())
        }
        (ProviderKind::File, _) => {
            let o =
                s.run(&root(s, &shell::write_file(file_path(r), 0o644)), Some(text.as_bytes()), APPLY_TIMEOUT).await?;
            if o.status != 0 {
                return Err(failed(r, "write", &o));
            }
            // A service that reads the file only at start is restarted: only here, so only when
            // the file changed (and again when a revert writes it back).
            if let Some(cmd) = restart_after(file_path(r)) {
                let o = s.run(&root(s, &cmd), None, APPLY_TIMEOUT).await?;
                if o.status != 0 {
                    return Err(failed(r, "restart", &o));
                }
            }
            Ok(())
        }
        (ProviderKind::Wireguard, _) => {
            let iface = wg_interface(r);
            let o = s
                .run(&root(s, &shell::write_file(&wg_conf_path(iface), 0o600)), Some(text.as_bytes()), APPLY_TIMEOUT)
                .await?;
            if o.status != 0 {
                return Err(failed(r, "write", &o));
            }
            let o = s.run(&root(s, &wg_restart(iface)), None, APPLY_TIMEOUT).await?;
            if o.status != 0 { Err(failed(r, "wg-quick up", &o)) } else { Ok(()) }
        }
        (ProviderKind::Command, Desired::Command { apply, .. }) => {
            let o = s.run(&root(s, apply), None, APPLY_TIMEOUT).await?;
            if o.status != 0 { Err(failed(r, "apply", &o)) } else { Ok(()) }
        }
        (ProviderKind::Command, Desired::K3sInstall(k)) => airgap::apply(s, r, k, state_dir).await,
        (ProviderKind::Vyos, _) => {
            let from: Vec<String> = match prior {
                Observed::Present(t) => t.lines().map(String::from).collect(),
                Observed::Absent => vec![],
            };
            let to: Vec<String> = text.lines().map(String::from).collect();
            let needs_key = r.is_wireguard_interface()
                && public_key(s, ProviderKind::Vyos, vyos_subtree(r).rsplit(' ').next().unwrap_or("wg0"))
                    .await?
                    .is_none();
            let iface = vyos_subtree(r).rsplit(' ').next().unwrap_or("wg0").to_string();
            let confirm = match confirm_minutes {
                Some(m) => Some((m.max(1), vyos_confirm_form(s, &r.address).await?)),
                None => None,
            };
            let script =
                vyos_script(&from, &to, &[vyos_subtree(r).to_string()], confirm, needs_key.then_some(iface.as_str()));
            let o = s.run(&vbash(), Some(script.as_bytes()), APPLY_TIMEOUT).await?;
            let what = if confirm.is_some() { "commit-confirm" } else { "commit" };
            vyos_outcome(&r.address, what, &o, confirm.is_some())
        }
        (ProviderKind::Kube, _) | (ProviderKind::Command, _) => Err(ProviderError::Unsupported {
            address: r.address.clone(),
            message: "the Kubernetes provider is not part of this build yet".into(),
        }),
    }
}

fn lines(o: &Observed) -> Vec<String> {
    match o {
        Observed::Present(t) => t.lines().map(String::from).collect(),
        Observed::Absent => vec![],
    }
}

fn vyos_iface(items: &[&Resource]) -> Option<String> {
    items.iter().find_map(|r| {
        vyos_subtree(r).strip_prefix("interfaces wireguard ").map(|i| i.split(' ').next().unwrap_or("wg0").to_string())
    })
}

/// A change apply is about to make: the resource, what was live before it (its rollback point)
/// and the text to write, with the peers' public keys resolved.
#[derive(Debug, Clone)]
pub struct PendingChange {
    pub resource: Resource,
    pub prior: Observed,
    pub text: String,
}

/// A VyOS apply that failed, and whether its commit-confirm armed the router's timer. Armed,
/// the commit ran too (VyOS commits what was valid even when a line of the script failed), so
/// the router holds part of the change: it must be put back. Not armed, nothing of this script
/// was committed, and a pending confirmation the router has is someone else's.
#[derive(Debug)]
pub struct VyosApplyFailure {
    pub error: ProviderError,
    pub armed: bool,
}

/// Applies every VyOS resource of one router in one commit-confirm: VyOS allows one pending
/// confirmation at a time, and one commit is one rollback point on the router.
pub async fn apply_vyos(s: &Session, items: &[PendingChange], confirm_minutes: u32) -> Result<(), VyosApplyFailure> {
    let not_armed = |error| VyosApplyFailure { error, armed: false };
    let mut from = Vec::new();
    let mut to = Vec::new();
    for c in items {
        from.extend(lines(&c.prior));
        to.extend(c.text.lines().map(String::from));
    }
    let rs: Vec<&Resource> = items.iter().map(|c| &c.resource).collect();
    let Some(at) = rs.first().map(|r| r.address.clone()) else { return Ok(()) };
    let needs_key = match vyos_iface(&rs) {
        Some(i) => public_key(s, ProviderKind::Vyos, &i).await.map_err(not_armed)?.is_none().then_some(i),
        None => None,
    };
    let form = vyos_confirm_form(s, &at).await.map_err(not_armed)?;
    let roots: Vec<String> = rs.iter().map(|r| vyos_subtree(r).to_string()).collect();
    let script = vyos_script(&from, &to, &roots, Some((confirm_minutes.max(1), form)), needs_key.as_deref());
    let o = s.run(&vbash(), Some(script.as_bytes()), APPLY_TIMEOUT).await.map_err(|e| not_armed(e.into()))?;
    vyos_outcome(&at, "commit-confirm", &o, true)
        .map_err(|error| VyosApplyFailure { error, armed: o.stdout_str().contains(VYOS_ARMED) })
}

/// Puts the VyOS resources of one router back to their prior lines: cancels a pending
/// commit-confirm first, then commits and saves the prior configuration.
pub async fn revert_vyos(s: &Session, items: &[(Resource, Observed)]) -> Result<(), ProviderError> {
    let Some(at) = items.first().map(|(r, _)| r.address.clone()) else { return Ok(()) };
    if let Some(bad) = items.iter().flat_map(|(_, p)| lines(p)).find(|l| !vyos_line_ok(l)) {
        return Err(ProviderError::Unsupported {
            address: at,
            message: format!(
                "the rollback point holds a line fabric does not take: {:?}",
                bad.chars().take(80).collect::<String>()
            ),
        });
    }
    // Stops the router's own timer if it is still pending (`No confirm pending`: it fired, the
    // router put itself back already; what is live is read next either way).
    let _ = s.run(&vbash(), Some(VYOS_CONFIRM.as_bytes()), APPLY_TIMEOUT).await;
    let mut now = Vec::new();
    let mut to = Vec::new();
    for (r, prior) in items {
        now.extend(lines(&read(s, r).await?));
        to.extend(lines(prior));
    }
    now.sort();
    to.sort();
    if now == to {
        return Ok(());
    }
    let roots: Vec<String> = items.iter().map(|(r, _)| vyos_subtree(r).to_string()).collect();
    let o = s.run(&vbash(), Some(vyos_script(&now, &to, &roots, None, None).as_bytes()), APPLY_TIMEOUT).await?;
    vyos_outcome(&at, "revert", &o, false)
}

/// How to undo a command fabric ran, by its name: fixed here, never read from a journal (a
/// journal names the command; the code says what undoing it means).
pub fn undo_of(address: &Address) -> Option<Sh> {
    match address.command()? {
        "ip-forward" => Some(Sh::lit("sysctl -q -w net.ipv4.ip_forward=0")),
        "nftables" => Some(nft::remove()),
        // A route B.1 added (`command:route <prefix>`); the prefix comes from a journal, so it
        // is parsed, never passed on as text. Gone already (its interface was removed first):
        // nothing to do.
        c => {
            let prefix: crate::topology::net::Cidr = c.strip_prefix("route ")?.parse().ok()?;
            let p = prefix.to_string();
            Some(sh!("if [ -n \"$(ip route show {})\" ]; then ip route del {}; fi", p.clone(), p))
        }
    }
}

/// Puts a resource back to `prior` (its state before the step).
pub async fn revert(s: &Session, r: &Resource, prior: &Observed) -> Result<(), ProviderError> {
    // A revert installs no K3s (commands are never re-applied below): no bundle cache to read.
    let no_bundles = std::path::Path::new("");
    match (&r.provider, prior) {
        (ProviderKind::File, Observed::Absent) => {
            let o = s.run(&root(s, &shell::remove_file(file_path(r))), None, APPLY_TIMEOUT).await?;
            if o.status != 0 { Err(failed(r, "remove", &o)) } else { Ok(()) }
        }
        (ProviderKind::Wireguard, Observed::Absent) => {
            let o = s.run(&root(s, &wg_remove(wg_interface(r))), None, APPLY_TIMEOUT).await?;
            if o.status != 0 { Err(failed(r, "remove", &o)) } else { Ok(()) }
        }
        (ProviderKind::Wireguard, Observed::Present(t)) => {
            // A file read while the interface was down carries a marker line; drop it.
            let t: String = t.lines().filter(|l| !l.starts_with("# (interface ")).map(|l| format!("{l}\n")).collect();
            apply(s, r, &t, prior, None, no_bundles).await
        }
        (ProviderKind::Vyos, _) => {
            // From whatever is live now back to the prior lines, committed and saved.
            let now = match read(s, r).await? {
                Observed::Present(t) => t.lines().map(String::from).collect(),
                Observed::Absent => vec![],
            };
            let to: Vec<String> = match prior {
                Observed::Present(t) => t.lines().map(String::from).collect(),
                Observed::Absent => vec![],
            };
            if now == to {
                return Ok(());
            }
            let script = vyos_script(&now, &to, &[vyos_subtree(r).to_string()], None, None);
            let o = s.run(&vbash(), Some(script.as_bytes()), APPLY_TIMEOUT).await?;
            vyos_outcome(&r.address, "revert", &o, false)
        }
        // A command whose probe failed before the step is undone when fabric knows how (see
        // `undo_of`); the others are idempotent actions with nothing to undo.
        (ProviderKind::Command, Observed::Absent) => match undo_of(&r.address) {
            Some(undo) => {
                let o = s.run(&root(s, &undo), None, APPLY_TIMEOUT).await?;
                if o.status != 0 { Err(failed(r, "undo", &o)) } else { Ok(()) }
            }
            None => Ok(()),
        },
        (ProviderKind::Command, _) => Ok(()),
        (_, Observed::Present(t)) => apply(s, r, t, prior, None, no_bundles).await,
        (_, Observed::Absent) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k3s_restarts_only_for_its_config() {
        let cmd = restart_after("/etc/rancher/k3s/config.yaml").unwrap();
        assert!(cmd.contains("systemctl restart \"$u\"") && cmd.contains("for u in k3s k3s-agent"), "{cmd}");
        // Not installed yet: nothing to restart, and that is not an error.
        let run = |systemctl: &str| {
            let script = format!("systemctl() {{ {systemctl}; }}; {cmd}");
            std::process::Command::new("sh").arg("-c").arg(script).output().unwrap()
        };
        assert!(run("return 1").status.success());
        // Installed: restarted; a restart that fails fails the apply.
        let o = run(r#"echo "$*"; return 0"#);
        assert_eq!(String::from_utf8_lossy(&o.stdout), "restart k3s\nrestart k3s-agent\n");
        let o = run(r#"[ "$1" = cat ]"#);
        assert!(!o.status.success());
        assert_eq!(restart_after("/etc/wireguard/wg0.conf"), None);
        assert_eq!(restart_after("/etc/rancher/k3s/token"), None);
    }

    /// A VyOS router's read script, run by a real `bash -s` (vbash is a bash) with a stand-in
    /// of what the script-template leaves in the shell (`_vyatta_cfg_init`'s aliases: `sh` is
    /// `show`, `exit` the template's, which returns 0; `run` an op-mode command): each read gets
    /// its own output and status back, and a plain read's `exit 3` still says 3.
    #[test]
    fn a_vyos_read_script_keeps_each_read_apart_under_the_templates_aliases() {
        let dir = std::env::temp_dir().join(format!("fabric-vyos-template-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let template = dir.join("script-template");
        std::fs::write(
            &template,
            "shopt -s expand_aliases\nalias run='echo op:'\nalias exit='eval true'\nalias sh='echo SHOW'\n",
        )
        .unwrap();
        let absent = Sh::lit("if [ -e /nonexistent/x ]; then cat /nonexistent/x; else exit 3; fi");
        let reads = [
            vyos_show_read(),
            vyos_plain_read(&absent),
            vyos_plain_read(&Sh::lit("sh -c 'echo plain'")),
            vyos_key_read("wg0"),
        ];
        let tag = crate::transport::batch::new_tag();
        let script = vyos_read_script(&reads, &tag);
        assert!(script.starts_with(VYOS_TEMPLATE) && script.matches("script-template").count() == 1, "{script}");
        let script = script.replace("/opt/vyatta/etc/functions/script-template", template.to_str().unwrap());
        let mut child = std::process::Command::new("bash")
            .arg("-s")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let o = crate::transport::ssh::Output {
            status: o.status.code().unwrap_or(255) as u32,
            stdout: o.stdout,
            stderr: o.stderr,
        };
        let parts = crate::transport::batch::split(&o, &tag, reads.len()).unwrap();
        let got: Vec<(u32, String)> = parts.iter().map(|p| (p.status, p.stdout_str())).collect();
        assert_eq!(
            got,
            [
                (0, "op: show configuration commands\n".to_string()),
                (3, String::new()),
                (0, "plain\n".to_string()),
                (0, "op: show interfaces wireguard wg0 public-key\n".to_string()),
            ]
        );
    }

    #[test]
    fn wireguard_builders() {
        assert_eq!(
            wg_ensure_key("wg0"),
            "umask 077 && mkdir -p /etc/wireguard && { [ -s /etc/wireguard/wg0.key ] || wg genkey > /etc/wireguard/wg0.key; } && wg pubkey < /etc/wireguard/wg0.key"
        );
        assert_eq!(
            wg_public_key("wg0"),
            "if [ -s /etc/wireguard/wg0.key ]; then wg pubkey < /etc/wireguard/wg0.key; else exit 3; fi"
        );
        assert!(wg_restart("wg0").contains("WG_QUICK_USERSPACE_IMPLEMENTATION=wireguard-go"));
        // wg-quick's output goes to a private directory of its own under root's /run, never to
        // a path another user could have planted a link at.
        assert!(wg_restart("wg0").contains("d=$(mktemp -d /run/fabric.XXXXXXXX) || exit 1;"));
        assert!(wg_restart("wg0").contains("wg-quick up wg0 </dev/null >\"$d/wg-quick.log\" 2>&1"));
        assert!(!wg_restart("wg0").contains("/tmp/"));
    }

    /// The change in one command: armed first, the file only once armed, the restart only once
    /// written, each stage saying so.
    #[test]
    fn a_wireguard_change_is_armed_written_and_restarted_in_order() {
        let cmd = wireguard_change("wg0", &Sh::lit("arm"));
        let (armed, written) = (format!("echo '{ARMED}'"), format!("echo '{WRITTEN}'"));
        let at = |part: &str| cmd.find(part).unwrap_or_else(|| panic!("{part} not in {cmd}"));
        assert!(cmd.starts_with("{ arm; } || exit 1; "), "{cmd}");
        assert!(at(&armed) < at("cat > /etc/wireguard/wg0.conf.fabric-tmp"), "{cmd}");
        assert!(at("mv -f -- /etc/wireguard/wg0.conf.fabric-tmp /etc/wireguard/wg0.conf || exit 1") < at(&written));
        assert!(at(&written) < at("wg-quick up wg0"), "{cmd}");
    }

    #[test]
    fn only_plain_vyos_lines_are_taken_from_a_router() {
        for ok in [
            "set interfaces wireguard wg0 address '10.0.0.1/30'",
            "set interfaces wireguard wg0 description 'fabric lab: site-to-site'",
            "set interfaces wireguard wg0 peer sp public-key '<public-key:router.sp>'",
            "set protocols static route 10.2.0.0/16 interface wg0",
        ] {
            assert!(vyos_line_ok(ok), "{ok}");
        }
        for bad in [
            "set interfaces wireguard wg0 description 'x'; touch /tmp/p; echo ''",
            "set interfaces wireguard wg0 description x$(reboot)",
            "set interfaces wireguard wg0 description 'unterminated",
            "delete interfaces wireguard wg0",
            "set interfaces wireguard wg0 description `id`",
            "set a b; reboot",
        ] {
            assert!(!vyos_line_ok(bad), "{bad}");
        }
    }

    #[test]
    fn known_keys_from_live_configs() {
        const SP: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
        const FR: &str = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";
        let wg =
            format!("[Interface]\nAddress = 10.0.0.1/30\n\n[Peer]\n# sp\nPublicKey = {SP}\nAllowedIPs = 10.0.0.2/32\n");
        assert_eq!(keys_in(&wg).get(&Target::router("sp")).map(String::as_str), Some(SP));
        let vyos = format!(
            "set interfaces wireguard wg0 peer franca allowed-ips '10.0.0.1/32'\nset interfaces wireguard wg0 peer franca public-key '{FR}'\n"
        );
        assert_eq!(keys_in(&vyos).get(&Target::router("franca")).map(String::as_str), Some(FR));
        assert!(keys_in("nothing").is_empty());
        // What is not a key is not a known key.
        assert!(keys_in("[Peer]\n# sp\nPublicKey = SPKEY=\n").is_empty());
    }

    /// Every remote command line parses in a real POSIX shell.
    #[test]
    fn builders_are_valid_shell() {
        for cmd in [wg_ensure_key("wg0"), wg_public_key("wg0"), wg_restart("wg0"), wg_remove("wg0"), wg_read("wg0")] {
            let o = std::process::Command::new("sh").arg("-n").arg("-c").arg(cmd.as_str()).output().unwrap();
            assert!(o.status.success(), "{cmd}\n{}", String::from_utf8_lossy(&o.stderr));
        }
    }

    #[test]
    fn placeholders_resolve_where_known() {
        let keys = |t: &Target| (*t == Target::router("sp")).then(|| "SPKEY=".to_string());
        assert_eq!(
            resolve_keys("a <public-key:router.sp> b <public-key:router.rio> c", &keys),
            "a SPKEY= b <public-key:router.rio> c"
        );
        assert_eq!(resolve_keys("no placeholder", &keys), "no placeholder");
        assert_eq!(resolve_keys("broken <public-key:x", &keys), "broken <public-key:x");
    }

    #[test]
    fn vyos_filter_masks_keys_and_sorts() {
        let cfg = "set interfaces ethernet eth0 address 'dhcp'\nset interfaces wireguard wg0 private-key 'SECRET'\nset interfaces wireguard wg0 port '51820'\nset interfaces wireguard wg0 address '10.0.0.1/30'\nset interfaces wireguard wg01 port '1'\n";
        let l = vyos_filter(cfg, "interfaces wireguard wg0");
        assert_eq!(
            l,
            ["set interfaces wireguard wg0 address '10.0.0.1/30'", "set interfaces wireguard wg0 port '51820'"]
        );
        assert!(!l.join("").contains("SECRET"));
    }

    #[test]
    fn vyos_deletes_whole_nodes_but_never_above_the_managed_root() {
        let l = |s: &str| s.to_string();
        let roots = [l("interfaces wireguard wg0"), l("protocols static route 192.168.2.0/23")];
        // A peer whose every line goes is deleted whole (here with every peer: none stays).
        let gone = [
            l("set interfaces wireguard wg0 peer sp allowed-ips '10.0.0.2/32'"),
            l("set interfaces wireguard wg0 peer sp public-key 'K='"),
        ];
        let keep = [l("set interfaces wireguard wg0 port '51820'")];
        assert_eq!(vyos_deletes(&gone, &keep, &roots), ["delete interfaces wireguard wg0 peer"]);
        let keep = [l("set interfaces wireguard wg0 peer rio public-key 'R='")];
        assert_eq!(vyos_deletes(&gone, &keep, &roots), ["delete interfaces wireguard wg0 peer sp"]);
        // Everything of the interface goes: the interface is deleted, not `interfaces wireguard`.
        let all =
            [l("set interfaces wireguard wg0 port '51820'"), l("set interfaces wireguard wg0 peer sp public-key 'K='")];
        assert_eq!(vyos_deletes(&all, &[], &roots), ["delete interfaces wireguard wg0"]);
        // A route is deleted as a route, never `protocols static route` as a whole.
        let gone = [l("set protocols static route 192.168.2.0/23 interface wg0")];
        assert_eq!(vyos_deletes(&gone, &[], &roots), ["delete protocols static route 192.168.2.0/23"]);
        // A quoted value with spaces stays whole.
        let gone = [l("set interfaces wireguard wg0 description 'hand edit'")];
        let keep = [l("set interfaces wireguard wg0 port '51820'")];
        assert_eq!(vyos_deletes(&gone, &keep, &roots), ["delete interfaces wireguard wg0 description"]);
        // One value of a multi-value leaf goes, the other stays.
        let gone = [l("set interfaces wireguard wg0 peer sp allowed-ips '10.0.0.9/32'")];
        let keep = [l("set interfaces wireguard wg0 peer sp allowed-ips '10.0.0.2/32'")];
        assert_eq!(
            vyos_deletes(&gone, &keep, &roots),
            ["delete interfaces wireguard wg0 peer sp allowed-ips '10.0.0.9/32'"]
        );
    }

    #[test]
    fn the_commit_confirm_form_is_read_not_assumed() {
        // What bash prints for sagitta's function (vyatta-cfg functions/interpreter/vyatta-cfg-run).
        let sagitta = "vyatta_config_commit-confirm () \n{ \n    local minutes=10;\n    cmd=\"${vyos_bin_dir}/config-mgmt commit_confirm -t=$minutes\";\n    eval \"sudo sg vyattacfg \\\"$cmd\\\" \"\n}\n";
        assert_eq!(confirm_form_of(sagitta), Some(ConfirmForm::Prompts));
        let newer = "vyatta_config_commit-confirm () \n{ \n    if [ \"$arg\" = \"no-prompt\" ] && [ \"$in_comment\" = \"0\" ]; then\n        yes_flag=\"-y\";\n    fi;\n    cmd=\"${vyos_bin_dir}/config-mgmt commit_confirm -t=$minutes $yes_flag\"\n}\n";
        assert_eq!(confirm_form_of(newer), Some(ConfirmForm::NoPrompt));
        // No such function (not VyOS, or a VyOS fabric does not know): no guess.
        assert_eq!(confirm_form_of(""), None);
        assert_eq!(confirm_form_of("bash: declare: vyatta_config_commit-confirm: not found"), None);
        // The answer reaches that one command only, in both forms.
        assert_eq!(commit_confirm_line(5, ConfirmForm::Prompts), "commit-confirm 5 <<< y");
        assert_eq!(commit_confirm_line(5, ConfirmForm::NoPrompt), "commit-confirm 5 no-prompt <<< y");
    }

    #[test]
    fn vyos_errors_are_read_from_the_output() {
        // A failing `set` in `vbash -s` (exit status 0): vyatta-cfg-run's messages.
        let set = "\n  Configuration path: [interfaces wireguard wg0 pubkey] is not valid\n  Set failed\n\n";
        assert_eq!(
            vyos_error("", set).as_deref(),
            Some("Configuration path: [interfaces wireguard wg0 pubkey] is not valid")
        );
        assert_eq!(
            vyos_error("\n  Value validation failed\n  Set failed\n", "").as_deref(),
            Some("Value validation failed")
        );
        let commit = "\n[ interfaces wireguard wg0 ]\nWireGuard peer \"sp\": missing mandatory allowed-ips!\n\n[[interfaces wireguard wg0]] failed\nCommit failed\n";
        assert_eq!(vyos_error(commit, "").as_deref(), Some("[[interfaces wireguard wg0]] failed"));
        for l in [
            "Another confirm is pending",
            "commit-confirm canceled",
            "Proceed ? [Y/n] Please respond with yes/y or no/n",
            "No configuration changes to commit",
            "vbash: line 4: sett: command not found",
            "  Invalid command: [sett]",
        ] {
            assert!(vyos_error(l, "").is_some(), "{l}");
        }
        let fine = "\ncommit-confirm will automatically reboot in 5 minutes unless changes\nare confirmed.\n\nProceed ? [Y/n] Initialized commit-confirm; 5 minutes to confirm before reboot\n";
        assert_eq!(vyos_error(fine, ""), None);
        assert_eq!(vyos_error("Saving configuration to '/config/config.boot'...\nDone\n", ""), None);
    }

    #[test]
    fn confirm_answers_are_told_apart() {
        assert_eq!(vyos_confirmed("Reboot timer stopped\n"), Some(true));
        assert_eq!(vyos_confirmed("Reload timer stopped\n"), Some(true));
        // Exit 0 too, but nothing was pending: the router had put itself back already.
        assert_eq!(vyos_confirmed("No confirm pending\n"), Some(false));
        assert_eq!(vyos_confirmed(""), None);
        assert_eq!(vyos_confirmed("something else"), None);
    }

    #[test]
    fn vyos_script_is_a_diff_with_commit_confirm() {
        let from = vec![
            "set interfaces wireguard wg0 port '51820'".to_string(),
            "set interfaces wireguard wg0 peer sp allowed-ips '10.0.0.9/32'".to_string(),
        ];
        let to = vec![
            "set interfaces wireguard wg0 port '51820'".to_string(),
            "set interfaces wireguard wg0 peer sp allowed-ips '10.0.0.2/32'".to_string(),
        ];
        assert_eq!(
            vyos_script(
                &from,
                &to,
                &["interfaces wireguard wg0".to_string()],
                Some((2, ConfirmForm::Prompts)),
                Some("wg0")
            ),
            "source /opt/vyatta/etc/functions/script-template\nconfigure\n\
             delete interfaces wireguard wg0 peer sp allowed-ips '10.0.0.9/32'\n\
             run generate pki wireguard key-pair install interface wg0 <<< n\n\
             set interfaces wireguard wg0 peer sp allowed-ips '10.0.0.2/32'\n\
             commit-confirm 2 <<< y\nexit\n"
        );
    }
}
