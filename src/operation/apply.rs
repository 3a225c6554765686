//! The apply operation, in two parts so the command can show the plan and ask in between:
//! [`prepare`] reads live state and plans (refusing a stale planfile), [`run`] journals and
//! applies the steps with rollback points.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::preflight::Reviewed;
use super::{Observation, OpError, Workspace};
use crate::apply::journal::{self, Entry, Journal};
use crate::apply::{self as engine, Hooks, StepWork};
use crate::desired::Resource;
use crate::desired::k3s_install::{Source, Upload};
use crate::live::observe::Targets;
use crate::plan::model::{Action, Plan};
use crate::plan::select::Selection;
use crate::providers::bundle::Fetcher;

/// What to apply: the flags' selection, or a plan written by `plan --out` whose local checks
/// passed (`preflight::planfile`).
pub enum Request {
    Selection(Selection),
    Planfile(Reviewed),
}

impl Request {
    pub fn selection(&self) -> &Selection {
        match self {
            Request::Selection(s) => s,
            Request::Planfile(r) => &r.selection,
        }
    }
}

/// Live state read and planned, ready to be approved and applied.
pub struct Ready {
    pub observation: Observation,
    pub plan: Plan,
}

impl Ready {
    /// Why this plan must not be applied as it is (the plan is worth showing first).
    pub fn blocked(&self) -> Option<OpError> {
        if self.plan.summary.refused_steps > 0 {
            return Some(OpError::Refused);
        }
        if !self.plan.unreachable.is_empty() {
            return Some(OpError::Unreachable(self.plan.unreachable.iter().map(|u| u.target.to_string()).collect()));
        }
        None
    }

    /// The hosts of the selection where a self-revert armed by an earlier run is pending (a run
    /// killed before it confirmed): what plan read there is about to change back, so "no
    /// changes" cannot be trusted yet. The run waits for them (`apply::host_locks`).
    pub fn pending_reverts(&self) -> Vec<String> {
        let held = &self.observation.live.held;
        held.iter().filter(|(_, h)| !h.pending_reverts.is_empty()).map(|(t, _)| t.to_string()).collect()
    }
}

/// Reads and plans. With a reviewed planfile (its topology and fabric already checked), its
/// selection is used and apply goes on only if everything the plan observed is still the same.
pub fn prepare(
    ws: &Workspace,
    req: Request,
    targets: &Targets,
    rt: &tokio::runtime::Runtime,
) -> Result<Ready, OpError> {
    let (sel, expected) = match req {
        Request::Selection(s) => (s, None),
        Request::Planfile(r) => (r.selection, Some(r.fingerprint)),
    };
    let observation = rt.block_on(ws.observe_for_apply(sel, targets))?;
    let plan = ws.plan_of(&observation);
    // A target not read is said as such (`Ready::blocked`), not as a moved state.
    let read_all = plan.unreachable.is_empty();
    if read_all && expected.is_some_and(|fingerprint| fingerprint != observation.live.fingerprint()) {
        return Err(OpError::StaleLive);
    }
    Ok(Ready { observation, plan })
}

/// How to apply.
#[derive(Debug, Clone)]
pub struct Options {
    pub state_dir: PathBuf,
    pub confirm_timeout: Duration,
    pub force_conflicts: bool,
    pub wait_timeout: Duration,
}

/// A finished run.
pub struct Applied {
    pub run: String,
    /// Keys of the steps that changed something.
    pub changed: Vec<String>,
    pub journal: PathBuf,
}

/// A new run's id and its journal, opened with the run's start (what the topology is, who runs it).
pub(super) fn start_journal(ws: &Workspace, state_dir: &Path) -> Result<(String, Journal), OpError> {
    let run = journal::new_run_id();
    let mut j = Journal::create(state_dir, &run)
        .map_err(|source| OpError::JournalCreate { dir: state_dir.display().to_string(), source })?;
    let user = std::env::var("USER").unwrap_or_default();
    j.record(&Entry::Start {
        run: run.clone(),
        fabric: ws.topology().name.clone(),
        topology_digest: ws.digest.clone(),
        user,
    })?;
    Ok((run, j))
}

/// Journals the run and applies the plan's steps in order; a failed step is reverted to its
/// rollback point and stops the run.
pub fn run(
    ws: &Workspace,
    ready: Ready,
    opts: &Options,
    targets: &Targets,
    hooks: Hooks<'_>,
    rt: &tokio::runtime::Runtime,
) -> Result<Applied, OpError> {
    bundle_preflight(ws, &ready, &Fetcher::new(&opts.state_dir))?;
    let (run, mut j) = start_journal(ws, &opts.state_dir)?;
    let Ready { observation: o, .. } = ready;
    let steps: Vec<StepWork> = ws
        .in_order(&o.selected)
        .map(|n| StepWork {
            key: ws.instance(n).key(),
            id: ws.instance(n).spec.id.clone(),
            needs: ws.needs(n),
            resources: ws
                .resources(n, &o.selection)
                .into_iter()
                .chain(o.orphans.get(&n).into_iter().flatten().filter(|r| o.selection.keeps(r)).cloned())
                .collect(),
        })
        .filter(|s| !s.resources.is_empty())
        .collect();
    let engine_opts = engine::Options {
        run: run.clone(),
        state_dir: opts.state_dir.clone(),
        confirm_timeout: opts.confirm_timeout,
        force_conflicts: opts.force_conflicts,
        wait_timeout: opts.wait_timeout,
        lease: crate::apply::lease::Times::default(),
    };
    let result = rt.block_on(async {
        crate::apply::interrupt::listen();
        engine::run_over(ws.topology(), &steps, targets, o.live, o.kept, &engine_opts, &mut j, hooks).await
    });
    match result {
        Ok(changed) => Ok(Applied { run, changed, journal: j.path.clone() }),
        Err(error) => Err(OpError::Apply { run, error: Box::new(error) }),
    }
}

/// Every K3s bundle file an install of this run will copy is had and checked against its digest
/// before anything starts: a URL fetched into the state directory's cache (or found there), a
/// path read. A wrong, missing or unreachable file stops the run with nothing changed (the
/// provider checks again as it copies).
fn bundle_preflight(ws: &Workspace, ready: &Ready, fetcher: &Fetcher) -> Result<(), OpError> {
    check_bundle(&bundle_files(ws, ready), fetcher)
}

/// The files the installs this run changes will copy, with their install.
fn bundle_files(ws: &Workspace, ready: &Ready) -> Vec<(Resource, Upload)> {
    let changing: std::collections::BTreeSet<&crate::addr::Address> = ready
        .plan
        .steps
        .iter()
        .flat_map(|s| &s.changes)
        .filter(|c| c.action != Action::NoOp)
        .map(|c| &c.address)
        .collect();
    let mut files = Vec::new();
    for n in ws.in_order(&ready.observation.selected) {
        for r in ws.resources(n, &ready.observation.selection) {
            let crate::desired::Desired::K3sInstall(k) = &r.desired else { continue };
            if changing.contains(&r.address) {
                files.extend(k.uploads().map(|u| (r.clone(), u.clone())));
            }
        }
    }
    files
}

/// Checks each file once (the installs of a run share one bundle): a URL is downloaded at most
/// once per run.
fn check_bundle(files: &[(Resource, Upload)], fetcher: &Fetcher) -> Result<(), OpError> {
    super::preflight::unrecorded_digest(files)?;
    let mut checked = std::collections::BTreeSet::new();
    for (r, u) in files {
        if !checked.insert((u.from.clone(), u.sha256.clone())) {
            continue;
        }
        match &u.from {
            // Checked as it is written into the cache (or read back from it): the installs
            // then take it as checked (`airgap::check` hashes each file once per run).
            Source::Url(url) => {
                let (path, _) =
                    fetcher.fetch(url, &u.sha256).map_err(|e| OpError::Bundle(format!("{}: {e}", r.address)))?;
                crate::providers::airgap::mark_checked(&path, &u.sha256);
            }
            Source::Path(_) => {
                crate::providers::airgap::check(r, u, fetcher.state_dir())
                    .map_err(|e| OpError::Bundle(e.to_string()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::bundle::tests::{sha, state_dir};
    use fabric_testkit::file_server::FileServer as Server;

    const LAB: &str = include_str!("../../tests/data/lab-linux.yaml");
    const IMAGES: &str = "k3s-airgap-images-amd64.tar.zst";

    /// The lab topology with `section`, and a plan of every step in which everything is new
    /// (offline): each K3s host gets an install.
    fn ready(section: &str) -> (Workspace, Ready) {
        let ws = Workspace::new(crate::topology::load_str("t.yaml", format!("{LAB}{section}")).unwrap()).unwrap();
        let sel = Selection::default();
        let plan = super::super::plan::make(&ws, sel.clone(), super::super::plan::Source::Offline).unwrap().plan;
        let selected = ws.select(&sel, |_| true).unwrap();
        let observation = Observation {
            selection: sel,
            selected,
            live: Default::default(),
            orphans: Default::default(),
            report: Default::default(),
            kept: Default::default(),
        };
        (ws, Ready { observation, plan })
    }

    /// Bundle files from URLs: fetched once per run (whatever the number of installs) and
    /// cached, and what the provider then copies is the bytes the server sent; a second run asks
    /// the server nothing; a file that is not the topology's stops the run before anything.
    #[test]
    fn the_preflight_fetches_urls_once_and_refuses_another_file() {
        let (binary, images, script) =
            (b"k3s binary".as_slice(), b"images tarball".as_slice(), b"#!/bin/sh\n".as_slice());
        let server = Server::start(&[("/k3s", binary), (&format!("/{IMAGES}"), images)]);
        let state = state_dir("preflight");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(state.join("install.sh"), script).unwrap();
        let section = |images_sha: &str| {
            format!(
                "k3s_airgap:\n  binary: {{ url: \"{b}/k3s\" }}\n  \
                 images: {{ url: \"{b}/moved/{IMAGES}\" }}\n  \
                 install_script: {{ path: {} }}\n  \
                 digests: {{ v1.33.5+k3s1: {{ binary: {}, images: {images_sha}, install_script: {} }} }}\n",
                state.join("install.sh").display(),
                sha(binary),
                sha(script),
                b = server.base
            )
        };
        let (ws, r) = ready(&section(&sha(images)));
        let installs = bundle_files(&ws, &r);
        assert!(installs.len() >= 6, "two K3s hosts or more: {}", installs.len());
        bundle_preflight(&ws, &r, &Fetcher::direct(&state)).unwrap();
        let once = ["/k3s".to_string(), format!("/moved/{IMAGES}"), format!("/{IMAGES}")];
        assert_eq!(server.requests(), once, "each URL once per run");
        for (res, u) in &installs {
            let want = match u.name.as_str() {
                "k3s" => binary,
                "install.sh" => script,
                _ => images,
            };
            let path = crate::providers::airgap::check(res, u, &state).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), want, "{}", u.name);
            assert!(crate::providers::airgap::times_hashed(&path) <= 1, "{}: hashed once per run at most", u.name);
        }
        // The next run: everything is in the cache.
        bundle_preflight(&ws, &r, &Fetcher::direct(&state)).unwrap();
        assert_eq!(server.requests(), once, "a second run downloads nothing");

        // The server's images are not the topology's: refused, with nothing kept in the cache.
        let other = state_dir("preflight-other");
        let want = "ab".repeat(32);
        let (ws, r) = ready(&section(&want));
        let e = bundle_preflight(&ws, &r, &Fetcher::direct(&other)).unwrap_err();
        assert!(matches!(e, OpError::Bundle(_)));
        let text = e.to_string();
        let says = format!(
            "the K3s bundle file downloaded from {}/moved/{IMAGES} has SHA-256 {}, but the topology says {want}",
            server.base,
            sha(images)
        );
        assert!(text.contains("/command:k3s-install: ") && text.contains(&says), "{text}");
        assert!(text.contains("nothing was copied or run") && text.ends_with("nothing was applied"), "{text}");
        assert!(!crate::providers::bundle::cached(&other, &want).exists());
        let kept: Vec<String> = std::fs::read_dir(other.join("bundle"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(kept, [sha(binary)], "only the binary, whose digest matched");
        for d in [state, other] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    /// A digest not recorded yet (`TODO`, which validate warns about) stops the run
    /// before anything is fetched: the server is never asked.
    #[test]
    fn an_unrecorded_digest_stops_the_run_before_any_fetch() {
        let server = Server::start(&[("/k3s", b"k3s binary".as_slice())]);
        let state = state_dir("pending");
        std::fs::create_dir_all(&state).unwrap();
        let (b, i) = ("ab".repeat(32), "cd".repeat(32));
        let section = format!(
            "k3s_airgap:\n  binary: {{ url: \"{}/k3s\" }}\n  \
             images: {{ url: \"{}/{IMAGES}\" }}\n  install_script: {{ url: \"{}/install.sh\" }}\n  \
             digests: {{ v1.33.5+k3s1: {{ binary: {b}, images: {i}, install_script: TODO }} }}\n",
            server.base, server.base, server.base
        );
        let (ws, r) = ready(&section);
        let e = bundle_preflight(&ws, &r, &Fetcher::direct(&state)).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(
                "the SHA-256 of the bundle's install.sh is not recorded (`TODO`): nothing was fetched, copied or run"
            ),
            "{text}"
        );
        assert!(server.requests().is_empty(), "{:?}", server.requests());
        let _ = std::fs::remove_dir_all(state);
    }
}
