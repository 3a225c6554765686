//! A running Flannel cluster moved to Cilium in place, node by node, on the lab (issue "Every
//! decision changes the plan": `cluster_migration: in-place`). Needs root.
//!
//! Franca's cluster "runs today": four lab hosts with sshd are its nodes (the control plane and
//! three agents), each with what a Flannel node really has (a `flannel.1` VXLAN interface, the
//! `cni0` bridge, Flannel's and kube-proxy's iptables chains, `/run/flannel/subnet.env`, K3s's
//! Flannel CNI configuration) and a stand-in `systemctl` (the lab has no systemd) that records
//! restarts. The cluster's API is the test API server: Nodes as the kubelets register them, the
//! Cilium agent pods the simulated DaemonSet controller makes from the DaemonSet the
//! helm-controller double renders from fabric's HelmChart (`fabric_testkit::daemonset`; franca-w2's
//! kubelet sees the agent crash-loop), and the workload a drain evicts: Deployment `web`, one
//! replica per agent, under a PodDisruptionBudget that keeps two available; its Pods are made by
//! the simulated Deployment and ReplicaSet controllers and placed by the simulated scheduler
//! (`fabric_testkit::workloads`), so an evicted Pod comes back on another Node and the budget
//! refuses an eviction (429, retried by the drain) until its replacement is Ready.
//!
//! Shown: the plan has one instance per node after the site's; an apply moves the control plane
//! and the first agent, and stops at the agent whose Cilium agent never gets Ready: that node is
//! left cordoned (its old network cannot come back), the node after it is untouched (Flannel's
//! interfaces and rules still there, schedulable, its pods in place); once the agent is healthy,
//! the next apply finishes the two nodes left, and a plan after it is no change.

use std::process::Output;

use fabric_testkit::k3s_node::{agent_lines, flannel_node, leftovers, web_pods, web_running_on, web_workload};
use fabric_testkit::{kube_api, lab, run};
use run::out;

const TOPOLOGY: &str = include_str!("data/lab-linux.yaml");
const AGENTS: [(&str, &str); 3] = [("franca-w1", "host1"), ("franca-w2", "host2"), ("franca-w3", "host3")];

/// The Cilium agent pods, as (node, Ready), by node.
fn cilium_agents(api: &kube_api::TestApiServer) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = api
        .objects()
        .into_iter()
        .filter(|o| o["kind"] == "Pod" && o["metadata"]["labels"]["k8s-app"] == "cilium")
        .map(|p| (p["spec"]["nodeName"].as_str().unwrap_or_default().to_string(), fabric_testkit::daemonset::ready(&p)))
        .collect();
    out.sort();
    out
}

fn unschedulable(api: &kube_api::TestApiServer, node: &str) -> bool {
    api.object("v1", "Node", None, node).unwrap()["spec"]["unschedulable"] == true
}

#[test]
fn a_running_cluster_moves_to_cilium_node_by_node_and_stops_at_the_first_that_fails() {
    let lab = lab::Lab::up("im", "10.228", &["--hosts", "3"], &[]);
    let dir = std::env::temp_dir().join(format!("fabric-inplace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, _sp, _karmada) = kube_api::fabric_apis_without_nodes(&dir);
    franca.simulate_controllers(std::time::Duration::from_millis(100));
    let nodes: Vec<&str> = std::iter::once("franca-lan").chain(AGENTS.iter().map(|(n, _)| *n)).collect();
    franca.register_nodes(&nodes);
    // franca-w2's kubelet will see the Cilium agent exit at start (its Pod waits in
    // CrashLoopBackOff), whatever Pod the DaemonSet puts there.
    franca.set_crash_loop("franca-w2", "cilium-agent", true);
    // The workload running today, one Pod per agent (the controllers' Pods, by their names).
    let agents: Vec<&str> = AGENTS.iter().map(|(n, _)| *n).collect();
    for o in web_workload(&agents) {
        franca.put_raw(o);
    }
    let web = web_running_on(&franca, &agents);
    let pod = |i: usize| franca.object("v1", "Pod", Some("default"), &web[i]);
    flannel_node(&lab, "franca-lan", "k3s");
    for (_, host) in AGENTS {
        flannel_node(&lab, host, "k3s-agent");
    }
    // Franca runs today, with Flannel; in-place was decided; its agents are lab hosts 1–3.
    let agents = agent_lines(&AGENTS);
    let topology = TOPOLOGY
        .replace("cluster_migration: {}", "cluster_migration: { franca: in-place }")
        .replace("      name: franca\n      id: 1\n", "      name: franca\n      id: 1\n      existing: true\n")
        .replace("ssh: { host: franca-lan } }\n", &format!("ssh: {{ host: franca-lan }} }}\n{agents}"));
    assert!(topology.contains("existing: true") && topology.contains("franca-w3"), "{topology}");
    std::fs::write(dir.join("topology.yaml"), kube_api::with_test_kubeconfigs(&topology, &dir)).unwrap();
    let fabric =
        |args: &[&str]| -> Output { run::fabric_in(&dir, &dir.join("topology.yaml"), &lab.ssh_config(), args) };
    let on = |host: &str, cmd: &str| String::from_utf8_lossy(&lab.exec(host, cmd).stdout).to_string();
    let all = "flannel.1 cni0 FLANNEL-FWD FLANNEL-POSTRTG KUBE-SERVICES subnet.env conflist";
    assert_eq!(leftovers(&lab, "host3"), all, "the stand-in Flannel node");

    // 1. The plan: the site's instance, then each node's, in order, with what is left on it.
    let o = fabric(&["plan", "--phase", "A", "--site", "franca"]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    let order: Vec<usize> = [
        "A.2@franca ",
        "A.2@franca/franca-lan",
        "A.2@franca/franca-w1",
        "A.2@franca/franca-w2",
        "A.2@franca/franca-w3",
    ]
    .iter()
    .map(|k| text.find(k).unwrap_or_else(|| panic!("{k}: {text}")))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(text.contains("~ host.franca-w3/command:cni-migration"), "{text}");

    // 2. The apply stops at franca-w2, whose Cilium agent never gets Ready.
    let o = fabric(&["apply", "--phase", "A", "--site", "franca", "--auto-approve", "--wait-timeout", "8"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("franca-w2 is left cordoned"), "{text}");
    assert!(text.contains("the Cilium agent on the node is not Ready (CrashLoopBackOff)"), "{text}");
    assert!(!text.contains("Apply complete"), "{text}");
    // franca-w2 held its own Pod and franca-w1's replacement (the scheduler's least-loaded Node):
    // evicting both at once would break the budget, so the drain waited for the replacements.
    assert!(text.contains("Cannot evict pod as it would violate the pod's disruption budget"), "{text}");
    // The nodes before it moved: nothing of Flannel left, uncordoned, their K3s restarted.
    for (node, host, unit) in [("franca-lan", "franca-lan", "k3s"), ("franca-w1", "host1", "k3s-agent")] {
        assert_eq!(leftovers(&lab, host), "", "{host} keeps Flannel's leftovers");
        assert!(!unschedulable(&franca, node), "{node} stays cordoned");
        assert_eq!(on(host, "cat /var/lib/rancher/systemctl.log").trim(), format!("restart {unit}"), "{host}");
        assert!(on(host, "iptables-save").contains("lab keeps this"), "{host}: a rule that is not Flannel's went");
    }
    assert!(
        on("franca-lan", "cat /etc/rancher/k3s/config.yaml").contains("flannel-backend: none"),
        "the server's config"
    );
    assert!(pod(0).is_none(), "franca-w1 was not drained");
    // The one that failed: drained and left cordoned.
    assert!(unschedulable(&franca, "franca-w2"));
    assert!(pod(1).is_none(), "franca-w2 was not drained");
    assert!(web_pods(&franca).iter().all(|(_, node, _)| node != "franca-w2"), "{:?}", web_pods(&franca));
    // The one after it: untouched.
    assert_eq!(leftovers(&lab, "host3"), all);
    assert!(!unschedulable(&franca, "franca-w3"));
    assert!(pod(2).is_some(), "franca-w3 was drained");
    assert_eq!(on("host3", "cat /var/lib/rancher/systemctl.log 2>/dev/null"), "");
    // The DaemonSet made an agent per node; DaemonSets' pods stay where they are (kubectl drain
    // --ignore-daemonsets).
    let want = [("franca-lan", true), ("franca-w1", true), ("franca-w2", false), ("franca-w3", true)];
    assert_eq!(cilium_agents(&franca), want.map(|(n, r)| (n.to_string(), r)));

    // 3. The plan says what is left: franca-w2 and franca-w3, nothing before them.
    let o = fabric(&["plan", "--phase", "A", "--site", "franca", "--detailed-exitcode"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("~ host.franca-w2/command:cni-migration")
            && text.contains("~ host.franca-w3/command:cni-migration"),
        "{text}"
    );
    assert!(text.contains("-node: not migrated\n      +node: migrated"), "franca-w2 is planned again: {text}");
    assert!(!text.contains("~ host.franca-w1/command") && !text.contains("~ host.franca-lan/command"), "{text}");

    // 4. franca-w2's agent healthy again: the next apply finishes both, and then nothing is left.
    franca.set_crash_loop("franca-w2", "cilium-agent", false);
    let o = fabric(&["apply", "--phase", "A", "--site", "franca", "--auto-approve", "--wait-timeout", "20"]);
    assert!(o.status.success(), "{}", out(&o));
    for (node, host) in AGENTS {
        assert_eq!(leftovers(&lab, host), "", "{host}");
        assert!(!unschedulable(&franca, node), "{node}");
    }
    assert!(pod(2).is_none(), "franca-w3 was not drained");
    // The workload ran through it: its ReplicaSet made the evicted Pods again elsewhere.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while web_pods(&franca).iter().filter(|(_, _, ready)| *ready).count() < 3 {
        assert!(std::time::Instant::now() < deadline, "{:?}", web_pods(&franca));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(cilium_agents(&franca).iter().all(|(_, ready)| *ready), "{:?}", cilium_agents(&franca));
    let o = fabric(&["plan", "--phase", "A", "--site", "franca", "--detailed-exitcode"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "NOT COVERED: not modelled by the K3s node double (fabric_testkit::k3s_node): a real K3s node's Flannel and kube-proxy leftovers; the double makes the names fabric's cleanup removes (flannel.1, cni0, FLANNEL-*, KUBE-SERVICES, subnet.env, 10-flannel.conflist), so a leftover fabric does not know of is not seen"]
fn not_covered_a_real_k3s_nodes_flannel_leftovers() {
    panic!("not covered by the K3s node double: needs a real K3s node running Flannel");
}
