//! `fabric rotate wireguard` end to end on the two-site lab (issue #26, item 3): real sshd, real
//! WireGuard (wireguard-go), pings across the tunnel. The same scenario runs with Linux routers
//! and with VyOS routers (the VyOS test double behind the routers' sshd): B.1 applied, then a
//! rotation of both ends, one of one site, and one whose check fails because a peer is cut by an
//! cut WAN link, after which both ends are back on their old keys. Needs root.

use fabric_testkit::{lab, run};

use run::out;

use std::path::Path;
use std::time::{Duration, Instant};

const LINUX: &str = include_str!("data/lab-linux.yaml");
const VYOS: &str = include_str!("data/lab-vyos.yaml");

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Linux,
    Vyos,
}

const ROUTERS: [&str; 2] = ["franca-router", "sp-router"];

#[test]
fn rotate_on_linux_routers() {
    let lab = lab::Lab::up("rw", "10.246", &[], &[]);
    rotate(&lab, Kind::Linux, LINUX);
}

#[test]
fn rotate_on_vyos_routers() {
    // One commit-confirm "minute" lasts 15 s in the lab.
    let lab = lab::Lab::up_vyos("rv", "10.239", 15);
    rotate(&lab, Kind::Vyos, VYOS);
    // Every command fabric sent passed VyOS's interface definitions and the double's model of
    // its scripts (nothing stopped a script: no `vyos_double:` refusal).
    for router in ROUTERS {
        let log =
            std::fs::read_to_string(lab.dir.join("hosts").join(router).join("vyos/double.log")).unwrap_or_default();
        assert!(!log.contains("is not valid"), "{router} refused a command:\n{log}");
    }
}

/// The public key a router's interface runs with now (read in its namespace, past sshd).
fn running_key(lab: &lab::Lab, router: &str) -> String {
    let o = lab.exec(router, "wg show wg0 public-key");
    assert!(o.status.success(), "{router}: {}", out(&o));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The public keys of a router's running peers.
fn running_peers(lab: &lab::Lab, router: &str) -> String {
    String::from_utf8_lossy(&lab.exec(router, "wg show wg0 peers").stdout).trim().to_string()
}

/// Both routers' running keys, and each one's peer is the other's key.
fn keys(lab: &lab::Lab) -> (String, String) {
    let (f, s) = (running_key(lab, "franca-router"), running_key(lab, "sp-router"));
    assert_eq!(running_peers(lab, "franca-router"), s, "franca's peer is sp's key");
    assert_eq!(running_peers(lab, "sp-router"), f, "sp's peer is franca's key");
    (f, s)
}

/// A router's private key, to prove it never left it.
fn private_key(lab: &lab::Lab, kind: Kind, router: &str) -> String {
    match kind {
        Kind::Linux => String::from_utf8_lossy(&lab.exec(router, "cat /etc/wireguard/wg0.key").stdout).trim().into(),
        Kind::Vyos => {
            let o = lab.ssh(router, "show configuration commands", "");
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            let line = text.lines().find(|l| l.contains(" private-key ")).expect("a private-key line").to_string();
            line.rsplit(' ').next().unwrap().trim_matches('\'').to_string()
        }
    }
}

/// What a run left on a router: a lock, a pending self-revert, a saved or next key.
fn leftovers(lab: &lab::Lab, router: &str) -> String {
    let o = lab.exec(
        router,
        "cat /run/lock/fabric.lock 2>/dev/null; ls /run/fabric-confirm-* 2>/dev/null | grep -v '[.]log$'; \
         ls -d /etc/wireguard/*.fabric-prev /etc/wireguard/.fabric-rotate 2>/dev/null; true",
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn journals(dir: &Path) -> String {
    std::fs::read_dir(dir.join(".fabric/runs"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .collect::<Vec<_>>()
        .join("\n")
}

fn rotate(lab: &lab::Lab, kind: Kind, topology: &str) {
    let dir = std::env::temp_dir().join(format!("fabric-rotate-{kind:?}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("topology.yaml");
    std::fs::write(&topo, topology).unwrap();
    let ssh = lab.ssh_config();
    let fabric = |args: &[&str]| run::fabric_in(&dir, &topo, &ssh, args);
    let plan_clean = || {
        let o = fabric(&["plan", "--step", "B.1", "--detailed-exitcode", "-q"]);
        assert_eq!(o.status.code(), Some(0), "plan shows drift: {}", out(&o));
    };
    let confirm = "30";

    // Before B.1 there is nothing to rotate: refused, naming what to do.
    let o = fabric(&["rotate", "wireguard", "--auto-approve"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("apply B.1 first"), "{}", out(&o));

    let o = fabric(&["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", confirm]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(lab.ping_within("franca-lan", "172.30.2.10", 20));
    let (f0, s0) = keys(lab);

    // 1. Both ends rotated: new keys on both, the tunnel passes traffic, plan is clean, no lock
    // or saved key left, the loss window printed, no private key in the output or the journal.
    let o = fabric(&["rotate", "wireguard", "--auto-approve", "--confirm-timeout", confirm]);
    assert!(o.status.success(), "{}", out(&o));
    let text = out(&o);
    let (f1, s1) = keys(lab);
    assert!(f1 != f0 && s1 != s0, "both keys changed: {f0} {s0} → {f1} {s1}");
    assert!(text.contains(&format!("router.franca: public key {f0} → {f1}")), "{text}");
    assert!(text.contains(&format!("router.sp: public key {s0} → {s1}")), "{text}");
    let window = text.lines().find(|l| l.starts_with("tunnel down for ~")).unwrap_or_else(|| panic!("{text}"));
    eprintln!("{kind:?}, both ends: {window}");
    assert!(text.contains("Rotation complete: 2 router key(s) renewed"), "{text}");
    assert!(lab.ping("franca-lan", "172.30.2.10"), "no traffic through the new keys");
    plan_clean();
    for r in ROUTERS {
        assert_eq!(leftovers(lab, r), "", "{r}: {text}");
        let private = private_key(lab, kind, r);
        assert!(!text.contains(&private) && !journals(&dir).contains(&private), "{r}'s private key was shown");
    }
    let journal = journals(&dir);
    assert!(journal.contains(&format!("\"new_public_key\":\"{f1}\"")), "{journal}");

    // 2. `--site sp`: only sp's key changes; franca learns it.
    let o = fabric(&["rotate", "wireguard", "--site", "sp", "--auto-approve", "--confirm-timeout", confirm]);
    assert!(o.status.success(), "{}", out(&o));
    let (f2, s2) = keys(lab);
    assert_eq!(f2, f1, "franca kept its key");
    assert_ne!(s2, s1, "sp's key changed");
    assert!(out(&o).contains("Rotation complete: 1 router key(s) renewed"), "{}", out(&o));
    assert!(lab.ping("franca-lan", "172.30.2.10"));
    plan_clean();

    // 3. The check fails (sp's WAN link cut: the lab's nftables drop in its "internet"): both
    // ends go back to the old keys (Linux at once; VyOS when its commit-confirm timer fires),
    // nothing is left. (A drop on the router itself would be B.1 drift: its rules must be in
    // every input chain.)
    assert!(lab.cmd(&["cut", "sp"]).status.success());
    let t = Instant::now();
    let o = fabric(&["rotate", "wireguard", "--auto-approve", "--confirm-timeout", confirm]);
    assert!(lab.cmd(&["restore", "sp"]).status.success());
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("check failed") && out(&o).contains("failed and was reverted"), "{}", out(&o));
    if kind == Kind::Vyos {
        assert!(out(&o).contains("by itself when its commit-confirm timer fires"), "{}", out(&o));
        // Two lab minutes from the commit, plus the revert's realization.
        let deadline = Duration::from_secs(confirm.parse::<u64>().unwrap() + 20);
        while t.elapsed() < deadline && (running_key(lab, "sp-router") != s2 || running_key(lab, "franca-router") != f2)
        {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    assert_eq!(keys(lab), (f2, s2), "both ends are back on their old keys: {}", out(&o));
    assert!(lab.ping_within("franca-lan", "172.30.2.10", 20), "the old keys carry traffic again");
    plan_clean();
    for r in ROUTERS {
        assert_eq!(leftovers(lab, r), "", "{r}: {}", out(&o));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
