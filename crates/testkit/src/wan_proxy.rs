//! A userspace WAN for the benches' SSH connections (this machine has no netem): a listener on
//! loopback per lab host that forwards to the host's sshd, holding every chunk a fixed delay in
//! each direction, and an ssh_config and known_hosts that reach the hosts through it (read by
//! fabric and by OpenSSH's `ssh` alike).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::lab::Lab;

/// Copies `from` to `to`, delivering each chunk `delay` after it arrived (order kept, so the
/// link has latency but not a throughput cap of one chunk per delay).
async fn delayed(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, delay: Duration) {
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
                if tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// A listener on 127.0.0.1 that forwards to `upstream` through the delay; its port.
pub async fn proxy(upstream: String, delay: Duration) -> u16 {
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
                tokio::join!(delayed(cr, sw, delay), delayed(sr, cw, delay));
            });
        }
    });
    port
}

/// Puts every one of `hosts` of `lab` behind its own delay proxy (served by `rt`) and writes
/// `dir/ssh_config` and `dir/known_hosts` that reach them there; returns the ssh_config's path.
pub fn behind_delay(rt: &tokio::runtime::Runtime, lab: &Lab, hosts: &[String], dir: &Path, delay: Duration) -> PathBuf {
    let mut config = String::new();
    let mut known = String::new();
    for h in hosts {
        let port = rt.block_on(proxy(format!("{}:22", lab.mgmt_ip(h)), delay));
        // BatchMode and the rest let OpenSSH's `ssh` read the same file.
        config.push_str(&format!(
            "Host {h}\n    HostName 127.0.0.1\n    Port {port}\n    User root\n    IdentityFile {}\n    UserKnownHostsFile {}\n    IdentitiesOnly yes\n    GlobalKnownHostsFile /dev/null\n    StrictHostKeyChecking yes\n    BatchMode yes\n",
            lab.identity().display(),
            dir.join("known_hosts").display()
        ));
        let key = lab.host_key_pub(h);
        let fields: Vec<&str> = key.split_whitespace().collect();
        known.push_str(&format!("[127.0.0.1]:{port} {} {}\n", fields[0], fields[1]));
    }
    std::fs::write(dir.join("ssh_config"), &config).unwrap();
    std::fs::write(dir.join("known_hosts"), &known).unwrap();
    dir.join("ssh_config")
}

/// What fabric reads of a Linux router for B.1, as one plain shell command: the yardstick of
/// plain `ssh` the benches set fabric beside (issue #25).
pub const ROUTER_READS: &str = "nft list ruleset; wg show all dump; ip -j route; cat /proc/sys/net/ipv4/ip_forward";

/// The median of `v` (the benches take 5 or so runs of each figure).
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}
