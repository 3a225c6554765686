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

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fabric::apply::StepWork;
use fabric::catalog::{Catalog, StepGraph};
use fabric::topology::Topology;
use fabric_testkit::realkube::{self, Site, SiteOptions};
use serde_json::{Value, json};

#[path = "support/apply_step.rs"]
mod apply_step;

/// The Kubernetes steps that need no SSH host, in apply's order (their dependencies on the hosts'
/// and Karmada's steps are not applied: no host and no Karmada API is here).
const APPLIED: &[&str] = &["D.1@franca", "D.1@sp", "D.2", "D.3", "D.4", "D.5@franca", "D.5@sp"];

/// The steps `fabric plan` is run on: a plan refuses a step whose dependency has pending changes,
/// so these are the applied steps whose own dependencies (C.1, D.1) are applied too.
const PLANNED: &[&str] = &["D.2", "D.3", "D.4", "D.5@franca", "D.5@sp"];

/// The two sites and the topology reaching them, started once for this test binary.
struct Lab {
    dir: PathBuf,
    franca: Site,
    sp: Site,
    text: String,
}

/// The example topology moved onto loopback, with each site's kubeconfig and API port.
fn lab_topology(dir: &Path, ports: (u16, u16)) -> String {
    let example = include_str!("../topology.example.yaml");
    let mut t = example
        .replace("192.168.0.", "127.0.10.")
        .replace("192.168.1.", "127.0.11.")
        .replace("192.168.2.", "127.0.12.")
        .replace("192.168.3.", "127.0.13.");
    for (site, port) in [("franca", ports.0), ("sp", ports.1)] {
        let kubeconfig = dir.join(site).join("kubeconfig");
        let line = format!("kubeconfig: {{ path: ~/.kube/{site}.yaml, context: {site} }}");
        assert!(t.contains(&line), "the example's {site} kubeconfig line moved: {line}");
        t = t.replace(
            &line,
            &format!("kubeconfig: {{ path: {}, context: {site} }}\n      api_port: {port}", kubeconfig.display()),
        );
    }
    // No Karmada API here: its kubeconfig names a file that does not exist.
    t.replace("~/.kube/karmada.yaml", &dir.join("no-karmada.yaml").display().to_string())
}

/// The Nodes a site's kubelets register: the topology's nodes with their GPUs (here from the
/// start: kwok has no device plugin) and allocatable; a control-plane node gets 8 cores, 32 GiB.
fn nodes(t: &Topology, site: &str, kubelet: &str) -> Vec<Value> {
    let s = t.sites.iter().find(|s| s.name == site).expect("site");
    s.cluster
        .nodes
        .iter()
        .map(|n| {
            let (cpus, mem) = n.allocatable.as_ref().map_or((8, 32), |a| (a.cpus, a.memory_gib));
            let mut capacity = json!({"cpu": cpus.to_string(), "memory": format!("{mem}Gi"), "pods": "110"});
            if let Some(g) = &n.gpu {
                capacity["nvidia.com/gpu"] = g.count.to_string().into();
            }
            let server = format!("{:?}", n.role).to_lowercase().contains("control");
            realkube::kwok_node(&n.name, server, capacity, kubelet)
        })
        .collect()
}

fn lab() -> &'static Lab {
    static LAB: OnceLock<Lab> = OnceLock::new();
    LAB.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("fabric-realkube-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (fa, sa) = ("127.0.10.10", "127.0.12.10");
        let ports = (realkube::free_port(fa), realkube::free_port(sa));
        let text = lab_topology(&dir, ports);
        let t = fabric::topology::load_str("lab.yaml", text.clone()).expect("the lab topology is valid").topology;
        let start = |name: &str, address: &str, port: u16| {
            let s = t.sites.iter().find(|s| s.name == name).unwrap();
            let opts = SiteOptions {
                helm: true,
                address: Some(address.into()),
                port: Some(port),
                service_cidr: Some(s.cluster.service_cidr.to_string()),
                cluster_cidr: Some(s.cluster.pod_cidr.to_string()),
                ..Default::default()
            };
            Site::start(&dir.join(name), name, &opts)
        };
        let (franca, sp) = (start("franca", fa, ports.0), start("sp", sa, ports.1));
        let kubelet = t.versions.k3s.to_string();
        for (site, name) in [(&franca, "franca"), (&sp, "sp")] {
            for node in nodes(&t, name, &kubelet) {
                let out = site.kubectl_with_input(&["create", "-f", "-"], Some(&node.to_string()));
                assert!(out.status.success(), "node at {name}: {}", String::from_utf8_lossy(&out.stderr));
            }
            site.wait_until(30, "every node Ready", |s| {
                let out = s.kubectl_ok(&[
                    "get",
                    "nodes",
                    "-o",
                    "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}",
                ]);
                !out.is_empty() && out.split_whitespace().all(|c| c == "True")
            });
        }
        std::fs::write(dir.join("topology.yaml"), &text).unwrap();
        std::fs::write(dir.join("ssh_config"), "Host *\n    HostName 127.0.0.1\n    Port 9\n    ConnectTimeout 2\n")
            .unwrap();
        Lab { dir, franca, sp, text }
    })
}

fn fabric(l: &Lab, args: &[&str]) -> std::process::Output {
    fabric_testkit::run::fabric_in(&l.dir, &l.dir.join("topology.yaml"), &l.dir.join("ssh_config"), args)
}

/// Applies `APPLIED` through fabric's apply engine, as `fabric apply` would one step after the
/// other; panics with the step and fabric's error.
async fn apply_all(l: &Lab) -> (Topology, Vec<StepWork>) {
    let t = fabric::topology::load_str("t.yaml", l.text.clone()).unwrap().topology;
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &t).unwrap();
    let mut steps = Vec::new();
    for (i, key) in APPLIED.iter().enumerate() {
        apply_step::apply_step(&t, &l.dir, key, &format!("20261206T0000{i:02}Z-1"))
            .await
            .unwrap_or_else(|e| panic!("{key} on the real API servers: {e}"));
        steps.push(StepWork::alone(&g, &t, key).unwrap());
    }
    (t, steps)
}

#[tokio::test(flavor = "multi_thread")]
async fn kubernetes_steps_apply_to_real_api_servers_and_plan_clean_after() {
    let l = lab();
    apply_all(l).await;

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
