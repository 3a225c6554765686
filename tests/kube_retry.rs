//! Issue 24, item 1, against the API double: what Kubernetes' clients retry is retried, within
//! `transport::retry::KUBE`, and the end state is true either way. The double's faults
//! (`crates/testkit/src/kube_api_faults.rs`) are kube-apiserver's own answers: the throttling
//! filters' plain-text 429 with `Retry-After`, a `TooManyRequests` Status, a 503 Status, a
//! connection dropped before or after the request is handled, a stalled answer.

use fabric::apply::StepWork;
use fabric::catalog::{Catalog, StepGraph};
use fabric::live::observe::{self, Targets};
use fabric::plan::diff;
use fabric::plan::model::Action;
use fabric::topology::Topology;
use fabric::transport::ssh_config::SshConfig;
use fabric_testkit::kube_api::{ExampleFabric, Fault, TestApiServer};
use fabric_testkit::run;

#[path = "support/apply_step.rs"]
mod apply_step;

const STEP: &str = "D.1@sp";

fn topology(f: &ExampleFabric) -> Topology {
    fabric::topology::load_str("t.yaml", f.text.clone()).unwrap().topology
}

/// The step's Kubernetes objects: (plural, name) of each, in the step's order.
fn objects(t: &Topology) -> Vec<(String, String)> {
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    let step = StepWork::alone(&g, t, STEP).unwrap();
    step.resources
        .iter()
        .filter_map(|r| match &r.desired {
            fabric::desired::Desired::Kube(o) => Some((
                fabric::providers::kube::plural(o["kind"].as_str()?),
                o["metadata"]["name"].as_str()?.to_string(),
            )),
            _ => None,
        })
        .collect()
}

/// The step's changes still to make, read live (empty: fully at the new state).
async fn pending(t: &Topology) -> Vec<String> {
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    let step = StepWork::alone(&g, t, STEP).unwrap();
    let targets = Targets::from_topology(t, &SshConfig::default()).unwrap();
    let live = observe::observe(&step.resources, &observe::key_targets(&step.resources), &targets).await;
    step.resources
        .iter()
        .filter_map(|r| {
            let c = diff::change(r, &live).unwrap_or_else(|| panic!("{} unreadable", r.address));
            (c.action != Action::NoOp).then(|| r.address.to_string())
        })
        .collect()
}

/// Objects of fabric's at `s`, by kind and name, less the runs' shared journal (a ConfigMap per
/// run in `fabric-system`, kept on purpose: `fabric runs`).
fn fabrics(s: &TestApiServer) -> Vec<String> {
    s.objects()
        .iter()
        .filter(|o| o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "fabric")
        .filter(|o| o["metadata"]["name"] != "fabric-system" && o["metadata"]["namespace"] != "fabric-system")
        .map(|o| {
            format!("{}/{}", o["kind"].as_str().unwrap_or_default(), o["metadata"]["name"].as_str().unwrap_or_default())
        })
        .collect()
}

/// The non-dry-run server-side applies `s` received for `plural/name`.
fn applies(s: &TestApiServer, plural: &str, name: &str) -> usize {
    let path = format!("/{plural}/{name}?");
    s.requests().iter().filter(|r| r.starts_with("PATCH ") && r.contains(&path) && !r.contains("dryRun=")).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transient_fault_once_and_the_step_is_fully_applied() {
    let f = ExampleFabric::start("kube-retry-once");
    let t = topology(&f);
    // One of each, on reads (plan's and apply's) and on writes.
    f.sp.fault_next("get", "clusterqueues", Fault::Throttled { retry_after_secs: 1 });
    f.sp.fault_next("dryrun-apply", "resourceflavors", Fault::DropBefore);
    f.sp.fault_next("apply", "resourceflavors", Fault::Unavailable);
    f.sp.fault_next("apply", "localqueues", Fault::TooManyRequestsStatus { retry_after_secs: 1 });
    f.sp.fault_next("get", "localqueues", Fault::Stall(std::time::Duration::from_millis(1500)));
    f.sp.fault_next("create", "leases", Fault::DropBefore);
    let r = apply_step::apply_step(&t, &f.dir, STEP, "20261202T0700Z-1").await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(f.sp.faults_left(), 0, "every fault met its request");
    assert_eq!(pending(&t).await, Vec::<String>::new(), "fully at the new state");
    for (plural, name) in objects(&t).iter().filter(|(p, _)| p == "clusterqueues" || p == "localqueues") {
        assert!(applies(&f.sp, plural, name) >= 1, "{plural}/{name} applied");
    }
    std::fs::remove_dir_all(&f.dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_answer_was_lost_is_read_back_not_resent() {
    let f = ExampleFabric::start("kube-retry-lost");
    let t = topology(&f);
    // The first ClusterQueue's apply is made, and its answer lost.
    f.sp.fault_next("apply", "clusterqueues", Fault::DropAfter);
    let r = apply_step::apply_step(&t, &f.dir, STEP, "20261202T0710Z-1").await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(f.sp.faults_left(), 0);
    // fabric read the object back, found its fields there and did not send it again.
    assert_eq!(applies(&f.sp, "clusterqueues", "gpu-interactive"), 1, "{:#?}", f.sp.requests());
    assert_eq!(pending(&t).await, Vec::<String>::new(), "fully at the new state");
    std::fs::remove_dir_all(&f.dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_that_outlasts_the_retries_fails_the_step_and_puts_it_back() {
    let f = ExampleFabric::start("kube-retry-outlast");
    let t = topology(&f);
    let before = fabrics(&f.sp);
    // More 503s than the policy has attempts, on the first LocalQueue: the objects before it in
    // the step were applied and are put back.
    for _ in 0..fabric::transport::retry::KUBE.attempts {
        f.sp.fault_next("apply", "localqueues", Fault::Unavailable);
    }
    let r = apply_step::apply_step(&t, &f.dir, STEP, "20261202T0720Z-1").await;
    let e = r.expect_err("the step fails").to_string();
    assert!(e.contains("503") && e.contains("localqueues") || e.contains("LocalQueue"), "{e}");
    assert_eq!(f.sp.faults_left(), 0, "each attempt met one 503");
    assert_eq!(fabrics(&f.sp), before, "fully back: nothing of the step is left");
    // The next apply, on a healthy API, goes through: no Lease or lock was left behind.
    let r = apply_step::apply_step(&t, &f.dir, STEP, "20261202T0721Z-1").await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(pending(&t).await, Vec::<String>::new());
    std::fs::remove_dir_all(&f.dir).unwrap();
}

#[test]
fn each_retry_is_one_line_under_v_and_none_without() {
    let f = ExampleFabric::start("kube-retry-v");
    let fabric = |args: &[&str]| run::fabric_in(&f.dir, &f.dir.join("topology.yaml"), &f.dir.join("ssh_config"), args);
    // C.5 with what it needs, as tests/kube_plan.rs plans it (the hosts are unreachable here).
    let plan = ["plan", "--step", "C.5", "--with-deps"];
    f.karmada.fault_next("get", "propagationpolicies", Fault::Throttled { retry_after_secs: 1 });
    let o = fabric(&[&plan[..], &["-v"]].concat());
    let text = run::out(&o);
    // (The first read of the kind is prune's list of what fabric made, then the object's get.)
    let karmada: Vec<&str> = text.lines().filter(|l| l.starts_with("fabric: retry: karmada: ")).collect();
    assert_eq!(karmada.len(), 1, "one line per retry: {text}");
    assert!(
        karmada[0].contains(" PropagationPolicy")
            && karmada[0].contains(": attempt 1/5 failed (429 Failed to parse error data: Too many requests, please try again later.); trying again in "),
        "{text}"
    );
    assert!(text.contains("+ karmada/ai/PropagationPolicy/gpu-services"), "the plan is made: {text}");
    f.karmada.fault_next("get", "propagationpolicies", Fault::Throttled { retry_after_secs: 1 });
    let o = fabric(&plan);
    assert!(!run::out(&o).contains("retry:"), "{}", run::out(&o));
    assert_eq!(f.karmada.faults_left(), 0);
    std::fs::remove_dir_all(&f.dir).unwrap();
}
