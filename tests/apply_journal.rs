//! An apply whose journal cannot be written changes nothing that the journal does not hold
//! (issue "Safe under hostile input and faults": a full state directory; a read-only one is
//! in `apply_lab`, where an apply can run from the command line without dependencies). The
//! journal lives on a real file system made full or read-only for the test (a tmpfs), and the
//! step (D.1 at sp: Kueue's chart and queues) is applied to a test API server with simulated
//! controllers, whose objects show what stayed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fabric::apply::journal::{Entry, Journal};
use fabric::apply::{self, ApplyError, Options, StepWork};
use fabric::catalog::{Catalog, StepGraph};
use fabric::live::observe::{self, Targets};
use fabric::transport::ssh_config::SshConfig;
use fabric_testkit::kube_api::{self, TestApiServer};
use fabric_testkit::lab::require_root;
use fabric_testkit::tmpfs::Tmpfs;

/// The run all tests use; its id is fixed, so its journal lines have the same length each time.
const RUN: &str = "20261201T081500Z-1";

/// Three test API servers (only sp's is used) and the example topology pointing at them.
struct Env {
    dir: PathBuf,
    _franca: TestApiServer,
    sp: TestApiServer,
    _karmada: TestApiServer,
    text: String,
}

fn env(name: &str) -> Env {
    let dir = std::env::temp_dir().join(format!("fabric-apply-journal-env-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, sp, karmada) = kube_api::fabric_apis(&dir);
    sp.simulate_controllers(Duration::from_millis(50));
    let text = kube_api::example_topology(&dir);
    Env { dir, _franca: franca, sp, _karmada: karmada, text }
}

impl Env {
    /// Applies D.1 at sp (it touches sp's cluster only) with `journal`, whose start line the
    /// caller wrote.
    async fn apply(&self, journal: &mut Journal) -> Result<Vec<String>, ApplyError> {
        let l = fabric::topology::load_str("t.yaml", self.text.clone()).unwrap();
        let t = &l.topology;
        let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
        let step = StepWork::alone(&g, t, "D.1@sp").unwrap();
        let targets = Targets::from_topology(t, &SshConfig::default()).unwrap();
        let opts = Options {
            run: RUN.into(),
            state_dir: self.dir.clone(),
            confirm_timeout: Duration::from_secs(30),
            force_conflicts: false,
            wait_timeout: Duration::from_secs(60),
            lease: Default::default(),
        };
        let live = observe::observe(&step.resources, &observe::key_targets(&step.resources), &targets).await;
        apply::run(t, std::slice::from_ref(&step), &targets, live, &opts, journal, &|_| {}).await
    }

    /// Whether the step left its chart in the cluster.
    fn has_chart(&self) -> bool {
        self.sp.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue").is_some()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A journal in `state` and its start line, whose `user` pads it to `start` bytes.
fn journal(state: &Path, start: usize) -> Journal {
    let mut j = Journal::create(state, RUN).unwrap();
    let line = |user: &str| Entry::Start {
        run: RUN.into(),
        fabric: "t".into(),
        topology_digest: "d".into(),
        user: user.into(),
    };
    let bare = serde_json::to_string(&line("")).unwrap().len() + 1;
    j.record(&line(&"u".repeat(start - bare))).unwrap();
    j
}

/// The lengths of a successful run's `begin` and `done` lines.
async fn line_lengths() -> (usize, usize) {
    let e = env("measure");
    let mut j = journal(&e.dir.join("state"), 200);
    e.apply(&mut j).await.expect("applies with room on the disk");
    assert!(e.has_chart());
    let text = std::fs::read_to_string(&j.path).unwrap();
    let len = |event: &str| {
        text.lines().find(|l| l.starts_with(&format!("{{\"event\":\"{event}\""))).map(|l| l.len() + 1).unwrap()
    };
    (len("begin"), len("done"))
}

/// The disk fills at the step's rollback point (`begin`), and, in a second run, at its end
/// (`done`, after the change is made and confirmed). In the first case nothing is applied; in
/// the second the change is put back, since the journal could not record it. Either way the
/// journal on disk reads back whole (no torn line) and the run says what happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_state_directory_leaves_nothing_the_journal_does_not_hold() {
    require_root();
    let (begin, done) = line_lengths().await;
    const PAGE: usize = 4096;
    let cap = (200 + begin + done).div_ceil(PAGE) * PAGE + PAGE;

    // 1. `begin` does not fit: the start line leaves room for a few bytes only.
    let fs = Tmpfs::mount("journal-begin", &cap.to_string());
    let e = env("begin");
    let mut j = journal(&fs.0, cap - 10);
    let err = e.apply(&mut j).await.expect_err("no rollback point, no change");
    assert!(matches!(err, ApplyError::Journal { .. }), "{err}");
    assert!(err.to_string().contains("No space left on device"), "{err}");
    assert!(!e.has_chart(), "nothing is applied without its rollback point");
    let entries = Journal::read(&j.path).unwrap();
    assert!(matches!(entries.as_slice(), [Entry::Start { .. }]), "{entries:?}");
    drop(fs);

    // 2. `done` does not fit: start and begin leave all but one byte of it.
    let fs = Tmpfs::mount("journal-done", &cap.to_string());
    let e = env("done");
    let mut j = journal(&fs.0, cap - begin - (done - 1));
    let err = e.apply(&mut j).await.expect_err("an unrecorded change is not kept");
    let text = err.to_string();
    assert!(matches!(err, ApplyError::Reverted { .. }), "{text}");
    assert!(text.contains("step D.1@sp failed and was reverted: confirmed, but not recorded"), "{text}");
    assert!(text.contains("No space left on device"), "{text}");
    assert!(!e.has_chart(), "put back");
    // The partial `done` was cut off: the journal holds the rollback point and nothing torn.
    let on_disk = std::fs::read_to_string(&j.path).unwrap();
    assert!(on_disk.ends_with('\n'), "no torn line");
    // (The run's end, shorter than `done`, may have fit.)
    let entries = Journal::read(&j.path).unwrap();
    assert!(
        matches!(entries.as_slice(), [Entry::Start { .. }, Entry::Begin { .. }, ..])
            && entries[2..].iter().all(|e| matches!(e, Entry::End { ok: false, .. })),
        "{entries:?}"
    );
}
