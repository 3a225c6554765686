//! Locks as operators see them: `fabric lock status` reads the lock and the pending
//! self-reverts of every SSH host of the topology, and the Lease of every cluster (all at once),
//! and `fabric lock release` removes the stale ones (their holder is gone: a dead process, an
//! expired Lease), or any one with `--force` (break-glass, when the operator knows the holder is
//! dead, or the sites are cut apart and the Lease's cluster is on the other side).

use std::collections::BTreeMap;
use std::time::Duration;

use super::{OpError, Workspace};
use crate::addr::Target;
use crate::live::locks::{self, HeldLock, LOCK_PATH};
use crate::live::observe::Targets;
use crate::live::pool::Pool;
use crate::transport::shell;

/// What a host holds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostLocks {
    pub target: Target,
    /// Why the host could not be read.
    pub unreachable: Option<String>,
    pub lock: Option<HeldLock>,
    /// Self-reverts armed and not yet confirmed or fired (`/run/fabric-confirm-<if>-<run>`; a
    /// VyOS router's commit-confirm).
    pub pending_reverts: Vec<String>,
}

/// A cluster's Lease (`providers::lease`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClusterLease {
    pub target: Target,
    /// Why the cluster could not be read.
    pub unreachable: Option<String>,
    /// None when no run ever took it.
    pub lease: Option<crate::providers::lease::LeaseState>,
}

/// The Lease of every cluster of the workspace, read at once.
pub fn leases(ws: &Workspace, targets: &Targets, rt: &tokio::runtime::Runtime) -> Result<Vec<ClusterLease>, OpError> {
    ws.live_allowed("it holds production addresses: look at the locks of a topology of your own")?;
    let clusters: Vec<(Target, crate::providers::kube::KubeAccess)> = targets
        .kube
        .iter()
        .filter(|(t, _)| matches!(t, Target::Cluster(_)))
        .map(|(t, a)| (t.clone(), a.clone()))
        .collect();
    Ok(rt.block_on(futures::future::join_all(clusters.into_iter().map(|(target, access)| async move {
        let read = async {
            let client = crate::providers::kube::client(&target, &access).await?;
            crate::providers::lease::read(&client).await
        };
        match read.await {
            Ok(lease) => ClusterLease { target, unreachable: None, lease },
            Err(e) => ClusterLease { target, unreachable: Some(e.to_string()), lease: None },
        }
    }))))
}

/// What `lock release` did: the locks it removed, by target, and the targets it could not read
/// (`target: reason`; their locks, stale or not, are still there as far as anyone knows).
#[derive(Debug, Default)]
pub struct Released {
    pub released: BTreeMap<Target, String>,
    pub unread: Vec<String>,
    /// Hosts and clusters it looked at.
    pub total: usize,
}

/// Releases expired Leases (or, with `force`, every held one) and says which.
fn release_leases(
    ws: &Workspace,
    targets: &Targets,
    force: bool,
    rt: &tokio::runtime::Runtime,
) -> Result<Released, OpError> {
    let mut out = Released::default();
    let released = &mut out.released;
    for l in leases(ws, targets, rt)? {
        out.total += 1;
        if let Some(e) = &l.unreachable {
            out.unread.push(format!("{} Lease: {e}", l.target));
        }
        let Some(state) = l.lease.filter(|s| !s.holder.is_empty() && (force || s.expired())) else { continue };
        let Some(access) = targets.kube.get(&l.target) else { continue };
        let done = rt.block_on(async {
            let client = crate::providers::kube::client(&l.target, access).await.ok()?;
            // Only that holder's Lease goes: one taken over meanwhile stays.
            crate::providers::lease::release(&client, &state.holder).await.ok()
        });
        if done == Some(true) {
            released.insert(l.target, state.holder);
        }
    }
    Ok(out)
}

/// The locks of every SSH host of the workspace, read at once.
pub fn status(ws: &Workspace, targets: &Targets, rt: &tokio::runtime::Runtime) -> Result<Vec<HostLocks>, OpError> {
    ws.live_allowed("it holds production addresses: look at the locks of a topology of your own")?;
    let pool = Pool::default();
    let out = rt.block_on(async {
        let reads = targets.ssh.keys().map(|t| read_host(&pool, targets, t));
        let out = futures::future::join_all(reads).await;
        pool.close().await;
        out
    });
    Ok(out)
}

async fn read_host(pool: &Pool, targets: &Targets, target: &Target) -> HostLocks {
    let mut h = HostLocks { target: target.clone(), unreachable: None, lock: None, pending_reverts: vec![] };
    let s = match pool.get(targets, target).await {
        Ok(s) => s,
        Err(e) => {
            h.unreachable = Some(e.to_string());
            return h;
        }
    };
    let cmd = shell::as_root(&s.endpoint.user, &locks::read_locks_for(targets.is_vyos(target)));
    match s.run(&cmd, None, Duration::from_secs(15)).await {
        Ok(o) => {
            let hold = locks::parse_hold(&o.stdout_str());
            h.lock = hold.lock.map(|l| HeldLock::parse(&l, &locks::here(), locks::now(), &locks::alive));
            h.pending_reverts = hold.pending_reverts;
        }
        Err(e) => h.unreachable = Some(e.to_string()),
    }
    h
}

/// Releases stale locks (or, with `force`, every lock) and says which, by host, and which
/// hosts and clusters it could not read.
pub fn release(
    ws: &Workspace,
    targets: &Targets,
    force: bool,
    rt: &tokio::runtime::Runtime,
) -> Result<Released, OpError> {
    let mut out = release_leases(ws, targets, force, rt)?;
    let held = status(ws, targets, rt)?;
    out.total += held.len();
    out.unread.extend(held.iter().filter_map(|h| h.unreachable.as_ref().map(|e| format!("{}: {e}", h.target))));
    let pool = Pool::default();
    let released = rt.block_on(async {
        let mut released = BTreeMap::new();
        for h in held {
            let Some(lock) = h.lock.filter(|l| force || l.stale.is_some()) else { continue };
            let Ok(s) = pool.get(targets, &h.target).await else { continue };
            // Only that holder's lock goes (its session's holder ended): one taken meanwhile by a
            // new run stays.
            let cmd = shell::as_root(&s.endpoint.user, &locks::break_lock(LOCK_PATH, &lock.holder));
            if s.run(&cmd, None, Duration::from_secs(15)).await.is_ok_and(|o| o.status == 0) {
                released.insert(h.target, lock.holder);
            }
        }
        pool.close().await;
        released
    });
    out.released.extend(released);
    Ok(out)
}
