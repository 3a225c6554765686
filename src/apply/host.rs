//! Applying one step's changes to one host over SSH (routers, files, commands), in order; the
//! clusters' counterpart is `kube_apply`. A router is told to revert by itself before it changes
//! (see `confirm`): VyOS in the commit itself, one commit-confirm for the whole router; a Linux
//! router by a job armed before each interface's file is written.

use crate::apply::confirm::arm_linux_revert;
use crate::apply::kube::Outcome;
use crate::desired::{ProviderKind, Resource};
use crate::providers::{self, Observed, PendingChange};
use crate::transport::ssh::Session;

/// What a host's changes need besides the host itself.
pub(super) struct Context {
    /// The run: a router's self-revert is this run's, never an earlier one's.
    pub run: String,
    /// How long a router waits for confirmation before it reverts by itself.
    pub confirm_secs: u32,
    /// The same in minutes, for VyOS's `commit-confirm`.
    pub confirm_minutes: u32,
    /// The step's key, for progress lines.
    pub step: String,
    /// The clusters' accesses: a node's migration cordons and drains it through its cluster.
    pub accesses: std::collections::BTreeMap<crate::desired::Target, crate::providers::kube::KubeAccess>,
    /// How long a node's drain and its Cilium agent may take.
    pub budget: crate::apply::wait::Budget,
    pub progress: tokio::sync::mpsc::UnboundedSender<String>,
    /// The state directory: K3s bundle files fetched from URLs are in its cache.
    pub state_dir: std::path::PathBuf,
}

/// Applies `items` to the host behind `s` in order. Returns what was applied (to revert on
/// failure, partially applied resources included), no waits (only clusters have them), and the
/// first failure.
pub(super) async fn apply_target(cx: &Context, s: &Session, items: Vec<PendingChange>) -> Outcome {
    let mut ok: Vec<(Resource, Observed)> = Vec::new();
    if items.iter().all(|c| c.resource.provider == ProviderKind::Vyos) {
        // One commit-confirm for the whole router. A script whose commit-confirm armed the
        // router's timer committed what VyOS took (VyOS goes on after a failing line): put back.
        // One that armed nothing committed nothing, and the pending confirmation it found may
        // be someone else's: not touched.
        return match providers::apply_vyos(s, &items, cx.confirm_minutes).await {
            Ok(()) => (items.into_iter().map(|c| (c.resource, c.prior)).collect(), vec![], None),
            Err(f) if f.armed => {
                (items.into_iter().map(|c| (c.resource, c.prior)).collect(), vec![], Some(f.error.to_string()))
            }
            Err(f) => (ok, vec![], Some(f.error.to_string())),
        };
    }
    for PendingChange { resource: r, prior, text } in items {
        // Stopped (a signal, the step's Lease lost): no further change; what was made reverts.
        if let Some(why) = cx.budget.stop.why() {
            return (ok, vec![], Some(format!("{why}; {} not changed", r.address)));
        }
        if r.provider == ProviderKind::Wireguard {
            // Armed, written and restarted in one command: the revert is armed before the file
            // changes, and nothing changes when it cannot be.
            let arm = arm_linux_revert(providers::wg_interface(&r), &cx.run, cx.confirm_secs);
            match providers::apply_wireguard_armed(s, &r, &text, &arm).await {
                Ok(()) => ok.push((r, prior)),
                Err(providers::WireguardChangeError::NotArmed(stderr)) => {
                    return (ok, vec![], Some(format!("{}: cannot schedule the revert: {stderr}", r.address)));
                }
                Err(providers::WireguardChangeError::Changed(e)) => {
                    // Partially applied resources revert too.
                    ok.push((r, prior));
                    return (ok, vec![], Some(e.to_string()));
                }
            }
            continue;
        }
        if let crate::desired::Desired::NodeMigration(m) = &r.desired {
            let ncx = crate::apply::node::Context {
                step: &cx.step,
                accesses: &cx.accesses,
                budget: cx.budget.clone(),
                progress: &cx.progress,
            };
            let result = crate::apply::node::migrate(&ncx, s, m).await;
            // Partially migrated, it is put back as far as it can be.
            ok.push((r, prior));
            if let Err(e) = result {
                return (ok, vec![], Some(e.to_string()));
            }
            continue;
        }
        if let crate::desired::Desired::K3sInstall(k) = &r.desired
            && crate::apply::upgrade::is_upgrade(&prior)
        {
            let ncx = crate::apply::node::Context {
                step: &cx.step,
                accesses: &cx.accesses,
                budget: cx.budget.clone(),
                progress: &cx.progress,
            };
            let result = crate::apply::upgrade::upgrade(&ncx, s, &r, k, &prior, &cx.state_dir).await;
            ok.push((r, prior));
            if let Err(e) = result {
                return (ok, vec![], Some(e.to_string()));
            }
            continue;
        }
        match providers::apply(s, &r, &text, &prior, Some(cx.confirm_minutes), &cx.state_dir).await {
            Ok(()) => ok.push((r, prior)),
            Err(e) => {
                // Partially applied resources revert too.
                ok.push((r, prior));
                return (ok, vec![], Some(e.to_string()));
            }
        }
    }
    (ok, vec![], None)
}
