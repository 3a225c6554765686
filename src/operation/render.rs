//! `fabric render`: the GitOps repository's files, from the same resources plan and apply use.
//!
//! Files are grouped from resources by their `file`, plus the values files generators add.
//! Output is deterministic (same topology, same bytes) and every file starts with a header
//! naming fabric, which is also how stale files fabric wrote earlier are recognised.

use std::collections::BTreeMap;
use std::path::Path;

use crate::catalog::StepGraph;
use petgraph::graph::NodeIndex;

use crate::desired::{Desired, Produced, yaml};
use crate::topology::Topology;

/// First line of every rendered file.
pub const MARKER: &str = "Rendered by fabric";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Path relative to the repository root, with `/` separators.
    pub path: String,
    pub content: String,
}

fn header(path: &str, t: &Topology) -> String {
    let note =
        format!("{MARKER} from topology `{}`; do not edit: change the topology and run `fabric render`.", t.name);
    if path.ends_with(".conf") || path.ends_with(".toml") || path.ends_with(".yaml") {
        format!("# {note}\n")
    } else {
        String::new()
    }
}

/// Every file, sorted by path.
pub fn render(graph: &StepGraph, t: &Topology) -> Vec<Artifact> {
    artifacts(graph, &crate::steps::desired_state(graph, t), t)
}

impl super::Workspace {
    /// Every file of this workspace's desired state, sorted by path.
    pub fn render(&self) -> Vec<Artifact> {
        artifacts(&self.graph, &self.desired, self.topology())
    }
}

fn artifacts(graph: &StepGraph, desired: &BTreeMap<NodeIndex, Produced>, t: &Topology) -> Vec<Artifact> {
    // path -> documents (YAML) or whole text, in resource order, without repeats.
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut whole: BTreeMap<String, String> = BTreeMap::new();
    for produced in graph.order.iter().filter_map(|n| desired.get(n)) {
        for r in &produced.resources {
            let Some(path) = &r.file else { continue };
            let doc = match &r.desired {
                Desired::Kube(v) => yaml::to_string(v),
                Desired::File(text) => text.clone(),
                // The control-plane node's server config, as the migration writes it.
                Desired::NodeMigration(m) => match &m.server_config {
                    Some(c) => c.clone(),
                    None => continue,
                },
                // Peers' keys as the topology records them (a placeholder where it does not yet).
                Desired::Wireguard(text) => crate::providers::resolve_keys(text, &|target| {
                    t.sites
                        .iter()
                        .find(|s| &crate::addr::Target::router(&s.name) == target)
                        .and_then(|s| s.router.wireguard.public_key.as_ref())
                        .map(ToString::to_string)
                }),
                // The bundle every host installs from, its URLs resolved (the same on each host).
                Desired::K3sInstall(k) => yaml::to_string(&k.bundle()),
                // VyOS files come whole from the generator; secrets and commands are never files.
                Desired::Vyos(_) | Desired::Secret(_) | Desired::Command { .. } | Desired::Prune(_) => continue,
            };
            let docs = files.entry(path.clone()).or_default();
            if !docs.contains(&doc) {
                docs.push(doc);
            }
        }
        for f in &produced.files {
            whole.insert(f.path.clone(), f.content.clone());
        }
    }
    let mut out: Vec<Artifact> = Vec::new();
    for (path, docs) in files {
        if whole.contains_key(&path) {
            continue;
        }
        let sep = if path.ends_with(".yaml") { "---\n" } else { "" };
        out.push(Artifact { content: format!("{}{}", header(&path, t), docs.join(sep)), path });
    }
    for (path, content) in whole {
        let content = if content.starts_with('#') && content.contains(MARKER) {
            content
        } else {
            format!("{}{content}", header(&path, t))
        };
        out.push(Artifact { path, content });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// How a rendered file compares with what is on disk.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Same,
    Missing,
    Differs,
    /// A file fabric wrote earlier that the topology no longer produces.
    Stale,
}

/// Compares the artifacts with `dir`. Stale files are those under the artifacts' top-level
/// directories that carry fabric's marker but are no longer rendered.
pub fn compare(artifacts: &[Artifact], dir: &Path) -> std::io::Result<Vec<(String, Status)>> {
    let mut out = Vec::new();
    for a in artifacts {
        let p = dir.join(&a.path);
        let status = match std::fs::read_to_string(&p) {
            Ok(s) if s == a.content => Status::Same,
            Ok(_) => Status::Differs,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Status::Missing,
            Err(e) => return Err(e),
        };
        out.push((a.path.clone(), status));
    }
    let mut tops: Vec<&str> = artifacts.iter().filter_map(|a| a.path.split('/').next()).collect();
    tops.sort();
    tops.dedup();
    for top in tops {
        for file in walk(&dir.join(top))? {
            let rel = file.strip_prefix(dir).unwrap_or(&file).to_string_lossy().replace('\\', "/");
            if artifacts.iter().any(|a| a.path == rel) {
                continue;
            }
            let marked = std::fs::read_to_string(&file)
                .map(|s| s.lines().next().is_some_and(|l| l.contains(MARKER)))
                .unwrap_or(false);
            if marked {
                out.push((rel, Status::Stale));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn walk(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            out.extend(walk(&p)?);
        } else {
            out.push(p);
        }
    }
    Ok(out)
}
