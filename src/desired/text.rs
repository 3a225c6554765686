//! Text artifacts: K3s configuration files and wg-quick files for Linux routers (TensorZero's
//! `tensorzero.toml` is `desired::tensorzero`'s).

use std::fmt::Write;

use serde_json::{Value, json};

use super::objects::EXTERNAL_TAINT;
use super::vyos::{endpoint, keepalive, public_key_placeholder};
use crate::topology::Topology;
use crate::topology::model::*;

/// `/etc/rancher/k3s/config.yaml` of a site's servers (A.1/A.2).
pub fn k3s_server_config(s: &Site) -> Value {
    let mut disable = vec![];
    if !s.cluster.servicelb {
        disable.push(json!("servicelb"));
    }
    let mut v = json!({
        "cluster-cidr": s.cluster.pod_cidr.to_string(),
        "service-cidr": s.cluster.service_cidr.to_string(),
        "flannel-backend": "none",
        "disable-network-policy": true,
        "disable-kube-proxy": !s.cluster.kube_proxy,
        "tls-san": [s.cluster.api_address.to_string()],
    });
    if !disable.is_empty() {
        v["disable"] = Value::Array(disable);
    }
    v
}

/// `/etc/rancher/k3s/config.yaml` of Karmada's dedicated VM (`karmada_host: dedicated-vm`): a
/// single-node K3s that only hosts Karmada's control plane, so K3s's own networking is kept
/// (Flannel; the VM is no Cluster Mesh member), its certificate names the VM's address, and
/// Traefik is left out (Karmada's API is a NodePort).
pub fn k3s_vm_config(vm: &crate::topology::model::KarmadaVm) -> Value {
    json!({
        "node-ip": vm.address.to_string(),
        "tls-san": [vm.address.to_string()],
        "write-kubeconfig-mode": "0600",
        "disable": ["traefik"],
    })
}

/// `/etc/rancher/k3s/config.yaml` of a VM or bare-metal host joining as a tainted agent (A.3/A.4).
pub fn k3s_agent_config(s: &Site, w: &ExternalWorkload) -> Value {
    let labels: Vec<Value> = super::workload_labels(w).iter().map(|(k, v)| json!(format!("{k}={v}"))).collect();
    json!({
        "server": format!("https://{}:{}", s.cluster.api_address, s.cluster.api_port.0),
        // The join token is copied from the server at apply time, never rendered.
        "token-file": "/etc/rancher/k3s/token",
        "node-ip": w.address.to_string(),
        "node-taint": [EXTERNAL_TAINT],
        "node-label": labels,
    })
}

/// K3s agent config of a node moved into a new cluster by the cutover (A.5): the new cluster's
/// server, its join token (copied at apply time, never rendered), the node's address.
pub fn k3s_moved_agent_config(s: &Site, address: &str, token_file: &str) -> Value {
    json!({
        "server": format!("https://{}:{}", s.cluster.api_address, s.cluster.api_port.0),
        "token-file": token_file,
        "node-ip": address,
    })
}

/// Text for a wg-quick comment line: wg-quick reads a file line by line, so a line break in a
/// name would start a line of its own (`PostUp = …` runs as root). Control characters (the
/// topology refuses them) become U+FFFD.
pub fn wg_comment(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { '\u{fffd}' } else { c }).collect()
}

/// wg-quick file of a Linux router (B.1). The private key stays on the host.
pub fn wireguard_conf(t: &Topology, s: &Site) -> String {
    let wg = &s.router.wireguard;
    let mut out = format!(
        "# WireGuard {} of site `{}` in fabric `{}` (step B.1).\n\
         # The private key is generated on the host (/etc/wireguard/{}.key, mode 0600) and never copied.\n\
         [Interface]\nAddress = {}\nListenPort = {}\nMTU = {}\nPostUp = wg set %i private-key /etc/wireguard/%i.key\n\
         PostUp = sysctl -q -w net.ipv4.ip_forward=1\n",
        wg.interface,
        wg_comment(&s.name),
        wg_comment(&t.name),
        wg.interface,
        wg.address,
        wg.listen_port.0,
        wg.tunnel_mtu()
    );
    for p in t.sites.iter().filter(|p| p.name != s.name) {
        let _ = write!(
            out,
            "\n[Peer]\n# {}\nPublicKey = {}\nAllowedIPs = {}/32, {}\n",
            wg_comment(&p.name),
            public_key_placeholder(&p.name),
            p.router.wireguard.address.addr,
            p.lan
        );
        if let Some(addr) = endpoint(t, p) {
            let _ = writeln!(out, "Endpoint = {addr}:{}", p.router.wireguard.listen_port.0);
        }
        if let Some(k) = keepalive(t, s) {
            let _ = writeln!(out, "PersistentKeepalive = {k}");
        }
    }
    out
}
