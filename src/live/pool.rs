//! SSH connections of a run: one per host, opened on first use, shared by concurrent steps, and
//! replaced when it dies.
//!
//! A session whose connection is gone (sshd restarted, keepalives unanswered: russh's
//! `Handle::is_closed`) is never handed out again: the next [`Pool::checkout`] connects anew,
//! through the same [`Session::connect`] and so the same host-key check against known_hosts
//! (a host that came back with another key is refused as on the first connect). Revert asks for
//! a session that answers ([`Pool::answering`]) so that a step whose connection dropped can
//! still put itself back.
//!
//! A new connection matters to the host lock: a lock held through the old session may have
//! ended with it. [`Checkout::reconnected`] and [`Pool::reconnects`] say so, for the lock code
//! to take the lock again and check nobody else holds it before the next change.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::connect::connect;
use super::observe::Targets;
use crate::addr::Target;
use crate::transport::shell::Sh;
use crate::transport::ssh::{Session, SshError};

/// A session from the pool, and whether it replaced one that had died.
pub struct Checkout {
    pub session: Arc<Session>,
    /// True when this checkout connected again after the host's previous session died: a lock
    /// held through that session must be taken again.
    pub reconnected: bool,
}

/// Connections of this run, by target.
#[derive(Default)]
pub struct Pool {
    sessions: tokio::sync::Mutex<BTreeMap<Target, Arc<Session>>>,
    /// Target → connections made to it in this run (a second one replaced a dead session).
    connects: std::sync::Mutex<BTreeMap<Target, u32>>,
}

impl Pool {
    /// A pool holding `open`, connections made earlier in this run (the plan's read: see
    /// `live::observe::observe_keeping`); each counts as the host's first connect.
    pub fn with(open: BTreeMap<Target, Arc<Session>>) -> Pool {
        let connects = open.keys().map(|t| (t.clone(), 1)).collect();
        Pool { sessions: tokio::sync::Mutex::new(open), connects: std::sync::Mutex::new(connects) }
    }

    /// The target's session: the pooled one while it lives, else a new connection.
    pub async fn get(&self, targets: &Targets, target: &Target) -> Result<Arc<Session>, SshError> {
        Ok(self.checkout(targets, target).await?.session)
    }

    /// [`Pool::get`], saying whether the session replaces one that died.
    pub async fn checkout(&self, targets: &Targets, target: &Target) -> Result<Checkout, SshError> {
        {
            let mut sessions = self.sessions.lock().await;
            match sessions.get(target) {
                Some(s) if !s.is_closed() => return Ok(Checkout { session: s.clone(), reconnected: false }),
                Some(_) => {
                    sessions.remove(target);
                }
                None => {}
            }
        }
        let ep = targets.ssh.get(target).ok_or_else(|| SshError::NoAccess { target: target.to_string() })?;
        // Connect without holding the map: other steps reach other hosts meanwhile.
        let s = Arc::new(connect(ep).await?);
        let session = self.sessions.lock().await.entry(target.clone()).or_insert(s.clone()).clone();
        if !Arc::ptr_eq(&session, &s) {
            // Another step connected meanwhile: its session is the host's.
            return Ok(Checkout { session, reconnected: false });
        }
        let mut connects = self.connects.lock().expect("pool counts");
        let n = connects.entry(target.clone()).or_default();
        *n += 1;
        Ok(Checkout { session, reconnected: *n > 1 })
    }

    /// How many times `target` was connected to again in this run after its session died: the
    /// lock code compares it with the count it took the lock at.
    pub fn reconnects(&self, target: &Target) -> u32 {
        self.connects.lock().expect("pool counts").get(target).copied().unwrap_or(0).saturating_sub(1)
    }

    /// A session that answered a command just now: the pooled one if it does, else a new one.
    /// A connection can be dead before russh notices (keepalives take seconds): revert cannot
    /// wait for that, so it asks the host.
    pub async fn answering(&self, targets: &Targets, target: &Target) -> Result<Checkout, SshError> {
        let c = self.checkout(targets, target).await?;
        if c.session.run(&Sh::lit("true"), None, Duration::from_secs(5)).await.is_ok() {
            return Ok(c);
        }
        self.forget(target, &c.session).await;
        self.checkout(targets, target).await
    }

    /// Drops `dead` from the pool (if it is still the pooled session), so the next checkout
    /// connects anew.
    pub async fn forget(&self, target: &Target, dead: &Arc<Session>) {
        let mut sessions = self.sessions.lock().await;
        if sessions.get(target).is_some_and(|s| Arc::ptr_eq(s, dead)) {
            sessions.remove(target);
        }
    }

    pub async fn close(self) {
        for (_, s) in self.sessions.into_inner() {
            if let Ok(s) = Arc::try_unwrap(s) {
                s.close().await;
            }
        }
    }
}
