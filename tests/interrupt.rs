//! SIGINT or SIGTERM during an apply: the step in progress goes back to its rollback point, the
//! journal says so and ends, and the run stops; it is never left half-way (issue "Safe under
//! hostile input and faults", item 6). Against a test API server with simulated controllers:
//! the step waits for a kind that does not come, and the stop arrives during that wait.

use fabric_testkit::kube_api;

use std::time::{Duration, Instant};

use fabric::apply::journal::{Entry, Journal};
use fabric::apply::{self, ApplyError, Options, StepWork, interrupt};
use fabric::catalog::{Catalog, StepGraph};
use fabric::live::observe::{self, Targets};
use fabric::transport::ssh_config::SshConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_a_step_puts_it_back_and_ends_the_journal() {
    let dir = std::env::temp_dir().join(format!("fabric-interrupt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, sp, karmada) = kube_api::fabric_apis(&dir);
    for s in [&franca, &sp, &karmada] {
        s.simulate_controllers(Duration::from_millis(100));
    }
    let text = kube_api::example_topology(&dir);
    // Kueue's kinds never come: the step waits for them after applying its chart.
    sp.set_served("kueue.x-k8s.io", false);
    let l = fabric::topology::load_str("t.yaml", text).unwrap();
    let t = &l.topology;
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    let step = StepWork::alone(&g, t, "D.1@sp").unwrap();
    let targets = Targets::from_topology(t, &SshConfig::default()).unwrap();
    let run = "20261201T071500Z-1";
    let opts = Options {
        run: run.into(),
        state_dir: dir.clone(),
        confirm_timeout: Duration::from_secs(30),
        force_conflicts: false,
        wait_timeout: Duration::from_secs(60),
        lease: Default::default(),
    };
    let live = observe::observe(&step.resources, &observe::key_targets(&step.resources), &targets).await;
    let mut j = Journal::create(&dir, run).unwrap();
    let started = Instant::now();
    let stop = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        interrupt::request();
    };
    let (r, ()) =
        tokio::join!(apply::run(t, std::slice::from_ref(&step), &targets, live, &opts, &mut j, &|_| {}), stop);
    interrupt::clear();
    let err = r.expect_err("the run stops");
    assert!(matches!(err, ApplyError::Reverted { .. }), "{err}");
    assert!(err.to_string().contains("interrupted while waiting"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "stopped at once, not at the wait's end: {:?}",
        started.elapsed()
    );
    // Put back: the chart the step had applied is gone.
    assert!(sp.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue").is_none(), "reverted");
    // The journal says so and ends.
    let entries = Journal::read(&j.path).unwrap();
    assert!(
        entries.iter().any(
            |e| matches!(e, Entry::Reverted { step, reason, .. } if step == "D.1@sp" && reason.contains("interrupted"))
        ),
        "{entries:?}"
    );
    assert!(matches!(entries.last(), Some(Entry::End { ok: false, .. })), "{entries:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
