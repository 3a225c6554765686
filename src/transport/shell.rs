//! Remote command lines, built by pure functions and tested against the exact strings.
//!
//! A command line is an [`Sh`]: it can only be made from shell text written in fabric's source
//! (a `&'static str`) and values that are quoted on the way in ([`quote`], through [`sh!`] or
//! [`Sh::fill`]). No value from a topology, a journal or a host's answer can become shell
//! syntax: the type has no constructor that takes a runtime string as code.

use std::fmt;

/// POSIX single-quoting: `it's` → `'it'\''s'`. Safe for any byte string without NUL.
pub fn quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%".contains(&b)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A command line for a remote shell (see the module's documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sh(String);

/// What may fill a `{}` of a command template: a value (quoted) or a command line (as it is).
pub trait ShArg: Sync {
    fn shell_text(&self) -> String;
}

impl ShArg for Sh {
    fn shell_text(&self) -> String {
        self.0.clone()
    }
}

impl ShArg for &str {
    fn shell_text(&self) -> String {
        quote(self)
    }
}

impl ShArg for String {
    fn shell_text(&self) -> String {
        quote(self)
    }
}

macro_rules! quoted_display {
    ($($t:ty),*) => {$(
        impl ShArg for $t {
            fn shell_text(&self) -> String {
                quote(&self.to_string())
            }
        }
    )*};
}
quoted_display!(i32, u16, u32, u64, usize, std::net::Ipv4Addr);

impl Sh {
    /// Shell text from fabric's source.
    pub fn lit(code: &'static str) -> Sh {
        Sh(code.to_string())
    }

    /// `template` (shell text from fabric's source) with each `{}` replaced by the next of
    /// `args`: values quoted, command lines kept. Nothing else in the template is special.
    pub fn fill(template: &'static str, args: &[&dyn ShArg]) -> Sh {
        let mut out = String::with_capacity(template.len() + 16 * args.len());
        let mut parts = template.split("{}");
        out.push_str(parts.next().unwrap_or_default());
        let mut used = 0;
        for part in parts {
            match args.get(used) {
                Some(a) => out.push_str(&a.shell_text()),
                None => out.push_str("{}"),
            }
            used += 1;
            out.push_str(part);
        }
        debug_assert_eq!(used, args.len(), "the template `{template}` takes {used} value(s)");
        Sh(out)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Read access to the text (for tests and logs); nothing turns text into an `Sh`.
impl std::ops::Deref for Sh {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<&str> for Sh {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Shown (never read back: a command line is only ever built by fabric).
impl serde::Serialize for Sh {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl fmt::Display for Sh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `sh!("wg-quick up {}", iface)`: a command line from a template literal and values (see
/// [`Sh::fill`]).
#[macro_export]
macro_rules! sh {
    ($template:literal $(, $arg:expr)* $(,)?) => {
        $crate::transport::shell::Sh::fill($template, &[$(&$arg as &dyn $crate::transport::shell::ShArg),*])
    };
}

/// Runs `cmd` as root: unchanged for root, through `sudo -n` (never prompting) otherwise.
pub fn as_root(user: &str, cmd: &Sh) -> Sh {
    if user == "root" { cmd.clone() } else { sh!("sudo -n sh -c {}", cmd.0.clone()) }
}

/// Exit status a read command uses for "absent".
pub const ABSENT: u32 = 3;

/// Prints a file, or exits with [`ABSENT`] when it does not exist.
pub fn read_file(path: &str) -> Sh {
    sh!("if [ -e {} ]; then cat -- {}; else exit 3; fi", path, path)
}

/// Writes stdin to `path` atomically with `mode` (octal), creating the directory.
pub fn write_file(path: &str, mode: u32) -> Sh {
    let tmp = format!("{path}.fabric-tmp");
    let mode = format!("{mode:o}");
    sh!(
        "umask 077 && mkdir -p -- {} && cat > {} && chmod {} {} && mv -f -- {} {}",
        parent(path),
        tmp,
        mode,
        tmp,
        tmp,
        path
    )
}

/// Removes a file (no error when absent).
pub fn remove_file(path: &str) -> Sh {
    sh!("rm -f -- {}", path)
}

/// The directory part of `path` (`/` for a file at the root, `.` for a bare name).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => ".",
    }
}

/// Exit status of [`cancel_revert`] when the job had already claimed the canary: the change was
/// (or is being) reverted on the host.
pub const LOST: u32 = 4;

/// Schedules `revert` to run after `seconds` unless confirmed first: the host reverts a change
/// that cut the management path by itself (deploy-rs's idea). The job is detached from the SSH
/// session (setsid, no terminal, output to a log) so a dropped connection cannot stop it.
///
/// The canary is claimed by renaming it, which is atomic: the job renames it to `.reverting`
/// before it reverts, a confirmation to `.confirmed` ([`cancel_revert`]); exactly one of them
/// wins, and the loser knows. The job's process group is in `<canary>.pid`, so the confirmation
/// that wins also ends the waiting `sleep`: no timer is left behind.
pub fn schedule_revert(canary: &str, seconds: u32, revert: &Sh) -> Sh {
    let (pid, reverting) = (format!("{canary}.pid"), format!("{canary}.reverting"));
    let job = sh!(
        "echo $$ > {}; sleep {}; if mv -- {} {} 2>/dev/null; then {}; rm -f -- {}; fi; rm -f -- {}",
        pid,
        seconds,
        canary,
        reverting,
        revert.clone(),
        reverting,
        pid
    );
    // `( … & )`: the job is started from a subshell that exits at once, so nothing waits for it
    // and the SSH channel closes (a plain `a && b &` would keep a waiting subshell on it).
    sh!("touch -- {} && ( setsid sh -c {} </dev/null >>{} 2>&1 & )", canary, job.0, format!("{canary}.log"))
}

/// Confirms a scheduled revert: claims the canary (status 0; the job is killed and nothing
/// reverts), or finds the job claimed it first (status [`LOST`]: the host reverted by itself).
/// A status, never an `exit`: what is chained after it with `&&` runs (an `exit 0` here once
/// ended the shell before `disarm_linux_revert` removed its saved file).
pub fn cancel_revert(canary: &str) -> Sh {
    let (pid, confirmed) = (format!("{canary}.pid"), format!("{canary}.confirmed"));
    sh!(
        "if mv -- {} {} 2>/dev/null; then if [ -s {} ]; then kill -- -\"$(cat -- {})\" 2>/dev/null; fi; rm -f -- {} {} {}; else (exit 4); fi",
        canary,
        confirmed,
        pid,
        pid,
        confirmed,
        pid,
        format!("{canary}.log")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Confirmed, what follows with `&&` runs; lost, it does not and the status says so.
    #[test]
    fn a_confirmation_lets_the_next_command_run() {
        let dir = std::env::temp_dir().join(format!("fabric-cancel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let canary = dir.join("canary").display().to_string();
        let after = dir.join("after");
        let cmd = sh!("{} && touch -- {}", cancel_revert(&canary), after.display().to_string());
        let run = || std::process::Command::new("sh").arg("-c").arg(cmd.as_str()).status().unwrap().code();
        std::fs::write(&canary, "").unwrap();
        assert_eq!(run(), Some(0));
        assert!(after.exists(), "the command after the confirmation ran");
        std::fs::remove_file(&after).unwrap();
        assert_eq!(run(), Some(LOST as i32), "the canary is gone: lost");
        assert!(!after.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("wg0"), "wg0");
        assert_eq!(quote("/etc/wireguard/wg0.conf"), "/etc/wireguard/wg0.conf");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("$(reboot)"), "'$(reboot)'");
        assert_eq!(quote("x;rm -rf /"), "'x;rm -rf /'");
        assert_eq!(quote("`id`"), "'`id`'");
    }

    #[test]
    fn builders_are_exact() {
        assert_eq!(
            read_file("/etc/rancher/k3s/config.yaml").as_str(),
            "if [ -e /etc/rancher/k3s/config.yaml ]; then cat -- /etc/rancher/k3s/config.yaml; else exit 3; fi"
        );
        assert_eq!(
            write_file("/etc/wireguard/wg0.conf", 0o600).as_str(),
            "umask 077 && mkdir -p -- /etc/wireguard && cat > /etc/wireguard/wg0.conf.fabric-tmp && chmod 600 /etc/wireguard/wg0.conf.fabric-tmp && mv -f -- /etc/wireguard/wg0.conf.fabric-tmp /etc/wireguard/wg0.conf"
        );
        assert_eq!(as_root("root", &Sh::lit("id")).as_str(), "id");
        assert_eq!(as_root("ops", &Sh::lit("cat /x")).as_str(), "sudo -n sh -c 'cat /x'");
        assert_eq!(remove_file("/a b").as_str(), "rm -f -- '/a b'");
        // A value is quoted, a command line is kept, nothing else in a template is special.
        assert_eq!(sh!("a {} b {} c ${x}", "it's", Sh::lit("ls -l")).as_str(), r"a 'it'\''s' b ls -l c ${x}");
    }

    #[test]
    fn hostile_paths_stay_quoted() {
        let cmd = write_file("/tmp/x'; reboot; '", 0o644).to_string();
        assert!(cmd.contains(r"'/tmp/x'\''; reboot; '\''.fabric-tmp'"), "{cmd}");
        let cmd = sh!("printf '%s\\n' {} > /run/x", "apply $(id) by x").to_string();
        assert!(cmd.contains("'apply $(id) by x'"), "{cmd}");
    }

    /// The self-revert's claim, for real in a local `sh`: a confirmation before the timer wins
    /// (exit 0, the waiting job is gone, nothing reverts); one after it loses and says so (exit
    /// LOST, the revert ran). Never both, never neither.
    #[test]
    fn a_confirmation_and_a_timer_never_both_win() {
        use std::process::Command;
        let dir = std::env::temp_dir().join(format!("fabric-canary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sh = |cmd: &Sh| Command::new("sh").arg("-c").arg(cmd.as_str()).status().unwrap().code();
        let canary = dir.join("c").to_str().unwrap().to_string();
        let marker = dir.join("reverted").to_str().unwrap().to_string();
        let revert = sh!("touch -- {}", marker.clone());
        // In time: the confirmation wins and ends the timer.
        assert_eq!(sh(&schedule_revert(&canary, 2, &revert)), Some(0));
        std::thread::sleep(std::time::Duration::from_millis(300));
        let pid = std::fs::read_to_string(format!("{canary}.pid")).unwrap();
        assert_eq!(sh(&cancel_revert(&canary)), Some(0));
        std::thread::sleep(std::time::Duration::from_millis(2500));
        assert!(!std::path::Path::new(&marker).exists(), "a confirmed change was reverted");
        let alive = Command::new("kill").args(["-0", pid.trim()]).status().unwrap().success();
        assert!(!alive, "the timer was left behind");
        assert!(!std::path::Path::new(&canary).exists());
        // Too late: the timer fired first; the confirmation loses and says so.
        assert_eq!(sh(&schedule_revert(&canary, 1, &revert)), Some(0));
        std::thread::sleep(std::time::Duration::from_millis(1800));
        assert!(std::path::Path::new(&marker).exists(), "the timer did not revert");
        assert_eq!(sh(&cancel_revert(&canary)), Some(LOST as i32));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The builders run for real in a local shell: the quoting survives a real `sh`.
    #[test]
    fn builders_run_in_sh() {
        use std::process::{Command, Stdio};
        let dir = std::env::temp_dir().join(format!("fabric-shell-{}", std::process::id()));
        let path = dir.join("sub dir/it's $(x).conf");
        let path = path.to_str().unwrap();
        let run = |cmd: &Sh, stdin: &str| {
            let mut c = Command::new("sh")
                .arg("-c")
                .arg(cmd.as_str())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
            let o = c.wait_with_output().unwrap();
            (o.status.code(), String::from_utf8(o.stdout).unwrap())
        };
        assert_eq!(run(&read_file(path), "").0, Some(ABSENT as i32));
        assert_eq!(run(&write_file(path, 0o640), "hello\n").0, Some(0));
        assert_eq!(run(&read_file(path), ""), (Some(0), "hello\n".to_string()));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(path).unwrap().permissions().mode() & 0o777, 0o640);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
