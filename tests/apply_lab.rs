//! Plan and apply of step B.1 end to end on the two-site lab: real sshd, real WireGuard
//! (wireguard-go), a ping across the tunnel. The same scenarios run with Linux routers and with
//! VyOS routers (the VyOS test double behind the routers' sshd, which checks every command it
//! receives against VyOS's interface definitions). Needs root (network namespaces).

use fabric_testkit::{lab, run};

use run::out;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

const LINUX: &str = include_str!("data/lab-linux.yaml");
const VYOS: &str = include_str!("data/lab-vyos.yaml");

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Linux,
    Vyos,
}

struct Run {
    dir: PathBuf,
    ssh_config: PathBuf,
}

impl Run {
    fn new(lab: &lab::Lab, name: &str) -> Run {
        let dir = std::env::temp_dir().join(format!("fabric-apply-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Run { dir, ssh_config: lab.ssh_config() }
    }

    fn topology(&self, text: &str) -> PathBuf {
        let p = self.dir.join("topology.yaml");
        std::fs::write(&p, text).unwrap();
        p
    }

    fn fabric(&self, topology: &Path, args: &[&str]) -> Output {
        run::fabric_in(&self.dir, topology, &self.ssh_config, args)
    }
}

#[test]
fn b1_on_linux_routers() {
    let lab = lab::Lab::up("ap", "10.242", &[], &[]);
    b1(&lab, Kind::Linux, LINUX);
}

#[test]
fn b1_on_vyos_routers() {
    // One commit-confirm "minute" lasts 15 s in the lab, so `--confirm-timeout 15` is 15 s.
    let lab = lab::Lab::up_vyos("av", "10.243", 15);
    b1(&lab, Kind::Vyos, VYOS);
    // Every command fabric sent passed VyOS's interface definitions: the double refuses any other.
    for router in ["franca-router", "sp-router"] {
        let log =
            std::fs::read_to_string(lab.dir.join("hosts").join(router).join("vyos/double.log")).unwrap_or_default();
        assert!(!log.contains("is not valid"), "{router} refused a command:\n{log}");
    }
}

/// Routers whose firewall drops by default (`lab.sh up --firewall`: the operator's own nftables
/// table `inet lab`, policy drop on input and forward). B.1 opens what the tunnel needs by
/// inserting its tagged rules into those chains, proves the MTU with a don't-fragment ping, leaves
/// the operator's rules alone, and takes its rules away again on rollback.
#[test]
fn b1_through_default_drop_firewalls() {
    let lab = lab::Lab::up("fw", "10.236", &["--firewall"], &[]);
    let run = Run::new(&lab, "firewall");
    let topo = run.topology(LINUX);
    let lab_rules = |router: &str| -> Vec<String> {
        let o = lab.exec(router, "nft list table inet lab");
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.contains("fabric-b1"))
            .map(String::from)
            .collect()
    };
    let before = lab_rules("sp-router");
    assert!(before.iter().any(|l| l.contains("policy drop")), "{before:?}");

    let o = run.fabric(&topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", "15"]);
    assert!(o.status.success(), "{}", out(&o));
    let text = out(&o);
    assert!(text.contains("host.franca-lan → 172.30.2.10 ok (1420-byte packets, don't fragment)"), "{text}");
    // apply prints each router's public key, for the topology.
    let key =
        String::from_utf8_lossy(&lab.exec("sp-router", "wg pubkey < /etc/wireguard/wg0.key").stdout).trim().to_string();
    assert!(text.contains(&format!("router.sp WireGuard public key {key} (record it under")), "{text}");
    assert!(lab.ping("franca-lan", "172.30.2.10"));
    assert_eq!(lab_rules("sp-router"), before, "the operator's rules are untouched");
    let o = lab.exec("sp-router", "nft list chain inet lab forward");
    assert_eq!(String::from_utf8_lossy(&o.stdout).matches("comment \"fabric-b1 ").count(), 2);
    // The MTU is set on both ends, and a packet one byte over it does not pass whole.
    let o = lab.exec("franca-router", "ip -o link show wg0");
    assert!(String::from_utf8_lossy(&o.stdout).contains("mtu 1420"), "{}", out(&o));
    let o = lab.exec("franca-lan", "ping -c 1 -W 2 -M do -s 1393 172.30.2.10");
    assert!(!o.status.success(), "a 1421-byte packet passed a 1420-byte tunnel unfragmented");
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));

    // Without fabric's rules the LANs do not reach each other: plan sees the drift, apply
    // puts the rules back.
    lab.exec(
        "sp-router",
        "nft -a list chain inet lab forward | sed -n 's/.*fabric-b1.* # handle \\([0-9]*\\)$/\\1/p' | \
         while read h; do nft delete rule inet lab forward handle $h; done",
    );
    assert!(!lab.ping("franca-lan", "172.30.2.10"), "the firewall lets the LANs through by itself");
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(out(&o).contains("router.sp/command:nftables"), "{}", out(&o));
    let o = run.fabric(&topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", "15"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(lab.ping("franca-lan", "172.30.2.10"));

    // A key the topology records that is not the router's: plan warns.
    let other = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
    let wrong = LINUX.replacen(
        "address: 10.0.0.2/30, listen_port: 51820",
        &format!("address: 10.0.0.2/30, listen_port: 51820, public_key: {other}"),
        1,
    );
    let wrong = run.topology(&wrong);
    let o = run.fabric(&wrong, &["plan", "--step", "B.1"]);
    assert!(
        out(&o).contains(&format!(
            "warning: router.sp: its WireGuard public key is {key}, but the topology records {other}"
        )),
        "{}",
        out(&o)
    );
    let topo = run.topology(LINUX);

    // Rolling back the run that put sp's rules back removes them again (its rollback point: no
    // rules), and only them.
    let o = run.fabric(&topo, &["rollback"]);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(lab_rules("sp-router"), before);
    let o = lab.exec("sp-router", "nft list table inet lab");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("fabric-b1"), "{}", out(&o));
}

/// `decisions.drbd_cross_site: direct` on Linux routers whose firewall drops by default: each
/// site has a storage host (a second address on its LAN host, declared as a LINSTOR satellite).
/// B.1 adds a host route to the other site's storage host through the tunnel and rules that let
/// DRBD's TCP ports through, both ways; with the tunnel's general LAN rules taken away, DRBD's
/// port still passes between the storage hosts and another port does not. Rollback takes the
/// routes and the rules away.
#[test]
fn drbd_direct_on_linux_routers() {
    let lab = lab::Lab::up("dd", "10.234", &["--firewall"], &[]);
    let run = Run::new(&lab, "drbd");
    let mut text = LINUX.replace("drbd_cross_site: cilium", "drbd_cross_site: direct");
    for (i, site) in ["franca", "sp"].iter().enumerate() {
        let node = format!("ssh: {{ host: {site}-lan }} }}\n");
        let store = format!(
            "{node}    external_workloads:\n      - {{ name: {site}-store, kind: bare-metal, address: 172.30.{}.20, \
             runs: [linstor-satellite], ssh: {{ host: {site}-lan }} }}\n",
            i + 1
        );
        text = text.replacen(&node, &store, 1);
        let o = lab.exec(&format!("{site}-lan"), &format!("ip addr add 172.30.{}.20/24 dev eth0", i + 1));
        assert!(o.status.success(), "{}", out(&o));
    }
    let topo = run.topology(&text);
    let o = run.fabric(&topo, &["plan", "--step", "B.1"]);
    assert!(out(&o).contains("+ router.franca/command:route 172.30.2.20/32"), "{}", out(&o));

    let o = run.fabric(&topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", "30"]);
    assert!(o.status.success(), "{}", out(&o));
    for (router, remote) in [("franca-router", "172.30.2.20"), ("sp-router", "172.30.1.20")] {
        let o = lab.exec(router, &format!("ip route show {remote}/32 dev wg0"));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(remote),
            "{router}: no host route to {remote}: {}",
            out(&o)
        );
        let o = lab.exec(router, "nft list chain inet lab forward");
        let chain = String::from_utf8_lossy(&o.stdout).to_string();
        assert_eq!(chain.matches("tcp dport 7000-7999 accept comment \"fabric-b1 ").count(), 2, "{chain}");
        assert_eq!(chain.matches("tcp sport 7000-7999 accept comment \"fabric-b1 ").count(), 2, "{chain}");
    }
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
    assert_eq!(o.status.code(), Some(0), "a second plan changes nothing: {}", out(&o));
    assert!(tcp("172.30.1.20", "172.30.2.20", 7000, &lab), "DRBD's port between the storage hosts");

    // Without the tunnel's general LAN rules, only DRBD's ports between the storage hosts pass.
    for router in ["franca-router", "sp-router"] {
        lab.exec(
            router,
            "nft -a list chain inet lab forward | grep fabric-b1 | grep -v ' tcp ' | \
             sed -n 's/.* # handle \\([0-9]*\\)$/\\1/p' | while read h; do nft delete rule inet lab forward handle $h; done",
        );
    }
    assert!(!lab.ping("franca-lan", "172.30.2.10"), "the LANs still reach each other without the general rules");
    assert!(tcp("172.30.1.20", "172.30.2.20", 7001, &lab), "DRBD's port range passes on its own rules");
    assert!(!tcp("172.30.1.20", "172.30.2.20", 8000, &lab), "a port outside DRBD's range passed");

    let o = run.fabric(&topo, &["rollback"]);
    assert!(o.status.success(), "{}", out(&o));
    for router in ["franca-router", "sp-router"] {
        let o = lab.exec(router, "ip route; nft list table inet lab");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(!text.contains("/32") && !text.contains(".20 ") && !text.contains("fabric-b1"), "{router}: {text}");
    }
}

/// A TCP connection from `from` (an address of franca's LAN host) to `to` (one of sp's LAN
/// host) on `port`: a one-shot listener in sp's LAN host, a client in franca's.
fn tcp(from: &str, to: &str, port: u16, lab: &lab::Lab) -> bool {
    let server = format!(
        "timeout 12 python3 -c \"import socket; s = socket.socket(); \
         s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('{to}', {port})); s.listen(1); \
         c, a = s.accept(); c.sendall(b'ok')\""
    );
    std::thread::scope(|sc| {
        let listener = sc.spawn(|| lab.exec("sp-lan", &server));
        std::thread::sleep(Duration::from_millis(500));
        // The listener may take a moment to bind on a loaded machine: the client retries for 6 s.
        let client = lab.exec(
            "franca-lan",
            &format!(
                "timeout 9 python3 -c \"import socket, time\nend = time.time() + 6\nwhile True:\n    try:\n        \
                 s = socket.create_connection(('{to}', {port}), timeout=2, source_address=('{from}', 0)); \
                 print(s.recv(2).decode()); break\n    except OSError:\n        \
                 if time.time() > end: raise\n        time.sleep(0.2)\""
            ),
        );
        let _ = listener.join();
        client.status.success() && String::from_utf8_lossy(&client.stdout).trim() == "ok"
    })
}

/// Another session's lock on `router`, held as fabric's holder holds it (flock on the lock file,
/// the holder's line and its pid) by a process left running in the router's namespaces.
fn hold_lock_as(lab: &lab::Lab, router: &str, holder: &str) {
    let o = lab.exec(
        router,
        &format!(
            "setsid sh -c 'exec 9<>/run/lock/fabric.lock; flock 9; printf \"%s\\nsession %s\\n\" \"$0\" $$ > /run/lock/fabric.lock; exec sleep 600' '{holder}' </dev/null >/dev/null 2>&1 &"
        ),
    );
    assert!(o.status.success(), "{}", out(&o));
    let started = Instant::now();
    while lock_of(lab, router) != holder && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(lock_of(lab, router), holder);
}

/// Builds the VyOS test double (an example of this crate) and returns its path.
fn lock_of(lab: &lab::Lab, router: &str) -> String {
    let o = lab.exec(router, "sed -n 1p /run/lock/fabric.lock 2>/dev/null; true");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Waits (at most `within`) until no session holds `router`'s lock: a killed run's connection is
/// closed by its kernel, and sshd then ends the session and with it the lock; a cut-off
/// client's session is ended by sshd's keepalive (the lab's 5 s × 3: nominally 20 s, at its
/// fourth unanswered keepalive, OpenSSH `serverloop.c` `client_alive_check`; 38 s measured).
fn lock_ends(lab: &lab::Lab, router: &str, within: Duration) -> String {
    let started = Instant::now();
    while !lock_of(lab, router).is_empty() && started.elapsed() < within {
        std::thread::sleep(Duration::from_millis(100));
    }
    lock_of(lab, router)
}

/// Two operators (two state directories, as on two laptops) apply the same change at once: one
/// applies it, the other is refused naming the holder (or, started after the first finished,
/// finds nothing to do); no lock is left.
fn two_applies_at_once(lab: &lab::Lab, run: &Run, topo: &Path) {
    hand_edit(lab, Kind::Linux, "sp-router", "s/^ListenPort = 51820/ListenPort = 51997/", "");
    let args = ["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", "15"];
    let other = run.dir.join("other-operator");
    let mut other_args = vec!["--state-dir", other.to_str().unwrap()];
    other_args.extend(args);
    let a = run::fabric_spawn(&run.dir, topo, &run.ssh_config, &args);
    let b = run::fabric_spawn(&run.dir, topo, &run.ssh_config, &other_args);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let ok = [&a, &b].iter().filter(|o| o.status.success()).count();
    assert!(ok >= 1, "one of them applies:\n{}\n{}", out(&a), out(&b));
    for o in [&a, &b].iter().filter(|o| !o.status.success()) {
        assert!(out(o).contains("is locked by another apply: fabric run"), "{}", out(o));
    }
    let o = run.fabric(topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
    assert_eq!(o.status.code(), Some(0), "applied once, completely: {}", out(&o));
    assert_eq!(lock_of(lab, "sp-router"), "", "no lock left on sp");
    assert_eq!(lock_of(lab, "franca-router"), "", "no lock left on franca");
}

/// `--lock-timeout` (issue 36, item 6): with another session's lock on sp's router, an apply
/// that may wait 8 s is refused once it waited, naming the holder (each try itself waits 5 s for
/// the lock: `flock -w 5`, `live::locks`); one that may wait a minute says once who holds it,
/// waits, and applies as soon as the holder ends (killed here by its pid once the run said it
/// waits).
fn a_lock_waited_for(lab: &lab::Lab, run: &Run, topo: &Path, confirm: &str) {
    use std::io::BufRead;
    let other = "fabric run other by ops@laptop (pid 1)";
    hold_lock_as(lab, "sp-router", other);
    let started = Instant::now();
    let o = run.fabric(topo, &["apply", "--step", "B.1", "--auto-approve", "--lock-timeout", "8s"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(started.elapsed() >= Duration::from_secs(8), "{:?}", started.elapsed());
    assert!(out(&o).contains(&format!("router.sp is locked by another apply: {other}")), "{}", out(&o));
    assert_eq!(out(&o).matches("waiting up to 8 s for it (--lock-timeout)").count(), 1, "{}", out(&o));
    let args = ["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm, "--lock-timeout", "60s"];
    let mut waiting = run::fabric_spawn(&run.dir, topo, &run.ssh_config, &args);
    let stderr = waiting.stderr.take().unwrap();
    let (said_it, heard) = std::sync::mpsc::channel();
    let lines = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("waiting up to 60 s for it (--lock-timeout)") {
                let _ = said_it.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    assert!(heard.recv_timeout(Duration::from_secs(60)).is_ok(), "the run says it waits");
    let o = lab.exec("sp-router", "kill $(sed -n 2p /run/lock/fabric.lock | cut -d' ' -f2)");
    assert!(o.status.success(), "{}", out(&o));
    let status = waiting.wait().unwrap();
    let said = lines.join().unwrap();
    assert!(status.success(), "{said}");
    let line = format!("router.sp is locked by another apply: {other}; waiting up to 60 s for it (--lock-timeout)");
    assert_eq!(said.matches(&line).count(), 1, "told once: {said}");
    assert_eq!(lock_of(lab, "sp-router"), "", "no lock left");
}

/// An apply killed (SIGKILL: no handler runs) while it changes the routers, and a new apply at
/// once, without `fabric lock release` (issue #24, item 4): the dead run's locks ended with its
/// connections, and the new run waits while a self-revert of the dead run is pending on a
/// router, so it changes the routers only once they have put themselves back. It completes the
/// change; no lock and no pending revert is left.
fn an_apply_killed_mid_way(lab: &lab::Lab, run: &Run, topo: &Path, confirm: &str) {
    hand_edit(lab, Kind::Linux, "sp-router", "s/^ListenPort = 51820/ListenPort = 51996/", "");
    let args = ["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm];
    let mut p = run::fabric_paused(&run.dir, topo, &run.ssh_config, &args, "applied", 60);
    assert!(p.wait_for_pause(Duration::from_secs(60)), "the run applied its changes");
    let armed = leftovers(lab, "sp-router");
    assert!(armed.contains("/run/fabric-confirm-wg0-"), "sp's self-revert is armed: {armed}");
    p.kill();
    let _ = p.finish();
    let o = run.fabric(topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        out(&o).contains("router.sp: waiting for another run's pending self-revert before changing it"),
        "the new run waited for the dead run's revert: {}",
        out(&o)
    );
    for r in ["sp-router", "franca-router"] {
        assert_eq!(leftovers(lab, r), "", "{r}: {}", out(&o));
    }
    let o = run.fabric(topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
}

/// Waits until a run's journal has begun a step that has not ended.
fn wait_for_begin(run: &Run) {
    let runs = run.dir.join(".fabric/runs");
    let started = std::time::Instant::now();
    let begun = || {
        std::fs::read_dir(&runs).into_iter().flatten().filter_map(|e| e.ok()).any(|e| {
            let t = std::fs::read_to_string(e.path()).unwrap_or_default();
            t.contains("\"event\":\"begin\"") && !t.contains("\"event\":\"end\"")
        })
    };
    while !begun() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// franca's router becomes unreachable over SSH (its management link cut) while the step is
/// applied: fabric cannot confirm it, so it confirms nothing, says so, and each router puts
/// itself back; the cut-off session's lock ends when sshd's keepalive gives up on it, and once
/// the link is back plan tells the truth.
fn a_peer_lost_mid_apply(lab: &lab::Lab, run: &Run, topo: &Path, confirm: &str) {
    hand_edit(lab, Kind::Linux, "sp-router", "s/^ListenPort = 51820/ListenPort = 51995/", "");
    hand_edit(lab, Kind::Linux, "franca-router", "s/^ListenPort = 51820/ListenPort = 51995/", "");
    let args = ["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm];
    let child = run::fabric_spawn(&run.dir, topo, &run.ssh_config, &args);
    wait_for_begin(run);
    std::thread::sleep(Duration::from_millis(300));
    assert!(lab.cmd(&["cut-mgmt", "franca-router"]).status.success());
    let o = child.wait_with_output().unwrap();
    let applied = o.status.success();
    std::thread::sleep(Duration::from_secs(confirm.parse::<u64>().unwrap() + 8));
    assert!(lab.cmd(&["restore-mgmt", "franca-router"]).status.success());
    // No `lock release`: franca's lock ends when its sshd gives up on the cut-off client (the
    // lab's ClientAliveInterval 5 × ClientAliveCountMax 3).
    assert_eq!(lock_of(lab, "sp-router"), "", "{}", out(&o));
    assert_eq!(lock_ends(lab, "franca-router", Duration::from_secs(90)), "", "{}", out(&o));
    let plan = run.fabric(topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
    if applied {
        assert_eq!(plan.status.code(), Some(0), "reported applied, so it is: {}\n{}", out(&o), out(&plan));
    } else {
        assert_eq!(plan.status.code(), Some(2), "reported failed, so nothing stayed: {}\n{}", out(&o), out(&plan));
        assert!(!out(&o).contains("Apply complete"), "{}", out(&o));
    }
    let o = run.fabric(topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm]);
    assert!(o.status.success(), "{}", out(&o));
}

/// What a run left on a router besides its change: a lock, or a pending self-revert (a canary
/// or its job's pid file; a job's log may stay).
fn leftovers(lab: &lab::Lab, router: &str) -> String {
    let o = lab.exec(
        router,
        "cat /run/lock/fabric.lock 2>/dev/null; ls /run/fabric-confirm-* 2>/dev/null | grep -v '[.]log$'; true",
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The routers a B.1 plan has changes for (the `~`, `+` or `-` lines' targets).
fn routers_in_plan(plan: &str) -> Vec<&'static str> {
    ["router.franca/", "router.sp/"]
        .into_iter()
        .filter(|r| plan.lines().any(|l| l.trim_start().get(2..).is_some_and(|a| a.starts_with(r))))
        .collect()
}

/// An apply whose state directory is read-only (a disk remounted read-only) cannot journal its
/// run, so it stops before it takes a lock or changes anything, and says why.
fn read_only_state_dir(lab: &lab::Lab, run: &Run, topo: &Path) {
    hand_edit(lab, Kind::Linux, "sp-router", "s/^ListenPort = 51820/ListenPort = 51990/", "");
    let state = run.dir.join("ro-state");
    std::fs::create_dir_all(&state).unwrap();
    let mount = |args: &[&str]| std::process::Command::new("mount").args(args).arg(&state).status().unwrap().success();
    assert!(mount(&["-t", "tmpfs", "-o", "size=64k,ro", "tmpfs"]), "mount a read-only tmpfs");
    let args = ["--state-dir", state.to_str().unwrap(), "apply", "--step", "B.1", "--auto-approve"];
    let o = run.fabric(topo, &args);
    let _ = std::process::Command::new("umount").arg(&state).status();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("cannot create the journal") && out(&o).contains("Read-only file system"), "{}", out(&o));
    for r in ["sp-router", "franca-router"] {
        assert_eq!(leftovers(lab, r), "", "{r}: {}", out(&o));
    }
    let plan = run.fabric(topo, &["plan", "--step", "B.1", "--detailed-exitcode"]);
    assert_eq!(routers_in_plan(&out(&plan)), ["router.sp/"], "nothing changed: {}", out(&plan));
}

/// SIGKILL once the hosts are locked, before anything is journaled, armed or changed: nothing
/// reverts (nothing was armed), the dead run's locks end with its connections (no `lock
/// release`); the routers are as they were and plan still shows the change.
fn killed_before_arming(lab: &lab::Lab, run: &Run, topo: &Path) {
    hand_edit(lab, Kind::Linux, "sp-router", "s/^ListenPort = 51820/ListenPort = 51994/", "");
    let args = ["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", "15"];
    let mut p = run::fabric_paused(&run.dir, topo, &run.ssh_config, &args, "locked", 60);
    assert!(p.wait_for_pause(Duration::from_secs(30)), "the run reached its locks");
    assert!(lock_of(lab, "sp-router").contains("fabric run"), "the run holds sp's lock");
    p.kill();
    let o = p.finish();
    for r in ["sp-router", "franca-router"] {
        assert_eq!(lock_ends(lab, r, Duration::from_secs(20)), "", "{r}: the lock ended with the session: {}", out(&o));
        assert_eq!(leftovers(lab, r), "", "{r}: {}", out(&o));
    }
    let status = run.fabric(topo, &["lock", "status"]);
    assert!(out(&status).contains("router.sp: free"), "{}", out(&status));
    let plan = run.fabric(topo, &["plan", "--step", "B.1", "--detailed-exitcode"]);
    assert_eq!(plan.status.code(), Some(2), "nothing was changed: {}", out(&plan));
    assert_eq!(routers_in_plan(&out(&plan)), ["router.sp/"], "{}", out(&plan));
}

/// SIGINT (Ctrl-C) once the hosts are locked: the step is not started, the locks are released,
/// the journal ends, and the exit status says the run was interrupted.
fn interrupted_before_changing(lab: &lab::Lab, run: &Run, topo: &Path) {
    let args = ["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", "15"];
    let p = run::fabric_paused(&run.dir, topo, &run.ssh_config, &args, "locked", 3);
    assert!(p.wait_for_pause(Duration::from_secs(30)), "the run reached its locks");
    p.interrupt();
    let o = p.finish();
    assert_eq!(o.status.code(), Some(130), "{}", out(&o));
    assert!(out(&o).contains("not started: B.1"), "{}", out(&o));
    for r in ["sp-router", "franca-router"] {
        assert_eq!(leftovers(lab, r), "", "{r}: {}", out(&o));
    }
    let plan = run.fabric(topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
    assert_eq!(plan.status.code(), Some(2), "nothing was changed: {}", out(&plan));
}

/// SIGKILL between the two routers' confirmations: the confirmed router keeps the change, the
/// other puts itself back when its timer fires; the locks ended with the connections. Each router is wholly at one
/// state, and plan shows exactly the unconfirmed router's change; an apply completes it.
fn killed_during_confirm(lab: &lab::Lab, run: &Run, topo: &Path, confirm: &str) {
    hand_edit(lab, Kind::Linux, "sp-router", "s/^ListenPort = 51820/ListenPort = 51993/", "");
    hand_edit(lab, Kind::Linux, "franca-router", "s/^ListenPort = 51820/ListenPort = 51993/", "");
    let args = ["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm];
    let mut p = run::fabric_paused(&run.dir, topo, &run.ssh_config, &args, "confirming", 60);
    assert!(p.wait_for_pause(Duration::from_secs(60)), "the run reached its confirmation");
    p.kill();
    let o = p.finish();
    std::thread::sleep(Duration::from_secs(confirm.parse::<u64>().unwrap() + 8));
    // No `lock release`: the dead run's locks ended with its connections.
    for r in ["sp-router", "franca-router"] {
        assert_eq!(leftovers(lab, r), "", "{r}: {}", out(&o));
    }
    let plan = run.fabric(topo, &["plan", "--step", "B.1", "--detailed-exitcode"]);
    assert_eq!(plan.status.code(), Some(2), "{}", out(&plan));
    let text = out(&plan);
    let shown = routers_in_plan(&text);
    assert_eq!(shown.len(), 1, "one router confirmed, the other back where it was: {text}");
    assert!(text.contains("-ListenPort = 51993") && text.contains("+ListenPort = 51820"), "{text}");
    let o = run.fabric(topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm]);
    assert!(o.status.success(), "{}", out(&o));
}

/// The WAN link cut after the step's changes, before its check: the check fails, the step is
/// put back explicitly at both routers, and the run says so; no lock stays, plan shows the
/// change still to do.
fn wan_cut_mid_apply(lab: &lab::Lab, kind: Kind, run: &Run, topo: &Path, confirm: &str) {
    hand_edit(
        lab,
        kind,
        "sp-router",
        "s/^ListenPort = 51820/ListenPort = 51992/",
        "set interfaces wireguard wg0 port '51992'",
    );
    let args = ["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm];
    let p = run::fabric_paused(&run.dir, topo, &run.ssh_config, &args, "applied", 3);
    assert!(p.wait_for_pause(Duration::from_secs(60)), "the run applied its changes");
    assert!(lab.cmd(&["cut", "sp"]).status.success());
    let o = p.finish();
    assert!(lab.cmd(&["restore", "sp"]).status.success());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("step B.1 failed and was reverted: check failed"), "{}", out(&o));
    assert!(!out(&o).contains("Apply complete"), "{}", out(&o));
    if kind == Kind::Linux {
        for r in ["sp-router", "franca-router"] {
            assert_eq!(leftovers(lab, r), "", "{r}: {}", out(&o));
        }
    }
    let plan = run.fabric(topo, &["plan", "--step", "B.1", "--detailed-exitcode"]);
    assert_eq!(plan.status.code(), Some(2), "put back: {}", out(&plan));
    assert_eq!(routers_in_plan(&out(&plan)), ["router.sp/"], "{}", out(&plan));
    // After the WAN came back, the peers may need a handshake or two before the check's pings
    // pass: a confirm timeout with room for that (a short one would see the router revert
    // first, correctly reported as a failure, but not what this case is about).
    let o = run.fabric(topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", "60"]);
    assert!(o.status.success(), "{}", out(&o));
}

/// On VyOS: SIGKILL after the commit-confirm, before fabric confirms it. The router's own
/// commit-confirm puts it back after its "minute"; nothing stays pending and plan shows the
/// change still to do.
fn vyos_killed_before_confirm(lab: &lab::Lab, run: &Run, topo: &Path, confirm: &str) {
    // Not the port: after a port change of sp, franca keeps sending to the port it last heard
    // sp from (WireGuard roaming) until sp's next packet (keepalive 25 s, longer than the
    // check's 20 s), which is not what this case is about.
    hand_edit(lab, Kind::Vyos, "sp-router", "", "set interfaces wireguard wg0 description 'hand edit'");
    let args = ["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm];
    let mut p = run::fabric_paused(&run.dir, topo, &run.ssh_config, &args, "applied", 60);
    assert!(p.wait_for_pause(Duration::from_secs(60)), "the run applied its changes");
    p.kill();
    let o = p.finish();
    std::thread::sleep(Duration::from_secs(17 + 5));
    let plan = run.fabric(topo, &["plan", "--step", "B.1", "--detailed-exitcode"]);
    assert_eq!(plan.status.code(), Some(2), "each router put itself back: {}\n{}", out(&o), out(&plan));
    assert_eq!(routers_in_plan(&out(&plan)), ["router.sp/"], "{}", out(&plan));
    // After the revert the peers may need a handshake or two before the check passes: a
    // timeout with room for that (120 s = 2 "minutes" = 30 s on the lab's double). With the
    // shortest one, the router can revert first, which fabric now reads (`No confirm pending`)
    // and reports as a revert; before issue #23 it took that answer for a confirmation.
    let o = run.fabric(topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", ROOMY]);
    assert!(o.status.success(), "nothing is left pending: {}", out(&o));
}

/// On VyOS, issue #24's item 4: an apply killed (SIGKILL) after both routers' commit-confirm,
/// and a new apply started at once, without `fabric lock release`. The dead run's locks ended
/// with its connections; each router's commit-confirm timer is still pending (VyOS keeps it as a
/// systemd timer, which the double plays), so the new run waits for it to fire and for the
/// router's revert, reads the routers again and applies the whole change. End state: both
/// routers fully at the new state, no lock, no pending commit-confirm, plan clean.
fn vyos_killed_then_applied_at_once(lab: &lab::Lab, run: &Run, topo: &Path, confirm: &str) {
    for router in ["franca-router", "sp-router"] {
        hand_edit(lab, Kind::Vyos, router, "", "set interfaces wireguard wg0 description 'hand edit'");
    }
    let args = ["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm];
    let mut p = run::fabric_paused(&run.dir, topo, &run.ssh_config, &args, "applied", 60);
    assert!(p.wait_for_pause(Duration::from_secs(60)), "the run applied its changes");
    for router in ["franca-router", "sp-router"] {
        assert!(lab.dir.join("hosts").join(router).join("vyos/confirm.pending").exists(), "{router}: not armed");
    }
    p.kill();
    let _ = p.finish();
    // After the revert the peers may need a handshake or two before the check passes: ROOMY.
    let o = run.fabric(topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", ROOMY]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains(
            "router.franca: waiting for another run's pending self-revert before changing it (VyOS commit-confirm"
        ),
        "the new run waited for the dead run's commit-confirm: {text}"
    );
    for router in ["franca-router", "sp-router"] {
        let shown = vyos_config(lab, router);
        assert!(!shown.contains("hand edit"), "{router} is not at the new state:\n{shown}");
        assert!(!lab.dir.join("hosts").join(router).join("vyos/confirm.pending").exists(), "{router}: timer left");
        assert_eq!(lock_of(lab, router), "", "{router}: lock left");
        let timer = lab.ssh(router, "systemctl show --value -p ActiveState commit-confirm.timer", "");
        assert_eq!(String::from_utf8_lossy(&timer.stdout).trim(), "inactive", "{router}");
    }
    let o = run.fabric(topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let o = run.fabric(topo, &["lock", "status"]);
    assert!(!out(&o).contains("pending self-revert") && !out(&o).contains("held by"), "{}", out(&o));
}

/// A confirm timeout with room for the handshakes after a revert (see `vyos_killed_before_confirm`).
const ROOMY: &str = "120";

/// The running configuration of a lab VyOS router, through the double.
fn vyos_config(lab: &lab::Lab, router: &str) -> String {
    let o = lab.ssh(router, "show configuration commands", "");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// On VyOS a failing line does not stop a `vbash -s` script: the valid rest is committed with
/// the router's timer armed, and the script exits 0. Fabric reads VyOS's error in the output,
/// fails the step and puts the router back at once; nothing is left pending.
fn vyos_a_line_refused(lab: &lab::Lab, run: &Run, topo: &Path, confirm: &str) {
    hand_edit(
        lab,
        Kind::Vyos,
        "sp-router",
        "",
        "set interfaces wireguard wg0 mtu '1400'\nset interfaces wireguard wg0 description 'hand edit'",
    );
    // The double's fault injection: `set ... mtu '1420'` (B.1's value) fails as a refused value.
    let state = lab.dir.join("hosts/sp-router/vyos");
    std::fs::write(state.join("reject_set"), "interfaces wireguard wg0 mtu 1420").unwrap();
    let o = run.fabric(topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm]);
    std::fs::remove_file(state.join("reject_set")).unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("VyOS said: Value validation failed"), "{}", out(&o));
    let shown = vyos_config(lab, "sp-router");
    assert!(shown.contains("set interfaces wireguard wg0 description 'hand edit'"), "not put back:\n{shown}");
    assert!(shown.contains("set interfaces wireguard wg0 mtu '1400'"), "not put back:\n{shown}");
    assert!(!state.join("confirm.pending").exists(), "the router's timer was left running");
    let o = run.fabric(topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", ROOMY]);
    assert!(o.status.success(), "{}", out(&o));
}

/// A confirmation that comes after the routers' timers fired: VyOS's `confirm` answers `No
/// confirm pending` with exit 0. Fabric reports the router as reverted (never as confirmed)
/// and puts the step back everywhere.
fn vyos_confirmed_too_late(lab: &lab::Lab, run: &Run, topo: &Path, confirm: &str) {
    for router in ["franca-router", "sp-router"] {
        hand_edit(lab, Kind::Vyos, router, "", "set interfaces wireguard wg0 description 'hand edit'");
    }
    // The run stops 35 s once both routers are changed: their 15 s pass before it confirms.
    let args = ["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm];
    let p = run::fabric_paused(&run.dir, topo, &run.ssh_config, &args, "applied", 35);
    assert!(p.wait_for_pause(Duration::from_secs(90)), "the run applied its changes");
    let o = p.finish();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    // Routers are confirmed in name order: franca is the first to answer `No confirm pending`.
    assert!(out(&o).contains("router.franca had already reverted by itself"), "{}", out(&o));
    assert!(out(&o).contains("failed and was reverted"), "{}", out(&o));
    for router in ["franca-router", "sp-router"] {
        let shown = vyos_config(lab, router);
        assert!(shown.contains("description 'hand edit'"), "{router} not put back:\n{shown}");
        assert!(!lab.dir.join("hosts").join(router).join("vyos/confirm.pending").exists(), "{router}: timer left");
    }
    let o = run.fabric(topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", ROOMY]);
    assert!(o.status.success(), "{}", out(&o));
}

/// Changes a router by hand, as an operator would.
fn hand_edit(lab: &lab::Lab, kind: Kind, router: &str, linux_sed: &str, vyos_cmds: &str) {
    match kind {
        Kind::Linux => {
            assert!(lab.exec(router, &format!("sed -i '{linux_sed}' /etc/wireguard/wg0.conf")).status.success())
        }
        Kind::Vyos => {
            let script = format!(
                "source /opt/vyatta/etc/functions/script-template\nconfigure\n{vyos_cmds}\ncommit\nsave\nexit\n"
            );
            let o = lab.ssh(router, "vbash -s", &script);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
        }
    }
}

fn b1(lab: &lab::Lab, kind: Kind, topology: &str) {
    let name = if kind == Kind::Linux { "linux" } else { "vyos" };
    let run = Run::new(lab, name);
    let topo = run.topology(topology);
    let confirm = "15";

    // 1. The tunnel does not exist: the LANs cannot reach each other.
    assert!(!lab.ping("franca-lan", "172.30.2.10"), "the LANs are connected before any apply");
    if kind == Kind::Linux {
        // sp's router does not forward yet: B.1 turns it on, and rolling B.1 back turns it off.
        lab.exec("sp-router", "sysctl -qw net.ipv4.ip_forward=0");
    }

    // Without --auto-approve, apply shows the plan and accepts only `yes` (at a terminal: a pty
    // from `script`). Anything else changes nothing.
    if kind == Kind::Linux {
        for answer in ["no", "y"] {
            let cmd = format!(
                "{} -f {} --ssh-config {} apply --step B.1",
                env!("CARGO_BIN_EXE_fabric"),
                topo.display(),
                run.ssh_config.display()
            );
            let mut child = std::process::Command::new("script")
                .args(["-qec", &cmd, "/dev/null"])
                .current_dir(&run.dir)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child.stdin.take().unwrap().write_all(format!("{answer}\n").as_bytes()).unwrap();
            let o = child.wait_with_output().unwrap();
            let text = out(&o);
            assert_eq!(o.status.code(), Some(1), "{text}");
            assert!(
                text.contains("Only 'yes' will be accepted to approve.") && text.contains("Apply cancelled."),
                "{text}"
            );
        }
        let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
        assert_eq!(o.status.code(), Some(2), "a refused apply changed something");
    }

    // 2. Apply B.1 builds the tunnel; the LAN hosts ping each other through it.
    let o = run.fabric(&topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        out(&o).contains(
            "check passed: host.franca-lan → 172.30.2.10 ok (1420-byte packets, don't fragment), \
             host.sp-lan → 172.30.1.10 ok (1420-byte packets, don't fragment)"
        ),
        "{}",
        out(&o)
    );
    assert!(lab.ping("franca-lan", "172.30.2.10"), "no ping across the tunnel");
    assert!(lab.ping("sp-lan", "172.30.1.10"));

    // verify: LAN to LAN through the tunnel, with the evidence; a cut WAN link fails it.
    let o = run.fabric(&topo, &["verify", "--step", "B.1"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        out(&o).contains("PASS  B.1          LAN to LAN through the tunnel: host.franca-lan → 172.30.2.10 ok"),
        "{}",
        out(&o)
    );
    assert!(lab.cmd(&["cut", "sp"]).status.success());
    let o = run.fabric(&topo, &["verify", "--step", "B.1"]);
    assert!(lab.cmd(&["restore", "sp"]).status.success());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("FAIL  B.1") && out(&o).contains("cannot reach sp"), "{}", out(&o));
    assert!(lab.ping_within("franca-lan", "172.30.2.10", 35));

    // 3. A second plan has nothing to do.
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(out(&o).contains("Plan: 0 to create, 0 to update, 0 to delete."), "{}", out(&o));

    // The private key never left the router and never appears in output or journal.
    let key = match kind {
        Kind::Linux => {
            let mode = lab.exec("sp-router", "stat -c %a /etc/wireguard/wg0.key");
            assert_eq!(String::from_utf8_lossy(&mode.stdout).trim(), "600");
            String::from_utf8_lossy(&lab.exec("sp-router", "cat /etc/wireguard/wg0.key").stdout).trim().to_string()
        }
        Kind::Vyos => {
            let o = lab.ssh("sp-router", "show configuration commands", "");
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            let line = text
                .lines()
                .find(|l| l.contains(" private-key "))
                .expect("VyOS keeps its private key in its config")
                .to_string();
            line.rsplit(' ').next().unwrap().trim_matches('\'').to_string()
        }
    };
    assert_eq!(key.len(), 44, "a WireGuard private key exists on the router");
    let journal: String = std::fs::read_dir(run.dir.join(".fabric/runs"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(!journal.contains(&key) && !out(&o).contains(&key), "the private key leaked");

    // 4. The confirmation cancelled the routers' own revert: after the timeout the tunnel stays.
    // (Checked at the end, once 30 s have passed.)
    let applied_at = Instant::now();

    // 5. A change by hand shows as drift, and apply repairs it.
    hand_edit(
        lab,
        kind,
        "sp-router",
        "s/^ListenPort = 51820/ListenPort = 51999/",
        "set interfaces wireguard wg0 port '51999'",
    );
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    let text = out(&o);
    let (gone, want) = match kind {
        Kind::Linux => ("~ router.sp/wireguard:wg0", ("-ListenPort = 51999", "+ListenPort = 51820")),
        Kind::Vyos => (
            "~ router.sp/vyos:interfaces wireguard wg0",
            ("-set interfaces wireguard wg0 port '51999'", "+set interfaces wireguard wg0 port '51820'"),
        ),
    };
    assert!(text.contains(gone), "{text}");
    assert!(text.contains(want.0) && text.contains(want.1), "{text}");
    // A plan file goes stale when the state changes under it.
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--out", "b1.plan"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    hand_edit(lab, kind, "franca-router", "$a # hand edit", "set interfaces wireguard wg0 description 'hand edit'");
    let o = run.fabric(&topo, &["apply", "b1.plan", "--auto-approve"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(out(&o).contains("the plan is stale"), "{}", out(&o));
    // A fresh plan file applies.
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--out", "b1.plan", "-q"]);
    assert!(o.status.success(), "{}", out(&o));
    let o = run.fabric(&topo, &["apply", "b1.plan", "--auto-approve", "--confirm-timeout", confirm]);
    assert!(o.status.success(), "{}", out(&o));
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(lab.ping("franca-lan", "172.30.2.10"));

    // 6. A second apply while one holds the lock is refused, naming the holder (Linux: the lock
    // file; VyOS: the router's own pending commit-confirm).
    match kind {
        Kind::Linux => {
            hold_lock_as(lab, "sp-router", "fabric run other by ops@laptop (pid 1)");
            hand_edit(lab, kind, "sp-router", "s/^ListenPort = 51820/ListenPort = 51998/", "");
            // The plan says who holds the lock before anyone tries to apply.
            let o = run.fabric(&topo, &["plan", "--step", "B.1"]);
            assert!(out(&o).contains("locked: router.sp: fabric run other by ops@laptop (pid 1)"), "{}", out(&o));
            let o = run.fabric(&topo, &["apply", "--step", "B.1", "--auto-approve"]);
            assert_eq!(o.status.code(), Some(1));
            assert!(
                out(&o).contains("router.sp is locked by another apply: fabric run other by ops@laptop (pid 1)"),
                "{}",
                out(&o)
            );
            // `fabric lock` sees it, leaves a live holder's lock alone, and breaks it with --force.
            let o = run.fabric(&topo, &["lock", "status"]);
            assert!(out(&o).contains("router.sp: held by fabric run other by ops@laptop (pid 1)"), "{}", out(&o));
            assert!(out(&o).contains("router.franca: free"), "{}", out(&o));
            let o = run.fabric(&topo, &["lock", "release"]);
            assert!(out(&o).contains("No lock to release"), "{}", out(&o));
            let o = run.fabric(&topo, &["lock", "release", "--force"]);
            assert!(out(&o).contains("released router.sp: fabric run other by ops@laptop (pid 1)"), "{}", out(&o));
            let held = lab.exec("sp-router", "cat /run/lock/fabric.lock 2>/dev/null; true");
            assert!(String::from_utf8_lossy(&held.stdout).trim().is_empty(), "broken");
            // A lock whose holder died on this machine is stale: plain `release` removes it.
            let here = std::fs::read_to_string("/etc/hostname").unwrap().trim().to_string();
            let dead = format!("fabric run x by ops@{here} (pid 4194303, since 1)");
            hold_lock_as(lab, "sp-router", &dead);
            let o = run.fabric(&topo, &["lock", "status"]);
            assert!(out(&o).contains("(stale: its process 4194303"), "{}", out(&o));
            let o = run.fabric(&topo, &["lock", "release"]);
            assert!(out(&o).contains(&format!("released router.sp: {dead}")), "{}", out(&o));
            assert_eq!(lock_of(lab, "sp-router"), "", "broken: {}", out(&o));
            a_lock_waited_for(lab, &run, &topo, confirm);
        }
        Kind::Vyos => {
            // The plan reads the routers' locks with a plain shell command, which VyOS's login
            // shell runs (`/bin/vbash -c`; crates/testkit/src/vyos_double.md): no lock, no error.
            let o = run.fabric(&topo, &["plan", "--step", "B.1"]);
            assert!(!out(&o).contains("locked:") && !out(&o).contains("unsupported command"), "{}", out(&o));
            // Someone else's commit-confirm is pending on sp-router (by hand, no fabric run).
            let script = "source /opt/vyatta/etc/functions/script-template\nconfigure\nset interfaces wireguard wg0 port '51998'\ncommit-confirm 1 <<< y\nexit\n";
            assert!(lab.ssh("sp-router", "vbash -s", script).status.success());
            // plan and `fabric lock status` see it, as VyOS's systemd shows it.
            let o = run.fabric(&topo, &["plan", "--step", "B.1"]);
            assert!(
                out(&o).contains("pending self-revert: router.sp: VyOS commit-confirm (commit-confirm.timer active)"),
                "{}",
                out(&o)
            );
            let o = run.fabric(&topo, &["lock", "status"]);
            assert!(out(&o).contains("VyOS commit-confirm (commit-confirm.timer active)"), "{}", out(&o));
            // apply waits for it to fire (it never confirms another's commit), reads sp again,
            // and finds it back at its saved configuration: nothing left to change there.
            let o = run.fabric(&topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm]);
            assert!(o.status.success(), "{}", out(&o));
            assert!(
                out(&o).contains(
                    "router.sp: waiting for another run's pending self-revert before changing it (VyOS commit-confirm"
                ),
                "{}",
                out(&o)
            );
            assert!(!vyos_config(lab, "sp-router").contains("51998"), "the other commit was not confirmed");
        }
    }
    let o = run.fabric(&topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm]);
    assert!(o.status.success(), "{}", out(&o));

    // 6b. Faults (Linux): two applies at once, and one killed mid-way. Once the confirm timeout
    // has passed, every router is fully at one state, no lock remains, and plan tells the truth.
    if kind == Kind::Linux {
        two_applies_at_once(lab, &run, &topo);
        read_only_state_dir(lab, &run, &topo);
        killed_before_arming(lab, &run, &topo);
        interrupted_before_changing(lab, &run, &topo);
        an_apply_killed_mid_way(lab, &run, &topo, confirm);
        killed_during_confirm(lab, &run, &topo, confirm);
        a_peer_lost_mid_apply(lab, &run, &topo, confirm);
    } else {
        vyos_killed_before_confirm(lab, &run, &topo, confirm);
        vyos_killed_then_applied_at_once(lab, &run, &topo, confirm);
        vyos_a_line_refused(lab, &run, &topo, confirm);
        vyos_confirmed_too_late(lab, &run, &topo, confirm);
    }
    wan_cut_mid_apply(lab, kind, &run, &topo, confirm);

    // 7. With one site cut off, plan names it within 10 s and still plans the other site.
    let o = lab.cmd(&["cut-mgmt", "sp-router"]);
    assert!(o.status.success());
    let t = Instant::now();
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--show-unchanged"]);
    let took = t.elapsed();
    lab.cmd(&["restore-mgmt", "sp-router"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(3), "a plan with an unreadable target is partial: {text}");
    assert!(
        text.contains("unreachable: router.sp: cannot connect to")
            || text.contains("unreachable: router.sp: no answer from"),
        "{text}"
    );
    assert!(took < Duration::from_secs(10), "plan took {took:?}");
    assert!(text.contains("  ? unknown: router.sp unreachable ("), "{text}");
    assert!(text.contains("    router.franca/"), "the other site is still planned: {text}");
    // Apply of the reachable site alone works during the partition.
    let o = lab.cmd(&["cut-mgmt", "sp-router"]);
    assert!(o.status.success());
    let o = run
        .fabric(&topo, &["apply", "--step", "B.1", "--site", "franca", "--auto-approve", "--confirm-timeout", confirm]);
    lab.cmd(&["restore-mgmt", "sp-router"]);
    assert!(o.status.success(), "{}", out(&o));

    // 4 (continued). Well past the confirm timeout, the confirmed tunnel is still there.
    let wait = Duration::from_secs(17).saturating_sub(applied_at.elapsed());
    std::thread::sleep(wait);
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
    assert_eq!(o.status.code(), Some(0), "a confirmed change was reverted: {}", out(&o));
    // (A router that restarted its WireGuard may need one rekey before traffic flows again.)
    assert!(lab.ping_within("franca-lan", "172.30.2.10", 35), "no traffic through the confirmed tunnel");

    // 8. A change that cuts the management path reverts by itself within the confirm timeout.
    // Giving franca a "LAN" that is the root end of sp-router's management link makes sp-router
    // route its management replies into the tunnel.
    let mgmt = lab.mgmt_ip("sp-router");
    let root_end =
        format!("{}.{}", mgmt.rsplit_once('.').unwrap().0, mgmt.rsplit('.').next().unwrap().parse::<u8>().unwrap() - 1);
    let cut = topology
        .replace("lan: 172.30.1.0/24", &format!("lan: {root_end}/32"))
        .replace("api_address: 172.30.1.10", &format!("api_address: {root_end}"))
        .replace(
            "name: franca-lan, role: control-plane, address: 172.30.1.10",
            &format!("name: franca-lan, role: control-plane, address: {root_end}"),
        );
    let cut_topo = run.dir.join("cut.yaml");
    std::fs::write(&cut_topo, cut).unwrap();
    let t = Instant::now();
    let o = run.fabric(&cut_topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", "15"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let text = out(&o);
    assert!(text.contains("router.sp"), "{text}");
    // Within the timeout (plus margin) the router is back: plan with the original topology
    // shows it as it was.
    let mut back = false;
    while t.elapsed() < Duration::from_secs(45) {
        let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
        if o.status.code() == Some(0) {
            back = true;
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    assert!(back, "router.sp did not revert by itself within the confirm timeout");
    assert!(lab.ping_within("franca-lan", "172.30.2.10", 10), "the reverted tunnel carries traffic again");

    // 8b. A router that answers its public key with more than a key (as a compromised one
    // might) is never trusted: plan names it unreadable, apply changes nothing anywhere, and no
    // peer's configuration ever holds the answer (issue "Safe under hostile input", item 2).
    if kind == Kind::Vyos {
        let hostile = lab.dir.join("hosts/sp-router/vyos/hostile_public_key");
        let key = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
        std::fs::write(&hostile, format!("{key}\n[Interface]\nPostUp = touch /tmp/pwned-by-sp\n")).unwrap();
        // Partial (3): the router's answer is unread, not a change (issue 36's exit codes).
        let o = run.fabric(&topo, &["plan", "--step", "B.1"]);
        assert_eq!(o.status.code(), Some(3), "{}", out(&o));
        assert!(out(&o).contains("answered with something that is not its public key"), "{}", out(&o));
        let o = run.fabric(&topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm]);
        assert_eq!(o.status.code(), Some(1), "{}", out(&o));
        let franca = lab.ssh(
            "franca-router",
            "vbash -s",
            "source /opt/vyatta/etc/functions/script-template\nrun show configuration commands\n",
        );
        let config = String::from_utf8_lossy(&franca.stdout);
        assert!(!config.contains("PostUp") && !config.contains("pwned"), "{config}");
        std::fs::remove_file(&hostile).unwrap();
        let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
        assert_eq!(o.status.code(), Some(0), "once it answers with its key again, nothing changed: {}", out(&o));
    }

    // 9. `fabric rollback` puts back what the newest run changed.
    let moved = topology.replace(
        "wireguard: { address: 10.0.0.2/30, listen_port: 51820 }",
        "wireguard: { address: 10.0.0.2/30, listen_port: 51821 }",
    );
    let moved_topo = run.dir.join("moved.yaml");
    std::fs::write(&moved_topo, moved).unwrap();
    let o = run.fabric(&moved_topo, &["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm]);
    assert!(o.status.success(), "{}", out(&o));
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
    assert_eq!(o.status.code(), Some(2), "the moved port shows against the original topology");
    if kind == Kind::Linux {
        // A rollback takes the routers' locks like an apply: while another holds one, it is
        // refused naming the holder, and changes nothing.
        hold_lock_as(lab, "sp-router", "fabric run other by ops@laptop (pid 1)");
        let o = run.fabric(&topo, &["rollback"]);
        assert_eq!(o.status.code(), Some(1), "{}", out(&o));
        assert!(
            out(&o).contains("router.sp is locked by another apply: fabric run other by ops@laptop (pid 1)"),
            "{}",
            out(&o)
        );
        let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
        assert_eq!(o.status.code(), Some(2), "a refused rollback changed nothing");
        // The lab has no cluster (its kubeconfigs are /nonexistent): their Leases are unknown,
        // so the release is partial (3); the routers' locks are released.
        let o = run.fabric(&topo, &["lock", "release", "--force"]);
        assert_eq!(o.status.code(), Some(3), "{}", out(&o));
        assert!(out(&o).contains("target(s) could not be read: their locks are unknown"), "{}", out(&o));
    }
    let o = run.fabric(&topo, &["rollback"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(out(&o).contains("Rolled back run"), "{}", out(&o));
    if kind == Kind::Linux {
        let held = lab.exec("sp-router", "cat /run/lock/fabric.lock 2>/dev/null; true");
        let held = String::from_utf8_lossy(&held.stdout);
        assert!(held.trim().is_empty(), "the rollback released its lock: {held}");
    }
    let o = run.fabric(&topo, &["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
    assert_eq!(o.status.code(), Some(0), "after rollback the routers are as before: {}", out(&o));
    assert!(lab.ping_within("franca-lan", "172.30.2.10", 35));

    // 10. Rolling back the run that made the tunnel removes it, and turns forwarding back off
    // where it was off before (item 9: the prior value is restored, not left at 1).
    if kind == Kind::Linux {
        let forward =
            |r: &str| String::from_utf8_lossy(&lab.exec(r, "sysctl -n net.ipv4.ip_forward").stdout).trim().to_string();
        assert_eq!(forward("sp-router"), "1");
        let mut runs: Vec<String> = std::fs::read_dir(run.dir.join(".fabric/runs"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".jsonl").map(String::from))
            .collect();
        runs.sort();
        let first = runs.iter().find(|r| {
            std::fs::read_to_string(run.dir.join(format!(".fabric/runs/{r}.jsonl")))
                .unwrap()
                .contains("command:ip-forward")
        });
        let first = first.expect("a run turned forwarding on").clone();
        let o = run.fabric(&topo, &["rollback", &first]);
        assert!(o.status.success(), "{}", out(&o));
        assert_eq!(forward("sp-router"), "0", "forwarding is back off on sp");
        assert_eq!(forward("franca-router"), "1", "franca forwarded before: it still does");
        assert!(!lab.ping("franca-lan", "172.30.2.10"), "the tunnel is gone");
    }
    std::fs::remove_dir_all(&run.dir).unwrap();
}
