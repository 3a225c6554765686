//! Apply: walk the selected steps in order; before each step journal its rollback point; apply
//! its changes target by target (all targets at once); run the step's check; confirm over fresh
//! connections. A failed change or check reverts the step and stops the run.
//!
//! This module is the run itself (locks, journal, waves of steps, rounds of changes); a target's
//! changes are applied by `host` (SSH) or `kube` (clusters), then checked (the step's own
//! `steps::Step::check`), confirmed (`confirm`) or reverted (`revert`).

pub mod bootstrap;
pub mod confirm;
pub mod event;
pub mod host;
pub mod host_locks;
pub mod interrupt;
pub mod journal;
pub mod k3s_token;
pub mod karmada_backup;
pub mod kube;
pub mod lease;
pub mod node;
pub mod pause;
pub mod revert;
pub mod rotate;
pub mod timeline;
pub mod tunnel_ends;
pub mod upgrade;
pub mod wait;

/// Why a multi-host procedure outside the step loop failed (a key rotation, a token rotation,
/// Karmada's etcd snapshot): the host and what it said, as the operator reads it. Its own type,
/// not a bare `String`, so that a caller can tell it from a value and `?` converts it once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Failed(pub String);

impl From<String> for Failed {
    fn from(s: String) -> Self {
        Failed(s)
    }
}

impl From<&str> for Failed {
    fn from(s: &str) -> Self {
        Failed(s.to_string())
    }
}

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::apply::confirm::confirm;
use crate::apply::event::Event;
use crate::apply::journal::{Entry, Journal, Prior};
use crate::apply::revert::{kube_identity, revert_all};
use crate::desired::{Address, ProviderKind, Resource, Target};
pub use crate::live::locks::{HeldLock, LOCK_EXPIRY, LOCK_PATH};
use crate::live::observe::{self, Live, Targets};
pub use crate::live::pool::Pool;
use crate::plan::model::Action;
use crate::providers::{self, Observed, PendingChange, WgKey};
use crate::topology::Topology;
use crate::transport::ssh::SshError;
pub use host_locks::HostLocks;

#[derive(Debug, Clone)]
pub struct Options {
    pub run: String,
    pub state_dir: std::path::PathBuf,
    /// How long a router waits for confirmation before it reverts by itself.
    pub confirm_timeout: Duration,
    /// Take fields over from other field managers in Kubernetes objects.
    pub force_conflicts: bool,
    /// How long to wait for an applied object's controller to report it done.
    pub wait_timeout: Duration,
    /// When the run's Leases are renewed and given up (`lease::Times::default()` but in tests).
    pub lease: lease::Times,
}

/// One step to apply, with its resources (already limited to the selected sites).
#[derive(Debug, Clone)]
pub struct StepWork {
    pub key: String,
    pub id: String,
    /// Keys of the steps this one needs (those in the same run must finish first).
    pub needs: Vec<String>,
    pub resources: Vec<Resource>,
}

impl StepWork {
    /// The instance `key` of `g` on its own, as the run of a step whose needs are done has it
    /// (no other step of the run to wait for).
    pub fn alone(g: &crate::catalog::StepGraph, t: &Topology, key: &str) -> Option<StepWork> {
        let inst = &g.graph[g.find(key)?];
        let resources = crate::steps::for_instance(inst, t);
        Some(StepWork { key: key.into(), id: inst.spec.id.clone(), needs: vec![], resources })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{0}")]
    Ssh(#[from] SshError),
    #[error("{target} is locked by another apply: {holder}")]
    Locked { target: String, holder: String },
    #[error("{target}: cannot take the lock: {stderr}")]
    LockFailed { target: String, stderr: String },
    #[error("step {step} failed and was reverted: {reason}")]
    Reverted { step: String, reason: String },
    #[error("step {step} failed and could not be reverted completely: {reason}")]
    Stuck { step: String, reason: String },
    #[error("step {step} cannot be applied: {reason}")]
    Blocked { step: String, reason: String },
    #[error("interrupted: {0}")]
    Interrupted(String),
    /// A Lease the run held lapsed or was taken over between steps (see `lease`).
    #[error("stopped: {reason}; not started: {left}")]
    LeaseLost { reason: String, left: String },
    #[error("cannot write the journal {path}: {reason}")]
    Journal { path: String, reason: String },
}

impl ApplyError {
    pub fn help(&self) -> String {
        match self {
            ApplyError::Ssh(e) => e.help(),
            ApplyError::LockFailed { .. } => {
                "check that the remote user can write /run/lock (as root or through sudo)".into()
            }
            ApplyError::Locked { .. } => {
                "wait for the other apply to finish (or give --lock-timeout DURATION, e.g. 5m, to wait for it): a host's lock ends with that run's SSH session (a lost client's when sshd's keepalive drops it, docs/runbook.md \"Locks\"); `fabric lock status` shows the holder".into()
            }
            ApplyError::Reverted { .. } => {
                "the step is back at its rollback point; fix the cause and apply again (`fabric plan` shows the state)"
                    .into()
            }
            ApplyError::Stuck { .. } => {
                "check the named targets by hand; `fabric rollback` retries the journaled rollback points".into()
            }
            ApplyError::Blocked { .. } => "make the targets reachable, or leave the step out with --site/--step".into(),
            ApplyError::Interrupted(_) => {
                "the steps before stayed applied (the journal lists them); `fabric plan` shows what is left".into()
            }
            ApplyError::Journal { .. } => "fabric journals before it changes anything: make .fabric writable".into(),
            ApplyError::LeaseLost { .. } => {
                "the steps before stayed applied (the journal lists them); check that the cluster's API answers (`fabric lock status`), then apply again".into()
            }
        }
    }
}

/// Progress, as plain lines (the command decides how to show them).
pub type Progress<'a> = &'a (dyn Fn(&str) + Sync);

/// How a run meets the operator and other runs: its progress lines, its typed events when a
/// machine reads them (`apply --json`; without, they go to `progress` as their lines), and how
/// long it waits for a lock another run holds (`--lock-timeout`; zero: refused at once).
#[derive(Clone, Copy)]
pub struct Hooks<'a> {
    pub progress: Progress<'a>,
    pub events: Option<event::Events<'a>>,
    pub lock_timeout: Duration,
}

impl<'a> Hooks<'a> {
    /// Progress lines only, no wait for locks.
    pub fn lines(progress: Progress<'a>) -> Hooks<'a> {
        Hooks { progress, events: None, lock_timeout: Duration::ZERO }
    }

    /// Reports `e`: to the machine that reads events, else as its progress line.
    pub fn emit(&self, e: event::Event) {
        match self.events {
            Some(events) => events(&e),
            None => {
                if let Some(line) = e.line() {
                    (self.progress)(&line);
                }
            }
        }
    }
}

/// How often a run waiting for another run's lock (`--lock-timeout`) tries it again.
pub const LOCK_RETRY: Duration = Duration::from_secs(1);

/// [`lease::take`], waiting while another run holds one of the Leases, up to `wait` from now
/// (`--lock-timeout`; zero: refused at once, as [`lease::take`]). Each try is all or none: the Leases a
/// refused try took are released before the run waits (held unrenewed, they would lapse), and
/// the next try takes them again. The operator is told once per holder who holds it and that the
/// run waits; past `wait`, the refusal is [`lease::take`]'s, naming the holder.
pub async fn take_leases(
    targets: &Targets,
    clusters: &BTreeSet<Target>,
    holder: &str,
    times: lease::Times,
    wait: Duration,
    progress: Progress<'_>,
) -> Result<lease::Held, ApplyError> {
    let started = Instant::now();
    let mut told = BTreeSet::new();
    loop {
        match lease::take(targets, clusters, holder, times, progress).await {
            Err(ApplyError::Locked { target, holder: other })
                if started.elapsed() < wait && !interrupt::requested() =>
            {
                if told.insert((target.clone(), other.clone())) {
                    progress(&waiting_for(&target, &other, wait));
                }
                tokio::time::sleep(LOCK_RETRY.min(wait.saturating_sub(started.elapsed()))).await;
            }
            r => return r,
        }
    }
}

/// The line that tells the operator, once per holder, that the run waits for a lock.
pub fn waiting_for(target: &str, holder: &str, wait: Duration) -> String {
    format!(
        "{target} is locked by another apply: {holder}; waiting up to {} s for it (--lock-timeout)",
        wait.as_secs_f32().ceil() as u64
    )
}

/// The identity written into host locks: the run, who ran it, from where, its pid and since
/// when. The same text for the whole run (a lock is released only by its exact holder).
pub fn holder(run: &str) -> String {
    static HOLDERS: std::sync::OnceLock<std::sync::Mutex<BTreeMap<String, String>>> = std::sync::OnceLock::new();
    let mut held = HOLDERS.get_or_init(Default::default).lock().expect("holders");
    held.entry(run.to_string()).or_insert_with(|| new_holder(run)).clone()
}

fn new_holder(run: &str) -> String {
    let user = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| uid());
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!("fabric run {run} by {user}@{host} (pid {}, since {since})", std::process::id())
}

/// `uid N` of this process (for a holder when neither USER nor LOGNAME is set).
fn uid() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:").map(|u| u.split_whitespace().next().unwrap_or("?").to_string()))
        })
        .map_or_else(|| "unknown user".into(), |u| format!("uid {u}"))
}

// ---- The run -----------------------------------------------------------------------------

/// Prints the public key of each router of the step (public keys are not secrets), so that the
/// operator can record it under `sites[].router.wireguard.public_key` for `fabric render`.
fn report_keys(sh: &Shared<'_>, step: &StepWork, live: &Live) {
    let routers: BTreeSet<&Target> =
        step.resources.iter().filter(|r| r.is_wireguard_interface()).map(|r| r.target()).collect();
    for target in routers {
        let Some(key) = live.keys.get(target) else { continue };
        let site = sh.t.sites.iter().find(|s| &Target::router(&s.name) == target);
        let note = match site.and_then(|s| s.router.wireguard.public_key.as_ref()) {
            Some(k) if k == key => "as the topology records",
            Some(_) => "NOT the key the topology records: update sites[].router.wireguard.public_key",
            None => "record it under sites[].router.wireguard.public_key for `fabric render`",
        };
        (sh.progress)(&format!("{}: {target} WireGuard public key {key} ({note})", step.key));
    }
}

/// Makes sure every router of the step has its WireGuard key, so that the peers' public keys are
/// known before any configuration that names them is written. Keys are created on the routers
/// and never leave them; creating one is not a change the journal reverts.
async fn ensure_keys(step: &StepWork, pool: &Pool, targets: &Targets, live: &mut Live) -> Result<(), ApplyError> {
    let routers: BTreeSet<Target> =
        step.resources.iter().filter(|r| r.is_wireguard_interface()).map(|r| r.target().clone()).collect();
    for target in routers {
        if live.keys.contains_key(&target) {
            continue;
        }
        let (kind, iface) =
            targets.router_kind.get(&target).cloned().unwrap_or((ProviderKind::Wireguard, "wg0".into()));
        let s = pool.get(targets, &target).await?;
        let key = match kind {
            ProviderKind::Vyos => {
                let script = format!(
                    "source /opt/vyatta/etc/functions/script-template\nconfigure\n{}\ncommit\nsave\nexit\n",
                    providers::vyos_generate_key_line(&iface)
                );
                let o = s.run(&providers::vbash(), Some(script.as_bytes()), Duration::from_secs(60)).await?;
                // vbash goes on after a failing line and exits 0: the output says whether it failed.
                if let Some(said) = providers::vyos_error(&o.stdout_str(), &o.stderr_str()) {
                    return Err(ApplyError::Blocked {
                        step: step.key.clone(),
                        reason: format!("{target}: key generation failed: VyOS said: {said}"),
                    });
                }
                if o.status != 0 {
                    return Err(ApplyError::Blocked {
                        step: step.key.clone(),
                        reason: format!("{target}: key generation failed: {}", o.stderr_str()),
                    });
                }
                providers::public_key(&s, kind, &iface)
                    .await
                    .map_err(|e| ApplyError::Blocked { step: step.key.clone(), reason: e.to_string() })?
            }
            _ => Some(
                providers::ensure_key(&s, &target, &iface)
                    .await
                    .map_err(|e| ApplyError::Blocked { step: step.key.clone(), reason: e.to_string() })?,
            ),
        };
        match key {
            Some(k) => {
                live.keys.insert(target, k);
            }
            None => {
                return Err(ApplyError::Blocked {
                    step: step.key.clone(),
                    reason: format!("{target} has no WireGuard public key after generating one"),
                });
            }
        }
    }
    Ok(())
}

/// Applies the steps in order. Each step is journaled, applied, checked and confirmed, or
/// reverted; the first failure stops the run. Returns the keys of the steps that changed.
pub async fn run(
    t: &Topology,
    steps: &[StepWork],
    targets: &Targets,
    live: Live,
    opts: &Options,
    journal: &mut Journal,
    progress: Progress<'_>,
) -> Result<Vec<String>, ApplyError> {
    run_over(t, steps, targets, live, observe::Kept::new(), opts, journal, Hooks::lines(progress)).await
}

/// [`run`] over the connections the read kept open (`open`, `live::observe::observe_keeping`):
/// the hosts' locks and changes go over them, with no second connect.
#[allow(clippy::too_many_arguments)]
pub async fn run_over(
    t: &Topology,
    steps: &[StepWork],
    targets: &Targets,
    live: Live,
    open: observe::Kept,
    opts: &Options,
    journal: &mut Journal,
    hooks: Hooks<'_>,
) -> Result<Vec<String>, ApplyError> {
    let progress = hooks.progress;
    let path = journal.path.display().to_string();
    // The Leases of the clusters that guard these steps, before anything is touched.
    let guards: BTreeSet<Target> = steps.iter().map(|s| lease::guard_of(t, &s.key)).collect();
    let mut phase = timeline::Phase::start();
    let holder = holder(&opts.run);
    let taken = take_leases(targets, &guards, &holder, opts.lease, hooks.lock_timeout, progress);
    let leases = match taken.await {
        Ok(l) => l,
        Err(e) => {
            let _ = journal.write(&Entry::End { run: opts.run.clone(), ok: false });
            return Err(e);
        }
    };
    let shared = Shared {
        t,
        targets,
        opts,
        progress,
        hooks,
        // The read's connections: locks and changes go over them (one connection per host).
        pool: Pool::with(open),
        journal: std::sync::Mutex::new(journal),
        journal_path: path.clone(),
        locks: host_locks::HostLocks::waiting(hooks.lock_timeout),
        leases,
    };
    phase.end("leases");
    let result = run_steps(&shared, steps, live).await;
    let mut phase = timeline::Phase::start();
    shared.locks.release_all().await;
    // Every step's outcome is journaled already; the end only marks the run finished, so a
    // journal that cannot take it changes neither the outcome nor what a rollback would do.
    if let Err(e) = shared.journal(&Entry::End { run: opts.run.clone(), ok: result.is_ok() }) {
        progress(&format!("warning: cannot write the run's end to the journal {path}: {e}"));
    }
    shared.share().await;
    let Shared { pool, mut leases, .. } = shared;
    leases.release().await;
    pool.close().await;
    phase.end("unlock, release, close");
    result
}

/// What the steps of a run share.
struct Shared<'a> {
    t: &'a Topology,
    targets: &'a Targets,
    opts: &'a Options,
    progress: Progress<'a>,
    hooks: Hooks<'a>,
    pool: Pool,
    journal: std::sync::Mutex<&'a mut Journal>,
    journal_path: String,
    locks: host_locks::HostLocks,
    leases: lease::Held,
}

impl Shared<'_> {
    /// What stops `step` before its next change: a signal, or its guard's Lease lost.
    fn stop(&self, step: &StepWork) -> interrupt::Stop {
        interrupt::Stop::guarded(self.leases.watch(), lease::guard_of(self.t, &step.key))
    }

    /// The wait budget of `step`'s changes.
    fn budget(&self, step: &StepWork) -> crate::apply::wait::Budget {
        crate::apply::wait::Budget {
            timeout: self.opts.wait_timeout,
            interval: Duration::from_millis(500),
            stop: self.stop(step),
        }
    }

    fn journal(&self, e: &Entry) -> Result<(), ApplyError> {
        self.journal
            .lock()
            .expect("journal lock")
            .write(e)
            .map_err(|err| ApplyError::Journal { path: self.journal_path.clone(), reason: err.to_string() })
    }

    /// Shares the journal as it is on disk now with every operator (see
    /// `lease::Held::share_journal`); a failure is said, not fatal: the local journal holds all.
    async fn share(&self) {
        let Ok(text) = std::fs::read_to_string(&self.journal_path) else { return };
        for f in self.leases.share_journal(&self.opts.run, &text).await {
            (self.progress)(&format!("warning: the run's journal is not shared in {f}"));
        }
    }
}

fn step_targets(step: &StepWork) -> BTreeSet<Target> {
    step.resources.iter().map(|r| r.target().clone()).collect()
}

/// The steps (indices into `pending`, which is in graph order) that can run together next: each
/// has every step it needs finished (not pending) and shares no target with the others.
pub fn next_wave(pending: &[&StepWork]) -> Vec<usize> {
    let waiting: BTreeSet<&str> = pending.iter().map(|s| s.key.as_str()).collect();
    let mut wave = Vec::new();
    let mut used: BTreeSet<Target> = BTreeSet::new();
    for (i, s) in pending.iter().enumerate() {
        let ready = s.needs.iter().all(|n| !waiting.contains(n.as_str()));
        let ts = step_targets(s);
        if ready && ts.is_disjoint(&used) {
            used.extend(ts);
            wave.push(i);
        }
    }
    if wave.is_empty() && !pending.is_empty() {
        // Needs come earlier in graph order, so the first pending step is always ready.
        wave.push(0);
    }
    wave
}

/// Walks the steps in order, in waves: a step joins the current wave when every step it needs
/// has finished and it shares no target with the steps already in the wave; a wave's steps run
/// at the same time. The first failure ends the run once its wave has finished.
async fn run_steps(sh: &Shared<'_>, steps: &[StepWork], mut live: Live) -> Result<Vec<String>, ApplyError> {
    let mut done = Vec::new();
    let mut pending: Vec<&StepWork> = steps.iter().collect();
    while !pending.is_empty() {
        let left = || pending.iter().map(|s| s.key.as_str()).collect::<Vec<_>>().join(", ");
        if interrupt::requested() {
            return Err(ApplyError::Interrupted(format!("not started: {}", left())));
        }
        if let Some(reason) = sh.leases.watch().any_lost() {
            return Err(ApplyError::LeaseLost { reason, left: left() });
        }
        let wave: Vec<&StepWork> = next_wave(&pending).into_iter().map(|i| pending[i]).collect();
        if wave.len() > 1 {
            let keys: Vec<&str> = wave.iter().map(|s| s.key.as_str()).collect();
            (sh.progress)(&format!("{}: at the same time (no shared target)", keys.join(", ")));
        }
        let results = futures::future::join_all(wave.iter().map(|s| apply_step(sh, s, live.clone()))).await;
        let mut first_error = None;
        for (s, r) in wave.iter().zip(results) {
            match r {
                Ok((changed, keys)) => {
                    live.keys.extend(keys);
                    if changed {
                        done.push(s.key.clone());
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        sh.share().await;
        if let Some(e) = first_error {
            return Err(e);
        }
        pending.retain(|p| !wave.iter().any(|w| w.key == p.key));
    }
    Ok(done)
}

/// One step: lock, keys, rollback point, apply, check, confirm (or revert). Returns whether it
/// changed anything, and the public keys known after it.
async fn apply_step(
    sh: &Shared<'_>,
    step: &StepWork,
    mut live: Live,
) -> Result<(bool, BTreeMap<Target, WgKey>), ApplyError> {
    if let Some(r) = step.resources.iter().find(|r| live.unreachable.contains_key(r.target())) {
        return Err(ApplyError::Blocked {
            step: step.key.clone(),
            reason: format!("{} is unreachable: {}", r.target(), live.unreachable[r.target()]),
        });
    }
    let mut phase = timeline::Phase::start();
    let phase_of = |what: &str| format!("{} {what}", step.key);
    sh.hooks.emit(Event::StepStart { step: step.key.clone() });
    lock_hosts(sh, step).await?;
    phase.end(&phase_of("locks"));
    pause::at("locked").await;
    ensure_keys(step, &sh.pool, sh.targets, &mut live).await?;
    report_keys(sh, step, &live);
    phase.end(&phase_of("keys"));
    let changes = pending_changes(sh, step, &mut live).await?;
    phase.end(&phase_of("read again (rollback point)"));
    let bootstrap = live.bootstrap.clone();
    if changes.is_empty() {
        sh.hooks.emit(Event::StepNoChanges { step: step.key.clone() });
        return Ok((false, live.keys));
    }
    // A stop asked for before anything changed: the step is not started at all.
    if interrupt::requested() {
        return Err(ApplyError::Interrupted(format!("not started: {}", step.key)));
    }
    // Nor without the Lease of its guard, when it changes a cluster (one it brings up aside).
    let clusters: BTreeSet<Target> = changes
        .iter()
        .map(|c| c.resource.target())
        .filter(|t| sh.targets.kube.contains_key(*t) && !bootstrap.contains_key(*t))
        .cloned()
        .collect();
    if let Err(reason) = sh.leases.required(&lease::guard_of(sh.t, &step.key), &clusters) {
        return Err(ApplyError::Blocked { step: step.key.clone(), reason: reason.0 });
    }
    // A running server's K3s upgrade: its rollback point names the backup taken before it.
    let mut changes = changes;
    for c in &mut changes {
        if let crate::desired::Desired::K3sInstall(k) = &c.resource.desired {
            c.prior = upgrade::with_backup(&c.prior, k, &sh.opts.run);
        }
    }
    // A chart whose CRDs Helm would leave old is not upgraded until they are applied by hand.
    if let Some(reason) = upgrade::crds_by_hand(&changes) {
        return Err(ApplyError::Blocked { step: step.key.clone(), reason });
    }
    // A Karmada upgrade: where its etcd snapshot will be, in the rollback point, before it is taken.
    let karmada = karmada_backup::prepare(sh.t, sh.targets, &mut changes, &sh.opts.run)
        .await
        .map_err(|reason| ApplyError::Blocked { step: step.key.clone(), reason: reason.0 })?;
    // The hosts the snapshot runs on are locked like the step's own (no other run upgrades
    // K3s under it).
    if let Some(b) = &karmada {
        let hosts = [Target::host(&b.server), Target::host(&b.node)].into();
        sh.locks.take_all(&sh.pool, sh.targets, &hosts, &sh.opts.run, sh.progress).await?;
    }
    let priors: Vec<Prior> = changes.iter().map(prior_of).collect();
    sh.journal(&Entry::Begin { run: sh.opts.run.clone(), step: step.key.clone(), priors })?;
    // Shared before the change: another operator can roll it back should this machine be lost.
    sh.share().await;
    if let Some(b) = &karmada {
        if let Err(e) = karmada_backup::take(&sh.pool, sh.targets, b, &sh.opts.run).await {
            let reason = format!("Karmada's etcd snapshot before the upgrade failed, nothing changed: {e}");
            return Err(revert_step(sh, step, &[], reason).await);
        }
        (sh.progress)(&format!("{}: backup: Karmada etcd snapshot → {}:{}", step.key, b.node, b.path));
    }
    (sh.progress)(&format!("{}: applying {} change(s)", step.key, changes.len()));
    phase.end(&phase_of("journal"));
    let (applied, mut failure) = apply_bringing_up(sh, step, changes, &bootstrap).await?;
    phase.end(&phase_of("changes"));
    pause::at("applied").await;
    if failure.is_none() {
        failure = run_check(sh, step).await;
        phase.end(&phase_of("check"));
    }
    // A stop asked for while the step ran (a signal, its Lease lost): it goes back to its
    // rollback point, not half-way; confirming would be a change.
    if failure.is_none() {
        failure = sh.stop(step).why().map(|why| format!("{why} before it was confirmed"));
    }
    if failure.is_none() {
        failure = relock_lost(sh, step).await;
    }
    if let Some(reason) = failure {
        return Err(revert_step(sh, step, &applied, reason).await);
    }
    // Confirm over new connections: proof that the management path survived the change.
    let confirmed = confirm(&applied, &sh.opts.run, sh.targets).await;
    phase.end(&phase_of("confirm"));
    if let Err(u) = confirmed {
        if u.any_confirmed || matches!(u.error, crate::apply::confirm::ConfirmError::Reverted { .. }) {
            // Some router no longer reverts by itself (confirmed), or one already did: the step
            // is put back explicitly, everywhere, so no site is left with half a change.
            return Err(revert_step(sh, step, &applied, format!("not confirmed: {}", u.error)).await);
        }
        let reason = format!(
            "{}; nothing was confirmed, so each router reverts by itself within {} s (the change may have cut the management path)",
            u.error,
            sh.opts.confirm_timeout.as_secs()
        );
        sh.journal(&Entry::Failed { run: sh.opts.run.clone(), step: step.key.clone(), reason: reason.clone() })?;
        return Err(ApplyError::Stuck { step: step.key.clone(), reason });
    }
    // A change the journal does not hold as done is not left in place: put back, it is one a
    // later rollback does not need to know of.
    if let Err(e) = sh.journal(&Entry::Done { run: sh.opts.run.clone(), step: step.key.clone() }) {
        return Err(revert_step(sh, step, &applied, format!("confirmed, but not recorded: {e}")).await);
    }
    sh.hooks.emit(Event::StepDone { step: step.key.clone() });
    Ok((true, live.keys))
}

/// Locks every host of the step before touching any of them (see [`host_locks`]).
async fn lock_hosts(sh: &Shared<'_>, step: &StepWork) -> Result<(), ApplyError> {
    sh.locks.take_all(&sh.pool, sh.targets, &step_targets(step), &sh.opts.run, sh.progress).await
}

/// Before a confirmation: a host whose lock ended with its session (a dropped connection) is
/// locked again over a new one, and checked that nobody took it meanwhile; the failure, if so.
async fn relock_lost(sh: &Shared<'_>, step: &StepWork) -> Option<String> {
    for target in sh.locks.lost(&step_targets(step)).await {
        let s = match sh.pool.get(sh.targets, &target).await {
            Ok(s) => s,
            Err(e) => return Some(format!("{target}: its lock ended with its connection: {e}")),
        };
        if let Err(e) = sh.locks.ensure(&s, &target, &sh.opts.run).await {
            return Some(format!("its lock ended with its connection, and taking it again failed: {e}"));
        }
    }
    None
}

/// Re-reads the step's resources once the keys exist (the rollback point is what is live right
/// now) and returns the changes to make, with the peers' keys resolved.
async fn pending_changes(sh: &Shared<'_>, step: &StepWork, live: &mut Live) -> Result<Vec<PendingChange>, ApplyError> {
    let keys = observe::key_targets(&step.resources);
    // Over the connections the locks opened (a host the pool cannot reach is read afresh and
    // reported unreachable by the read).
    let mut open = BTreeMap::new();
    for t in step_targets(step).into_iter().chain(keys.iter().cloned()) {
        if sh.targets.ssh.contains_key(&t)
            && !open.contains_key(&t)
            && let Ok(s) = sh.pool.get(sh.targets, &t).await
        {
            open.insert(t, s);
        }
    }
    let mut now = observe::observe_over(&step.resources, &keys, sh.targets, open).await;
    for (k, v) in &live.keys {
        now.keys.entry(k.clone()).or_insert_with(|| v.clone());
    }
    live.keys.extend(now.keys.clone());
    live.bootstrap = now.bootstrap.clone();
    let mut changes = Vec::new();
    for r in &step.resources {
        let Some(c) = crate::plan::diff::change(r, &now) else {
            return Err(ApplyError::Blocked {
                step: step.key.clone(),
                reason: format!("{} became unreachable", r.target()),
            });
        };
        if c.action == Action::NoOp {
            continue;
        }
        let prior = now.observed.get(&r.address).cloned().unwrap_or(Observed::Absent);
        let text = crate::plan::diff::desired_with_keys(r, &now, &prior);
        if text.contains("<public-key:") {
            return Err(ApplyError::Blocked {
                step: step.key.clone(),
                reason: format!("{}: a peer's public key is unknown", r.address),
            });
        }
        changes.push(PendingChange { resource: r.clone(), prior, text });
    }
    Ok(changes)
}

/// The journal's rollback point for a change: secrets by presence only, never their content.
fn prior_of(c: &PendingChange) -> Prior {
    let r = &c.resource;
    Prior {
        address: r.address.clone(),
        target: r.target().clone(),
        provider: r.provider,
        sensitive: r.sensitive,
        prior: if r.sensitive && matches!(c.prior, Observed::Present(_)) {
            Observed::Present(providers::SENSITIVE.into())
        } else {
            c.prior.clone()
        },
        object: kube_identity(r),
    }
}

/// What was applied (to revert on failure), and the first failure.
type Applied = (Vec<(Resource, Observed)>, Option<String>);

/// The step's changes, with the objects of a cluster this step brings up held back until its
/// hosts are done and the cluster's API answers (see [`bootstrap`]).
async fn apply_bringing_up(
    sh: &Shared<'_>,
    step: &StepWork,
    changes: Vec<PendingChange>,
    bringing_up: &BTreeMap<Target, Target>,
) -> Result<Applied, ApplyError> {
    let (later, first): (Vec<_>, Vec<_>) =
        changes.into_iter().partition(|c| bringing_up.contains_key(c.resource.target()));
    let (mut applied, mut failure) = apply_rounds(sh, step, first).await?;
    if failure.is_some() || later.is_empty() {
        return Ok((applied, failure));
    }
    let clusters: BTreeSet<Target> = later.iter().map(|c| c.resource.target().clone()).collect();
    for cluster in &clusters {
        if let Err(e) = bootstrap::bring_up(sh, &step.key, cluster, &bringing_up[cluster]).await {
            return Ok((applied, Some(e.to_string())));
        }
    }
    let (more, f) = apply_rounds(sh, step, later).await?;
    applied.extend(more);
    failure = f;
    Ok((applied, failure))
}

/// Applies the changes in rounds (see [`rounds`]; K3s servers one at a time, and one tunnel end
/// before the others, [`tunnel_ends`]): the targets of a round at the same time, a target's
/// resources in order; then waits for what the controllers must finish.
async fn apply_rounds(sh: &Shared<'_>, step: &StepWork, changes: Vec<PendingChange>) -> Result<Applied, ApplyError> {
    let mut applied: Vec<(Resource, Observed)> = Vec::new();
    let mut failure: Option<String> = None;
    let mut pending_waits: Vec<(Target, Resource, serde_json::Value)> = Vec::new();
    for round in tunnel_ends::one_end_first(one_server_at_a_time(rounds(changes))) {
        if round.is_empty() || failure.is_some() {
            continue;
        }
        let (ok, waits, err) = apply_round(sh, step, round).await?;
        applied.extend(ok);
        pending_waits.extend(waits);
        failure = err;
    }
    if failure.is_none() && !pending_waits.is_empty() {
        failure = wait_for_objects(sh, step, pending_waits).await;
    }
    Ok((applied, failure))
}

/// What a round applied, the waits it left for after the step, and its first failure.
type RoundOutcome = (Vec<(Resource, Observed)>, Vec<(Target, Resource, serde_json::Value)>, Option<String>);

/// One round: every target at once, clusters through `kube`, hosts through `host`.
async fn apply_round(sh: &Shared<'_>, step: &StepWork, round: Vec<PendingChange>) -> Result<RoundOutcome, ApplyError> {
    let (targets, opts) = (sh.targets, sh.opts);
    let confirm_secs = opts.confirm_timeout.as_secs().max(1) as u32;
    let confirm_minutes = confirm_secs.div_ceil(60);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut by_target: BTreeMap<Target, Vec<PendingChange>> = BTreeMap::new();
    for c in round {
        by_target.entry(c.resource.target().clone()).or_default().push(c);
    }
    let (mut applied, mut waits, mut failure) = (Vec::new(), Vec::new(), None);
    let mut set = tokio::task::JoinSet::new();
    for (target, mut items) in by_target {
        for c in &items {
            let (address, action) = (c.resource.address.to_string(), event::Action::of(c));
            sh.hooks.emit(Event::ApplyStart { step: step.key.clone(), address, action });
        }
        if let Some(access) = targets.kube.get(&target).cloned() {
            let cx = crate::apply::kube::Context {
                step: step.key.clone(),
                force: opts.force_conflicts,
                accesses: targets.kube.clone(),
                budget: sh.budget(step),
                progress: tx.clone(),
            };
            set.spawn(async move { crate::apply::kube::apply_target(&cx, &target, &access, items).await });
            continue;
        }
        let cx = crate::apply::host::Context {
            run: opts.run.clone(),
            confirm_secs,
            confirm_minutes,
            step: step.key.clone(),
            accesses: targets.kube.clone(),
            budget: sh.budget(step),
            progress: tx.clone(),
            state_dir: opts.state_dir.clone(),
        };
        let s = sh.pool.get(targets, &target).await?;
        // A new session (the pool reconnected) holds no lock yet: taken again before any change.
        if let Err(e) = sh.locks.ensure(&s, &target, &opts.run).await {
            failure.get_or_insert(e.to_string());
            continue;
        }
        // Secret files are copied from their source host (over the run's connection to it).
        for c in items.iter_mut() {
            if let crate::desired::Desired::Secret(source) = &c.resource.desired {
                match copy_secret_file(sh, &c.resource.address, source).await {
                    Ok(t) => c.text = t,
                    Err(e) => {
                        failure.get_or_insert(e.to_string());
                    }
                }
            }
        }
        if failure.is_none() {
            set.spawn(async move { crate::apply::host::apply_target(&cx, &s, items).await });
        }
    }
    drop(tx);
    // Progress of the targets' waits arrives while they run.
    loop {
        tokio::select! {
            Some(line) = rx.recv() => (sh.progress)(&line),
            j = set.join_next() => match j {
                None => break,
                Some(Ok((ok, w, err))) => {
                    applied.extend(ok);
                    waits.extend(w.into_iter().map(|(r, o)| (r.target().clone(), r, o)));
                    if let Some(e) = err {
                        failure.get_or_insert(e);
                    }
                }
                Some(Err(e)) => {
                    failure.get_or_insert(format!("internal error: {e}"));
                }
            },
        }
    }
    while let Ok(line) = rx.try_recv() {
        (sh.progress)(&line);
    }
    Ok((applied, waits, failure))
}

/// The step's own check (`steps::Step::check`), if it has one: the failure, if any.
async fn run_check(sh: &Shared<'_>, step: &StepWork) -> Option<String> {
    let cx = crate::steps::CheckCx { t: sh.t, pool: &sh.pool, targets: sh.targets, resources: &step.resources };
    let check = crate::steps::get(&step.id).and_then(|s| s.check(&cx))?;
    match check.await {
        Ok(evidence) => {
            sh.hooks.emit(Event::CheckPassed { step: step.key.clone(), evidence });
            None
        }
        Err(e) => Some(format!("check failed: {e}")),
    }
}

/// Puts a failed step back to its rollback point; the error that ends the run.
async fn revert_step(sh: &Shared<'_>, step: &StepWork, applied: &[(Resource, Observed)], reason: String) -> ApplyError {
    sh.hooks.emit(Event::StepErrored { step: step.key.clone(), reason: reason.clone() });
    let leftover = revert_all(applied, &sh.opts.run, &sh.pool, sh.targets).await;
    let run = sh.opts.run.clone();
    // What happened is reported even when the journal cannot record it: a revert that is
    // not journaled leaves a `begin` without an end, which a later rollback puts back again
    // (a no-op once the step is back).
    let unrecorded = |reason: String, e: ApplyError| format!("{reason} (not recorded in the journal: {e})");
    if leftover.is_empty() {
        let reason = match sh.journal(&Entry::Reverted { run, step: step.key.clone(), reason: reason.clone() }) {
            Ok(()) => reason,
            Err(e) => unrecorded(reason, e),
        };
        ApplyError::Reverted { step: step.key.clone(), reason }
    } else {
        let reason = format!("{reason}; not reverted: {}", leftover.join("; "));
        let reason = match sh.journal(&Entry::Failed { run, step: step.key.clone(), reason: reason.clone() }) {
            Ok(()) => reason,
            Err(e) => unrecorded(reason, e),
        };
        ApplyError::Stuck { step: step.key.clone(), reason }
    }
}

/// The rounds a step's changes are applied in: secrets fabric generates first (nothing comes
/// before them, and copies of them should land before what uses them, such as a chart issuing
/// certificates from a CA); then everything else in order, copies included; last, the copies
/// whose source this step changes in that second round (a ServiceAccount token filled once its
/// Secret exists), and every change of a host that copies a file from another host this step
/// changes (A.1's agents, after the server whose join token they copy).
fn rounds(changes: Vec<PendingChange>) -> [Vec<PendingChange>; 3] {
    let generated = |r: &Resource| r.kube_object().is_some_and(|o| crate::providers::secrets::generated(o).is_some());
    let source_of = |r: &Resource| {
        let from = crate::providers::secrets::copy_source(r.kube_object()?)?;
        Some(from.target.at(format!("{}/Secret/{}", from.namespace, from.name)))
    };
    let (first, rest): (Vec<_>, Vec<_>) = changes.into_iter().partition(|c| generated(&c.resource));
    let in_step: BTreeSet<Address> = rest.iter().map(|c| c.resource.address.clone()).collect();
    // A host that copies a file from another host this step changes (an agent's join token from
    // the server A.1 installs in the same step) waits, all its changes in order, for that host:
    // the file exists only once the other host's changes are done.
    let changed_hosts: BTreeSet<&Target> = rest.iter().map(|c| c.resource.target()).collect();
    let waits_for_host: BTreeSet<Target> = rest
        .iter()
        .filter_map(|c| match &c.resource.desired {
            crate::desired::Desired::Secret(Some(from))
                if &from.target != c.resource.target() && changed_hosts.contains(&from.target) =>
            {
                Some(c.resource.target().clone())
            }
            _ => None,
        })
        .collect();
    let (last, middle): (Vec<_>, Vec<_>) = rest.into_iter().partition(|c| {
        waits_for_host.contains(c.resource.target()) || source_of(&c.resource).is_some_and(|s| in_step.contains(&s))
    });
    [first, middle, last]
}

/// [`rounds`] with each server whose running K3s is upgraded in a round of its own, before the
/// rest of its round and in the step's order: "upgrade server nodes first one at a time, then
/// any agent nodes" (docs.k3s.io "Manual Upgrades"). A server's upgrade ends with its node
/// Ready again (`apply::upgrade`), so the next starts only then; the first that fails stops
/// the rounds after it.
fn one_server_at_a_time(rounds: [Vec<PendingChange>; 3]) -> Vec<Vec<PendingChange>> {
    let upgrading_server = |c: &PendingChange| match &c.resource.desired {
        crate::desired::Desired::K3sInstall(k) => {
            k.role == crate::desired::k3s_install::Role::Server && upgrade::is_upgrade(&c.prior)
        }
        _ => false,
    };
    let mut out = Vec::new();
    for (i, round) in rounds.into_iter().enumerate() {
        // Generated secrets (the first round) hold no host.
        let mut servers: Vec<Target> = Vec::new();
        for c in round.iter().filter(|c| i > 0 && upgrading_server(c)) {
            if !servers.contains(c.resource.target()) {
                servers.push(c.resource.target().clone());
            }
        }
        let mut rest = round;
        for server in servers {
            let (mine, others): (Vec<_>, Vec<_>) = rest.into_iter().partition(|c| c.resource.target() == &server);
            out.push(mine);
            rest = others;
        }
        out.push(rest);
    }
    out
}

/// Waits, target by target at the same time, until the step's applied objects are done.
async fn wait_for_objects(
    sh: &Shared<'_>,
    step: &StepWork,
    waits: Vec<(Target, Resource, serde_json::Value)>,
) -> Option<String> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut by_target: BTreeMap<Target, Vec<(Resource, serde_json::Value)>> = BTreeMap::new();
    for (target, r, o) in waits {
        by_target.entry(target).or_default().push((r, o));
    }
    let mut set = tokio::task::JoinSet::new();
    for (target, objs) in by_target {
        let Some(access) = sh.targets.kube.get(&target).cloned() else { continue };
        let cx = crate::apply::kube::Context {
            step: step.key.clone(),
            force: false,
            accesses: BTreeMap::new(),
            budget: sh.budget(step),
            progress: tx.clone(),
        };
        set.spawn(async move { crate::apply::kube::wait_all(&cx, &target, &access, objs).await });
    }
    drop(tx);
    let mut failure = None;
    loop {
        tokio::select! {
            Some(line) = rx.recv() => (sh.progress)(&line),
            j = set.join_next() => match j {
                None => break,
                Some(Ok(err)) => if let Some(e) = err { failure.get_or_insert(e); },
                Some(Err(e)) => { failure.get_or_insert(format!("internal error: {e}")); }
            },
        }
    }
    while let Ok(line) = rx.try_recv() {
        (sh.progress)(&line);
    }
    failure
}

/// Why a secret file could not be copied from its source (never its content).
#[derive(Debug, thiserror::Error)]
enum CopyFileError {
    #[error("{address}: no host to copy this secret from; write it by hand")]
    NoSource { address: Address },
    #[error("{address}: {source}")]
    Connect { address: Address, source: SshError },
    #[error("{address}: {source}")]
    Read { address: Address, source: providers::ProviderError },
}

/// The content of a secret file's source (`host.<name>/file:<path>`), in memory only.
async fn copy_secret_file(
    sh: &Shared<'_>,
    address: &Address,
    source: &Option<Address>,
) -> Result<String, CopyFileError> {
    let address = address.clone();
    let Some(source) = source.as_ref().filter(|s| s.file().is_some()) else {
        return Err(CopyFileError::NoSource { address });
    };
    let s = match sh.pool.get(sh.targets, &source.target).await {
        Ok(s) => s,
        Err(source) => return Err(CopyFileError::Connect { address, source }),
    };
    providers::read_secret_file(&s, source).await.map_err(|source| CopyFileError::Read { address, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(key: &str, needs: &[&str], targets: &[&str]) -> StepWork {
        use crate::desired::Desired;
        StepWork {
            key: key.into(),
            id: key.split('@').next().unwrap().into(),
            needs: needs.iter().map(|s| s.to_string()).collect(),
            resources: targets
                .iter()
                .map(|t| Resource {
                    address: format!("{t}/file:/x").as_str().into(),
                    site: None,
                    provider: ProviderKind::File,
                    summary: String::new(),
                    sensitive: false,
                    desired: Desired::File(String::new()),
                    file: None,
                })
                .collect(),
        }
    }

    #[test]
    fn one_holder_text_per_run() {
        assert!(holder("r1") == holder("r1"));
    }

    #[test]
    fn waves_run_disjoint_ready_steps_together() {
        let steps = [
            work("A.1@sp", &[], &["host.sp-cp1"]),
            work("A.2@franca", &[], &["host.franca-cp1"]),
            work("A.3@franca", &["A.2@franca"], &["host.debian-proxy"]),
            work("A.4@sp", &["A.1@sp"], &["host.pve-ippri-31"]),
            work("B.1", &[], &["router.franca", "router.sp"]),
            work("X.1", &[], &["router.sp"]),
        ];
        let mut pending: Vec<&StepWork> = steps.iter().collect();
        let mut waves = Vec::new();
        while !pending.is_empty() {
            let w = next_wave(&pending);
            waves.push(w.iter().map(|i| pending[*i].key.clone()).collect::<Vec<_>>());
            let keys: Vec<String> = w.iter().map(|i| pending[*i].key.clone()).collect();
            pending.retain(|p| !keys.contains(&p.key));
        }
        assert_eq!(
            waves,
            vec![
                vec!["A.1@sp", "A.2@franca", "B.1"], // ready and on different hosts
                vec!["A.3@franca", "A.4@sp", "X.1"], // their needs are done; X.1 shared router.sp with B.1
            ]
        );
    }

    #[test]
    fn generated_secrets_first_copies_of_step_sources_last() {
        use crate::desired::Desired;
        let kube = |address: &str, obj: serde_json::Value| {
            let mut r = work("x", &[], &["cluster.a"]).resources.remove(0);
            r.address = address.into();
            r.provider = ProviderKind::Kube;
            r.desired = Desired::Kube(obj);
            PendingChange { resource: r, prior: Observed::Absent, text: String::new() }
        };
        let ann = |a: serde_json::Value| serde_json::json!({"metadata": {"annotations": a}});
        let changes = vec![
            kube("cluster.b/kube-system/HelmChartConfig/cilium", serde_json::json!({})),
            kube(
                "cluster.b/kube-system/Secret/cilium-ca",
                ann(
                    serde_json::json!({"fabric.io/copy-from": "cluster.a/kube-system/cilium-ca", "fabric.io/copy-keys": "ca.crt=ca.crt"}),
                ),
            ),
            kube("cluster.a/kube-system/Secret/cilium-ca", ann(serde_json::json!({"fabric.io/generate": "ca"}))),
            kube("cluster.a/ns/Secret/token", serde_json::json!({})),
            kube(
                "karmada/ns/Secret/a",
                ann(
                    serde_json::json!({"fabric.io/copy-from": "cluster.a/ns/token", "fabric.io/copy-keys": "token=token"}),
                ),
            ),
        ];
        let names = |v: &Vec<PendingChange>| v.iter().map(|c| c.resource.address.clone()).collect::<Vec<_>>();
        let [a, b, c] = rounds(changes);
        assert_eq!(names(&a), ["cluster.a/kube-system/Secret/cilium-ca"]);
        assert_eq!(
            names(&b),
            [
                "cluster.b/kube-system/HelmChartConfig/cilium",
                "cluster.b/kube-system/Secret/cilium-ca",
                "cluster.a/ns/Secret/token"
            ]
        );
        assert_eq!(names(&c), ["karmada/ns/Secret/a"]);
    }

    /// Two servers of one cluster upgraded in one step: one at a time, each in a round of its
    /// own (its config with it), in the step's order, before the rest of the step's hosts; an
    /// install on a host without K3s is no upgrade and stays with the rest.
    #[test]
    fn servers_upgrade_one_at_a_time_before_the_rest() {
        use crate::desired::Desired;
        use crate::desired::k3s_install::{K3sInstall, Role, Source, Upload};
        let upload = || Upload { from: Source::Path("x".into()), sha256: String::new(), name: "x".into() };
        let install = |role| {
            Desired::K3sInstall(Box::new(K3sInstall {
                role,
                brings_up: None,
                version: "v1.33.5+k3s1".into(),
                binary: upload(),
                images: upload(),
                script: upload(),
            }))
        };
        let running = Observed::Present(format!("k3s {} v1.32.9+k3s1\n", "a".repeat(64)));
        let change = |address: &str, desired: Desired, prior: &Observed| {
            let mut r = work("x", &[], &["host.a"]).resources.remove(0);
            r.address = address.into();
            r.provider = ProviderKind::Command;
            r.desired = desired;
            PendingChange { resource: r, prior: prior.clone(), text: String::new() }
        };
        let changes = vec![
            change("host.cp1/command:k3s-install", install(Role::Server), &running),
            change("host.new/command:k3s-install", install(Role::Server), &Observed::Absent),
            change("host.cp2/file:/etc/rancher/k3s/config.yaml", Desired::File("c".into()), &Observed::Absent),
            change("host.cp2/command:k3s-install", install(Role::Server), &running),
            change("host.agent/command:k3s-install", install(Role::Agent), &running),
        ];
        let names = |v: &Vec<PendingChange>| v.iter().map(|c| c.resource.address.to_string()).collect::<Vec<_>>();
        let rounds: Vec<Vec<String>> =
            one_server_at_a_time(rounds(changes)).iter().map(names).filter(|r| !r.is_empty()).collect();
        assert_eq!(
            rounds,
            vec![
                vec!["host.cp1/command:k3s-install".to_string()],
                vec!["host.cp2/file:/etc/rancher/k3s/config.yaml".into(), "host.cp2/command:k3s-install".into()],
                vec!["host.new/command:k3s-install".into(), "host.agent/command:k3s-install".into()],
            ]
        );
    }

    /// A.1's agents copy the join token of the server A.1 installs: all their changes wait for
    /// the server's; a copy from a host the step does not change does not hold anything back.
    #[test]
    fn hosts_copying_from_a_host_of_the_step_come_last() {
        use crate::desired::Desired;
        let host = |address: &str, desired: Desired| {
            let mut r = work("x", &[], &["host.a"]).resources.remove(0);
            r.address = address.into();
            r.provider = ProviderKind::File;
            r.desired = desired;
            PendingChange { resource: r, prior: Observed::Absent, text: String::new() }
        };
        let from = |a: &str| Desired::Secret(Some(a.into()));
        let changes = vec![
            host("host.agent/file:/etc/rancher/k3s/config.yaml", Desired::File("a".into())),
            host(
                "host.agent/file:/etc/rancher/k3s/token",
                from("host.server/file:/var/lib/rancher/k3s/server/node-token"),
            ),
            host("host.agent/command:k3s-install", Desired::File("i".into())),
            host("host.server/file:/etc/rancher/k3s/config.yaml", Desired::File("s".into())),
            host("host.other/file:/etc/rancher/k3s/token", from("host.elsewhere/file:/x")),
        ];
        let names = |v: &Vec<PendingChange>| v.iter().map(|c| c.resource.address.clone()).collect::<Vec<_>>();
        let [a, b, c] = rounds(changes);
        assert!(a.is_empty());
        assert_eq!(
            names(&b),
            ["host.server/file:/etc/rancher/k3s/config.yaml", "host.other/file:/etc/rancher/k3s/token"]
        );
        assert_eq!(
            names(&c),
            [
                "host.agent/file:/etc/rancher/k3s/config.yaml",
                "host.agent/file:/etc/rancher/k3s/token",
                "host.agent/command:k3s-install"
            ]
        );
    }
}
