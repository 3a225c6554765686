//! `sudo FABRIC_LAB_SLOT=N cargo bench --profile dist --bench apply_lab`: `fabric apply --step
//! B.1` on the two-router lab with WAN latency, its timeline by phase (`apply -v`), beside the
//! apply's floor (issue #25).
//!
//! Every SSH connection goes through the userspace delay proxy (25 ms each way, see
//! `fabric_testkit::wan_proxy`). The floor is: per router and both routers at once, one connect
//! and read (what B.1 reads of a router); the change itself, the wg-quick file fabric wrote and
//! `wg-quick up`, one router after the other as WireGuard needs (`fabric::apply::tunnel_ends`:
//! two ends started together cross their handshakes); the check's own pings (B.1's check phase
//! as fabric's timeline reports it: the pings are the check); and the confirm over a fresh
//! connection (a second connect and one command, by design). Each run is rolled back (`fabric
//! rollback`) before the next. Prints the figures and the ratio; asserts nothing.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use fabric::transport::shell::Sh;
use fabric::transport::ssh::{Endpoint, Session};
use fabric_testkit::lab;
use fabric_testkit::wan_proxy::{ROUTER_READS, behind_delay, median};

const DELAY: Duration = Duration::from_millis(25);
const RUNS: usize = 3;

/// The phases of `fabric apply -v`'s timeline (`fabric: apply timeline:` then `<phase>: <ms> ms`).
fn timeline(stderr: &str) -> Vec<(String, f64)> {
    stderr
        .lines()
        .skip_while(|l| !l.ends_with("apply timeline:"))
        .skip(1)
        .filter_map(|l| {
            let (name, ms) = l.trim_start_matches("fabric:").trim().rsplit_once(": ")?;
            Some((name.to_string(), ms.trim_end_matches(" ms").parse().ok()?))
        })
        .collect()
}

/// Each router's connect and read, both at once: the sessions, for the change.
async fn connect_and_read(endpoints: &[Endpoint]) -> Vec<Session> {
    futures::future::join_all(endpoints.iter().map(|ep| async move {
        let s = Session::connect(ep).await.unwrap_or_else(|e| panic!("{e}"));
        s.run(&Sh::lit(ROUTER_READS), None, Duration::from_secs(10)).await.unwrap();
        s
    }))
    .await
}

/// The change itself on one router: the wg-quick file fabric wrote, and the interface up
/// (wireguard-go: the lab has no kernel WireGuard).
const WG_UP: &str = "umask 077; cat > /etc/wireguard/wg0.conf && \
                     WG_QUICK_USERSPACE_IMPLEMENTATION=wireguard-go wg-quick up wg0 >/dev/null 2>&1";
const WG_DOWN: &str = "wg-quick down wg0 >/dev/null 2>&1; rm -f /etc/wireguard/wg0.conf";

/// A fresh connect and one command on every router at once: the confirm.
async fn confirm_all(endpoints: &[Endpoint]) {
    futures::future::join_all(endpoints.iter().map(|ep| async move {
        let s = Session::connect(ep).await.unwrap_or_else(|e| panic!("{e}"));
        s.run(&Sh::lit("true"), None, Duration::from_secs(10)).await.unwrap();
        s.close().await;
    }))
    .await;
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("apply_lab benchmark: run it as root with `cargo bench --bench apply_lab`");
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let lab = lab::Lab::up("ba", "10.248", &["--delay-ms", "25"], &[]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let hosts: Vec<String> =
        ["franca-router", "sp-router", "franca-lan", "sp-lan"].into_iter().map(String::from).collect();
    let dir = PathBuf::from("/tmp/fabric-bench-apply");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let config = behind_delay(&rt, &lab, &hosts, &dir, DELAY);
    let topology = root.join("tests/data/lab-linux.yaml");
    let fabric = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_fabric"))
            .arg("-f")
            .arg(&topology)
            .arg("--ssh-config")
            .arg(&config)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "fabric {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };

    let (mut walls, mut runs) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let t = Instant::now();
        let stderr = fabric(&["-v", "apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", "30"]);
        walls.push(t.elapsed());
        runs.push(timeline(&stderr));
        fabric(&["-q", "rollback"]);
    }
    // The run of median wall time is the one shown.
    let wall = median(walls.clone());
    let shown = &runs[walls.iter().position(|w| *w == wall).unwrap()];
    let check = shown.iter().find(|(n, _)| n == "B.1 check").map_or(0.0, |(_, ms)| *ms);

    let cfg = fabric::transport::ssh_config::SshConfig::load(&config).unwrap();
    let endpoints: Vec<Endpoint> = ["franca-router", "sp-router"]
        .iter()
        .map(|r| {
            let access = fabric::topology::model::SshAccess { host: r.to_string(), ..Default::default() };
            Endpoint::resolve(r, &access, &cfg, &mut vec![]).unwrap()
        })
        .collect();
    // The wg-quick files fabric writes, read after one more apply (then rolled back).
    fabric(&["-q", "apply", "--step", "B.1", "--auto-approve"]);
    let confs: Vec<Vec<u8>> = rt.block_on(async {
        let mut out = Vec::new();
        for s in connect_and_read(&endpoints).await {
            let o = s.run(&Sh::lit("cat /etc/wireguard/wg0.conf"), None, Duration::from_secs(10)).await.unwrap();
            assert_eq!(o.status, 0, "no wg-quick file on a router after apply");
            out.push(o.stdout);
            s.close().await;
        }
        out
    });
    fabric(&["-q", "rollback"]);
    let (mut read, mut change, mut confirm) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        rt.block_on(async {
            let t = Instant::now();
            let sessions = connect_and_read(&endpoints).await;
            read.push(t.elapsed());
            let t = Instant::now();
            for (s, conf) in sessions.iter().zip(&confs) {
                let o = s.run(&Sh::lit(WG_UP), Some(conf.as_slice()), Duration::from_secs(20)).await.unwrap();
                assert_eq!(o.status, 0, "wg-quick up failed: {}", String::from_utf8_lossy(&o.stderr));
            }
            change.push(t.elapsed());
            let t = Instant::now();
            confirm_all(&endpoints).await;
            confirm.push(t.elapsed());
            for s in sessions {
                s.run(&Sh::lit(WG_DOWN), None, Duration::from_secs(20)).await.unwrap();
                s.close().await;
            }
        });
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (read, change, confirm) = (ms(median(read)), ms(median(change)), ms(median(confirm)));
    let floor = read + change + check + confirm;

    println!("WAN delay: {} ms one way on every SSH connection (userspace proxy)", DELAY.as_millis());
    println!("fabric apply --step B.1 -v, 2 Linux routers, timeline of the median run (of {RUNS}):");
    for (name, took) in shown {
        println!("  {name:<36} {took:>7.0} ms");
    }
    println!("floor (median of 5):");
    println!("  {:<36} {read:>7.0} ms", "connect and read, both at once");
    println!("  {:<36} {change:>7.0} ms", "wg-quick up, one router then the other");
    println!("  {:<36} {check:>7.0} ms", "the check's pings (fabric's check)");
    println!("  {:<36} {confirm:>7.0} ms", "confirm over a fresh connection");
    println!("  {:<36} {floor:>7.0} ms", "floor");
    println!("apply wall time {:.0} ms, ratio to the floor {:.2} (goal <= 1.5)", ms(wall), ms(wall) / floor);
    // The check's time is in both: the rest is what fabric adds around the pings.
    println!(
        "outside the check: apply {:.0} ms, floor {:.0} ms, ratio {:.2}",
        ms(wall) - check,
        floor - check,
        (ms(wall) - check) / (floor - check)
    );
    drop(lab);
    let _ = std::fs::remove_dir_all(&dir);
}
