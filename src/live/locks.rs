//! Host locks and pending self-reverts as read from a host: what `plan` shows and `fabric lock`
//! works on. The lock is taken by apply and rollback (`apply::host_locks`).
//!
//! A host lock is held by the run's SSH session itself: a shell on its own channel takes
//! `flock(1)` on the lock file, writes the holder's line into it and waits on its stdin, which
//! only ends when fabric closes the channel or the connection ends (sshd then closes the pipe:
//! OpenSSH `session.c`, `session_close_by_channel`, for a session without a terminal). So the
//! lock dies with the connection: a run killed with SIGKILL leaves no lock once its TCP
//! connection closes, and a partitioned client's lock lasts until sshd's keepalive gives up on
//! it (`ClientAliveInterval` × `ClientAliveCountMax`, sshd_config(5); `docs/runbook.md` gives
//! the figure). `flock` is util-linux's (Debian's `util-linux`, an Essential package, so also
//! on VyOS, which is built on Debian); the script is POSIX sh, so it runs the same under dash,
//! bash and VyOS's vbash (a bash). The file is never removed while it may be locked (a new file
//! would be a second, separate lock): its content is emptied instead.

use std::time::Duration;

use crate::sh;
use crate::transport::shell::{Sh, parent};

/// Where the lock lives on every host fabric changes.
pub const LOCK_PATH: &str = "/run/lock/fabric.lock";

/// A lock older than this is stale whoever holds it: no apply of fabric's runs that long (its
/// waits are bounded), so its holder died without releasing it.
pub const LOCK_EXPIRY: Duration = Duration::from_secs(6 * 3600);

/// A host lock as read back: who holds it, and whether that holder is gone.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HeldLock {
    pub holder: String,
    /// Why the holder is known to be gone (its process is dead here, or the lock expired).
    pub stale: Option<String>,
}

impl HeldLock {
    /// Reads a lock file's line. `here` is this machine's host name, `now` the time in seconds.
    pub fn parse(holder: &str, here: &str, now: u64, alive: &dyn Fn(u32) -> bool) -> HeldLock {
        let holder = holder.trim().to_string();
        let host = holder
            .split(" by ")
            .nth(1)
            .and_then(|r| r.split(" (pid ").next())
            .and_then(|u| u.rsplit_once('@'))
            .map(|(_, h)| h);
        let pid = holder
            .split("(pid ")
            .nth(1)
            .and_then(|r| r.split([',', ')']).next())
            .and_then(|p| p.trim().parse::<u32>().ok());
        let since = holder.split("since ").nth(1).and_then(|r| r.trim_end_matches(')').trim().parse::<u64>().ok());
        let stale = match (host, pid, since) {
            (Some(h), Some(p), _) if h == here && !alive(p) => Some(format!("its process {p} on {h} is gone")),
            (_, _, Some(s)) if now.saturating_sub(s) > LOCK_EXPIRY.as_secs() => {
                Some(format!("taken {} h ago, longer than any run", now.saturating_sub(s) / 3600))
            }
            _ => None,
        };
        HeldLock { holder, stale }
    }
}

/// What a host holds: its lock (if any) and its pending self-reverts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hold {
    /// The lock file's line.
    pub lock: Option<String>,
    /// The pid of the session's lock holder on the host.
    pub session: Option<u32>,
    /// Self-reverts armed and not yet confirmed or fired (`/run/fabric-confirm-<if>-<run>`), and
    /// on a VyOS router its commit-confirm, whoever's it is ([`VYOS_CONFIRM_UNITS`]).
    pub pending_reverts: Vec<String>,
    /// Why it cannot be told whether a VyOS router's commit-confirm is pending (also listed in
    /// `pending_reverts`, so nothing reads it as free).
    pub unknown: Option<String>,
}

impl Hold {
    pub fn is_empty(&self) -> bool {
        self.lock.is_none() && self.pending_reverts.is_empty()
    }
}

/// The first line a lock holder prints once it holds the lock.
pub const HELD: &str = "held";

/// Exit status of [`hold_lock`] when another session holds the lock (EX_TEMPFAIL); it prints
/// that holder's line first.
pub const LOCKED: u32 = 75;

/// The lock holder: takes the lock on `path` (waiting up to 5 s, so that a `lock status` probing
/// it at that moment does not refuse a run), writes `holder` and its own pid (`session <pid>`,
/// for a break-glass release) into the file, prints [`HELD`], then holds the lock for as long as
/// its stdin is open; at the end it empties the file while it still holds the lock. Refused,
/// it prints the holder's line and exits [`LOCKED`]. The lock is on the open file (fd 9), which
/// only this shell has: `read` is a builtin, so no child keeps the lock after the shell dies.
pub fn hold_lock(path: &str, holder: &str) -> Sh {
    hold_lock_reading(path, holder, &Sh::lit(":"))
}

/// The line [`hold_lock_reading`] prints once what it reads under the lock is printed.
pub const READ_UNDER_LOCK: &str = "read under the lock";

/// [`hold_lock`] that, once it holds the lock, prints [`HELD`], then what `read` prints, then
/// [`READ_UNDER_LOCK`], and only then waits on its stdin: the lock and what must be read right
/// after taking it (the pending self-reverts, [`pending_reverts_for`]) in one round trip. `read`
/// runs with fd 9 closed and stdin from /dev/null: no child of it keeps the lock or eats the
/// holder's stdin.
pub fn hold_lock_reading(path: &str, holder: &str, read: &Sh) -> Sh {
    sh!(
        "mkdir -p -- {} && exec 9<>{} || exit 1; if ! flock -w 5 9; then sed -n 1p {}; exit 75; fi; printf '%s\\nsession %s\\n' {} \"$$\" > {}; echo held; { {}; } 9>&- </dev/null; echo {}; while read -r line; do :; done; : > {}",
        parent(path),
        path,
        path,
        holder,
        path,
        read.clone(),
        READ_UNDER_LOCK,
        path
    )
}

/// Breaks the lock `holder` holds on `path`: ends the session's holder process (its pid is in the
/// file), then empties the file under the lock if that holder's line is still there (a lock taken
/// meanwhile by a new run is left alone). For `fabric lock release`.
pub fn break_lock(path: &str, holder: &str) -> Sh {
    sh!(
        "if [ \"$(sed -n 1p {} 2>/dev/null)\" = {} ]; then pid=$(sed -n 's/^session //p' {}); if [ -n \"$pid\" ]; then kill -- \"$pid\" 2>/dev/null; fi; flock -w 10 {} sh -c '[ \"$(sed -n 1p \"$1\")\" = \"$2\" ] && : > \"$1\"; true' sh {} {}; fi",
        path,
        holder,
        path,
        path,
        path,
        holder
    )
}

/// Prints the lock file's lines while a session holds the lock (a line left by a holder that
/// was killed outright, its lock gone, is not a lock), then `revert <canary>` for each pending
/// self-revert.
pub fn read_locks() -> Sh {
    read_locks_at(LOCK_PATH)
}

fn read_locks_at(path: &str) -> Sh {
    sh!(
        "if [ -s {} ] && ! flock -n {} true 2>/dev/null; then sed -n 1,2p {}; fi; {}",
        path,
        path,
        path,
        pending_reverts()
    )
}

/// Prints `revert <canary>` for each pending self-revert of a Linux host (the part of
/// [`read_locks`] that does not look at the lock). A canary its job has claimed
/// (`<canary>.reverting`, `transport::shell::schedule_revert`) is still pending: the job is
/// putting the old state back, and a run that changed the host meanwhile would race it (seen
/// in CI: a new apply went ahead on the rename, the revert's restart finished after it).
fn pending_reverts() -> Sh {
    pending_reverts_in("/run")
}

fn pending_reverts_in(dir: &str) -> Sh {
    sh!(
        "for f in {}/fabric-confirm-*; do case \"$f\" in *.pid|*.log|*.confirmed) ;; *.reverting) echo \"revert ${f%.reverting}\";; *) [ -e \"$f\" ] && echo \"revert $f\";; esac; done; true",
        dir
    )
}

/// The pending self-reverts of a host, as [`read_locks_for`] prints them without the lock (the
/// lock holder reads them once it holds the lock: [`hold_lock_reading`]).
pub fn pending_reverts_for(vyos: bool) -> Sh {
    if vyos { sh!("{}; {}", pending_reverts(), vyos_units()) } else { pending_reverts() }
}

/// `unit <name> <ActiveState>` for each of [`VYOS_CONFIRM_UNITS`], asked as VyOS asks it.
fn vyos_units() -> Sh {
    sh!(
        "for u in {} {}; do printf 'unit %s %s\\n' \"$u\" \"$(systemctl show --value -p ActiveState \"$u\" 2>/dev/null)\"; done",
        VYOS_CONFIRM_UNITS[0],
        VYOS_CONFIRM_UNITS[1]
    )
}

/// The systemd units of a VyOS router's commit-confirm. VyOS 1.4 keeps no file of its own for a
/// pending commit-confirm: vyos-1x `python/vyos/config_mgmt.py` `commit_confirm` arms it with
/// `systemd-run --on-active={minutes}m --unit=commit-confirm` (`timer_name`), a transient timer
/// that starts `commit-confirm.service`, the revert, when it elapses; systemd-run's timers do not
/// remain after that (`RemainAfterElapse=no`, systemd `src/run/run.c`
/// `transient_timer_set_properties`). So the confirm is pending while the timer is active
/// (VyOS's own test, `python/vyos/utils/process.py` `is_systemd_service_active`: `systemctl show
/// --value -p ActiveState`, behind `Another confirm is pending`), and the router is putting
/// itself back while the service is active.
pub const VYOS_CONFIRM_UNITS: [&str; 2] = ["commit-confirm.timer", "commit-confirm.service"];

/// [`read_locks`] on a VyOS router: also `unit <name> <ActiveState>` for each of
/// [`VYOS_CONFIRM_UNITS`], asked as VyOS asks it. A plain command, which VyOS's login shell
/// (vbash) runs; reading a unit's state needs no root.
pub fn read_locks_vyos() -> Sh {
    sh!("{}; {}", read_locks(), vyos_units())
}

/// The lock read for a host: [`read_locks_vyos`] on a VyOS router, else [`read_locks`].
pub fn read_locks_for(vyos: bool) -> Sh {
    if vyos { read_locks_vyos() } else { read_locks() }
}

/// What a VyOS router's commit-confirm unit in `state` means for a run that would change the
/// router. A unit whose state is not one systemd reports
/// (nothing: no `systemctl`) cannot be told apart from a pending revert: it says so.
/// A commit-confirm unit's state, for a run that would change the router.
#[derive(Debug, PartialEq, Eq)]
enum UnitState {
    /// Holds nothing back.
    Free,
    /// A revert pending or running (the line `lock status` and the wait show).
    Pending(String),
    /// Not a state systemd reports: why it cannot be told.
    Unknown(String),
}

fn vyos_unit_pending(unit: &str, state: &str) -> UnitState {
    match (unit, state) {
        (_, "inactive" | "failed") => UnitState::Free,
        ("commit-confirm.timer", "active" | "activating" | "deactivating" | "reloading" | "refreshing") => {
            UnitState::Pending(format!("VyOS commit-confirm ({unit} {state})"))
        }
        ("commit-confirm.service", "active" | "activating" | "deactivating" | "reloading" | "refreshing") => {
            UnitState::Pending(format!("VyOS commit-confirm reverting ({unit} {state})"))
        }
        _ => UnitState::Unknown(format!(
            "cannot tell whether a commit-confirm is pending: `systemctl show --value -p ActiveState {unit}` answered {state:?}"
        )),
    }
}

/// Reads [`read_locks`]'s (or [`read_locks_vyos`]'s) output.
pub fn parse_hold(stdout: &str) -> Hold {
    let mut h = Hold::default();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(c) = line.strip_prefix("revert ") {
            h.pending_reverts.push(c.to_string());
        } else if let Some(u) =
            line.strip_prefix("unit ").filter(|u| VYOS_CONFIRM_UNITS.iter().any(|n| u.starts_with(n)))
        {
            let (unit, state) = u.split_once(' ').unwrap_or((u, ""));
            match vyos_unit_pending(unit, state.trim()) {
                UnitState::Free => {}
                UnitState::Pending(p) => h.pending_reverts.push(p),
                UnitState::Unknown(why) => {
                    h.pending_reverts.push(format!("{unit}: state unknown"));
                    h.unknown.get_or_insert(why);
                }
            }
        } else if let Some(pid) = line.strip_prefix("session ").filter(|_| h.lock.is_some()) {
            h.session = pid.trim().parse().ok();
        } else if h.lock.is_none() {
            h.lock = Some(line.trim().to_string());
        }
    }
    h
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// This machine's host name.
pub fn here() -> String {
    std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

/// Whether process `pid` runs on this machine.
pub fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_stale_when_its_holder_is_gone() {
        let alive = |pid: u32| pid == 42;
        let here = "vm";
        let now = 100_000;
        let l = HeldLock::parse("fabric run r by ops@vm (pid 42, since 99000)\n", here, now, &alive);
        assert_eq!(l.stale, None, "a live holder on this machine");
        let l = HeldLock::parse("fabric run r by ops@vm (pid 7, since 99000)", here, now, &alive);
        assert!(l.stale.unwrap().contains("process 7 on vm is gone"));
        let l = HeldLock::parse("fabric run r by ops@laptop (pid 7, since 99000)", here, now, &alive);
        assert_eq!(l.stale, None, "another machine's process cannot be seen from here");
        let l = HeldLock::parse("fabric run r by ops@laptop (pid 7, since 1000)", here, now, &alive);
        assert!(l.stale.unwrap().contains("27 h ago"));
        let l = HeldLock::parse("fabric run other by ops@laptop (pid 1)", here, now, &alive);
        assert_eq!(l.stale, None, "an old holder without a time is never guessed stale");
    }

    #[test]
    fn a_hold_reads_back() {
        let h = parse_hold("fabric run r by a@b (pid 1)\nsession 4242\nrevert /run/fabric-confirm-wg0-r\n");
        assert_eq!(h.lock.as_deref(), Some("fabric run r by a@b (pid 1)"));
        assert_eq!(h.session, Some(4242));
        assert_eq!(h.pending_reverts, ["/run/fabric-confirm-wg0-r"]);
        assert!(parse_hold("").is_empty());
    }

    /// A VyOS router's commit-confirm as `systemctl show --value -p ActiveState` answers for its
    /// two units: pending while the timer runs, reverting while the service does, free when
    /// both are inactive (or failed); an answer that is no unit state is never taken as free.
    #[test]
    fn a_vyos_commit_confirm_reads_back_from_its_units() {
        let read = |timer: &str, service: &str| {
            parse_hold(&format!("unit commit-confirm.timer {timer}\nunit commit-confirm.service {service}\n"))
        };
        assert_eq!(read("active", "inactive").pending_reverts, ["VyOS commit-confirm (commit-confirm.timer active)"]);
        assert_eq!(
            read("inactive", "active").pending_reverts,
            ["VyOS commit-confirm reverting (commit-confirm.service active)"]
        );
        assert!(read("inactive", "inactive").is_empty());
        assert!(read("inactive", "failed").is_empty());
        let h = read("", "inactive");
        assert_eq!(h.pending_reverts, ["commit-confirm.timer: state unknown"]);
        assert!(h.unknown.unwrap().contains("answered \"\""));
        // The script asks exactly VyOS's question, after the lock read.
        let s = read_locks_vyos();
        assert!(s.starts_with(read_locks().as_str()), "{s}");
        assert!(
            s.ends_with("for u in commit-confirm.timer commit-confirm.service; do printf 'unit %s %s\\n' \"$u\" \"$(systemctl show --value -p ActiveState \"$u\" 2>/dev/null)\"; done"),
            "{s}"
        );
        assert_eq!(read_locks_for(false), read_locks());
    }

    /// The holder for real, in a local `sh` with util-linux's `flock`: held while its stdin is
    /// open, refused to a second holder (naming the first), gone when the first is killed with
    /// SIGKILL (nothing of it runs afterwards) or its stdin closes (as when sshd ends the
    /// session); `read_locks` shows only a held lock; `break_lock` ends a live holder.
    #[test]
    fn a_lock_lives_as_long_as_its_holders_stdin() {
        use std::io::{BufRead, BufReader};
        use std::process::{Child, Command, Stdio};
        let dir = std::env::temp_dir().join(format!("fabric-hold-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("lock dir/fabric.lock");
        let path = path.to_str().unwrap();
        let start = |holder: &str| -> (Child, String) {
            let mut c = Command::new("sh")
                .arg("-c")
                .arg(hold_lock(path, holder).as_str())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            BufReader::new(c.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
            (c, line.trim().to_string())
        };
        let read = || {
            let o = Command::new("sh").arg("-c").arg(read_locks_at(path).as_str()).output().unwrap();
            parse_hold(&String::from_utf8_lossy(&o.stdout))
        };
        let (mut a, said) = start("run a by x@y (pid 1, since 2)");
        assert_eq!(said, HELD);
        let h = read();
        assert_eq!(h.lock.as_deref(), Some("run a by x@y (pid 1, since 2)"));
        assert_eq!(h.session, Some(a.id()), "the holder's pid, for a break-glass release");
        let (mut b, said) = start("run b");
        assert_eq!(said, "run a by x@y (pid 1, since 2)", "refused, naming the holder");
        assert_eq!(b.wait().unwrap().code(), Some(LOCKED as i32));
        // SIGKILL: the holder cannot clean up, yet its lock is gone with it.
        a.kill().unwrap();
        a.wait().unwrap();
        assert_eq!(read().lock, None, "a line without a holder is not a lock");
        let (mut c, said) = start("run c");
        assert_eq!(said, HELD, "taken right after the kill");
        // Its stdin closes (fabric ends the channel, or sshd the session): the lock ends, the
        // file is emptied.
        drop(c.stdin.take());
        assert!(c.wait().unwrap().success());
        assert_eq!(std::fs::read_to_string(path).unwrap(), "");
        // Break-glass: a live holder is ended, and only its own line is cleared.
        let (mut d, _) = start("run d");
        let o = Command::new("sh").arg("-c").arg(break_lock(path, "run other").as_str()).status().unwrap();
        assert!(o.success());
        assert_eq!(read().lock.as_deref(), Some("run d"), "another holder's lock is left alone");
        let o = Command::new("sh").arg("-c").arg(break_lock(path, "run d").as_str()).status().unwrap();
        assert!(o.success());
        assert!(!d.wait().unwrap().success(), "the holder was ended");
        assert_eq!(read().lock, None);
        assert_eq!(std::fs::read_to_string(path).unwrap(), "");
        let (mut e, said) = start("run e");
        assert_eq!(said, HELD);
        drop(e.stdin.take());
        e.wait().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The holder that reads under its lock, for real in a local `sh`: `held`, what it read,
    /// then [`READ_UNDER_LOCK`], and the lock still held; a child the read leaves behind does
    /// not keep the lock once the holder is killed (the read runs with fd 9 closed).
    #[test]
    fn a_holder_reads_under_its_lock_and_no_child_keeps_it() {
        use std::io::{BufRead, BufReader};
        use std::process::{Command, Stdio};
        let dir = std::env::temp_dir().join(format!("fabric-hold-read-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("fabric.lock");
        let path = path.to_str().unwrap();
        let read = sh!("echo {}; ( sleep 30 & )", "revert /run/fabric-confirm-wg0-r1");
        let mut a = Command::new("sh")
            .arg("-c")
            .arg(hold_lock_reading(path, "run a", &read).as_str())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(a.stdout.take().unwrap()).lines();
        let said: Vec<String> = (0..3).map(|_| lines.next().unwrap().unwrap()).collect();
        assert_eq!(said, [HELD, "revert /run/fabric-confirm-wg0-r1", READ_UNDER_LOCK]);
        assert_eq!(parse_hold(&said[1]).pending_reverts, ["/run/fabric-confirm-wg0-r1"]);
        let o = Command::new("sh").arg("-c").arg(read_locks_at(path).as_str()).output().unwrap();
        assert_eq!(parse_hold(&String::from_utf8_lossy(&o.stdout)).lock.as_deref(), Some("run a"), "still held");
        a.kill().unwrap();
        a.wait().unwrap();
        let started = std::time::Instant::now();
        let o =
            Command::new("sh").arg("-c").arg(hold_lock(path, "run b").as_str()).stdin(Stdio::null()).output().unwrap();
        assert!(o.status.success(), "{o:?}");
        assert_eq!(String::from_utf8_lossy(&o.stdout).lines().next(), Some(HELD));
        assert!(started.elapsed() < std::time::Duration::from_secs(3), "the read's child kept the lock");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Armed and claimed-but-reverting canaries are pending; confirmed ones and the job's
    /// files are not (run by a real `sh` on a directory standing for `/run`).
    #[test]
    fn a_revert_in_progress_is_still_pending() {
        let dir = std::env::temp_dir().join(format!("fabric-pending-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["wg0-a", "wg0-b.reverting", "wg0-b.pid", "wg0-c.confirmed", "wg0-a.log"] {
            std::fs::write(dir.join(format!("fabric-confirm-{f}")), "").unwrap();
        }
        let d = dir.display().to_string();
        let o = std::process::Command::new("sh").arg("-c").arg(pending_reverts_in(&d).as_str()).output().unwrap();
        let mut h = parse_hold(&String::from_utf8_lossy(&o.stdout)).pending_reverts;
        h.sort();
        assert_eq!(h, [format!("{d}/fabric-confirm-wg0-a"), format!("{d}/fabric-confirm-wg0-b")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
