//! Remote command lines, built by pure functions and tested against the exact strings.
//!
//! Every value that reaches a remote shell goes through [`quote`], so a hostile name in the
//! topology cannot become shell syntax. Builders never interpolate unquoted input.

/// POSIX single-quoting: `it's` → `'it'\''s'`. Safe for any byte string without NUL.
pub fn quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%".contains(&b)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Runs `cmd` as root: unchanged for root, through `sudo -n` (never prompting) otherwise.
pub fn as_root(user: &str, cmd: &str) -> String {
    if user == "root" { cmd.to_string() } else { format!("sudo -n sh -c {}", quote(cmd)) }
}

/// Exit status a read command uses for "absent".
pub const ABSENT: u32 = 3;

/// Prints a file, or exits with [`ABSENT`] when it does not exist.
pub fn read_file(path: &str) -> String {
    let p = quote(path);
    format!("if [ -e {p} ]; then cat -- {p}; else exit {ABSENT}; fi")
}

/// Writes stdin to `path` atomically with `mode` (octal), creating the directory.
pub fn write_file(path: &str, mode: u32) -> String {
    let p = quote(path);
    let dir = quote(parent(path));
    let tmp = quote(&format!("{path}.fabric-tmp"));
    format!("umask 077 && mkdir -p -- {dir} && cat > {tmp} && chmod {mode:o} {tmp} && mv -f -- {tmp} {p}")
}

/// Removes a file (no error when absent).
pub fn remove_file(path: &str) -> String {
    format!("rm -f -- {}", quote(path))
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => ".",
    }
}

/// Takes the lock file `path` for `holder`, or prints the current holder and exits 75
/// (EX_TEMPFAIL). `noclobber` makes the creation atomic.
pub fn take_lock(path: &str, holder: &str) -> String {
    let p = quote(path);
    format!(
        "if ( set -o noclobber; printf '%s\\n' {} > {p} ) 2>/dev/null; then exit 0; else cat -- {p} 2>/dev/null; exit 75; fi",
        quote(holder)
    )
}

/// Releases the lock if `holder` still holds it.
pub fn release_lock(path: &str, holder: &str) -> String {
    let p = quote(path);
    format!("if [ \"$(cat -- {p} 2>/dev/null)\" = {} ]; then rm -f -- {p}; fi", quote(holder))
}

/// Schedules `revert` to run after `seconds` unless the canary file is removed first: the host
/// reverts a change that cut the management path by itself (deploy-rs's idea). The job is
/// detached from the SSH session (setsid, no terminal, output to a log) so a dropped connection
/// cannot stop it.
pub fn schedule_revert(canary: &str, seconds: u32, revert: &str) -> String {
    let c = quote(canary);
    let job = format!("sleep {seconds}; if [ -e {c} ]; then {revert}; rm -f -- {c}; fi");
    // `( … & )`: the job is started from a subshell that exits at once, so nothing waits for it
    // and the SSH channel closes (a plain `a && b &` would keep a waiting subshell on it).
    format!("touch -- {c} && ( setsid sh -c {} </dev/null >>{} 2>&1 & )", quote(&job), quote(&format!("{canary}.log")))
}

/// Cancels a scheduled revert by removing its canary (the job then does nothing).
pub fn cancel_revert(canary: &str) -> String {
    format!("rm -f -- {}", quote(canary))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            read_file("/etc/rancher/k3s/config.yaml"),
            "if [ -e /etc/rancher/k3s/config.yaml ]; then cat -- /etc/rancher/k3s/config.yaml; else exit 3; fi"
        );
        assert_eq!(
            write_file("/etc/wireguard/wg0.conf", 0o600),
            "umask 077 && mkdir -p -- /etc/wireguard && cat > /etc/wireguard/wg0.conf.fabric-tmp && chmod 600 /etc/wireguard/wg0.conf.fabric-tmp && mv -f -- /etc/wireguard/wg0.conf.fabric-tmp /etc/wireguard/wg0.conf"
        );
        assert_eq!(as_root("root", "id"), "id");
        assert_eq!(as_root("ops", "cat /x"), "sudo -n sh -c 'cat /x'");
        assert_eq!(remove_file("/a b"), "rm -f -- '/a b'");
    }

    #[test]
    fn hostile_paths_stay_quoted() {
        let cmd = write_file("/tmp/x'; reboot; '", 0o644);
        assert!(cmd.contains(r"'/tmp/x'\''; reboot; '\''.fabric-tmp'"), "{cmd}");
        let cmd = take_lock("/run/fabric.lock", "apply $(id) by x");
        assert!(cmd.contains("'apply $(id) by x'"), "{cmd}");
    }

    /// The builders run for real in a local shell: the quoting survives a real `sh`.
    #[test]
    fn builders_run_in_sh() {
        use std::process::{Command, Stdio};
        let dir = std::env::temp_dir().join(format!("fabric-shell-{}", std::process::id()));
        let path = dir.join("sub dir/it's $(x).conf");
        let path = path.to_str().unwrap();
        let run = |cmd: &str, stdin: &str| {
            let mut c =
                Command::new("sh").arg("-c").arg(cmd).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
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
        let lock = dir.join("lock");
        let lock = lock.to_str().unwrap();
        assert_eq!(run(&take_lock(lock, "run-1 by a"), "").0, Some(0));
        assert_eq!(run(&take_lock(lock, "run-2 by b"), ""), (Some(75), "run-1 by a\n".to_string()));
        assert_eq!(run(&release_lock(lock, "run-2 by b"), "").0, Some(0));
        assert!(std::path::Path::new(lock).exists(), "only the holder releases");
        assert_eq!(run(&release_lock(lock, "run-1 by a"), "").0, Some(0));
        assert!(!std::path::Path::new(lock).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
