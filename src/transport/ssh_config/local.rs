//! Who and where fabric runs, for ssh_config's tokens (`%u %i %d %L %l`), `Match localuser`,
//! `~` in paths and OpenSSH's default remote user (the local user's name: `ssh.c`, `main`,
//! `options.user = xstrdup(pw->pw_name)`).
//!
//! OpenSSH asks `getpwuid(getuid())`; fabric reads the same from `/proc/self` (its owner is the
//! real uid) and `/etc/passwd`, without a libc binding. The home directory is `$HOME` when set
//! (OpenSSH takes `pw_dir`; the two agree except under `sudo -E` or a test's own `HOME`),
//! else `pw_dir`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
pub struct Local {
    pub user: String,
    pub uid: u32,
    pub home: PathBuf,
    /// `gethostname`, whole (`%l`).
    pub hostname: String,
}

/// An `/etc/passwd` entry: name, uid, home.
fn passwd() -> Vec<(String, u32, PathBuf)> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((f.first()?.to_string(), f.get(2)?.parse().ok()?, PathBuf::from(f.get(5)?)))
        })
        .collect()
}

impl Local {
    pub fn current() -> Local {
        let uid = std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
        let entry = passwd().into_iter().find(|(_, u, _)| *u == uid);
        let user = entry
            .as_ref()
            .map(|(n, _, _)| n.clone())
            .or_else(|| std::env::var("USER").ok())
            .unwrap_or_else(|| uid.to_string());
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .or(entry.map(|(_, _, h)| h))
            .unwrap_or_else(|| PathBuf::from("/"));
        let hostname =
            std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
        Local { user, uid, home, hostname }
    }

    /// `%L`: the host name up to its first dot.
    pub fn short_hostname(&self) -> &str {
        self.hostname.split('.').next().unwrap_or_default()
    }

    /// `tilde_expand_filename`: `~/x` is under the home directory, `~name/x` under that user's;
    /// `None` for an unknown user.
    pub fn tilde(&self, path: &str) -> Option<PathBuf> {
        let Some(rest) = path.strip_prefix('~') else { return Some(PathBuf::from(path)) };
        let (name, tail) = rest.split_once('/').unwrap_or((rest, ""));
        let home = if name.is_empty() || name == self.user {
            self.home.clone()
        } else {
            passwd().into_iter().find(|(n, _, _)| n == name)?.2
        };
        Some(if tail.is_empty() { home } else { Path::new(&home).join(tail) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Local {
        Local { user: "op".into(), uid: 1000, home: "/home/op".into(), hostname: "ws.lab.example".into() }
    }

    #[test]
    fn tilde_forms() {
        assert_eq!(me().tilde("~/.ssh/id").unwrap(), PathBuf::from("/home/op/.ssh/id"));
        assert_eq!(me().tilde("~").unwrap(), PathBuf::from("/home/op"));
        assert_eq!(me().tilde("/abs").unwrap(), PathBuf::from("/abs"));
        assert_eq!(me().tilde("~root/k").unwrap(), PathBuf::from("/root/k"), "root is in every /etc/passwd");
        assert_eq!(me().tilde("~no-such-user-here/k"), None);
        assert_eq!(me().short_hostname(), "ws");
    }

    #[test]
    fn the_current_user_is_found() {
        let l = Local::current();
        assert!(!l.user.is_empty());
        assert!(l.home.is_absolute());
    }
}
