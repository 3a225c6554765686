//! OpenSSH's client configuration, read as `ssh` reads it, for what operators use: `Include`,
//! `Host`, `Match host/originalhost/user/localuser/all`, the first value obtained for a keyword
//! wins, the `%` tokens ssh_config(5) allows, and the user and system files in OpenSSH's order.
//!
//! The source that decides each behaviour (openssh-portable):
//! - `readconf.c`, `read_config_file_depth`: a file starts active; included files share the
//!   includer's state, which is restored after them; at most 16 nested includes; user files
//!   (and every included file) must not be writable by others (`SSHCONF_CHECKPERM`).
//! - `readconf.c`, `process_config_line_depth`: each keyword sets its option only while the
//!   block is active and only if it is still unset (`*activep && *charptr == NULL`);
//!   `IdentityFile` accumulates; `Include` resolves a relative path against `~/.ssh` in a user
//!   file and `/etc/ssh` in the system one, refuses `~` in the system one, and globs; inside an
//!   inactive block an included file is read but never matches (`SSHCONF_NEVERMATCH`).
//! - `readconf.c`, `match_cfg_line`: `Match` criteria, ANDed, each negatable with `!`;
//!   `host` is matched against HostName as obtained so far (with `%h` expanded).
//! - `readconf.c`, `parse_jump`: ProxyJump `a,b` is hop `b` reached through `a`; a ProxyCommand
//!   obtained first disables it.
//! - `ssh.c`, `process_config_files`: without `-F`, `~/.ssh/config` then `/etc/ssh/ssh_config`;
//!   `main`: HostName's `%h`, the default user (the local one), port 22, the default known-hosts
//!   files and the tokens of each path.
//!
//! What fabric does not support is never dropped in silence: a keyword it ignores for a host is a
//! warning naming the file and line, and a `Match` whose answer would depend on a criterion it
//! cannot evaluate (`exec`, `localnetwork`, `canonical`, `final`, ...) is an error naming them.

mod jump;
mod lexer;
mod local;
mod pattern;
mod tokens;

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub use jump::{Hop, last_hop};
pub use local::Local;
use tokens::{TokenError, Values};

/// OpenSSH's system-wide client configuration (`_PATH_HOST_CONFIG_FILE`).
pub const SYSTEM_CONFIG: &str = "/etc/ssh/ssh_config";
/// `SSHDIR`, where a relative Include of the system file resolves.
const SYSTEM_DIR: &str = "/etc/ssh";
/// `READCONF_MAX_DEPTH`
const MAX_DEPTH: usize = 16;
/// The default `GlobalKnownHostsFile` (`_PATH_SSH_SYSTEM_HOSTFILE`, `_PATH_SSH_SYSTEM_HOSTFILE2`).
const GLOBAL_KNOWN_HOSTS: [&str; 2] = ["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"];
/// The default `UserKnownHostsFile` (`_PATH_SSH_USER_HOSTFILE`, `_PATH_SSH_USER_HOSTFILE2`).
const USER_KNOWN_HOSTS: [&str; 2] = ["~/.ssh/known_hosts", "~/.ssh/known_hosts2"];

/// Keywords that change nothing fabric does, read and ignored without a warning (each with why).
const NO_BEARING: &[(&str, &str)] = &[
    ("sendenv", "fabric sends no environment"),
    ("hashknownhosts", "fabric never writes known_hosts"),
    ("gssapiauthentication", "fabric authenticates with keys; a failure lists what it tried"),
    ("gssapidelegatecredentials", "fabric delegates nothing"),
    ("forwardagent", "fabric forwards nothing"),
    ("forwardx11", "fabric forwards nothing"),
    ("forwardx11trusted", "fabric forwards nothing"),
    ("batchmode", "fabric never prompts"),
    ("serveraliveinterval", "fabric sends its own keepalives (3 s, 3 missed)"),
    ("serveralivecountmax", "fabric sends its own keepalives (3 s, 3 missed)"),
    ("controlmaster", "fabric keeps one connection per host per run itself"),
    ("controlpath", "fabric keeps one connection per host per run itself"),
    ("controlpersist", "fabric keeps one connection per host per run itself"),
    ("loglevel", "fabric's own -v says what it does"),
    ("visualhostkey", "fabric prints fingerprints in its errors"),
    ("escapechar", "fabric opens no interactive session"),
    ("requesttty", "fabric opens no interactive session"),
    ("addkeystoagent", "fabric adds no key to the agent"),
    ("updatehostkeys", "fabric never writes known_hosts"),
    ("ignoreunknown", "fabric warns about what it does not support instead"),
];

/// Where a line is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Origin {
    pub file: PathBuf,
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// A configuration fabric cannot use as written: where, what, and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{at}: {message}")]
pub struct ConfigError {
    /// `file:line`, or the file alone.
    pub at: String,
    pub message: String,
}

fn err(at: &Origin, message: impl Into<String>) -> ConfigError {
    ConfigError { at: at.to_string(), message: message.into() }
}

#[derive(Debug, Clone)]
enum Item {
    Line { at: Origin, words: lexer::Words },
    Include { files: Vec<File> },
}

#[derive(Debug, Clone)]
struct File {
    items: Vec<Item>,
}

/// The configuration files, read and with their Includes followed.
#[derive(Debug, Clone, Default)]
pub struct SshConfig {
    files: Vec<File>,
    /// What was read but cannot be used whatever the host (an Include with tokens).
    pub warnings: Vec<String>,
}

/// Whether a file is the user's (`SSHCONF_USERCONF`) and must be checked (`SSHCONF_CHECKPERM`).
#[derive(Debug, Clone, Copy)]
struct Kind {
    user: bool,
    check_perm: bool,
}

impl SshConfig {
    /// One file, as `ssh -F FILE` reads it: a user file, and no system file after it.
    pub fn load(path: &Path) -> Result<SshConfig, ConfigError> {
        Self::load_as(path, &Local::current())
    }

    /// [`SshConfig::load`] for `local` (its home is where `~` and relative Includes point).
    pub fn load_as(path: &Path, local: &Local) -> Result<SshConfig, ConfigError> {
        let mut c = SshConfig::default();
        let f = c.read(path, Kind { user: true, check_perm: false }, 0, local)?;
        c.files.push(f);
        Ok(c)
    }

    /// What `ssh` reads without `-F`: `~/.ssh/config` (when it exists), then the system file.
    pub fn load_default(local: &Local) -> Result<SshConfig, ConfigError> {
        let mut c = SshConfig::default();
        let user = local.home.join(".ssh/config");
        for (path, kind) in [
            (user, Kind { user: true, check_perm: true }),
            (PathBuf::from(SYSTEM_CONFIG), Kind { user: false, check_perm: false }),
        ] {
            if path.exists() {
                let f = c.read(&path, kind, 0, local)?;
                c.files.push(f);
            }
        }
        Ok(c)
    }

    fn read(&mut self, path: &Path, kind: Kind, depth: usize, local: &Local) -> Result<File, ConfigError> {
        let whole = ConfigError { at: path.display().to_string(), message: String::new() };
        if depth > MAX_DEPTH {
            return Err(ConfigError { message: "more than 16 nested Includes (a loop?)".into(), ..whole });
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError { message: format!("cannot read it: {e}"), ..whole.clone() })?;
        if kind.check_perm {
            let m = std::fs::metadata(path).map_err(|e| ConfigError { message: e.to_string(), ..whole.clone() })?;
            if (m.uid() != 0 && m.uid() != local.uid) || m.mode() & 0o022 != 0 {
                return Err(ConfigError {
                    message: "bad owner or permissions: others may write it (OpenSSH refuses it too); \
                              `chmod go-w` it and make it yours"
                        .into(),
                    ..whole
                });
            }
        }
        let mut items = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let at = Origin { file: path.to_path_buf(), line: i + 1 };
            let words = match lexer::split(line) {
                None => continue,
                Some(Ok(w)) => w,
                Some(Err(lexer::LexError::Quotes)) => return Err(err(&at, "a quote is not closed")),
                Some(Err(lexer::LexError::NoArgument(k))) => return Err(err(&at, format!("`{k}` has no value"))),
            };
            if words.keyword == "include" {
                let mut files = Vec::new();
                for arg in &words.args {
                    for p in self.include_paths(&at, arg, kind, local)? {
                        files.push(self.read(&p, Kind { user: kind.user, check_perm: true }, depth + 1, local)?);
                    }
                }
                items.push(Item::Include { files });
            } else {
                items.push(Item::Line { at, words });
            }
        }
        Ok(File { items })
    }

    /// The files one Include argument names, sorted as glob(3) sorts them.
    fn include_paths(
        &mut self,
        at: &Origin,
        arg: &str,
        kind: Kind,
        local: &Local,
    ) -> Result<Vec<PathBuf>, ConfigError> {
        if arg.contains('%') {
            // The tokens would depend on the host; fabric reads Includes once for every host.
            self.warnings
                .push(format!("{at}: `Include {arg}`: tokens in Include are not supported; the file is skipped"));
            return Ok(vec![]);
        }
        let p =
            tokens::expand(arg, "", &Values::default(), true).map_err(|e| err(at, format!("Include {arg}: {e}")))?;
        if p.starts_with('~') && !kind.user {
            return Err(err(
                at,
                format!("Include {p}: `~` is not allowed in the system file (OpenSSH refuses it too)"),
            ));
        }
        let p = local.tilde(&p).ok_or_else(|| err(at, format!("Include {p}: no such user")))?;
        let p = if p.is_absolute() {
            p
        } else if kind.user {
            local.home.join(".ssh").join(p)
        } else {
            Path::new(SYSTEM_DIR).join(p)
        };
        Ok(glob(&p))
    }

    /// The settings for `query.host` (the name as written in the topology).
    pub fn resolve(&self, query: &Query) -> Result<HostConfig, ConfigError> {
        self.resolve_as(query, &Local::current())
    }

    pub fn resolve_as(&self, query: &Query, local: &Local) -> Result<HostConfig, ConfigError> {
        let mut r = Resolver { query, local, got: Obtained::from_query(query), warnings: Vec::new() };
        for f in &self.files {
            let mut active = true;
            r.walk(&f.items, &mut active, false)?;
        }
        r.finish()
    }
}

/// glob(3) for `*` and `?` in any component; a leading `.` is matched only by a `.`.
fn glob(path: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::from("/")];
    for part in path.components().skip(1) {
        let part = part.as_os_str().to_string_lossy().into_owned();
        if !part.contains(['*', '?']) {
            found = found.into_iter().map(|p| p.join(&part)).filter(|p| p.exists()).collect();
            continue;
        }
        let mut next = Vec::new();
        for dir in found {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if (!name.starts_with('.') || part.starts_with('.')) && pattern::matches(&name, &part) {
                    next.push(dir.join(name));
                }
            }
        }
        found = next;
    }
    found.retain(|p| p.is_file());
    found.sort();
    found
}

/// What `ssh` is given on its command line: the host as named, and the topology's values, which
/// win over the files as `-l`, `-p`, `-i` and `-J` do.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub host: String,
    pub user: Option<String>,
    pub port: Option<u16>,
    pub identity_files: Vec<PathBuf>,
    pub proxy_jump: Option<String>,
}

impl Query {
    pub fn host(host: &str) -> Query {
        Query { host: host.to_string(), ..Default::default() }
    }
}

/// Settings for one host, resolved as `ssh -G` prints them (paths expanded).
#[derive(Debug, Clone, PartialEq)]
pub struct HostConfig {
    /// The address or name to connect to (HostName, else the name given; lowercased unless an
    /// address, as `ssh` does).
    pub hostname: String,
    pub user: String,
    pub port: u16,
    pub identity_files: Vec<PathBuf>,
    /// `IdentitiesOnly yes`: only the identity files' keys are offered, the agent's others not.
    pub identities_only: bool,
    pub user_known_hosts: Vec<PathBuf>,
    pub global_known_hosts: Vec<PathBuf>,
    /// ProxyJump's hops, first to last, as written (`none` gives no hop).
    pub proxy_jump: Option<String>,
    pub connect_timeout: Option<u64>,
    /// What the files ask that fabric does not do, each naming its file and line.
    pub warnings: Vec<String>,
}

/// Options obtained so far; the first value obtained wins.
#[derive(Debug, Default)]
struct Obtained {
    hostname: Option<(String, Origin)>,
    user: Option<String>,
    port: Option<u16>,
    identity_files: Vec<(String, Option<Origin>)>,
    identities_only: Option<bool>,
    user_known_hosts: Option<(Vec<String>, Option<Origin>)>,
    global_known_hosts: Option<Vec<String>>,
    proxy_jump: Option<(String, Option<Origin>)>,
    proxy_command: Option<String>,
    connect_timeout: Option<Option<u64>>,
}

impl Obtained {
    fn from_query(q: &Query) -> Obtained {
        Obtained {
            user: q.user.clone(),
            port: q.port,
            identity_files: q.identity_files.iter().map(|p| (p.display().to_string(), None)).collect(),
            proxy_jump: q.proxy_jump.clone().map(|j| (j, None)),
            ..Default::default()
        }
    }
}

struct Resolver<'a> {
    query: &'a Query,
    local: &'a Local,
    got: Obtained,
    warnings: Vec<String>,
}

impl Resolver<'_> {
    fn walk(&mut self, items: &[Item], active: &mut bool, never: bool) -> Result<(), ConfigError> {
        for item in items {
            match item {
                Item::Include { files } => {
                    let before = *active;
                    for f in files {
                        self.walk(&f.items, active, never || !before)?;
                    }
                    // An included file's Host or Match does not change the includer's block.
                    *active = before;
                }
                Item::Line { at, words } => match words.keyword.as_str() {
                    "host" => *active = !never && self.host_matches(&words.args),
                    // SSHCONF_NEVERMATCH: nothing in the file can become active; not evaluated.
                    "match" => *active = !never && self.match_line(at, &words.args)?,
                    _ if *active => self.apply(at, words)?,
                    _ => {}
                },
            }
        }
        Ok(())
    }

    /// `Host`: any pattern matches the name as given, and no negated one does.
    fn host_matches(&self, patterns: &[String]) -> bool {
        let mut hit = false;
        for p in patterns {
            match p.strip_prefix('!') {
                Some(neg) if pattern::matches(&self.query.host, neg) => return false,
                Some(_) => {}
                None => hit |= pattern::matches(&self.query.host, p),
            }
        }
        hit
    }

    /// `Match`: every criterion must hold. A criterion fabric cannot evaluate is refused only
    /// when the others all hold, so the answer would depend on it.
    fn match_line(&self, at: &Origin, args: &[String]) -> Result<bool, ConfigError> {
        let mut answers: Vec<(String, Option<bool>)> = Vec::new();
        let mut args = args.iter();
        while let Some(a) = args.next() {
            let (negate, a) = match a.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, a.as_str()),
            };
            let (name, inline) = match a.split_once('=') {
                Some((n, v)) => (n.to_ascii_lowercase(), Some(v.to_string())),
                None => (a.to_ascii_lowercase(), None),
            };
            let answer = match name.as_str() {
                "all" => {
                    if !answers.is_empty() || args.len() > 0 {
                        return Err(err(at, "`Match all` cannot be combined with other criteria"));
                    }
                    Some(true)
                }
                "canonical" | "final" => None,
                _ => {
                    let Some(arg) = inline.or_else(|| args.next().cloned()) else {
                        return Err(err(at, format!("`Match {name}` has no argument")));
                    };
                    match name.as_str() {
                        "host" => Some(pattern::matches_hostname(&self.match_host()?, &arg)),
                        "originalhost" => Some(pattern::matches_hostname(&self.query.host, &arg)),
                        "user" => Some(pattern::matches_list(self.user(), &arg, false)),
                        "localuser" => Some(pattern::matches_list(&self.local.user, &arg, false)),
                        "exec" | "localnetwork" | "version" | "tagged" | "command" | "sessiontype" => None,
                        _ => return Err(err(at, format!("`Match {name}` is not a Match criterion OpenSSH knows"))),
                    }
                }
            };
            answers.push((format!("{}{name}", if negate { "!" } else { "" }), answer.map(|a| a != negate)));
        }
        if answers.is_empty() {
            return Err(err(at, "`Match` needs at least one criterion"));
        }
        if answers.iter().any(|(_, a)| *a == Some(false)) {
            return Ok(false);
        }
        let unknown: Vec<&str> = answers.iter().filter(|(_, a)| a.is_none()).map(|(n, _)| n.as_str()).collect();
        if !unknown.is_empty() {
            return Err(err(
                at,
                format!(
                    "fabric cannot evaluate `Match {}` for {} (it supports host, originalhost, user, localuser and all); \
                     add a `Host {}` block before it, or run fabric with --ssh-config naming a file without it",
                    unknown.join(" "),
                    self.query.host,
                    self.query.host
                ),
            ));
        }
        Ok(true)
    }

    /// The name `Match host` sees: HostName obtained so far with `%h` expanded, else the name given.
    fn match_host(&self) -> Result<String, ConfigError> {
        match &self.got.hostname {
            Some((h, origin)) => self.expand_hostname(h, origin),
            None => Ok(self.query.host.clone()),
        }
    }

    fn expand_hostname(&self, h: &str, at: &Origin) -> Result<String, ConfigError> {
        let v = Values { host: self.query.host.clone(), ..Default::default() };
        tokens::expand(h, tokens::HOSTNAME, &v, false).map_err(|e| err(at, format!("HostName {h}: {e}")))
    }

    /// The remote user so far (`Match user`), the local one by default.
    fn user(&self) -> &str {
        self.got.user.as_deref().unwrap_or(&self.local.user)
    }

    fn apply(&mut self, at: &Origin, w: &lexer::Words) -> Result<(), ConfigError> {
        let first = || w.args[0].clone();
        let g = &mut self.got;
        match w.keyword.as_str() {
            "hostname" if g.hostname.is_none() => g.hostname = Some((first(), at.clone())),
            "user" if g.user.is_none() => g.user = Some(first()),
            "port" => {
                let p = first().parse::<u16>().ok().filter(|p| *p > 0);
                let p = p.ok_or_else(|| err(at, format!("Port {}: not a port number (1-65535)", first())))?;
                g.port.get_or_insert(p);
            }
            "identityfile" => g.identity_files.push((first(), Some(at.clone()))),
            // readconf.c: `oIdentitiesOnly` is a flag (`multistate_flag`: yes/true, no/false).
            "identitiesonly" => {
                let v = match first().to_ascii_lowercase().as_str() {
                    "yes" | "true" => true,
                    "no" | "false" => false,
                    other => return Err(err(at, format!("IdentitiesOnly {other}: expected yes or no"))),
                };
                g.identities_only.get_or_insert(v);
            }
            "userknownhostsfile" if g.user_known_hosts.is_none() => {
                g.user_known_hosts = Some((w.args.clone(), Some(at.clone())))
            }
            "globalknownhostsfile" if g.global_known_hosts.is_none() => g.global_known_hosts = Some(w.args.clone()),
            "proxyjump" => {
                // parse_jump: a ProxyCommand obtained first wins over it; a `#` ends the value.
                let value = w.rest.split('#').next().unwrap_or_default().trim().to_string();
                if g.proxy_jump.is_none() && g.proxy_command.is_none() {
                    g.proxy_jump = Some((value, Some(at.clone())));
                }
            }
            "proxycommand" => {
                if g.proxy_command.is_none() && g.proxy_jump.is_none() {
                    g.proxy_command = Some(w.rest.clone());
                    if !w.rest.eq_ignore_ascii_case("none") {
                        self.warnings.push(format!(
                            "{at}: ProxyCommand is not supported by fabric: it connects directly \
                             (use ProxyJump for a jump host)"
                        ));
                    }
                }
            }
            "connecttimeout" if g.connect_timeout.is_none() => {
                let t = if first() == "none" {
                    None
                } else {
                    Some(convtime(&first()).ok_or_else(|| err(at, format!("ConnectTimeout {}: not a time", first())))?)
                };
                g.connect_timeout = Some(t);
            }
            "hostname" | "user" | "userknownhostsfile" | "globalknownhostsfile" | "connecttimeout" => {}
            // OpenSSH's default since 8.5 (`no`) is what fabric does: the key is looked up by name.
            "checkhostip" if first().eq_ignore_ascii_case("no") => {}
            "stricthostkeychecking" if first().eq_ignore_ascii_case("yes") => {}
            "stricthostkeychecking" => self.warnings.push(format!(
                "{at}: StrictHostKeyChecking {}: fabric always checks host keys strictly and never adds one",
                first()
            )),
            k if NO_BEARING.iter().any(|(n, _)| *n == k) => {}
            k => self.warnings.push(format!("{at}: `{k}` is not supported by fabric and is ignored")),
        }
        Ok(())
    }

    fn finish(self) -> Result<HostConfig, ConfigError> {
        let q = self.query;
        let g = &self.got;
        let hostname = match &g.hostname {
            Some((h, at)) => self.expand_hostname(h, at)?,
            None => q.host.clone(),
        };
        // ssh lowercases a name, not an address.
        let hostname =
            if hostname.parse::<std::net::IpAddr>().is_ok() { hostname } else { hostname.to_ascii_lowercase() };
        let user = self.user().to_string();
        let port = g.port.unwrap_or(22);
        let proxy_jump = match &g.proxy_jump {
            Some((j, at)) => {
                let v = Values {
                    host: hostname.clone(),
                    original: q.host.clone(),
                    port: port.to_string(),
                    user: user.clone(),
                    ..Default::default()
                };
                let j = tokens::expand(j, tokens::PROXY_JUMP, &v, false).map_err(|e| match at {
                    Some(at) => err(at, format!("ProxyJump {j}: {e}")),
                    None => ConfigError { at: format!("{}'s proxy_jump", q.host), message: e.to_string() },
                })?;
                (!j.eq_ignore_ascii_case("none")).then_some(j)
            }
            None => None,
        };
        let l = self.local;
        let values = Values {
            host: hostname.clone(),
            original: q.host.clone(),
            port: port.to_string(),
            user: user.clone(),
            local_user: l.user.clone(),
            uid: l.uid.to_string(),
            home: l.home.display().to_string(),
            jump: proxy_jump
                .as_deref()
                .map(|j| j.rsplit(',').next().unwrap_or_default().to_string())
                .unwrap_or_default(),
            local_host: l.hostname.clone(),
            local_short: l.short_hostname().to_string(),
        };
        // ssh.c: tilde first, then the tokens and `${VAR}`.
        let path = |s: &str, at: Option<&Origin>, what: &str| -> Result<PathBuf, ConfigError> {
            let at_text = at.map(|a| a.to_string()).unwrap_or_else(|| format!("{}'s {what}", q.host));
            let t =
                l.tilde(s).ok_or_else(|| ConfigError { at: at_text.clone(), message: format!("{s}: no such user") })?;
            let e = tokens::expand(&t.to_string_lossy(), tokens::PATHS, &values, true)
                .map_err(|e: TokenError| ConfigError { at: at_text, message: format!("{what} {s}: {e}") })?;
            Ok(PathBuf::from(e))
        };
        let identity_files =
            g.identity_files.iter().map(|(f, at)| path(f, at.as_ref(), "IdentityFile")).collect::<Result<_, _>>()?;
        let user_known_hosts = match &g.user_known_hosts {
            Some((files, _)) if files.first().is_some_and(|f| f.eq_ignore_ascii_case("none")) => vec![],
            Some((files, at)) => {
                files.iter().map(|f| path(f, at.as_ref(), "UserKnownHostsFile")).collect::<Result<_, _>>()?
            }
            None => USER_KNOWN_HOSTS.iter().map(|f| path(f, None, "UserKnownHostsFile")).collect::<Result<_, _>>()?,
        };
        // ssh.c expands only `~` in GlobalKnownHostsFile (`tilde_expand_paths`).
        let global_known_hosts = match &g.global_known_hosts {
            Some(files) if files.first().is_some_and(|f| f.eq_ignore_ascii_case("none")) => vec![],
            Some(files) => files.iter().map(|f| l.tilde(f).unwrap_or_else(|| PathBuf::from(f))).collect(),
            None => GLOBAL_KNOWN_HOSTS.iter().map(PathBuf::from).collect(),
        };
        Ok(HostConfig {
            hostname,
            user,
            port,
            identity_files,
            identities_only: g.identities_only.unwrap_or(false),
            user_known_hosts,
            global_known_hosts,
            proxy_jump,
            connect_timeout: g.connect_timeout.flatten(),
            warnings: self.warnings,
        })
    }
}

/// `convtime` (openssh-portable `misc.c`): seconds, or numbers each with a unit
/// (`s m h d w`), e.g. `1m30s`.
fn convtime(s: &str) -> Option<u64> {
    let mut total = 0u64;
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            'w' => 604800,
            _ => return None,
        };
        total = total.checked_add(digits.parse::<u64>().ok()?.checked_mul(unit)?)?;
        digits.clear();
    }
    if !digits.is_empty() {
        total = total.checked_add(digits.parse().ok()?)?;
    } else if s.is_empty() {
        return None;
    }
    Some(total)
}

#[cfg(test)]
mod tests;
