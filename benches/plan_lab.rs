//! `sudo cargo bench --bench plan_lab`: wall time of `fabric plan` on the lab with WAN latency,
//! next to one SSH connect + command to the slowest router.
//!
//! Every SSH connection of the benchmark goes through a userspace delay proxy (this machine has
//! no netem) that holds each chunk 25 ms in each direction, so the management path behaves like
//! a WAN link with a 50 ms round trip. The plan reads every host at once over one connection
//! per host, so its time should stay close to a single connect + command (ratio < 1.5), and flat
//! when 20 more hosts join. Prints the figures; asserts nothing (timing is not a test).

use fabric_testkit::lab;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const DELAY: Duration = Duration::from_millis(25);

/// Copies `from` to `to`, delivering each chunk `DELAY` after it arrived (order kept, so the
/// link has latency but not a throughput cap of one chunk per delay).
async fn delayed(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, data)) = rx.recv().await {
            tokio::time::sleep_until(due.into()).await;
            if to.write_all(&data).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    });
    let mut buf = vec![0u8; 65536];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tx.send((Instant::now() + DELAY, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// A listener on 127.0.0.1 that forwards to `upstream` through the delay.
async fn proxy(upstream: String) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = l.accept().await else { break };
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&upstream).await else { return };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::join!(delayed(cr, sw), delayed(sr, cw));
            });
        }
    });
    port
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("plan_lab benchmark: run it as root with `cargo bench --bench plan_lab`");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lab = lab::Lab::up("bp", "10.244", &["--hosts", "20", "--delay-ms", "25"], &[]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut hosts =
        vec!["franca-router".to_string(), "sp-router".to_string(), "franca-lan".to_string(), "sp-lan".to_string()];
    hosts.extend((1..=20).map(|i| format!("host{i}")));

    // Every host behind its own delay proxy; an ssh_config and known_hosts that point there.
    let dir = PathBuf::from("/tmp/fabric-bench-plan");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut config = String::new();
    let mut known = String::new();
    for h in &hosts {
        let port = rt.block_on(proxy(format!("{}:22", lab.mgmt_ip(h))));
        config.push_str(&format!(
            "Host {h}\n    HostName 127.0.0.1\n    Port {port}\n    User root\n    IdentityFile {}\n    UserKnownHostsFile {}\n",
            lab.identity().display(),
            dir.join("known_hosts").display()
        ));
        let key = lab.host_key_pub(h);
        let fields: Vec<&str> = key.split_whitespace().collect();
        known.push_str(&format!("[127.0.0.1]:{port} {} {}\n", fields[0], fields[1]));
    }
    std::fs::write(dir.join("ssh_config"), &config).unwrap();
    std::fs::write(dir.join("known_hosts"), &known).unwrap();

    // One SSH connect + command to each router, through the delay: the slowest is the yardstick.
    let cfg = fabric::transport::ssh_config::SshConfig::load(&dir.join("ssh_config")).unwrap();
    let mut slowest = Duration::ZERO;
    for r in ["franca-router", "sp-router"] {
        let access = fabric::topology::model::SshAccess { host: r.into(), ..Default::default() };
        let ep = fabric::transport::ssh::Endpoint::resolve(r, &access, &cfg, &mut vec![]).unwrap();
        let mut times = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            rt.block_on(async {
                let s = fabric::transport::ssh::Session::connect(&ep).await.unwrap_or_else(|e| panic!("{e}"));
                s.run(&fabric::transport::shell::Sh::lit("true"), None, Duration::from_secs(10)).await.unwrap();
                s.close().await;
            });
            times.push(t.elapsed());
        }
        slowest = slowest.max(median(times));
    }

    // The topologies: the lab's, and the same with 20 VMs at franca (step A.3 reads them).
    let base = std::fs::read_to_string(root.join("tests/data/lab-linux.yaml")).unwrap();
    let vms: String = (1..=20)
        .map(|i| {
            format!("      - {{ name: vm{i}, kind: vm, address: 172.30.1.{}, ssh: {{ host: host{i} }} }}\n", 100 + i)
        })
        .collect();
    let with_hosts = base.replacen(
        "        - { name: franca-lan, role: control-plane, address: 172.30.1.10, ssh: { host: franca-lan } }\n",
        &format!("        - {{ name: franca-lan, role: control-plane, address: 172.30.1.10, ssh: {{ host: franca-lan }} }}\n    external_workloads:\n{vms}"),
        1,
    );
    assert_ne!(with_hosts, base);
    std::fs::write(dir.join("lab.yaml"), &base).unwrap();
    std::fs::write(dir.join("lab-22.yaml"), &with_hosts).unwrap();
    let plan_with = |ssh_config: &Path, topology: &str, steps: &[&str]| -> Duration {
        let mut times = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let mut c = Command::new(env!("CARGO_BIN_EXE_fabric"));
            c.arg("-q").arg("-f").arg(dir.join(topology)).arg("--ssh-config").arg(ssh_config).arg("plan");
            for s in steps {
                c.args(["--step", s]);
            }
            let o = c.output().unwrap();
            times.push(t.elapsed());
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        median(times)
    };
    let delayed_config = dir.join("ssh_config");
    let two = plan_with(&delayed_config, "lab.yaml", &["B.1"]);
    let twenty_two = plan_with(&delayed_config, "lab-22.yaml", &["B.1", "A.3"]);
    // The same two plans straight to the hosts: what the machine itself costs (2 cores doing
    // 22 SSH handshakes), apart from latency.
    let direct_two = plan_with(&lab.ssh_config(), "lab.yaml", &["B.1"]);
    let direct_22 = plan_with(&lab.ssh_config(), "lab-22.yaml", &["B.1", "A.3"]);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("WAN delay: {} ms one way on every SSH connection (userspace proxy)", DELAY.as_millis());
    println!("one SSH connect + command, slowest router (median of 5): {:.0} ms", ms(slowest));
    println!("fabric plan --step B.1, 2 routers (median of 5): {:.0} ms, ratio {:.2}", ms(two), ms(two) / ms(slowest));
    println!(
        "fabric plan --step B.1 --step A.3, 2 routers + 20 hosts (median of 5): {:.0} ms, ratio {:.2}",
        ms(twenty_two),
        ms(twenty_two) / ms(slowest)
    );
    println!(
        "without the delay: 2 routers {:.0} ms, 2 routers + 20 hosts {:.0} ms (the difference, {:.0} ms, is CPU on this machine, not latency)",
        ms(direct_two),
        ms(direct_22),
        ms(direct_22) - ms(direct_two)
    );
    drop(lab);
    let _ = std::fs::remove_dir_all(&dir);
}
