//! SSH to routers and hosts, with russh: one connection per host per run, commands as channels.
//!
//! Host keys are checked strictly against known_hosts: an unknown host or a changed key is an
//! error that says what to do, never a silent trust. Keys come from identity files or the
//! ssh-agent. Connects and commands have timeouts and the connection sends keepalives, so a dead
//! link fails in seconds instead of hanging.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::client;
use russh::keys::{HashAlg, PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use russh::{ChannelMsg, Disconnect};

use super::shell::Sh;
use super::ssh_config::{self, ConfigError, Local, Query, SshConfig};
use crate::topology::model::SshAccess;

/// Everything needed to reach one host.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The fabric target this host serves, for messages (`router.franca`).
    pub target: String,
    /// Address or name to connect to.
    pub host: String,
    pub port: u16,
    pub user: String,
    pub identity_files: Vec<PathBuf>,
    /// ssh_config's `IdentitiesOnly yes`: the agent offers only the identity files' keys.
    pub identities_only: bool,
    /// The user's known-hosts files, then the system's (OpenSSH reads both).
    pub known_hosts: Vec<PathBuf>,
    pub proxy_jump: Option<Box<Endpoint>>,
    pub connect_timeout: Duration,
}

pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(8);
/// More hops than this is a ProxyJump loop through the hops' own configs (OpenSSH would spawn
/// one `ssh` per hop without end).
const MAX_HOPS: usize = 8;

fn home() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"))
}

/// Adds `cause` (a warning of the ssh config, naming its file and line: `Host *` may ask the same
/// of every target) as it applies to `target`: once per cause, with every target it applies to.
fn warn_once(warnings: &mut Vec<String>, cause: &str, target: &str) {
    let opened = format!("{cause} (for ");
    match warnings.iter_mut().find(|w| w.starts_with(&opened)) {
        Some(w) if w[opened.len()..].trim_end_matches(')').split(", ").any(|t| t == target) => {}
        Some(w) => {
            w.pop();
            w.push_str(&format!(", {target})"));
        }
        None => warnings.push(format!("{opened}{target})")),
    }
}

impl Endpoint {
    /// Resolves an endpoint as `ssh` resolves `access.host`: the topology's values win (as `-l`,
    /// `-p`, `-i` and `-J` do), then the ssh config, then OpenSSH's defaults. Each jump host is
    /// resolved with its own config, as the `ssh -W` OpenSSH runs for it would be: ProxyJump
    /// `a,b` is `b` reached with `-J a` (`ssh_config::last_hop`). What the config asks that fabric
    /// does not do goes to `warnings`, naming file and line.
    pub fn resolve(
        target: &str,
        access: &SshAccess,
        config: &SshConfig,
        warnings: &mut Vec<String>,
    ) -> Result<Endpoint, ConfigError> {
        let query = Query {
            host: access.host.clone(),
            user: access.user.clone(),
            port: access.port.map(|p| p.0),
            identity_files: access.identity_file.iter().map(PathBuf::from).collect(),
            proxy_jump: access.proxy_jump.clone(),
        };
        Self::resolve_query(target, &query, config, &Local::current(), warnings, 0)
    }

    fn resolve_query(
        target: &str,
        q: &Query,
        config: &SshConfig,
        local: &Local,
        warnings: &mut Vec<String>,
        depth: usize,
    ) -> Result<Endpoint, ConfigError> {
        let c = config.resolve_as(q, local)?;
        for w in &c.warnings {
            warn_once(warnings, w, target);
        }
        let proxy_jump = match &c.proxy_jump {
            None => None,
            Some(list) => {
                let at = || format!("{target}: ProxyJump `{list}`");
                let Some((hop, rest)) = ssh_config::last_hop(list) else {
                    return Err(ConfigError { at: at(), message: "a hop is not `[user@]host[:port]`".into() });
                };
                if depth >= MAX_HOPS {
                    return Err(ConfigError {
                        at: at(),
                        message: format!("more than {MAX_HOPS} jump hosts: do the hops' own ProxyJumps loop?"),
                    });
                }
                // ssh.c: a hop that is the destination itself is a loop.
                if hop.host == c.hostname
                    && hop.port.unwrap_or(22) == c.port
                    && hop.user.as_deref().unwrap_or(&c.user) == c.user
                {
                    return Err(ConfigError { at: at(), message: format!("a jump host loop via {}", hop.host) });
                }
                let jq = Query {
                    host: hop.host.clone(),
                    user: hop.user,
                    port: hop.port,
                    identity_files: vec![],
                    proxy_jump: rest,
                };
                let name = format!("{target} (jump host {})", hop.host);
                Some(Box::new(Self::resolve_query(&name, &jq, config, local, warnings, depth + 1)?))
            }
        };
        let mut known_hosts = c.user_known_hosts;
        known_hosts.extend(c.global_known_hosts);
        Ok(Endpoint {
            target: target.to_string(),
            host: c.hostname,
            port: c.port,
            user: c.user,
            identity_files: c.identity_files,
            identities_only: c.identities_only,
            known_hosts,
            proxy_jump,
            connect_timeout: c.connect_timeout.map(Duration::from_secs).unwrap_or(DEFAULT_CONNECT_TIMEOUT),
        })
    }

    fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Why a host could not be used. Every variant names the target and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    #[error("{target}: no SSH access is configured for it")]
    NoAccess { target: String },
    #[error("{target}: the host key of {addr} is revoked ({fingerprint}, {file}:{line})")]
    HostKeyRevoked { target: String, addr: String, fingerprint: String, file: String, line: usize },
    #[error("{target}: cannot connect to {addr}: {reason}")]
    Connect { target: String, addr: String, reason: String },
    #[error("{target}: no answer from {addr} within {secs} s")]
    Timeout { target: String, addr: String, secs: u64 },
    #[error("{target}: the host key of {addr} is not known ({fingerprint})")]
    UnknownHost { target: String, addr: String, fingerprint: String, files: String },
    #[error("{target}: the host key of {addr} has changed: {fingerprint} does not match {file}:{line}")]
    HostKeyChanged { target: String, addr: String, fingerprint: String, file: String, line: usize },
    #[error("{target}: authentication as `{user}` at {addr} failed ({tried})")]
    Auth { target: String, addr: String, user: String, tried: String },
    #[error("{target}: `{command}` did not finish within {secs} s")]
    CommandTimeout { target: String, command: String, secs: u64 },
    #[error("{target}: `{command}` printed more than {cap_mib} MiB: fabric stopped reading it")]
    OutputTooLarge { target: String, command: String, cap_mib: usize },
    #[error("{target}: ssh: {reason}")]
    Protocol { target: String, reason: String },
}

impl SshError {
    pub fn target(&self) -> &str {
        match self {
            SshError::NoAccess { target }
            | SshError::HostKeyRevoked { target, .. }
            | SshError::Connect { target, .. }
            | SshError::Timeout { target, .. }
            | SshError::UnknownHost { target, .. }
            | SshError::HostKeyChanged { target, .. }
            | SshError::Auth { target, .. }
            | SshError::CommandTimeout { target, .. }
            | SshError::OutputTooLarge { target, .. }
            | SshError::Protocol { target, .. } => target,
        }
    }

    /// The next thing to try.
    pub fn help(&self) -> String {
        match self {
            SshError::HostKeyRevoked { .. } => {
                "the key was revoked on purpose: the host may be compromised; reinstall it and verify its new key out of band".into()
            }
            SshError::NoAccess { .. } => {
                "give the host `ssh:` in the topology (or a Host entry in the ssh config), or leave its step out".into()
            }
            SshError::Connect { .. } => {
                "check that the host is up and sshd listens there (the site may be partitioned)".into()
            }
            SshError::Timeout { .. } => {
                "the host or the link to it is down; the other sites can still be planned and applied".into()
            }
            SshError::UnknownHost { addr, files, .. } => format!(
                "verify the fingerprint out of band, then add the key to {files} (e.g. `ssh-keyscan -p PORT HOST >> ~/.ssh/known_hosts` after checking it); fabric never trusts a host on first use ({addr})"
            ),
            SshError::HostKeyChanged { file, line, .. } => format!(
                "if the host was reinstalled, remove line {line} of {file} and add the new key after verifying it; otherwise someone may be intercepting the connection"
            ),
            SshError::Auth { user, .. } => format!(
                "check that one of the keys is in ~{user}/.ssh/authorized_keys on the host, or set `identity_file` (or IdentityFile in ~/.ssh/config)"
            ),
            SshError::CommandTimeout { .. } => {
                "the host is overloaded or the link dropped; re-run plan to see the state".into()
            }
            SshError::OutputTooLarge { .. } => {
                "no command fabric runs prints that much: run it on the host by hand to see what it prints".into()
            }
            SshError::Protocol { .. } => "check the host's sshd and its log".into(),
        }
    }
}

/// Why a `direct-tcpip` channel through jump host `jump` did not open. The jump host's sshd
/// connects to the next hop itself (RFC 4254 §7.2) and, when it cannot, answers
/// `SSH_MSG_CHANNEL_OPEN_FAILURE` with reason `SSH_OPEN_CONNECT_FAILED` (2, §5.1) and the
/// connect's own error as description: OpenSSH `channels.c` `channel_post_connecting` sends
/// `strerror(err)`, `Connection refused` when nothing listens there (an sshd restarting). That
/// description leads the reason, so that a refused connect behind a jump host reads, and is
/// retried (by the connect's retry policy one layer up), like a direct one; `No route to host` and any
/// other failure are named as they are and not retried.
pub(crate) fn through_jump(e: &russh::Error, description: Option<&str>, jump: &str) -> String {
    match (e, description.map(str::trim)) {
        (russh::Error::ChannelOpenFailure(russh::ChannelOpenFailure::ConnectFailed), Some(d)) if !d.is_empty() => {
            format!("{d} (said by jump host {jump}, which could not connect)")
        }
        (_, Some(d)) if !d.is_empty() => format!("through jump host {jump}: {e}: {d}"),
        _ => format!("through jump host {jump}: {e}"),
    }
}

/// What the host-key check found, kept outside the handler so the error can say it.
#[derive(Debug, Clone)]
enum Verdict {
    Unknown(String),
    Changed { fingerprint: String, file: String, line: usize },
    Revoked { fingerprint: String, file: String, line: usize },
}

struct Client {
    host: String,
    port: u16,
    known_hosts: Vec<PathBuf>,
    verdict: Arc<Mutex<Option<Verdict>>>,
    /// The description the server gave with its last channel-open failure: russh hands the
    /// opener only the reason code, and a jump host says there why it could not connect
    /// ([`through_jump`]).
    open_failure: Arc<Mutex<Option<String>>>,
}

impl client::Handler for Client {
    type Error = russh::Error;

    async fn channel_open_failure(
        &mut self,
        _channel: russh::ChannelId,
        _reason: russh::ChannelOpenFailure,
        description: &str,
        _language: &str,
        _session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        *self.open_failure.lock().expect("open failure lock") = Some(description.to_string());
        Ok(())
    }

    async fn check_server_key(&mut self, key: &PublicKeyOrCertificate) -> Result<bool, Self::Error> {
        let PublicKeyOrCertificate::PublicKey { key, .. } = key else {
            *self.verdict.lock().expect("verdict lock") = Some(Verdict::Unknown("a certificate".into()));
            return Ok(false);
        };
        let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
        // OpenSSH refuses a key marked `@revoked` in known_hosts, whatever else the files say;
        // russh's check reads past such lines, so fabric looks for them first.
        if let Some((file, line)) = revoked(&self.known_hosts, key) {
            *self.verdict.lock().expect("verdict lock") = Some(Verdict::Revoked { fingerprint, file, line });
            return Ok(false);
        }
        for file in self.known_hosts.iter().filter(|f| f.exists()) {
            match russh::keys::check_known_hosts_path(&self.host, self.port, key, file) {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(russh::keys::Error::KeyChanged { line }) => {
                    *self.verdict.lock().expect("verdict lock") =
                        Some(Verdict::Changed { fingerprint, file: file.display().to_string(), line });
                    return Ok(false);
                }
                Err(_) => {}
            }
        }
        *self.verdict.lock().expect("verdict lock") = Some(Verdict::Unknown(fingerprint));
        Ok(false)
    }
}

/// The file and line where `key` is marked `@revoked`, if it is (the marker applies to the key
/// whatever the line's host patterns: a revoked key is trusted nowhere).
fn revoked(files: &[PathBuf], key: &PublicKey) -> Option<(String, usize)> {
    let blob = key.to_openssh().ok()?;
    let blob = blob.split_whitespace().nth(1)?.to_string();
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        for (i, line) in text.lines().enumerate() {
            let mut words = line.split_whitespace();
            if words.next() == Some("@revoked") && words.nth(2) == Some(blob.as_str()) {
                return Some((file.display().to_string(), i + 1));
            }
        }
    }
    None
}

/// The output of one remote command.
#[derive(Debug, Clone)]
pub struct Output {
    pub status: u32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output {
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_string()
    }
}

/// The most a command may print on each of stdout and stderr. Every command fabric runs prints
/// a few KiB (a router's configuration, a kubeconfig, a key); a host that prints more is broken or
/// hostile, and reading on would take fabric's memory with it.
pub const OUTPUT_CAP: usize = 16 << 20;

/// A command's output as it arrives, each stream bounded by `cap`.
struct Collected {
    cap: usize,
    out: Vec<u8>,
    err: Vec<u8>,
    /// The exit status, once it came.
    status: Option<u32>,
}

/// The output passed its cap.
#[derive(Debug, PartialEq)]
struct Full;

impl Collected {
    fn new(cap: usize) -> Collected {
        Collected { cap, out: Vec::new(), err: Vec::new(), status: None }
    }
    /// One message of the command's channel.
    fn add(&mut self, msg: ChannelMsg) -> Result<(), Full> {
        match msg {
            ChannelMsg::Data { data } => return self.stdout(&data),
            ChannelMsg::ExtendedData { data, ext: 1 } => return self.stderr(&data),
            ChannelMsg::ExitStatus { exit_status } => self.status = Some(exit_status),
            ChannelMsg::ExitSignal { .. } => self.status = self.status.or(Some(255)),
            _ => {}
        }
        Ok(())
    }
    /// Stdout up to and with the first complete line starting with `marker`, while the command
    /// has not exited.
    fn running_through(&self, marker: &str) -> Option<String> {
        let end = marked(&self.out, marker.as_bytes()).filter(|_| self.status.is_none())?;
        Some(String::from_utf8_lossy(&self.out[..end]).into_owned())
    }
    /// The command's output once its channel closed; an error when it closed without an exit
    /// status (the connection ended before the command `what`).
    fn output(self, target: &str, what: &str) -> Result<Output, SshError> {
        let status = self.status.ok_or_else(|| SshError::Protocol {
            target: target.to_string(),
            reason: format!("the connection closed before the command {what}"),
        })?;
        Ok(Output { status, stdout: self.out, stderr: self.err })
    }
    fn stdout(&mut self, data: &[u8]) -> Result<(), Full> {
        Self::push(&mut self.out, data, self.cap)
    }
    fn stderr(&mut self, data: &[u8]) -> Result<(), Full> {
        Self::push(&mut self.err, data, self.cap)
    }
    fn push(buf: &mut Vec<u8>, data: &[u8], cap: usize) -> Result<(), Full> {
        if buf.len() + data.len() > cap {
            return Err(Full);
        }
        buf.extend_from_slice(data);
        Ok(())
    }
}

/// A command line as error messages show it (its first 80 characters).
fn shown(command: &Sh) -> String {
    command.as_str().chars().take(80).collect()
}

/// One authenticated connection.
pub struct Session {
    handle: client::Handle<Client>,
    pub endpoint: Endpoint,
    /// Sessions this one tunnels through (kept alive with it).
    _jump: Option<Box<Session>>,
    /// What the server said when it last refused to open a channel (see [`Client`]).
    open_failure: Arc<Mutex<Option<String>>>,
}

fn config() -> Arc<client::Config> {
    Arc::new(client::Config {
        // A peer silent for 3 keepalives (~9 s) is gone.
        keepalive_interval: Some(Duration::from_secs(3)),
        keepalive_max: 3,
        inactivity_timeout: None,
        ..Default::default()
    })
}

impl Session {
    /// Connects and authenticates, within the endpoint's connect timeout.
    pub async fn connect(ep: &Endpoint) -> Result<Session, SshError> {
        let secs = ep.connect_timeout.as_secs();
        match tokio::time::timeout(ep.connect_timeout, Self::connect_inner(ep)).await {
            Ok(r) => r,
            Err(_) => Err(SshError::Timeout { target: ep.target.clone(), addr: ep.addr(), secs }),
        }
    }

    async fn connect_inner(ep: &Endpoint) -> Result<Session, SshError> {
        let verdict = Arc::new(Mutex::new(None));
        let open_failure = Arc::new(Mutex::new(None));
        let client = Client {
            host: ep.host.clone(),
            port: ep.port,
            known_hosts: ep.known_hosts.clone(),
            verdict: verdict.clone(),
            open_failure: open_failure.clone(),
        };
        let (handle, jump) = match &ep.proxy_jump {
            None => {
                let stream = tokio::net::TcpStream::connect(ep.addr()).await.map_err(|e| SshError::Connect {
                    target: ep.target.clone(),
                    addr: ep.addr(),
                    reason: e.to_string(),
                })?;
                let _ = stream.set_nodelay(true);
                (client::connect_stream(config(), stream, client).await, None)
            }
            Some(j) => {
                let jump = Box::pin(Session::connect(j)).await?;
                let opened =
                    jump.handle.channel_open_direct_tcpip(ep.host.clone(), u32::from(ep.port), "127.0.0.1", 0).await;
                let channel = match opened {
                    Ok(c) => c,
                    Err(e) => {
                        let said = jump.open_failure_description(&e).await;
                        return Err(SshError::Connect {
                            target: ep.target.clone(),
                            addr: ep.addr(),
                            reason: through_jump(&e, said.as_deref(), &j.addr()),
                        });
                    }
                };
                (client::connect_stream(config(), channel.into_stream(), client).await, Some(Box::new(jump)))
            }
        };
        let mut handle = match handle {
            Ok(h) => h,
            Err(e) => {
                let v = verdict.lock().expect("verdict lock").clone();
                return Err(match v {
                    Some(Verdict::Unknown(fingerprint)) => SshError::UnknownHost {
                        target: ep.target.clone(),
                        addr: ep.addr(),
                        fingerprint,
                        files: ep.known_hosts.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
                    },
                    Some(Verdict::Changed { fingerprint, file, line }) => {
                        SshError::HostKeyChanged { target: ep.target.clone(), addr: ep.addr(), fingerprint, file, line }
                    }
                    Some(Verdict::Revoked { fingerprint, file, line }) => {
                        SshError::HostKeyRevoked { target: ep.target.clone(), addr: ep.addr(), fingerprint, file, line }
                    }
                    None => SshError::Protocol { target: ep.target.clone(), reason: e.to_string() },
                });
            }
        };
        authenticate(&mut handle, ep).await?;
        Ok(Session { handle, endpoint: ep.clone(), _jump: jump, open_failure })
    }

    /// The description the server sent with the channel-open failure `e`, if `e` is one. russh
    /// wakes the opener with the reason code before it calls the handler with the description
    /// (russh `client/encrypted.rs`, `CHANNEL_OPEN_FAILURE`: the channel's sender first, then
    /// `channel_open_failure`), so the description may come a moment later: waited for, briefly.
    async fn open_failure_description(&self, e: &russh::Error) -> Option<String> {
        if !matches!(e, russh::Error::ChannelOpenFailure(_)) {
            return None;
        }
        for _ in 0..50 {
            if let Some(d) = self.open_failure.lock().expect("open failure lock").take() {
                return Some(d);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    }

    /// Runs `command` in a new channel, feeding `stdin`, within `timeout`.
    pub async fn run(&self, command: &Sh, stdin: Option<&[u8]>, timeout: Duration) -> Result<Output, SshError> {
        self.run_input(command, stdin, timeout).await
    }

    /// Runs `command` with its standard input read from `stdin` as it goes: russh sends it in
    /// pieces as the channel's window opens (`Channel::data` copies the reader), so a file of any
    /// size is never held whole. Its output is kept up to [`OUTPUT_CAP`] bytes per stream.
    pub async fn run_input<R: tokio::io::AsyncRead + Unpin>(
        &self,
        command: &Sh,
        stdin: Option<R>,
        timeout: Duration,
    ) -> Result<Output, SshError> {
        let ep = &self.endpoint;
        let fut = async {
            let proto = |e: russh::Error| SshError::Protocol { target: ep.target.clone(), reason: e.to_string() };
            let mut ch = self.handle.channel_open_session().await.map_err(proto)?;
            ch.exec(true, command.as_str()).await.map_err(proto)?;
            if let Some(data) = stdin {
                ch.data(data).await.map_err(proto)?;
            }
            ch.eof().await.map_err(proto)?;
            let mut out = Collected::new(OUTPUT_CAP);
            while let Some(msg) = ch.wait().await {
                if out.add(msg).is_err() {
                    // Closing the channel stops the command's output at the server.
                    let _ = ch.close().await;
                    return Err(self.too_large(command));
                }
            }
            out.output(&ep.target, "finished")
        };
        self.within(command, timeout, fut).await
    }

    /// `fut`, the work of `command`, within `timeout` (else [`SshError::CommandTimeout`]).
    async fn within<T>(
        &self,
        command: &Sh,
        timeout: Duration,
        fut: impl std::future::Future<Output = Result<T, SshError>>,
    ) -> Result<T, SshError> {
        match tokio::time::timeout(timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(SshError::CommandTimeout {
                target: self.endpoint.target.clone(),
                command: shown(command),
                secs: timeout.as_secs(),
            }),
        }
    }

    /// `command`'s output passed [`OUTPUT_CAP`].
    fn too_large(&self, command: &Sh) -> SshError {
        SshError::OutputTooLarge {
            target: self.endpoint.target.clone(),
            command: shown(command),
            cap_mib: OUTPUT_CAP >> 20,
        }
    }

    /// Whether the connection is gone (sshd ended it, keepalives went unanswered): the pool
    /// replaces such a session instead of handing it out again (`live::pool`).
    pub fn is_closed(&self) -> bool {
        self.handle.is_closed()
    }

    pub async fn close(self) {
        let _ = self.handle.disconnect(Disconnect::ByApplication, "", "en").await;
    }

    /// Starts `command` on its own channel and leaves it running with its stdin open: it runs
    /// until [`Running::end`] or until the connection ends (sshd then closes its stdin). Returns
    /// once the command printed a line starting with `until` (it is running; its stdout up to
    /// and with that line), or ended first (its output), within `timeout`. A host lock held by
    /// the session is such a command (`live::locks`): it says what it read under the lock, then
    /// `until`, in the same round trip as taking it.
    pub async fn start(&self, command: &Sh, until: &str, timeout: Duration) -> Result<Started, SshError> {
        let ep = &self.endpoint;
        let fut = async {
            let proto = |e: russh::Error| SshError::Protocol { target: ep.target.clone(), reason: e.to_string() };
            let mut ch = self.handle.channel_open_session().await.map_err(proto)?;
            ch.exec(true, command.as_str()).await.map_err(proto)?;
            let mut out = Collected::new(OUTPUT_CAP);
            while let Some(msg) = ch.wait().await {
                if out.add(msg).is_err() {
                    let _ = ch.close().await;
                    return Err(self.too_large(command));
                }
                if let Some(said) = out.running_through(until) {
                    return Ok(Started::Running(Running { channel: ch }, said));
                }
            }
            Ok(Started::Ended(out.output(&ep.target, "started")?))
        };
        self.within(command, timeout, fut).await
    }
    /// Starts `command` with `input` on its stdin and the stdin left open, and returns once
    /// its stdout holds a line starting with `marker` (it has prepared and now waits for the
    /// rest of its input: [`Staged::finish`]), or once it ended first, within `timeout`. This is
    /// how a change is prepared on several hosts and then triggered on all of them at once
    /// (`apply::rotate`).
    pub async fn stage(&self, command: &Sh, input: &[u8], marker: &str, timeout: Duration) -> Result<Stage, SshError> {
        let ep = &self.endpoint;
        let fut = async {
            let proto = |e: russh::Error| SshError::Protocol { target: ep.target.clone(), reason: e.to_string() };
            let ch = self.handle.channel_open_session().await.map_err(proto)?;
            ch.exec(true, command.as_str()).await.map_err(proto)?;
            if !input.is_empty() {
                ch.data(input).await.map_err(proto)?;
            }
            let mut staged = Staged {
                channel: ch,
                out: Collected::new(OUTPUT_CAP),
                scanned: 0,
                target: ep.target.clone(),
                command: shown(command),
            };
            Ok(if staged.read_to(marker).await? { Stage::Ready(staged) } else { Stage::Ended(staged.ended()?) })
        };
        self.within(command, timeout, fut).await
    }
}

/// What [`Session::stage`] found.
pub enum Stage {
    /// The command printed its marker and waits for the rest of its input.
    Ready(Staged),
    /// It ended before printing the marker.
    Ended(Output),
}

/// A command prepared on its own channel, its stdin still open (see [`Session::stage`]).
pub struct Staged {
    channel: russh::Channel<client::Msg>,
    out: Collected,
    /// How much of stdout was searched for markers already.
    scanned: usize,
    target: String,
    command: String,
}

impl Staged {
    /// Reads the channel until a line of stdout not yet searched starts with `marker` (true) or
    /// the command ended (false).
    async fn read_to(&mut self, marker: &str) -> Result<bool, SshError> {
        loop {
            if let Some(end) = marked(&self.out.out[self.scanned..], marker.as_bytes()) {
                self.scanned += end;
                return Ok(true);
            }
            match self.channel.wait().await {
                Some(msg) => {
                    if self.out.add(msg).is_err() {
                        let _ = self.channel.close().await;
                        return Err(SshError::OutputTooLarge {
                            target: self.target.clone(),
                            command: self.command.clone(),
                            cap_mib: OUTPUT_CAP >> 20,
                        });
                    }
                }
                None => return Ok(false),
            }
        }
    }

    /// The output of a command that ended.
    fn ended(self) -> Result<Output, SshError> {
        let Staged { out, target, .. } = self;
        out.output(&target, "finished")
    }

    /// What the command printed on stdout so far.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.out).into_owned()
    }

    /// Sends more input and waits, within `timeout`, for the next line starting with `marker`:
    /// true when it came, false when the command ended first.
    pub async fn more(&mut self, input: &[u8], marker: &str, timeout: Duration) -> Result<bool, SshError> {
        let proto = |e: russh::Error| SshError::Protocol { target: self.target.clone(), reason: e.to_string() };
        self.channel.data(input).await.map_err(proto)?;
        let secs = timeout.as_secs();
        let (target, command) = (self.target.clone(), self.command.clone());
        tokio::time::timeout(timeout, self.read_to(marker)).await.unwrap_or(Err(SshError::CommandTimeout {
            target,
            command,
            secs,
        }))
    }

    /// Sends the last of its input (the trigger) and ends its stdin; [`Triggered::output`]
    /// then collects what it did. Sending is kept apart from waiting so that several hosts are
    /// triggered as close together as their connections allow.
    pub async fn trigger(self, input: &[u8]) -> Result<Triggered, SshError> {
        let proto = |e: russh::Error| SshError::Protocol { target: self.target.clone(), reason: e.to_string() };
        self.channel.data(input).await.map_err(proto)?;
        self.channel.eof().await.map_err(proto)?;
        Ok(Triggered(self))
    }

    /// Gives the command up: its stdin ends without the trigger (it must then undo what it
    /// prepared and exit); its output, if it came within `timeout`.
    pub async fn abandon(self, timeout: Duration) -> Option<Output> {
        let _ = self.channel.eof().await;
        Triggered(self).output(timeout).await.ok()
    }
}

/// A staged command whose trigger was sent (see [`Staged::trigger`]).
pub struct Triggered(Staged);

impl Triggered {
    /// Everything the command printed, once it exited, within `timeout`.
    pub async fn output(mut self, timeout: Duration) -> Result<Output, SshError> {
        let secs = timeout.as_secs();
        let (target, command) = (self.0.target.clone(), self.0.command.clone());
        let read = async {
            while let Some(msg) = self.0.channel.wait().await {
                if self.0.out.add(msg).is_err() {
                    let _ = self.0.channel.close().await;
                    return Err(SshError::OutputTooLarge {
                        target: self.0.target.clone(),
                        command: self.0.command.clone(),
                        cap_mib: OUTPUT_CAP >> 20,
                    });
                }
            }
            self.0.ended()
        };
        tokio::time::timeout(timeout, read).await.unwrap_or(Err(SshError::CommandTimeout { target, command, secs }))
    }
}

/// The end (after its newline) of the first complete line of `out` that starts with `marker`.
fn marked(out: &[u8], marker: &[u8]) -> Option<usize> {
    let mut start = 0;
    while let Some(nl) = out[start..].iter().position(|b| *b == b'\n') {
        let line = &out[start..start + nl];
        if line.starts_with(marker) {
            return Some(start + nl + 1);
        }
        start += nl + 1;
    }
    None
}

/// What [`Session::start`] found.
pub enum Started {
    /// The command runs; its stdout up to and with the line it was waited for.
    Running(Running, String),
    /// It ended before printing a line.
    Ended(Output),
}

/// A command left running on its own channel (see [`Session::start`]).
pub struct Running {
    channel: russh::Channel<client::Msg>,
}

impl Running {
    /// Whether the command still runs: false once its channel closed or it exited (the
    /// connection dropped, or the remote process was killed). Does not wait.
    pub fn alive(&mut self) -> bool {
        use futures::FutureExt;
        loop {
            match self.channel.wait().now_or_never() {
                None => return true,
                Some(None | Some(ChannelMsg::Eof | ChannelMsg::Close | ChannelMsg::ExitStatus { .. })) => return false,
                Some(Some(ChannelMsg::ExitSignal { .. })) => return false,
                Some(Some(_)) => continue,
            }
        }
    }

    /// Ends the command: closes its stdin (it finishes as it does when the connection ends)
    /// and waits up to `timeout` for it to exit; its exit status, if it came.
    pub async fn end(mut self, timeout: Duration) -> Option<u32> {
        let _ = self.channel.eof().await;
        let status = tokio::time::timeout(timeout, async {
            while let Some(msg) = self.channel.wait().await {
                match msg {
                    ChannelMsg::ExitStatus { exit_status } => return Some(exit_status),
                    ChannelMsg::Close => return None,
                    _ => {}
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        let _ = self.channel.close().await;
        status
    }
}

async fn authenticate(handle: &mut client::Handle<Client>, ep: &Endpoint) -> Result<(), SshError> {
    let mut tried = Vec::new();
    let hash = handle.best_supported_rsa_hash().await.ok().flatten().flatten();
    let mut files = ep.identity_files.clone();
    if files.is_empty() {
        for name in ["id_ed25519", "id_ecdsa", "id_rsa"] {
            files.push(home().join(".ssh").join(name));
        }
    }
    for f in files.iter().filter(|f| f.exists()) {
        match russh::keys::load_secret_key(f, None) {
            Ok(key) => {
                let key = PrivateKeyWithHashAlg::new(Arc::new(key), hash);
                if let Ok(r) = handle.authenticate_publickey(&ep.user, key).await
                    && r.success()
                {
                    return Ok(());
                }
                tried.push(f.display().to_string());
            }
            Err(e) => tried.push(format!("{} (unreadable: {e})", f.display())),
        }
    }
    // With IdentitiesOnly, the agent may sign only for the identity files' keys (an encrypted
    // file's key, say), as OpenSSH's `pubkey_prepare` (sshconnect2.c) keeps only the agent's
    // keys that match a file when `options.identities_only` is set.
    let allowed: Option<Vec<PublicKey>> =
        ep.identities_only.then(|| files.iter().filter_map(|f| public_of(f)).collect());
    if let Ok(mut agent) = russh::keys::agent::client::AgentClient::connect_env().await
        && let Ok(ids) = agent.request_identities().await
    {
        for id in ids {
            let public: PublicKey = id.public_key().into_owned();
            if allowed.as_ref().is_some_and(|keys| !keys.iter().any(|k| k.key_data() == public.key_data())) {
                continue;
            }
            if let Ok(r) = handle.authenticate_publickey_with(&ep.user, public, hash, &mut agent).await
                && r.success()
            {
                return Ok(());
            }
        }
        tried.push("ssh-agent".into());
    }
    Err(SshError::Auth {
        target: ep.target.clone(),
        addr: ep.addr(),
        user: ep.user.clone(),
        tried: if tried.is_empty() { "no key found".into() } else { format!("tried {}", tried.join(", ")) },
    })
}

/// The public key of identity file `f`: its `.pub` beside it (which an encrypted key needs, as
/// OpenSSH reads it), else the key itself when it is not encrypted.
fn public_of(f: &std::path::Path) -> Option<PublicKey> {
    let mut pub_path = f.as_os_str().to_owned();
    pub_path.push(".pub");
    if let Ok(k) = russh::keys::load_public_key(std::path::PathBuf::from(pub_path)) {
        return Some(k);
    }
    russh::keys::load_secret_key(f, None).ok().map(|k| k.public_key().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_counts_on_a_whole_line_only() {
        assert_eq!(marked(b"x\nfabric-staged\n", b"fabric-staged"), Some(16));
        assert_eq!(marked(b"x\nfabric-staged", b"fabric-staged"), None, "not a whole line yet");
        assert_eq!(marked(b"say fabric-staged\n", b"fabric-staged"), None, "not at the start");
        assert_eq!(marked(b"", b"m"), None);
    }

    #[test]
    fn output_is_kept_up_to_its_cap_on_each_stream() {
        let mut c = Collected::new(10);
        assert_eq!(c.stdout(b"12345"), Ok(()));
        assert_eq!(c.stdout(b"67890"), Ok(()), "exactly the cap is fine");
        assert_eq!(c.stderr(b"0123456789"), Ok(()), "each stream has its own cap");
        assert_eq!(c.stdout(b"x"), Err(Full));
        assert_eq!(c.out, b"1234567890", "nothing past the cap is kept");
    }

    fn config(name: &str, text: &str) -> SshConfig {
        let f = std::env::temp_dir().join(format!("fabric-ssh-ep-{name}-{}", std::process::id()));
        std::fs::write(&f, text).unwrap();
        SshConfig::load(&f).unwrap()
    }

    fn resolve(c: &SshConfig, access: SshAccess) -> Result<Endpoint, ConfigError> {
        Endpoint::resolve("router.x", &access, c, &mut vec![])
    }

    /// `ProxyJump a,op@b:2200`: the router through b, b (as op, port 2200, its own HostName and
    /// key) through a, a with its own config; b's own ProxyJump gives way to the chain's.
    #[test]
    fn each_hop_is_resolved_with_its_own_config() {
        let c = config(
            "chain",
            "Host r\n  HostName 10.9.0.1\n  ProxyJump a,op@b:2200\n\
             Host b\n  HostName 10.8.0.2\n  User ignored\n  IdentityFile /k/b\n  ProxyJump elsewhere\n\
             Host a\n  HostName 10.7.0.3\n  Port 2022\n",
        );
        let ep = resolve(&c, SshAccess { host: "r".into(), user: Some("vyos".into()), ..Default::default() }).unwrap();
        let b = ep.proxy_jump.as_deref().unwrap();
        let a = b.proxy_jump.as_deref().unwrap();
        assert_eq!((ep.host.as_str(), ep.user.as_str()), ("10.9.0.1", "vyos"));
        assert_eq!((b.host.as_str(), b.port, b.user.as_str()), ("10.8.0.2", 2200, "op"));
        assert_eq!(b.identity_files, [PathBuf::from("/k/b")]);
        assert_eq!((a.host.as_str(), a.port, a.proxy_jump.is_none()), ("10.7.0.3", 2022, true));
        assert_eq!(a.target, "router.x (jump host b) (jump host a)");
        assert!(
            ep.known_hosts.ends_with(&[PathBuf::from("/etc/ssh/ssh_known_hosts"), "/etc/ssh/ssh_known_hosts2".into()])
        );
    }

    #[test]
    fn jump_loops_and_bad_hops_are_errors() {
        let c = config("loop", "Host a\n  ProxyJump b\nHost b\n  ProxyJump a\nHost self\n  ProxyJump self\n");
        let e = resolve(&c, SshAccess { host: "a".into(), ..Default::default() }).unwrap_err();
        assert!(e.message.contains("more than 8 jump hosts"), "{e}");
        let e = resolve(&c, SshAccess { host: "self".into(), ..Default::default() }).unwrap_err();
        assert!(e.message.contains("a jump host loop via self"), "{e}");
        let bad = SshAccess { host: "x".into(), proxy_jump: Some("a:99999".into()), ..Default::default() };
        let e = resolve(&c, bad).unwrap_err();
        assert_eq!(e.to_string(), "router.x: ProxyJump `a:99999`: a hop is not `[user@]host[:port]`");
    }

    #[test]
    fn a_refused_connect_behind_a_jump_host_reads_like_a_direct_one() {
        use russh::{ChannelOpenFailure, Error};
        let refused = Error::ChannelOpenFailure(ChannelOpenFailure::ConnectFailed);
        let said = through_jump(&refused, Some("Connection refused"), "10.1.0.3:22");
        assert_eq!(said, "Connection refused (said by jump host 10.1.0.3:22, which could not connect)");
        // Without the description (or for another refusal), what russh said, never a guess.
        let prohibited = Error::ChannelOpenFailure(ChannelOpenFailure::AdministrativelyProhibited);
        let said = through_jump(&prohibited, Some("open failed"), "j:22");
        assert_eq!(said, "through jump host j:22: Failed to open channel (AdministrativelyProhibited): open failed");
        let said = through_jump(&refused, None, "j:22");
        assert_eq!(said, "through jump host j:22: Failed to open channel (ConnectFailed)");
    }

    #[test]
    fn the_cap_error_names_host_command_and_cap() {
        let e = SshError::OutputTooLarge {
            target: "router.sp".into(),
            command: "cat /x".into(),
            cap_mib: OUTPUT_CAP >> 20,
        };
        assert_eq!(e.to_string(), "router.sp: `cat /x` printed more than 16 MiB: fabric stopped reading it");
    }
}
