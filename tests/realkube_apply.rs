//! Issue 34, items 2–4: fabric's Kubernetes steps applied to real control planes, one per site
//! (`fabric_testkit::realkube`): Kubernetes v1.33.5's kube-apiserver on kine/SQLite with its
//! controller manager and scheduler, K3s's own helm-controller v0.16.13 turning fabric's
//! HelmCharts into install Jobs, the real Helm library installing the pinned chart archives of
//! `../shared/specs/charts` with fabric's values (so the CRDs are the pinned releases' own), and
//! the real Kueue v0.15.2 manager of each site. kwok plays the kubelets.
//!
//! Which part is whose: helm-controller makes the Job and its values Secret exactly as on K3s;
//! the klipper stand-in (`tests/realkube/helm`) is only the Job's container (`helm install` or
//! `upgrade` with the Job's arguments and values files, the chart taken from the local folder
//! instead of a registry); kwok runs every other pod (nothing in it runs: a Deployment of the
//! Karmada chart is Available, a Job's pod Succeeds); the Kueue manager runs out of cluster with
//! the configuration the chart rendered (`tests/realkube/kube/kueue.go` says what it changes).
//!
//! The lab topology is the example's two sites on loopback addresses (127.0.10.0/23 for Franca,
//! 127.0.12.0/23 for SP, the example's 192.168.0.0/23 and 192.168.2.0/23 moved there), each API
//! server at its `api_address` with a free port as `api_port`, so that the MultiKueue worker
//! kubeconfig fabric writes (`https://api_address:api_port`) reaches SP's real API server.

use std::sync::OnceLock;

use fabric::apply::StepWork;
use fabric::catalog::{Catalog, StepGraph};
use fabric::live::observe::{self, Targets};
use fabric::plan::diff;
use fabric::plan::model::Action;
use fabric::transport::ssh_config::SshConfig;
use serde_json::{Value, json};
use tokio::sync::MutexGuard;

#[path = "support/apply_step.rs"]
mod apply_step;
#[path = "support/realkube_lab.rs"]
mod realkube_lab;

use realkube_lab::{APPLIED, Lab, PLANNED, apply_all, fabric};

/// The lab with `APPLIED` applied, once for all the tests of this binary, and this test's turn:
/// a test that edits what fabric applied puts it back before the next one reads.
async fn applied() -> (MutexGuard<'static, ()>, &'static Lab) {
    static LAB: OnceLock<Lab> = OnceLock::new();
    static APPLY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let turn = TURN.lock().await;
    let l = LAB.get_or_init(|| Lab::start("realkube"));
    APPLY.get_or_init(|| apply_all(l)).await;
    (turn, l)
}

fn plan_args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut a = vec!["plan"];
    for s in PLANNED {
        a.extend(["--step", s]);
    }
    a.extend(extra);
    a
}

#[tokio::test(flavor = "multi_thread")]
async fn kubernetes_steps_apply_to_real_api_servers_and_plan_clean_after() {
    let (_turn, l) = applied().await;

    // The charts fabric's HelmCharts name were installed by the real Helm library: their own CRDs
    // are served (Kueue's from its templates, at the pinned release).
    for (site, name) in [(&l.franca, "franca"), (&l.sp, "sp")] {
        let crd =
            site.get("crd", "clusterqueues.kueue.x-k8s.io", None).unwrap_or_else(|| panic!("Kueue's CRD at {name}"));
        assert_eq!(crd["metadata"]["labels"]["app.kubernetes.io/managed-by"], "Helm", "{name}: {crd}");
        let job = site.get("job", "helm-install-kueue", Some("kube-system")).expect("helm-controller's install Job");
        assert_eq!(job["status"]["succeeded"], 1, "{name}: {}", job["status"]);
    }

    // Nothing left to do: the plan of every applied step, read from the real servers, is clean.
    let out = fabric(l, &plan_args(&["--detailed-exitcode"]));
    assert_eq!(
        out.status.code(),
        Some(0),
        "plan after apply:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A one-line change of the topology plans exactly the object it changes, read against the real
/// servers: Franca's dispatching queue's `gpu_quota` (2 → 1) changes its ClusterQueue (D.3), and
/// nothing else of the planned steps.
#[tokio::test(flavor = "multi_thread")]
async fn a_one_line_change_plans_exactly_its_object() {
    let (_turn, l) = applied().await;
    let line = "      - name: gpu-batch         # the MultiKueue dispatching queue: Jobs in batch/batch run in SP (see multikueue below)\n        gpu_quota: 2\n";
    assert!(l.text.contains(line), "the example's dispatching queue moved");
    let changed = l.text.replace(line, &line.replace("gpu_quota: 2", "gpu_quota: 1"));
    let path = l.dir.join("changed.yaml");
    std::fs::write(&path, changed).unwrap();
    let args = plan_args(&["--format", "json", "--detailed-exitcode"]);
    let out = fabric_testkit::run::fabric_in(&l.dir, &path, &l.dir.join("ssh_config"), &args);
    assert_eq!(out.status.code(), Some(2), "changes: {}", String::from_utf8_lossy(&out.stderr));
    let plan: Value = serde_json::from_slice(&out.stdout).expect("the JSON plan");
    let changes: Vec<(String, String)> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["changes"].as_array().cloned().unwrap_or_default())
        .filter(|r| r["action"] != "no-op")
        .map(|r| {
            (
                r["address"].as_str().unwrap_or_default().to_string(),
                r["action"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(changes, vec![("cluster.franca/ClusterQueue/gpu-batch".to_string(), "update".to_string())], "{plan}");
}

/// Every change the plan of the applied steps has (address, action, diff), read live.
async fn changes(l: &Lab) -> Vec<String> {
    let t = l.topology();
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &t).unwrap();
    let targets = Targets::from_topology(&t, &SshConfig::default()).unwrap();
    let mut out = Vec::new();
    for key in APPLIED {
        let step = StepWork::alone(&g, &t, key).unwrap();
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

/// D.4's Job at Franca with its managed fields (kubectl hides them unless asked).
fn d4_job(l: &Lab) -> Value {
    let args = ["get", "job", "fabric-multikueue-test", "-n", "batch", "-o", "json", "--show-managed-fields"];
    serde_json::from_str(&l.franca.kubectl_ok(&args)).expect("kubectl's JSON")
}

/// The managers of field `path` of `obj` (its managed fields, the main resource only).
fn managers_of(obj: &Value, path: &[&str]) -> Vec<String> {
    let entries = obj["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    entries
        .iter()
        .filter(|e| e.get("subresource").is_none())
        .filter(|e| path.iter().try_fold(&e["fieldsV1"], |at, f| at.get(format!("f:{f}"))).is_some())
        .map(|e| e["manager"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Issue 23, item 2, on the real servers: after Kueue admitted D.4's Job (MultiKueue dispatched
/// it to SP, where it completed), Kueue's manager owns its `spec.suspend` and the plan is still
/// clean: fabric compares the server's dry-run answer with the live object on the fields its own
/// field manager owns, as `kubectl diff` does (`src/providers/kube.rs`), and says what it left to
/// the controller. An apply that changes the Job leaves `suspend` to Kueue unless forced; a hand
/// edit of a field fabric owns is a change, shown in fabric's own form.
#[tokio::test(flavor = "multi_thread")]
async fn the_plan_leaves_kueues_fields_to_kueue_and_sees_a_hand_edit() {
    let (_turn, l) = applied().await;
    // D.4's Job, dispatched by MultiKueue to SP, completed there (its status copied back).
    let complete = |j: &Value| {
        j["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Complete" && c["status"] == "True"))
    };
    l.franca.wait_until(90, "D.4's Job Complete", |_| complete(&d4_job(l)));
    let j = d4_job(l);
    // What the server did with fabric's objects: canonical quantities, defaults.
    let c = &j["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], json!("1"), "canonical quantity: {j:#}");
    assert_eq!(c["terminationMessagePolicy"], "File", "container defaults: {j:#}");
    for (field, v) in [("completions", json!(1)), ("podReplacementPolicy", json!("TerminatingOrFailed"))] {
        assert_eq!(j["spec"][field], v, "Job defaults: {j:#}");
    }
    assert_eq!(j["spec"]["suspend"], false, "admitted: {j:#}");
    let owners = managers_of(&j, &["spec", "suspend"]);
    assert!(
        !owners.is_empty() && !owners.iter().any(|m| m == "fabric"),
        "Kueue owns suspend, fabric no longer: {owners:?} in {:#}",
        j["metadata"]["managedFields"]
    );
    let kueue = owners[0].clone();

    let left = changes(l).await;
    assert!(left.is_empty(), "clean after Kueue admitted the Job: {left:#?}");
    // Unchanged resources are hidden by default: shown here to read the Job's line.
    let o = fabric(l, &plan_args(&["--detailed-exitcode", "--show-unchanged"]));
    let text = fabric_testkit::run::out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    // The plan says what it left to Kueue, under the Job's line and only there.
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let job_line = stdout.lines().position(|l| l.contains("Job/fabric-multikueue-test")).expect("the Job's line");
    let expected = format!("spec.suspend: left to {kueue}");
    assert_eq!(stdout.lines().nth(job_line + 1).map(str::trim), Some(expected.as_str()), "{stdout}");
    assert_eq!(stdout.matches("left to").count(), 1, "{stdout}");
    let o = fabric(l, &plan_args(&["--format", "json", "--show-unchanged"]));
    let plan: Value = serde_json::from_slice(&o.stdout).expect("JSON plan");
    let left_json: Vec<&Value> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["changes"].as_array().unwrap())
        .filter(|c| c.get("left_to_controllers").is_some())
        .collect();
    assert_eq!(left_json.len(), 1, "{plan:#}");
    assert!(left_json[0]["address"].as_str().unwrap().contains("Job/fabric-multikueue-test"), "{plan:#}");
    assert_eq!(left_json[0]["left_to_controllers"], json!([expected]));

    // An apply that does change the Job (a new backoffLimit, through the provider) leaves
    // `suspend` to Kueue: no conflict. Forced (`--force-conflicts`), fabric takes everything back.
    let t = l.topology();
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &t).unwrap();
    let rendered = StepWork::alone(&g, &t, "D.4")
        .unwrap()
        .resources
        .iter()
        .find_map(|r| r.kube_object().filter(|o| o["kind"] == "Job").cloned())
        .expect("D.4's Job");
    let kubeconfig = l.dir.join("franca").join("kubeconfig");
    let access = fabric::providers::kube::KubeAccess::new(kubeconfig.to_str().unwrap(), Some("franca"));
    let client = fabric::providers::kube::client(&fabric::addr::Target::cluster("franca"), &access).await.unwrap();
    let mut changed = rendered.clone();
    changed["spec"]["backoffLimit"] = json!(1);
    fabric::providers::kube::apply(&client, &changed, false).await.expect("no conflict with Kueue's suspend");
    let j = d4_job(l);
    assert_eq!((j["spec"]["backoffLimit"].clone(), j["spec"]["suspend"].clone()), (json!(1), json!(false)), "{j:#}");
    let left = changes(l).await;
    assert_eq!(left.len(), 1, "backoffLimit differs from the topology now: {left:#?}");
    assert!(left[0].contains("-  backoffLimit: 1") && left[0].contains("+  backoffLimit: 0"), "{left:#?}");
    assert!(
        !left[0].contains("-  suspend") && !left[0].contains("+  suspend"),
        "Kueue's field is no change: {left:#?}"
    );
    fabric::providers::kube::apply(&client, &rendered, true).await.expect("forced apply");
    let j = d4_job(l);
    assert_eq!(managers_of(&j, &["spec", "suspend"]), ["fabric"], "{j:#}");

    // A field fabric owns is still compared: a hand edit of SP's batch quota (a LocalQueue's
    // `clusterQueue` is immutable in Kueue's CRD) is a change, shown in fabric's own form;
    // applying D.1@sp again puts it back.
    let quota = r#"[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/2/nominalQuota","value":1}]"#;
    l.sp.kubectl_ok(&["patch", "clusterqueue", "gpu-batch", "--type=json", "-p", quota]);
    let left: Vec<String> =
        changes(l).await.into_iter().filter(|c| !c.contains("Job/fabric-multikueue-test")).collect();
    assert_eq!(left.len(), 1, "{left:#?}");
    let has = |sign: char, text: &str| left[0].lines().any(|l| l.starts_with(sign) && l.contains(text));
    assert!(left[0].starts_with("cluster.sp/ClusterQueue/gpu-batch"), "{left:#?}");
    // (The server keeps the quota as the string Kueue's CRD stores; fabric shows its own 2.)
    assert!(has('-', "nominalQuota: \"1\"") && has('+', "nominalQuota: 2"), "{left:#?}");
    // Applying D.1@sp again without force is the real server's conflict with the hand edit
    // (`resourceGroups` is an atomic list), named, and the step is reverted; forced, as
    // `--force-conflicts` does, fabric takes the quota back, for the other tests of this lab.
    let e = apply_step::apply_step(&t, &l.dir, "D.1@sp", "20261206T020000Z-1").await.expect_err("a conflict");
    let e = e.to_string();
    assert!(e.contains("409") && e.contains("kubectl-patch") && e.contains(".spec.resourceGroups"), "{e}");
    let cq = StepWork::alone(&g, &t, "D.1@sp")
        .unwrap()
        .resources
        .iter()
        .find_map(|r| {
            r.kube_object().filter(|o| o["kind"] == "ClusterQueue" && o["metadata"]["name"] == "gpu-batch").cloned()
        })
        .expect("SP's gpu-batch");
    let kubeconfig = l.dir.join("sp").join("kubeconfig");
    let access = fabric::providers::kube::KubeAccess::new(kubeconfig.to_str().unwrap(), Some("sp"));
    let sp = fabric::providers::kube::client(&fabric::addr::Target::cluster("sp"), &access).await.unwrap();
    fabric::providers::kube::apply(&sp, &cq, true).await.expect("forced apply");
    assert!(changes(l).await.iter().all(|c| c.contains("Job/fabric-multikueue-test")), "only the Job's suspend left");
    apply_step::apply_step(&t, &l.dir, "D.4", "20261206T020001Z-1").await.expect("D.4 again");
}
