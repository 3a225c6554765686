//! The resolution rules, each against a small config (the `ssh -G` comparison is
//! tests/ssh_config_openssh.rs).

use super::*;

/// A home directory of its own with `~/.ssh/config` = `config` and the other `files` under
/// `~/.ssh`.
fn home(name: &str, config: &str, files: &[(&str, &str)]) -> Local {
    let dir = std::env::temp_dir().join(format!("fabric-sshcfg-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(".ssh")).unwrap();
    std::fs::write(dir.join(".ssh/config"), config).unwrap();
    for (f, text) in files {
        let p = dir.join(".ssh").join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    Local { user: "op".into(), uid: 4242, home: dir, hostname: "ws.lab".into() }
}

fn config(l: &Local) -> SshConfig {
    SshConfig::load_as(&l.home.join(".ssh/config"), l).unwrap()
}

fn resolve(l: &Local, host: &str) -> HostConfig {
    config(l).resolve_as(&Query::host(host), l).unwrap()
}

const CONFIG: &str = "\
# comment
User fallback
Host franca-router sp-router
    HostName 10.250.1.2
    Port 2222
    IdentityFile /lab/id_ed25519
    UserKnownHostsFile /lab/known_hosts
Host *-router !sp-router
    User vyos
    ProxyJump bastion
Host *
    User root
    IdentityFile ~/.ssh/id_rsa
    ConnectTimeout=7
";

#[test]
fn first_value_wins_and_identity_files_accumulate() {
    let l = home("first", CONFIG, &[]);
    let f = resolve(&l, "franca-router");
    assert_eq!(f.hostname, "10.250.1.2");
    assert_eq!(f.port, 2222);
    assert_eq!(f.user, "fallback", "options before any Host apply first");
    assert_eq!(f.proxy_jump.as_deref(), Some("bastion"));
    assert_eq!(f.identity_files, [PathBuf::from("/lab/id_ed25519"), l.home.join(".ssh/id_rsa")]);
    assert_eq!(f.user_known_hosts, [PathBuf::from("/lab/known_hosts")]);
    assert_eq!(f.global_known_hosts, [PathBuf::from("/etc/ssh/ssh_known_hosts"), "/etc/ssh/ssh_known_hosts2".into()]);
    assert_eq!(f.connect_timeout, Some(7));
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    let s = resolve(&l, "sp-router");
    assert_eq!(s.proxy_jump, None, "negated pattern excludes sp-router");
    let other = resolve(&l, "192.168.0.10");
    assert_eq!((other.hostname.as_str(), other.port), ("192.168.0.10", 22));
    assert_eq!(other.user_known_hosts, [l.home.join(".ssh/known_hosts"), l.home.join(".ssh/known_hosts2")]);
}

#[test]
fn the_query_wins_over_the_files_as_the_command_line_does() {
    let l = home("query", CONFIG, &[]);
    let q = Query {
        host: "franca-router".into(),
        user: Some("admin".into()),
        port: Some(22),
        identity_files: vec!["/topo/key".into()],
        proxy_jump: Some("none".into()),
    };
    let c = config(&l).resolve_as(&q, &l).unwrap();
    assert_eq!((c.user.as_str(), c.port, c.proxy_jump.clone()), ("admin", 22, None));
    assert_eq!(c.identity_files[0], PathBuf::from("/topo/key"), "-i comes before the files' IdentityFile");
}

#[test]
fn the_default_user_is_the_local_one() {
    let l = home("user", "Host x\n  Port 1\n", &[]);
    assert_eq!(resolve(&l, "x").user, "op");
}

#[test]
fn includes_resolve_against_dot_ssh_glob_in_order_and_keep_the_includers_block() {
    let l = home(
        "include",
        "Include conf.d/*.conf\nHost other\n  Include extra\n  User other-user\nHost *\n  User last\n",
        &[
            ("conf.d/10-router.conf", "Host router\n  HostName 10.0.0.1\n"),
            ("conf.d/20-router.conf", "Host router\n  HostName 10.0.0.2\n  Port 2200\n"),
            ("conf.d/.hidden.conf", "Host router\n  User hidden\n"),
            ("conf.d/notes.txt", "Host router\n  User txt\n"),
            ("extra", "Host *\n  User from-extra\n"),
        ],
    );
    let r = resolve(&l, "router");
    assert_eq!((r.hostname.as_str(), r.port), ("10.0.0.1", 2200), "files in sorted order, first value wins");
    assert_eq!(r.user, "last", "neither the hidden file, the .txt, nor `extra` (included in an inactive block)");
    let o = resolve(&l, "other");
    assert_eq!(o.user, "from-extra", "included inside an active block, its `Host *` applies");
}

#[test]
fn a_host_or_match_in_an_included_file_does_not_end_the_includers_block() {
    let l = home("include-state", "Host a\n  Include inc\n  User after-include\n", &[("inc", "Host zzz\n  Port 9\n")]);
    let r = resolve(&l, "a");
    assert_eq!((r.user.as_str(), r.port), ("after-include", 22));
}

#[test]
fn the_system_file_cannot_include_from_home_and_resolves_against_etc_ssh() {
    let l = home("system", "", &[]);
    let mut c = SshConfig::default();
    let sys = l.home.join("ssh_config");
    std::fs::write(&sys, "Include ~/.ssh/x\n").unwrap();
    let e = c.read(&sys, Kind { user: false, check_perm: false }, 0, &l).unwrap_err();
    assert_eq!(e.at, format!("{}:1", sys.display()));
    assert!(e.message.contains("`~` is not allowed in the system file"), "{e}");
    let at = Origin { file: sys.clone(), line: 1 };
    let p = c.include_paths(&at, "no-such-fabric-test-*.conf", Kind { user: false, check_perm: false }, &l).unwrap();
    assert!(p.is_empty(), "relative to /etc/ssh, where nothing matches: {p:?}");
}

#[test]
fn include_loops_and_writable_files_are_refused() {
    let l = home("loop", "Include loop\n", &[("loop", "Include loop\n")]);
    let e = SshConfig::load_as(&l.home.join(".ssh/config"), &l).unwrap_err();
    assert!(e.message.contains("more than 16 nested Includes"), "{e}");
    let l = home("perm", "Include open\n", &[("open", "Host x\n")]);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(l.home.join(".ssh/open"), std::fs::Permissions::from_mode(0o666)).unwrap();
    let e = SshConfig::load_as(&l.home.join(".ssh/config"), &l).unwrap_err();
    assert!(e.at.ends_with(".ssh/open") && e.message.contains("bad owner or permissions"), "{e}");
}

#[test]
fn match_criteria() {
    let text = "\
Host r1
  HostName 10.1.0.1
Match host 10.1.0.* user vyos
  Port 2201
Match originalhost R1 !localuser root
  ConnectTimeout 1m30s
Match user admin
  Port 2299
Match all
  IdentityFile %d/.ssh/%r@%h:%p-%n-%u
";
    let l = home("match", text, &[]);
    let c = config(&l);
    let q = |user: &str| Query { user: Some(user.into()), ..Query::host("r1") };
    let r = c.resolve_as(&q("vyos"), &l).unwrap();
    assert_eq!(r.port, 2201, "Match host sees HostName as obtained so far");
    assert_eq!(r.connect_timeout, Some(90), "originalhost is case-insensitive; op is not root");
    assert_eq!(r.identity_files, [l.home.join(".ssh/vyos@10.1.0.1:2201-r1-op")]);
    let r = c.resolve_as(&q("admin"), &l).unwrap();
    assert_eq!(r.port, 2299);
}

#[test]
fn match_exec_is_refused_where_it_decides_and_ignored_where_it_cannot() {
    let text = "Match host other exec \"true\"\n  Port 1\nMatch exec \"test -e /x\" host r1\n  Port 2\n";
    let l = home("exec", text, &[]);
    let c = config(&l);
    assert_eq!(c.resolve_as(&Query::host("unrelated"), &l).unwrap().port, 22, "host decides: exec not needed");
    let e = c.resolve_as(&Query::host("r1"), &l).unwrap_err();
    assert_eq!(e.at, format!("{}:3", l.home.join(".ssh/config").display()));
    assert!(e.message.contains("cannot evaluate `Match exec` for r1"), "{e}");
    let l = home("exec-bad", "Match all host x\n", &[]);
    assert!(config(&l).resolve_as(&Query::host("x"), &l).unwrap_err().message.contains("cannot be combined"));
    let l = home("exec-unknown", "Match colour blue\n", &[]);
    assert!(config(&l).resolve_as(&Query::host("x"), &l).unwrap_err().message.contains("not a Match criterion"));
}

#[test]
fn unsupported_keywords_are_warnings_naming_file_and_line() {
    let text = "Host a\n  HostKeyAlias other\n  SendEnv LANG\n  StrictHostKeyChecking accept-new\n  ProxyCommand nc %h %p\n  ProxyJump j\n  CheckHostIP no\nHost b\n  HostKeyAlias not-for-a\n";
    let l = home("warn", text, &[]);
    let r = resolve(&l, "a");
    let file = l.home.join(".ssh/config").display().to_string();
    assert_eq!(r.warnings.len(), 3, "{:?}", r.warnings);
    assert!(r.warnings[0].starts_with(&format!("{file}:2: `hostkeyalias` is not supported")), "{:?}", r.warnings);
    assert!(r.warnings[1].starts_with(&format!("{file}:4: StrictHostKeyChecking accept-new")), "{:?}", r.warnings);
    assert!(r.warnings[2].starts_with(&format!("{file}:5: ProxyCommand is not supported")), "{:?}", r.warnings);
    assert_eq!(r.proxy_jump, None, "a ProxyCommand obtained first disables ProxyJump");
}

#[test]
fn tokens_where_each_keyword_allows_them() {
    let text =
        "Host *.lab\n  HostName %h.example\n  ProxyJump jump-%r\n  UserKnownHostsFile ~/kh/%n %d/kh2\n  User op2\n";
    let l = home("tokens", text, &[]);
    let r = resolve(&l, "R1.lab");
    assert_eq!(r.hostname, "r1.lab.example", "ssh lowercases a name");
    assert_eq!(r.proxy_jump.as_deref(), Some("jump-op2"));
    assert_eq!(r.user_known_hosts, [l.home.join("kh/R1.lab"), l.home.join("kh2")]);
    let l = home("tokens-bad", "Host a\n  HostName %p.x\n", &[]);
    let e = config(&l).resolve_as(&Query::host("a"), &l).unwrap_err();
    assert!(e.at.ends_with(".ssh/config:2") && e.message.contains("`%p` is not a token this keyword takes"), "{e}");
}

#[test]
fn known_hosts_none_and_bad_values() {
    let l = home("none", "Host a\n  UserKnownHostsFile none\n  GlobalKnownHostsFile ~/g\nHost b\n  Port 0\n", &[]);
    let r = resolve(&l, "a");
    assert!(r.user_known_hosts.is_empty());
    assert_eq!(r.global_known_hosts, [l.home.join("g")]);
    let e = config(&l).resolve_as(&Query::host("b"), &l).unwrap_err();
    assert!(e.at.ends_with(":5") && e.message.contains("not a port number"), "{e}");
    let l = home("quote", "Host a\n  IdentityFile \"/x\n", &[]);
    let e = SshConfig::load_as(&l.home.join(".ssh/config"), &l).unwrap_err();
    assert!(e.at.ends_with(".ssh/config:2") && e.message.contains("quote"), "{e}");
}

#[test]
fn times() {
    assert_eq!(convtime("30"), Some(30));
    assert_eq!(convtime("1m30s"), Some(90));
    assert_eq!(convtime("1h"), Some(3600));
    assert_eq!(convtime("x"), None);
    assert_eq!(convtime(""), None);
}

#[test]
fn identities_only_is_a_flag_whose_first_value_wins() {
    let l = home("idonly", "Host a\n  IdentitiesOnly yes\nHost *\n  IdentitiesOnly no\n", &[]);
    assert!(resolve(&l, "a").identities_only);
    assert!(resolve(&l, "a").warnings.is_empty(), "{:?}", resolve(&l, "a").warnings);
    assert!(!resolve(&l, "b").identities_only);
    let l = home("idonly-none", "Host a\n  User x\n", &[]);
    assert!(!resolve(&l, "a").identities_only, "OpenSSH's default is no");
    let l = home("idonly-bad", "Host a\n  IdentitiesOnly maybe\n", &[]);
    let e = config(&l).resolve_as(&Query::host("a"), &l).unwrap_err();
    assert!(e.message.contains("IdentitiesOnly maybe: expected yes or no"), "{e:?}");
}
