//! Phase A on the lab with Kubernetes test API servers: the K3s config files over SSH and the
//! Cilium HelmCharts through server-side apply, both sites at once; drift in a Kubernetes object;
//! a conflict with another field manager; a 422 in the middle of a step reverting the step's
//! earlier changes. Needs root (network namespaces).

use fabric_testkit::{kube_api, lab, run};

use run::out;

use kube_api::TestApiServer;
use std::process::Output;

const TOPOLOGY: &str = include_str!("data/lab-linux.yaml");

fn helmchart<'a>(server: &TestApiServer, objects: &'a mut Vec<serde_json::Value>) -> Option<&'a serde_json::Value> {
    *objects = server.objects();
    objects.iter().find(|o| o["kind"] == "HelmChart" && o["metadata"]["name"] == "cilium")
}

#[test]
fn phase_a_files_and_helmcharts() {
    let lab = lab::Lab::up("ak", "10.245", &[], &[]);
    let dir = std::env::temp_dir().join(format!("fabric-apply-kube-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, sp, _karmada) = kube_api::fabric_apis(&dir);
    // helm-controller and the others: apply waits for the charts' install Jobs.
    for s in [&franca, &sp] {
        s.simulate_controllers(std::time::Duration::from_millis(100));
    }
    let topology = |t: &str| kube_api::with_test_kubeconfigs(t, &dir);
    std::fs::write(dir.join("topology.yaml"), topology(TOPOLOGY)).unwrap();
    let fabric =
        |args: &[&str]| -> Output { run::fabric_in(&dir, &dir.join("topology.yaml"), &lab.ssh_config(), args) };
    // sp keeps kube-proxy: a change to both its K3s file and its chart.
    let keep_kube_proxy = topology(
        &TOPOLOGY
            .replace("      api_address: 172.30.2.10\n", "      api_address: 172.30.2.10\n      kube_proxy: true\n"),
    );

    // 1. Phase A: A.1 at both sites, at the same time (no shared target).
    let o = fabric(&["apply", "--phase", "A", "--auto-approve"]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("A.1@franca, A.1@sp: at the same time"), "{text}");
    let conf = lab.exec("sp-lan", "cat /etc/rancher/k3s/config.yaml");
    let conf = String::from_utf8_lossy(&conf.stdout).to_string();
    assert!(conf.contains("flannel-backend: none") && conf.contains("cluster-cidr: \"10.44.0.0/16\""), "{conf}");
    let mut objs = Vec::new();
    let hc = helmchart(&sp, &mut objs).expect("HelmChart cilium in sp").clone();
    assert!(hc["spec"]["valuesContent"].as_str().unwrap().contains("id: 2"), "{hc}");
    assert!(hc["metadata"]["managedFields"].to_string().contains("\"fabric\""), "owned by fabric: {hc}");
    assert!(helmchart(&franca, &mut objs).is_some());

    // 2. The next plan has nothing to do.
    let o = fabric(&["plan", "--phase", "A", "--detailed-exitcode"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));

    // 3. Someone changes the chart version with kubectl: drift, and a conflict the dry run shows.
    let mut edited = hc.clone();
    edited["spec"]["version"] = serde_json::json!("1.17.0");
    for k in ["managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"] {
        edited["metadata"].as_object_mut().unwrap().remove(k);
    }
    sp.put_raw_as(edited, "kubectl");
    let o = fabric(&["plan", "--phase", "A", "--detailed-exitcode"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("~ cluster.sp/kube-system/HelmChart/cilium"), "{text}");
    assert!(text.contains("-  version: \"1.17.0\"") && text.contains("+  version: \"1.18.4\""), "{text}");
    assert!(text.contains("409 Conflict") && text.contains("kubectl"), "{text}");
    // Without --force-conflicts apply stops and puts the step back; with it, fabric takes over.
    let o = fabric(&["apply", "--phase", "A", "--auto-approve"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("Conflict"), "{}", out(&o));
    let o = fabric(&["apply", "--phase", "A", "--auto-approve", "--force-conflicts"]);
    assert!(o.status.success(), "{}", out(&o));
    let o = fabric(&["plan", "--phase", "A", "--detailed-exitcode"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));

    // 4. A 422 in the middle of a step reverts the step's earlier changes: keeping kube-proxy
    // changes both the K3s config file and the chart; the chart is refused, so the file written
    // in the same step is put back.
    std::fs::write(dir.join("topology.yaml"), &keep_kube_proxy).unwrap();
    sp.fail_next("apply", "HelmChart", 422);
    let o = fabric(&["apply", "--step", "A.1@sp", "--auto-approve"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("failed and was reverted"), "{text}");
    let after = lab.exec("sp-lan", "cat /etc/rancher/k3s/config.yaml");
    assert_eq!(String::from_utf8_lossy(&after.stdout), conf, "the file written in the failed step is back");
    // The same change applies once the server accepts it.
    let o = fabric(&["apply", "--step", "A.1@sp", "--auto-approve"]);
    assert!(o.status.success(), "{}", out(&o));
    let now = String::from_utf8_lossy(&lab.exec("sp-lan", "cat /etc/rancher/k3s/config.yaml").stdout).to_string();
    assert!(now.contains("disable-kube-proxy: false"), "{now}");

    // 5. rollback of that run puts the file and the chart back.
    let o = fabric(&["rollback"]);
    assert!(o.status.success(), "{}", out(&o));
    let back = String::from_utf8_lossy(&lab.exec("sp-lan", "cat /etc/rancher/k3s/config.yaml").stdout).to_string();
    assert_eq!(back, conf);
    std::fs::write(dir.join("topology.yaml"), topology(TOPOLOGY)).unwrap();
    let o = fabric(&["plan", "--phase", "A", "--detailed-exitcode"]);
    assert_eq!(o.status.code(), Some(0), "after rollback everything is as before: {}", out(&o));

    // 6. An object fabric made that the topology no longer has is planned as a deletion (and
    // nothing else changes); one fabric did not make is left alone.
    let labels = serde_json::json!({ "app.kubernetes.io/managed-by": "fabric", "app.kubernetes.io/part-of": "lab" });
    sp.put_raw_as(
        serde_json::json!({"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
            "metadata": {"name": "old-chart", "namespace": "kube-system", "labels": labels},
            "spec": {"chart": "old", "repo": "https://charts.invalid/"}}),
        "fabric",
    );
    sp.put_raw(serde_json::json!({"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
        "metadata": {"name": "theirs", "namespace": "kube-system"}, "spec": {"chart": "theirs"}}));
    let o = fabric(&["plan", "--phase", "A", "--detailed-exitcode"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains("- cluster.sp/kube-system/HelmChart/old-chart"), "{text}");
    assert!(text.contains("Plan: 0 to create, 0 to update, 1 to delete."), "{text}");
    assert!(!text.contains("theirs"), "an object fabric did not make is never pruned: {text}");
    let o = fabric(&["apply", "--phase", "A", "--auto-approve"]);
    assert!(o.status.success(), "{}", out(&o));
    let names: Vec<String> = sp
        .objects()
        .iter()
        .filter(|o| o["kind"] == "HelmChart")
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(!names.contains(&"old-chart".to_string()) && names.contains(&"theirs".to_string()), "{names:?}");
    // Rolling that run back brings the deleted object back.
    let o = fabric(&["rollback"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(sp.objects().iter().any(|o| o["metadata"]["name"] == "old-chart"), "rollback re-creates the pruned object");

    // 7. SIGINT while a step waits for its chart's install Job: the step goes back to its
    // rollback point (the K3s file too), the journal says so and ends, no lock is left, and the
    // exit status is 130.
    std::fs::write(dir.join("topology.yaml"), &keep_kube_proxy).unwrap();
    sp.hold("Job", true);
    let args = ["apply", "--step", "A.1@sp", "--auto-approve", "--wait-timeout", "120"];
    let child = run::fabric_spawn(&dir, &dir.join("topology.yaml"), &lab.ssh_config(), &args);
    let started = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    sp.hold("Job", false);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(130), "{text}");
    assert!(text.contains("interrupted") && text.contains("was reverted"), "{text}");
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "stopped at once: {:?}", started.elapsed());
    let after = String::from_utf8_lossy(&lab.exec("sp-lan", "cat /etc/rancher/k3s/config.yaml").stdout).to_string();
    assert_eq!(after, conf, "the interrupted step is back at its rollback point");
    let lock =
        String::from_utf8_lossy(&lab.exec("sp-lan", "cat /run/lock/fabric.lock 2>/dev/null; true").stdout).to_string();
    assert!(lock.trim().is_empty(), "no lock left: {lock}");
    let newest =
        std::fs::read_dir(dir.join(".fabric/runs")).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).max().unwrap();
    let journal = std::fs::read_to_string(newest).unwrap();
    assert!(journal.contains("\"event\":\"reverted\"") && journal.contains("interrupted"), "{journal}");
    assert!(journal.trim_end().ends_with("\"ok\":false}"), "{journal}");
    std::fs::remove_dir_all(&dir).unwrap();
}
