//! Text artifacts: K3s configuration files, wg-quick files for Linux routers, TensorZero TOML.

use std::fmt::Write;

use serde_json::{Value, json};

use super::objects::EXTERNAL_TAINT;
use super::vyos::{endpoint, keepalive, public_key_placeholder};
use crate::topology::Topology;
use crate::topology::gateway::CLOUD_VARIANT;
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

fn toml_str(s: &str) -> String {
    // TOML basic strings share JSON's escapes for everything fabric writes.
    serde_json::to_string(s).expect("strings serialize")
}

/// Name of the per-site service the gateway addresses (a Cilium global service).
pub fn site_service(service: &str, site: &str) -> String {
    format!("{service}-{site}")
}

/// The sites a gateway model's function has a variant for: its routes, then the fallback-only
/// sites, each once.
pub fn gateway_sites(m: &GatewayModel) -> Vec<&str> {
    let mut sites: Vec<&str> = vec![];
    for s in m.routes.iter().map(|r| r.site.as_str()).chain(m.fallback.iter().map(String::as_str)) {
        if !sites.contains(&s) {
            sites.push(s);
        }
    }
    sites
}

/// `tensorzero.toml`: a model per (gateway model, site), and a function per gateway model whose
/// variants are the sites, sampled by the A/B weights (`candidate_variants`). TensorZero moves
/// on to the remaining candidates when one fails, then to `fallback_variants` in order: the
/// fallback-only sites, then the cloud model. A variant in both lists is refused
/// (tensorzero-core/src/experimentation/mod.rs `check_duplicates_across`), so routes are never
/// written as fallbacks (validate refuses them at the topology's line too). The rate limit is
/// one rule per value of the tag (`tensorzero::each`).
pub fn tensorzero_toml(t: &Topology, g: &Gateway) -> String {
    let mut out = format!(
        "# TensorZero gateway configuration of fabric `{}`.\n\
         # Each site's backend is reached through the Cilium global service <service>-<site>.\n\n\
         [gateway]\nbind_address = \"0.0.0.0:3000\"\n",
        t.name
    );
    for (index, m) in g.models.iter().enumerate() {
        let Some(svc) = t.services.iter().find(|s| s.name == m.service) else { continue };
        let sites = gateway_sites(m);
        // Fallback-only sites, in order, once each.
        let fallback: Vec<&str> = sites.iter().copied().filter(|s| !m.routes.iter().any(|r| r.site == *s)).collect();
        for site in &sites {
            let model = toml_str(&format!("{}-{}", m.name, site));
            let _ = write!(
                out,
                "\n[models.{model}]\nrouting = [{site}]\n\n[models.{model}.providers.{site}]\ntype = \"vllm\"\n\
                 api_base = {base}\nmodel_name = {name}\napi_key_location = \"none\"\n",
                site = toml_str(site),
                base = toml_str(&format!(
                    "http://{}.{}.svc.cluster.local:{}/v1/",
                    site_service(&svc.name, site),
                    svc.namespace,
                    svc.port.0
                )),
                name = toml_str(&m.name),
            );
        }
        let cloud = CLOUD_VARIANT;
        if let Some(c) = &m.cloud {
            let model = toml_str(&format!("{}-{cloud}", m.name));
            let _ = write!(
                out,
                "\n[models.{model}]\nrouting = [{v}]\n\n[models.{model}.providers.{v}]\ntype = {ty}\n\
                 model_name = {name}\napi_key_location = {key}\n",
                v = toml_str(cloud),
                ty = toml_str(c.provider.tensorzero_type()),
                name = toml_str(&c.model),
                key = toml_str(&format!("env::{}", super::tensorzero::cloud_key_env(index))),
            );
        }
        let f = toml_str(&m.name);
        let _ = write!(out, "\n[functions.{f}]\ntype = \"chat\"\n");
        let variants = sites.iter().copied().chain(m.cloud.as_ref().map(|_| cloud));
        let max_tokens = g.rate_limit.as_ref().and_then(|r| r.max_tokens);
        for v in variants {
            let _ = write!(
                out,
                "\n[functions.{f}.variants.{name}]\ntype = \"chat_completion\"\nmodel = {model}\n",
                name = toml_str(v),
                model = toml_str(&format!("{}-{}", m.name, v)),
            );
            if let Some(n) = max_tokens {
                let _ = writeln!(out, "max_tokens = {n}");
            }
        }
        let weights: Vec<String> = m.routes.iter().map(|r| format!("{} = {:?}", toml_str(&r.site), r.weight)).collect();
        let _ = write!(
            out,
            "\n[functions.{f}.experimentation]\ntype = \"static\"\ncandidate_variants = {{ {} }}\n",
            weights.join(", ")
        );
        let fb: Vec<String> = fallback.iter().copied().chain(m.cloud.as_ref().map(|_| cloud)).map(toml_str).collect();
        if !fb.is_empty() {
            let _ = writeln!(out, "fallback_variants = [{}]", fb.join(", "));
        }
    }
    if let Some(rl) = &g.rate_limit {
        // tensorzero-core/src/config/rate_limiting.rs: `<resource>_per_<interval>` keys, a
        // `priority` (or `always`), and scopes `{ tag_key, tag_value = "tensorzero::each" }`.
        let _ = write!(
            out,
            "\n# One bucket per value of the `{tag}` tag; kept in {backend:?} (URL from the environment).\n\
             [rate_limiting]\nenabled = true\n\n[[rate_limiting.rules]]\npriority = 0\n",
            tag = rl.tag,
            backend = rl.backend,
        );
        // Only names of the grammar validate accepts (anything else was refused there).
        for (name, n) in rl.limits.iter().filter(|(k, _)| crate::topology::gateway::is_rate_limit(k)) {
            let _ = writeln!(out, "{name} = {n}");
        }
        let _ = writeln!(out, "scope = [{{ tag_key = {}, tag_value = \"tensorzero::each\" }}]", toml_str(&rl.tag));
    }
    out
}
