//! The real-control-plane lab of `tests/realkube_apply.rs` and `benches/plan_realkube.rs`: the
//! example's two sites on loopback with real API servers (`fabric_testkit::realkube`), and
//! fabric's Kubernetes steps applied to them through its apply engine. Included with
//! `#[path = "support/realkube_lab.rs"] mod realkube_lab;` (it needs `support/apply_step.rs` as
//! `apply_step` beside it).

use std::path::{Path, PathBuf};

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

/// The two sites (and Karmada's VM's K3s, when the topology makes it MultiKueue's manager) and
/// the topology reaching them, started once for a test binary.
pub struct Lab {
    pub dir: PathBuf,
    pub franca: Site,
    pub sp: Site,
    /// Read by the MultiKueue tests only (`support/kueue_jobs.rs`).
    #[allow(dead_code)]
    pub vm: Option<Site>,
    pub text: String,
}

/// The example topology.
pub const EXAMPLE: &str = include_str!("../../topology.example.yaml");

/// `example` (the example topology or a variant of it) moved onto loopback, with each site's
/// kubeconfig and API port, and Karmada's VM's kubeconfig when it has one.
fn lab_topology(example: &str, dir: &Path, ports: (u16, u16)) -> String {
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
    let vm = dir.join("karmada-vm").join("kubeconfig");
    // Karmada's kubeconfig where `fabric_testkit::realkube::Karmada::start(dir/karmada)` writes
    // it: a file that does not exist unless a test starts Karmada (tests/realkube_karmada.rs).
    t.replace("~/.kube/karmada-vm.yaml", &vm.display().to_string())
        .replace("~/.kube/karmada.yaml", &dir.join("karmada").join("kubeconfig").display().to_string())
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

/// Creates `nodes` at `site` as their kubelets register them and waits until kwok has them Ready.
fn register(site: &Site, nodes: &[Value]) {
    for node in nodes {
        let out = site.kubectl_with_input(&["create", "-f", "-"], Some(&node.to_string()));
        assert!(out.status.success(), "node at {}: {}", site.name, String::from_utf8_lossy(&out.stderr));
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

impl Lab {
    /// Starts both sites of the example in a fresh folder named after `name`, with the
    /// topology's nodes Ready.
    pub fn start(name: &str) -> Lab {
        Lab::start_from(name, EXAMPLE, true)
    }

    /// [`Lab::start`], the sites running K3s's helm-controller and the charts' stand-ins only
    /// with `helm`. (Used by `realkube_karmada.rs` only.)
    #[allow(dead_code)]
    pub fn start_with(name: &str, helm: bool) -> Lab {
        Lab::start_from(name, EXAMPLE, helm)
    }

    /// [`Lab::start_with`] for `example`, a variant of the example; when its MultiKueue manager
    /// is Karmada's VM, that VM's single-node K3s is started too (at the VM's address).
    pub fn start_from(name: &str, example: &str, helm: bool) -> Lab {
        let dir = std::env::temp_dir().join(format!("fabric-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (fa, sa) = ("127.0.10.10", "127.0.12.10");
        let ports = (realkube::free_port(fa), realkube::free_port(sa));
        let text = lab_topology(example, &dir, ports);
        let t = fabric::topology::load_str("lab.yaml", text.clone()).expect("the lab topology is valid").topology;
        let start = |name: &str, address: &str, port: u16, cidrs: (String, String)| {
            let opts = SiteOptions {
                helm,
                address: Some(address.into()),
                port: Some(port),
                service_cidr: Some(cidrs.0),
                cluster_cidr: Some(cidrs.1),
                ..Default::default()
            };
            Site::start(&dir.join(name), name, &opts)
        };
        let site = |name: &str, address: &str, port: u16| {
            let s = t.sites.iter().find(|s| s.name == name).unwrap();
            start(name, address, port, (s.cluster.service_cidr.to_string(), s.cluster.pod_cidr.to_string()))
        };
        let (franca, sp) = (site("franca", fa, ports.0), site("sp", sa, ports.1));
        let kubelet = t.versions.k3s.to_string();
        for (site, name) in [(&franca, "franca"), (&sp, "sp")] {
            register(site, &nodes(&t, name, &kubelet));
        }
        // Karmada's VM runs a single-node K3s of its own (K3s's default ranges).
        let vm = t.multikueue_vm().map(|vm| {
            let address = vm.address.to_string();
            let cidrs = ("10.43.0.0/16".to_string(), "10.42.0.0/16".to_string());
            let site = start(&vm.name, &address, realkube::free_port(&address), cidrs);
            let capacity = json!({"cpu": "4", "memory": "8Gi", "pods": "110"});
            register(&site, &[realkube::kwok_node(&vm.name, true, capacity, &kubelet)]);
            site
        });
        std::fs::write(dir.join("topology.yaml"), &text).unwrap();
        std::fs::write(dir.join("ssh_config"), "Host *\n    HostName 127.0.0.1\n    Port 9\n    ConnectTimeout 2\n")
            .unwrap();
        Lab { dir, franca, sp, vm, text }
    }

    /// The topology the lab runs.
    pub fn topology(&self) -> Topology {
        fabric::topology::load_str("lab.yaml", self.text.clone()).expect("the lab topology").topology
    }
}

pub fn fabric(l: &Lab, args: &[&str]) -> std::process::Output {
    fabric_testkit::run::fabric_in(&l.dir, &l.dir.join("topology.yaml"), &l.dir.join("ssh_config"), args)
}

/// Applies `APPLIED` through fabric's apply engine, as `fabric apply` would one step after the
/// other; panics with the step and fabric's error.
pub async fn apply_all(l: &Lab) {
    apply_steps(l, APPLIED).await
}

/// [`apply_all`] for `keys`.
pub async fn apply_steps(l: &Lab, keys: &[&str]) {
    let t = l.topology();
    for (i, key) in keys.iter().enumerate() {
        apply_step::apply_step(&t, &l.dir, key, &format!("20261206T0000{i:02}Z-1"))
            .await
            .unwrap_or_else(|e| panic!("{key} on the real API servers: {e}"));
    }
}
