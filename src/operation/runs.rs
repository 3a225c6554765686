//! The runs every operator can see: the journals in this machine's state directory and those
//! shared in each reachable cluster (`fabric-system/fabric-run-<run>`, written by apply next to
//! the Lease). `fabric runs` lists them; `fabric rollback RUN` fetches a run it does not have
//! locally from the clusters, so any operator can roll back any operator's run.

use std::collections::BTreeMap;
use std::path::Path;

use super::{OpError, Workspace};
use crate::addr::Target;
use crate::apply::journal::{self, Entry, Journal};
use crate::apply::lease::RUN_LABEL;
use crate::live::observe::Targets;
use crate::providers::{kube, lease};

/// One run as `fabric runs` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunSummary {
    pub run: String,
    pub user: String,
    /// The steps it began, in order.
    pub steps: Vec<String>,
    /// `ok`, `failed`, `unfinished` (no end: running, or its machine stopped), or `rolled back`.
    pub outcome: String,
    /// Where its journal was found: `local` and/or clusters.
    pub seen_in: Vec<String>,
}

/// The clusters that may hold shared journals (next to their Lease).
fn clusters(targets: &Targets) -> impl Iterator<Item = (&Target, &kube::KubeAccess)> {
    targets.kube.iter().filter(|(t, _)| matches!(t, Target::Cluster(_)))
}

/// How many clusters [`list`] reads: what its unread ones are counted against.
pub fn shared_sources(targets: &Targets) -> usize {
    clusters(targets).count()
}

/// The journals of the clusters that can be read: run id → (cluster, text). A cluster that
/// cannot be read is left out (and named in the second list).
async fn shared(targets: &Targets) -> (BTreeMap<String, (Target, String)>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut unread = Vec::new();
    for (target, access) in clusters(targets) {
        let read = async {
            let client = kube::client(target, access).await?;
            let probe = serde_json::json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "", "namespace": lease::NAMESPACE } });
            let (api, _) = kube::api_for(&client, &probe);
            let list = api
                .list(&::kube::api::ListParams::default().labels(RUN_LABEL))
                .await
                .map_err(|e| kube::KubeError::from(&e))?;
            Ok::<_, kube::KubeError>(list.items)
        };
        match read.await {
            Ok(items) => {
                for cm in items {
                    let v = serde_json::to_value(&cm).unwrap_or_default();
                    let run = v["metadata"]["labels"][RUN_LABEL].as_str().unwrap_or_default().to_string();
                    let text = v["data"]["journal.jsonl"].as_str().unwrap_or_default().to_string();
                    // Only a run id is ever used as one (it becomes a file name on fetch).
                    let longer = out.get(&run).is_none_or(|(_, t): &(Target, String)| t.len() < text.len());
                    if journal::is_run_id(&run) && longer {
                        out.insert(run, (target.clone(), text));
                    }
                }
            }
            Err(e) => unread.push(format!("{target}: {e}")),
        }
    }
    (out, unread)
}

fn summarize(run: &str, entries: &[Entry]) -> RunSummary {
    let mut s = RunSummary {
        run: run.into(),
        user: String::new(),
        steps: vec![],
        outcome: "unfinished".into(),
        seen_in: vec![],
    };
    for e in entries {
        match e {
            Entry::Start { user, .. } => s.user = user.clone(),
            Entry::Begin { step, .. } => s.steps.push(step.clone()),
            Entry::End { ok, .. } => s.outcome = if *ok { "ok" } else { "failed" }.into(),
            Entry::RolledBack { .. } => s.outcome = "rolled back".into(),
            _ => {}
        }
    }
    s
}

/// What [`list`] found.
#[derive(Debug, Default)]
pub struct Listed {
    /// Every run read, newest first.
    pub runs: Vec<RunSummary>,
    /// The clusters that could not be read (`target: reason`).
    pub unread: Vec<String>,
    /// The journals found that could not be read (`path: reason`, or `cluster: ConfigMap:
    /// reason` for a shared one): runs that exist but are unknown, never left out silently.
    pub unreadable: Vec<String>,
}

/// Run id → its journal's entries.
type Journals = BTreeMap<String, Vec<Entry>>;

/// The journals of this machine's runs folder, and those that cannot be read (`path: reason`).
/// No folder is no runs; a folder that exists but cannot be listed is an error.
fn local(state_dir: &Path) -> Result<(Journals, Vec<String>), OpError> {
    let dir = journal::runs_dir(state_dir);
    let (mut runs, mut unreadable) = (BTreeMap::new(), Vec::new());
    let listing = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((runs, unreadable)),
        Err(source) => return Err(OpError::RunsDir { path: dir.display().to_string(), source }),
        Ok(listing) => listing,
    };
    for entry in listing {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                unreadable.push(format!("{}: {e}", dir.display()));
                continue;
            }
        };
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(run) = name.strip_suffix(".jsonl").filter(|r| journal::is_run_id(r)) else { continue };
        // A directory, a dangling link, a file this user cannot read, a line that is not a
        // journal entry: the run exists and is unknown.
        match Journal::read(&entry.path()) {
            Ok(entries) => {
                runs.insert(run.to_string(), entries);
            }
            Err(e) => unreadable.push(format!("{}: {e}", entry.path().display())),
        }
    }
    unreadable.sort();
    Ok((runs, unreadable))
}

/// Every run, newest first, the clusters that could not be read, and the journals that could
/// not be.
pub fn list(
    ws: &Workspace,
    targets: &Targets,
    state_dir: &Path,
    rt: &tokio::runtime::Runtime,
) -> Result<Listed, OpError> {
    ws.live_allowed("it holds production addresses: list the runs of a topology of your own")?;
    let (local, mut unreadable) = local(state_dir)?;
    let mut runs: BTreeMap<String, RunSummary> = BTreeMap::new();
    for (run, entries) in local {
        let mut s = summarize(&run, &entries);
        s.seen_in.push("local".into());
        runs.insert(run, s);
    }
    let (shared, unread) = rt.block_on(shared(targets));
    for (run, (cluster, text)) in shared {
        let entries = match Journal::parse(&text) {
            Ok(entries) => entries,
            Err(e) => {
                unreadable.push(format!("{cluster}: {}/fabric-run-{run}: {e}", lease::NAMESPACE));
                continue;
            }
        };
        let s = runs.entry(run.clone()).or_insert_with(|| summarize(&run, &entries));
        s.seen_in.push(cluster.to_string());
    }
    Ok(Listed { runs: runs.into_values().rev().collect(), unread, unreadable })
}

/// Makes the journal of `run` local when only a cluster has it (another operator's run).
/// Whether it fetched one.
pub fn fetch(targets: &Targets, state_dir: &Path, run: &str, rt: &tokio::runtime::Runtime) -> Result<bool, OpError> {
    let path = journal::runs_dir(state_dir).join(format!("{run}.jsonl"));
    if path.exists() {
        return Ok(false);
    }
    let (shared, _) = rt.block_on(shared(targets));
    let Some((_, text)) = shared.get(run) else { return Ok(false) };
    // Refused like a local journal when it names what fabric does not write.
    Journal::parse(text).map_err(|source| OpError::ReadJournal { path: path.display().to_string(), source })?;
    std::fs::create_dir_all(journal::runs_dir(state_dir))
        .and_then(|()| std::fs::write(&path, text))
        .map_err(|source| OpError::JournalCreate { dir: state_dir.display().to_string(), source })?;
    Ok(true)
}
