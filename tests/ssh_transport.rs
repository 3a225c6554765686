//! The SSH transport against real OpenSSH servers in the lab: strict host keys, auth, timeouts,
//! ProxyJump, concurrent channels on one connection. Needs root (network namespaces).

use fabric_testkit::{lab, run};

use std::path::Path;
use std::time::{Duration, Instant};

use fabric::topology::model::SshAccess;
use fabric::transport::shell::Sh;
use fabric::transport::ssh::{Endpoint, Session, SshError};
use fabric::transport::ssh_config::SshConfig;

fn endpoint(lab: &lab::Lab, host: &str) -> Endpoint {
    let cfg = SshConfig::load(&lab.ssh_config()).unwrap();
    let access = SshAccess { host: host.into(), ..Default::default() };
    Endpoint::resolve(&format!("host.{host}"), &access, &cfg, &mut vec![]).unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap()
}

#[test]
fn ssh_transport_against_real_sshd() {
    let lab = lab::Lab::up("st", "10.241", &[], &[]);
    let rt = rt();
    b1_applied_by_a_non_root_operator(&lab);
    rt.block_on(async {
        commands_and_exit_status(&lab).await;
        unknown_host_is_refused(&lab).await;
        changed_host_key_is_refused(&lab).await;
        revoked_host_key_is_refused(&lab).await;
        wrong_key_fails_auth(&lab).await;
        command_timeout(&lab).await;
        many_channels_on_one_connection(&lab).await;
        proxy_jump(&lab).await;
        key_from_ssh_agent(&lab).await;
        sudo_for_a_non_root_operator(&lab).await;
        dead_link_fails_within_the_timeout(&lab).await;
        output_past_the_cap_is_an_error(&lab).await;
        a_large_bundle_file_is_hashed_and_sent_as_a_stream(&lab).await;
    });
}

/// A command printing more than `OUTPUT_CAP` fails with an error naming host, command and cap,
/// and the connection stays usable.
async fn output_past_the_cap_is_an_error(lab: &lab::Lab) {
    use fabric::transport::ssh::OUTPUT_CAP;
    let s = Session::connect(&endpoint(lab, "sp-lan")).await.unwrap();
    let at_cap = Sh::fill("head -c {} /dev/zero", &[&OUTPUT_CAP.to_string()]);
    let o = s.run(&at_cap, None, Duration::from_secs(60)).await.unwrap();
    assert_eq!(o.stdout.len(), OUTPUT_CAP, "exactly the cap is read whole");
    let past = Sh::fill("head -c {} /dev/zero; echo never-read >&2", &[&(OUTPUT_CAP + 1).to_string()]);
    let e = s.run(&past, None, Duration::from_secs(60)).await.unwrap_err();
    assert!(matches!(e, SshError::OutputTooLarge { .. }), "{e}");
    let said = format!("host.sp-lan: `{}` printed more than 16 MiB: fabric stopped reading it", past.as_str());
    assert_eq!(e.to_string(), said);
    let o = s.run(&Sh::lit("echo still-here"), None, Duration::from_secs(5)).await.unwrap();
    assert_eq!(o.stdout_str().trim(), "still-here");
}

/// The peak resident memory of this process since the last reset, and a reset (Linux's
/// `/proc/self/clear_refs`, `5`: the peak becomes the current size).
fn peak_rss_kib(reset: bool) -> u64 {
    if reset {
        std::fs::write("/proc/self/clear_refs", "5").unwrap();
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A 300 MiB bundle file (sparse: no disk is used here) is hashed and copied to a host as
/// streams: what the host receives has the file's digest, and this process's peak memory grows by
/// far less than the file (read whole, it would grow by 300 MiB at least).
async fn a_large_bundle_file_is_hashed_and_sent_as_a_stream(lab: &lab::Lab) {
    use fabric::desired::k3s_install::{Source, Upload};
    use fabric::desired::{Desired, ProviderKind, Resource};
    const SIZE: u64 = 300 << 20;
    let path = lab.dir.join("k3s-airgap-images-amd64.tar.zst");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(SIZE).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let zeros = "17a88af83717f68b8bd97873ffcf022c8aed703416fe9b08e0fa9e3287692bf0"; // `head -c 300M /dev/zero | sha256sum`
    let r = Resource {
        address: "host.sp-lan/command:k3s-install".parse().unwrap(),
        site: Some("sp".into()),
        provider: ProviderKind::Command,
        summary: "k3s".into(),
        sensitive: false,
        desired: Desired::File(String::new()),
        file: None,
    };
    let u = Upload { name: "images".into(), from: Source::Path(path.display().to_string()), sha256: zeros.into() };
    let s = Session::connect(&endpoint(lab, "sp-lan")).await.unwrap();
    let before = peak_rss_kib(true);
    let checked = fabric::providers::airgap::check(&r, &u, &lab.dir).unwrap_or_else(|e| panic!("{e}"));
    let file = tokio::fs::File::open(&checked).await.unwrap();
    let o = s.run_input(&Sh::lit("sha256sum"), Some(file), Duration::from_secs(600)).await.unwrap();
    let grew_mib = (peak_rss_kib(false) - before) >> 10;
    eprintln!("hashing and sending {} MiB grew the peak memory by {grew_mib} MiB", SIZE >> 20);
    let out = o.stdout_str();
    assert_eq!(out.split_whitespace().next(), Some(zeros), "the host received the whole file: {out}");
    assert!(grew_mib < 64, "peak memory grew by {grew_mib} MiB while hashing and sending a 300 MiB file");
    assert_eq!(fabric::providers::airgap::times_hashed(&checked), 1);
    fabric::providers::airgap::check(&r, &u, &lab.dir).unwrap();
    assert_eq!(fabric::providers::airgap::times_hashed(&checked), 1, "a second host's install hashes nothing");
    std::fs::remove_file(&path).unwrap();
}

/// An operator account that may use sudo (`fabricop`): fabric's root commands go through
/// `sudo -n`, files it writes are root's; an account that may not (`guest`) gets sudo's own
/// message back.
async fn sudo_for_a_non_root_operator(lab: &lab::Lab) {
    use fabric::desired::{Desired, ProviderKind, Resource};
    use fabric::providers::{self, Observed};
    use fabric::transport::shell::as_root;
    let mut ep = endpoint(lab, "sp-lan");
    ep.user = "fabricop".into();
    let s = Session::connect(&ep).await.unwrap_or_else(|e| panic!("{e}: {}", e.help()));
    let o = s.run(&Sh::lit("id -un"), None, Duration::from_secs(5)).await.unwrap();
    assert_eq!(o.stdout_str().trim(), "fabricop");
    let o = s.run(&as_root("fabricop", &Sh::lit("id -u")), None, Duration::from_secs(5)).await.unwrap();
    assert_eq!((o.status, o.stdout_str().trim(), o.stderr_str()), (0, "0", String::new()));
    let r = Resource {
        address: "host.sp-lan/file:/etc/rancher/k3s/sudo-test.yaml".parse().unwrap(),
        site: Some("sp".into()),
        provider: ProviderKind::File,
        summary: String::new(),
        sensitive: false,
        desired: Desired::File("a: 1\n".into()),
        file: None,
    };
    providers::apply(&s, &r, "a: 1\n", &Observed::Absent, None, Path::new(".fabric")).await.unwrap();
    let stat = as_root("fabricop", &Sh::lit("stat -c '%U %a' /etc/rancher/k3s/sudo-test.yaml"));
    let o = s.run(&stat, None, Duration::from_secs(5)).await.unwrap();
    assert_eq!(o.stdout_str().trim(), "root 644", "written as root through sudo");
    assert_eq!(providers::read(&s, &r).await.unwrap(), Observed::Present("a: 1\n".into()));
    providers::revert(&s, &r, &Observed::Absent).await.unwrap();
    s.close().await;

    ep.user = "guest".into();
    let s = Session::connect(&ep).await.unwrap();
    let err = providers::apply(&s, &r, "a: 1\n", &Observed::Absent, None, Path::new(".fabric"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("sudo") && err.contains("password is required"), "{err}");
    s.close().await;
}

/// B.1 through the CLI with both routers reached as `fabricop`: lock, key generation, wg-quick,
/// the self-revert job and its confirmation all go through sudo.
fn b1_applied_by_a_non_root_operator(lab: &lab::Lab) {
    let dir = lab.dir.join("sudo-b1");
    std::fs::create_dir_all(&dir).unwrap();
    let text = include_str!("data/lab-linux.yaml")
        .replace("ssh: { host: franca-router }", "ssh: { host: franca-router, user: fabricop }")
        .replace("ssh: { host: sp-router }", "ssh: { host: sp-router, user: fabricop }");
    std::fs::write(dir.join("topology.yaml"), text).unwrap();
    let fabric = |args: &[&str]| run::fabric_in(&dir, &dir.join("topology.yaml"), &lab.ssh_config(), args);
    let logins = || {
        let log = std::fs::read_to_string(lab.dir.join("hosts/sp-router/sshd.log")).unwrap_or_default();
        log.matches("Accepted publickey").count()
    };
    let before = logins();
    let o = fabric(&["apply", "--step", "B.1", "--auto-approve"]);
    assert!(o.status.success(), "{}", run::out(&o));
    assert!(run::out(&o).contains("B.1: check passed"), "{}", run::out(&o));
    // One connection per host per run: the read, the lock and the changes over the first, the
    // confirm over a fresh one (by design: it proves the router still answers a new login).
    assert_eq!(logins() - before, 2, "SSH logins to sp-router during apply: {}", run::out(&o));
    let o = lab.exec("sp-router", "stat -c '%U %a' /etc/wireguard/wg0.conf && cat /run/lock/fabric.lock");
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(text, "root 600\n", "the lock (held through sudo) is released: {text}");
    let log = std::fs::read_to_string(lab.dir.join("hosts/sp-router/sshd.log")).unwrap();
    assert!(log.contains("Accepted publickey for fabricop"), "fabric logged in as fabricop");
    let o = fabric(&["plan", "--step", "B.1", "--detailed-exitcode"]);
    assert_eq!(o.status.code(), Some(0), "read back through sudo: {}", run::out(&o));
    let o = fabric(&["rollback"]);
    assert!(o.status.success(), "{}", run::out(&o));
}

async fn commands_and_exit_status(lab: &lab::Lab) {
    let ep = endpoint(lab, "franca-router");
    assert_eq!(ep.host, lab.mgmt_ip("franca-router"));
    let s = Session::connect(&ep).await.unwrap_or_else(|e| panic!("{e}: {}", e.help()));
    let o = s.run(&Sh::lit("hostname"), None, Duration::from_secs(5)).await.unwrap();
    assert_eq!((o.status, o.stdout_str().trim()), (0, "franca-router"));
    let o = s.run(&Sh::lit("cat; echo err >&2; exit 7"), Some(b"from stdin\n"), Duration::from_secs(5)).await.unwrap();
    assert_eq!(o.status, 7);
    assert_eq!(o.stdout_str(), "from stdin\n");
    assert_eq!(o.stderr_str(), "err");
    s.close().await;
}

async fn unknown_host_is_refused(lab: &lab::Lab) {
    let mut ep = endpoint(lab, "sp-router");
    let empty = lab.dir.join("known_hosts.empty");
    std::fs::write(&empty, "").unwrap();
    ep.known_hosts = vec![empty];
    match Session::connect(&ep).await {
        Err(e @ SshError::UnknownHost { .. }) => {
            let text = e.to_string();
            assert!(text.contains("host.sp-router") && text.contains("SHA256:"), "{text}");
            assert!(e.help().contains("never trusts a host on first use"), "{}", e.help());
        }
        Err(e) => panic!("expected UnknownHost, got {e}"),
        Ok(_) => panic!("an unknown host was trusted"),
    }
}

async fn changed_host_key_is_refused(lab: &lab::Lab) {
    let mut ep = endpoint(lab, "sp-router");
    // Record franca-router's key under sp-router's address: a mismatch.
    let other = lab.host_key_pub("franca-router");
    let fields: Vec<&str> = other.split_whitespace().collect();
    let file = lab.dir.join("known_hosts.changed");
    std::fs::write(&file, format!("{} {} {}\n", ep.host, fields[0], fields[1])).unwrap();
    ep.known_hosts = vec![file];
    match Session::connect(&ep).await {
        Err(e @ SshError::HostKeyChanged { .. }) => {
            assert!(e.to_string().contains("has changed"), "{e}");
            assert!(e.to_string().contains("known_hosts.changed:1"), "{e}");
        }
        Err(e) => panic!("expected HostKeyChanged, got {e}"),
        Ok(_) => panic!("a changed host key was accepted"),
    }
}

/// A key marked `@revoked` is refused even when another line of the file trusts it, as OpenSSH
/// does (issue "Safe under hostile input and faults", item 9).
async fn revoked_host_key_is_refused(lab: &lab::Lab) {
    let mut ep = endpoint(lab, "sp-router");
    let own = lab.host_key_pub("sp-router");
    let fields: Vec<&str> = own.split_whitespace().collect();
    let file = lab.dir.join("known_hosts.revoked");
    let trusted = std::fs::read_to_string(lab.known_hosts()).unwrap();
    std::fs::write(&file, format!("{trusted}@revoked * {} {}\n", fields[0], fields[1])).unwrap();
    ep.known_hosts = vec![file];
    match Session::connect(&ep).await {
        Err(e @ SshError::HostKeyRevoked { .. }) => assert!(e.to_string().contains("is revoked"), "{e}"),
        Err(e) => panic!("expected HostKeyRevoked, got {e}"),
        Ok(_) => panic!("a revoked host key was accepted"),
    }
}

async fn wrong_key_fails_auth(lab: &lab::Lab) {
    let mut ep = endpoint(lab, "sp-router");
    let key = lab.dir.join("wrong_key");
    let _ = std::fs::remove_file(&key);
    let st = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(st.success());
    ep.identity_files = vec![key];
    match Session::connect(&ep).await {
        Err(e @ SshError::Auth { .. }) => assert!(e.to_string().contains("authentication as `root`"), "{e}"),
        Err(e) => panic!("expected Auth, got {e}"),
        Ok(_) => panic!("a wrong key was accepted"),
    }
}

async fn command_timeout(lab: &lab::Lab) {
    let s = Session::connect(&endpoint(lab, "franca-lan")).await.unwrap();
    let t = Instant::now();
    match s.run(&Sh::lit("sleep 10"), None, Duration::from_secs(1)).await {
        Err(SshError::CommandTimeout { secs: 1, .. }) => {}
        other => panic!("expected a command timeout, got {:?}", other.map(|o| o.status)),
    }
    assert!(t.elapsed() < Duration::from_secs(5));
}

async fn many_channels_on_one_connection(lab: &lab::Lab) {
    let s = std::sync::Arc::new(Session::connect(&endpoint(lab, "sp-lan")).await.unwrap());
    let mut set = tokio::task::JoinSet::new();
    for i in 0..20 {
        let s = s.clone();
        set.spawn(
            async move { (i, s.run(&fabric::sh!("sleep 0.2; echo {}", i), None, Duration::from_secs(10)).await) },
        );
    }
    let t = Instant::now();
    let mut n = 0;
    while let Some(r) = set.join_next().await {
        let (i, o) = r.unwrap();
        assert_eq!(o.unwrap().stdout_str().trim(), i.to_string());
        n += 1;
    }
    assert_eq!(n, 20);
    // 20 sleeps of 0.2 s ran side by side, not one after another (4 s).
    assert!(t.elapsed() < Duration::from_secs(3), "channels ran sequentially: {:?}", t.elapsed());
}

async fn proxy_jump(lab: &lab::Lab) {
    // franca-lan by its LAN address, through franca-router.
    let cfg = SshConfig::load(&lab.ssh_config()).unwrap();
    let access =
        SshAccess { host: "172.30.1.10".into(), proxy_jump: Some("franca-router".into()), ..Default::default() };
    let mut ep = Endpoint::resolve("host.franca-lan", &access, &cfg, &mut vec![]).unwrap();
    let known = lab.dir.join("known_hosts.jump");
    let key = lab.host_key_pub("franca-lan");
    let fields: Vec<&str> = key.split_whitespace().collect();
    let mut text = std::fs::read_to_string(lab.known_hosts()).unwrap();
    text.push_str(&format!("172.30.1.10 {} {}\n", fields[0], fields[1]));
    std::fs::write(&known, text).unwrap();
    ep.known_hosts = vec![known.clone()];
    ep.identity_files = vec![lab.identity()];
    ep.user = "root".into();
    if let Some(j) = ep.proxy_jump.as_mut() {
        j.known_hosts = vec![known];
    }
    let s = Session::connect(&ep).await.unwrap_or_else(|e| panic!("{e}: {}", e.help()));
    let o = s.run(&Sh::lit("hostname"), None, Duration::from_secs(5)).await.unwrap();
    assert_eq!(o.stdout_str().trim(), "franca-lan");
}

async fn dead_link_fails_within_the_timeout(lab: &lab::Lab) {
    let mut ep = endpoint(lab, "sp-router");
    ep.connect_timeout = Duration::from_secs(3);
    let out = lab.cmd(&["cut-mgmt", "sp-router"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let t = Instant::now();
    let r = Session::connect(&ep).await;
    let took = t.elapsed();
    let _ = lab.cmd(&["restore-mgmt", "sp-router"]);
    match r {
        Err(SshError::Timeout { .. }) | Err(SshError::Connect { .. }) => {}
        Err(e) => panic!("expected a timeout, got {e}"),
        Ok(_) => panic!("connected through a cut link"),
    }
    assert!(took < Duration::from_secs(6), "took {took:?}");
}

/// No identity file: the key comes from a real ssh-agent (on a unix socket of this test).
async fn key_from_ssh_agent(lab: &lab::Lab) {
    let sock = lab.dir.join("agent.sock");
    let _ = std::fs::remove_file(&sock);
    let agent = std::process::Command::new("ssh-agent").arg("-D").arg("-a").arg(&sock).spawn().expect("ssh-agent");
    for _ in 0..50 {
        if sock.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let added = std::process::Command::new("ssh-add").arg(lab.identity()).env("SSH_AUTH_SOCK", &sock).output().unwrap();
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    let mut ep = endpoint(lab, "sp-lan");
    ep.identity_files = vec![lab.dir.join("no-such-key")];
    // SAFETY: this test runs its scenarios one after another on one task; nothing else reads
    // the environment meanwhile.
    unsafe { std::env::set_var("SSH_AUTH_SOCK", &sock) };
    // The lab's ssh config says IdentitiesOnly yes: the agent's key matches no identity file, so
    // it is not offered (OpenSSH's sshconnect2.c pubkey_prepare), and the connect fails.
    ep.identities_only = true;
    let only = Session::connect(&ep).await;
    assert!(only.is_err(), "IdentitiesOnly: the agent's key, which matches no identity file, was used");
    ep.identities_only = false;
    let r = Session::connect(&ep).await;
    unsafe { std::env::remove_var("SSH_AUTH_SOCK") };
    let mut agent = agent;
    let _ = agent.kill();
    let _ = agent.wait();
    let s = r.unwrap_or_else(|e| panic!("the agent's key was not used: {e}"));
    let o = s.run(&Sh::lit("hostname"), None, Duration::from_secs(5)).await.unwrap();
    assert_eq!(o.stdout_str().trim(), "sp-lan");
}
