//! The real-control-plane lab of `tests/realkube_apply.rs` and `benches/plan_realkube.rs`: the
//! example's two sites on loopback with real API servers (`fabric_testkit::realkube`), and
//! fabric's Kubernetes steps applied to them through its apply engine. Included with
//! `#[path = "support/realkube_lab.rs"] mod realkube_lab;` (it needs `support/apply_step.rs` as
//! `apply_step` beside it).

use std::path::{Path, PathBuf};

use fabric::apply::StepWork;
use fabric::catalog::{Catalog, StepGraph};
use fabric::topology::Topology;
use fabric_testkit::realkube::{self, Site, SiteOptions};
use serde_json::{Value, json};

use super::apply_step;

/// The Kubernetes steps that need no SSH host, in apply's order (their dependencies on the hosts'
/// and Karmada's steps are not applied: no host and no Karmada API is here).
pub const APPLIED: &[&str] = &["C.1", "D.1@franca", "D.1@sp", "D.2", "D.3", "D.4", "D.5@franca", "D.5@sp"];

/// The steps `fabric plan` is run on: a plan refuses a step whose dependency has pending changes,
/// so these are the applied steps whose own dependencies (C.1, D.1) are applied too.
pub const PLANNED: &[&str] = &["D.2", "D.3", "D.4", "D.5@franca", "D.5@sp"];

/// The two sites and the topology reaching them, started once for this test binary.
pub struct Lab {
    pub dir: PathBuf,
    pub franca: Site,
    pub sp: Site,
    pub text: String,
}

/// The example topology moved onto loopback, with each site's kubeconfig and API port.
fn lab_topology(dir: &Path, ports: (u16, u16)) -> String {
    let example = include_str!("../../topology.example.yaml");
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
    // Karmada's kubeconfig where `fabric_testkit::realkube::Karmada::start(dir/karmada)` writes
    // it: a file that does not exist unless a test starts Karmada (tests/realkube_karmada.rs).
    t.replace("~/.kube/karmada.yaml", &dir.join("karmada").join("kubeconfig").display().to_string())
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

impl Lab {
    /// Starts both sites in a fresh folder named after `name`, with the topology's nodes Ready.
    pub fn start(name: &str) -> Lab {
        Lab::start_with(name, true)
    }

    /// [`Lab::start`], the sites running K3s's helm-controller and the charts' stand-ins only
    /// with `helm`.
    pub fn start_with(name: &str, helm: bool) -> Lab {
        let dir = std::env::temp_dir().join(format!("fabric-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (fa, sa) = ("127.0.10.10", "127.0.12.10");
        let ports = (realkube::free_port(fa), realkube::free_port(sa));
        let text = lab_topology(&dir, ports);
        let t = fabric::topology::load_str("lab.yaml", text.clone()).expect("the lab topology is valid").topology;
        let start = |name: &str, address: &str, port: u16| {
            let s = t.sites.iter().find(|s| s.name == name).unwrap();
            let opts = SiteOptions {
                helm,
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
    }
}

pub fn fabric(l: &Lab, args: &[&str]) -> std::process::Output {
    fabric_testkit::run::fabric_in(&l.dir, &l.dir.join("topology.yaml"), &l.dir.join("ssh_config"), args)
}

/// Applies `APPLIED` through fabric's apply engine, as `fabric apply` would one step after the
/// other; panics with the step and fabric's error.
pub async fn apply_all(l: &Lab) {
    let t = fabric::topology::load_str("t.yaml", l.text.clone()).unwrap().topology;
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &t).unwrap();
    let mut steps = Vec::new();
    for (i, key) in APPLIED.iter().enumerate() {
        apply_step::apply_step(&t, &l.dir, key, &format!("20261206T0000{i:02}Z-1"))
            .await
            .unwrap_or_else(|e| panic!("{key} on the real API servers: {e}"));
        steps.push(StepWork::alone(&g, &t, key).unwrap());
    }
}
