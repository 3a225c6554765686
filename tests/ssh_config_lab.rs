//! An operator's ssh config as operators write them, against real OpenSSH servers: the routers
//! are defined only in an `Include`d file, by their public addresses, which the machine reaches
//! only through two jump hosts in a row (`ProxyJump jump1,jump2`; `lab.sh up --jumps`). fabric
//! resolves the chain as `ssh -G` does, connects through both hops over `direct-tcpip`
//! channels, and `fabric plan` reads both routers that way. Needs root (network namespaces).

use fabric_testkit::{lab, run};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use fabric::topology::model::SshAccess;
use fabric::transport::shell::Sh;
use fabric::transport::ssh::{Endpoint, Session};
use fabric::transport::ssh_config::SshConfig;

const LINUX: &str = include_str!("data/lab-linux.yaml");

/// The operator's files: `config` including `conf.d/*.conf`, where the routers and the jump
/// hosts are; a known_hosts naming each host by the address it is reached at.
fn operator_config(lab: &lab::Lab) -> PathBuf {
    let dir = lab.dir.join("operator");
    std::fs::create_dir_all(dir.join("conf.d")).unwrap();
    let jump2 = lab.mgmt_ip("jump2");
    let routers = format!(
        "# the site routers, by their public addresses, two jump hosts away\n\
         Host jump1\n    HostName {jump1}\n\
         Host jump2\n    HostName {jump2}\n\
         Host franca-router\n    HostName 198.18.1.2\n    ProxyJump jump1,jump2\n\
         Host sp-router\n    HostName 198.18.2.2\n    ProxyJump jump1,jump2\n\
         Host *-router\n    IdentitiesOnly yes\n",
        jump1 = lab.mgmt_ip("jump1"),
    );
    std::fs::write(dir.join("conf.d/10-sites.conf"), routers).unwrap();
    let config = format!(
        "Include {}/conf.d/*.conf\n\
         Host *\n    User root\n    IdentityFile {}\n    UserKnownHostsFile {}/known_hosts\n    \
         GlobalKnownHostsFile /dev/null\n    StrictHostKeyChecking yes\n    BatchMode yes\n",
        dir.display(),
        lab.identity().display(),
        dir.display()
    );
    std::fs::write(dir.join("config"), config).unwrap();
    let mut known = String::new();
    for (host, addr) in [
        ("jump1", lab.mgmt_ip("jump1")),
        ("jump2", jump2),
        ("franca-router", "198.18.1.2".into()),
        ("sp-router", "198.18.2.2".into()),
    ] {
        let key: Vec<String> = lab.host_key_pub(host).split_whitespace().take(2).map(String::from).collect();
        known.push_str(&format!("{addr} {} {}\n", key[0], key[1]));
    }
    std::fs::write(dir.join("known_hosts"), known).unwrap();
    dir.join("config")
}

fn out(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn routers_through_an_included_file_and_two_jump_hosts() {
    let lab = lab::Lab::up("sj", "10.240", &["--jumps"], &[]);
    let config = operator_config(&lab);
    not_reachable_directly();
    openssh_takes_the_same_path(&config);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(fabric_connects_through_both_hops(&lab, &config));
    fabric_plan_reads_both_routers(&lab, &config);
    sshd_restarted_behind_two_jump_hosts(&lab, &config);
}

/// franca-router's sshd restarts while a plan reaches it through both jump hosts: jump2's sshd
/// answers the `direct-tcpip` open with `SSH_OPEN_CONNECT_FAILED` and `Connection refused`
/// (OpenSSH `channels.c`, `channel_post_connecting`), which fabric retries as it retries a
/// refused direct connect (issue #24, item 1): the plan reads the router once sshd is back, with
/// one `retry:` line per attempt under `-v`.
fn sshd_restarted_behind_two_jump_hosts(lab: &lab::Lab, config: &Path) {
    let topology = lab.dir.join("topology.yaml");
    let restart = std::thread::scope(|scope| {
        let restart = scope.spawn(|| lab.restart_sshd("franca-router", 1));
        // The plan starts once the old sshd is gone (its new one comes a second later).
        lab.wait_until_sshd_down("franca-router");
        let o = run::fabric_in(&lab.dir, &topology, config, &["plan", "--step", "B.1", "-v"]);
        (restart.join().unwrap(), o)
    });
    let (restarted, o) = restart;
    assert!(restarted.status.success(), "{}", out(&restarted));
    let text = out(&o);
    assert!(o.status.success(), "the router is read once its sshd is back: {text}");
    assert!(
        text.contains(
            "fabric: retry: router.franca: connect: attempt 1/5 failed (Connection refused (said by jump host"
        ),
        "the refusal behind the jump hosts is retried: {text}"
    );
    let read = text.lines().find(|l| l.starts_with("fabric:   router.franca: ")).unwrap_or_default();
    assert!(read.contains("resource(s)"), "router.franca was read: {text}");
}

/// The routers' public addresses are blackholed in this namespace while a lab is up
/// (`lab.sh`, shared blackholes), so no packet can leave the machine, and a direct connect fails.
fn not_reachable_directly() {
    let o = Command::new("ip").args(["route", "show", "type", "blackhole", "198.18.0.0/15"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("198.18.0.0/15"), "the lab's blackhole is missing");
    let direct = std::net::TcpStream::connect_timeout(&"198.18.1.2:22".parse().unwrap(), Duration::from_secs(2));
    assert!(direct.is_err(), "franca-router's public address answered directly");
}

/// The real `ssh` reaches franca-router with this config (through both hops).
fn openssh_takes_the_same_path(config: &Path) {
    let o = Command::new("ssh").arg("-F").arg(config).args(["franca-router", "hostname"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "franca-router", "{}", out(&o));
}

async fn fabric_connects_through_both_hops(lab: &lab::Lab, config: &Path) {
    let cfg = SshConfig::load(config).unwrap();
    let mut warnings = vec![];
    let access = SshAccess { host: "franca-router".into(), ..Default::default() };
    let ep = Endpoint::resolve("router.franca", &access, &cfg, &mut warnings).unwrap();
    // ProxyJump jump1,jump2: the router through jump2, jump2 through jump1, jump1 directly.
    let j2 = ep.proxy_jump.as_deref().expect("a jump host");
    let j1 = j2.proxy_jump.as_deref().expect("a second jump host");
    assert_eq!(
        [(ep.host.as_str(), ep.port), (j2.host.as_str(), j2.port), (j1.host.as_str(), j1.port)],
        [("198.18.1.2", 22), (lab.mgmt_ip("jump2").as_str(), 22), (lab.mgmt_ip("jump1").as_str(), 22)]
    );
    assert!(j1.proxy_jump.is_none());
    assert_eq!(j2.target, "router.franca (jump host jump2)");
    // The lab's IdentitiesOnly (10-sites.conf) is supported: no warning for it.
    assert!(warnings.is_empty(), "{warnings:?}");
    let s = Session::connect(&ep).await.unwrap_or_else(|e| panic!("{e}: {}", e.help()));
    let o = s.run(&Sh::lit("hostname"), None, Duration::from_secs(5)).await.unwrap();
    assert_eq!(o.stdout_str().trim(), "franca-router");
    s.close().await;
}

fn fabric_plan_reads_both_routers(lab: &lab::Lab, config: &Path) {
    let topology = lab.dir.join("topology.yaml");
    std::fs::write(&topology, LINUX).unwrap();
    let o = run::fabric_in(&lab.dir, &topology, config, &["plan", "--step", "B.1", "-v"]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    // `-v` says what each target's read found (`command::print_read`).
    for t in ["router.franca", "router.sp"] {
        let read = text.lines().find(|l| l.starts_with(&format!("fabric:   {t}: "))).unwrap_or_default();
        assert!(read.ends_with("resource(s)") || read.contains("resource(s),"), "{t} was not read: {text}");
        assert!(text.contains(&format!("{t}/")), "{t} is not in the plan: {text}");
    }
    // IdentitiesOnly, the one option of the lab's config fabric once only warned about, is read.
    assert!(!text.contains("warning: ssh config: "), "{text}");

    // A Match fabric cannot evaluate, deciding for the routers: refused, naming file and line,
    // before anything is read.
    let refused = config.with_file_name("config-exec");
    let text = std::fs::read_to_string(config).unwrap();
    std::fs::write(&refused, format!("Match host *-router exec \"true\"\n    Port 2222\n{text}")).unwrap();
    let o = run::fabric_in(&lab.dir, &topology, &refused, &["plan", "--step", "B.1"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    let said = format!("{}:1: fabric cannot evaluate `Match exec` for franca-router", refused.display());
    assert!(text.contains(&said), "{text}");
}
