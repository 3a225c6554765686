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

use fabric_testkit::realkube::Site;
use serde_json::{Value, json};

#[path = "support/apply_step.rs"]
mod apply_step;
#[path = "support/realkube_lab.rs"]
mod realkube_lab;

use realkube_lab::{Lab, PLANNED, apply_all, fabric};

fn lab() -> &'static Lab {
    static LAB: OnceLock<Lab> = OnceLock::new();
    LAB.get_or_init(|| Lab::start("realkube"))
}

/// The lab with `APPLIED` applied, once for all the tests of this binary.
async fn applied() -> &'static Lab {
    static APPLY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    let l = lab();
    APPLY
        .get_or_init(|| async {
            apply_all(l).await;
        })
        .await;
    l
}

#[tokio::test(flavor = "multi_thread")]
async fn kubernetes_steps_apply_to_real_api_servers_and_plan_clean_after() {
    let l = applied().await;

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
    let mut args = vec!["plan", "--detailed-exitcode"];
    for s in PLANNED {
        args.extend(["--step", s]);
    }
    let out = fabric(l, &args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "plan after apply:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A batch Job of `gpus` GPUs in `queue` (namespace `batch`); `hold` keeps its pod running
/// (kwok does not end a pod labelled `realkube.fabric.test/hold`).
fn batch_job(name: &str, queue: &str, gpus: u32, hold: bool) -> Value {
    let mut labels = json!({});
    if hold {
        labels["realkube.fabric.test/hold"] = "true".into();
    }
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "batch", "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels}, "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "train", "image": "registry.example/train:1",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": gpus}}}],
        }}},
    })
}

fn job_condition(site: &Site, name: &str, condition: &str) -> bool {
    site.get("job", name, Some("batch")).is_some_and(|j| {
        j["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == condition && c["status"] == "True"))
    })
}

/// The seed's D.4 ("Franca está lotada, SP tem GPU livre?") with the real Kueue and MultiKueue:
/// Franca's local batch GPUs are all held by running Jobs, so one more local Job waits for quota;
/// a Job sent to the dispatching queue at Franca is dispatched by MultiKueue to SP, runs and
/// completes there, and its status comes back to Franca's Job. Then `fabric verify` reports D.4
/// from these real objects.
#[tokio::test(flavor = "multi_thread")]
async fn d4_a_batch_job_at_a_full_franca_runs_in_sp() {
    let l = applied().await;
    let t = fabric::topology::load_str("t.yaml", l.text.clone()).unwrap().topology;
    let franca = t.sites.iter().find(|s| s.name == "franca").unwrap();
    let local = franca.queues.iter().find(|q| q.name == "gpu-batch-local").expect("Franca's local batch queue");
    let local_queue = &local.local_queues[0].name;
    // Fill Franca's local batch queue with running one-GPU Jobs until Kueue admits no more: its
    // own quota, and what its cohort lends it, are all in use.
    let franca_gpus: u32 = franca.cluster.nodes.iter().filter_map(|n| n.gpu.as_ref()).map(|g| g.count).sum();
    let mut admitted = 0;
    let waiting = loop {
        assert!(admitted <= franca_gpus, "Kueue admitted {admitted} one-GPU Jobs on {franca_gpus} GPUs");
        let name = format!("fill-{admitted}");
        l.franca.apply(&[batch_job(&name, local_queue, 1, true)], "test");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
        let running = loop {
            let j = l.franca.get("job", &name, Some("batch")).expect("the filler Job");
            if j["status"]["active"] == 1 {
                break true;
            }
            if std::time::Instant::now() > deadline {
                assert_eq!(j["spec"]["suspend"], true, "a Job neither running nor waiting: {}", j["status"]);
                break false;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        if !running {
            break name;
        }
        admitted += 1;
    };
    assert!(admitted >= local.gpu_quota, "Franca's local queue ran {admitted} Jobs, its quota is {}", local.gpu_quota);
    let wl = l.franca.kubectl_ok(&["get", "workloads", "-n", "batch", "-o", "json"]);
    assert!(
        wl.contains("insufficient unused quota") || wl.contains("couldn't assign flavors"),
        "{waiting} waits on quota: {wl}"
    );

    // The same work sent to the dispatching queue runs in SP.
    let mk = t.multikueue.as_ref().expect("the example has MultiKueue");
    let dispatch = t.sites.iter().flat_map(|s| &s.queues).find(|q| q.name == mk.queue).expect("the dispatching queue");
    l.franca.apply(&[batch_job("goes-to-sp", &dispatch.local_queues[0].name, 1, false)], "test");
    l.franca.wait_until(90, "goes-to-sp Complete at Franca (its status copied back from SP)", |s| {
        job_condition(s, "goes-to-sp", "Complete")
    });
    let wl = l.franca.kubectl_ok(&["get", "workloads", "-n", "batch", "-o", "json"]);
    let wl: Value = serde_json::from_str(&wl).unwrap();
    let admitted_in = wl["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["metadata"]["ownerReferences"][0]["name"] == "goes-to-sp")
        .map(|w| w["status"]["clusterName"].clone());
    assert_eq!(admitted_in, Some(json!("sp")), "MultiKueue's Workload names the worker: {wl}");
    assert!(l.franca.log("kueue").contains("goes-to-sp"), "Franca's Kueue manager handled the Job");
    let pods_at_franca = l.franca.kubectl_ok(&["get", "pods", "-n", "batch", "-o", "name"]);
    assert!(!pods_at_franca.contains("goes-to-sp"), "no pod of it ran at Franca: {pods_at_franca}");

    // fabric verify reports D.4 from the real objects (its own test Job was dispatched too).
    let out = fabric(l, &["verify", "--step", "D.4"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "verify D.4:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("PASS") && !stdout.contains("FAIL"), "{stdout}");

    let names: Vec<String> = (0..=admitted).map(|i| format!("job/fill-{i}")).chain(["job/goes-to-sp".into()]).collect();
    let mut args = vec!["delete", "-n", "batch", "--wait=false"];
    args.extend(names.iter().map(String::as_str));
    l.franca.kubectl_ok(&args);
}

/// A one-line change of the topology plans exactly the object it changes, read against the real
/// servers: Franca's dispatching queue's `gpu_quota` (2 → 1) changes its ClusterQueue (D.3), and
/// nothing else of the planned steps.
#[tokio::test(flavor = "multi_thread")]
async fn a_one_line_change_plans_exactly_its_object() {
    let l = applied().await;
    let line = "      - name: gpu-batch         # the MultiKueue dispatching queue: Jobs in batch/batch run in SP (see multikueue below)\n        gpu_quota: 2\n";
    assert!(l.text.contains(line), "the example's dispatching queue moved");
    let changed = l.text.replace(line, &line.replace("gpu_quota: 2", "gpu_quota: 1"));
    let path = l.dir.join("changed.yaml");
    std::fs::write(&path, changed).unwrap();
    let mut args = vec!["plan", "--format", "json", "--detailed-exitcode"];
    for s in PLANNED {
        args.extend(["--step", s]);
    }
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
