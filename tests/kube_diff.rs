//! Issue 23, item 2: the plan after an apply is clean on an API server that canonicalizes
//! quantities, fills defaults and allocates Service addresses, and after Kueue admitted D.4's
//! Job (Kueue's merge patch takes `spec.suspend` from fabric). fabric compares as `kubectl diff`
//! does: the server's dry-run answer against the live object, on the fields fabric's field
//! manager owns (`src/providers/kube.rs`); an apply that changes the Job leaves `suspend` to
//! Kueue unless forced. The API double's behaviours are in
//! `crates/testkit/src/kube_api.md`, "Built-in kinds".

use fabric::apply::StepWork;
use fabric::catalog::{Catalog, StepGraph};
use fabric::live::observe::{self, Targets};
use fabric::plan::diff;
use fabric::plan::model::Action;
use fabric::topology::Topology;
use fabric::transport::ssh_config::SshConfig;
use fabric_testkit::kube_api::{ExampleFabric, TestApiServer};
use fabric_testkit::{kueue, run};
use serde_json::{Value, json};

#[path = "support/apply_step.rs"]
mod apply_step;

/// The Kubernetes steps that need no SSH host: applied here one after the other, as apply does
/// (their dependencies on the hosts' steps are not applied: no host is reachable here).
const APPLIED: &[&str] = &["C.1", "D.1@franca", "D.1@sp", "D.2", "D.3", "D.4", "D.5@franca", "D.5@sp"];

/// The steps `fabric plan` is run on: their own dependencies (C.1, D.1) are among `APPLIED`,
/// and a plan refuses to run when a dependency has pending changes, so it checks them too.
const PLANNED: &[&str] = &["D.2", "D.3", "D.4", "D.5@franca", "D.5@sp"];

fn plan_args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut a = vec!["plan"];
    for s in PLANNED {
        a.extend(["--step", s]);
    }
    a.extend(extra);
    a
}

/// fabric applies `APPLIED` through its apply engine.
async fn apply_steps(f: &ExampleFabric, run: &str) -> (Topology, Vec<StepWork>) {
    let t = fabric::topology::load_str("t.yaml", f.text.clone()).unwrap().topology;
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &t).unwrap();
    let mut steps = Vec::new();
    for (i, key) in APPLIED.iter().enumerate() {
        apply_step::apply_step(&t, &f.dir, key, &format!("{run}{i:02}Z-1"))
            .await
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        steps.push(StepWork::alone(&g, &t, key).unwrap());
    }
    (t, steps)
}

/// Every change the plan of `steps` has (address, action, diff), read live.
async fn changes(t: &Topology, steps: &[StepWork]) -> Vec<String> {
    let targets = Targets::from_topology(t, &SshConfig::default()).unwrap();
    let mut out = Vec::new();
    for step in steps {
        let live = observe::observe(&step.resources, &observe::key_targets(&step.resources), &targets).await;
        for r in &step.resources {
            let c = diff::change(r, &live).unwrap_or_else(|| panic!("{} unreadable", r.address));
            if c.action != Action::NoOp {
                out.push(format!("{} {:?}\n{}", r.address, c.action, c.diff.unwrap_or_default()));
            }
        }
    }
    out
}

fn fabric(f: &ExampleFabric, args: &[&str]) -> std::process::Output {
    run::fabric_in(&f.dir, &f.dir.join("topology.yaml"), &f.dir.join("ssh_config"), args)
}

fn job(s: &TestApiServer) -> Value {
    s.object("batch/v1", "Job", Some("batch"), "fabric-multikueue-test").expect("D.4's Job at the manager")
}

fn manager_owns(obj: &Value, manager: &str, field: &[&str]) -> bool {
    obj["metadata"]["managedFields"].as_array().unwrap().iter().any(|e| {
        e["manager"] == manager
            && e.get("subresource").is_none()
            && field.iter().try_fold(&e["fieldsV1"], |at, f| at.get(format!("f:{f}"))).is_some()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_is_clean_after_apply_and_after_kueue_admitted_the_test_job() {
    let f = ExampleFabric::start("kube-diff");
    let (t, steps) = apply_steps(&f, "20261202T0600").await;

    // What the server did with fabric's objects: canonical quantities, defaults.
    let j = job(&f.franca);
    let c = &j["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], json!("1"), "canonical quantity: {j:#}");
    assert_eq!(c["terminationMessagePolicy"], "File", "container defaults: {j:#}");
    for (field, v) in [("completions", json!(1)), ("podReplacementPolicy", json!("TerminatingOrFailed"))] {
        assert_eq!(j["spec"][field], v, "Job defaults: {j:#}");
    }
    assert_eq!(j["spec"]["suspend"], true);

    // 1. The next plan has nothing to do.
    let left = changes(&t, &steps).await;
    assert!(left.is_empty(), "clean after apply: {left:#?}");
    let o = fabric(&f, &plan_args(&["--detailed-exitcode"]));
    assert_eq!(o.status.code(), Some(0), "clean after apply:\n{}", run::out(&o));
    // fabric still owns `suspend`: nothing is left to a controller yet.
    assert!(!run::out(&o).contains("left to"), "{}", run::out(&o));

    // 2. Kueue admits D.4's Job (MultiKueue dispatches it to sp): `kueue` now owns
    // `spec.suspend`, false. The plan leaves it to Kueue.
    for s in [&f.franca, &f.sp] {
        s.hold("Job", true);
    }
    let mut events = Vec::new();
    for _ in 0..10 {
        let ev = kueue::reconcile(&[("franca", &f.franca), ("sp", &f.sp)]);
        if ev.is_empty() {
            break;
        }
        events.extend(ev);
    }
    assert!(events.iter().any(|e| e.contains("dispatched to sp")), "{events:#?}");
    let j = job(&f.franca);
    assert_eq!(j["spec"]["suspend"], false, "admitted: {j:#}");
    assert!(manager_owns(&j, "kueue", &["spec", "suspend"]), "Kueue owns suspend: {j:#}");
    assert!(!manager_owns(&j, "fabric", &["spec", "suspend"]), "fabric no longer does: {j:#}");
    let left = changes(&t, &steps).await;
    assert!(left.is_empty(), "clean after Kueue admitted the Job: {left:#?}");
    // Unchanged resources are hidden by default: shown here to read the Job's line.
    let o = fabric(&f, &plan_args(&["--detailed-exitcode", "--show-unchanged"]));
    assert_eq!(o.status.code(), Some(0), "clean after Kueue admitted the Job:\n{}", run::out(&o));
    // The plan says what it left to Kueue, under the Job's line and only there.
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let job_line = text.lines().position(|l| l.contains("Job/fabric-multikueue-test")).expect("the Job's line");
    assert_eq!(text.lines().nth(job_line + 1).map(str::trim), Some("spec.suspend: left to kueue"), "{text}");
    assert_eq!(text.matches("left to").count(), 1, "{text}");
    let o = fabric(&f, &plan_args(&["--format", "json", "--show-unchanged"]));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON plan");
    let left_json: Vec<&serde_json::Value> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["changes"].as_array().unwrap())
        .filter(|c| c.get("left_to_controllers").is_some())
        .collect();
    assert_eq!(left_json.len(), 1, "{plan:#}");
    assert!(left_json[0]["address"].as_str().unwrap().contains("Job/fabric-multikueue-test"), "{plan:#}");
    assert_eq!(left_json[0]["left_to_controllers"], json!(["spec.suspend: left to kueue"]));

    // 2b. An apply that does change the Job (here: a new backoffLimit, through the provider)
    // leaves `suspend` to Kueue: no conflict, and the Job keeps running.
    let access = fabric::providers::kube::KubeAccess::new(f.dir.join("franca.yaml").to_str().unwrap(), Some("franca"));
    let client = fabric::providers::kube::client(&fabric::addr::Target::cluster("franca"), &access).await.unwrap();
    let step = steps
        .iter()
        .find(|s| s.resources.iter().any(|r| r.address.to_string().contains("Job/fabric-multikueue-test")))
        .unwrap();
    let mut changed =
        step.resources.iter().find_map(|r| r.kube_object().filter(|o| o["kind"] == "Job").cloned()).unwrap();
    changed["spec"]["backoffLimit"] = json!(1);
    fabric::providers::kube::apply(&client, &changed, false).await.expect("no conflict with Kueue's suspend");
    let j = job(&f.franca);
    assert_eq!((j["spec"]["backoffLimit"].clone(), j["spec"]["suspend"].clone()), (json!(1), json!(false)), "{j:#}");
    let left = changes(&t, &steps).await;
    assert_eq!(left.len(), 1, "backoffLimit differs from the topology now: {left:#?}");
    assert!(left[0].contains("-  backoffLimit: 1") && left[0].contains("+  backoffLimit: 0"), "{left:#?}");
    assert!(
        !left[0].contains("-  suspend") && !left[0].contains("+  suspend"),
        "Kueue's field is no change: {left:#?}"
    );
    // Forced (`--force-conflicts`), fabric takes everything back, suspend included.
    fabric::providers::kube::apply(
        &client,
        &step.resources.iter().find_map(|r| r.kube_object().filter(|o| o["kind"] == "Job").cloned()).unwrap(),
        true,
    )
    .await
    .unwrap();
    assert_eq!(job(&f.franca)["spec"]["suspend"], true);

    // 3. A field fabric owns is still compared: a hand edit of a LocalQueue is a change, shown
    // in fabric's own form.
    let mut lq = f.sp.object("kueue.x-k8s.io/v1beta2", "LocalQueue", Some("batch"), "batch").expect("sp's batch queue");
    lq["spec"]["clusterQueue"] = json!("gpu-interactive");
    for k in ["managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"] {
        lq["metadata"].as_object_mut().unwrap().remove(k);
    }
    f.sp.put_raw_as(lq, "kubectl");
    let left = changes(&t, &steps).await;
    assert_eq!(left.len(), 1, "{left:#?}");
    assert!(
        left[0].contains("-  clusterQueue: gpu-interactive") && left[0].contains("+  clusterQueue: gpu-batch"),
        "{left:#?}"
    );
}
