//! Which Lease guards a run, and holding them while it runs (see `providers::lease`).
//!
//! A per-site step (`D.1@sp`) is guarded by its site's cluster's Lease; a step that spans sites
//! (`B.1`, `C.5`, …) by the Lease of the federation's host cluster. So while the sites are cut
//! apart, each site's own steps can still be applied from that side, and steps that need both
//! sites are not (they could not be applied anyway). A cluster that cannot be reached (phase A,
//! before it exists) has no Lease to take: the host locks guard what its steps touch.
//!
//! The Leases are renewed every third of their duration; a run that dies stops renewing them,
//! and they expire. A run that loses one (another took it over after an expiry) is asked to
//! stop at its next phase boundary, like Ctrl-C.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::addr::Target;
use crate::apply::{ApplyError, Progress, interrupt};
use crate::live::observe::Targets;
use crate::providers::kube::{self, KubeError};
use crate::providers::lease::{self, LeaseError};
use crate::topology::Topology;

/// How long a Lease holds without renewal.
pub const DURATION_SECS: i32 = 60;

/// The cluster whose Lease guards the step `key` (`D.1@sp` and `A.2@sp/sp-gpu1` → sp's; `B.1`
/// → the host site's).
pub fn guard_of(t: &Topology, key: &str) -> Target {
    match key.split_once('@') {
        Some((_, at)) => Target::cluster(at.split('/').next().unwrap_or(at)),
        None => Target::cluster(&t.federation.karmada.host_site),
    }
}

/// The Leases a run holds, renewed in the background until released.
pub struct Held {
    held: Vec<(Target, ::kube::Client)>,
    holder: String,
    renewer: Option<tokio::task::JoinHandle<()>>,
}

/// Takes the Lease of every cluster in `clusters` for `holder`, or none: a Lease another run
/// holds refuses the run, naming that holder.
pub async fn take(
    targets: &Targets,
    clusters: &BTreeSet<Target>,
    holder: &str,
    progress: Progress<'_>,
) -> Result<Held, ApplyError> {
    let mut held = Held { held: Vec::new(), holder: holder.into(), renewer: None };
    for cluster in clusters {
        let Some(access) = targets.kube.get(cluster) else { continue };
        let client = match kube::client(cluster, access).await {
            Ok(c) => c,
            Err(e) => {
                progress(&format!("{cluster}: no Lease taken ({e}); the host locks guard its steps"));
                continue;
            }
        };
        match lease::acquire(&client, holder, DURATION_SECS).await {
            Ok(()) => held.held.push((cluster.clone(), client)),
            Err(LeaseError::Kube(KubeError::Transport(e))) => {
                progress(&format!("{cluster}: unreachable, no Lease taken ({e}); the host locks guard its steps"));
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
    fn renew_in_background(&mut self, progress: Progress<'_>) {
        if self.held.is_empty() {
            return;
        }
        let (held, holder) = (self.held.clone(), self.holder.clone());
        let names: Vec<String> = held.iter().map(|(c, _)| c.to_string()).collect();
        progress(&format!("holding the Lease {}/{} of {}", lease::NAMESPACE, lease::NAME, names.join(", ")));
        self.renewer = Some(tokio::spawn(async move {
            let every = Duration::from_secs((DURATION_SECS / 3).max(1) as u64);
            loop {
                tokio::time::sleep(every).await;
                for (cluster, client) in &held {
                    if let Err(LeaseError::Held { holder: other }) = lease::renew(client, &holder).await {
                        eprintln!(
                            "fabric: {cluster}: the Lease was taken over by {other}; stopping at the next step boundary"
                        );
                        interrupt::request();
                    }
                }
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
