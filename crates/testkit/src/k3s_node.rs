//! K3s nodes as they are before fabric moves them to Cilium, made for real on lab hosts: what a
//! Flannel node has (a `flannel.1` VXLAN interface, the `cni0` bridge, Flannel's and kube-proxy's
//! iptables chains, `/run/flannel/subnet.env`, K3s's Flannel CNI configuration), a stand-in
//! `systemctl` (the lab has no systemd) that records restarts, and the workload a drain evicts
//! ([`web_workload`]: a Deployment and its disruption budget, whose Pods the test API server's
//! controllers make).
//!
//! What it follows: K3s writes its Flannel CNI configuration as `10-flannel.conflist` in the
//! agent's CNI directory, network name `cbr0`, and uses Flannel's `vxlan` backend by default
//! (k3s-io/k3s `pkg/agent/flannel/setup.go` `createCNIConf`, `setup_linux.go` `cniConf`,
//! `vxlanBackend`). Deviations, taken from Flannel's defaults and not checked against
//! flannel-io/flannel's source in the session that wrote this: the VXLAN device `flannel.1`
//! (VNI 1, port 8472), the bridge `cni0`, the subnet file `/run/flannel/subnet.env`, the chain
//! names `FLANNEL-FWD`/`FLANNEL-POSTRTG` and kube-proxy's `KUBE-SERVICES`. The conflist's body
//! is a stub (only its name), no Flannel or kube-proxy runs, and `systemctl` only records. What
//! fabric does about it: its cleanup after the move to Cilium removes these by name, and its lab
//! test proves only that those names are gone; a real K3s node's leftovers are not covered.

use serde_json::json;

use crate::lab;
use crate::run::out;

pub const SYSTEMCTL: &str = "#!/bin/sh\n# stand-in systemctl: a K3s unit exists when its file does; restarts are recorded\n\
case \"$1\" in\ncat) [ -f \"/etc/systemd/system/$2.service\" ] ;;\n\
restart) echo \"restart $2\" >>/var/lib/rancher/systemctl.log ;;\n*) exit 0 ;;\nesac\n";

/// What a node of a Flannel cluster has on the host, made for real in the host's namespace.
pub fn flannel_node(lab: &lab::Lab, host: &str, unit: &str) {
    let script = format!(
        "set -e; cat > /usr/local/bin/systemctl <<'EOF'\n{SYSTEMCTL}EOF\nchmod 755 /usr/local/bin/systemctl; \
         mkdir -p /etc/systemd/system /var/lib/rancher/k3s/agent/etc/cni/net.d /run/flannel; \
         printf '[Service]\\nExecStart=/usr/local/bin/k3s\\n' > /etc/systemd/system/{unit}.service; \
         ip link add flannel.1 type vxlan id 1 dstport 8472; ip link add cni0 type bridge; \
         iptables -N FLANNEL-FWD; iptables -A FORWARD -s 10.42.0.0/16 -m comment --comment 'flanneld forward' -j FLANNEL-FWD; \
         iptables -t nat -N FLANNEL-POSTRTG; iptables -t nat -A POSTROUTING -m comment --comment 'flanneld masq' -j FLANNEL-POSTRTG; \
         iptables -t nat -N KUBE-SERVICES; iptables -t nat -A PREROUTING -m comment --comment 'kubernetes service portals' -j KUBE-SERVICES; \
         iptables -A INPUT -p tcp --dport 22 -m comment --comment 'lab keeps this' -j ACCEPT; \
         echo 'FLANNEL_NETWORK=10.42.0.0/16' > /run/flannel/subnet.env; \
         echo '{{\"name\":\"cbr0\"}}' > /var/lib/rancher/k3s/agent/etc/cni/net.d/10-flannel.conflist"
    );
    let o = lab.exec(host, &script);
    assert!(o.status.success(), "{host}: {}", out(&o));
}

/// What is left of Flannel on a host, one word each.
pub fn leftovers(lab: &lab::Lab, host: &str) -> String {
    let o = lab.exec(
        host,
        "for l in flannel.1 cni0; do ip link show dev $l >/dev/null 2>&1 && echo $l; done; \
         iptables-save | grep -o -e FLANNEL-FWD -e FLANNEL-POSTRTG -e KUBE-SERVICES | sort -u; \
         [ -e /run/flannel/subnet.env ] && echo subnet.env; \
         [ -e /var/lib/rancher/k3s/agent/etc/cni/net.d/10-flannel.conflist ] && echo conflist; true",
    );
    String::from_utf8_lossy(&o.stdout).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The workload a running cluster has, as its operators wrote it: Deployment `web` in `default`,
/// one replica per node of `nodes` (required node affinity to their hostnames), and a
/// PodDisruptionBudget keeping all but one of them available. Its Pods are the API double's
/// (Deployment → ReplicaSet → Pod, `crate::workloads`), so a drain evicts what a ReplicaSet
/// made, the budget can refuse an eviction (429) until a replacement is Ready, and an evicted Pod
/// comes back on another Node.
pub fn web_workload(nodes: &[&str]) -> [serde_json::Value; 2] {
    let n = nodes.len();
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}]}}});
    [
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": n, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"affinity": affinity, "containers": [{"name": "web", "image": "registry.invalid/web:1"}]}}}}),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": n.saturating_sub(1), "selector": {"matchLabels": {"app": "web"}}}}),
    ]
}

/// The `web` Pods of `api`, as (name, node, Ready), by name.
pub fn web_pods(api: &crate::kube_api::TestApiServer) -> Vec<(String, String, bool)> {
    crate::workloads::app_pods(&api.objects(), "default", "web")
}

/// Waits (10 s at most) until `web` runs one Ready Pod on each of `nodes`; returns the Pod on
/// each, in the order of `nodes`.
pub fn web_running_on(api: &crate::kube_api::TestApiServer, nodes: &[&str]) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let pods = web_pods(api);
        let on: Vec<Option<String>> = nodes
            .iter()
            .map(|n| pods.iter().find(|(_, node, ready)| node == n && *ready).map(|(p, _, _)| p.clone()))
            .collect();
        if pods.len() == nodes.len() && on.iter().all(Option::is_some) {
            return on.into_iter().flatten().collect();
        }
        assert!(std::time::Instant::now() < deadline, "web never ran on {nodes:?}: {pods:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The topology's node lines for agents `(node name, lab host)` of Franca's LAN, as the lab tests
/// add them to `tests/data/lab-linux.yaml` after its control-plane node.
pub fn agent_lines(agents: &[(&str, &str)]) -> String {
    agents
        .iter()
        .enumerate()
        .map(|(i, (n, host))| {
            format!("        - {{ name: {n}, role: worker, address: 172.30.1.{}, ssh: {{ host: {host} }} }}\n", 21 + i)
        })
        .collect()
}
