//! Waits after apply against test API servers running simulated controllers: a step that
//! installs a chart and then uses the chart's kinds waits until the API serves them (a plan
//! before that is not refused); a chart whose install Job fails fails the step, which is
//! reverted; a kind that never comes times out with the reason.

use fabric_testkit::{kube_api, run};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fabric::apply::journal::Journal;
use fabric::apply::{self, Options, StepWork};
use fabric::catalog::{Catalog, StepGraph};
use fabric::live::observe::{self, Targets};
use fabric::transport::ssh_config::SshConfig;

const KUEUE: &str = "kueue.x-k8s.io";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_wait_for_their_kinds_and_charts() {
    let dir = std::env::temp_dir().join(format!("fabric-kube-waits-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, sp, karmada) = kube_api::fabric_apis(&dir);
    for s in [&franca, &sp, &karmada] {
        s.simulate_controllers(Duration::from_millis(100));
    }
    let text = kube_api::example_topology(&dir);
    std::fs::write(dir.join("topology.yaml"), &text).unwrap();
    // No SSH host of the example exists here: every host name goes to a closed loopback port.
    std::fs::write(dir.join("ssh_config"), "Host *\n    HostName 127.0.0.1\n    Port 9\n    ConnectTimeout 2\n")
        .unwrap();
    // Kueue is not installed in sp yet: its kinds are not served until its chart runs.
    sp.set_served(KUEUE, false);

    // 1. The plan of D.1 at sp is not refused for kinds the step's chart will bring (its
    // dependencies' hosts are unreachable here and named so).
    let args = ["plan", "--step", "D.1@sp", "--with-deps"];
    let o = run::fabric_in(&dir, &dir.join("topology.yaml"), &dir.join("ssh_config"), &args);
    let plan = run::out(&o);
    assert!(plan.contains("+ cluster.sp/ClusterQueue/gpu-batch"), "{plan}");
    assert!(!plan.contains("could not find the requested resource"), "an unserved kind is not a refusal: {plan}");

    let l = fabric::topology::load_str("t.yaml", text).unwrap();
    let t = &l.topology;
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    let step = StepWork::alone(&g, t, "D.1@sp").unwrap();
    let targets = Targets::from_topology(t, &SshConfig::default()).unwrap();
    let opts = |run: &str, wait: u64| Options {
        run: run.into(),
        state_dir: dir.clone(),
        confirm_timeout: Duration::from_secs(30),
        force_conflicts: false,
        wait_timeout: Duration::from_secs(wait),
        lease: Default::default(),
    };
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let apply = |run: &'static str, wait: u64| {
        let (step, targets, lines) = (step.clone(), targets.clone(), lines.clone());
        let opts = opts(run, wait);
        async move {
            let live = observe::observe(&step.resources, &observe::key_targets(&step.resources), &targets).await;
            let mut j = Journal::create(&opts.state_dir, run).unwrap();
            let progress = move |l: &str| lines.lock().unwrap().push(l.to_string());
            apply::run(t, std::slice::from_ref(&step), &targets, live, &opts, &mut j, &progress).await
        }
    };

    // 2. The chart's install Job fails: the step fails with the Job's reason and is reverted.
    sp.fail_helm_job("kueue");
    let err = apply("run-1", 10).await.expect_err("the install job fails").to_string();
    assert!(err.contains("helm-install-kueue failed") && err.contains("was reverted"), "{err}");
    assert!(sp.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue").is_none(), "reverted");

    // 3. A kind that never comes: the wait runs out and says what it waited for.
    let err = apply("run-2", 2).await.expect_err("kueue never served").to_string();
    assert!(err.contains("kind ResourceFlavor (kueue.x-k8s.io/v1beta2): not ready after 2 s"), "{err}");
    assert!(err.contains("not served yet"), "{err}");

    // 4. The kinds come while the step waits (as the chart installs its CRDs): the step goes on,
    // and waits until the queues are Active.
    lines.lock().unwrap().clear();
    // (Served once the step is seen waiting for it, not after a fixed time: how long the chart
    // waits before it take depends on the machine's load.)
    let flip = async {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while !lines.lock().unwrap().iter().any(|l| l.contains("not served yet"))
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sp.set_served(KUEUE, true);
    };
    let (r, ()) = tokio::join!(apply("run-3", 20), flip);
    let log = lines.lock().unwrap().join("\n");
    r.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(log.contains("waiting for kind ResourceFlavor (kueue.x-k8s.io/v1beta2): not served yet"), "{log}");
    assert!(
        log.contains("cluster.sp/kube-system/HelmChart/kueue ready: install job helm-install-kueue complete"),
        "{log}"
    );
    assert!(log.contains("cluster.sp/ClusterQueue/gpu-batch ready: Active=True"), "{log}");
    assert!(log.contains("cluster.sp/ai/LocalQueue/interactive ready: Active=True"), "{log}");
    std::fs::remove_dir_all(&dir).unwrap();
}
