//! Host locks and pending self-reverts as read from a host: what `plan` shows and `fabric lock`
//! works on. The lock file is written by apply and rollback (`apply::lock_all`).

use std::time::Duration;

use crate::sh;
use crate::transport::shell::Sh;

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
    /// Self-reverts armed and not yet confirmed or fired (`/run/fabric-confirm-<if>-<run>`).
    pub pending_reverts: Vec<String>,
}

impl Hold {
    pub fn is_empty(&self) -> bool {
        self.lock.is_none() && self.pending_reverts.is_empty()
    }
}

/// Prints the lock file's line, then `revert <canary>` for each pending self-revert.
pub fn read_locks() -> Sh {
    sh!(
        "cat -- {} 2>/dev/null; for f in /run/fabric-confirm-*; do case \"$f\" in *.pid|*.log|*.confirmed|*.reverting) ;; *) [ -e \"$f\" ] && echo \"revert $f\";; esac; done; true",
        LOCK_PATH
    )
}

/// Reads [`read_locks`]'s output.
pub fn parse_hold(stdout: &str) -> Hold {
    let mut h = Hold::default();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        match line.strip_prefix("revert ") {
            Some(c) => h.pending_reverts.push(c.to_string()),
            None if h.lock.is_none() => h.lock = Some(line.trim().to_string()),
            None => {}
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
        let h = parse_hold("fabric run r by a@b (pid 1)\nrevert /run/fabric-confirm-wg0-r\n");
        assert_eq!(h.lock.as_deref(), Some("fabric run r by a@b (pid 1)"));
        assert_eq!(h.pending_reverts, ["/run/fabric-confirm-wg0-r"]);
        assert!(parse_hold("").is_empty());
    }
}
