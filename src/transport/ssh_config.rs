//! The subset of OpenSSH's `ssh_config` fabric honours, with OpenSSH's rule that the first value
//! obtained for a keyword wins. Topology values come first, then the config file, then defaults.

use std::path::{Path, PathBuf};

/// Settings for one host, as resolved from a config file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostConfig {
    pub hostname: Option<String>,
    pub user: Option<String>,
    pub port: Option<u16>,
    pub identity_files: Vec<PathBuf>,
    pub user_known_hosts: Vec<PathBuf>,
    pub proxy_jump: Option<String>,
    pub connect_timeout: Option<u64>,
}

#[derive(Debug, Clone)]
struct Block {
    patterns: Vec<String>,
    options: Vec<(String, String)>,
}

/// A parsed config file.
#[derive(Debug, Clone, Default)]
pub struct SshConfig {
    blocks: Vec<Block>,
}

/// `*` and `?` wildcards, as in OpenSSH's Host patterns.
fn glob(pattern: &str, s: &str) -> bool {
    fn rec(p: &[u8], s: &[u8]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => rec(&p[1..], s) || (!s.is_empty() && rec(p, &s[1..])),
            (Some(b'?'), Some(_)) => rec(&p[1..], &s[1..]),
            (Some(a), Some(b)) if a.eq_ignore_ascii_case(b) => rec(&p[1..], &s[1..]),
            _ => false,
        }
    }
    rec(pattern.as_bytes(), s.as_bytes())
}

fn expand_home(s: &str) -> PathBuf {
    match (s.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(s),
    }
}

impl SshConfig {
    pub fn parse(text: &str) -> SshConfig {
        // Options before the first Host line apply to every host.
        let mut blocks = vec![Block { patterns: vec!["*".into()], options: vec![] }];
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = match line.split_once(|c: char| c.is_whitespace() || c == '=') {
                Some((k, v)) => (k.trim(), v.trim().trim_start_matches('=').trim()),
                None => continue,
            };
            let value = value.trim_matches('"').to_string();
            if key.eq_ignore_ascii_case("host") {
                blocks.push(Block { patterns: value.split_whitespace().map(String::from).collect(), options: vec![] });
            } else if key.eq_ignore_ascii_case("match") {
                // Match blocks are not supported: their options are ignored, never misapplied.
                blocks.push(Block { patterns: vec![], options: vec![] });
            } else if let Some(b) = blocks.last_mut() {
                b.options.push((key.to_ascii_lowercase(), value));
            }
        }
        SshConfig { blocks }
    }

    pub fn load(path: &Path) -> std::io::Result<SshConfig> {
        Ok(SshConfig::parse(&std::fs::read_to_string(path)?))
    }

    fn matches(patterns: &[String], host: &str) -> bool {
        let mut hit = false;
        for p in patterns {
            if let Some(neg) = p.strip_prefix('!') {
                if glob(neg, host) {
                    return false;
                }
            } else if glob(p, host) {
                hit = true;
            }
        }
        hit
    }

    /// The settings for `host` (the name as written in the topology).
    pub fn resolve(&self, host: &str) -> HostConfig {
        let mut c = HostConfig::default();
        for b in self.blocks.iter().filter(|b| Self::matches(&b.patterns, host)) {
            for (k, v) in &b.options {
                match k.as_str() {
                    "hostname" if c.hostname.is_none() => c.hostname = Some(v.replace("%h", host)),
                    "user" if c.user.is_none() => c.user = Some(v.clone()),
                    "port" if c.port.is_none() => c.port = v.parse().ok(),
                    // IdentityFile accumulates, as in OpenSSH.
                    "identityfile" => c.identity_files.push(expand_home(v)),
                    "userknownhostsfile" if c.user_known_hosts.is_empty() => {
                        c.user_known_hosts = v.split_whitespace().map(expand_home).collect()
                    }
                    "proxyjump" if c.proxy_jump.is_none() && v != "none" => c.proxy_jump = Some(v.clone()),
                    "connecttimeout" if c.connect_timeout.is_none() => c.connect_timeout = v.parse().ok(),
                    _ => {}
                }
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let c = SshConfig::parse(CONFIG);
        let f = c.resolve("franca-router");
        assert_eq!(f.hostname.as_deref(), Some("10.250.1.2"));
        assert_eq!(f.port, Some(2222));
        assert_eq!(f.user.as_deref(), Some("fallback"), "options before any Host apply first");
        assert_eq!(f.proxy_jump.as_deref(), Some("bastion"));
        assert_eq!(f.identity_files.len(), 2);
        assert_eq!(f.identity_files[0], PathBuf::from("/lab/id_ed25519"));
        assert_eq!(f.user_known_hosts, vec![PathBuf::from("/lab/known_hosts")]);
        assert_eq!(f.connect_timeout, Some(7));
        let s = c.resolve("sp-router");
        assert_eq!(s.proxy_jump, None, "negated pattern excludes sp-router");
        let other = c.resolve("192.168.0.10");
        assert_eq!(other.hostname, None);
        assert_eq!(other.port, None);
    }

    #[test]
    fn globs() {
        assert!(glob("*", "x"));
        assert!(glob("*-router", "franca-router"));
        assert!(!glob("*-router", "franca-lan"));
        assert!(glob("h?st", "host"));
        assert!(glob("10.250.*", "10.250.1.2"));
    }
}
