//! `cluster_migration: new-cluster` on the lab (issue "Every decision changes the plan"): a new
//! cluster beside the running one, and the cutover that moves the running cluster's nodes into
//! it one at a time. Needs root.
//!
//! The running (previous) cluster and the new one are two test API servers; its three agents are
//! lab hosts with what a Flannel node has (`fabric_testkit::k3s_node`), the new cluster's server
//! is the lab host `franca-lan`. The running cluster runs Deployment `web`, its Pods made by the
//! previous cluster's simulated controllers (`fabric_testkit::workloads`). The lab has no kubelets, so the test plays them: when a host's
//! K3s agent restarts (the stand-in `systemctl` records it), its Node registers in the cluster
//! its agent config names, as a kubelet does on start; in the new one the simulated DaemonSet
//! controller gives it a Cilium agent pod, from the DaemonSet the helm-controller double renders
//! from fabric's HelmChart (`fabric_testkit::daemonset`), and franca-w2's kubelet sees that agent
//! crash-loop until the test says it is healthy.
//!
//! Shown: apply builds the new cluster and leaves the running one untouched (the cutover is
//! explicit); `--step A.5@franca` moves franca-w1, then franca-w2 fails in the new cluster (its
//! Cilium agent never Ready) and is put back: its old agent config restarts it into the previous
//! cluster, where it is registered again and schedulable, and its Node is gone from the new one;
//! franca-w3 is untouched; once healthy, the next cutover moves the two left, and then there is
//! nothing left to do.

use std::collections::BTreeMap;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fabric_testkit::k3s_node::{agent_lines, flannel_node, leftovers, web_running_on, web_workload};
use fabric_testkit::kube_api::{self, TestApiServer};
use fabric_testkit::{lab, run};
use run::out;

const TOPOLOGY: &str = include_str!("data/lab-linux.yaml");
const AGENTS: [(&str, &str); 3] = [("franca-w1", "host1"), ("franca-w2", "host2"), ("franca-w3", "host3")];
/// The previous cluster's server, as the moving nodes' agent configs name it today.
const OLD_SERVER: &str = "https://172.30.1.99:6443";

fn registered(api: &TestApiServer, node: &str) -> bool {
    api.object("v1", "Node", None, node).is_some()
}

fn unschedulable(api: &TestApiServer, node: &str) -> bool {
    api.object("v1", "Node", None, node).is_some_and(|n| n["spec"]["unschedulable"] == true)
}

/// The kubelets: a host whose K3s agent restarted registers its Node in the cluster its config
/// names (in the new one the DaemonSet controller then gives it a Cilium agent pod).
fn kubelets(lab: &lab::Lab, old: &TestApiServer, new: &TestApiServer, stop: &AtomicBool) {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    while !stop.load(Ordering::SeqCst) {
        for (node, host) in AGENTS {
            let o = lab.exec(host, "grep -c 'restart k3s-agent' /var/lib/rancher/systemctl.log 2>/dev/null; grep '^server:' /etc/rancher/k3s/config.yaml");
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            let restarts: usize = text.lines().next().and_then(|l| l.trim().parse().ok()).unwrap_or(0);
            if restarts <= *seen.get(node).unwrap_or(&0) {
                continue;
            }
            seen.insert(node, restarts);
            if text.contains(OLD_SERVER) {
                old.register_nodes(&[node]);
            } else {
                new.register_nodes(&[node]);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_new_cluster_beside_the_running_one_and_a_cutover_node_by_node() {
    let lab = lab::Lab::up("co", "10.226", &["--hosts", "3"], &[]);
    let dir = std::env::temp_dir().join(format!("fabric-cutover-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (new, _sp, _karmada) = kube_api::fabric_apis_without_nodes(&dir);
    let old = TestApiServer::start_blocking(kube_api::shared_schemas());
    old.kubeconfig(&dir.join("franca-previous.yaml"), "franca-previous");
    new.simulate_controllers(Duration::from_millis(100));
    new.register_nodes(&["franca-lan"]);
    // The running cluster: its agents, with their workload (its controllers run: the drain's
    // evictions come back on the Nodes left, and the Pods of a Node that leaves are collected).
    old.simulate_controllers(Duration::from_millis(100));
    for (node, host) in AGENTS {
        old.register_nodes(&[node]);
        flannel_node(&lab, host, "k3s-agent");
        let config = format!("server: {OLD_SERVER}\ntoken-file: /etc/rancher/k3s/token\n");
        let o = lab.exec(
            host,
            &format!(
                "mkdir -p /etc/rancher/k3s; printf '%s' '{config}' > /etc/rancher/k3s/config.yaml; \
                 echo K10old::server:0 > /etc/rancher/k3s/token"
            ),
        );
        assert!(o.status.success(), "{}", out(&o));
    }
    let agents: Vec<&str> = AGENTS.iter().map(|(n, _)| *n).collect();
    // Without its disruption budget here: the last Node to leave the previous cluster takes every
    // replica with it, and a budget would refuse that eviction for ever (as on a real cluster;
    // the in-place test drains under the budget).
    let [deployment, _budget] = web_workload(&agents);
    old.put_raw(deployment);
    let web = web_running_on(&old, &agents);
    let pod = |i: usize| old.object("v1", "Pod", Some("default"), &web[i]);
    // The new cluster's server: K3s there already (no bundle in this topology), with its token.
    let o = lab.exec(
        "franca-lan",
        "mkdir -p /var/lib/rancher/k3s/server && echo K10new::server:1 > /var/lib/rancher/k3s/server/node-token",
    );
    assert!(o.status.success());
    flannel_node(&lab, "franca-lan", "k3s");
    let agents = agent_lines(&AGENTS);
    let previous = format!(
        "      previous: {{ kubeconfig: {{ path: {}, context: franca-previous }} }}\n",
        dir.join("franca-previous.yaml").display()
    );
    let topology = TOPOLOGY
        .replace("cluster_migration: {}", "cluster_migration: { franca: new-cluster }")
        .replace(
            "      name: franca\n      id: 1\n",
            &format!("      name: franca\n      id: 1\n      existing: true\n{previous}"),
        )
        .replace("ssh: { host: franca-lan } }\n", &format!("ssh: {{ host: franca-lan }} }}\n{agents}"));
    assert!(topology.contains("previous:") && topology.contains("franca-w3"), "{topology}");
    std::fs::write(dir.join("topology.yaml"), kube_api::with_test_kubeconfigs(&topology, &dir)).unwrap();
    let fabric =
        |args: &[&str]| -> Output { run::fabric_in(&dir, &dir.join("topology.yaml"), &lab.ssh_config(), args) };
    let on = |host: &str, cmd: &str| String::from_utf8_lossy(&lab.exec(host, cmd).stdout).to_string();
    let all = "flannel.1 cni0 FLANNEL-FWD FLANNEL-POSTRTG KUBE-SERVICES subnet.env conflist";

    // franca-w2's kubelet will see the Cilium agent exit at start in the new cluster.
    new.set_crash_loop("franca-w2", "cilium-agent", true);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| kubelets(&lab, &old, &new, &stop));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // 1. The new cluster is built; the running one is not touched, and the cutover waits.
            let o = fabric(&["apply", "--phase", "A", "--site", "franca", "--auto-approve", "--wait-timeout", "20"]);
            let text = out(&o);
            assert!(o.status.success(), "{text}");
            assert!(!text.contains("A.5@franca"), "the cutover is explicit: {text}");
            assert!(on("franca-lan", "cat /etc/rancher/k3s/config.yaml").contains("flannel-backend: none"));
            for (node, host) in AGENTS {
                assert_eq!(leftovers(&lab, host), all, "{host}");
                assert!(registered(&old, node) && !unschedulable(&old, node), "{node}");
            }
            assert!(
                !old.requests().iter().any(|r| !r.starts_with("GET ")),
                "the running cluster got a write: {:?}",
                old.requests()
            );

            // 2. The cutover: franca-w1 moves, franca-w2 fails in the new cluster and goes back.
            let o = fabric(&["apply", "--step", "A.5@franca", "--auto-approve", "--wait-timeout", "8"]);
            let text = out(&o);
            assert_eq!(o.status.code(), Some(1), "{text}");
            assert!(text.contains("step A.5@franca/franca-w2 failed and was reverted"), "{text}");
            assert!(text.contains("the Cilium agent on the node is not Ready (CrashLoopBackOff)"), "{text}");
            assert!(!registered(&old, "franca-w1") && registered(&new, "franca-w1"), "franca-w1 moved");
            assert!(!unschedulable(&new, "franca-w1"));
            assert_eq!(leftovers(&lab, "host1"), "");
            assert!(on("host1", "cat /etc/rancher/k3s/config.yaml").contains("server: https://172.30.1.10:6443"));
            assert!(pod(0).is_none(), "franca-w1 was not drained");
            // franca-w2: back in the previous cluster, schedulable, its old config; gone from the new one.
            assert!(registered(&old, "franca-w2") && !unschedulable(&old, "franca-w2"), "franca-w2 back");
            assert!(!registered(&new, "franca-w2"), "franca-w2 left a Node in the new cluster");
            assert!(on("host2", "cat /etc/rancher/k3s/config.yaml").contains(OLD_SERVER));
            // franca-w3: untouched.
            assert_eq!(leftovers(&lab, "host3"), all);
            assert!(registered(&old, "franca-w3") && !unschedulable(&old, "franca-w3"));
            assert!(pod(2).is_some(), "franca-w3 was drained");
            assert!(on("host3", "cat /etc/rancher/k3s/config.yaml").contains(OLD_SERVER));

            // 3. Healthy now: the next cutover moves the two left; then nothing is left to do.
            new.set_crash_loop("franca-w2", "cilium-agent", false);
            let o = fabric(&["apply", "--step", "A.5@franca", "--auto-approve", "--wait-timeout", "20"]);
            assert!(o.status.success(), "{}", out(&o));
            for (node, host) in AGENTS {
                assert!(!registered(&old, node) && registered(&new, node) && !unschedulable(&new, node), "{node}");
                assert!(on(host, "cat /etc/rancher/k3s/config.yaml").contains("172.30.1.10"), "{host}");
                assert!(on(host, "cat /etc/rancher/k3s/fabric-join-token").contains("K10new"), "{host}: the new token");
            }
            let o = fabric(&["plan", "--step", "A.5@franca", "--detailed-exitcode"]);
            assert_eq!(o.status.code(), Some(0), "{}", out(&o));
        }));
        stop.store(true, Ordering::SeqCst);
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}
