//! Issue 24, items 1 and 2, on the two-site lab (real sshd, real WireGuard, Linux routers):
//! sshd restarted during a read and during an apply, WAN packet loss and short flaps (nftables
//! drop rules toggled in the lab's `wan` namespace; there is no netem here), and a cut site still
//! named at once. Each case asserts the end state: every router fully at the new state or fully
//! back, what fabric reported matching it, no lock left. Needs root (network namespaces).

use fabric_testkit::{lab, run};

use run::out;

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

const LINUX: &str = include_str!("data/lab-linux.yaml");

struct Run {
    dir: PathBuf,
    ssh_config: PathBuf,
    topology: PathBuf,
}

impl Run {
    fn fabric(&self, args: &[&str]) -> Output {
        run::fabric_in(&self.dir, &self.topology, &self.ssh_config, args)
    }

    /// `plan --step B.1 --detailed-exitcode`: 0 at the desired state, 2 with changes to make.
    fn plan(&self) -> Output {
        self.fabric(&["plan", "--step", "B.1", "--detailed-exitcode", "-v"])
    }
}

const CONFIRM: &str = "15";

fn apply_args() -> Vec<&'static str> {
    vec!["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", CONFIRM, "-v"]
}

/// What a run left on a router: a lock, or a pending self-revert.
fn leftovers(lab: &lab::Lab, router: &str) -> String {
    let o = lab.exec(
        router,
        "cat /run/lock/fabric.lock 2>/dev/null; ls /run/fabric-confirm-* 2>/dev/null | grep -v '[.]log$'; true",
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Changes sp's listen port by hand, so that B.1 has a change to make there.
fn drift(lab: &lab::Lab, port: u16) {
    let sed = format!("sed -i 's/^ListenPort = .*/ListenPort = {port}/' /etc/wireguard/wg0.conf");
    assert!(lab.exec("sp-router", &sed).status.success());
}

/// The end state after an apply that reported `o`: at the new state if it said so, else back
/// as it was (the drift still to undo); no lock or pending self-revert on either router.
fn assert_end_state(lab: &lab::Lab, run: &Run, o: &Output) {
    let reported_ok = o.status.success();
    eprintln!("reconnect_lab: the apply reported {}", if reported_ok { "success" } else { "a failure" });
    if !reported_ok {
        // A router that was not confirmed puts itself back when its timer fires.
        std::thread::sleep(Duration::from_secs(CONFIRM.parse::<u64>().unwrap() + 8));
    }
    let plan = run.plan();
    if reported_ok {
        assert_eq!(plan.status.code(), Some(0), "reported applied, so it is: {}\n{}", out(o), out(&plan));
        assert!(out(o).contains("Apply complete"), "{}", out(o));
    } else {
        assert_eq!(plan.status.code(), Some(2), "reported failed, so it is back: {}\n{}", out(o), out(&plan));
        assert!(!out(o).contains("Apply complete"), "{}", out(o));
    }
    for r in ["sp-router", "franca-router"] {
        assert_eq!(leftovers(lab, r), "", "{r}: {}", out(o));
    }
}

/// The `wan` namespace's nftables table that drops what crosses between the sites.
fn wan_drop(lab: &lab::Lab, rule: &str) {
    let script = format!(
        "nft delete table inet retrylab 2>/dev/null; nft -f - <<'EOF'\ntable inet retrylab {{\n  chain forward {{\n    type filter hook forward priority 0; policy accept;\n    {rule}\n  }}\n}}\nEOF"
    );
    let o = lab.exec("wan", &script);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn wan_clear(lab: &lab::Lab) {
    lab.exec("wan", "nft delete table inet retrylab 2>/dev/null; true");
}

#[test]
fn sshd_restarts_packet_loss_and_flaps() {
    let lab = std::sync::Arc::new(lab::Lab::up("rc", "10.240", &[], &[]));
    let dir = std::env::temp_dir().join(format!("fabric-reconnect-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let topology = dir.join("topology.yaml");
    std::fs::write(&topology, LINUX).unwrap();
    let run = Run { dir: dir.clone(), ssh_config: lab.ssh_config(), topology };

    // The tunnel, applied on a healthy lab.
    let o = run.fabric(&apply_args());
    assert!(o.status.success(), "{}", out(&o));

    // 1. sshd restarted during a read: the plan's connect meets a closed port, tries again
    //    (one line per retry under -v) and reads the router once sshd is back.
    drift(&lab, 51990);
    let restart = std::thread::spawn({
        let lab = lab.clone();
        move || lab.restart_sshd("sp-router", 1)
    });
    // The plan starts once the old sshd refuses connections (its new one comes a second later).
    lab.wait_until_sshd_down("sp-router");
    let plan = run.plan();
    assert!(restart.join().unwrap().status.success());
    assert_eq!(plan.status.code(), Some(2), "the drift is read, not an unreachable router: {}", out(&plan));
    assert!(out(&plan).contains("fabric: retry: router.sp: connect: attempt 1/5 failed"), "{}", out(&plan));

    // 2. sshd restarted during an apply, after the hosts are locked: the pooled session is
    //    dead; the next use connects anew (same host key) and the step goes through.
    let p = run::fabric_paused(&run.dir, &run.topology, &run.ssh_config, &apply_args(), "locked", 4);
    assert!(p.wait_for_pause(Duration::from_secs(60)), "the run locked its hosts");
    assert!(lab.restart_sshd("sp-router", 1).status.success());
    let o = p.finish();
    assert_end_state(&lab, &run, &o);
    assert!(o.status.success(), "a restarted sshd does not fail the step: {}", out(&o));

    // 3. ... and after the changes are made, before they are checked and confirmed: the confirm's
    //    fresh connection and the unlock go through the restarted sshd.
    drift(&lab, 51991);
    let p = run::fabric_paused(&run.dir, &run.topology, &run.ssh_config, &apply_args(), "applied", 3);
    assert!(p.wait_for_pause(Duration::from_secs(60)), "the run applied its changes");
    assert!(lab.restart_sshd("sp-router", 1).status.success());
    let o = p.finish();
    assert_end_state(&lab, &run, &o);
    if !o.status.success() {
        let o = run.fabric(&apply_args());
        assert!(o.status.success(), "{}", out(&o));
    }

    // 4. WAN packet loss: a third of what crosses the WAN is dropped during the whole apply.
    drift(&lab, 51992);
    wan_drop(&lab, "numgen random mod 3 0 drop");
    let o = run.fabric(&apply_args());
    wan_clear(&lab);
    assert_end_state(&lab, &run, &o);
    if !o.status.success() {
        let o = run.fabric(&apply_args());
        assert!(o.status.success(), "{}", out(&o));
    }

    // 5. Short flaps: the WAN drops everything for 2 s, three times, while the step runs.
    drift(&lab, 51993);
    let flaps = std::thread::spawn({
        let lab = lab.clone();
        move || {
            for _ in 0..3 {
                std::thread::sleep(Duration::from_millis(700));
                wan_drop(&lab, "drop");
                std::thread::sleep(Duration::from_secs(2));
                wan_clear(&lab);
            }
        }
    });
    let o = run.fabric(&apply_args());
    flaps.join().unwrap();
    wan_clear(&lab);
    assert_end_state(&lab, &run, &o);

    // 6. A cut site is still named at once: a connect that times out is not retried.
    assert!(lab.cmd(&["cut-mgmt", "sp-router"]).status.success());
    let plan = run.plan();
    assert!(lab.cmd(&["restore-mgmt", "sp-router"]).status.success());
    let text = out(&plan);
    // (In the lab a cut link answers `No route to host` after the neighbour lookup gives up, or
    // nothing until the connect timeout: either way it is not retried.)
    assert!(text.contains("unreachable: router.sp: "), "{text}");
    assert!(!text.contains("retry: router.sp"), "a cut link is not retried: {text}");

    assert!(lab.cmd(&["down"]).status.success());
    std::fs::remove_dir_all(&dir).unwrap();
}
