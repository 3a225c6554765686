//! Apply's local checks: everything that can be decided on this machine (the planfile against
//! this fabric and this topology, the steps' decisions, the K3s bundle's recorded digests) is
//! decided before any connection, so a refused apply has read, locked and asked nothing (issue
//! 36, item 3). terraform's `apply PLANFILE` checks its planfile's version and configuration
//! the same way before it touches a provider (`internal/backend/local/backend_local.go`).

use std::path::Path;

use super::{OpError, Workspace};
use crate::desired::Resource;
use crate::desired::k3s_install::Upload;
use crate::plan::model::{FABRIC_VERSION, Mode, Plan};
use crate::plan::select::Selection;

/// A planfile whose local checks passed: made by this fabric, from this topology, of live state
/// (or of a snapshot of it). What apply still needs of it: its selection, and the fingerprint of
/// what it observed (compared once live state is read again).
pub struct Reviewed {
    pub selection: Selection,
    pub fingerprint: String,
}

/// Checks a planfile read from `path` against this fabric and the workspace's topology, in the
/// order an operator fixes them: the fabric that made it, the topology it was made from, then
/// whether it can be applied at all.
pub fn planfile(ws: &Workspace, path: &Path, plan: Plan) -> Result<Reviewed, OpError> {
    let planfile = path.display().to_string();
    if plan.fabric_version != FABRIC_VERSION {
        return Err(OpError::OtherFabric { planfile, made_by: made_by(&plan), this: FABRIC_VERSION });
    }
    if plan.topology_digest != ws.digest {
        return Err(OpError::StaleTopology(topology_mismatch(&planfile, &plan, ws)));
    }
    // A plan made from live state or from a snapshot names what it observed.
    let fingerprint = match plan.mode {
        Mode::Live { fingerprint } | Mode::Observed { fingerprint, .. } => fingerprint,
        Mode::Offline | Mode::Base { .. } => return Err(OpError::OfflinePlanfile),
    };
    Ok(Reviewed { selection: plan.selection, fingerprint })
}

/// "fabric 0.3.0", or what an older planfile (no `fabric_version`) says of itself.
fn made_by(plan: &Plan) -> String {
    if plan.fabric_version.is_empty() {
        format!("an older fabric (plan format {})", plan.format_version)
    } else {
        format!("fabric {}", plan.fabric_version)
    }
}

/// Which topology the planfile was made from against which one is given: another file, or the
/// same file changed since.
fn topology_mismatch(planfile: &str, plan: &Plan, ws: &Workspace) -> String {
    let short = |d: &str| format!("sha256 {}…", &d[..12.min(d.len())]);
    let given = ws.topology_path().unwrap_or_else(|| ws.loaded.file.clone());
    let made_from = plan.topology_path.clone().unwrap_or_else(|| plan.topology_file.clone());
    if made_from == given {
        format!(
            "{given} changed since {planfile} was made ({} then, {} now)",
            short(&plan.topology_digest),
            short(&ws.digest)
        )
    } else {
        format!(
            "{planfile} was made from {made_from} ({}), not from {given} ({})",
            short(&plan.topology_digest),
            short(&ws.digest)
        )
    }
}

/// What the selection needs that this machine can refuse by itself: no selected step waits on
/// an open decision, and every K3s bundle file an install of the selection copies has its
/// digest recorded.
pub fn local(ws: &Workspace, sel: &Selection) -> Result<(), OpError> {
    // Pending dependencies are a matter of live state: here only what the flags name.
    let chosen = ws.select(sel, |_| false)?;
    let refused = crate::catalog::refusal::refusals(&ws.graph, ws.topology());
    let open: Vec<String> = ws
        .in_order(&chosen)
        .filter_map(|n| {
            let d = ws.loaded.diag(refused.get(&n)?.clone());
            Some(format!("{}: {} ({}:{})", ws.instance(n).key(), d.problem.message, d.file, d.line))
        })
        .collect();
    if !open.is_empty() {
        return Err(OpError::Undecided(open));
    }
    let installs: Vec<_> = ws
        .in_order(&chosen)
        .flat_map(|n| ws.resources(n, sel))
        .filter_map(|r| match &r.desired {
            crate::desired::Desired::K3sInstall(k) => Some(k.uploads().map(|u| (r.clone(), u.clone()))),
            _ => None,
        })
        .flatten()
        .collect();
    // An unrecorded digest never matches a binary that runs, so such an install is always a
    // change: refusing it here refuses what the run would refuse after the read.
    unrecorded_digest(&installs)
}

/// A digest not recorded yet (`sha256: TODO`, which validate warns about) pins nothing: the run
/// stops before any file is fetched, copied or run ([`local`] asks it before the read, the run's preflight again).
pub(super) fn unrecorded_digest(files: &[(Resource, Upload)]) -> Result<(), OpError> {
    match files.iter().find(|(_, u)| !crate::topology::airgap::is_sha256(&u.sha256)) {
        Some((r, u)) => Err(OpError::Bundle(format!(
            "{}: the SHA-256 of the bundle's {} is not recorded (`{}`): nothing was fetched, copied or run",
            r.address, u.name, u.sha256
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAB: &str = include_str!("../../tests/data/lab-linux.yaml");

    fn ws(text: &str) -> Workspace {
        Workspace::new(crate::topology::load_str("t.yaml", text.to_string()).unwrap()).unwrap()
    }

    fn live_plan(ws: &Workspace) -> Plan {
        let mut p =
            super::super::plan::make(ws, Selection::default(), super::super::plan::Source::Offline).unwrap().plan;
        p.mode = Mode::Live { fingerprint: "fp".into() };
        p
    }

    #[test]
    fn a_planfile_of_this_fabric_and_topology_is_reviewed() {
        let w = ws(LAB);
        let r = planfile(&w, Path::new("p.plan"), live_plan(&w)).unwrap();
        assert_eq!(r.fingerprint, "fp");
    }

    #[test]
    fn another_fabric_another_topology_or_an_offline_plan_is_refused_by_name() {
        let w = ws(LAB);
        let mut p = live_plan(&w);
        p.fabric_version = "0.0.1".into();
        let e = planfile(&w, Path::new("p.plan"), p).err().unwrap().to_string();
        assert_eq!(e, format!("p.plan was made by fabric 0.0.1; this is fabric {FABRIC_VERSION}"));
        let mut p = live_plan(&w);
        p.fabric_version = String::new();
        let e = planfile(&w, Path::new("p.plan"), p).err().unwrap().to_string();
        assert!(e.contains("made by an older fabric (plan format 1.6)"), "{e}");

        let mut p = live_plan(&w);
        p.topology_path = Some("/a/topology.yaml".into());
        p.topology_digest = "0123456789abcdef".into();
        let e = planfile(&w, Path::new("p.plan"), p).err().unwrap().to_string();
        let now = &w.digest[..12];
        assert_eq!(
            e,
            format!("p.plan was made from /a/topology.yaml (sha256 0123456789ab…), not from t.yaml (sha256 {now}…)")
        );
        let mut p = live_plan(&w);
        p.topology_digest = "0123456789abcdef".into();
        let e = planfile(&w, Path::new("p.plan"), p).err().unwrap().to_string();
        assert_eq!(e, format!("t.yaml changed since p.plan was made (sha256 0123456789ab… then, sha256 {now}… now)"));

        let mut p = live_plan(&w);
        p.mode = Mode::Offline;
        assert!(matches!(planfile(&w, Path::new("p.plan"), p), Err(OpError::OfflinePlanfile)));
    }

    #[test]
    fn an_open_decision_or_an_unrecorded_digest_is_refused_locally() {
        let w = ws(&LAB.replace("argocd: single", "argocd: undecided"));
        let e = local(&w, &Selection::default()).unwrap_err();
        assert!(matches!(&e, OpError::Undecided(s) if s.iter().any(|s| s.starts_with("C.3: "))), "{e}");
        assert!(local(&w, &Selection { steps: vec!["B.1".into()], ..Default::default() }).is_ok());
        // No release's digests recorded: validate warns, apply refuses before any connection.
        let todo = "k3s_airgap:\n  digests: {}\n";
        let w = ws(&format!("{LAB}{todo}"));
        let e = local(&w, &Selection::default()).unwrap_err().to_string();
        assert!(e.contains("is not recorded (`TODO`): nothing was fetched, copied or run"), "{e}");
    }
}
