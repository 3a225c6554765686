//! Test harness for the network-namespace lab (tests/lab/lab.sh): brings a lab up with its own
//! prefix and management range, and always tears it down (Drop). Needs root; a test that needs
//! the lab fails with a clear message when not root, it is never skipped silently.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub struct Lab {
    pub prefix: String,
    pub mgmt_net: String,
    pub dir: PathBuf,
}

/// The prefix and management range of a lab in slot `slot` (see [`Lab::up`]). A slot that is not a
/// digit 1-7 is refused: a typo must not silently share slot 0 with another run.
pub fn slotted(prefix: &str, mgmt_net: &str, slot: Option<String>) -> (String, String) {
    let Some(slot) = slot.filter(|s| !s.is_empty()) else {
        return (prefix.to_string(), mgmt_net.to_string());
    };
    let n: u32 = match slot.parse() {
        Ok(n @ 1..=7) => n,
        _ => panic!("FABRIC_LAB_SLOT must be a digit 1-7, got {slot:?}"),
    };
    let (first, second) = mgmt_net.split_once('.').expect("mgmt_net is two octets");
    let second: u32 = second.parse().expect("mgmt_net's second octet is a number");
    assert!(second >= 30 * n, "management range {mgmt_net} cannot move down by {}", 30 * n);
    (format!("{prefix}{n}"), format!("{first}.{}", second - 30 * n))
}

/// [`slotted`] with this process's `FABRIC_LAB_SLOT`.
pub fn slot_of(prefix: &str, mgmt_net: &str) -> (String, String) {
    slotted(prefix, mgmt_net, std::env::var("FABRIC_LAB_SLOT").ok())
}

fn script() -> PathBuf {
    crate::repo_root().join("tests/lab/lab.sh")
}

pub fn require_root() {
    // SAFETY-free check: `id -u` avoids a libc dependency.
    let out = Command::new("id").arg("-u").output().expect("run id");
    let uid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        uid, "0",
        "this test builds network namespaces and needs root (run the suite as root: `sudo bash scripts/test.sh`)"
    );
}

/// target/debug/examples/vyos_double, next to the running test's target/debug/deps/, (re)built
/// with cargo so a lab never runs a stale double. Built once per test binary: tests run in
/// parallel and would otherwise queue on cargo's lock, one build each.
pub fn vyos_double_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(build_vyos_double).clone()
}

fn build_vyos_double() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let debug = exe.parent().and_then(Path::parent).expect("target/debug");
    let bin = debug.join("examples/vyos_double");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--example", "vyos_double"])
        .current_dir(crate::repo_root())
        .status()
        .expect("run cargo build --example vyos_double");
    assert!(status.success(), "cargo build --example vyos_double failed");
    assert!(bin.is_file(), "{} missing after the build", bin.display());
    bin
}

impl Lab {
    /// Brings up a lab named `prefix` on management range `mgmt_net` (e.g. "10.241"), with
    /// extra `up` arguments (`--hosts N`, `--delay-ms MS`) and environment.
    ///
    /// With `FABRIC_LAB_SLOT=N` (1-7) in the environment, the prefix gets the digit N and the
    /// management range moves down by 30·N in its second octet, so N copies of the suite (one per
    /// worktree) can run their labs at once without taking down each other's.
    pub fn up(prefix: &str, mgmt_net: &str, args: &[&str], env: &[(&str, &str)]) -> Lab {
        require_root();
        let (prefix, mgmt_net) = slot_of(prefix, mgmt_net);
        let dir = PathBuf::from(format!("/tmp/fabric-lab-{prefix}"));
        let lab = Lab { prefix, mgmt_net, dir };
        // A lab left over from a crashed run is removed first.
        let _ = lab.cmd(&["down"]);
        let out = lab.cmd_env(&[&["up"], args].concat(), env);
        assert!(
            out.status.success(),
            "lab up failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        lab
    }

    /// [`Lab::up`] with VyOS routers: the VyOS test double behind the routers' sshd, where one
    /// commit-confirm "minute" lasts `minute_secs` seconds (so a test waits seconds, not minutes).
    pub fn up_vyos(prefix: &str, mgmt_net: &str, minute_secs: u32) -> Lab {
        let double = vyos_double_binary();
        let minute = minute_secs.to_string();
        Lab::up(
            prefix,
            mgmt_net,
            &["--vyos-routers"],
            &[("LAB_VYOS_DOUBLE", double.to_str().expect("a UTF-8 path")), ("LAB_VYOS_MINUTE", &minute)],
        )
    }

    fn cmd_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = Command::new("bash");
        c.arg(script())
            .args(args)
            .env("LAB_PREFIX", &self.prefix)
            .env("LAB_MGMT_NET", &self.mgmt_net)
            .env("LAB_DIR", &self.dir);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("run lab.sh")
    }

    pub fn cmd(&self, args: &[&str]) -> Output {
        self.cmd_env(args, &[])
    }

    /// Runs a command on a lab host (in its namespaces) and returns its output.
    pub fn exec(&self, host: &str, cmd: &str) -> Output {
        self.cmd(&["exec", host, "sh", "-c", cmd])
    }

    pub fn ssh_config(&self) -> PathBuf {
        self.dir.join("ssh_config")
    }
    pub fn known_hosts(&self) -> PathBuf {
        self.dir.join("known_hosts")
    }
    pub fn identity(&self) -> PathBuf {
        self.dir.join("id_ed25519")
    }
    pub fn host_key_pub(&self, host: &str) -> String {
        std::fs::read_to_string(self.dir.join("hosts").join(host).join("ssh_host_ed25519_key.pub")).expect("host key")
    }
    pub fn mgmt_ip(&self, host: &str) -> String {
        let text = std::fs::read_to_string(self.ssh_config()).unwrap();
        let mut lines = text.lines();
        while let Some(l) = lines.next() {
            if l.trim() == format!("Host {host}") {
                let h = lines.next().unwrap().trim();
                return h.trim_start_matches("HostName").trim().to_string();
            }
        }
        panic!("{host} not in the lab's ssh_config")
    }

    /// Runs `cmd` over real ssh (the lab's ssh_config), feeding `stdin`.
    pub fn ssh(&self, host: &str, cmd: &str, stdin: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new("ssh")
            .arg("-F")
            .arg(self.ssh_config())
            .arg(host)
            .arg(cmd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run ssh");
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    }

    /// Pings until a reply comes or `secs` pass (a tunnel may need a handshake first).
    pub fn ping_within(&self, from: &str, to: &str, secs: u64) -> bool {
        let t = std::time::Instant::now();
        while t.elapsed().as_secs() < secs {
            if self.exec(from, &format!("ping -c 1 -W 1 {to}")).status.success() {
                return true;
            }
        }
        false
    }

    /// Restarts `host`'s sshd as a host whose sshd dies and comes back: every sshd process of the
    /// host (the listener and each connection's) is ended, and `down_secs` later a new listener
    /// starts with the same configuration, in the same namespaces (the command runs inside them,
    /// so they live on meanwhile). Only processes in this lab host's network namespace are
    /// touched.
    pub fn restart_sshd(&self, host: &str, down_secs: u32) -> Output {
        let d = self.dir.join("hosts").join(host);
        let d = d.display();
        self.exec(
            host,
            &format!(
                "me=$(readlink /proc/self/ns/net); for p in /proc/[0-9]*; do \
                 if [ \"$(readlink $p/ns/net 2>/dev/null)\" = \"$me\" ] && [ \"$(cat $p/comm 2>/dev/null)\" = sshd ]; \
                 then kill ${{p#/proc/}}; fi; done; sleep {down_secs}; \
                 /usr/sbin/sshd -f {d}/sshd_config -E {d}/sshd.log"
            ),
        )
    }

    /// Waits (at most 20 s) until nothing accepts TCP connections on `host`'s management address,
    /// port 22: its sshd is down (see [`Lab::restart_sshd`]).
    pub fn wait_until_sshd_down(&self, host: &str) {
        let sshd: std::net::SocketAddr = format!("{}:22", self.mgmt_ip(host)).parse().expect("a management address");
        let t = std::time::Instant::now();
        while std::net::TcpStream::connect_timeout(&sshd, std::time::Duration::from_millis(300)).is_ok()
            && t.elapsed() < std::time::Duration::from_secs(20)
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Pings from one lab host; true when every packet came back.
    pub fn ping(&self, from: &str, to: &str) -> bool {
        self.exec(from, &format!("ping -c 3 -i 0.2 -W 2 {to}")).status.success()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.cmd(&["down"]);
    }
}

#[cfg(test)]
mod tests {
    use super::slotted;

    #[test]
    fn a_slot_moves_prefix_and_range() {
        assert_eq!(slotted("ap", "10.242", None), ("ap".into(), "10.242".into()));
        assert_eq!(slotted("ap", "10.242", Some(String::new())), ("ap".into(), "10.242".into()));
        assert_eq!(slotted("ap", "10.242", Some("2".into())), ("ap2".into(), "10.182".into()));
    }

    #[test]
    #[should_panic(expected = "FABRIC_LAB_SLOT must be a digit 1-7")]
    fn a_bad_slot_is_refused() {
        slotted("ap", "10.242", Some("8".into()));
    }
}
