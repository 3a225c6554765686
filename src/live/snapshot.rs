//! The snapshot file: what plan reads, written by `fabric state snapshot`, so that CI can plan
//! against it (`plan --observed FILE`) without credentials. Secrets appear by presence only;
//! public keys are public.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use petgraph::graph::NodeIndex;
use serde::{Deserialize, Serialize};

use super::observe::Live;
use crate::catalog::StepGraph;
use crate::desired::{Address, Desired, ProviderKind, Resource, Target};

pub const SNAPSHOT_VERSION: &str = "1.0";

#[derive(Debug, Serialize, Deserialize)]
pub struct Orphan {
    pub step: String,
    pub address: Address,
    pub target: Target,
    pub identity: serde_json::Value,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Snapshot {
    pub format_version: String,
    pub fabric: String,
    pub topology_digest: String,
    pub live: Live,
    pub orphans: Vec<Orphan>,
}

impl Snapshot {
    /// A snapshot in this build's format of what `fabric` (the topology's name) read.
    pub fn new(fabric: &str, topology_digest: &str, live: Live, orphans: Vec<Orphan>) -> Snapshot {
        Snapshot {
            format_version: SNAPSHOT_VERSION.into(),
            fabric: fabric.into(),
            topology_digest: topology_digest.into(),
            live,
            orphans,
        }
    }

    /// The orphans as the resources plan expects, by step of `g`.
    pub fn orphans(&self, g: &StepGraph) -> BTreeMap<NodeIndex, Vec<Resource>> {
        let mut out: BTreeMap<NodeIndex, Vec<Resource>> = BTreeMap::new();
        for o in &self.orphans {
            let Some(n) = g.find(&o.step) else { continue };
            out.entry(n).or_default().push(Resource {
                site: o.address.target.site().map(String::from),
                address: o.address.clone(),
                provider: ProviderKind::Kube,
                summary: "no longer in the topology".into(),
                sensitive: false,
                desired: Desired::Prune(o.identity.clone()),
                file: None,
            });
        }
        out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is not a snapshot: {source}", path.display())]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("snapshot format {found} is not {SNAPSHOT_VERSION}")]
    Version { found: String },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

impl SnapshotError {
    pub fn help(&self) -> &'static str {
        match self {
            SnapshotError::Read { .. } => "give a file written by `fabric state snapshot`",
            SnapshotError::Parse { .. } => "write it with `fabric state snapshot --out FILE`",
            SnapshotError::Version { .. } => "write a new snapshot with this fabric",
            SnapshotError::Write { .. } => "check the directory exists and is writable",
        }
    }
}

/// Reads a snapshot file.
pub fn read(path: &Path) -> Result<Snapshot, SnapshotError> {
    let text = std::fs::read_to_string(path).map_err(|source| SnapshotError::Read { path: path.into(), source })?;
    let s: Snapshot =
        serde_json::from_str(&text).map_err(|source| SnapshotError::Parse { path: path.into(), source })?;
    if s.format_version != SNAPSHOT_VERSION {
        return Err(SnapshotError::Version { found: s.format_version });
    }
    Ok(s)
}

/// Writes a snapshot file.
pub fn write(path: &Path, s: &Snapshot) -> Result<(), SnapshotError> {
    let text = serde_json::to_string_pretty(s).expect("snapshot serializes") + "\n";
    std::fs::write(path, text).map_err(|source| SnapshotError::Write { path: path.into(), source })
}
