//! `vyos_double`: a TEST DOUBLE of a VyOS 1.4+ router, for the lab (`tests/lab/lab.sh up
//! --vyos-routers`). It is NOT VyOS: it keeps the observable behaviour fabric relies on (the
//! `vbash -s` script-template session, `set`/`delete` checked against VyOS's own interface
//! definitions, commit / commit-confirm / confirm / save, `show configuration commands`,
//! `generate pki wireguard key-pair install interface wgN`) and realizes the WireGuard and static
//! route parts of the committed config for real, with wireguard-go, `wg` and `ip`, in the network
//! namespace it runs in. Behaviour and every known deviation from real VyOS:
//! `crates/testkit/src/vyos_double.md`.
//!
//! It runs as the sshd `ForceCommand` of a lab router: the client's command arrives in
//! `SSH_ORIGINAL_COMMAND` (a script on stdin for `vbash -s`). State lives in the directory named
//! by `VYOS_DOUBLE_STATE` (see the doc for its files). `VYOS_DOUBLE_CONFIRM_UNIT=seconds` makes
//! `commit-confirm N` count seconds instead of minutes (tests).

use fabric_testkit::vyos_spec;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use vyos_spec::{NodeKind, VyosSpec};

/// PATH for every tool the double runs (sshd's default; never a pyenv shim).
const TOOL_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What a fresh VyOS 1.4 install has that matters here (trimmed: no login users, no console).
const FACTORY_DEFAULT: &str = "set interfaces loopback lo\n\
                               set system config-management commit-revisions '100'\n\
                               set system host-name 'vyos'\n";

/// VyOS's default for `commit-confirm` without a number (config_mgmt.py DEFAULT_TIME_MINUTES).
const DEFAULT_CONFIRM_MINUTES: u64 = 10;

// ---------------------------------------------------------------------------------------------
// Words

/// A command word and whether it was quoted (values are quoted in canonical `set` lines).
#[derive(Debug, Clone)]
struct Word {
    text: String,
    quoted: bool,
}

/// Shell-like split: whitespace, '...' and "..." (with backslash escapes inside double quotes).
fn split_words(line: &str) -> Result<Vec<Word>, String> {
    let mut words = vec![];
    let mut cur = String::new();
    let (mut in_word, mut quoted) = (false, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(Word { text: std::mem::take(&mut cur), quoted });
                    (in_word, quoted) = (false, false);
                }
            }
            '\'' => {
                (in_word, quoted) = (true, true);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => cur.push(ch),
                        None => return Err(format!("unterminated single quote in `{line}`")),
                    }
                }
            }
            '"' => {
                (in_word, quoted) = (true, true);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch) => cur.push(ch),
                            None => return Err(format!("unterminated double quote in `{line}`")),
                        },
                        Some(ch) => cur.push(ch),
                        None => return Err(format!("unterminated double quote in `{line}`")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(ch) = chars.next() {
                    cur.push(ch);
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(Word { text: cur, quoted });
    }
    Ok(words)
}

/// VyOS's "lexical-numeric" order (vyos1x-config `Util.lexical_numeric_compare`): runs of digits
/// compare as numbers, everything else byte-wise.
fn lexnum_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = vec![];
        let bytes = s.as_bytes();
        let mut start = 0;
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    if a.is_empty() || b.is_empty() {
        return a.cmp(b);
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for ((da, xa), (db, xb)) in ca.iter().zip(cb.iter()) {
        let ord = if *da && *db {
            let (ta, tb) = (xa.trim_start_matches('0'), xb.trim_start_matches('0'));
            ta.len().cmp(&tb.len()).then_with(|| ta.cmp(tb)).then_with(|| xa.len().cmp(&xb.len()))
        } else {
            xa.cmp(xb)
        };
        if ord != std::cmp::Ordering::Equal {
            return ord;
        }
    }
    ca.len().cmp(&cb.len())
}

// ---------------------------------------------------------------------------------------------
// Configuration

/// One line of `show configuration commands`: the path (node names and tag values) and, for a
/// leaf with a value, the value. `value: None` is an empty node or a valueless leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    path: Vec<String>,
    value: Option<String>,
}

impl Entry {
    fn line(&self) -> String {
        let mut s = format!("set {}", self.path.join(" "));
        if let Some(v) = &self.value {
            s.push_str(&format!(" '{v}'"));
        }
        s
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Config {
    entries: Vec<Entry>,
}

fn starts_with(path: &[String], prefix: &[String]) -> bool {
    path.len() >= prefix.len() && path[..prefix.len()] == *prefix
}

impl Config {
    /// Parses canonical `set` lines (the format of the state files): the quoted last word of a
    /// line is the leaf value.
    fn parse(text: &str) -> Result<Config, String> {
        let mut entries = vec![];
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let mut words = split_words(line)?;
            if words.first().map(|w| w.text.as_str()) != Some("set") || words.len() < 2 {
                return Err(format!("not a canonical set line: {line}"));
            }
            words.remove(0);
            let value = if words.len() > 1 && words.last().is_some_and(|w| w.quoted) {
                words.pop().map(|w| w.text)
            } else {
                None
            };
            entries.push(Entry { path: words.into_iter().map(|w| w.text).collect(), value });
        }
        let mut c = Config { entries };
        c.normalize();
        Ok(c)
    }

    fn lines(&self) -> Vec<String> {
        self.entries.iter().map(Entry::line).collect()
    }

    fn text(&self) -> String {
        self.lines().iter().map(|l| format!("{l}\n")).collect()
    }

    /// VyOS tree order: paths compared word by word in lexical-numeric order (a node before its
    /// children); the values of a multi leaf keep their insertion order (stable sort).
    fn normalize(&mut self) {
        self.entries.sort_by(|a, b| {
            for (x, y) in a.path.iter().zip(b.path.iter()) {
                let o = lexnum_cmp(x, y);
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            a.path.len().cmp(&b.path.len())
        });
        let mut out: Vec<Entry> = vec![];
        for e in std::mem::take(&mut self.entries) {
            if !out.contains(&e) {
                out.push(e);
            }
        }
        let all = out.clone();
        out.retain(|e| {
            e.value.is_some() || !all.iter().any(|o| o.path.len() > e.path.len() && starts_with(&o.path, &e.path))
        });
        self.entries = out;
    }

    fn has_prefix(&self, prefix: &[String]) -> bool {
        self.entries.iter().any(|e| starts_with(&e.path, prefix))
    }

    fn apply_set(&mut self, t: &Target) {
        match t.leaf {
            Some(LeafKind::Multi) => {
                let e = Entry { path: t.path.clone(), value: t.value.clone() };
                if !self.entries.contains(&e) {
                    self.entries.push(e);
                }
            }
            Some(LeafKind::Single) => {
                self.entries.retain(|e| e.path != t.path);
                self.entries.push(Entry { path: t.path.clone(), value: t.value.clone() });
            }
            Some(LeafKind::Valueless) | None => {
                if !self.has_prefix(&t.path) {
                    self.entries.push(Entry { path: t.path.clone(), value: None });
                }
            }
        }
        self.normalize();
    }

    fn apply_delete(&mut self, t: &Target) -> Result<(), String> {
        let before = self.entries.len();
        match (&t.leaf, &t.value) {
            (Some(LeafKind::Single | LeafKind::Multi), Some(v)) => {
                self.entries.retain(|e| !(e.path == t.path && e.value.as_ref() == Some(v)));
            }
            _ => self.entries.retain(|e| !starts_with(&e.path, &t.path)),
        }
        if self.entries.len() == before {
            return Err("Nothing to delete (the specified node does not exist)".to_string());
        }
        // Empty parents: a tag value (e.g. `interfaces wireguard wg0`) stays as an empty node,
        // plain nodes and tag nodes without values go.
        for k in (1..t.path.len()).rev() {
            let prefix = &t.path[..k];
            if self.has_prefix(prefix) {
                break;
            }
            if t.roles[k - 1] == Role::TagValue {
                self.entries.push(Entry { path: prefix.to_vec(), value: None });
                break;
            }
        }
        self.normalize();
        Ok(())
    }

    fn value(&self, path: &[&str]) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.path.len() == path.len() && e.path.iter().zip(path).all(|(a, b)| a == b))
            .and_then(|e| e.value.as_deref())
    }
}

// ---------------------------------------------------------------------------------------------
// Command paths, classified with the VyOS interface definitions

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Name,
    TagValue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeafKind {
    Single,
    Multi,
    Valueless,
}

/// A `set`/`delete` path: the words up to the leaf (with their roles), the leaf kind and value.
#[derive(Debug, Clone)]
struct Target {
    path: Vec<String>,
    roles: Vec<Role>,
    leaf: Option<LeafKind>,
    value: Option<String>,
}

/// Walks the definitions along `words` (already accepted by `VyosSpec::check`).
fn classify(spec: &VyosSpec, words: &[String]) -> Result<Target, String> {
    let first = words.first().ok_or("empty path")?;
    let mut node = spec.schema_node(&[first.as_str()]).ok_or_else(|| format!("unknown top-level node {first}"))?;
    let mut t = Target { path: vec![first.clone()], roles: vec![Role::Name], leaf: None, value: None };
    let mut i = 1;
    loop {
        match node.kind {
            NodeKind::Node => {
                let Some(w) = words.get(i) else { return Ok(t) };
                node = node.children.get(w).ok_or_else(|| format!("unknown node {w}"))?;
                t.path.push(w.clone());
                t.roles.push(Role::Name);
                i += 1;
            }
            NodeKind::TagNode => {
                let Some(tag) = words.get(i) else { return Ok(t) };
                t.path.push(tag.clone());
                t.roles.push(Role::TagValue);
                i += 1;
                let Some(w) = words.get(i) else { return Ok(t) };
                node = node.children.get(w).ok_or_else(|| format!("unknown node {w}"))?;
                t.path.push(w.clone());
                t.roles.push(Role::Name);
                i += 1;
            }
            NodeKind::LeafNode => {
                let p = &node.properties;
                t.leaf = Some(if p.valueless {
                    LeafKind::Valueless
                } else if p.multi {
                    LeafKind::Multi
                } else {
                    LeafKind::Single
                });
                t.value = words.get(i).cloned();
                return Ok(t);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// State directory

struct State {
    dir: PathBuf,
}

/// Holds the state directory's lock (flock on `lock`) until dropped.
struct Lock(#[allow(dead_code)] fs::File);

impl State {
    fn from_env() -> Result<State, String> {
        let dir = std::env::var_os("VYOS_DOUBLE_STATE")
            .filter(|d| !d.is_empty())
            .ok_or("vyos_double: VYOS_DOUBLE_STATE is not set (the lab's sshd_config sets it with SetEnv)")?;
        let dir = PathBuf::from(dir);
        fs::create_dir_all(&dir).map_err(|e| format!("vyos_double: cannot create {}: {e}", dir.display()))?;
        Ok(State { dir })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn lock(&self) -> Result<Lock, String> {
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.path("lock"))
            .map_err(|e| format!("vyos_double: cannot open lock file: {e}"))?;
        f.lock().map_err(|e| format!("vyos_double: cannot lock state: {e}"))?;
        Ok(Lock(f))
    }

    fn read_config(&self, name: &str) -> Result<Option<Config>, String> {
        match fs::read_to_string(self.path(name)) {
            Ok(t) => Config::parse(&t).map(Some).map_err(|e| format!("vyos_double: corrupt state file {name}: {e}")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("vyos_double: cannot read state file {name}: {e}")),
        }
    }

    /// Writes atomically (temp file + rename), mode 0600: the config holds private keys.
    fn write(&self, name: &str, text: &str) -> Result<(), String> {
        let tmp = self.path(&format!(".{name}.tmp.{}", std::process::id()));
        let mut f = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| format!("vyos_double: cannot write {}: {e}", tmp.display()))?;
        f.write_all(text.as_bytes()).map_err(|e| format!("vyos_double: cannot write {name}: {e}"))?;
        drop(f);
        fs::rename(&tmp, self.path(name)).map_err(|e| format!("vyos_double: cannot write {name}: {e}"))
    }

    fn remove(&self, name: &str) {
        let _ = fs::remove_file(self.path(name));
    }

    fn running(&self) -> Result<Config, String> {
        Ok(self.read_config("running")?.unwrap_or_default())
    }

    fn log(&self, msg: &str) {
        if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(self.path("double.log")) {
            let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
            let _ = writeln!(f, "{t} [{}] {msg}", std::process::id());
        }
    }

    /// How many seconds one commit-confirm "minute" lasts: 60 on a real router; tests shorten
    /// it with VYOS_DOUBLE_CONFIRM_UNIT (or the state file `confirm_unit`): `seconds` makes a
    /// minute one second, a number S makes it S seconds.
    fn seconds_per_minute(&self) -> u64 {
        let unit = std::env::var("VYOS_DOUBLE_CONFIRM_UNIT")
            .ok()
            .or_else(|| fs::read_to_string(self.path("confirm_unit")).ok());
        match unit.as_deref().map(str::trim) {
            Some("seconds") => 1,
            Some(n) => n.parse().ok().filter(|s| *s > 0).unwrap_or(60),
            None => 60,
        }
    }

    /// Which vyatta-cfg this router has: sagitta's (VyOS 1.4, the default), whose
    /// `commit-confirm` always prompts, or the newer one with `commit-confirm ... no-prompt`
    /// (`VYOS_DOUBLE_COMMIT_CONFIRM=no-prompt`, or a state file `commit_confirm_form` holding
    /// `no-prompt`).
    fn no_prompt_form(&self) -> bool {
        let form = std::env::var("VYOS_DOUBLE_COMMIT_CONFIRM")
            .ok()
            .or_else(|| fs::read_to_string(self.path("commit_confirm_form")).ok());
        form.as_deref().map(str::trim) == Some("no-prompt")
    }

    fn confirm_in_seconds(&self) -> bool {
        self.seconds_per_minute() != 60
    }

    /// "Boot": a state dir without a running config loads the saved one (or the factory default)
    /// and realizes it. A reboot also ends a pending commit-confirm.
    fn boot_if_needed(&self) -> Result<(), String> {
        let _lock = self.lock()?;
        if self.path("running").exists() {
            return Ok(());
        }
        let boot = match self.read_config("saved")? {
            Some(c) => c,
            None => Config::parse(FACTORY_DEFAULT)?,
        };
        self.remove("confirm.pending");
        self.remove("confirm.previous");
        self.log("boot: loading the saved configuration");
        if let Err(e) = realize(self, &Config::default(), &boot) {
            self.log(&format!("boot: realization failed: {e}"));
        }
        self.write("running", &boot.text())
    }
}

// ---------------------------------------------------------------------------------------------
// External tools

fn tool(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .env("PATH", TOOL_PATH)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", args[0]))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("`{}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

fn wg_genkey() -> Result<String, String> {
    Ok(tool(&["wg", "genkey"])?.trim().to_string())
}

fn wg_pubkey(private: &str) -> Result<String, String> {
    let mut child = Command::new("wg")
        .arg("pubkey")
        .env("PATH", TOOL_PATH)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run wg: {e}"))?;
    child.stdin.take().ok_or("no stdin")?.write_all(format!("{private}\n").as_bytes()).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err("`wg pubkey` failed: invalid private key".to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A key in a 0600 file (for `wg set ... private-key FILE`), removed when dropped.
struct KeyFile(PathBuf);

impl KeyFile {
    fn new(st: &State, tag: &str, key: &str) -> Result<KeyFile, String> {
        let path = st.path(&format!(".key-{tag}-{}", std::process::id()));
        let _ = fs::remove_file(&path);
        let mut f = fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("cannot create key file: {e}"))?;
        f.write_all(format!("{key}\n").as_bytes()).map_err(|e| format!("cannot write key file: {e}"))?;
        Ok(KeyFile(path))
    }

    fn arg(&self) -> &str {
        self.0.to_str().unwrap_or("")
    }
}

impl Drop for KeyFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

// ---------------------------------------------------------------------------------------------
// What the configuration means on the host

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Peer {
    public_key: Option<String>,
    preshared_key: Option<String>,
    allowed_ips: Vec<String>,
    address: Option<String>,
    port: Option<String>,
    keepalive: Option<String>,
    disable: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct WgIf {
    private_key: Option<String>,
    port: Option<String>,
    addresses: Vec<String>,
    mtu: Option<String>,
    fwmark: Option<String>,
    disable: bool,
    peers: BTreeMap<String, Peer>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Route {
    blackhole: bool,
    interfaces: BTreeSet<String>,
    next_hops: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct Model {
    wg: BTreeMap<String, WgIf>,
    routes: BTreeMap<String, Route>,
}

impl Model {
    fn of(c: &Config) -> Model {
        let mut m = Model::default();
        let mut disabled: BTreeSet<(String, String)> = BTreeSet::new();
        for e in &c.entries {
            let p: Vec<&str> = e.path.iter().map(String::as_str).collect();
            let v = e.value.clone();
            match p.as_slice() {
                ["interfaces", "wireguard", ifn, rest @ ..] => {
                    let w = m.wg.entry(ifn.to_string()).or_default();
                    match rest {
                        ["private-key"] => w.private_key = v,
                        ["port"] => w.port = v,
                        ["address"] => w.addresses.extend(v),
                        ["mtu"] => w.mtu = v,
                        ["fwmark"] => w.fwmark = v,
                        ["disable"] => w.disable = true,
                        ["peer", name, prest @ ..] => {
                            let peer = w.peers.entry(name.to_string()).or_default();
                            match prest {
                                ["public-key"] => peer.public_key = v,
                                ["preshared-key"] => peer.preshared_key = v,
                                ["allowed-ips"] => peer.allowed_ips.extend(v),
                                ["address"] => peer.address = v,
                                ["port"] => peer.port = v,
                                ["persistent-keepalive"] => peer.keepalive = v,
                                ["disable"] => peer.disable = true,
                                _ => {}
                            }
                        }
                        _ => {}
                    }
                }
                ["protocols", "static", "route" | "route6", prefix, rest @ ..] => {
                    let r = m.routes.entry(prefix.to_string()).or_default();
                    match rest {
                        ["blackhole", ..] => r.blackhole = true,
                        ["interface", i, "disable"] | ["next-hop", i, "disable"] => {
                            disabled.insert((prefix.to_string(), i.to_string()));
                        }
                        ["interface", i, ..] => {
                            r.interfaces.insert(i.to_string());
                        }
                        ["next-hop", a, ..] => {
                            r.next_hops.insert(a.to_string());
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        for (prefix, hop) in disabled {
            if let Some(r) = m.routes.get_mut(&prefix) {
                r.interfaces.remove(&hop);
                r.next_hops.remove(&hop);
            }
        }
        m
    }
}

/// VyOS's verify() of interfaces_wireguard.py: (section, message) of the first failure.
fn verify(c: &Config) -> Result<(), (String, String)> {
    let m = Model::of(c);
    for (ifn, w) in &m.wg {
        let section = format!("interfaces wireguard {ifn}");
        let Some(private) = &w.private_key else {
            return Err((section, "Wireguard private-key not defined".to_string()));
        };
        let own_public = wg_pubkey(private).ok();
        let mut public_keys = vec![];
        for (name, p) in &w.peers {
            let base = format!("WireGuard peer \"{name}\":");
            if p.allowed_ips.is_empty() {
                return Err((section, format!("{base} missing mandatory allowed-ips!")));
            }
            let Some(pk) = &p.public_key else {
                return Err((section, format!("{base} missing mandatory public-key!")));
            };
            if public_keys.contains(pk) {
                return Err((section, format!("{base} duplicate public-key!")));
            }
            if !p.disable && own_public.as_ref() == Some(pk) {
                return Err((section, format!("{base} identical public key as interface \"{ifn}\"!")));
            }
            if p.port.is_some() != p.address.is_some() {
                return Err((
                    section,
                    format!("{base} both port and address/host-name must be defined if either one of them is set!"),
                ));
            }
            public_keys.push(pk.clone());
        }
    }
    Ok(())
}

/// Makes the host match `new`, coming from `old` (the previously realized config). WireGuard
/// interfaces and peers are reconciled against the kernel, so a wiped host (boot) is rebuilt.
fn realize(st: &State, old: &Config, new: &Config) -> Result<(), String> {
    let (om, nm) = (Model::of(old), Model::of(new));
    for prefix in om.routes.keys().filter(|p| !nm.routes.contains_key(*p)) {
        st.log(&format!("ip route del {prefix}"));
        let _ = tool(&["ip", "route", "del", prefix]);
    }
    for ifn in om.wg.keys().filter(|i| !nm.wg.contains_key(*i)) {
        // wireguard-go exits (and removes its socket) when its device is deleted.
        st.log(&format!("ip link del {ifn}"));
        let _ = tool(&["ip", "link", "del", "dev", ifn]);
    }
    for (ifn, w) in &nm.wg {
        realize_wg(st, ifn, w, om.wg.get(ifn))?;
    }
    for (prefix, r) in &nm.routes {
        let result = if r.blackhole {
            tool(&["ip", "route", "replace", "blackhole", prefix])
        } else if let Some(dev) = r.interfaces.iter().next() {
            tool(&["ip", "route", "replace", prefix, "dev", dev])
        } else if let Some(via) = r.next_hops.iter().next() {
            tool(&["ip", "route", "replace", prefix, "via", via])
        } else {
            let _ = tool(&["ip", "route", "del", prefix]);
            Ok(String::new())
        };
        // FRR keeps a static route whose next hop is unusable in its config, inactive: so does
        // the double (the commit does not fail).
        match result {
            Ok(_) => st.log(&format!("route {prefix}: {r:?}")),
            Err(e) => st.log(&format!("route {prefix} inactive: {e}")),
        }
    }
    Ok(())
}

fn realize_wg(st: &State, ifn: &str, w: &WgIf, old: Option<&WgIf>) -> Result<(), String> {
    if tool(&["ip", "link", "show", "dev", ifn]).is_err() {
        st.log(&format!("wireguard-go {ifn}"));
        let status = Command::new("wireguard-go")
            .arg(ifn)
            .env("PATH", TOOL_PATH)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run wireguard-go: {e}"))?;
        if !status.success() {
            return Err(format!("wireguard-go {ifn} failed ({status})"));
        }
        let start = Instant::now();
        while tool(&["wg", "show", ifn, "public-key"]).is_err() {
            if start.elapsed() > Duration::from_secs(5) {
                return Err(format!("wireguard-go {ifn} did not come up"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    if let Some(k) = &w.private_key {
        let f = KeyFile::new(st, ifn, k)?;
        tool(&["wg", "set", ifn, "private-key", f.arg()])?;
    }
    match (&w.port, old.and_then(|o| o.port.as_ref())) {
        (Some(p), _) => drop(tool(&["wg", "set", ifn, "listen-port", p])?),
        (None, Some(_)) => drop(tool(&["wg", "set", ifn, "listen-port", "0"])?),
        (None, None) => {}
    }
    tool(&["wg", "set", ifn, "fwmark", w.fwmark.as_deref().unwrap_or("0")])?;

    let kernel: Vec<String> = tool(&["wg", "show", ifn, "peers"])?.lines().map(|l| l.trim().to_string()).collect();
    let desired: Vec<&Peer> = w.peers.values().filter(|p| !p.disable && p.public_key.is_some()).collect();
    for k in &kernel {
        if !desired.iter().any(|p| p.public_key.as_ref() == Some(k)) {
            st.log(&format!("wg set {ifn} peer {k} remove"));
            tool(&["wg", "set", ifn, "peer", k, "remove"])?;
        }
    }
    for p in desired {
        let pk = p.public_key.as_deref().unwrap_or_default();
        let unchanged = kernel.iter().any(|k| k == pk)
            && old.is_some_and(|o| o.peers.values().any(|op| op.public_key.as_deref() == Some(pk) && op == p));
        if unchanged {
            continue;
        }
        if kernel.iter().any(|k| k == pk) {
            tool(&["wg", "set", ifn, "peer", pk, "remove"])?;
        }
        let ips = p.allowed_ips.join(",");
        let mut args: Vec<String> =
            ["wg", "set", ifn, "peer", pk, "allowed-ips", &ips].iter().map(|s| s.to_string()).collect();
        if let (Some(a), Some(port)) = (&p.address, &p.port) {
            let host = if a.contains(':') { format!("[{a}]") } else { a.clone() };
            args.extend(["endpoint".to_string(), format!("{host}:{port}")]);
        }
        args.extend(["persistent-keepalive".to_string(), p.keepalive.clone().unwrap_or_else(|| "off".into())]);
        let psk = match &p.preshared_key {
            Some(k) => Some(KeyFile::new(st, &format!("{ifn}-psk"), k)?),
            None => None,
        };
        if let Some(f) = &psk {
            args.extend(["preshared-key".to_string(), f.arg().to_string()]);
        }
        st.log(&format!("wg set {ifn} peer {pk} allowed-ips {ips} ..."));
        tool(&args.iter().map(String::as_str).collect::<Vec<_>>())?;
    }

    let current: Vec<String> = tool(&["ip", "-o", "addr", "show", "dev", ifn])?
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace().skip_while(|w| *w != "inet" && *w != "inet6");
            it.next()?;
            it.next().map(str::to_string)
        })
        .filter(|a| !a.starts_with("fe80:"))
        .collect();
    for a in current.iter().filter(|a| !w.addresses.contains(a)) {
        let _ = tool(&["ip", "addr", "del", a, "dev", ifn]);
    }
    for a in &w.addresses {
        st.log(&format!("ip addr replace {a} dev {ifn}"));
        tool(&["ip", "addr", "replace", a, "dev", ifn])?;
    }
    tool(&["ip", "link", "set", "dev", ifn, "mtu", w.mtu.as_deref().unwrap_or("1420")])?;
    tool(&["ip", "link", "set", "dev", ifn, if w.disable { "down" } else { "up" }])?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// commit-confirm

struct Pending {
    token: String,
    deadline_ms: u128,
    action: String,
}

fn now_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0)
}

fn read_pending(st: &State) -> Option<Pending> {
    let text = fs::read_to_string(st.path("confirm.pending")).ok()?;
    let get = |k: &str| text.lines().find_map(|l| l.strip_prefix(&format!("{k}=")).map(str::to_string));
    Some(Pending { token: get("token")?, deadline_ms: get("deadline_ms")?.parse().ok()?, action: get("action")? })
}

/// Where a commit-confirm is in systemd's terms. VyOS 1.4 keeps no state of its own for it:
/// vyos-1x `python/vyos/config_mgmt.py` `commit_confirm` runs `sudo systemd-run --quiet
/// --on-active={minutes}m --unit=commit-confirm <revert>` (`timer_name = 'commit-confirm'`), a
/// transient `commit-confirm.timer` that starts `commit-confirm.service` (the revert) when it
/// elapses, and every later question is `is_systemd_service_active('commit-confirm.timer')`
/// (`python/vyos/utils/process.py`: `systemctl show --value -p ActiveState`, `== 'active'`):
/// `commit_confirm`'s `Another confirm is pending`, `confirm`'s `No confirm pending`. systemd-run
/// makes its timers with `RemainAfterElapse=no` (systemd `src/run/run.c`,
/// `transient_timer_set_properties`), so once elapsed the timer is gone (inactive) while its
/// service runs the revert. The double's `confirm.pending` holds the same facts: armed and
/// before its deadline is the timer; past it, until the reverter removed it, the service.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ConfirmTimer {
    /// No commit-confirm, or confirmed, or reverted: both units inactive.
    None,
    /// `commit-confirm.timer` active: the revert is due.
    Armed,
    /// The timer elapsed; `commit-confirm.service` runs the revert.
    Reverting,
}

fn confirm_timer(st: &State) -> ConfirmTimer {
    match read_pending(st) {
        None => ConfirmTimer::None,
        Some(p) if now_ms() < p.deadline_ms => ConfirmTimer::Armed,
        Some(_) => ConfirmTimer::Reverting,
    }
}

/// The `ActiveState` systemd reports for one of commit-confirm's units; None for any other unit
/// (the double models no other).
fn unit_active_state(st: &State, unit: &str) -> Option<&'static str> {
    let t = confirm_timer(st);
    match unit {
        "commit-confirm.timer" => Some(if t == ConfirmTimer::Armed { "active" } else { "inactive" }),
        "commit-confirm.service" => Some(if t == ConfirmTimer::Reverting { "active" } else { "inactive" }),
        _ => None,
    }
}

/// `systemctl` as the router's shell finds it: the double links itself as `systemctl` first on
/// the PATH of the plain shell commands it runs ([`shell_path`]: the login shell, a script's
/// shell lines). It answers what reads a unit's state, for commit-confirm's two units, from the
/// double's state as systemd would: `show [--value] -p ActiveState UNIT...` (what VyOS's own
/// `is_systemd_service_active` runs; without `--value` `ActiveState=...`; units separated by an
/// empty line) and `is-active [--quiet] UNIT...` (systemctl(1): one state per unit, exit 0 when one is active, else 3).
/// Anything else (another verb, property or unit) is refused with exit 1 and a `vyos_double:`
/// line: never a silent answer.
fn systemctl(args: &[String]) -> ExitCode {
    let refuse = |why: String| {
        eprintln!(
            "vyos_double: systemctl {}: {why} (the double models only reading commit-confirm's units)",
            args.join(" ")
        );
        ExitCode::FAILURE
    };
    let st = match State::from_env() {
        Ok(s) => s,
        Err(e) => return refuse(e),
    };
    let (mut value, mut quiet, mut props, mut words) = (false, false, Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--value" => value = true,
            "--quiet" | "-q" => quiet = true,
            "--no-pager" => {}
            "-p" | "--property" => props.push(it.next().cloned().unwrap_or_default()),
            _ if a.starts_with("--property=") => props.push(a["--property=".len()..].to_string()),
            _ if a.starts_with("-p") => props.push(a[2..].to_string()),
            _ if a.starts_with('-') => return refuse(format!("option {a} is not modelled")),
            _ => words.push(a.as_str()),
        }
    }
    let Some((verb, units)) = words.split_first() else { return refuse("no command".into()) };
    let mut states = Vec::new();
    for u in units {
        match unit_active_state(&st, u) {
            Some(s) => states.push(s),
            None => return refuse(format!("unit {u} is not modelled")),
        }
    }
    if units.is_empty() {
        return refuse("no unit".into());
    }
    match *verb {
        "show" if props.iter().all(|p| p == "ActiveState") && !props.is_empty() => {
            let shown: Vec<String> =
                states.iter().map(|s| if value { format!("{s}\n") } else { format!("ActiveState={s}\n") }).collect();
            print!("{}", shown.join("\n"));
            ExitCode::SUCCESS
        }
        "show" => refuse("only `-p ActiveState` is modelled".into()),
        "is-active" => {
            if !quiet {
                for s in &states {
                    println!("{s}");
                }
            }
            if states.contains(&"active") { ExitCode::SUCCESS } else { ExitCode::from(3) }
        }
        v => refuse(format!("`{v}` is not modelled")),
    }
}

/// The revert process: detached (setsid, nohup, stdio on /dev/null) so the SSH session can end.
fn reverter(token: &str) -> ExitCode {
    let st = match State::from_env() {
        Ok(s) => s,
        Err(_) => return ExitCode::FAILURE,
    };
    loop {
        let Some(p) = read_pending(&st).filter(|p| p.token == token) else {
            return ExitCode::SUCCESS; // confirmed (or replaced by a boot)
        };
        if now_ms() >= p.deadline_ms {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let Ok(_lock) = st.lock() else { return ExitCode::FAILURE };
    let Some(p) = read_pending(&st).filter(|p| p.token == token) else { return ExitCode::SUCCESS };
    let target = if p.action == "reload" {
        st.read_config("confirm.previous").ok().flatten()
    } else {
        // `reboot`: the router boots its saved configuration.
        st.read_config("saved").ok().flatten().or_else(|| Config::parse(FACTORY_DEFAULT).ok())
    };
    let Some(target) = target else {
        st.log("commit-confirm: nothing to revert to");
        return ExitCode::FAILURE;
    };
    let current = st.running().unwrap_or_default();
    st.log(&format!("commit-confirm not confirmed: reverting ({})", p.action));
    if let Err(e) = realize(&st, &current, &target) {
        st.log(&format!("commit-confirm revert: realization failed: {e}"));
    }
    let _ = st.write("running", &target.text());
    st.remove("confirm.pending");
    st.remove("confirm.previous");
    ExitCode::SUCCESS
}

/// The state's lock, taken once no commit-confirm revert runs. On VyOS a `commit-confirm` that
/// comes while the previous one's revert service runs finds no timer and goes on, and the
/// revert (a reboot on 1.4) then takes it away; the double instead lets the revert finish
/// first, so that no revert is ever lost (a deviation, in vyos_double.md).
fn lock_past_revert(st: &State) -> Result<Lock, Failed> {
    let started = Instant::now();
    loop {
        let lock = st.lock().map_err(Failed)?;
        if confirm_timer(st) != ConfirmTimer::Reverting {
            return Ok(lock);
        }
        drop(lock);
        if started.elapsed() > Duration::from_secs(60) {
            return Err(Failed("vyos_double: the commit-confirm revert did not finish within 60 s".into()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn spawn_reverter(token: &str) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?;
    Command::new("setsid")
        .arg("nohup")
        .arg(exe)
        .arg("__commit-confirm-revert")
        .arg(token)
        .env("PATH", TOOL_PATH)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| format!("cannot start the commit-confirm timer: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Interface definitions

fn spec_dir() -> PathBuf {
    std::env::var_os("VYOS_DOUBLE_SPEC_DIR").map(PathBuf::from).unwrap_or_else(VyosSpec::shared_dir)
}

fn load_partial_spec(st: &State, top: &str, second: Option<&str>) -> Option<VyosSpec> {
    let safe = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !safe(top) || !second.is_none_or(safe) {
        return None;
    }
    let dir = spec_dir();
    let required = ["interfaces_wireguard.xml.in", "protocols_static.xml.in"];
    let mut files: Vec<String> = vec![];
    for entry in fs::read_dir(&dir).ok()?.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".xml.in") {
            continue;
        }
        let text = fs::read_to_string(entry.path()).ok()?;
        let first = text.split("name=\"").nth(1).and_then(|r| r.split('"').next());
        if first == Some(top) && second.is_none_or(|s| text.contains(&format!("name=\"{s}\""))) {
            files.push(name);
        }
    }
    if files.is_empty() {
        return None;
    }
    files.extend(required.iter().map(|s| s.to_string()));
    files.sort();
    files.dedup();
    let cache = st.path(".spec-cache").join(format!("{top}__{}", second.unwrap_or("")));
    if !cache.is_dir() {
        let tmp = st.path(".spec-cache").join(format!(".tmp-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir_all(&tmp).ok()?;
        for f in files.iter().map(String::as_str).chain(["include"]) {
            std::os::unix::fs::symlink(dir.join(f), tmp.join(f)).ok()?;
        }
        if fs::rename(&tmp, &cache).is_err() {
            let _ = fs::remove_dir_all(&tmp); // another session made it first
        }
    }
    VyosSpec::load(&cache).ok()
}

// ---------------------------------------------------------------------------------------------
// stdin of a command in a script, and VyOS's yes/no question

/// What a command of a `vbash -s` script reads as its stdin.
enum Stdin {
    /// The script itself: the lines after the command (bash leaves them in the pipe).
    Script,
    /// `COMMAND <<< WORD`: WORD and a newline, then end of input.
    HereString(String),
}

/// The script of a `vbash -s` session as it arrives on stdin. bash reads a script from a pipe one
/// byte at a time (bash `input.c`: an unseekable fd is read unbuffered, so that the commands it
/// runs get the rest), and runs each line as soon as it has it: a client may send the script in
/// parts and read the answers in between (fabric's staged rotation does). The double reads the
/// same way, one byte at a time and never ahead, so whatever a line does not read stays in the
/// pipe: a shell line's bash (`Session::shell_line`) inherits the pipe itself and reads the rest
/// of the script from it as on VyOS, and a Python prompt takes one read of what is there
/// ([`PyStdin`]).
struct Script<'r> {
    src: Box<dyn Read + 'r>,
}

impl<'r> Script<'r> {
    /// `src` must not buffer (the process's stdin as a plain fd, not `std::io::stdin()`, which
    /// reads ahead into its own buffer).
    fn new(src: impl Read + 'r) -> Script<'r> {
        Script { src: Box::new(src) }
    }

    /// The next line (without its newline), waiting for it to arrive; None at end of input.
    fn line(&mut self) -> Option<String> {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            match self.src.read(&mut byte) {
                Ok(0) if line.is_empty() => return None,
                Ok(0) => break,
                Ok(_) if byte[0] == b'\n' => break,
                Ok(_) => line.push(byte[0]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) if line.is_empty() => return None,
                Err(_) => break,
            }
        }
        Some(String::from_utf8_lossy(&line).into_owned())
    }

    /// One read of Python's `TextIOWrapper` on the pipe: what it holds, up to `max` bytes
    /// (waiting for something when it is empty); empty at end of input.
    fn chunk(&mut self, max: usize) -> String {
        let mut buf = vec![0u8; max];
        let n = loop {
            match self.src.read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                r => break r.unwrap_or(0),
            }
        };
        let mut bytes = buf[..n].to_vec();
        // A chunk never splits a character (the decoder keeps the rest for the next read).
        while std::str::from_utf8(&bytes).is_err() {
            let mut more = [0u8; 1];
            match self.src.read(&mut more) {
                Ok(1) => bytes.push(more[0]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Python's `sys.stdin` as `input()` reads it from a pipe: a `TextIOWrapper` that fills its
/// buffer with up to 8192 bytes per read (CPython `Lib/_pyio.py` `TextIOWrapper._CHUNK_SIZE`),
/// whatever is available. The whole buffer leaves the pipe; what the process does not use is
/// lost to the shell when it exits. This is the read-ahead that swallows script lines.
struct PyStdin<'s> {
    source: &'s mut Stdin,
    buf: String,
}

impl PyStdin<'_> {
    const CHUNK: usize = 8192;

    /// One `input()`: a line without its newline, None at end of input (EOFError).
    fn input(&mut self, script: &mut Script<'_>) -> Option<String> {
        loop {
            if let Some(i) = self.buf.find('\n') {
                let line = self.buf[..i].to_string();
                self.buf.drain(..=i);
                return Some(line);
            }
            let chunk = match self.source {
                Stdin::HereString(h) => std::mem::take(h),
                Stdin::Script => script.chunk(Self::CHUNK),
            };
            if chunk.is_empty() {
                return (!self.buf.is_empty()).then(|| std::mem::take(&mut self.buf));
            }
            self.buf.push_str(&chunk);
        }
    }
}

/// vyos-1x `python/vyos/utils/io.py` `ask_yes_no` (same in sagitta and current): writes
/// `question [Y/n] ` (`[y/N]` when the default is no) and reads a line with `input()`: empty →
/// the default, `y`/`ye`/`yes` → yes, `n`/`no` → no (case-insensitive), anything else →
/// `Please respond with yes/y or no/n` and again. At end of input `input()` raises EOFError,
/// which it answers with `\nPlease respond with yes/y or no/n\n` and asks again: forever. The
/// double does the same (paced at 10 per second instead of a busy loop) until its output is
/// gone, i.e. until the client gives up; it never returns then.
fn ask_yes_no(question: &str, default: bool, stdin: &mut Stdin, script: &mut Script<'_>) -> bool {
    let mut out = std::io::stdout();
    let mark = if default { "[Y/n]" } else { "[y/N]" };
    let mut py = PyStdin { source: stdin, buf: String::new() };
    let mut told = false;
    loop {
        let _ = write!(out, "{question} {mark} ");
        let _ = out.flush();
        match py.input(script).map(|l| l.to_lowercase()) {
            Some(c) if c.is_empty() => return default,
            Some(c) if ["y", "ye", "yes"].contains(&c.as_str()) => return true,
            Some(c) if ["n", "no"].contains(&c.as_str()) => return false,
            Some(_) => {
                let _ = out.write_all(b"Please respond with yes/y or no/n\n");
            }
            None => loop {
                if out.write_all(b"\nPlease respond with yes/y or no/n\n").and_then(|()| out.flush()).is_err()
                    || write!(out, "{question} {mark} ").and_then(|()| out.flush()).is_err()
                {
                    std::process::exit(1);
                }
                if !told {
                    eprintln!("[vyos_double] the prompt met the end of its input: it asks forever, as VyOS does");
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(100));
            },
        }
    }
}

/// The status of a script line VyOS rejected: its message is printed and the script goes on.
/// sagitta vyatta-cfg `functions/interpreter/vyatta-cfg-run`: `set`/`delete` end in
/// `vyatta_cfg_print_output` (after `output=$(my_set ...)`) or in `vyatta_cfg_validate_cmd`'s
/// loop, both 0 whatever my_set said; `commit` ends in `unset` (0); `confirm` and `save` in
/// config-mgmt / `unmarkSessionUnsaved`. Op-mode commands keep their own status (1 here). A path
/// error is written to stderr (`vyatta_cfg_validate_cmd` uses `>&2`), the rest to stdout
/// (`my_commit 2>&1`, `vyatta_cfg_print_output`). What the double cannot model
/// (`vyos_double:`) stops the script.
fn line_status(words: &[String], result: Result<u8, Failed>) -> Result<u8, Failed> {
    match result {
        Ok(s) => Ok(s),
        Err(Failed(m)) if m.starts_with("vyos_double:") => Err(Failed(m)),
        Err(Failed(m)) => {
            if m.contains("] is not valid") || m.contains("] is ambiguous") {
                eprintln!("{m}");
            } else {
                say(&m);
            }
            Ok(if matches!(words[0].as_str(), "set" | "delete" | "commit" | "confirm" | "save") { 0 } else { 1 })
        }
    }
}

/// What `declare -f vyatta_config_commit-confirm` shows on a router: fabric reads it to learn
/// whether `commit-confirm` takes `no-prompt`. Not VyOS's text, only the lines that decide:
/// sagitta's vyatta-cfg `functions/interpreter/vyatta-cfg-run` calls
/// `config-mgmt commit_confirm -t=$minutes`, which prompts; vyatta-cfg's `current` (PR #153,
/// T9144, 2026) maps a `no-prompt` argument to config-mgmt's `-y`.
const COMMIT_CONFIRM_SAGITTA: &str = "vyatta_config_commit-confirm () \n{ \n    # vyos_double: the lines of vyatta-cfg (sagitta) functions/interpreter/vyatta-cfg-run that decide\n    cmd=\"${vyos_bin_dir}/config-mgmt commit_confirm -t=$minutes\";\n    eval \"sudo sg vyattacfg \\\"$cmd\\\" \"\n}";
const COMMIT_CONFIRM_NO_PROMPT: &str = "vyatta_config_commit-confirm () \n{ \n    # vyos_double: the lines of vyatta-cfg (current, T9144) functions/interpreter/vyatta-cfg-run that decide\n    if [ \"$arg\" = \"no-prompt\" ] && [ \"$in_comment\" = \"0\" ]; then\n        yes_flag=\"-y\";\n    fi;\n    cmd=\"${vyos_bin_dir}/config-mgmt commit_confirm -t=$minutes $yes_flag\";\n    eval \"sudo sg vyattacfg \\\"$cmd\\\" \"\n}";

// ---------------------------------------------------------------------------------------------
// Sessions

/// A failed command: the message is already VyOS-styled.
struct Failed(String);

enum Op {
    Set(Target),
    Delete(Target),
}

struct Session<'a> {
    st: &'a State,
    spec: Option<VyosSpec>,
    partial: BTreeMap<String, Option<VyosSpec>>,
    in_config: bool,
    /// Running config when the candidate was (re)based.
    base: Config,
    candidate: Config,
    /// This session's changes, replayed on the newest running config at commit (other sessions
    /// may have committed meanwhile, as with VyOS's per-session working copy).
    ops: Vec<Op>,
    /// Whether the script sourced the script-template: only then do its aliases (`run`, ...)
    /// exist in the script's shell lines (`ShellLine`).
    sourced: bool,
}

fn say(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    if !s.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

impl<'a> Session<'a> {
    fn new(st: &'a State) -> Session<'a> {
        Session {
            st,
            spec: None,
            partial: BTreeMap::new(),
            in_config: false,
            base: Config::default(),
            candidate: Config::default(),
            ops: vec![],
            sourced: false,
        }
    }

    /// The full definitions (slow to load in a debug build: ~3 s of regex compilation).
    fn full_spec(&mut self) -> Result<&VyosSpec, Failed> {
        if self.spec.is_none() {
            let spec = VyosSpec::load(&spec_dir())
                .map_err(|e| Failed(format!("vyos_double: cannot load the VyOS interface definitions: {e}")))?;
            self.spec = Some(spec);
        }
        Ok(self.spec.as_ref().expect("loaded"))
    }

    /// Definitions for a path starting with `top second`: only the files that define `top` and
    /// mention `second` (plus the two files VyosSpec requires), loaded from a directory of
    /// symlinks kept in the state dir. `None` when there is no such file.
    fn partial_spec(&mut self, top: &str, second: Option<&str>) -> Option<&VyosSpec> {
        let key = format!("{top} {}", second.unwrap_or(""));
        if !self.partial.contains_key(&key) {
            let spec = load_partial_spec(self.st, top, second);
            self.partial.insert(key.clone(), spec);
        }
        self.partial.get(&key).and_then(Option::as_ref)
    }

    fn rebase(&mut self) -> Result<(), Failed> {
        self.base = self.st.running().map_err(Failed)?;
        self.candidate = self.base.clone();
        self.ops.clear();
        Ok(())
    }

    fn require_config(&self, what: &str) -> Result<(), Failed> {
        if self.in_config {
            Ok(())
        } else {
            Err(Failed(format!(
                "vyos_double: `{what}` needs configuration mode (run `configure` first; in real VyOS op mode, \
                 `set` is bash's builtin and silently does nothing)"
            )))
        }
    }

    /// Runs a script as `vbash -s` does, line by line, and returns the exit status of the last
    /// command (bash's rule for a script). A command VyOS rejects prints VyOS's error and the
    /// script goes on, as in VyOS (nothing in the script-template sets `-e`); see
    /// `line_status` for each command's status. Only what the double cannot model stops it
    /// (exit 1, a `vyos_double:` message).
    ///
    /// stdin: bash reads a script from a pipe one byte at a time and runs each line once it has
    /// it ([`Script`]), so a command that reads stdin gets the script lines after its own.
    /// `commit-confirm`'s prompt is such a command (`Stdin`).
    ///
    /// A line whose first word is none of VyOS's (`is_script_command`) is bash: vbash is a
    /// bash, and VyOS's commands are only aliases and functions the script-template adds to it.
    /// It runs for real (`shell_line`).
    fn run_script(&mut self, script: &mut Script<'_>) -> Result<u8, Failed> {
        let mut status = 0;
        while let Some(line) = script.line() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // Not a VyOS command: a line of bash, as vbash runs it (see `shell_line`).
            if !is_script_command(line.split_whitespace().next().unwrap_or_default()) {
                status = self.shell_line(line)?;
                continue;
            }
            let mut words: Vec<String> = split_words(line)
                .map_err(|e| Failed(format!("vyos_double: {e}")))?
                .into_iter()
                .map(|w| w.text)
                .collect();
            // `cmd ... <<< WORD`: bash gives the command WORD and a newline as its stdin, and
            // the script's stdin stays untouched (bash manual, "Here Strings").
            let mut here: Option<String> = None;
            if let Some(i) = words.iter().position(|w| w == "<<<") {
                if i + 2 != words.len() {
                    return Err(Failed(format!(
                        "vyos_double: only `COMMAND <<< WORD` is modelled as a redirection, got `{line}`"
                    )));
                }
                here = words.pop().map(|w| format!("{w}\n"));
                words.pop();
            }
            let Some(first) = words.first().map(String::as_str) else { continue };
            status = if first == "commit-confirm" {
                let mut stdin = match &here {
                    Some(h) => Stdin::HereString(h.clone()),
                    None => Stdin::Script,
                };
                self.commit_confirm(&words, &mut stdin, script)?
            } else {
                let result = self.command(&words, line);
                line_status(&words, result)?
            };
        }
        Ok(status)
    }

    /// A script line that is bash, not a VyOS command: a `vbash -s` script is a bash script, and
    /// VyOS's words are aliases and functions the script-template defines (vyatta-cfg
    /// `functions/wrapper/script-template`; see `template_preamble`). The double runs the line in
    /// a real `bash -c` in the router's namespaces (as root, with the login shell's PATH:
    /// [`shell_path`], so `systemctl` answers for commit-confirm's units), with:
    /// - once the script sourced the template, the template's aliases: `run` is an op-mode
    ///   command of this double (a fresh process, `__op`: op mode needs no configuration
    ///   session); any other (a prefix of a configuration command, `configure`, `exit`, a
    ///   template function) is refused, since a child shell cannot share this session: the
    ///   script stops (exit 1, `vyos_double:`), louder than VyOS. Before the template, `run` is
    ///   no command at all (bash: `command not found`, 127), as on VyOS;
    /// - stdin: the session's own stdin, the pipe the script arrives on ([`Script`] never reads
    ///   ahead of the line it runs): what the line reads is gone for the script, and the rest
    ///   arrives as it is sent, as on VyOS.
    ///
    /// Its status is the line's (bash's `$?`).
    fn shell_line(&mut self, line: &str) -> Result<u8, Failed> {
        let fail = |what: &str, e: std::io::Error| Failed(format!("vyos_double: cannot {what} for a shell line: {e}"));
        // What this process printed comes before what the line prints.
        let _ = std::io::stdout().flush();
        let refused = self.st.path(&format!(".refused.{}", std::process::id()));
        let _ = fs::remove_file(&refused);
        let exe = std::env::current_exe().map_err(|e| fail("find the double's own path", e))?;
        let path = shell_path(self.st).map_err(Failed)?;
        let preamble = if self.sourced { template_preamble() } else { String::new() };
        let status = Command::new("bash")
            .arg("-c")
            .arg(format!("{preamble}{line}\n"))
            .env("PATH", path)
            .env("VYOS_DOUBLE_EXE", exe)
            .env("VYOS_DOUBLE_REFUSED", &refused)
            .stdin(Stdio::inherit())
            .status()
            .map_err(|e| fail("run bash", e));
        let refusal = fs::read_to_string(&refused).unwrap_or_default();
        let _ = fs::remove_file(&refused);
        if !refusal.trim().is_empty() {
            return Err(Failed(format!(
                "vyos_double: a shell line used a VyOS command the double does not model there: {} \
                 (`{line}`; see crates/testkit/src/vyos_double.md, \"Shell lines\")",
                refusal.trim()
            )));
        }
        Ok(status?.code().map_or(1, |c| c.clamp(0, 255) as u8))
    }

    /// One script line other than `commit-confirm`; Ok(exit status).
    fn command(&mut self, words: &[String], line: &str) -> Result<u8, Failed> {
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        let ok = |r: Result<(), Failed>| r.map(|()| 0);
        match w.as_slice() {
            ["source", path] if path.ends_with("/script-template") => {
                self.sourced = true;
                Ok(0)
            }
            ["configure"] => {
                if !self.in_config {
                    let _lock = self.st.lock().map_err(Failed)?;
                    self.rebase()?;
                    self.in_config = true;
                }
                Ok(0)
            }
            // What `commit-confirm` will run: fabric reads it to learn whether this router's
            // commit-confirm takes `no-prompt` (see `COMMIT_CONFIRM_*`).
            ["declare", "-f", "vyatta_config_commit-confirm"] => {
                say(if self.st.no_prompt_form() { COMMIT_CONFIRM_NO_PROMPT } else { COMMIT_CONFIRM_SAGITTA });
                Ok(0)
            }
            ["set" | "delete", ..] => {
                self.require_config(w[0])?;
                ok(self.set_delete(words, line))
            }
            // vyatta-cfg-run `vyatta_config_commit`: `return 1` when the session has no change,
            // else the status of its last command (`unset`): 0, even when the commit failed.
            ["commit"] | ["commit", "comment", _] => {
                self.require_config("commit")?;
                match self.commit() {
                    Ok(Some(_)) => Ok(0),
                    Ok(None) => Ok(1),
                    Err(e) => Err(e),
                }
            }
            ["confirm"] => {
                self.require_config("confirm")?;
                ok(self.confirm())
            }
            ["compare"] | ["compare", "commands"] => {
                self.require_config("compare")?;
                self.compare();
                Ok(0)
            }
            ["discard"] => {
                self.require_config("discard")?;
                let changed = !self.ops.is_empty() && self.candidate != self.base;
                let _lock = self.st.lock().map_err(Failed)?;
                self.rebase()?;
                say(if changed { "Changes have been discarded" } else { "No changes have been discarded" });
                Ok(0)
            }
            ["save"] | ["run", "save"] => ok(self.save()),
            // In a script, `exit` is the script-template's alias `eval $(vyatta_exit_configure)`
            // (vyatta-cfg functions/wrapper/script-template, defined after the interactive
            // aliases, so it wins): the session is torn down, uncommitted changes are dropped,
            // nothing is printed and the shell goes on.
            ["exit" | "end_configure"] | ["exit", "discard"] if self.in_config => {
                self.candidate = self.base.clone();
                self.ops.clear();
                self.in_config = false;
                Ok(0)
            }
            ["exit"] | ["exit", _] | ["true"] | [":"] => Ok(0),
            ["rollback", ..] | ["rollback-soft", ..] | ["load", ..] | ["merge", ..] => {
                Err(Failed(format!("vyos_double: `{line}` is not supported by the VyOS test double")))
            }
            ["run", rest @ ..] => ok(self.op(rest)),
            ["generate", "pki", ..] if self.in_config => ok(self.op(&w)),
            ["show", ..] if self.in_config => Err(Failed(format!(
                "vyos_double: configuration-mode `{line}` is not supported; use `run show configuration commands`"
            ))),
            _ => ok(self.op(&w)),
        }
    }

    fn set_delete(&mut self, words: &[String], line: &str) -> Result<(), Failed> {
        let verb = words[0].clone();
        let (label, failed) = if verb == "set" { ("Set", "Set failed") } else { ("Delete", "Delete failed") };
        let path_text = words[1..].join(" ");
        // Fault injection (a test extension): while a state file `reject_set` exists, a `set`
        // whose path starts with its content fails as a value VyOS refuses would (my_set:
        // `Value validation failed`, `Set failed`), so that tests can make one line of a
        // script fail on a router while the rest is valid.
        if verb == "set"
            && let Ok(prefix) = fs::read_to_string(self.st.path("reject_set"))
            && !prefix.trim().is_empty()
            && path_text.starts_with(prefix.trim())
        {
            return Err(Failed(format!(
                "\n  Value validation failed\n  {failed}\n\n[vyos_double] {label} rejected by fault injection (state file reject_set)"
            )));
        }
        // VyOS 1.4 (sagitta) has no `system config-management commit-confirm`: sagitta's
        // vyos-1x `interface-definitions/system_config-management.xml.in` defines only
        // `commit-archive` and `commit-revisions`; the node (`action reload|reboot`) came with
        // T5976 (vyos-1x PR #4128, October 2024) on `current`, whose definitions
        // ../shared/specs holds. Playing sagitta the double refuses it as 1.4 does; playing the
        // newer vyatta-cfg (2026, `no-prompt`) it has it.
        let commit_confirm_node = ["system", "config-management", "commit-confirm"];
        if !self.st.no_prompt_form()
            && words.len() > 3
            && words[1..4].iter().zip(commit_confirm_node).all(|(w, n)| w.as_str() == n)
        {
            return Err(Failed(format!(
                "\n  Configuration path: [{path_text}] is not valid\n  {failed}\n\n[vyos_double] {label} rejected: \
                 VyOS 1.4 (sagitta) has no `system config-management commit-confirm` (vyos-1x T5976 is newer)"
            )));
        }
        // The partial definitions decide a valid command quickly; a rejected one is re-checked
        // against all of them (complete error message, no false rejection).
        let partial_ok = words.len() > 1
            && self.partial_spec(&words[1], words.get(2).map(String::as_str)).is_some_and(|s| s.check(line).is_ok());
        let spec = if partial_ok {
            self.partial_spec(&words[1], words.get(2).map(String::as_str)).expect("loaded")
        } else {
            self.full_spec()?
        };
        if let Err(e) = spec.check(line) {
            let head = if e.starts_with("unknown path component") {
                format!("Configuration path: [{path_text}] is not valid")
            } else if e.starts_with("missing") {
                format!("Configuration path: [{path_text}] requires a value")
            } else {
                format!("{e}\n  Value validation failed")
            };
            return Err(Failed(format!(
                "\n  {head}\n  {failed}\n\n[vyos_double] {label} rejected by the VyOS interface definitions: {e}"
            )));
        }
        let target = classify(spec, &words[1..]).map_err(|e| Failed(format!("vyos_double: {e}")))?;
        if verb == "set" {
            self.candidate.apply_set(&target);
            self.ops.push(Op::Set(target));
        } else {
            self.candidate.apply_delete(&target).map_err(|e| Failed(format!("\n  {e}\n  {failed}\n")))?;
            self.ops.push(Op::Delete(target));
        }
        Ok(())
    }

    /// The newest running config, and this session's changes replayed on it.
    fn replayed(&self) -> Result<(Config, Config), Failed> {
        let running = self.st.running().map_err(Failed)?;
        let mut new = running.clone();
        for op in &self.ops {
            match op {
                Op::Set(t) => new.apply_set(t),
                Op::Delete(t) => drop(new.apply_delete(t)),
            }
        }
        Ok((running, new))
    }

    /// Commits this session's changes; Ok(Some(previous running)) when something changed.
    fn commit_locked(&mut self) -> Result<Option<Config>, Failed> {
        let (running, new) = self.replayed()?;
        if new == running {
            say("No configuration changes to commit");
            self.base = running;
            self.candidate = new;
            self.ops.clear();
            return Ok(None);
        }
        if let Err((section, msg)) = verify(&new) {
            return Err(Failed(format!("\n[ {section} ]\n{msg}\n\n[[{section}]] failed\nCommit failed")));
        }
        if let Err(e) = realize(self.st, &running, &new) {
            self.st.log(&format!("commit: realization failed: {e}; restoring"));
            let _ = realize(self.st, &new, &running);
            return Err(Failed(format!("\n[ vyos_double ]\n{e}\n\nCommit failed")));
        }
        self.st.write("running", &new.text()).map_err(Failed)?;
        self.st.log("commit");
        self.base = new.clone();
        self.candidate = new;
        self.ops.clear();
        Ok(Some(running))
    }

    fn commit(&mut self) -> Result<Option<Config>, Failed> {
        let _lock = self.st.lock().map_err(Failed)?;
        self.commit_locked()
    }

    /// Whether this session's changes, replayed on the newest running config, change it
    /// (vyatta-cfg's `sessionChanged`, which `commit` and `commit-confirm` ask first).
    fn session_changed(&self) -> Result<bool, Failed> {
        let (running, new) = self.replayed()?;
        Ok(new != running)
    }

    /// `commit-confirm [N] [no-prompt]`, in the order VyOS runs it:
    /// 1. vyatta-cfg `functions/interpreter/vyatta-cfg-run` `vyatta_config_commit-confirm`:
    ///    nothing changed → `No configuration changes to commit`, `return 1`, no prompt;
    /// 2. vyos-1x `python/vyos/config_mgmt.py` `commit_confirm` (run by that function with the
    ///    script's stdin): a pending timer → `Another confirm is pending` (config-mgmt exits 1);
    ///    else the question, answered by `python/vyos/utils/io.py` `ask_yes_no` from stdin
    ///    (`ask_yes_no` below); no → `commit-confirm canceled`; yes → the timer is armed and
    ///    `Initialized commit-confirm; N minutes to confirm before reboot|reload` printed;
    /// 3. only then, and only when config-mgmt exited 0, `vyatta_config_commit`, whose failure
    ///    leaves the timer armed.
    ///
    /// The function ends in `if [ $? = 0 ]; then ...; unset IN_COMMIT_CONFIRM; fi`: its status is
    /// 0 in every case but 1.
    fn commit_confirm(&mut self, words: &[String], stdin: &mut Stdin, script: &mut Script<'_>) -> Result<u8, Failed> {
        self.require_config("commit-confirm")?;
        let mut args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        let no_prompt = match args.iter().position(|a| *a == "no-prompt") {
            Some(i) if self.st.no_prompt_form() => {
                args.remove(i);
                true
            }
            Some(_) => {
                return Err(Failed(
                    "vyos_double: VyOS 1.4 (sagitta) has no `commit-confirm ... no-prompt`: its vyatta-cfg-run takes \
                     the word for a commit argument (not modelled). Read `declare -f vyatta_config_commit-confirm` \
                     to learn the form a router supports"
                        .to_string(),
                ));
            }
            None => false,
        };
        let n: u64 = match args.as_slice() {
            [] => DEFAULT_CONFIRM_MINUTES,
            [n] => n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                Failed(format!("vyos_double: commit-confirm needs a positive number of minutes, got '{n}'"))
            })?,
            _ => return Err(Failed(format!("vyos_double: `commit-confirm {}` is not modelled", args.join(" ")))),
        };
        {
            let _lock = lock_past_revert(self.st)?;
            if !self.session_changed()? {
                say("No configuration changes to commit");
                return Ok(1);
            }
            if confirm_timer(self.st) == ConfirmTimer::Armed {
                say("Another confirm is pending");
                return Ok(0);
            }
        }
        let action =
            self.candidate.value(&["system", "config-management", "commit-confirm", "action"]).unwrap_or("reboot");
        let action = if action == "reload" { "reload" } else { "reboot" };
        let unsaved = self.st.read_config("saved").ok().flatten().as_ref() != Some(&self.st.running().map_err(Failed)?);
        let warn = if unsaved { "\nYou should save previous commits before commit-confirm !\n" } else { "" };
        // The question as config_mgmt.py words it (sagitta: reboot only; current: both).
        let question = if action == "reload" {
            format!(
                "\ncommit-confirm will automatically reload previous config in {n} minutes\nunless changes are confirmed.\nProceed ?"
            )
        } else {
            format!(
                "{warn}\ncommit-confirm will automatically reboot in {n} minutes unless changes\nare confirmed.\n\nProceed ?"
            )
        };
        if !no_prompt && !ask_yes_no(&question, true, stdin, script) {
            say("commit-confirm canceled");
            return Ok(0);
        }
        let _lock = lock_past_revert(self.st)?;
        if confirm_timer(self.st) == ConfirmTimer::Armed {
            say("Another confirm is pending");
            return Ok(0);
        }
        let previous = self.st.running().map_err(Failed)?;
        let secs = n * self.st.seconds_per_minute();
        let token = format!("{}-{}", now_ms(), std::process::id());
        self.st.write("confirm.previous", &previous.text()).map_err(Failed)?;
        self.st
            .write(
                "confirm.pending",
                &format!("token={token}\ndeadline_ms={}\naction={action}\n", now_ms() + u128::from(secs) * 1000),
            )
            .map_err(Failed)?;
        if let Err(e) = spawn_reverter(&token) {
            self.st.remove("confirm.pending");
            return Err(Failed(format!("vyos_double: {e}")));
        }
        self.st.log(&format!("commit-confirm: revert ({action}) in {secs} s unless confirmed"));
        say(&format!("Initialized commit-confirm; {n} minutes to confirm before {action}"));
        if self.st.confirm_in_seconds() {
            eprintln!("[vyos_double] test mode (VYOS_DOUBLE_CONFIRM_UNIT): {n} minutes are {secs} seconds");
        }
        match self.commit_locked() {
            Ok(_) => Ok(0),
            Err(Failed(m)) if m.starts_with("vyos_double:") => Err(Failed(m)),
            Err(Failed(m)) => {
                self.st.log("commit-confirm: the commit failed; the timer stays armed");
                say(&m);
                Ok(0)
            }
        }
    }

    fn confirm(&mut self) -> Result<(), Failed> {
        let _lock = self.st.lock().map_err(Failed)?;
        // `confirm` asks the timer (config_mgmt.py `confirm`): once it elapsed, the revert
        // runs and there is nothing left to stop.
        let Some(p) = read_pending(self.st).filter(|_| confirm_timer(self.st) == ConfirmTimer::Armed) else {
            say("No confirm pending");
            return Ok(());
        };
        self.st.remove("confirm.pending");
        self.st.remove("confirm.previous");
        self.st.log("confirm");
        say(if p.action == "reload" { "Reload timer stopped" } else { "Reboot timer stopped" });
        Ok(())
    }

    fn compare(&self) {
        let (old, new) = (self.base.lines(), self.candidate.lines());
        let mut out = String::new();
        for l in old.iter().filter(|l| !new.contains(l)) {
            out.push_str(&format!("delete{}\n", &l[3..]));
        }
        for l in new.iter().filter(|l| !old.contains(l)) {
            out.push_str(&format!("{l}\n"));
        }
        if out.is_empty() {
            say("No changes between working and active configurations.");
        } else {
            say(&out);
        }
    }

    fn save(&mut self) -> Result<(), Failed> {
        let _lock = self.st.lock().map_err(Failed)?;
        let running = self.st.running().map_err(Failed)?;
        if self.in_config && self.candidate != self.base {
            say("Warning: you have uncommitted changes that will not be saved.\n");
        }
        say("Saving configuration to '/config/config.boot'...");
        self.st.write("saved", &running.text()).map_err(Failed)?;
        self.st.log("save");
        say("Done");
        Ok(())
    }

    /// Operational-mode commands (directly, after `run`, or as the SSH command).
    fn op(&mut self, w: &[&str]) -> Result<(), Failed> {
        match w {
            ["show", "configuration", "commands"] => {
                let _lock = self.st.lock().map_err(Failed)?;
                let running = self.st.running().map_err(Failed)?;
                print!("{}", running.text());
                Ok(())
            }
            // Fault injection: a state file `hostile_public_key` makes the router answer with its
            // content instead of its key, as a compromised router might (the lab's hostile-host
            // tests; see vyos_double.md).
            ["show", "interfaces", "wireguard", _, "public-key"] if self.st.path("hostile_public_key").exists() => {
                let text = std::fs::read_to_string(self.st.path("hostile_public_key")).unwrap_or_default();
                print!("{text}");
                Ok(())
            }
            ["show", "interfaces", "wireguard", ifn, what @ ("public-key" | "peers" | "allowed-ips" | "endpoints")] => {
                self.wg_show(&["wg", "show", ifn, what])
            }
            ["show", "interfaces", "wireguard", ifn, "summary"] => self.wg_show(&["wg", "show", ifn]),
            ["show", "version"] => {
                say("Version:          VyOS 1.4 (vyos_double test double)\nRelease train:    sagitta");
                Ok(())
            }
            ["generate", "pki", "wireguard", "key-pair", "install", "interface", ifn] => self.generate(ifn),
            ["generate", "pki", "wireguard", "key-pair"] => Err(Failed(
                "vyos_double: `generate pki wireguard key-pair` prints the private key on real VyOS; the double \
                 refuses it (use `generate pki wireguard key-pair install interface wgN` in configure mode)"
                    .to_string(),
            )),
            _ => Err(Failed(format!(
                "vyos_double: unsupported command `{}` (see crates/testkit/src/vyos_double.md)",
                w.join(" ")
            ))),
        }
    }

    fn wg_show(&self, args: &[&str]) -> Result<(), Failed> {
        let out = Command::new("wg")
            .args(&args[1..])
            .env("PATH", TOOL_PATH)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Failed(format!("cannot run wg: {e}")))?;
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if out.status.success() { Ok(()) } else { Err(Failed(String::from_utf8_lossy(&out.stderr).trim().to_string())) }
    }

    /// `generate pki wireguard key-pair install interface wgN` (VyOS pki.py install_wireguard_key).
    fn generate(&mut self, ifn: &str) -> Result<(), Failed> {
        if !(ifn.len() > 2 && ifn.starts_with("wg") && ifn[2..].chars().all(|c| c.is_ascii_digit())) {
            return Err(Failed(format!("\"{ifn}\" is not a WireGuard interface name!")));
        }
        if !self.in_config {
            return Err(Failed(format!(
                "vyos_double: You are not in configure mode, commands to install manually from configure mode:\n\
                 set interfaces wireguard {ifn} private-key '<redacted by vyos_double>'\n\n\
                 [vyos_double] real VyOS prints the new PRIVATE key here; the double refuses (exit 1): run the \
                 command inside `configure`"
            )));
        }
        let path = ["interfaces", "wireguard", ifn, "private-key"];
        let private = wg_genkey().map_err(Failed)?;
        // Whether VyOS asks before it overwrites: `install_into_config` (vyos-1x
        // `python/vyos/utils/misc.py`, sagitta and current alike) asks only when
        // `conf.exists(p) and not conf.is_multi(p)` for `p` = `interfaces wireguard wgN
        // private-key '<new key>'`. `Config.exists` (`python/vyos/config.py`) finds no node of
        // that path (a value is not a node), then compares the path's last word, quotes and all,
        // with the leaf's values, which are stored without quotes: never equal. So VyOS does not
        // ask, and `my_set` replaces the single value. Were it ever equal, the question's f-string
        // names `node`, which the function never defines: a NameError before anything is read.
        let quoted = format!("'{private}'");
        if self.candidate.value(&path) == Some(quoted.as_str()) {
            eprintln!(
                "Traceback (most recent call last):\n  File \"/usr/libexec/vyos/op_mode/pki.py\", in install_wireguard_key\n\
                 NameError: name 'node' is not defined"
            );
            return Err(Failed("[vyos_double] install_into_config raised NameError (see stderr)".into()));
        }
        let public = wg_pubkey(&private).map_err(Failed)?;
        let target = Target {
            path: path.iter().map(|s| s.to_string()).collect(),
            roles: vec![Role::Name, Role::Name, Role::TagValue, Role::Name],
            leaf: Some(LeafKind::Single),
            value: Some(private),
        };
        self.candidate.apply_set(&target);
        self.ops.push(Op::Set(target));
        say("1 value(s) installed. Use \"compare\" to see the pending changes, and \"commit\" to apply.");
        say(&format!("Corresponding public-key to use on peer system is: '{public}'"));
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------

/// vyatta-cfg (sagitta) `functions/interpreter/vyatta-cfg-run` `_vyatta_cfg_cmds`: the
/// configuration-mode commands. `_vyatta_cfg_init` (which `/etc/bash_completion.d/vyatta-cfg`
/// runs when the script-template sources it) makes every prefix of each an alias
/// `PREFIX='vyatta_cfg_run PREFIX'`, except the prefixes in [`NOT_ALIASED`]: in a script after
/// the template, `sh` is `show` and `exit` is not bash's `exit`.
const CFG_COMMANDS: &[&str] = &[
    "confirm",
    "comment",
    "commit",
    "commit-confirm",
    "compare",
    "copy",
    "delete",
    "discard",
    "edit",
    "exit",
    "load",
    "merge",
    "rename",
    "rollback",
    "rollback-soft",
    "run",
    "save",
    "set",
    "show",
];

/// The shell words `_vyatta_cfg_init` leaves alone (its `case`: `for|do|done|if|fi|case|while|tr`).
const NOT_ALIASED: &[&str] = &["for", "do", "done", "if", "fi", "case", "while", "tr"];

/// Functions the script-template defines (vyatta-cfg `functions/wrapper/script-template`: the
/// "pipe" functions, `vyatta_configure`, `list`, `vyatta_exit_configure`, `load`, `save`,
/// `reset_edit_level`, `edit`, `top`, `up`); it also aliases `configure` and `exit`.
const TEMPLATE_FUNCTIONS: &[&str] = &[
    "count",
    "match",
    "no-match",
    "no-more",
    "vyatta_configure",
    "list",
    "vyatta_exit_configure",
    "load",
    "save",
    "reset_edit_level",
    "edit",
    "top",
    "up",
];

/// Every alias the script-template leaves in a script's shell ([`CFG_COMMANDS`]' prefixes and
/// `configure`).
fn template_aliases() -> BTreeSet<String> {
    let mut out: BTreeSet<String> = CFG_COMMANDS
        .iter()
        .flat_map(|c| (1..=c.len()).map(move |n| c[..n].to_string()))
        .filter(|p| !NOT_ALIASED.contains(&p.as_str()))
        .collect();
    out.insert("configure".into());
    out
}

/// Whether a script line starting with `first` is a VyOS command the double plays (or refuses)
/// itself; any other line is bash (`Session::shell_line`).
fn is_script_command(first: &str) -> bool {
    template_aliases().contains(first)
        || TEMPLATE_FUNCTIONS.contains(&first)
        || ["source", "declare", "true", ":", "generate", "end_configure"].contains(&first)
}

/// The bash a shell line runs after, once the script sourced the template: the template's
/// aliases and functions, `run` as this double's op mode (vyatta-cfg-run `vyatta_config_run`:
/// `/opt/vyatta/bin/vyatta-op-cmd-wrapper "$@"`), every other one refusing (it writes what it
/// was asked into `$VYOS_DOUBLE_REFUSED`, which stops the script).
fn template_preamble() -> String {
    let mut s = String::from(
        "shopt -s expand_aliases\n\
         __vyos_double_refuse() { printf '%s\\n' \"$*\" >> \"$VYOS_DOUBLE_REFUSED\"; return 1; }\n",
    );
    // Functions before aliases, and with `function NAME`, as the template has them: a name that
    // is already an alias would be expanded in `NAME ()`.
    for f in TEMPLATE_FUNCTIONS {
        s.push_str(&format!("function {f} {{ __vyos_double_refuse {f} \"$@\"; }}\n"));
    }
    for a in template_aliases() {
        if a == "run" {
            s.push_str("alias run='\"$VYOS_DOUBLE_EXE\" __op'\n");
        } else {
            s.push_str(&format!("alias {a}='__vyos_double_refuse {a}'\n"));
        }
    }
    s
}

/// The state directory of this session, "booted" first if it has no running configuration.
fn booted_state() -> Result<State, String> {
    let st = State::from_env()?;
    st.boot_if_needed()?;
    Ok(st)
}

/// `run ARGS` in a script's shell line (`vyos_double __op ARGS`): the op-mode command in a
/// fresh session. What the double does not model is written to `$VYOS_DOUBLE_REFUSED`, so the
/// script stops (see `Session::shell_line`); VyOS's own refusals are printed, status 1.
fn op_command(words: &[String]) -> ExitCode {
    let st = match booted_state() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    if w.is_empty() {
        say("\n  Incomplete command: run\n");
        return ExitCode::FAILURE;
    }
    match Session::new(&st).op(&w) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failed(m)) => {
            if m.starts_with("vyos_double:")
                && let Some(file) = std::env::var_os("VYOS_DOUBLE_REFUSED")
                && let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(file)
            {
                let _ = writeln!(f, "run {}", w.join(" "));
            }
            say(&m);
            ExitCode::FAILURE
        }
    }
}

/// The first words of the VyOS commands the double plays (or refuses on purpose): a command
/// starting with one of these is VyOS's, and stays as strict as the tables in vyos_double.md.
const VYOS_WORDS: &[&str] = &[
    "/opt/vyatta/bin/vyatta-op-cmd-wrapper",
    "show",
    "run",
    "generate",
    "set",
    "delete",
    "configure",
    "commit",
    "commit-confirm",
    "confirm",
    "compare",
    "discard",
    "save",
    "rollback",
    "rollback-soft",
    "load",
    "merge",
    "source",
    "end_configure",
    "reset",
    "restart",
    "clear",
    "reboot",
    "poweroff",
    "add",
    "install",
    "monitor",
];

/// Whether an SSH command is a VyOS (configuration or op-mode) command rather than a plain
/// shell command.
fn is_vyos_command(command: &str) -> bool {
    command.split_whitespace().next().is_some_and(|w| VYOS_WORDS.contains(&w))
}

/// The PATH of the shell the double runs plain commands in (the login shell, a script's shell
/// lines): the double linked as `<state>/bin/systemctl` first ([`systemctl`]), so that a read of
/// commit-confirm's systemd units answers from the double's state as VyOS's systemd would.
fn shell_path(st: &State) -> Result<String, String> {
    let bin = st.path("bin");
    let link = bin.join("systemctl");
    if !link.exists() {
        let made = fs::create_dir_all(&bin)
            .and_then(|()| std::env::current_exe())
            .and_then(|exe| std::os::unix::fs::symlink(exe, &link));
        if let Err(e) = made.or_else(|e| if link.exists() { Ok(()) } else { Err(e) }) {
            return Err(format!("vyos_double: cannot link systemctl into {}: {e}", bin.display()));
        }
    }
    Ok(format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_else(|_| TOOL_PATH.to_string())))
}

/// Runs a plain shell command as VyOS's login shell would. Every VyOS account's shell is
/// `/bin/vbash` (vyos-1x `src/conf_mode/system_login.py`, `apply`: "all accounts use
/// /bin/vbash", `--shell /bin/vbash`), a bash; sshd runs an exec request as `$SHELL -c COMMAND`
/// (OpenSSH `session.c`, `do_child`). So `cat -- FILE`, `for ...; do ...; done` work there as in
/// bash. The double runs them in a real bash in the router's namespaces (as root, where VyOS
/// would run them as the login user: fabric wraps its root-only reads in `sudo -n`, which the
/// `vyos` user may run, its groups including `sudo` in the same file).
///
/// `systemctl` there is the double itself ([`systemctl`], first on its PATH: [`shell_path`]),
/// so that a read of commit-confirm's systemd units answers from the double's state as VyOS's
/// systemd would.
fn login_shell(st: &State, command: &str) -> ExitCode {
    let path = match shell_path(st) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    match Command::new("bash").arg("-c").arg(command).env("PATH", path).status() {
        Ok(st) => ExitCode::from(st.code().map_or(1, |c| c.clamp(0, 255) as u8)),
        Err(e) => {
            eprintln!("vyos_double: cannot run bash for `{command}`: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "__commit-confirm-revert" {
        return reverter(&args[2]);
    }
    if args.first().and_then(|a| std::path::Path::new(a).file_name()).is_some_and(|n| n == "systemctl") {
        return systemctl(&args[1..]);
    }
    if args.get(1).map(String::as_str) == Some("__op") {
        return op_command(&args[2..]);
    }
    let st = match booted_state() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // The SSH command; for local runs, the arguments.
    let command = std::env::var("SSH_ORIGINAL_COMMAND").unwrap_or_else(|_| args[1..].join(" "));
    let command = command.trim();
    let mut session = Session::new(&st);
    let result = match command {
        "" | "vbash -s" | "/bin/vbash -s" | "vbash" | "/bin/vbash" => {
            // The fd itself, duplicated: `std::io::stdin()` would read ahead into its buffer
            // what a shell line's bash must find in the pipe.
            let fd = std::os::fd::AsFd::as_fd(&std::io::stdin()).try_clone_to_owned();
            let Ok(fd) = fd else {
                eprintln!("vyos_double: cannot read the script from stdin");
                return ExitCode::FAILURE;
            };
            let mut script = Script::new(fs::File::from(fd));
            match session.run_script(&mut script) {
                Ok(status) => return ExitCode::from(status),
                Err(e) => Err(e),
            }
        }
        "cat" => {
            let mut buf = vec![];
            let _ = std::io::stdin().read_to_end(&mut buf);
            let _ = std::io::stdout().write_all(&buf);
            Ok(())
        }
        "hostname" => {
            say(fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim());
            Ok(())
        }
        _ if !is_vyos_command(command) => return login_shell(&st, command),
        _ => {
            let command = command.strip_prefix("/opt/vyatta/bin/vyatta-op-cmd-wrapper ").unwrap_or(command);
            match split_words(command) {
                Ok(words) => {
                    let words: Vec<String> = words.into_iter().map(|w| w.text).collect();
                    match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                        ["true"] | [":"] | ["exit"] => Ok(()),
                        w => session.op(w),
                    }
                }
                Err(e) => Err(Failed(format!("vyos_double: {e}"))),
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failed(msg)) => {
            say(&msg);
            eprintln!("vyos_double: command failed (exit 1)");
            ExitCode::FAILURE
        }
    }
}
