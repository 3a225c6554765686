//! SSH connections of a run: one per host, opened on first use, shared by concurrent steps.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::observe::Targets;
use crate::addr::Target;
use crate::transport::ssh::{Session, SshError};

/// Connections of this run, by target.
#[derive(Default)]
pub struct Pool {
    sessions: tokio::sync::Mutex<BTreeMap<Target, Arc<Session>>>,
}

impl Pool {
    pub async fn get(&self, targets: &Targets, target: &Target) -> Result<Arc<Session>, SshError> {
        if let Some(s) = self.sessions.lock().await.get(target) {
            return Ok(s.clone());
        }
        let ep = targets.ssh.get(target).ok_or_else(|| SshError::NoAccess { target: target.to_string() })?;
        // Connect without holding the map: other steps reach other hosts meanwhile.
        let s = Arc::new(Session::connect(ep).await?);
        Ok(self.sessions.lock().await.entry(target.clone()).or_insert(s).clone())
    }

    pub async fn close(self) {
        for (_, s) in self.sessions.into_inner() {
            if let Ok(s) = Arc::try_unwrap(s) {
                s.close().await;
            }
        }
    }
}
