//! The snapshot operation: the live state of a selection, written for `plan --observed`.

use std::path::Path;

use super::read::ReadReport;
use super::{OpError, Workspace};
use crate::desired::Desired;
use crate::live::observe::Targets;
use crate::live::snapshot::{self, Orphan, Snapshot};
use crate::plan::select::Selection;

/// Reads `sel`'s live state and writes it to `out`; returns it, and what was read.
pub fn run(
    ws: &Workspace,
    sel: Selection,
    targets: &Targets,
    out: &Path,
    rt: &tokio::runtime::Runtime,
) -> Result<(Snapshot, ReadReport), OpError> {
    let o = rt.block_on(ws.observe(sel, targets))?;
    let orphans = o
        .orphans
        .iter()
        .flat_map(|(n, rs)| {
            let step = ws.instance(*n).key();
            rs.iter().filter_map(move |r| match &r.desired {
                Desired::Prune(id) => Some(Orphan {
                    step: step.clone(),
                    address: r.address.clone(),
                    target: r.target().clone(),
                    identity: id.clone(),
                }),
                _ => None,
            })
        })
        .collect();
    let snap = Snapshot::new(&ws.topology().name, &ws.digest, o.live, orphans);
    snapshot::write(out, &snap)?;
    Ok((snap, o.report))
}
