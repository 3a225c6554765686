//! The VyOS test double (`examples/vyos_double.rs`) behind real sshds in the lab
//! (`tests/lab/lab.sh up --vyos-routers`), driven only through `ssh ... 'vbash -s'`.
//!
//! Needs root (network namespaces); fails, never skips, without it. Uses its own lab
//! (`LAB_PREFIX=vd`, `LAB_MGMT_NET=10.249`) so it can run next to the other lab tests.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The lab's prefix and management range, moved by `FABRIC_LAB_SLOT` like every lab's.
fn prefix_and_net() -> (String, String) {
    fabric_testkit::lab::slot_of("vd", "10.249")
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn lab_dir() -> PathBuf {
    PathBuf::from(format!("/tmp/fabric-lab-{}", prefix_and_net().0))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        == Some(true)
}

fn lab(args: &[&str], double: Option<&Path>) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("tests/lab/lab.sh"))
        .args(args)
        .env("LAB_PREFIX", prefix_and_net().0)
        .env("LAB_MGMT_NET", prefix_and_net().1)
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
    // A session that never ends (a VyOS prompt reading its stdin to the end) fails the test
    // instead of hanging it.
    let mut child = Command::new("timeout")
        .arg("120")
        .arg("ssh")
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
    let double = fabric_testkit::lab::vyos_double_binary();
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
         set system config-management commit-revisions '100'\n\
         set system host-name 'vyos'\n",
        public[1]
    );
    assert_eq!(franca_config, expected, "show configuration commands is not the canonical form");
    let again = vbash(FRANCA.router, "configure\ncommit\nexit\n");
    assert!(again.stdout.contains("No configuration changes to commit"), "{}", again.all());
    step("a: tunnel up, ping ok, canonical config", started);

    // d. an invalid command: the error names the path, and, as on VyOS, the script goes on: the
    // valid rest is committed and the exit status is the last line's (0).
    let bad = vbash(
        FRANCA.router,
        &format!(
            "configure\nset interfaces wireguard wg0 description 'valid rest'\n\
             set interfaces wireguard wg0 peer sp pubkey '{}'\ncommit\nexit\n",
            public[1]
        ),
    );
    assert_eq!(bad.code, 0, "{}", bad.all());
    assert!(
        bad.all().contains(&format!(
            "Configuration path: [interfaces wireguard wg0 peer sp pubkey {}] is not valid",
            public[1]
        )),
        "error does not name the path:\n{}",
        bad.all()
    );
    assert!(bad.all().contains("Set failed"), "{}", bad.all());
    let with_rest = show_config(FRANCA.router);
    assert!(with_rest.contains("set interfaces wireguard wg0 description 'valid rest'"), "{with_rest}");
    ok(FRANCA.router, "configure\nset interfaces wireguard wg0 description 'fabric: site-to-site'\ncommit\nexit\n");
    assert_eq!(show_config(FRANCA.router), franca_config);
    // Only a refused value: nothing to commit, and `commit` says so with status 1.
    let bad_value = vbash(FRANCA.router, "configure\nset interfaces wireguard wg0 port 'seventy'\ncommit\n");
    assert_eq!(bad_value.code, 1, "{}", bad_value.all());
    assert!(bad_value.all().contains("Value validation failed"), "{}", bad_value.all());
    assert!(bad_value.all().contains("No configuration changes to commit"), "{}", bad_value.all());
    // The firewall and nat trees are checked like the interfaces: a 1.3-style base chain, a port
    // out of range and a misspelled `exclude` are refused; B.1's rules are committed and shown.
    for (line, says) in [
        ("set firewall name WAN_LOCAL rule 50 action 'accept'", "is not valid"),
        ("set firewall ipv4 input filter rule 51 destination port '70000'", "Value validation failed"),
        ("set nat source rule 50 exlude", "is not valid"),
    ] {
        let r = vbash(FRANCA.router, &format!("configure\n{line}\ncommit\n"));
        assert_eq!(r.code, 1, "`{line}` was accepted:\n{}", r.all());
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
    let op_commit = ssh(FRANCA.router, "set interfaces wireguard wg0 port '1'", "");
    assert_ne!(op_commit.code, 0, "a config command as the SSH command succeeded: {}", op_commit.all());
    // A plain shell command runs, as in VyOS's login shell (`/bin/vbash -c`): fabric's lock
    // holder runs over the router's real sshd for as long as its session, fabric's lock read
    // sees it in the router's /run (a private tmpfs in the lab), and the lock ends with the
    // session when the client is killed (SIGKILL, as a `kill -9` of fabric).
    let holder = "fabric apply r9 by op@laptop (pid 77) since 1764662400";
    let hold = fabric::live::locks::hold_lock(fabric::live::locks::LOCK_PATH, holder);
    let mut client = Command::new("ssh")
        .arg("-F")
        .arg(lab_dir().join("ssh_config"))
        .arg(FRANCA.router)
        .arg(hold.as_str())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn ssh");
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(client.stdout.as_mut().unwrap()), &mut first).unwrap();
    assert_eq!(first.trim(), fabric::live::locks::HELD);
    let read_lock = || {
        let read = ssh(FRANCA.router, fabric::live::locks::read_locks().as_str(), "");
        assert_eq!(read.code, 0, "the lock read failed: {}", read.all());
        fabric::live::locks::parse_hold(&read.stdout).lock
    };
    assert_eq!(read_lock().as_deref(), Some(holder));
    client.kill().unwrap();
    client.wait().unwrap();
    let killed = std::time::Instant::now();
    while read_lock().is_some() && killed.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(read_lock(), None, "the lock ended with the killed client's session");
    assert_eq!(show_config(FRANCA.router), franca_config);
    step("d: invalid commands rejected, running config unchanged", started);

    // b. commit-confirm that breaks the tunnel, never confirmed: reverted and realized. VyOS 1.4
    // reverts by a reboot to the saved configuration, which (a) saved.
    let before = show_config(FRANCA.router);
    let cc = ok(FRANCA.router, "configure\ndelete interfaces wireguard wg0 peer sp\ncommit-confirm 5 <<< y\nexit\n");
    assert!(cc.contains("Initialized commit-confirm; 5 minutes to confirm before reboot"), "{cc}");
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
        "configure\nset interfaces wireguard wg0 description 'confirmed change'\ncommit-confirm 5 <<< y\nexit\n",
    );
    assert!(cc.contains("Initialized commit-confirm"), "{cc}");
    // A second one while one is pending: refused before the question, nothing committed; the
    // status is 0 (the function's `if` after config-mgmt's exit 1), only the words say it.
    let second = vbash(FRANCA.router, "configure\nset interfaces wireguard wg0 mtu '1400'\ncommit-confirm 5 <<< y\n");
    assert_eq!(second.code, 0, "{}", second.all());
    assert!(second.all().contains("Another confirm is pending"), "{}", second.all());
    assert!(!second.all().contains("Proceed"), "{}", second.all());
    let confirmed = ok(FRANCA.router, "configure\nconfirm\nexit\n");
    assert!(confirmed.contains("Reboot timer stopped"), "{confirmed}");
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

// ---- VyOS 1.4's commit-confirm, run locally ------------------------------------------------
//
// The double run directly (no lab, no root): `system` paths are only stored, so nothing is
// realized. What these check is how a `vbash -s` script meets `commit-confirm` on VyOS 1.4
// (crates/testkit/src/vyos_double.md, "Scripts, stdin and exit status"), and that fabric's own
// builders (`fabric::providers`) get through it.

/// A fresh state directory for one local double.
fn local_state(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fabric-vyos-double-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("state dir");
    dir
}

/// Runs the double as sshd would run it for `vbash -s`; gives up after `limit` (killing it), as
/// fabric's SSH timeout would. `None` for the exit code: it was still running.
fn local(double: &Path, state: &Path, script: &str, limit: Duration) -> (Option<i32>, String) {
    let mut child = local_script(Command::new(double), state, script);
    let t0 = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st.code();
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().expect("output");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (code, text)
}

/// Starts `double` (a command that runs it) as sshd would for `vbash -s`, `script` on stdin.
fn local_script(mut double: Command, state: &Path, script: &str) -> std::process::Child {
    let mut child = double
        .env("VYOS_DOUBLE_STATE", state)
        .env("VYOS_DOUBLE_CONFIRM_UNIT", "seconds")
        .env("SSH_ORIGINAL_COMMAND", "vbash -s")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the double");
    child.stdin.take().expect("stdin").write_all(script.as_bytes()).expect("script");
    child
}

fn local_config(state: &Path) -> String {
    std::fs::read_to_string(state.join("running")).unwrap_or_default()
}

const TEMPLATE: &str = "source /opt/vyatta/etc/functions/script-template\n";

#[test]
fn commit_confirm_asks_like_vyos_1_4() {
    let double = fabric_testkit::lab::vyos_double_binary();
    let st = local_state("prompt");
    let quick = Duration::from_secs(30);

    // The script form fabric sent before: `commit-confirm N` then `exit`. The prompt reads
    // `exit` (no answer: asked again), then meets the end of input and asks forever. The
    // session never ends (fabric's SSH timeout would end it) and nothing is committed.
    let old = format!("{TEMPLATE}configure\nset system host-name 'old-form'\ncommit-confirm 30\nexit\n");
    let (code, out) = local(&double, &st, &old, Duration::from_secs(3));
    assert_eq!(code, None, "the old form finished (exit {code:?}): the prompt did not read stdin\n{out}");
    assert!(out.contains("Proceed ? [Y/n] Please respond with yes/y or no/n"), "{out}");
    assert!(out.matches("Please respond with yes/y or no/n").count() >= 2, "it does not ask again at EOF:\n{out}");
    assert!(!local_config(&st).contains("old-form"), "committed without an answer");
    assert!(!st.join("confirm.pending").exists(), "a timer was armed without an answer");

    // Python's read-ahead: the answer on the next line is taken, and the lines after it went
    // into the same 8 KiB buffer: they never run.
    let eaten = format!(
        "{TEMPLATE}configure\nset system host-name 'answered'\ncommit-confirm 30\ny\n\
         set system domain-name 'eaten.example'\ncommit\nexit\n"
    );
    let (code, out) = local(&double, &st, &eaten, quick);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Initialized commit-confirm; 30 minutes to confirm before reboot"), "{out}");
    let running = local_config(&st);
    assert!(running.contains("set system host-name 'answered'"), "{running}");
    assert!(!running.contains("eaten.example"), "a line after the answer ran:\n{running}");
    let (_, out) = local(&double, &st, &format!("{TEMPLATE}configure\n{}", fabric::providers::VYOS_CONFIRM), quick);
    assert_eq!(fabric::providers::vyos_confirmed(&out), Some(true), "{out}");

    // `n` cancels: config-mgmt exits 1, the function's `if` makes the status 0; nothing armed.
    let no = format!("{TEMPLATE}configure\nset system host-name 'declined'\ncommit-confirm 30\nn\n");
    let (code, out) = local(&double, &st, &no, quick);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("commit-confirm canceled"), "{out}");
    assert!(!local_config(&st).contains("declined"));
    assert!(fabric::providers::vyos_error(&out, "").is_some(), "fabric would not see the cancel:\n{out}");

    // Nothing to commit: no question, status 1 (vyatta-cfg-run `return 1`).
    let (code, out) = local(&double, &st, &format!("{TEMPLATE}configure\ncommit-confirm 30\n"), quick);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("No configuration changes to commit") && !out.contains("Proceed"), "{out}");
}

/// VyOS does not ask before a generated key replaces one (vyos-1x `install_into_config`: the
/// question's condition compares the new value, quotes included, with the stored ones, never
/// equal), and fabric's rotation line answers on its own stdin should one ever ask: the second
/// key replaces the first, nothing is asked, and no script line after it is read. (Nothing is
/// committed: a commit would create wg0 outside the lab's namespaces.)
#[test]
fn generating_over_an_existing_key_replaces_it_without_a_question() {
    let double = fabric_testkit::lab::vyos_double_binary();
    let st = local_state("regenerate");
    let first = fabric::providers::vyos_generate_key_line("wg0");
    let again = fabric::providers::wg_rotate::vyos_generate("wg0");
    let script = format!(
        "{TEMPLATE}configure\n{first}\n{}set system host-name 'after-the-key'\ncompare\nexit\n",
        &again[TEMPLATE.len() + "configure\n".len()..]
    );
    let (code, out) = local(&double, &st, &script, Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("[y/N]") && !out.contains("Please respond"), "a question was asked:\n{out}");
    assert_eq!(out.matches("Corresponding public-key to use on peer system is:").count(), 2, "{out}");
    let private: Vec<&str> = out.lines().filter(|l| l.contains(" private-key ")).collect();
    assert_eq!(private.len(), 1, "one key in the candidate, the second replaced the first:\n{out}");
    let key = private[0].rsplit(' ').next().unwrap().trim_matches('\'');
    let public =
        fabric::providers::wg_rotate::generated_key(out.rsplit("1 value(s) installed").next().unwrap()).unwrap();
    assert_eq!(wg_pubkey(key), public.to_string(), "the second public key is the installed key's");
    assert!(out.contains("set system host-name 'after-the-key'"), "the line after the generate ran:\n{out}");
    assert!(out.contains("fabric-generated"), "echo prints its words:\n{out}");
}

/// A script sent in parts runs as it arrives (bash runs each line once it has it): the answer
/// to the first part comes while stdin is still open, as fabric's staged rotation needs.
#[test]
fn a_script_runs_as_it_arrives() {
    use std::io::{BufRead, BufReader};
    let double = fabric_testkit::lab::vyos_double_binary();
    let st = local_state("parts");
    let mut child = Command::new(&double)
        .env("VYOS_DOUBLE_STATE", &st)
        .env("SSH_ORIGINAL_COMMAND", "vbash -s")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run the double");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    stdin.write_all(fabric::providers::wg_rotate::vyos_generate("wg0").as_bytes()).unwrap();
    let said: Vec<String> = lines.by_ref().map(Result::unwrap).take_while(|l| l != "fabric-generated").collect();
    assert!(said.iter().any(|l| l.starts_with("Corresponding public-key")), "{said:?}");
    stdin.write_all(b"echo fabric-staged\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "fabric-staged");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_failing_line_does_not_stop_the_script() {
    let double = fabric_testkit::lab::vyos_double_binary();
    let st = local_state("errors");
    let quick = Duration::from_secs(30);
    // An invalid path and a refused value between valid lines: VyOS prints its errors, goes
    // on, commits the valid rest, and the script exits with its last line's status (0).
    let script = format!(
        "{TEMPLATE}configure\nset system host-name 'valid-rest'\nset system bogus-node 'x'\n\
         set system domain-name 'ok.example'\ncommit\nexit\n"
    );
    let (code, out) = local(&double, &st, &script, quick);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("Configuration path: [system bogus-node x] is not valid") && out.contains("Set failed"),
        "{out}"
    );
    let running = local_config(&st);
    assert!(running.contains("host-name 'valid-rest'") && running.contains("domain-name 'ok.example'"), "{running}");
    // The exit status says nothing; fabric reads the output.
    assert_eq!(
        fabric::providers::vyos_error(&out, "").as_deref(),
        Some("Configuration path: [system bogus-node x] is not valid")
    );
    std::fs::write(st.join("reject_set"), "system domain-name").expect("fault injection");
    let (code, out) = local(
        &double,
        &st,
        &format!(
            "{TEMPLATE}configure\nset system host-name 'again'\nset system domain-name 'no.example'\ncommit\nexit\n"
        ),
        quick,
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Value validation failed"), "{out}");
    assert!(local_config(&st).contains("host-name 'again'"));
    assert!(fabric::providers::vyos_error(&out, "").is_some());
}

#[test]
fn fabric_answers_commit_confirm_in_both_forms() {
    use fabric::providers::{ConfirmForm, VYOS_CONFIRM_PROBE, confirm_form_of, vyos_script};
    let double = fabric_testkit::lab::vyos_double_binary();
    let st = local_state("forms");
    let quick = Duration::from_secs(30);
    let roots = ["system domain-name".to_string()];
    for (form_file, want) in [(None, ConfirmForm::Prompts), (Some("no-prompt"), ConfirmForm::NoPrompt)] {
        match form_file {
            Some(f) => std::fs::write(st.join("commit_confirm_form"), f).expect("form"),
            None => drop(std::fs::remove_file(st.join("commit_confirm_form"))),
        }
        let (code, probe) = local(&double, &st, VYOS_CONFIRM_PROBE, quick);
        assert_eq!(code, Some(0), "{probe}");
        let form = confirm_form_of(&probe).unwrap_or_else(|| panic!("no form in:\n{probe}"));
        assert_eq!(form, want, "{probe}");
        // What fabric sends, with more script after the commit-confirm line: nothing is eaten,
        // the timer is armed, the session ends at once.
        let domain =
            format!("set system domain-name '{}.example'", if form == ConfirmForm::NoPrompt { "np" } else { "p" });
        let before: Vec<String> =
            local_config(&st).lines().filter(|l| l.starts_with("set system domain-name")).map(String::from).collect();
        let script = vyos_script(&before, std::slice::from_ref(&domain), &roots, Some((30, form)), None);
        let (code, out) = local(&double, &st, &script, quick);
        assert_eq!(code, Some(0), "{script}\n{out}");
        assert!(out.contains(fabric::providers::VYOS_ARMED), "{out}");
        assert_eq!(fabric::providers::vyos_error(&out, ""), None, "{out}");
        assert_eq!(out.contains("Proceed ?"), form == ConfirmForm::Prompts, "{out}");
        assert!(local_config(&st).contains(&domain));
        let (_, out) = local(&double, &st, fabric::providers::VYOS_CONFIRM, quick);
        assert_eq!(fabric::providers::vyos_confirmed(&out), Some(true), "{out}");
    }
    // A sagitta router given `no-prompt` (a wrong detection): the double refuses loudly.
    std::fs::remove_file(st.join("commit_confirm_form")).expect("form");
    let script = format!("{TEMPLATE}configure\nset system host-name 'x'\ncommit-confirm 30 no-prompt <<< y\nexit\n");
    let (code, out) = local(&double, &st, &script, quick);
    assert_eq!(code, Some(1), "{out}");
}

/// VyOS 1.4 (sagitta) has no `system config-management commit-confirm` (vyos-1x T5976, PR #4128,
/// is on `current` only): the double playing sagitta refuses it as VyOS does, playing the newer
/// vyatta-cfg it accepts it, and every line fabric's B.1 sends for the example is accepted by
/// sagitta (`set` only, discarded by `exit`: nothing is committed or realized).
#[test]
fn sagitta_has_no_commit_confirm_action_and_fabric_sends_none() {
    use fabric::desired::Desired;
    let double = fabric_testkit::lab::vyos_double_binary();
    let st = local_state("sagitta-nodes");
    let quick = Duration::from_secs(30);
    let action = format!("{TEMPLATE}configure\nset system config-management commit-confirm action 'reload'\nexit\n");
    let (_, out) = local(&double, &st, &action, quick);
    assert!(out.contains("is not valid"), "{out}");
    assert!(fabric::providers::vyos_error(&out, "").is_some(), "fabric would not see the refusal: {out}");
    std::fs::write(st.join("commit_confirm_form"), "no-prompt").expect("form");
    let (_, out) = local(&double, &st, &action, quick);
    assert_eq!(fabric::providers::vyos_error(&out, ""), None, "{out}");
    std::fs::remove_file(st.join("commit_confirm_form")).expect("form");

    let l = fabric::topology::load_str("example", include_str!("../topology.example.yaml").to_string()).unwrap();
    let g = fabric::catalog::StepGraph::build(&fabric::catalog::Catalog::embedded().unwrap(), &l.topology).unwrap();
    let mut script = format!("{TEMPLATE}configure\n");
    let mut sent = 0;
    for r in g.instances().flat_map(|i| fabric::steps::for_instance(i, &l.topology)) {
        if let Desired::Vyos(lines) = r.desired {
            // The peers' public keys are placeholders until apply fills them in.
            for line in lines.iter().filter(|l| !l.contains("<public-key:")) {
                script.push_str(line);
                script.push('\n');
                sent += 1;
            }
        }
    }
    script.push_str("exit\n");
    assert!(sent > 10, "no VyOS lines rendered");
    let (_, out) = local(&double, &st, &script, quick);
    assert_eq!(fabric::providers::vyos_error(&out, ""), None, "VyOS 1.4 refuses a line of B.1:\n{out}");
}

#[test]
fn confirm_after_the_timer_fired_says_no_confirm_pending() {
    let double = fabric_testkit::lab::vyos_double_binary();
    let st = local_state("late");
    let quick = Duration::from_secs(30);
    let script = format!("{TEMPLATE}configure\nset system host-name 'short-lived'\ncommit-confirm 1 <<< y\nexit\n");
    let (code, out) = local(&double, &st, &script, quick);
    assert_eq!(code, Some(0), "{out}");
    assert!(local_config(&st).contains("short-lived"));
    let t0 = Instant::now();
    while local_config(&st).contains("short-lived") {
        assert!(t0.elapsed() < Duration::from_secs(10), "not reverted 10 s after commit-confirm 1 (seconds)");
        std::thread::sleep(Duration::from_millis(100));
    }
    // `confirm` exits 0 either way (config_mgmt.py); only its words tell the two apart.
    let (code, out) = local(&double, &st, fabric::providers::VYOS_CONFIRM, quick);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("No confirm pending"), "{out}");
    assert_eq!(fabric::providers::vyos_confirmed(&out), Some(false), "fabric would take this as confirmed");
}

/// VyOS 1.4 keeps a pending commit-confirm as a systemd timer (vyos-1x `config_mgmt.py`
/// `commit_confirm`: `systemd-run --on-active=Nm --unit=commit-confirm`), and asks systemd
/// whether one is pending (`is_systemd_service_active`: `systemctl show --value -p ActiveState
/// commit-confirm.timer`). The double answers that read in its login shell from the same state:
/// the timer active until it fires, then the revert service until the router is back; fabric's
/// lock read (`live::locks::read_locks_vyos`) sees exactly that.
#[test]
fn a_pending_commit_confirm_is_a_systemd_timer_as_on_vyos() {
    let double = fabric_testkit::lab::vyos_double_binary();
    let st = local_state("timer");
    let state = |unit: &str| {
        let (code, out) = local_command(&double, &st, &format!("systemctl show --value -p ActiveState {unit}"), None);
        assert_eq!(code, Some(0), "{out}");
        out.trim().to_string()
    };
    let fabric_reads = || {
        let read = fabric::transport::shell::as_root("root", &fabric::live::locks::read_locks_vyos());
        let (code, out) = local_command(&double, &st, read.as_str(), None);
        assert_eq!(code, Some(0), "{out}");
        fabric::live::locks::parse_hold(&out)
    };
    assert_eq!(state("commit-confirm.timer"), "inactive");
    assert!(fabric_reads().is_empty());

    let script = format!("{TEMPLATE}configure\nset system host-name 'pending'\ncommit-confirm 3 <<< y\nexit\n");
    let (code, out) = local(&double, &st, &script, Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(state("commit-confirm.timer"), "active");
    assert_eq!(state("commit-confirm.service"), "inactive");
    let (code, out) = local_command(&double, &st, "systemctl show -p ActiveState commit-confirm.timer", None);
    assert_eq!((code, out.trim()), (Some(0), "ActiveState=active"));
    let (code, out) =
        local_command(&double, &st, "systemctl is-active commit-confirm.timer commit-confirm.service", None);
    assert_eq!((code, out.as_str()), (Some(0), "active\ninactive\n"));
    let hold = fabric_reads();
    assert_eq!(hold.pending_reverts, ["VyOS commit-confirm (commit-confirm.timer active)"]);
    assert_eq!(hold.unknown, None);
    // The same as `Another confirm is pending` says.
    let again = format!("{TEMPLATE}configure\nset system domain-name 'second.example'\ncommit-confirm 3 <<< y\nexit\n");
    let (_, out) = local(&double, &st, &again, Duration::from_secs(30));
    assert!(out.contains("Another confirm is pending"), "{out}");

    // It fires: the timer is gone, and once the revert is done nothing is pending.
    let t0 = Instant::now();
    while !fabric_reads().is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(15), "still pending 15 s after commit-confirm 3 (seconds)");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!local_config(&st).contains("pending"), "not reverted:\n{}", local_config(&st));
    assert_eq!(state("commit-confirm.timer"), "inactive");
    let (code, _) = local_command(&double, &st, "systemctl is-active --quiet commit-confirm.timer", None);
    assert_eq!(code, Some(3), "systemctl(1): not active");

    // What the double does not model is refused, never answered.
    for cmd in [
        "systemctl show --value -p ActiveState sshd.service",
        "systemctl stop commit-confirm.timer",
        "systemctl show -p SubState commit-confirm.timer",
    ] {
        let (code, out) = local_command(&double, &st, cmd, None);
        assert_eq!(code, Some(1), "`{cmd}` was answered: {out}");
        assert!(out.contains("vyos_double: systemctl"), "{out}");
    }
}

// ---- What the double does not cover (crates/testkit/src/vyos_double.md, "Not covered") ------

#[test]
#[ignore = "NOT COVERED: not modelled by the VyOS double: a real reboot on commit-confirm action `reboot` (the double restores the saved config in place; fabric reconnecting after a reboot is not exercised)"]
fn not_covered_a_real_reboot_on_an_unconfirmed_commit() {
    panic!("not covered by the VyOS double: needs a real VyOS router");
}

#[test]
#[ignore = "NOT COVERED: not modelled by the VyOS double: a real router's `declare -f vyatta_config_commit-confirm` text (the double prints a stand-in of the deciding lines)"]
fn not_covered_the_real_commit_confirm_function_text() {
    panic!("not covered by the VyOS double: needs real VyOS 1.4 and newer routers");
}

#[test]
#[ignore = "NOT COVERED: not modelled by the VyOS double: the host lock's holder on a real VyOS as the `vyos` user through `sudo -n` (the double runs it as root in bash; that real VyOS ships util-linux's flock and that sudo passes the channel's end through as end of input is read from Debian, not run)"]
fn not_covered_the_host_lock_on_a_real_vyos_through_sudo() {
    panic!("not covered by the VyOS double: needs a real VyOS router");
}

#[test]
#[ignore = "NOT COVERED: not modelled by the VyOS double: a real VyOS's systemd `commit-confirm.timer` and `commit-confirm.service` (the double answers `systemctl show -p ActiveState` for them from its own state; that sagitta arms the timer with `systemd-run --on-active`, that it is gone once elapsed and that its service reboots are read from vyos-1x `config_mgmt.py` and systemd `run.c`, not run)"]
fn not_covered_the_commit_confirm_timer_of_a_real_vyos() {
    panic!("not covered by the VyOS double: needs a real VyOS router with systemd");
}

#[test]
#[ignore = "NOT COVERED: not modelled by the VyOS double: fabric's one-script read (`providers::vyos_read_script`) on a real VyOS: that `run show configuration commands` in a subshell after the script-template prints the configuration, and that the real template's aliases leave `/bin/sh -c` reads, `( ... ) </dev/null` and `printf` alone, is read from vyatta-cfg (script-template, vyatta-cfg-run), run only against the double and a stand-in of the aliases"]
fn not_covered_a_read_script_on_a_real_vyos() {
    panic!("not covered by the VyOS double: needs a real VyOS router");
}

/// Runs the double for the SSH command `command` (not a `vbash -s` script) as sshd would, in a
/// private mount namespace whose `/run` is a fresh tmpfs holding `lock` as fabric's lock file
/// (if any, held with flock as a session's holder holds it), as a lab router's `/run` is (lab.sh
/// `host_up`). Needs root (`unshare --mount`).
fn local_command(double: &Path, state: &Path, command: &str, lock: Option<&str>) -> (Option<i32>, String) {
    assert!(is_root(), "this test needs root (a private /run through unshare --mount); run it as root");
    let write_lock = match lock {
        // Held as a session holds it: fd 9 with flock(1), inherited by the double.
        Some(line) => {
            format!("exec 9<>{0} && flock 9 && printf '%s\\n' '{line}' > {0}", fabric::live::locks::LOCK_PATH)
        }
        None => "true".to_string(),
    };
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
        .arg(format!("mount -t tmpfs -o size=1m vd-run /run && mkdir -p /run/lock && {write_lock} && exec \"$0\""))
        .arg(double)
        .env("VYOS_DOUBLE_STATE", state)
        .env("SSH_ORIGINAL_COMMAND", command)
        .stdin(Stdio::null())
        .output()
        .expect("run the double");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

/// `fabric plan` reads every host's lock with a plain shell command (`live::locks::read_locks`).
/// On VyOS the SSH command runs in the login shell, `/bin/vbash -c COMMAND` (vyos-1x
/// `src/conf_mode/system_login.py`: every account gets `--shell /bin/vbash`; OpenSSH
/// `session.c` `do_child` execs the user's shell with `-c`), where `cat` works. The double
/// refused it before (`unsupported command 'cat -- /run/lock/fabric.lock…'`).
#[test]
fn plain_shell_commands_run_like_the_login_shell() {
    let double = fabric_testkit::lab::vyos_double_binary();
    let st = local_state("shell");
    // Exactly what plan and `fabric lock` send (as root in the lab; `as_root` is the identity there).
    let read = fabric::transport::shell::as_root("root", &fabric::live::locks::read_locks());
    let (code, out) = local_command(&double, &st, read.as_str(), None);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("unsupported"), "the lock read was refused:\n{out}");
    assert!(fabric::live::locks::parse_hold(&out).is_empty(), "no lock was written, yet:\n{out}");

    let holder = "fabric apply r1 by op@laptop (pid 4242) since 1764662400";
    let (code, out) = local_command(&double, &st, read.as_str(), Some(holder));
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(fabric::live::locks::parse_hold(&out).lock.as_deref(), Some(holder), "{out}");

    // A shell command's own exit status comes back (bash `-c`).
    let (code, out) = local_command(&double, &st, "cat -- /run/lock/absent-file", None);
    assert_eq!(code, Some(1), "{out}");

    // VyOS commands stay as strict as before: a config command outside a script is refused
    // (in real op mode `set` is bash's builtin and does nothing), an unknown op command too.
    for vyos in ["set system host-name 'x'", "delete system host-name", "commit", "show bogus thing"] {
        let (code, out) = local_command(&double, &st, vyos, None);
        assert_eq!(code, Some(1), "`{vyos}` was accepted:\n{out}");
        assert!(out.contains("vyos_double:"), "`{vyos}`: {out}");
    }
    assert!(!local_config(&st).contains("'x'"), "a command outside a script changed the config");
}

/// Runs the double for `vbash -s` with `script` on stdin; its stdout and stderr kept apart (a
/// framed batch is split on both).
fn local_output(double: &Path, state: &Path, script: &str) -> fabric::transport::ssh::Output {
    let mut timeout = Command::new("timeout");
    timeout.arg("60").arg(double);
    let o = local_script(timeout, state, script).wait_with_output().expect("output");
    fabric::transport::ssh::Output { status: o.status.code().unwrap_or(255) as u32, stdout: o.stdout, stderr: o.stderr }
}

/// fabric reads a VyOS router with ONE `vbash -s` script (`live::observe`, built by
/// `providers::vyos_read_script`): the script-template sourced once, then framed lines of bash:
/// `run show configuration commands`, the lock check through `/bin/sh`, the key read. On VyOS
/// such lines are bash (vbash is a bash; `run` is the template's alias, vyatta-cfg
/// `functions/interpreter/vyatta-cfg-run` `vyatta_config_run`); the double runs them in a real
/// bash with the template's aliases, and stays strict about what it cannot share with that
/// shell.
#[test]
fn one_script_reads_a_router() {
    use fabric::providers::{vyos_key_read, vyos_plain_read, vyos_read_script, vyos_show_read};
    use fabric::transport::shell::Sh;
    const KEY: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
    let double = fabric_testkit::lab::vyos_double_binary();
    let st = local_state("batch");
    let (code, out) = local(
        &double,
        &st,
        &format!("{TEMPLATE}configure\nset system host-name 'batched'\ncommit\nexit\n"),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{out}");
    // No wg0 runs in this local double: the fault file answers the key read in its place.
    std::fs::write(st.join("hostile_public_key"), format!("{KEY}\n")).unwrap();

    // The lock read of a VyOS router: the lock file and commit-confirm's systemd units
    // (`live::locks::read_locks_vyos`), its `systemctl` run by `/bin/sh -c` inside the script.
    let lock = fabric::transport::shell::as_root("root", &fabric::live::locks::read_locks_vyos());
    let reads = [
        vyos_show_read(),
        vyos_plain_read(&lock),
        vyos_plain_read(&Sh::lit("if [ -e /nonexistent/x ]; then cat /nonexistent/x; else exit 3; fi")),
        vyos_key_read("wg0"),
    ];
    let tag = fabric::transport::batch::new_tag();
    let o = local_output(&double, &st, &vyos_read_script(&reads, &tag));
    let parts = fabric::transport::batch::split(&o, &tag, reads.len())
        .unwrap_or_else(|e| panic!("{e}\nstdout: {}\nstderr: {}", o.stdout_str(), o.stderr_str()));
    assert_eq!(parts[0].status, 0, "{}", parts[0].stderr_str());
    assert_eq!(parts[0].stdout_str(), local_config(&st), "the running configuration, whole");
    assert!(parts[0].stdout_str().contains("set system host-name 'batched'"));
    assert_eq!(parts[1].status, 0, "the lock check: {}", parts[1].stderr_str());
    let units = |hold: &fabric::live::locks::Hold| -> Vec<String> {
        hold.pending_reverts.iter().filter(|p| p.contains("commit-confirm")).cloned().collect()
    };
    let hold = fabric::live::locks::parse_hold(&parts[1].stdout_str());
    assert_eq!(hold.unknown, None, "systemctl answered in the script: {}", parts[1].stdout_str());
    assert!(parts[1].stdout_str().contains("unit commit-confirm.timer inactive"), "{}", parts[1].stdout_str());
    assert!(units(&hold).is_empty(), "{:?}", hold.pending_reverts);
    assert_eq!(parts[2].status, 3, "a plain read's own status, not the template's `exit`");
    assert_eq!(parts[3].stdout_str(), format!("{KEY}\n"));

    // Strict where VyOS would differ or the double cannot follow:
    // - without the template, `run` is no command (bash: 127), as on VyOS;
    let o = local_output(&double, &st, &fabric::transport::batch::script(&[vyos_show_read()], &tag));
    let parts = fabric::transport::batch::split(&o, &tag, 1).unwrap();
    assert_eq!(parts[0].status, 127, "{}", parts[0].stderr_str());
    // - a configuration command inside a shell line (its session cannot be shared with a child
    //   shell) stops the script, loudly;
    let script = format!("{TEMPLATE}( set system host-name 'sub' ) </dev/null; echo after\necho never\n");
    let (code, out) = local(&double, &st, &script, Duration::from_secs(30));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("vyos_double: a shell line used a VyOS command") && !out.contains("never"), "{out}");
    // - so does an op-mode command the double does not play;
    let (code, out) =
        local(&double, &st, &format!("{TEMPLATE}( run show bogus ) </dev/null\necho never\n"), Duration::from_secs(30));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("run show bogus") && !out.contains("never"), "{out}");
    // - a shell line that reads stdin takes the script's next lines, as on VyOS.
    let script = format!("{TEMPLATE}cat\nconfigure\nset system host-name 'eaten'\ncommit\nexit\n");
    let (code, out) = local(&double, &st, &script, Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("set system host-name 'eaten'"), "cat printed the lines it took:\n{out}");
    assert!(local_config(&st).contains("host-name 'batched'"), "a line cat took ran:\n{}", local_config(&st));

    // A pending commit-confirm (systemd's timer on VyOS) is what the same one-script read sees.
    let arm = format!("{TEMPLATE}configure\nset system host-name 'pending'\ncommit-confirm 5 <<< y\nexit\n");
    let (code, out) = local(&double, &st, &arm, Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out}");
    let o = local_output(&double, &st, &vyos_read_script(&reads, &tag));
    let parts = fabric::transport::batch::split(&o, &tag, reads.len()).unwrap();
    let hold = fabric::live::locks::parse_hold(&parts[1].stdout_str());
    assert_eq!(units(&hold), ["VyOS commit-confirm (commit-confirm.timer active)"], "{}", parts[1].stdout_str());
    let (code, out) = local(&double, &st, &format!("{TEMPLATE}configure\nconfirm\nexit\n"), Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out}");
    let _ = std::fs::remove_dir_all(&st);
}
