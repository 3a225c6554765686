//! Which Lease guards a run, and holding them while it runs (see `providers::lease`).
//!
//! A per-site step (`D.1@sp`) is guarded by its site's cluster's Lease; a step that spans sites
//! (`B.1`, `C.5`, …) by the Lease of the federation's host cluster. So while the sites are cut
//! apart, each site's own steps can still be applied from that side, and steps that need both
//! sites are not (they could not be applied anyway). A cluster that cannot be reached at the
//! start has no Lease to take: the host locks guard what its steps do over SSH, and a step that
//! changes a cluster never starts without its guard's Lease ([`Held::required`]; the only
//! exception is a cluster the step itself brings up, which has no API to hold a Lease in before).
//!
//! Holding follows Kubernetes' own leader election (kubernetes/client-go
//! `tools/leaderelection/leaderelection.go`): the holder tries to renew every `RetryPeriod`
//! (`renew`, `tryAcquireOrRenew`), and gives up leading once it has not renewed for
//! `RenewDeadline`, which is shorter than `LeaseDuration`, the time the others wait before they
//! take an unrenewed Lease over (`NewLeaderElector` refuses `LeaseDuration <= RenewDeadline`).
//! The difference is the margin in which the holder has stopped and the others have not started
//! yet. Once given up, a Lease is not taken back by this run (client-go's `OnStoppedLeading`:
//! the elector does not return to leading). fabric's figures are [`Times::default`].
//!
//! A run whose Lease is lost (not renewed within the deadline, or taken over) stops before its
//! next change: the changes of the step in progress look at [`Watch::lost`] before each change
//! and while they wait, and the step goes back to its rollback point with the reason journaled.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::addr::Target;
use crate::apply::{ApplyError, Progress};
use crate::live::observe::Targets;
use crate::providers::kube::{self, KubeError};
use crate::providers::lease::{self, LeaseError};
use crate::topology::Topology;

/// How long a Lease holds without renewal (see [`Times`]).
pub const DURATION_SECS: i32 = 60;

/// When a held Lease is renewed and when the run gives it up (client-go's `LeaseDuration`,
/// `RenewDeadline` and `RetryPeriod`; its defaults in `leaderelection.go`'s callers are 15 s,
/// 10 s and 2 s).
///
/// fabric's default: a 60 s Lease, renewed every 5 s, given up 30 s after its last renewal. The
/// 30 s margin covers the longest a request fabric sent before the deadline can still be in
/// flight (the Kubernetes client's read timeout, 30 s, `providers::kube::client_once`), so by
/// the time another run may take the Lease over, every change this run sent while it held the
/// Lease has been answered or given up on; the step in progress is reverted in that margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    /// `leaseDurationSeconds`: how long other runs wait after the last renewal.
    pub duration: Duration,
    /// How long after its last renewal this run gives the Lease up (`RenewDeadline`).
    pub renew_deadline: Duration,
    /// How often a renewal is tried, and how long one try may take (`RetryPeriod`).
    pub retry_period: Duration,
}

impl Default for Times {
    fn default() -> Times {
        Times {
            duration: Duration::from_secs(DURATION_SECS as u64),
            renew_deadline: Duration::from_secs(30),
            retry_period: Duration::from_secs(5),
        }
    }
}

impl Times {
    /// The margin between this run giving the Lease up and another taking it over.
    pub fn margin(&self) -> Duration {
        self.duration.saturating_sub(self.renew_deadline)
    }

    /// Whether the figures keep client-go's order (`LeaseDuration > RenewDeadline >
    /// RetryPeriod`, `NewLeaderElector`), which the margin needs.
    pub fn valid(&self) -> bool {
        self.duration > self.renew_deadline && self.renew_deadline > self.retry_period && !self.retry_period.is_zero()
    }
}

/// The cluster whose Lease guards the step `key` (`D.1@sp` and `A.2@sp/sp-gpu1` → sp's; `B.1`
/// → the host site's).
pub fn guard_of(t: &Topology, key: &str) -> Target {
    match key.split_once('@') {
        Some((_, at)) => Target::cluster(at.split('/').next().unwrap_or(at)),
        None => Target::cluster(&t.federation.karmada.host_site),
    }
}

/// How one held Lease stands.
#[derive(Debug, Clone)]
struct Standing {
    renewed: Instant,
    /// Why the last renewal failed (cleared by a renewal).
    last_error: Option<String>,
    /// Why the run gave it up; final.
    lost: Option<String>,
}

/// Whether the run still holds its Leases, shared by the renewer and every change of the run.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    standing: Arc<Mutex<BTreeMap<Target, Standing>>>,
    times: Times,
}

impl Watch {
    fn new(times: Times) -> Watch {
        Watch { standing: Arc::default(), times }
    }

    /// `cluster`'s Lease is held since `asked` (when the request that took it was sent: the API
    /// server's renewTime is no earlier, so the deadline counts from no later than the others').
    fn held(&self, cluster: &Target, asked: Instant) {
        let s = Standing { renewed: asked, last_error: None, lost: None };
        self.standing.lock().expect("lease watch").insert(cluster.clone(), s);
    }

    /// Why the run no longer holds the Lease of `cluster`: taken over, or not renewed within
    /// the renew deadline (decided here, at each look, from the last renewal's time: a renewal
    /// stuck on a stalled API cannot delay it). None while held, and for a cluster whose Lease
    /// the run never held (see [`Held::required`]).
    pub fn lost(&self, cluster: &Target) -> Option<String> {
        let mut all = self.standing.lock().expect("lease watch");
        let s = all.get_mut(cluster)?;
        if s.lost.is_none() && s.renewed.elapsed() > self.times.renew_deadline {
            s.lost = Some(lapsed(cluster, &self.times, s.last_error.as_deref()));
        }
        s.lost.clone()
    }

    /// The first Lease the run lost, with why.
    pub fn any_lost(&self) -> Option<String> {
        let clusters: Vec<Target> = self.standing.lock().expect("lease watch").keys().cloned().collect();
        clusters.iter().find_map(|c| self.lost(c))
    }

    /// The outcome of a renewal sent at `sent` (a renewal counts from when it was sent: the
    /// server's renewTime is no earlier). A lost Lease stays lost: client-go's elector does not
    /// lead again.
    fn renewed(&self, cluster: &Target, sent: Instant, outcome: Result<(), LeaseError>) {
        let mut all = self.standing.lock().expect("lease watch");
        let Some(s) = all.get_mut(cluster).filter(|s| s.lost.is_none()) else { return };
        if s.renewed.elapsed() > self.times.renew_deadline {
            s.lost = Some(lapsed(cluster, &self.times, s.last_error.as_deref()));
            return;
        }
        match outcome {
            Ok(()) => {
                s.renewed = sent;
                s.last_error = None;
            }
            Err(LeaseError::Held { holder }) => {
                s.lost = Some(format!(
                    "{cluster}: the Lease {}/{} was taken over by {holder}",
                    lease::NAMESPACE,
                    lease::NAME
                ));
            }
            Err(LeaseError::Kube(e)) => s.last_error = Some(e.to_string()),
        }
    }
}

/// The reason a Lease lapsed, as the journal and the operator read it.
fn lapsed(cluster: &Target, times: &Times, last_error: Option<&str>) -> String {
    format!(
        "{cluster}: the Lease {}/{} was not renewed for {} s (last try: {}), {} s before its {} s term ends; the run stops before its next change, so that no other run can take it over while this one still changes the cluster",
        lease::NAMESPACE,
        lease::NAME,
        times.renew_deadline.as_secs(),
        last_error.unwrap_or("still waiting for an answer"),
        times.margin().as_secs(),
        times.duration.as_secs(),
    )
}

/// The Leases a run holds, renewed in the background until released.
pub struct Held {
    held: Vec<(Target, ::kube::Client)>,
    /// The clusters whose Lease could not be taken because they could not be reached, with why.
    unreachable: BTreeMap<Target, String>,
    holder: String,
    watch: Watch,
    renewer: Option<tokio::task::JoinHandle<()>>,
}

/// Takes the Lease of every cluster in `clusters` for `holder`, or none: a Lease another run
/// holds refuses the run, naming that holder. A cluster that cannot be reached is noted (its
/// steps that change it are then refused, [`Held::required`]).
pub async fn take(
    targets: &Targets,
    clusters: &BTreeSet<Target>,
    holder: &str,
    times: Times,
    progress: Progress<'_>,
) -> Result<Held, ApplyError> {
    let mut held = Held {
        held: Vec::new(),
        unreachable: BTreeMap::new(),
        holder: holder.into(),
        watch: Watch::new(times),
        renewer: None,
    };
    let secs = i32::try_from(times.duration.as_secs()).unwrap_or(DURATION_SECS).max(1);
    for cluster in clusters {
        let Some(access) = targets.kube.get(cluster) else { continue };
        let client = match kube::client(cluster, access).await {
            Ok(c) => c,
            Err(e) => {
                progress(&format!("{cluster}: no Lease taken ({e}); its steps that change it will not start"));
                held.unreachable.insert(cluster.clone(), e.to_string());
                continue;
            }
        };
        let asked = Instant::now();
        // A stalled API is an unreachable one: taking the Lease is bounded like a renewal.
        let acquired = match tokio::time::timeout(times.renew_deadline, lease::acquire(&client, holder, secs)).await {
            Ok(r) => r,
            Err(_) => Err(LeaseError::Kube(KubeError::Transport(format!(
                "no answer within {} s",
                times.renew_deadline.as_secs()
            )))),
        };
        match acquired {
            Ok(()) => {
                held.watch.held(cluster, asked);
                held.held.push((cluster.clone(), client));
            }
            Err(LeaseError::Kube(KubeError::Transport(e))) => {
                progress(&format!(
                    "{cluster}: unreachable, no Lease taken ({e}); its steps that change it will not start"
                ));
                held.unreachable.insert(cluster.clone(), e);
            }
            Err(e) => {
                held.release().await;
                let target = format!("{cluster} (Lease {}/{})", lease::NAMESPACE, lease::NAME);
                return Err(match e {
                    LeaseError::Held { holder } => ApplyError::Locked { target, holder },
                    LeaseError::Kube(e) => ApplyError::LockFailed { target, stderr: e.to_string() },
                });
            }
        }
    }
    held.renew_in_background(progress);
    Ok(held)
}

impl Held {
    /// What tells the run's changes whether it still holds its Leases.
    pub fn watch(&self) -> Watch {
        self.watch.clone()
    }

    /// Refuses a step that would change `changed` clusters (less those it brings up itself)
    /// when the Lease of its guard `guard` is not held: never taken (unreachable at the start),
    /// or lost since.
    pub fn required(&self, guard: &Target, changed: &BTreeSet<Target>) -> Result<(), NoLease> {
        if changed.is_empty() {
            return Ok(());
        }
        if let Some(why) = self.watch.lost(guard) {
            return Err(NoLease(why));
        }
        if self.held.iter().any(|(c, _)| c == guard) {
            return Ok(());
        }
        let names: Vec<String> = changed.iter().map(ToString::to_string).collect();
        let why =
            self.unreachable.get(guard).map_or("it has no API access".to_string(), |e| format!("unreachable: {e}"));
        Err(NoLease(format!(
            "it changes {} and holds no Lease {}/{} of {guard} ({why}); a step that changes a cluster never starts without its Lease",
            names.join(", "),
            lease::NAMESPACE,
            lease::NAME
        )))
    }

    fn renew_in_background(&mut self, progress: Progress<'_>) {
        if self.held.is_empty() {
            return;
        }
        let (held, holder, watch) = (self.held.clone(), self.holder.clone(), self.watch.clone());
        let names: Vec<String> = held.iter().map(|(c, _)| c.to_string()).collect();
        progress(&format!("holding the Lease {}/{} of {}", lease::NAMESPACE, lease::NAME, names.join(", ")));
        let every = watch.times.retry_period;
        self.renewer = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                // Each renewal is bounded by the retry period: a stalled API is a failed try,
                // and the next one starts on time (client-go bounds each try the same way).
                let tries = held.iter().map(|(cluster, client)| {
                    let (watch, holder) = (&watch, &holder);
                    async move {
                        let sent = Instant::now();
                        let outcome = match tokio::time::timeout(every, lease::renew(client, holder)).await {
                            Ok(r) => r,
                            Err(_) => Err(LeaseError::Kube(KubeError::Transport(format!(
                                "no answer within {} s",
                                every.as_secs_f32()
                            )))),
                        };
                        watch.renewed(cluster, sent, outcome);
                    }
                });
                futures::future::join_all(tries).await;
            }
        }));
    }

    /// Writes the run's journal (which never holds secret content) next to each Lease held, as
    /// the ConfigMap `fabric-system/fabric-run-<run>`: every operator then sees the run
    /// (`fabric runs`) and can roll it back from their own machine. Returns the clusters where
    /// that failed, with why; the local journal stays the authority.
    pub async fn share_journal(&self, run: &str, text: &str) -> Vec<String> {
        let mut failed = Vec::new();
        for (cluster, client) in &self.held {
            if let Err(e) = kube::apply(client, &shared_journal(run, text), true).await {
                failed.push(format!("{cluster}: {e}"));
            }
        }
        failed
    }

    /// Stops renewing and releases every Lease still held by this run.
    pub async fn release(&mut self) {
        if let Some(r) = self.renewer.take() {
            r.abort();
        }
        for (_, client) in self.held.drain(..) {
            let _ = lease::release(&client, &self.holder).await;
        }
    }
}

/// The label on a shared journal, whose value is its run id.
pub const RUN_LABEL: &str = "fabric.io/run";

/// The name of a run's shared journal.
pub fn shared_journal_name(run: &str) -> String {
    format!("fabric-run-{}", run.to_ascii_lowercase())
}

/// A run's journal as the ConfigMap every operator reads.
pub fn shared_journal(run: &str, text: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": shared_journal_name(run), "namespace": lease::NAMESPACE,
            "labels": { crate::desired::objects::MANAGED_BY: "fabric", RUN_LABEL: run } },
        "data": { "journal.jsonl": text },
    })
}

/// Why a step may not change its clusters: their Lease is not held (never taken, or lost).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoLease(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    fn held(unreachable: &[(&str, &str)]) -> Held {
        Held {
            held: Vec::new(),
            unreachable: unreachable.iter().map(|(c, e)| (Target::cluster(c), e.to_string())).collect(),
            holder: "run".into(),
            watch: Watch::new(Times::default()),
            renewer: None,
        }
    }

    #[test]
    fn the_default_figures_keep_client_gos_order_and_a_30_s_margin() {
        let t = Times::default();
        assert!(t.valid());
        assert_eq!(t.margin(), Duration::from_secs(30));
        assert!(!Times { renew_deadline: t.duration, ..t }.valid(), "no margin, as NewLeaderElector refuses");
    }

    /// A step that changes a cluster never starts without its guard's Lease; one that changes
    /// no cluster (routers only) goes on under its host locks.
    #[test]
    fn a_step_changing_a_cluster_needs_its_guards_lease() {
        let h = held(&[("sp", "connection refused")]);
        let sp = Target::cluster("sp");
        let changed: BTreeSet<Target> = [sp.clone()].into();
        let why = h.required(&sp, &changed).unwrap_err().0;
        assert!(
            why.contains("holds no Lease fabric-system/fabric-apply of cluster.sp (unreachable: connection refused)"),
            "{why}"
        );
        assert_eq!(h.required(&sp, &BTreeSet::new()), Ok(()));
    }

    /// Lost once the renew deadline passed since the last renewal, with the last error; a later
    /// renewal does not bring it back (client-go's elector does not lead again).
    #[test]
    fn a_lease_not_renewed_within_its_deadline_is_lost_for_good() {
        let times = Times {
            duration: Duration::from_millis(300),
            renew_deadline: Duration::from_millis(100),
            retry_period: Duration::from_millis(20),
        };
        let w = Watch::new(times);
        let sp = Target::cluster("sp");
        w.held(&sp, Instant::now());
        assert_eq!(w.lost(&sp), None);
        w.renewed(&sp, Instant::now(), Err(LeaseError::Kube(KubeError::Transport("reset".into()))));
        assert_eq!(w.lost(&sp), None, "one failed try within the deadline is not a loss");
        w.held(&sp, Instant::now() - Duration::from_millis(150));
        let why = w.lost(&sp).expect("past the deadline");
        assert!(why.contains("was not renewed for 0 s (last try: still waiting"), "{why}");
        w.renewed(&sp, Instant::now(), Ok(()));
        assert!(w.lost(&sp).is_some(), "lost for good");
        assert!(w.any_lost().is_some());
        assert_eq!(w.lost(&Target::cluster("franca")), None, "never held: not lost (see `required`)");
        w.held(&sp, Instant::now());
        w.renewed(&sp, Instant::now(), Err(LeaseError::Held { holder: "run b".into() }));
        assert!(w.lost(&sp).unwrap().contains("taken over by run b"));
    }
}
