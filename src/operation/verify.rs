//! The verify operation: each selected step's checks against live state (changes nothing).

use super::{OpError, Workspace};
use crate::live::observe::Targets;
use crate::plan::select::Selection;
use crate::steps::{self, CheckResult, VerifyCx};

/// Runs the checks of the selected steps, in graph order.
pub fn run(
    ws: &Workspace,
    sel: &Selection,
    targets: &Targets,
    rt: &tokio::runtime::Runtime,
) -> Result<Vec<CheckResult>, OpError> {
    ws.live_allowed("it holds production addresses: verify a topology of your own")?;
    let selected = ws.select(sel, |_| false)?;
    let mut results = Vec::new();
    for n in ws.in_order(&selected) {
        let inst = ws.instance(n);
        let Some(step) = steps::get(&inst.spec.id) else { continue };
        let key = inst.key();
        let cx = VerifyCx { t: ws.topology(), targets, key: &key, site: inst.site.as_deref() };
        results.extend(rt.block_on(step.verify(&cx)));
    }
    Ok(results)
}
