//! fabric's ssh config resolution against OpenSSH's own: for a set of configs and hosts, what
//! `transport::ssh_config` resolves is what `ssh -G -F CONFIG [-l USER] HOST` prints (the real
//! OpenSSH client; `tests/lab/lab.sh deps` installs it with sshd). `ssh -G` only prints the
//! configuration; it connects to nothing.
//!
//! Compared: hostname, user, port, identityfile (ssh -G prints it before its tokens are
//! expanded, so these configs give plain paths; tokens are compared through
//! UserKnownHostsFile, which it prints expanded), userknownhostsfile, globalknownhostsfile,
//! proxyjump, connecttimeout. Includes here are absolute: `ssh` resolves a relative one against
//! the passwd home, which a test must not write to (the unit tests cover relative ones).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use fabric::transport::ssh_config::{HostConfig, Local, Query, SshConfig};

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("fabric-ssh-g-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `ssh -G`'s answer: each keyword's values, in order.
fn ssh_g(config: &Path, host: &str, user: Option<&str>) -> BTreeMap<String, Vec<String>> {
    let mut c = Command::new("ssh");
    c.arg("-G").arg("-F").arg(config);
    if let Some(u) = user {
        c.args(["-l", u]);
    }
    let out = c.arg(host).output().expect("OpenSSH's client (`ssh`) is needed: apt-get install openssh-client");
    assert!(out.status.success(), "ssh -G {host}: {}", String::from_utf8_lossy(&out.stderr));
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some((k, v)) = line.split_once(' ') {
            m.entry(k.to_string()).or_default().push(v.to_string());
        }
    }
    m
}

fn one<'a>(g: &'a BTreeMap<String, Vec<String>>, k: &str) -> &'a str {
    g.get(k).and_then(|v| v.first()).map(String::as_str).unwrap_or("")
}

fn paths(files: &[PathBuf]) -> String {
    if files.is_empty() {
        return "none".into();
    }
    files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ")
}

/// Compares fabric's resolution of `host` (as `user`) with `ssh -G`'s; returns fabric's.
fn same_as_openssh(config: &Path, host: &str, user: Option<&str>) -> HostConfig {
    let local = Local::current();
    let cfg = SshConfig::load_as(config, &local).unwrap();
    let q = Query { user: user.map(String::from), ..Query::host(host) };
    let ours = cfg.resolve_as(&q, &local).unwrap_or_else(|e| panic!("{host}: {e}"));
    let g = ssh_g(config, host, user);
    let what = format!("{} as {user:?}", host);
    assert_eq!(ours.hostname, one(&g, "hostname"), "hostname of {what}");
    assert_eq!(ours.user, one(&g, "user"), "user of {what}");
    assert_eq!(ours.port.to_string(), one(&g, "port"), "port of {what}");
    if !ours.identity_files.is_empty() {
        let theirs: Vec<PathBuf> = g["identityfile"].iter().map(|f| local.tilde(f).unwrap()).collect();
        assert_eq!(ours.identity_files, theirs, "identityfile of {what}");
    }
    assert_eq!(paths(&ours.user_known_hosts), one(&g, "userknownhostsfile"), "userknownhostsfile of {what}");
    assert_eq!(paths(&ours.global_known_hosts), one(&g, "globalknownhostsfile"), "globalknownhostsfile of {what}");
    let jump = match one(&g, "proxyjump") {
        "" | "none" => None,
        j => Some(j.to_string()),
    };
    assert_eq!(ours.proxy_jump, jump, "proxyjump of {what}");
    let timeout = match one(&g, "connecttimeout") {
        "none" => None,
        t => Some(t.parse::<u64>().unwrap()),
    };
    assert_eq!(ours.connect_timeout, timeout, "connecttimeout of {what}");
    ours
}

fn write(name: &str, text: &str) -> PathBuf {
    let p = dir().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn host_blocks_negation_and_first_value_wins() {
    let c = write(
        "hosts",
        "User fallback\n\
         Host franca-router sp-router\n  HostName 10.250.1.2\n  Port 2222\n  IdentityFile /lab/id_ed25519\n  \
         UserKnownHostsFile /lab/known_hosts\n\
         Host *-router !sp-router\n  User vyos\n  ProxyJump bastion\n  Port 1\n\
         Host *\n  User root\n  IdentityFile /lab/id_rsa\n  ConnectTimeout=7\n  GlobalKnownHostsFile /lab/global\n",
    );
    for host in ["franca-router", "sp-router", "other", "10.1.2.3"] {
        same_as_openssh(&c, host, None);
    }
    let r = same_as_openssh(&c, "franca-router", Some("admin"));
    assert_eq!((r.user.as_str(), r.port), ("admin", 2222), "the command line's user wins; the first Port wins");
}

#[test]
fn includes_glob_in_order_and_keep_the_includers_block() {
    let d = dir().join("inc.d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("20-b.conf"), "Host router\n  HostName 10.0.0.2\n  Port 2200\nHost zzz\n  User z\n").unwrap();
    std::fs::write(d.join("10-a.conf"), "Host router\n  HostName 10.0.0.1\n").unwrap();
    std::fs::write(d.join("skip.txt"), "Host router\n  User txt\n").unwrap();
    let extra = write("inc-extra", "Host *\n  User from-extra\n  ConnectTimeout 3\n");
    let c = write(
        "inc",
        &format!(
            "Host router\n  Include {}/*.conf\n  User after-include\nHost other\n  Include {}\nHost *\n  Port 2022\n",
            d.display(),
            extra.display()
        ),
    );
    let r = same_as_openssh(&c, "router", None);
    assert_eq!((r.hostname.as_str(), r.user.as_str(), r.port), ("10.0.0.1", "after-include", 2200));
    assert_eq!(same_as_openssh(&c, "other", None).user, "from-extra");
    same_as_openssh(&c, "third", None);
}

#[test]
fn match_criteria() {
    let c = write(
        "match",
        "Host r1\n  HostName 10.1.0.1\n\
         Match host 10.1.0.* user vyos\n  Port 2201\n\
         Match originalhost R1 !localuser nobody-here\n  ConnectTimeout 90\n\
         Match user admin,!root\n  Port 2299\n\
         Match !host 10.*\n  User matched-not-10\n\
         Match all\n  UserKnownHostsFile /kh/%r\n",
    );
    for (host, user) in [("r1", Some("vyos")), ("r1", Some("admin")), ("r1", None), ("R1", Some("vyos")), ("x", None)] {
        same_as_openssh(&c, host, user);
    }
}

#[test]
fn tokens_known_hosts_and_jumps() {
    let c = write(
        "tokens",
        "Host *.lab\n  HostName %h.example\n  ProxyJump j1,op@j2:2200\n  \
         UserKnownHostsFile %d/kh/%n-%h-%p-%r-%u-%i-%L-%l-%%-%k /kh2\n  User op2\n\
         Host pc\n  ProxyCommand none\n  ProxyJump never-used\n\
         Host noknown\n  UserKnownHostsFile none\n  GlobalKnownHostsFile none\n\
         Host ip\n  HostName 10.9.9.9\n  ProxyJump none\n\
         Host *\n  ProxyJump fallback-jump\n",
    );
    let r = same_as_openssh(&c, "R1.lab", None);
    assert_eq!(r.proxy_jump.as_deref(), Some("j1,op@j2:2200"));
    for host in ["pc", "noknown", "ip", "plain"] {
        same_as_openssh(&c, host, None);
    }
}
