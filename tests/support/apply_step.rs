//! Applying one step's instance to test API servers as `fabric apply` does: observe, then the
//! engine's `apply::run` with a fresh journal. Shared by the tests that include it with
//! `#[path = "support/apply_step.rs"] mod apply_step;`.

use std::path::Path;
use std::time::Duration;

use fabric::apply::journal::Journal;
use fabric::apply::{self, ApplyError, Hooks, Options, StepWork};
use fabric::catalog::{Catalog, StepGraph};
use fabric::live::observe::{self, Targets};
use fabric::topology::Topology;
use fabric::transport::ssh_config::SshConfig;

/// Applies step instance `key` (`D.1@sp`) of `t`, journalled in `dir` as run `run`.
pub async fn apply_step(t: &Topology, dir: &Path, key: &str, run: &str) -> Result<Vec<String>, ApplyError> {
    apply_step_with_hooks(t, dir, key, run, Hooks::lines(&|_| {})).await
}

/// [`apply_step`] with the run's hooks: its progress lines, events and lock timeout (not every
/// test that includes this file uses it).
#[allow(dead_code)]
pub async fn apply_step_with_hooks(
    t: &Topology,
    dir: &Path,
    key: &str,
    run: &str,
    hooks: Hooks<'_>,
) -> Result<Vec<String>, ApplyError> {
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    let step = StepWork::alone(&g, t, key).unwrap();
    let targets = Targets::from_topology(t, &SshConfig::default()).unwrap();
    let live = observe::observe(&step.resources, &observe::key_targets(&step.resources), &targets).await;
    let opts = Options {
        run: run.into(),
        state_dir: dir.to_path_buf(),
        confirm_timeout: Duration::from_secs(30),
        force_conflicts: false,
        wait_timeout: Duration::from_secs(60),
        lease: Default::default(),
    };
    let mut j = Journal::create(dir, run).unwrap();
    apply::run_over(t, std::slice::from_ref(&step), &targets, live, observe::Kept::new(), &opts, &mut j, hooks).await
}
