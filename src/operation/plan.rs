//! The plan operation: what apply would change, from live state, from a snapshot, or offline.

use std::collections::BTreeSet;
use std::path::Path;

use super::{OpError, Workspace};
use crate::desired::Address;
use crate::live::observe::{Live, Targets};
use crate::live::snapshot;
use crate::plan::model::{Action, Mode, Plan};
use crate::plan::select::Selection;
use crate::plan::{self, diff};
use crate::providers::{self, Observed};

/// Where a plan's live state comes from.
pub enum Source<'a> {
    /// Nothing is read: every resource is planned as absent (CI without credentials).
    Offline,
    /// A snapshot written by `fabric state snapshot`.
    Snapshot(&'a Path),
    /// Nothing is read: the state is what the base topology (loaded from `file`) would write,
    /// so the plan is the change between the two topologies (a pull request's).
    Base { base: &'a Workspace, file: &'a Path },
    /// The targets themselves.
    Live { targets: &'a Targets, rt: &'a tokio::runtime::Runtime },
}

/// A plan, a note for the operator when the snapshot was taken from another topology, and what
/// was read (live plans only).
pub struct Planned {
    pub plan: Plan,
    pub note: Option<String>,
    pub observation: Option<super::Observation>,
}

pub fn make(ws: &Workspace, sel: Selection, source: Source<'_>) -> Result<Planned, OpError> {
    match source {
        Source::Offline => {
            // Offline, nothing is known to exist: a step with resources always has pending changes.
            let pending = |n| ws.desired.get(&n).is_some_and(|p| !p.resources.is_empty());
            let selected = ws.select(&sel, pending)?;
            let inputs = ws.plan_inputs(&selected, &sel, &Default::default());
            Ok(Planned {
                plan: plan::build(ws.header(&sel, Mode::Offline), inputs, None),
                note: None,
                observation: None,
            })
        }
        Source::Snapshot(file) => from_snapshot(ws, sel, file),
        Source::Base { base, file } => from_base(ws, sel, base, file),
        Source::Live { targets, rt } => {
            let o = rt.block_on(ws.observe(sel, targets))?;
            Ok(Planned { plan: ws.plan_of(&o), note: None, observation: Some(o) })
        }
    }
}

fn from_snapshot(ws: &Workspace, sel: Selection, file: &Path) -> Result<Planned, OpError> {
    let snap = snapshot::read(file)?;
    let note = (snap.topology_digest != ws.digest).then(|| {
        format!(
            "{} was taken with another version of the topology; the plan compares the current topology with that state",
            file.display()
        )
    });
    let live = snap.live.clone();
    // A dependency whose resource the snapshot does not hold is pending: nothing says it is done.
    let pending = |n| {
        ws.resources(n, &Selection::default()).iter().any(|r| match diff::change(r, &live) {
            Some(c) => c.action != Action::NoOp,
            None => true,
        })
    };
    let selected = ws.select(&sel, pending)?;
    let mode = Mode::Observed { file: file.display().to_string(), fingerprint: live.fingerprint() };
    let mut inputs = ws.plan_inputs(&selected, &sel, &snap.orphans(&ws.graph));
    let mut warnings = super::read::key_warnings(ws.topology(), &live);
    ws.refuse_gpu_steps(&mut inputs, &live, &mut warnings);
    ws.refuse_karmada_cert(&mut inputs, &live, &mut warnings);
    warnings.extend(super::mesh_ca::warning(&live));
    let mut plan = plan::build(ws.header(&sel, mode), inputs, Some(&live));
    plan.warnings = warnings;
    Ok(Planned { plan, note, observation: None })
}

/// The change from the base topology to this one: the base's desired state stands in for the
/// live state (each resource as fabric would write it), and what the base makes that this one
/// does not is what apply would prune.
fn from_base(ws: &Workspace, sel: Selection, base: &Workspace, file: &Path) -> Result<Planned, OpError> {
    let (live, orphans) = base_state(ws, base);
    let snap = snapshot::Snapshot::new(&base.topology().name, &base.digest, live, orphans);
    let pending = |n| {
        ws.resources(n, &Selection::default())
            .iter()
            .any(|r| diff::change(r, &snap.live).is_some_and(|c| c.action != Action::NoOp))
    };
    let selected = ws.select(&sel, pending)?;
    let mode = Mode::Base { file: file.display().to_string() };
    let inputs = ws.plan_inputs(&selected, &sel, &snap.orphans(&ws.graph));
    Ok(Planned { plan: plan::build(ws.header(&sel, mode), inputs, Some(&snap.live)), note: None, observation: None })
}

/// What the base topology would have written, as live state, and the objects it makes that this
/// topology does not (only kinds fabric prunes: anything else it leaves in place).
fn base_state(ws: &Workspace, base: &Workspace) -> (Live, Vec<snapshot::Orphan>) {
    let here: BTreeSet<&Address> = ws.desired.values().flat_map(|p| p.resources.iter().map(|r| &r.address)).collect();
    let mut live = Live::default();
    let mut orphans = Vec::new();
    for (n, produced) in &base.desired {
        for r in &produced.resources {
            live.observed.insert(r.address.clone(), Observed::Present(providers::desired_text(r, &|_| None)));
            let Some(obj) = r.kube_object() else { continue };
            let prunable = crate::desired::kinds::is_prunable(
                obj["apiVersion"].as_str().unwrap_or_default(),
                obj["kind"].as_str().unwrap_or_default(),
            );
            if prunable && !here.contains(&r.address) {
                let mut meta = serde_json::Map::new();
                meta.insert("name".into(), obj["metadata"]["name"].clone());
                if let Some(ns) = obj["metadata"].get("namespace") {
                    meta.insert("namespace".into(), ns.clone());
                }
                let identity =
                    serde_json::json!({ "apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta });
                let step = base.instance(*n).key();
                orphans.push(snapshot::Orphan {
                    step,
                    address: r.address.clone(),
                    target: r.target().clone(),
                    identity,
                });
            }
        }
    }
    (live, orphans)
}
