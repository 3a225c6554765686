//! `fabric state snapshot`: what plan reads, written to a file, so that CI can plan against it
//! (`plan --observed FILE`) without credentials. Secrets appear by presence only; public keys
//! are public.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use miette::Report;
use petgraph::graph::NodeIndex;
use serde::{Deserialize, Serialize};

use super::{Done, usage};
use crate::catalog::StepGraph;
use crate::command::cli::Global;
use crate::desired::{Desired, ProviderKind, Resource};
use crate::live::observe::Live;

/// Work with observed state
#[derive(Debug, Args)]
pub struct Opts {
    #[command(subcommand)]
    pub command: StateCommand,
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    Snapshot(SnapshotOpts),
}

/// Read the live state of the selected steps and write it to a file for `plan --observed`
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  fabric state snapshot --out state.json\n  fabric plan --observed state.json --format markdown --detailed-exitcode"
)]
pub struct SnapshotOpts {
    #[command(flatten)]
    pub selection: crate::command::cli::SelectionArgs,
    /// Where to write the snapshot
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

pub const SNAPSHOT_VERSION: &str = "1.0";

#[derive(Debug, Serialize, Deserialize)]
pub struct Orphan {
    pub step: String,
    pub address: String,
    pub target: String,
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
    /// The orphans as the resources plan expects, by step of `g`.
    pub fn orphans(&self, g: &StepGraph) -> BTreeMap<NodeIndex, Vec<Resource>> {
        let mut out: BTreeMap<NodeIndex, Vec<Resource>> = BTreeMap::new();
        for o in &self.orphans {
            let Some(n) = g.find(&o.step) else { continue };
            out.entry(n).or_default().push(Resource {
                address: o.address.clone(),
                target: o.target.clone(),
                site: o.target.strip_prefix("cluster.").map(String::from),
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

pub fn read(path: &Path) -> Result<Snapshot, Report> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        usage(
            "state::read",
            format!("cannot read {}: {e}", path.display()),
            "give a file written by `fabric state snapshot`",
        )
    })?;
    let s: Snapshot = serde_json::from_str(&text).map_err(|e| {
        usage(
            "state::read",
            format!("{} is not a snapshot: {e}", path.display()),
            "write it with `fabric state snapshot --out FILE`",
        )
    })?;
    if s.format_version != SNAPSHOT_VERSION {
        return Err(usage(
            "state::read",
            format!("snapshot format {} is not {SNAPSHOT_VERSION}", s.format_version),
            "write a new snapshot with this fabric",
        ));
    }
    Ok(s)
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let StateCommand::Snapshot(o) = o.command;
    let rt = crate::operation::workspace::runtime()?;
    let prep = crate::operation::workspace::prepare(g, o.selection.into(), &rt)?;
    let orphans = prep
        .orphans
        .iter()
        .flat_map(|(n, rs)| {
            let step = prep.graph.graph[*n].key();
            rs.iter().filter_map(move |r| match &r.desired {
                Desired::Prune(id) => Some(Orphan {
                    step: step.clone(),
                    address: r.address.clone(),
                    target: r.target.clone(),
                    identity: id.clone(),
                }),
                _ => None,
            })
        })
        .collect();
    let snap = Snapshot {
        format_version: SNAPSHOT_VERSION.into(),
        fabric: prep.loaded.topology.name.clone(),
        topology_digest: crate::operation::workspace::digest(&prep.loaded.text),
        live: prep.live,
        orphans,
    };
    let text = serde_json::to_string_pretty(&snap).expect("snapshot serializes") + "\n";
    std::fs::write(&o.out, text).map_err(|e| {
        usage(
            "state::write",
            format!("cannot write {}: {e}", o.out.display()),
            "check the directory exists and is writable",
        )
    })?;
    if !g.quiet {
        println!(
            "Wrote {}: {} resource state(s), {} unreachable target(s).",
            o.out.display(),
            snap.live.observed.len(),
            snap.live.unreachable.len()
        );
    }
    Ok(Done::Ok)
}
