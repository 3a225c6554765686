//! Issue 34, item 4: SP's Cilium HelmChart on a cluster without a CNI, with K3s's real
//! helm-controller and scheduler. K3s started with `--flannel-backend=none` (SP, a new cluster
//! where A.1 installs Cilium) registers its nodes NotReady with the `node.kubernetes.io/not-ready`
//! taint until a CNI runs. helm-controller gives only a `bootstrap: true` chart's install Job the
//! tolerations of that taint (k3s-io/helm-controller `pkg/controllers/chart/chart.go`, `job()`):
//! an ordinary chart's Job is never scheduled and Cilium never installs, which the in-process
//! simulator let pass.
//!
//! Whose is what: the real kube-scheduler and helm-controller decide where the Job runs; the
//! klipper stand-in runs the Helm install of the pinned Cilium chart with fabric's values (so the
//! chart's `values.schema.json` judges them); the site's CNI stand-in (`tests/realkube/kube/
//! cni.go`) lets kwok report the nodes Ready once Cilium's agent DaemonSet exists, and the real
//! node lifecycle controller lifts the taint.

use fabric_testkit::realkube::{self, Site, SiteOptions};
use serde_json::{Value, json};

/// The example topology and its SP site.
fn example() -> fabric::topology::Topology {
    fabric::topology::load_str("t.yaml", include_str!("../topology.example.yaml").to_string()).unwrap().topology
}

/// Starts a site for SP and registers its nodes as a K3s without a CNI does: NotReady, tainted.
fn cluster_without_cni(name: &str, t: &fabric::topology::Topology) -> Site {
    let sp = t.sites.iter().find(|s| s.name == "sp").expect("SP");
    let dir = std::env::temp_dir().join(format!("fabric-realkube-cni-{}", std::process::id())).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let opts = SiteOptions {
        helm: true,
        service_cidr: Some(sp.cluster.service_cidr.to_string()),
        cluster_cidr: Some(sp.cluster.pod_cidr.to_string()),
        ..Default::default()
    };
    let site = Site::start(&dir, name, &opts);
    for n in &sp.cluster.nodes {
        let server = format!("{:?}", n.role).to_lowercase().contains("control");
        let mut node = realkube::kwok_node(
            &n.name,
            server,
            json!({"cpu": "16", "memory": "62Gi", "pods": "110"}),
            &t.versions.k3s.to_string(),
        );
        node["metadata"]["annotations"]["realkube.fabric.test/no-cni"] = "true".into();
        node["spec"] = json!({"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]});
        node["status"]["conditions"] = json!([{
            "type": "Ready", "status": "False", "reason": "KubeletNotReady",
            "message": "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized",
        }]);
        let out = site.kubectl_with_input(&["create", "-f", "-"], Some(&node.to_string()));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    site
}

fn install_job(site: &Site) -> Option<Value> {
    site.get("job", "helm-install-cilium", Some("kube-system"))
}

fn ready_nodes(site: &Site) -> usize {
    let out =
        site.kubectl_ok(&["get", "nodes", "-o", "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}"]);
    out.split_whitespace().filter(|s| *s == "True").count()
}

#[test]
fn cilium_installs_on_a_cluster_without_cni_only_as_a_bootstrap_chart() {
    let t = example();
    let sp = t.sites.iter().find(|s| s.name == "sp").unwrap();
    let chart = fabric::desired::cilium::cilium_helm_chart(&t, sp);
    assert_eq!(chart["spec"]["bootstrap"], true, "fabric's Cilium HelmChart: {}", chart["spec"]);

    // Without `bootstrap`, as fabric wrote it before: the install Job's pod is never scheduled.
    let ordinary = cluster_without_cni("sp-ordinary", &t);
    let mut plain = chart.clone();
    plain["spec"].as_object_mut().unwrap().remove("bootstrap");
    ordinary.apply(&[plain], "fabric");
    ordinary.wait_until(30, "the ordinary install Job's pod exists", |s| {
        s.kubectl_ok(&["get", "pods", "-n", "kube-system", "-l", "job-name=helm-install-cilium", "-o", "name"])
            .contains("pod/")
    });
    std::thread::sleep(std::time::Duration::from_secs(5));
    let pods =
        ordinary.kubectl_ok(&["get", "pods", "-n", "kube-system", "-l", "job-name=helm-install-cilium", "-o", "json"]);
    let pods: Value = serde_json::from_str(&pods).unwrap();
    let pod = &pods["items"][0];
    assert_eq!(pod["spec"]["nodeName"], Value::Null, "scheduled on a NotReady node: {pod}");
    let unschedulable = pod["status"]["conditions"].as_array().into_iter().flatten().any(|c| {
        c["reason"] == "Unschedulable"
            && c["message"].as_str().is_some_and(|m| m.contains("node.kubernetes.io/not-ready"))
    });
    assert!(unschedulable, "the scheduler names the not-ready taint: {}", pod["status"]);
    assert!(install_job(&ordinary).is_some_and(|j| j["status"]["succeeded"].is_null()));
    assert!(ordinary.get("daemonset", "cilium", Some("kube-system")).is_none(), "Cilium must not be installed");
    assert_eq!(ready_nodes(&ordinary), 0);
    drop(ordinary);

    // fabric's chart: helm-controller's bootstrap Job runs on the control-plane node, Helm
    // installs the pinned Cilium chart with fabric's values, and the nodes become Ready.
    let site = cluster_without_cni("sp", &t);
    site.apply(&[chart], "fabric");
    site.wait_until(120, "helm-install-cilium complete", |s| {
        install_job(s).is_some_and(|j| j["status"]["succeeded"] == 1)
    });
    let pod = site.kubectl_ok(&[
        "get",
        "pods",
        "-n",
        "kube-system",
        "-l",
        "job-name=helm-install-cilium",
        "-o",
        "jsonpath={.items[0].spec.nodeName} {.items[0].spec.hostNetwork}",
    ]);
    assert_eq!(pod, "sp-cp1 true", "the bootstrap Job runs on the server, with the host's network");
    assert!(site.get("daemonset", "cilium", Some("kube-system")).is_some(), "Cilium's agent DaemonSet");
    let nodes = sp.cluster.nodes.len();
    site.wait_until(60, "every node Ready and without the not-ready taint", |s| {
        let taints = s.kubectl_ok(&["get", "nodes", "-o", "jsonpath={.items[*].spec.taints[*].key}"]);
        ready_nodes(s) == nodes && !taints.contains("node.kubernetes.io/not-ready")
    });
}
