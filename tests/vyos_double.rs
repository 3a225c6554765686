//! The VyOS test double (`examples/vyos_double.rs`) behind real sshds in the lab
//! (`tests/lab/lab.sh up --vyos-routers`), driven only through `ssh ... 'vbash -s'`.
//!
//! Needs root (network namespaces); fails, never skips, without it. Uses its own lab
//! (`LAB_PREFIX=vd`, `LAB_MGMT_NET=10.249`) so it can run next to the other lab tests.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const PREFIX: &str = "vd";
const MGMT_NET: &str = "10.249";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn lab_dir() -> PathBuf {
    PathBuf::from(format!("/tmp/fabric-lab-{PREFIX}"))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        == Some(true)
}

/// target/debug/examples/vyos_double, next to this test's target/debug/deps/; (re)built with
/// cargo so the lab never runs a stale double.
fn double_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let debug = exe.parent().and_then(Path::parent).expect("target/debug");
    let bin = debug.join("examples/vyos_double");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--example", "vyos_double"])
        .current_dir(repo())
        .status()
        .expect("run cargo build --example vyos_double");
    assert!(status.success(), "cargo build --example vyos_double failed");
    assert!(bin.is_file(), "{} missing after the build", bin.display());
    bin
}

fn lab(args: &[&str], double: Option<&Path>) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("tests/lab/lab.sh"))
        .args(args)
        .env("LAB_PREFIX", PREFIX)
        .env("LAB_MGMT_NET", MGMT_NET)
        .env_remove("LAB_DIR");
    if let Some(d) = double {
        cmd.env("LAB_VYOS_DOUBLE", d);
    }
    cmd.output().expect("run lab.sh")
}

/// The lab, torn down when dropped (also when a step panics).
struct Lab;

impl Lab {
    fn up(double: &Path) -> Lab {
        lab(&["down"], None);
        let out = lab(&["up", "--vyos-routers"], Some(double));
        let lab_guard = Lab;
        assert!(out.status.success(), "lab.sh up failed: {}", String::from_utf8_lossy(&out.stderr));
        lab_guard
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let out = lab(&["down"], None);
        if !out.status.success() {
            eprintln!("lab.sh down failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// `ssh -F LAB_DIR/ssh_config HOST COMMAND` with `stdin`.
fn ssh(host: &str, command: &str, stdin: &str) -> Run {
    let cfg = lab_dir().join("ssh_config");
    let mut child = Command::new("ssh")
        .arg("-F")
        .arg(&cfg)
        .arg(host)
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ssh");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write script");
    let out = child.wait_with_output().expect("ssh");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn vbash(router: &str, script: &str) -> Run {
    ssh(router, "vbash -s", script)
}

fn ok(router: &str, script: &str) -> String {
    let r = vbash(router, script);
    assert_eq!(r.code, 0, "script on {router} failed:\n{script}\n--- output:\n{}", r.all());
    r.stdout
}

fn show_config(router: &str) -> String {
    let r = ssh(router, "show configuration commands", "");
    assert_eq!(r.code, 0, "show configuration commands on {router}: {}", r.all());
    r.stdout
}

fn ping_lan(from: &str, to: &str, attempts: u32) -> bool {
    (0..attempts).any(|_| ssh(from, &format!("ping -c 3 -W 2 {to}"), "").code == 0)
}

fn wg_pubkey(private: &str) -> String {
    let mut child =
        Command::new("wg").arg("pubkey").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("wg pubkey");
    child.stdin.take().expect("stdin").write_all(format!("{private}\n").as_bytes()).expect("write");
    String::from_utf8_lossy(&child.wait_with_output().expect("wg").stdout).trim().to_string()
}

/// The private key in a `show configuration commands` output.
fn private_key(config: &str) -> String {
    let line = config
        .lines()
        .find(|l| l.starts_with("set interfaces wireguard wg0 private-key '"))
        .unwrap_or_else(|| panic!("no private-key line in:\n{config}"));
    line.trim_end_matches('\'').rsplit('\'').next().expect("key").to_string()
}

struct Site {
    router: &'static str,
    lan_host: &'static str,
    index: u8,
}

const FRANCA: Site = Site { router: "franca-router", lan_host: "franca-lan", index: 1 };
const SP: Site = Site { router: "sp-router", lan_host: "sp-lan", index: 2 };

fn wg_script(me: &Site, peer: &Site, peer_name: &str, peer_key: &str) -> String {
    let (i, p) = (me.index, peer.index);
    format!(
        "source /opt/vyatta/etc/functions/script-template\n\
         configure\n\
         set interfaces wireguard wg0 address '10.0.0.{i}/30'\n\
         set interfaces wireguard wg0 description 'fabric: site-to-site'\n\
         set interfaces wireguard wg0 port '51820'\n\
         set interfaces wireguard wg0 peer {peer_name} allowed-ips '10.0.0.{p}/32'\n\
         set interfaces wireguard wg0 peer {peer_name} allowed-ips '172.30.{p}.0/24'\n\
         set interfaces wireguard wg0 peer {peer_name} address '198.18.{p}.2'\n\
         set interfaces wireguard wg0 peer {peer_name} port '51820'\n\
         set interfaces wireguard wg0 peer {peer_name} public-key '{peer_key}'\n\
         set protocols static route 172.30.{p}.0/24 interface wg0\n\
         set system config-management commit-confirm action 'reload'\n\
         commit\n\
         save\n\
         exit\n"
    )
}

fn step(name: &str, started: Instant) {
    eprintln!("[{:>6.1}s] {name}", started.elapsed().as_secs_f64());
}

#[test]
fn vyos_double_in_the_lab() {
    assert!(
        is_root(),
        "vyos_double lab test needs root (network namespaces, sshd); run it as root, e.g. in CI or with sudo"
    );
    let started = Instant::now();
    let double = double_binary();
    step("double built", started);
    let _lab = Lab::up(&double);
    step("lab up", started);

    // a. keys generated on the routers, tunnel configured, committed, saved, LANs reach each other.
    let mut public = vec![];
    for site in [&FRANCA, &SP] {
        let out = ok(
            site.router,
            "source /opt/vyatta/etc/functions/script-template\nconfigure\n\
             generate pki wireguard key-pair install interface wg0\ncommit\nexit\n",
        );
        let key = out
            .lines()
            .find_map(|l| l.strip_prefix("Corresponding public-key to use on peer system is: '"))
            .and_then(|l| l.strip_suffix('\''))
            .unwrap_or_else(|| panic!("no public key in the generate output:\n{out}"))
            .to_string();
        assert!(out.contains("1 value(s) installed."), "{out}");
        let shown = ssh(site.router, "show interfaces wireguard wg0 public-key", "");
        assert_eq!(shown.code, 0, "{}", shown.all());
        assert_eq!(shown.stdout.trim(), key, "op-mode public-key differs from the generated one");
        let private = private_key(&show_config(site.router));
        assert_eq!(wg_pubkey(&private), key, "the stored private key does not match the public key");
        assert_eq!(out.matches(&private).count(), 0, "generate printed the private key:\n{out}");
        assert_eq!(out.lines().count(), 2, "generate printed more than the two VyOS lines:\n{out}");
        public.push(key);
    }
    ok(FRANCA.router, &wg_script(&FRANCA, &SP, "sp", &public[1]));
    ok(SP.router, &wg_script(&SP, &FRANCA, "franca", &public[0]));
    assert!(ping_lan(FRANCA.lan_host, "172.30.2.10", 3), "franca-lan cannot ping sp-lan through the tunnel");
    assert!(ping_lan(SP.lan_host, "172.30.1.10", 3), "sp-lan cannot ping franca-lan through the tunnel");
    let franca_config = show_config(FRANCA.router);
    let franca_private = private_key(&franca_config);
    let expected = format!(
        "set interfaces loopback lo\n\
         set interfaces wireguard wg0 address '10.0.0.1/30'\n\
         set interfaces wireguard wg0 description 'fabric: site-to-site'\n\
         set interfaces wireguard wg0 peer sp address '198.18.2.2'\n\
         set interfaces wireguard wg0 peer sp allowed-ips '10.0.0.2/32'\n\
         set interfaces wireguard wg0 peer sp allowed-ips '172.30.2.0/24'\n\
         set interfaces wireguard wg0 peer sp port '51820'\n\
         set interfaces wireguard wg0 peer sp public-key '{}'\n\
         set interfaces wireguard wg0 port '51820'\n\
         set interfaces wireguard wg0 private-key '{franca_private}'\n\
         set protocols static route 172.30.2.0/24 interface wg0\n\
         set system config-management commit-confirm action 'reload'\n\
         set system config-management commit-revisions '100'\n\
         set system host-name 'vyos'\n",
        public[1]
    );
    assert_eq!(franca_config, expected, "show configuration commands is not the canonical form");
    let again = vbash(FRANCA.router, "configure\ncommit\nexit\n");
    assert!(again.stdout.contains("No configuration changes to commit"), "{}", again.all());
    step("a: tunnel up, ping ok, canonical config", started);

    // d. an invalid command: non-zero exit, error names the path, nothing committed (set -e).
    let bad = vbash(
        FRANCA.router,
        &format!(
            "configure\nset interfaces wireguard wg0 description 'never committed'\n\
             set interfaces wireguard wg0 peer sp pubkey '{}'\ncommit\nexit\n",
            public[1]
        ),
    );
    assert_ne!(bad.code, 0, "an invalid set succeeded:\n{}", bad.all());
    assert!(
        bad.all().contains(&format!(
            "Configuration path: [interfaces wireguard wg0 peer sp pubkey {}] is not valid",
            public[1]
        )),
        "error does not name the path:\n{}",
        bad.all()
    );
    assert!(bad.all().contains("Set failed"), "{}", bad.all());
    assert_eq!(show_config(FRANCA.router), franca_config, "an aborted script changed the running config");
    let bad_value = vbash(FRANCA.router, "configure\nset interfaces wireguard wg0 port 'seventy'\ncommit\n");
    assert_ne!(bad_value.code, 0, "{}", bad_value.all());
    assert!(bad_value.all().contains("Value validation failed"), "{}", bad_value.all());
    // The firewall and nat trees are checked like the interfaces: a 1.3-style base chain, a port
    // out of range and a misspelled `exclude` are refused; B.1's rules are committed and shown.
    for (line, says) in [
        ("set firewall name WAN_LOCAL rule 50 action 'accept'", "is not valid"),
        ("set firewall ipv4 input filter rule 51 destination port '70000'", "Value validation failed"),
        ("set nat source rule 50 exlude", "is not valid"),
    ] {
        let r = vbash(FRANCA.router, &format!("configure\n{line}\ncommit\nexit\n"));
        assert_ne!(r.code, 0, "`{line}` was accepted:\n{}", r.all());
        assert!(r.all().contains(says), "`{line}`:\n{}", r.all());
    }
    assert_eq!(show_config(FRANCA.router), franca_config);
    let rules = "set firewall ipv4 forward filter rule 51 action 'accept'\n\
                 set firewall ipv4 forward filter rule 51 outbound-interface name 'wg0'\n\
                 set firewall ipv4 input filter rule 51 destination port '51820'\n\
                 set firewall ipv4 input filter rule 51 protocol 'udp'\n\
                 set nat source rule 50 exclude\n\
                 set nat source rule 50 outbound-interface name 'wg0'\n";
    ok(FRANCA.router, &format!("configure\n{rules}commit\nexit\n"));
    let shown = show_config(FRANCA.router);
    for line in rules.lines() {
        assert!(shown.contains(&format!("{line}\n")), "`{line}` not shown:\n{shown}");
    }
    ok(FRANCA.router, "configure\ndelete firewall\ndelete nat\ncommit\nexit\n");
    assert_eq!(show_config(FRANCA.router), franca_config);
    let op_set = vbash(FRANCA.router, "set interfaces wireguard wg0 port '1'\n");
    assert_ne!(op_set.code, 0, "set outside configure succeeded: {}", op_set.all());
    let unknown = ssh(FRANCA.router, "ls /", "");
    assert_ne!(unknown.code, 0, "an arbitrary shell command was accepted: {}", unknown.all());
    assert_eq!(show_config(FRANCA.router), franca_config);
    step("d: invalid commands rejected, running config unchanged", started);

    // b. commit-confirm that breaks the tunnel, never confirmed: reverted (reload) and realized.
    let before = show_config(FRANCA.router);
    let cc = ok(FRANCA.router, "configure\ndelete interfaces wireguard wg0 peer sp\ncommit-confirm 5\nexit\n");
    assert!(cc.contains("Initialized commit-confirm; 5 minutes to confirm before reload"), "{cc}");
    let t0 = Instant::now();
    assert!(!show_config(FRANCA.router).contains("peer sp"), "the change was not committed");
    assert!(
        ssh(FRANCA.lan_host, "ping -c 2 -W 1 172.30.2.10", "").code != 0,
        "ping still works without the peer: the change was not realized"
    );
    while show_config(FRANCA.router) != before {
        assert!(t0.elapsed() < Duration::from_secs(15), "not reverted 15 s after commit-confirm 5 (seconds)");
        std::thread::sleep(Duration::from_millis(250));
    }
    let reverted_after = t0.elapsed();
    assert!(reverted_after >= Duration::from_secs(4), "reverted too early ({reverted_after:?})");
    assert!(ping_lan(FRANCA.lan_host, "172.30.2.10", 3), "ping does not work after the revert");
    step(&format!("b: unconfirmed commit-confirm reverted after {reverted_after:.1?}, ping ok"), started);

    // c. commit-confirm, then confirm from a second session: the change stays.
    let cc = ok(
        FRANCA.router,
        "configure\nset interfaces wireguard wg0 description 'confirmed change'\ncommit-confirm 5\nexit\n",
    );
    assert!(cc.contains("Initialized commit-confirm"), "{cc}");
    let second = vbash(FRANCA.router, "configure\nset interfaces wireguard wg0 mtu '1400'\ncommit-confirm 5\n");
    assert_ne!(second.code, 0, "a second commit-confirm while one is pending succeeded");
    assert!(second.all().contains("Another confirm is pending"), "{}", second.all());
    let confirmed = ok(FRANCA.router, "configure\nconfirm\nexit\n");
    assert!(confirmed.contains("Reload timer stopped"), "{confirmed}");
    std::thread::sleep(Duration::from_secs(7));
    let after = show_config(FRANCA.router);
    assert!(after.contains("set interfaces wireguard wg0 description 'confirmed change'"), "{after}");
    assert!(!after.contains("mtu"), "{after}");
    let none = ok(FRANCA.router, "configure\nconfirm\nexit\n");
    assert!(none.contains("No confirm pending"), "{none}");
    assert!(ping_lan(FRANCA.lan_host, "172.30.2.10", 3), "ping broken after the confirmed change");
    step("c: confirmed commit-confirm kept after the deadline", started);

    // Concurrency: two sessions committing at once both land, state intact.
    let threads: Vec<_> =
        ["system host-name 'franca-gw'", "interfaces wireguard wg0 peer sp persistent-keepalive '25'"]
            .into_iter()
            .map(|set| {
                std::thread::spawn(move || vbash(FRANCA.router, &format!("configure\nset {set}\ncommit\nexit\n")))
            })
            .collect();
    for t in threads {
        let r = t.join().expect("session thread");
        assert_eq!(r.code, 0, "concurrent session failed: {}", r.all());
    }
    let both = show_config(FRANCA.router);
    assert!(both.contains("set system host-name 'franca-gw'"), "{both}");
    assert!(both.contains("set interfaces wireguard wg0 peer sp persistent-keepalive '25'"), "{both}");
    assert!(ping_lan(FRANCA.lan_host, "172.30.2.10", 3), "ping broken after the concurrent commits");
    let after = both;
    step("concurrent sessions both committed", started);

    // e. state persists across sessions; a "boot" (no running state, interface gone) loads the
    // saved config (without the unsaved change of c) and realizes it.
    assert_eq!(show_config(FRANCA.router), after, "state differs between sessions");
    let wiped = lab(&["exec", FRANCA.router, "ip", "link", "del", "wg0"], None);
    assert!(wiped.status.success(), "{}", String::from_utf8_lossy(&wiped.stderr));
    std::fs::remove_file(lab_dir().join("hosts/franca-router/vyos/running")).expect("remove running state");
    assert_eq!(show_config(FRANCA.router), franca_config, "boot did not load the saved config");
    assert!(ping_lan(FRANCA.lan_host, "172.30.2.10", 3), "ping broken after the simulated boot");
    step("e: saved config restored at boot, ping ok", started);
}
