//! Issue 34, item 4: every chart fabric's steps install at a site, installed by the real Helm
//! library through K3s's real helm-controller, with the values fabric renders: Cilium (with B.2's
//! HelmChartConfig layered over it, as helm-controller merges them), Karmada, argo-cd, Kueue, the
//! NVIDIA device plugin and KAI Scheduler, each from its pinned archive in
//! `../shared/specs/charts`. A chart's own checks judge fabric's values (Cilium's
//! `values.schema.json`, the templates' `required` and `fail`), and a value a chart's schema
//! refuses keeps its install Job from completing: the test shows one.
//!
//! Whose is what: helm-controller (real) makes the install Job and its values Secret from the
//! HelmChart and HelmChartConfig; the klipper stand-in runs Helm as the Job's container would
//! (`tests/realkube/helm`); kwok plays the kubelets, so the charts' pods run nothing.

use fabric::catalog::{Catalog, StepGraph};
use fabric::desired::Desired;
use fabric_testkit::realkube::{self, Site, SiteOptions};
use serde_json::{Value, json};

/// The HelmCharts and HelmChartConfigs of every step at `site`, as fabric renders them.
fn charts_at(t: &fabric::topology::Topology, site: &str) -> Vec<Value> {
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    let target = format!("cluster.{site}");
    g.instances()
        .flat_map(|i| fabric::steps::for_instance(i, t))
        .filter(|r| r.target().to_string() == target)
        .filter_map(|r| match r.desired {
            Desired::Kube(v) if matches!(v["kind"].as_str(), Some("HelmChart" | "HelmChartConfig")) => Some(v),
            _ => None,
        })
        .collect()
}

fn start(t: &fabric::topology::Topology, name: &str) -> Site {
    let s = t.sites.iter().find(|s| s.name == name).unwrap();
    let dir = std::env::temp_dir().join(format!("fabric-realkube-charts-{}", std::process::id())).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let opts = SiteOptions {
        helm: true,
        service_cidr: Some(s.cluster.service_cidr.to_string()),
        cluster_cidr: Some(s.cluster.pod_cidr.to_string()),
        ..Default::default()
    };
    let site = Site::start(&dir, name, &opts);
    for n in &s.cluster.nodes {
        let server = format!("{:?}", n.role).to_lowercase().contains("control");
        let mut capacity = json!({"cpu": "16", "memory": "62Gi", "pods": "110"});
        if let Some(g) = &n.gpu {
            capacity["nvidia.com/gpu"] = g.count.to_string().into();
        }
        let node = realkube::kwok_node(&n.name, server, capacity, &t.versions.k3s.to_string());
        let out = site.kubectl_with_input(&["create", "-f", "-"], Some(&node.to_string()));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    site
}

/// The install Job's end: Ok once it succeeded, Err with the container's last message while it
/// fails (the klipper stand-in writes Helm's error there, as the kubelet keeps a crashed
/// container's).
fn install_state(site: &Site, chart: &str) -> Result<(), String> {
    let job = format!("helm-install-{chart}");
    match site.get("job", &job, Some("kube-system")) {
        Some(j) if j["status"]["succeeded"] == 1 => Ok(()),
        None => Err(format!("{job} not created")),
        Some(_) => {
            let pods =
                site.kubectl_ok(&["get", "pods", "-n", "kube-system", "-l", &format!("job-name={job}"), "-o", "json"]);
            let pods: Value = serde_json::from_str(&pods).unwrap();
            let msg = pods["items"][0]["status"]["containerStatuses"][0]["lastState"]["terminated"]["message"].clone();
            Err(format!("{job} running; last error: {msg}"))
        }
    }
}

#[test]
fn every_chart_installs_with_fabrics_values_and_a_refused_value_fails() {
    let t =
        fabric::topology::load_str("t.yaml", include_str!("../topology.example.yaml").to_string()).unwrap().topology;
    for name in ["franca", "sp"] {
        let site = start(&t, name);
        let objects = charts_at(&t, name);
        let charts: Vec<String> = objects
            .iter()
            .filter(|o| o["kind"] == "HelmChart")
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        for expected in ["cilium", "kueue", "nvidia-device-plugin"] {
            assert!(
                charts.iter().any(|c| c == expected),
                "{name}: fabric installs {expected} (it installs {charts:?})"
            );
        }
        site.apply(&objects, "fabric");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
        loop {
            let states: Vec<(String, Result<(), String>)> =
                charts.iter().map(|c| (c.clone(), install_state(&site, c))).collect();
            if states.iter().all(|(_, s)| s.is_ok()) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{name}: charts not installed after 240 s: {states:?}");
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        // Each release is deployed, at the chart version fabric pins.
        let secrets = site.kubectl_ok(&[
            "get",
            "secrets",
            "-A",
            "-l",
            "owner=helm,status=deployed",
            "-o",
            "jsonpath={.items[*].metadata.labels.name}",
        ]);
        for c in &charts {
            assert!(secrets.split_whitespace().any(|r| r == c), "{name}: release {c} deployed ({secrets})");
        }
        if name == "sp" {
            // A value Cilium's values.schema.json refuses: the install Job never completes and
            // its container's last message is Helm's schema error.
            let mut bad =
                objects.iter().find(|o| o["kind"] == "HelmChart" && o["metadata"]["name"] == "cilium").unwrap().clone();
            bad["metadata"]["name"] = "cilium-bad".into();
            bad["spec"]["targetNamespace"] = "cilium-bad".into();
            bad["spec"]["valuesContent"] = "cluster:\n  id: not-a-number\n".into();
            site.apply(&[bad], "test");
            site.wait_until(120, "cilium-bad's install refused by the chart's schema", |s| {
                install_state(s, "cilium-bad").is_err_and(|e| e.contains("schema") && e.contains("cluster"))
            });
        }
    }
}
