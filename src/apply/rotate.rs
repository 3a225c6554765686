//! `fabric rotate wireguard`: every router of the tunnel gets its peers' new public keys, and the
//! rotated ones a new key pair made on the router itself; both ends switch together, under the
//! run's host locks and the routers' own self-revert (as B.1), then B.1's check, then the
//! confirmation over fresh connections. A failure puts every router back on its old key.
//!
//! WireGuard has one private key per interface and one peer per allowed IP, so the tunnel
//! carries nothing from the first end's switch until the last end's, and until the next
//! handshake. To keep that window short, everything that takes time is done first, on every
//! router, while the tunnel still runs: the next key made, the next configuration written, the
//! switch staged on an open channel waiting for its trigger (`providers::wg_rotate`). The
//! triggers are then sent to all routers at once, and the routers ping each other once so that
//! the handshake starts at once. Pings across the tunnel from a LAN host (as B.1's check) run
//! throughout and measure the window.

use crate::apply::Failed;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use crate::apply::journal::{Entry, Journal};
use crate::apply::{ApplyError, HostLocks, Pool, Progress, confirm, pause};
use crate::desired::{Resource, Target};
use crate::live::observe::{Live, Targets};
use crate::providers::{self, Observed, WgKey, wg_rotate as wr};
use crate::topology::Topology;
use crate::topology::model::{RouterKind, Site};
use crate::transport::shell;
use crate::transport::ssh::{Output, Session, Stage, Staged};

/// The name a rotation goes by in the journal and in errors.
pub const STEP: &str = "rotate wireguard";

const STAGE_TIMEOUT: Duration = Duration::from_secs(60);
const SWITCH_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the pings go on after the triggers were sent, at least.
const PROBE_AFTER: Duration = Duration::from_secs(1);

/// What to rotate.
pub struct Request<'a> {
    pub t: &'a Topology,
    pub targets: &'a Targets,
    /// B.1's resources at every site, planned in sync with the routers.
    pub resources: &'a [Resource],
    /// The routers as read for that plan (their public keys and configurations).
    pub live: &'a Live,
    /// The sites whose router gets a new key pair.
    pub sites: BTreeSet<String>,
    pub run: String,
    pub confirm_timeout: Duration,
}

/// A rotation done and confirmed.
#[derive(Debug)]
pub struct Rotated {
    /// Router, old public key, new public key.
    pub keys: Vec<(Target, WgKey, WgKey)>,
    /// What the pings across the tunnel saw, or why nothing was measured.
    pub loss: Result<wr::Loss, Failed>,
    /// B.1's check after the switch.
    pub check: String,
}

/// One router of the rotation.
struct Router<'a> {
    target: Target,
    site: &'a Site,
    vyos: bool,
    iface: String,
    /// Whether it gets a new key pair (else only its peers' new public keys).
    own: bool,
    old: WgKey,
    /// Its WireGuard interface (B.1's resource).
    resource: &'a Resource,
}

/// A router prepared to switch, and what triggers it.
struct Ready<'a> {
    router: &'a Router<'a>,
    staged: Staged,
    trigger: Vec<u8>,
}

/// Rotates: locks the routers, stages, triggers, checks and confirms, or puts them back.
pub async fn run(req: &Request<'_>, journal: &mut Journal, progress: Progress<'_>) -> Result<Rotated, ApplyError> {
    let routers = routers(req)?;
    let pool = Pool::default();
    let locks = HostLocks::default();
    let hosts: BTreeSet<Target> = routers.iter().map(|r| r.target.clone()).collect();
    let result = async {
        locks.take_all(&pool, req.targets, &hosts, &req.run, progress).await?;
        pause::at("locked").await;
        rotate(req, &routers, &pool, &locks, journal, progress).await
    }
    .await;
    locks.release_all().await;
    pool.close().await;
    result
}

fn blocked(reason: String) -> ApplyError {
    ApplyError::Blocked { step: STEP.into(), reason }
}

/// The routers of the tunnel: every site's (each is a peer of the others, so each changes).
fn routers<'a>(req: &'a Request<'a>) -> Result<Vec<Router<'a>>, ApplyError> {
    let mut out = Vec::new();
    for s in &req.t.sites {
        let target = Target::router(&s.name);
        let resource = req
            .resources
            .iter()
            .find(|r| r.target() == &target && r.is_wireguard_interface())
            .ok_or_else(|| blocked(format!("{target}: B.1 has no WireGuard interface there")))?;
        let old = req.live.keys.get(&target).cloned().ok_or_else(|| {
            blocked(format!("{target} has no WireGuard key yet: apply B.1 first (`fabric apply --step B.1`)"))
        })?;
        out.push(Router {
            target,
            site: s,
            vyos: s.router.kind == RouterKind::Vyos,
            iface: s.router.wireguard.interface.clone(),
            own: req.sites.contains(&s.name),
            old,
            resource,
        });
    }
    Ok(out)
}

/// The run's sessions to the routers, each under the run's lock.
type Sessions = BTreeMap<Target, Arc<Session>>;

/// The routers reached: their sessions, and how each VyOS router's commit-confirm asks.
struct Opened {
    sessions: Sessions,
    forms: BTreeMap<Target, providers::ConfirmForm>,
}

async fn open(req: &Request<'_>, routers: &[Router<'_>], pool: &Pool, locks: &HostLocks) -> Result<Opened, ApplyError> {
    let mut sessions = BTreeMap::new();
    let mut forms = BTreeMap::new();
    for r in routers {
        let s = pool.get(req.targets, &r.target).await?;
        locks.ensure(&s, &r.target, &req.run).await?;
        if r.vyos {
            let form =
                providers::vyos_confirm_form(&s, &r.resource.address).await.map_err(|e| blocked(e.to_string()))?;
            forms.insert(r.target.clone(), form);
        }
        sessions.insert(r.target.clone(), s);
    }
    Ok(Opened { sessions, forms })
}

/// Every router's public key after the rotation, and the VyOS sessions holding a new private
/// key in their candidate; the first failure, after undoing what was made.
async fn next_keys(
    routers: &[Router<'_>],
    sessions: &Sessions,
) -> Result<(BTreeMap<Target, WgKey>, BTreeMap<Target, Staged>), ApplyError> {
    let own = || routers.iter().filter(|r| r.own);
    let made = futures::future::join_all(own().map(|r| next_key(r, &sessions[&r.target]))).await;
    let mut keys: BTreeMap<Target, WgKey> = routers.iter().map(|r| (r.target.clone(), r.old.clone())).collect();
    let mut open = BTreeMap::new();
    let mut failure = None;
    for (r, m) in own().zip(made) {
        match m {
            Ok((key, staged)) => {
                keys.insert(r.target.clone(), key);
                if let Some(st) = staged {
                    open.insert(r.target.clone(), st);
                }
            }
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failure {
        discard(routers, sessions, open.into_values().collect()).await;
        return Err(blocked(e.0));
    }
    Ok((keys, open))
}

/// Every router staged (or, on the first failure, everything undone), and the switches
/// journaled before they happen (public keys only).
async fn stage_all<'a>(
    req: &Request<'_>,
    routers: &'a [Router<'a>],
    opened: &Opened,
    mut open: BTreeMap<Target, Staged>,
    keys: &BTreeMap<Target, WgKey>,
    rotated: &[(Target, WgKey, WgKey)],
    journal: &mut Journal,
) -> Result<Vec<Ready<'a>>, ApplyError> {
    let (sessions, forms) = (&opened.sessions, &opened.forms);
    let minutes = (req.confirm_timeout.as_secs().max(1) as u32).div_ceil(60);
    let mut staging = Vec::new();
    for r in routers {
        let trigger = match forms.get(&r.target) {
            Some(form) => wr::vyos_trigger(minutes, *form).into_bytes(),
            None => wr::GO.to_vec(),
        };
        staging.push(stage(req, r, &sessions[&r.target], open.remove(&r.target), keys, trigger));
    }
    let mut ready = Vec::new();
    let mut failure = None;
    for s in futures::future::join_all(staging).await {
        match s {
            Ok(r) => ready.push(r),
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    if failure.is_none() {
        for (router, old, new) in rotated {
            let e = Entry::KeyRotation {
                run: req.run.clone(),
                router: router.to_string(),
                old_public_key: old.to_string(),
                new_public_key: new.to_string(),
            };
            if let Err(e) = journal.write(&e) {
                failure = Some(Failed::from(format!("cannot write the journal {}: {e}", journal.path.display())));
                break;
            }
        }
    }
    if let Some(e) = failure {
        discard(routers, sessions, ready.into_iter().map(|r| r.staged).collect()).await;
        return Err(blocked(e.0));
    }
    Ok(ready)
}

/// What each router's switch printed.
type Switched<'a> = Vec<(&'a Router<'a>, Result<Output, crate::transport::ssh::SshError>)>;

/// Every trigger sent at once, then every output collected.
async fn switch_all(ready: Vec<Ready<'_>>) -> Switched<'_> {
    let sent = futures::future::join_all(ready.into_iter().map(|r| async move {
        let router = r.router;
        (router, r.staged.trigger(&r.trigger).await)
    }))
    .await;
    futures::future::join_all(sent.into_iter().map(|(router, t)| async move {
        let o = match t {
            Ok(t) => t.output(SWITCH_TIMEOUT).await,
            Err(e) => Err(e),
        };
        (router, o)
    }))
    .await
}

/// B.1's check through the new keys: its evidence, or why it failed.
async fn check(req: &Request<'_>, pool: &Pool) -> Result<String, Failed> {
    let cx = crate::steps::CheckCx { t: req.t, pool, targets: req.targets, resources: req.resources };
    match crate::steps::get("B.1").and_then(|s| s.check(&cx)) {
        Some(c) => (c.await.map_err(|e| format!("check failed: {e}"))).map_err(Failed::from),
        None => Ok(String::new()),
    }
}

async fn rotate(
    req: &Request<'_>,
    routers: &[Router<'_>],
    pool: &Pool,
    locks: &HostLocks,
    journal: &mut Journal,
    progress: Progress<'_>,
) -> Result<Rotated, ApplyError> {
    let opened = open(req, routers, pool, locks).await?;
    // 1. The next key pairs, on every rotated router at once.
    progress(&format!("{STEP}: making new key pairs on the routers"));
    let (keys, open) = next_keys(routers, &opened.sessions).await?;
    let rotated: Vec<(Target, WgKey, WgKey)> =
        routers.iter().filter(|r| r.own).map(|r| (r.target.clone(), r.old.clone(), keys[&r.target].clone())).collect();
    // 2. Every router staged: its next configuration in place, its switch waiting for the trigger.
    let ready = stage_all(req, routers, &opened, open, &keys, &rotated, journal).await?;

    // 3. The pings that measure the window, then every trigger at once.
    let probe = start_probe(req, pool).await;
    pause::at("staged").await;
    progress(&format!("{STEP}: switching {} router(s) together", ready.len()));
    let switched_at = std::time::Instant::now();
    let outputs = switch_all(ready).await;
    let mut failure = outputs.iter().find_map(|(router, o)| switched(router, o).err());
    pause::at("applied").await;

    // 4. B.1's check through the new keys; the pings stop a second after the switch at least,
    // so that a late handshake shows too.
    let mut evidence = String::new();
    if failure.is_none() {
        match check(req, pool).await {
            Ok(e) => evidence = e,
            Err(e) => failure = Some(e),
        }
    }
    tokio::time::sleep(PROBE_AFTER.saturating_sub(switched_at.elapsed())).await;
    let loss = stop_probe(probe).await;
    match &loss {
        Ok(l) => progress(&format!("{STEP}: {}", l.line())),
        Err(why) => progress(&format!("{STEP}: loss window not measured: {why}")),
    }

    // 5. Confirmed over fresh connections, or put back.
    if failure.is_none() {
        let lost = locks.lost(&routers.iter().map(|r| r.target.clone()).collect()).await;
        if !lost.is_empty() {
            failure = Some(Failed::from(format!(
                "the host lock of {} ended during the run; not confirming",
                lost.iter().map(Target::to_string).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    if failure.is_none() {
        let applied: Vec<(Resource, Observed)> =
            routers.iter().map(|r| (r.resource.clone(), Observed::Absent)).collect();
        match confirm::confirm(&applied, &req.run, req.targets).await {
            Ok(()) => {
                forget_old_keys(routers, pool, req.targets, progress).await;
                let _ = journal.write(&Entry::Done { run: req.run.clone(), step: STEP.into() });
                return Ok(Rotated { keys: rotated, loss, check: evidence });
            }
            Err(u) if u.any_confirmed => {
                let reason = format!("{}; a router was confirmed before it: check the tunnel by hand", u.error);
                let _ =
                    journal.write(&Entry::Failed { run: req.run.clone(), step: STEP.into(), reason: reason.clone() });
                return Err(ApplyError::Stuck { step: STEP.into(), reason });
            }
            Err(u) => failure = Some(Failed::from(u.error.to_string())),
        }
    }
    let reason = failure.map(|f| f.0).unwrap_or_default();
    progress(&format!("{STEP}: {reason}; putting every router back on its old key"));
    let (notes, left) = put_back(routers, &outputs, pool, req).await;
    let reason = if notes.is_empty() { reason } else { format!("{reason}; {}", notes.join("; ")) };
    finish_failed(req, journal, reason, left)
}

/// Journals and returns a failed rotation: put back, or not completely.
fn finish_failed(
    req: &Request<'_>,
    journal: &mut Journal,
    reason: String,
    left: Vec<String>,
) -> Result<Rotated, ApplyError> {
    if left.is_empty() {
        let _ = journal.write(&Entry::Reverted { run: req.run.clone(), step: STEP.into(), reason: reason.clone() });
        Err(ApplyError::Reverted { step: STEP.into(), reason })
    } else {
        let reason = format!("{reason}; not put back: {}", left.join("; "));
        let _ = journal.write(&Entry::Failed { run: req.run.clone(), step: STEP.into(), reason: reason.clone() });
        Err(ApplyError::Stuck { step: STEP.into(), reason })
    }
}

/// Makes a router's next key pair: its public key, and (VyOS) the open session whose candidate
/// holds the private one.
async fn next_key(r: &Router<'_>, s: &Session) -> Result<(WgKey, Option<Staged>), Failed> {
    let t = &r.target;
    if !r.vyos {
        let cmd = shell::as_root(&s.endpoint.user, &wr::linux_next_key(&r.iface));
        let o = s.run(&cmd, None, STAGE_TIMEOUT).await.map_err(|e| e.to_string())?;
        if o.status != 0 {
            return Err(Failed::from(format!(
                "{t}: `wg genkey` failed (exit {}): {}",
                o.status,
                wr::scrub(&o.stderr_str())
            )));
        }
        let key = wr::printed_key(&o.stdout_str()).ok_or_else(|| format!("{t}: `wg pubkey` printed no public key"))?;
        return Ok((key, None));
    }
    let script = wr::vyos_generate(&r.iface);
    match s.stage(&providers::vbash(), script.as_bytes(), wr::GENERATED, STAGE_TIMEOUT).await {
        Ok(Stage::Ready(st)) => {
            let out = wr::scrub(&st.stdout());
            let said = providers::vyos_error(&out, "");
            match (wr::generated_key(&out), said) {
                (Some(k), None) => Ok((k, Some(st))),
                (_, said) => {
                    let _ = st.abandon(Duration::from_secs(10)).await;
                    Err(Failed::from(format!(
                        "{t}: the key was not generated: {}",
                        said.unwrap_or_else(|| "VyOS printed no public key".into())
                    )))
                }
            }
        }
        Ok(Stage::Ended(o)) => {
            Err(Failed::from(format!("{t}: the key was not generated (exit {}): {}", o.status, said(&o))))
        }
        Err(e) => Err(Failed::from(e.to_string())),
    }
}

/// A router's answer, scrubbed of private keys: VyOS's error line, else stderr.
fn said(o: &Output) -> String {
    let (out, err) = (wr::scrub(&o.stdout_str()), wr::scrub(&o.stderr_str()));
    providers::vyos_error(&out, &err).unwrap_or(err)
}

/// Stages one router: its next configuration (its peers' new public keys) ready, its switch
/// waiting for `trigger`.
async fn stage<'a>(
    req: &Request<'_>,
    r: &'a Router<'a>,
    s: &Session,
    open: Option<Staged>,
    keys: &BTreeMap<Target, WgKey>,
    trigger: Vec<u8>,
) -> Result<Ready<'a>, Failed> {
    let t = &r.target;
    let resolve = |p: &Target| keys.get(p).map(WgKey::to_string);
    let next = providers::desired_text(r.resource, &resolve);
    if !r.vyos {
        let write = shell::as_root(&s.endpoint.user, &shell::write_file(&wr::next_conf(&r.iface), 0o600));
        let o = s.run(&write, Some(next.as_bytes()), STAGE_TIMEOUT).await.map_err(|e| e.to_string())?;
        if o.status != 0 {
            return Err(Failed::from(format!(
                "{t}: cannot write the next configuration: {}",
                wr::scrub(&o.stderr_str())
            )));
        }
        let peers: Vec<Ipv4Addr> =
            req.t.sites.iter().filter(|p| p.name != r.site.name).map(|p| p.router.wireguard.address.addr).collect();
        let canary = confirm::canary(&r.iface, &req.run);
        let secs = req.confirm_timeout.as_secs().max(1) as u32;
        let cmd = shell::as_root(&s.endpoint.user, &wr::linux_stage(&r.iface, &canary, secs, r.own, &peers));
        return match s.stage(&cmd, b"", wr::STAGED, STAGE_TIMEOUT).await.map_err(|e| e.to_string())? {
            Stage::Ready(staged) => Ok(Ready { router: r, staged, trigger }),
            Stage::Ended(o) => {
                Err(Failed::from(format!("{t}: cannot stage the switch (exit {}): {}", o.status, said(&o))))
            }
        };
    }
    // VyOS: only the peers' public-key lines may differ from what runs (plan found B.1 in sync).
    let from: Vec<String> = match req.live.observed.get(&r.resource.address) {
        Some(Observed::Present(text)) => text.lines().map(String::from).collect(),
        _ => vec![],
    };
    let sets: Vec<String> = next.lines().filter(|l| !from.iter().any(|f| f == l)).map(String::from).collect();
    if let Some(other) = sets.iter().find(|l| !l.contains(" public-key ") || !providers::vyos_line_ok(l)) {
        if let Some(st) = open {
            let _ = st.abandon(Duration::from_secs(10)).await;
        }
        return Err(Failed::from(format!(
            "{t}: the interface differs in more than its peers' keys ({other}): apply B.1 first"
        )));
    }
    let part = wr::vyos_stage(&sets);
    let staged = match open {
        Some(mut st) => match st.more(part.as_bytes(), wr::STAGED, STAGE_TIMEOUT).await {
            Ok(true) => st,
            Ok(false) => return Err(Failed::from(format!("{t}: the session ended before it was staged"))),
            Err(e) => {
                let _ = st.abandon(Duration::from_secs(5)).await;
                return Err(Failed::from(e.to_string()));
            }
        },
        None => {
            let script = format!("{}{part}", wr::vyos_configure());
            match s.stage(&providers::vbash(), script.as_bytes(), wr::STAGED, STAGE_TIMEOUT).await {
                Ok(Stage::Ready(st)) => st,
                Ok(Stage::Ended(o)) => {
                    return Err(Failed::from(format!("{t}: cannot stage (exit {}): {}", o.status, said(&o))));
                }
                Err(e) => return Err(Failed::from(e.to_string())),
            }
        }
    };
    if let Some(line) = providers::vyos_error(&wr::scrub(&staged.stdout()), "") {
        let _ = staged.abandon(Duration::from_secs(10)).await;
        return Err(Failed::from(format!("{t}: VyOS said: {line}")));
    }
    Ok(Ready { router: r, staged, trigger })
}

/// Undoes what was prepared before any trigger: staged channels end without theirs (a Linux
/// router then removes its next key and file; a VyOS session ends, dropping its candidate), and
/// Linux routers drop a next key made before staging.
async fn discard(routers: &[Router<'_>], sessions: &BTreeMap<Target, Arc<Session>>, staged: Vec<Staged>) {
    futures::future::join_all(staged.into_iter().map(|s| s.abandon(Duration::from_secs(10)))).await;
    for r in routers.iter().filter(|r| !r.vyos) {
        let s = &sessions[&r.target];
        let _ = s.run(&shell::as_root(&s.endpoint.user, &wr::linux_discard()), None, STAGE_TIMEOUT).await;
    }
}

/// Whether a router switched, from what its staged command printed.
fn switched(r: &Router<'_>, o: &Result<Output, crate::transport::ssh::SshError>) -> Result<(), Failed> {
    let o = o.as_ref().map_err(|e| format!("{}: {e}", r.target))?;
    if r.vyos {
        let clean = Output {
            status: o.status,
            stdout: wr::scrub(&o.stdout_str()).into_bytes(),
            stderr: wr::scrub(&o.stderr_str()).into_bytes(),
        };
        return (providers::vyos_outcome(&r.resource.address, "commit-confirm", &clean, true)
            .map_err(|e| e.to_string()))
        .map_err(Failed::from);
    }
    if o.status == 0 && o.stdout_str().lines().any(|l| l.trim() == wr::SWITCHED) {
        Ok(())
    } else {
        Err(Failed::from(format!(
            "{}: the switch failed (exit {}): {}",
            r.target,
            o.status,
            wr::scrub(&o.stderr_str())
        )))
    }
}

/// Puts the routers back after a failed switch, check or confirmation: a Linux router at once
/// (its timer is cancelled and its saved key and file restored; a timer that fired first did
/// that already); a VyOS router whose commit-confirm armed reverts by itself when its timer fires
/// (VyOS 1.4 reboots to the saved configuration, which holds the old key: fabric cannot write
/// an old private key it never read). Returns notes, and what could not be put back.
async fn put_back(
    routers: &[Router<'_>],
    outputs: &[(&Router<'_>, Result<Output, crate::transport::ssh::SshError>)],
    pool: &Pool,
    req: &Request<'_>,
) -> (Vec<String>, Vec<String>) {
    let (mut notes, mut left) = (Vec::new(), Vec::new());
    for r in routers {
        let out = outputs.iter().find(|(o, _)| o.target == r.target).and_then(|(_, o)| o.as_ref().ok());
        if r.vyos {
            if out.is_some_and(|o| o.stdout_str().contains(providers::VYOS_ARMED)) {
                notes.push(format!(
                    "{} goes back to its saved configuration (its old key) by itself when its commit-confirm timer fires",
                    r.target
                ));
            }
            continue;
        }
        let canary = confirm::canary(&r.iface, &req.run);
        let cmd = crate::sh!("{} && {}", shell::cancel_revert(&canary), wr::linux_restore(&r.iface));
        let back = async {
            let s = pool.get(req.targets, &r.target).await.map_err(|e| e.to_string())?;
            let o = s
                .run(&shell::as_root(&s.endpoint.user, &cmd), None, SWITCH_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
            let _ = s.run(&shell::as_root(&s.endpoint.user, &wr::linux_discard()), None, STAGE_TIMEOUT).await;
            match o.status {
                // Cancelled and restored, or its timer had claimed it (it restores by itself).
                0 | shell::LOST => Ok(()),
                n => Err(format!("exit {n}: {}", wr::scrub(&o.stderr_str()))),
            }
        };
        if let Err(e) = back.await {
            left.push(format!("{}: {e} (its timer still puts it back if armed)", r.target));
        }
    }
    (notes, left)
}

/// Once confirmed, the old private keys are removed from the Linux routers (VyOS keeps none:
/// `save` wrote the new configuration).
async fn forget_old_keys(routers: &[Router<'_>], pool: &Pool, targets: &Targets, progress: Progress<'_>) {
    for r in routers.iter().filter(|r| !r.vyos) {
        let gone = async {
            let s = pool.get(targets, &r.target).await.ok()?;
            let cmd = shell::as_root(&s.endpoint.user, &shell::remove_file(&wr::prev_key(&r.iface)));
            s.run(&cmd, None, STAGE_TIMEOUT).await.ok().filter(|o| o.status == 0)
        };
        if gone.await.is_none() {
            progress(&format!("warning: {}: the old key {} could not be removed", r.target, wr::prev_key(&r.iface)));
        }
    }
}

/// Where the window is measured from: B.1's check's first pair (a LAN host with SSH at one
/// site, a node of another), else a Linux router and its peer's tunnel address.
fn probe_path(t: &Topology) -> Option<(Target, Ipv4Addr)> {
    let lan = t.sites.iter().find_map(|s| {
        let from = s.cluster.nodes.iter().find(|n| n.ssh.is_some())?;
        let to = t.sites.iter().find(|p| p.name != s.name)?.cluster.nodes.first()?;
        Some((Target::host(&from.name), to.address))
    });
    lan.or_else(|| {
        let s = t.sites.iter().find(|s| s.router.kind == RouterKind::Linux)?;
        let p = t.sites.iter().find(|p| p.name != s.name)?;
        Some((Target::router(&s.name), p.router.wireguard.address.addr))
    })
}

/// Starts the pings across the tunnel (why not, when they cannot run).
async fn start_probe(req: &Request<'_>, pool: &Pool) -> Result<Staged, Failed> {
    let (from, addr) = probe_path(req.t).ok_or("no host with SSH on a LAN or Linux router to ping from")?;
    let s = pool.get(req.targets, &from).await.map_err(|e| format!("{from}: {e}"))?;
    match s.stage(&wr::loss_probe(addr), b"", wr::PROBING, Duration::from_secs(10)).await {
        Ok(Stage::Ready(st)) => Ok(st),
        Ok(Stage::Ended(o)) => Err(Failed::from(format!("{from}: ping did not start: {}", o.stderr_str()))),
        Err(e) => Err(Failed::from(e.to_string())),
    }
}

/// Stops the pings and reads the window from them.
async fn stop_probe(probe: Result<Staged, Failed>) -> Result<wr::Loss, Failed> {
    let st = probe?;
    let o = st.trigger(b"").await.map_err(|e| e.to_string())?.output(Duration::from_secs(10)).await;
    let o = o.map_err(|e| e.to_string())?;
    wr::loss_of(&o.stdout_str()).ok_or_else(|| "the pings' output was not ping's".into())
}
