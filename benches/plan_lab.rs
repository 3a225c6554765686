//! `sudo FABRIC_LAB_SLOT=N cargo bench --profile dist --bench plan_lab`: wall time of
//! `fabric plan` on the lab with WAN latency, next to one plain OpenSSH `ssh` per host, all at
//! once, doing the same reads (issue #25), and fabric's own CPU per host.
//!
//! Every SSH connection of the benchmark goes through a userspace delay proxy (this machine has
//! no netem) that holds each chunk 25 ms in each direction, so the management path behaves like
//! a WAN link with a 50 ms round trip. The plan reads every host at once over one connection
//! per host, so its time should stay close to a single connect + command (ratio < 1.5), and flat
//! when 20 more hosts join. Then the same plan of B.1 on two VyOS routers (the VyOS double behind
//! real sshds), beside one plain `ssh ROUTER vbash -s` per router doing the same reads. Prints
//! the figures; asserts nothing (timing is not a test).

use fabric_testkit::lab;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fabric_testkit::wan_proxy::{ROUTER_READS, behind_delay, median};

const DELAY: Duration = Duration::from_millis(25);

/// Runs `program` with `args` (output dropped; its exit status must be one of `ok`) and returns
/// the CPU time it used, user and system, as the shell's `times` reports for its children (POSIX
/// `times`).
fn child_cpu(program: &str, args: &[String], ok: &[i32]) -> Duration {
    let o = Command::new("sh")
        .arg("-c")
        .arg("\"$@\" >/dev/null; s=$?; times; exit $s")
        .arg("sh")
        .arg(program)
        .args(args)
        .output()
        .unwrap();
    let code = o.status.code().unwrap_or(-1);
    assert!(ok.contains(&code), "{program} {args:?} exited {code}:\n{}", String::from_utf8_lossy(&o.stderr));
    // `times`: the shell's own user and system time, then its children's (`0m0.120s 0m0.030s`).
    let text = String::from_utf8_lossy(&o.stdout);
    let children = text.lines().nth(1).expect("times prints two lines");
    children
        .split_whitespace()
        .map(|t| {
            let (m, s) = t.trim_end_matches('s').split_once('m').expect("times prints XmY.Zs");
            Duration::from_secs_f64(m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap())
        })
        .sum()
}

/// One plain OpenSSH `ssh` per target, all at once, each running `command` (with `stdin`, if
/// any): the median wall time of 5 rounds.
fn plain_ssh(ssh_config: &Path, targets: &[String], command: &str, stdin: Option<&str>) -> Duration {
    use std::io::Write;
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let children: Vec<_> = targets
            .iter()
            .map(|h| {
                let mut c = Command::new("ssh")
                    .arg("-F")
                    .arg(ssh_config)
                    .arg(h)
                    .arg(command)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut input = c.stdin.take().unwrap();
                input.write_all(stdin.unwrap_or_default().as_bytes()).unwrap();
                drop(input);
                c
            })
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "plain ssh: {}", String::from_utf8_lossy(&o.stderr));
        }
        times.push(t.elapsed());
    }
    median(times)
}

/// What fabric reads of a VyOS router for B.1, as one plain `vbash -s` script (the yardstick
/// for VyOS routers): the configuration, the key, the lock check with commit-confirm's systemd
/// units (`live::locks::read_locks_vyos`).
const VYOS_READS: &str = "source /opt/vyatta/etc/functions/script-template\n\
                          run show configuration commands\n\
                          run show interfaces wireguard wg0 public-key\n\
                          /bin/sh -c 'cat /run/lock/fabric.lock 2>/dev/null; \
                          for u in commit-confirm.timer commit-confirm.service; \
                          do systemctl show --value -p ActiveState \"$u\"; done; true'\n";

/// `fabric plan --step B.1` on two VyOS routers (the VyOS double behind real sshds), beside one
/// plain `ssh ROUTER vbash -s` per router doing the same reads, both through the delay.
fn vyos_routers(rt: &tokio::runtime::Runtime, root: &Path) {
    let built = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--example", "vyos_double"])
        .current_dir(root)
        .status()
        .unwrap();
    assert!(built.success(), "cargo build --example vyos_double failed");
    let double = root.join("target/debug/examples/vyos_double");
    let lab = lab::Lab::up(
        "bv",
        "10.246",
        &["--vyos-routers", "--delay-ms", "25"],
        &[("LAB_VYOS_DOUBLE", double.to_str().unwrap())],
    );
    let routers = ["franca-router".to_string(), "sp-router".to_string()];
    let dir = PathBuf::from("/tmp/fabric-bench-plan-vyos");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let hosts: Vec<String> = routers.iter().cloned().chain(["franca-lan".into(), "sp-lan".into()]).collect();
    let config = behind_delay(rt, &lab, &hosts, &dir, DELAY);
    let topology = root.join("tests/data/lab-vyos.yaml");
    let args: Vec<String> = ["-q", "-f", topology.to_str().unwrap(), "--ssh-config", config.to_str().unwrap()]
        .into_iter()
        .chain(["plan", "--step", "B.1"])
        .map(String::from)
        .collect();
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        child_cpu(env!("CARGO_BIN_EXE_fabric"), &args, &[0]);
        times.push(t.elapsed());
    }
    let plan = median(times);
    let plain = plain_ssh(&config, &routers, "vbash -s", Some(VYOS_READS));
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("VyOS routers (the VyOS double behind real sshd, same delay):");
    println!("plain ssh, one `vbash -s` per router at once, doing the same reads (median of 5): {:.0} ms", ms(plain));
    println!(
        "fabric plan --step B.1, 2 VyOS routers (median of 5): {:.0} ms, ratio to plain ssh {:.2} (goal <= 1.2)",
        ms(plan),
        ms(plan) / ms(plain)
    );
    drop(lab);
    let _ = std::fs::remove_dir_all(&dir);
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
    let delayed_config = behind_delay(&rt, &lab, &hosts, &dir, DELAY);

    // One SSH connect + command to each router, through the delay: the slowest is the yardstick.
    let cfg = fabric::transport::ssh_config::SshConfig::load(&delayed_config).unwrap();
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
    // The larger plan also selects A.1 (A.3 needs it), whose clusters do not run in the lab: it
    // plans the hosts and says the clusters could not be read (exit 3, partial).
    let plan_with = |ssh_config: &Path, topology: &str, steps: &[&str]| -> (Duration, Duration) {
        let ok: &[i32] = if steps.contains(&"--with-deps") { &[0, 3] } else { &[0] };
        let (mut times, mut cpu) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let mut args = vec!["-q".to_string(), "-f".into(), dir.join(topology).display().to_string()];
            args.extend(["--ssh-config".to_string(), ssh_config.display().to_string(), "plan".into()]);
            for s in steps {
                match s.strip_prefix("--") {
                    Some(_) => args.push(s.to_string()),
                    None => args.extend(["--step".to_string(), s.to_string()]),
                }
            }
            let t = Instant::now();
            let used = child_cpu(env!("CARGO_BIN_EXE_fabric"), &args, ok);
            times.push(t.elapsed());
            cpu.push(used);
        }
        (median(times), median(cpu))
    };
    // One plain OpenSSH `ssh` per host, all at once, each doing a router's reads of B.1 (what
    // fabric reads of a router, and more than it reads of a plain host).
    let plain_ssh = |ssh_config: &Path, targets: &[String]| plain_ssh(ssh_config, targets, ROUTER_READS, None);
    let routers = ["franca-router".to_string(), "sp-router".to_string()];
    let plain_two = plain_ssh(&delayed_config, &routers);
    // Every host the larger plan reads: 2 routers, 2 LAN hosts, 20 VMs.
    let plain_22 = plain_ssh(&delayed_config, &hosts);
    let (two, _) = plan_with(&delayed_config, "lab.yaml", &["B.1"]);
    let (twenty_two, _) = plan_with(&delayed_config, "lab-22.yaml", &["B.1", "A.3", "--with-deps"]);
    // The same two plans straight to the hosts: what the machine itself costs (2 cores doing
    // 22 SSH handshakes), apart from latency.
    let (direct_two, cpu_two) = plan_with(&lab.ssh_config(), "lab.yaml", &["B.1"]);
    let (direct_22, cpu_22) = plan_with(&lab.ssh_config(), "lab-22.yaml", &["B.1", "A.3", "--with-deps"]);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("WAN delay: {} ms one way on every SSH connection (userspace proxy)", DELAY.as_millis());
    println!("one SSH connect + command, slowest router (median of 5): {:.0} ms", ms(slowest));
    println!("plain ssh, one per router at once, doing `{ROUTER_READS}` (median of 5): {:.0} ms", ms(plain_two));
    println!(
        "fabric plan --step B.1, 2 routers (median of 5): {:.0} ms, ratio to plain ssh {:.2} (goal <= 1.2)",
        ms(two),
        ms(two) / ms(plain_two)
    );
    println!("plain ssh, one per host at once, 2 routers + 22 hosts (median of 5): {:.0} ms", ms(plain_22));
    println!(
        "fabric plan --step B.1 --step A.3 --with-deps, 2 routers + 22 hosts (median of 5): {:.0} ms, ratio to plain ssh {:.2} (goal about 0.25)",
        ms(twenty_two),
        ms(twenty_two) / ms(plain_22)
    );
    println!(
        "without the delay: 2 routers {:.0} ms, 2 routers + 22 hosts {:.0} ms (the difference, {:.0} ms, is CPU on this machine, not latency)",
        ms(direct_two),
        ms(direct_22),
        ms(direct_22) - ms(direct_two)
    );
    println!(
        "fabric's own CPU (user + sys, median of 5): 2 routers {:.0} ms, 2 routers + 22 hosts {:.0} ms: {:.2} ms per added host (goal < 1 ms)",
        ms(cpu_two),
        ms(cpu_22),
        (ms(cpu_22) - ms(cpu_two)) / 22.0
    );
    drop(lab);
    let _ = std::fs::remove_dir_all(&dir);
    vyos_routers(&rt, root);
}
