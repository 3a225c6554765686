//! Semantic rules: what the schema cannot say (names, references, overlaps, quotas, versions).
//!
//! Each rule is a function from the typed topology to problems naming paths; `check` runs them
//! all, so one `validate` shows every problem. Rules never stop early.

use std::collections::{BTreeMap, HashMap};

use super::gpus::site_gpus;
use super::model::*;
use super::net::Cidr;
use super::problem::Problem;
use super::tree::Path;
use crate::path;

/// Runs every rule.
pub fn check(t: &Topology) -> Vec<Problem> {
    let mut out = Vec::new();
    for rule in RULES {
        rule(t, &mut out);
    }
    out
}

type Rule = fn(&Topology, &mut Vec<Problem>);

const RULES: &[Rule] = &[
    format_version,
    dns_names,
    ssh_hosts,
    unique_names,
    references,
    prefixes_do_not_overlap,
    cluster_ids,
    tunnel_addresses,
    addresses_inside_lans,
    nodes,
    gpu_quotas,
    super::queues::check,
    super::queues::manager_local_queue,
    super::gpus::gpu_sharing,
    super::gpus::gpu_capacity,
    weights,
    versions,
    decisions,
    super::airgap::check,
    super::gateway::check,
    placement_classes,
    argocd_path,
    service_parts,
];

/// The folders `fabric render` writes what fabric applies into (relative to the output).
pub const RENDERED_FOLDERS: &[&str] = &["apps", "config"];

/// What ArgoCD syncs must not be what fabric applies: the repository folder ArgoCD syncs may
/// not be one of fabric's rendered folders, lie in one, or hold one (ArgoCD would then prune
/// and self-heal the same objects fabric applies, and choke on values files and HelmCharts).
fn argocd_path(t: &Topology, out: &mut Vec<Problem>) {
    let path = t.federation.argocd.path.trim_matches('/');
    let clash = RENDERED_FOLDERS.iter().find(|f| {
        path.is_empty() || path == **f || path.starts_with(&format!("{f}/")) || f.starts_with(&format!("{path}/"))
    });
    if let Some(folder) = clash {
        out.push(
            Problem::error(
                "topology::argocd-path",
                path!["federation", "argocd", "path"],
                format!("ArgoCD would sync `{folder}/`, which fabric renders and applies itself"),
            )
            .label("overlaps fabric's folder")
            .help("point ArgoCD at the folder of the services' manifests only, e.g. `path: services`"),
        );
    }
}

fn format_version(t: &Topology, out: &mut Vec<Problem>) {
    if t.version != 1 {
        out.push(
            Problem::error(
                "topology::version",
                path!["version"],
                format!("topology format version {} is not supported", t.version),
            )
            .label("unsupported")
            .help("this fabric reads format version 1; write `version: 1`"),
        );
    }
}

/// RFC 1123 label: what Kubernetes accepts as a name and what a host name may be.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn dns_help(s: &str) -> String {
    let fixed: String = s
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .trim_matches('-')
        .chars()
        .take(63)
        .collect();
    let mut h = "names become Kubernetes and host names: lowercase letters, digits and '-', \
                 starting and ending with a letter or digit, at most 63 characters"
        .to_string();
    if !fixed.is_empty() && fixed != s {
        h.push_str(&format!(" (e.g. `{fixed}`)"));
    }
    h
}

/// Every name that becomes a Kubernetes object or host name, with its path.
fn named(t: &Topology) -> Vec<(&str, Path, &'static str)> {
    let mut v: Vec<(&str, Path, &'static str)> = vec![];
    for (i, s) in t.sites.iter().enumerate() {
        let sp = path!["sites", i];
        v.push((&s.name, sp.key("name"), "site name"));
        v.push((&s.router.name, sp.key("router").key("name"), "router name"));
        v.push((&s.cluster.name, sp.key("cluster").key("name"), "cluster name"));
        for (j, n) in s.cluster.nodes.iter().enumerate() {
            let np = sp.key("cluster").key("nodes").index(j);
            v.push((&n.name, np.key("name"), "node name"));
            if let Some(g) = &n.gpu {
                v.push((&g.model, np.key("gpu").key("model"), "GPU model"));
            }
        }
        for (j, w) in s.external_workloads.iter().enumerate() {
            let wp = sp.key("external_workloads").index(j);
            v.push((&w.name, wp.key("name"), "host name"));
            if let Some(g) = &w.gpu {
                v.push((&g.model, wp.key("gpu").key("model"), "GPU model"));
            }
        }
        for (j, q) in s.queues.iter().enumerate() {
            let qp = sp.key("queues").index(j);
            v.push((&q.name, qp.key("name"), "queue name"));
            for (k, l) in q.local_queues.iter().enumerate() {
                let lp = qp.key("local_queues").index(k);
                v.push((&l.name, lp.key("name"), "local queue name"));
                v.push((&l.namespace, lp.key("namespace"), "namespace"));
            }
        }
    }
    for (i, c) in t.placement.iter().enumerate() {
        v.push((&c.name, path!["placement", i, "name"], "placement class name"));
    }
    for (i, s) in t.services.iter().enumerate() {
        v.push((&s.name, path!["services", i, "name"], "service name"));
        v.push((&s.namespace, path!["services", i, "namespace"], "namespace"));
    }
    if let Some(vm) = &t.federation.karmada.vm {
        v.push((&vm.name, path!["federation", "karmada", "vm", "name"], "VM name"));
    }
    v.push((&t.federation.argocd.namespace, path!["federation", "argocd", "namespace"], "namespace"));
    v
}

/// A Kubernetes label value: at most 63 characters, alphanumerics with `-`, `_` and `.` inside.
/// The topology's `name` is one: fabric labels every object it makes with it.
pub fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() <= 63
        && (b.is_empty()
            || (b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))))
}

fn dns_names(t: &Topology, out: &mut Vec<Problem>) {
    if t.name.is_empty() || !is_label_value(&t.name) {
        out.push(
            Problem::error("topology::name", path!["name"], format!("the fabric's name `{}` is not a label value", t.name))
                .label("not a label value")
                .help("it labels every object fabric makes (app.kubernetes.io/part-of): letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters"),
        );
    }
    for (name, p, what) in named(t) {
        if !is_dns_label(name) {
            out.push(
                Problem::error("topology::name", p, format!("{what} `{name}` is not a valid DNS label"))
                    .label("not a DNS label")
                    .help(dns_help(name)),
            );
        }
    }
    // Interface names reach commands on the routers: only what the kernel (and VyOS) accept.
    for (i, s) in t.sites.iter().enumerate() {
        let name = &s.router.wireguard.interface;
        let vyos = s.router.kind == RouterKind::Vyos;
        let ok = if vyos {
            name.strip_prefix("wg").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        } else {
            is_interface_name(name)
        };
        if !ok {
            let want = if vyos {
                "wgN (VyOS names WireGuard interfaces wg0, wg1, …)"
            } else {
                "a Linux interface name: letters, digits, '-', '_', at most 15 characters"
            };
            out.push(
                Problem::error(
                    "topology::name",
                    path!["sites", i, "router", "wireguard", "interface"],
                    format!("`{name}` is not a valid interface name"),
                )
                .label("not an interface name")
                .help(format!("use {want}, e.g. `wg0`")),
            );
        }
    }
}

/// Every SSH access of the topology, with its path.
fn ssh_accesses(t: &Topology) -> Vec<(&SshAccess, Path)> {
    let mut v = Vec::new();
    for (i, s) in t.sites.iter().enumerate() {
        v.push((&s.router.ssh, path!["sites", i, "router", "ssh"]));
        for (j, n) in s.cluster.nodes.iter().enumerate() {
            if let Some(a) = &n.ssh {
                v.push((a, path!["sites", i, "cluster", "nodes", j, "ssh"]));
            }
        }
        for (j, w) in s.external_workloads.iter().enumerate() {
            v.push((&w.ssh, path!["sites", i, "external_workloads", j, "ssh"]));
        }
    }
    if let Some(vm) = &t.federation.karmada.vm {
        v.push((&vm.ssh, path!["federation", "karmada", "vm", "ssh"]));
    }
    v
}

/// A host to connect to is a name or an address: never something an ssh program would read as
/// an option (`-oProxyCommand=…`), and no spaces.
fn is_host(s: &str) -> bool {
    !s.is_empty() && !s.starts_with('-') && !s.chars().any(char::is_whitespace)
}

fn ssh_hosts(t: &Topology, out: &mut Vec<Problem>) {
    for (a, p) in ssh_accesses(t) {
        let mut check = |value: &str, key: &str, what: &str| {
            if !is_host(value) {
                out.push(
                    Problem::error("topology::ssh", p.key(key), format!("{what} `{value}` is not a host"))
                        .label("not a host")
                        .help("a host name or address, not starting with '-' and without spaces"),
                );
            }
        };
        check(&a.host, "host", "ssh host");
        if let Some(u) = &a.user {
            check(u, "user", "ssh user");
        }
        if let Some(j) = &a.proxy_jump {
            check(j, "proxy_jump", "proxy_jump");
            // Each hop of `a,b`: its host must not read as an option either.
            for hop in j.split(',') {
                let host = hop.rsplit_once('@').map_or(hop, |(_, h)| h);
                if host.starts_with('-') {
                    check(host, "proxy_jump", "proxy_jump's host");
                }
            }
        }
    }
}

/// A Linux interface name fabric accepts: 1–15 of `[A-Za-z0-9_-]`, starting with a letter.
pub fn is_interface_name(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=15).contains(&b.len())
        && b[0].is_ascii_alphabetic()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
}

/// Reports the second and later occurrences of each key.
fn report_duplicates(items: impl IntoIterator<Item = (String, Path)>, what: &str, out: &mut Vec<Problem>) {
    let mut seen: HashMap<String, Path> = HashMap::new();
    for (name, p) in items {
        if let Some(first) = seen.get(&name) {
            out.push(
                Problem::error("topology::duplicate", p, format!("{what} `{name}` is defined twice"))
                    .label("defined again here")
                    .related(first.clone(), "first defined here")
                    .help(format!("each {what} must be unique; rename or remove one")),
            );
        } else {
            seen.insert(name, p);
        }
    }
}

fn unique_names(t: &Topology, out: &mut Vec<Problem>) {
    let sites = t.sites.iter().enumerate();
    report_duplicates(sites.clone().map(|(i, s)| (s.name.clone(), path!["sites", i, "name"])), "site", out);
    report_duplicates(
        sites.clone().map(|(i, s)| (s.cluster.name.clone(), path!["sites", i, "cluster", "name"])),
        "cluster name",
        out,
    );
    // Routers, nodes, external workloads and the Karmada VM are all hosts: one namespace.
    let mut hosts = vec![];
    for (i, s) in t.sites.iter().enumerate() {
        hosts.push((s.router.name.clone(), path!["sites", i, "router", "name"]));
        for (j, n) in s.cluster.nodes.iter().enumerate() {
            hosts.push((n.name.clone(), path!["sites", i, "cluster", "nodes", j, "name"]));
        }
        for (j, w) in s.external_workloads.iter().enumerate() {
            hosts.push((w.name.clone(), path!["sites", i, "external_workloads", j, "name"]));
        }
    }
    if let Some(vm) = &t.federation.karmada.vm {
        hosts.push((vm.name.clone(), path!["federation", "karmada", "vm", "name"]));
    }
    report_duplicates(hosts, "host name", out);
    report_duplicates(
        t.placement.iter().enumerate().map(|(i, c)| (c.name.clone(), path!["placement", i, "name"])),
        "placement class",
        out,
    );
    report_duplicates(
        t.services
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("{}/{}", s.namespace, s.name), path!["services", i, "name"])),
        "service",
        out,
    );
    for (i, s) in t.sites.iter().enumerate() {
        report_duplicates(
            s.queues.iter().enumerate().map(|(j, q)| (q.name.clone(), path!["sites", i, "queues", j, "name"])),
            "queue",
            out,
        );
        let locals = s.queues.iter().enumerate().flat_map(|(j, q)| {
            q.local_queues.iter().enumerate().map(move |(k, l)| {
                (format!("{}/{}", l.namespace, l.name), path!["sites", i, "queues", j, "local_queues", k, "name"])
            })
        });
        report_duplicates(locals, "local queue", out);
    }
    if let Some(g) = &t.gateway {
        report_duplicates(
            g.models.iter().enumerate().map(|(i, m)| (m.name.clone(), path!["gateway", "models", i, "name"])),
            "gateway model",
            out,
        );
    }
}

fn site_names(t: &Topology) -> Vec<&str> {
    t.sites.iter().map(|s| s.name.as_str()).collect()
}

/// Checks that `name` is one of `known`, with a did-you-mean.
fn reference(name: &str, known: &[&str], what: &str, p: Path, out: &mut Vec<Problem>) {
    if known.contains(&name) {
        return;
    }
    let list = known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
    let help = match super::schema_check::did_you_mean(name, known.iter().copied()) {
        Some(s) => format!("did you mean `{s}`? Known: {list}"),
        None if known.is_empty() => format!("no {what} is defined"),
        None => format!("known: {list}"),
    };
    out.push(
        Problem::error("topology::reference", p, format!("there is no {what} named `{name}`"))
            .label(format!("unknown {what}"))
            .help(help),
    );
}

/// MultiKueue's manager is a site or Karmada's dedicated VM, its workers are sites, and the
/// dispatching queue exists at every worker and at a manager that is a site (at the VM, D.3
/// makes it from the workers' queues).
fn multikueue_references(t: &Topology, sites: &[&str], out: &mut Vec<Problem>) {
    let Some(mk) = &t.multikueue else { return };
    let base = path!["multikueue"];
    let vm = t.federation.karmada.vm.as_ref().map(|vm| vm.name.as_str());
    if vm == Some(mk.manager.as_str()) && !sites.contains(&mk.manager.as_str()) {
        if t.decisions.karmada_host != KarmadaHostChoice::DedicatedVm {
            out.push(
                Problem::error(
                    "topology::multikueue",
                    base.key("manager"),
                    format!("the MultiKueue manager is Karmada's VM `{}`, but Karmada does not run on it", mk.manager),
                )
                .label("Karmada's VM")
                .related(path!["decisions", "karmada_host"], "not `dedicated-vm`")
                .help("set `decisions.karmada_host: dedicated-vm` (C.1 then installs K3s on the VM), or name a site"),
            );
        }
    } else {
        let mut known = sites.to_vec();
        known.extend(vm);
        reference(&mk.manager, &known, "site or Karmada VM", base.key("manager"), out);
    }
    for (i, w) in mk.workers.iter().enumerate() {
        reference(w, sites, "site", base.key("workers").index(i), out);
    }
    // The dispatching queue must exist at the manager (when it is a site) and at every worker.
    for (site_name, p) in std::iter::once((&mk.manager, base.key("manager")))
        .chain(mk.workers.iter().enumerate().map(|(i, w)| (w, base.key("workers").index(i))))
    {
        if let Some(site) = t.sites.iter().find(|s| &s.name == site_name) {
            let queues: Vec<&str> = site.queues.iter().map(|q| q.name.as_str()).collect();
            if !queues.contains(&mk.queue.as_str()) {
                out.push(
                    Problem::error(
                        "topology::reference",
                        base.key("queue"),
                        format!("queue `{}` does not exist at site `{site_name}`", mk.queue),
                    )
                    .label("unknown queue at that site")
                    .related(p, format!("site `{site_name}` is part of MultiKueue"))
                    .help(format!(
                        "add a queue named `{}` to the site's `queues`, or use one of: {}",
                        mk.queue,
                        if queues.is_empty() { "(none)".into() } else { queues.join(", ") }
                    )),
                );
            }
        }
    }
}

fn references(t: &Topology, out: &mut Vec<Problem>) {
    let sites = site_names(t);
    for k in t.decisions.cluster_migration.keys() {
        reference(k, &sites, "site", path!["decisions", "cluster_migration", k], out);
    }
    for k in t.decisions.public_address.keys() {
        reference(k, &sites, "site", path!["decisions", "public_address", k], out);
    }
    for (i, c) in t.placement.iter().enumerate() {
        for (j, s) in c.sites.iter().enumerate() {
            reference(s, &sites, "site", path!["placement", i, "sites", j], out);
        }
        for s in c.weights.keys() {
            reference(s, &sites, "site", path!["placement", i, "weights", s], out);
        }
        if let Some(s) = &c.prefer {
            reference(s, &sites, "site", path!["placement", i, "prefer"], out);
        }
    }
    let classes: Vec<&str> = t.placement.iter().map(|c| c.name.as_str()).collect();
    for (i, s) in t.services.iter().enumerate() {
        reference(&s.class, &classes, "placement class", path!["services", i, "class"], out);
    }
    let k = &t.federation.karmada;
    reference(&k.host_site, &sites, "site", path!["federation", "karmada", "host_site"], out);
    for (i, m) in k.members.iter().enumerate() {
        reference(m, &sites, "site", path!["federation", "karmada", "members", i], out);
    }
    reference(&t.federation.argocd.site, &sites, "site", path!["federation", "argocd", "site"], out);
    multikueue_references(t, &sites, out);
    if let Some(g) = &t.gateway {
        reference(&g.site, &sites, "site", path!["gateway", "site"], out);
        let services: Vec<&str> = t.services.iter().map(|s| s.name.as_str()).collect();
        for (i, m) in g.models.iter().enumerate() {
            let mp = path!["gateway", "models", i];
            reference(&m.service, &services, "service", mp.key("service"), out);
            for (j, r) in m.routes.iter().enumerate() {
                reference(&r.site, &sites, "site", mp.key("routes").index(j).key("site"), out);
            }
            for (j, f) in m.fallback.iter().enumerate() {
                reference(f, &sites, "site", mp.key("fallback").index(j), out);
            }
        }
    }
}

fn prefixes_do_not_overlap(t: &Topology, out: &mut Vec<Problem>) {
    let mut prefixes: Vec<(Cidr, Path, String)> = vec![];
    for (i, s) in t.sites.iter().enumerate() {
        let sp = path!["sites", i];
        prefixes.push((s.lan, sp.key("lan"), format!("LAN of `{}`", s.name)));
        prefixes.push((s.cluster.pod_cidr, sp.key("cluster").key("pod_cidr"), format!("pod CIDR of `{}`", s.name)));
        prefixes.push((
            s.cluster.service_cidr,
            sp.key("cluster").key("service_cidr"),
            format!("service CIDR of `{}`", s.name),
        ));
    }
    // All routers share one tunnel network; one entry per distinct network.
    let mut tunnels: Vec<Cidr> = vec![];
    for (i, s) in t.sites.iter().enumerate() {
        let net = s.router.wireguard.address.network();
        if !tunnels.contains(&net) {
            tunnels.push(net);
            prefixes.push((net, path!["sites", i, "router", "wireguard", "address"], "tunnel network".into()));
        }
    }
    for (i, (a, pa, wa)) in prefixes.iter().enumerate() {
        for (b, pb, wb) in &prefixes[..i] {
            if a.overlaps(b) {
                out.push(
                    Problem::error("topology::overlap", pa.clone(), format!("{wa} {a} overlaps the {wb} {b}"))
                        .label(format!("{a} overlaps {b}"))
                        .related(pb.clone(), format!("{wb} {b}"))
                        .help("every LAN, pod, service and tunnel prefix of the fabric must be distinct: traffic between sites is routed by prefix"),
                );
            }
        }
    }
}

fn cluster_ids(t: &Topology, out: &mut Vec<Problem>) {
    let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, s) in t.sites.iter().enumerate() {
        let p = path!["sites", i, "cluster", "id"];
        let id = s.cluster.id;
        if !(1..=255).contains(&id) {
            out.push(
                Problem::error("topology::cluster-id", p.clone(), format!("cluster id {id} is outside 1–255"))
                    .label("must be 1–255")
                    .help("Cilium Cluster Mesh identifies clusters by cluster.id, 1 to 255"),
            );
        }
        if let Some(first) = seen.get(&id) {
            out.push(
                Problem::error("topology::cluster-id", p, format!("cluster id {id} is used twice"))
                    .label("used again here")
                    .related(path!["sites", *first, "cluster", "id"], "first used here")
                    .help("each cluster in the mesh needs its own cluster.id"),
            );
        } else {
            seen.insert(id, i);
        }
    }
}

fn tunnel_addresses(t: &Topology, out: &mut Vec<Problem>) {
    let Some(first) = t.sites.first() else { return };
    let net0 = first.router.wireguard.address.network();
    for (i, s) in t.sites.iter().enumerate() {
        let a = s.router.wireguard.address;
        let p = path!["sites", i, "router", "wireguard", "address"];
        if a.is_network_or_broadcast() {
            let which = if a.addr == a.network().network { "network" } else { "broadcast" };
            out.push(
                Problem::error(
                    "topology::tunnel",
                    p.clone(),
                    format!("tunnel address {a} is the {which} address of {}", a.network()),
                )
                .label(format!("{which} address"))
                .help("use a host address of the tunnel prefix, e.g. .1 and .2 of a /30"),
            );
        }
        if i > 0 && a.network() != net0 {
            out.push(
                Problem::error(
                    "topology::tunnel",
                    p.clone(),
                    format!("tunnel address {a} is not in the tunnel network {net0} of `{}`", first.name),
                )
                .label(format!("in {}", a.network()))
                .related(path!["sites", 0, "router", "wireguard", "address"], format!("tunnel network {net0}"))
                .help("both ends of the tunnel must be in the same prefix, e.g. 10.0.0.1/30 and 10.0.0.2/30"),
            );
        }
        for (j, o) in t.sites[..i].iter().enumerate() {
            if o.router.wireguard.address.addr == a.addr {
                out.push(
                    Problem::error(
                        "topology::tunnel",
                        p.clone(),
                        format!("tunnel address {} is used by both `{}` and `{}`", a.addr, o.name, s.name),
                    )
                    .label("same address")
                    .related(path!["sites", j, "router", "wireguard", "address"], "also here")
                    .help("each tunnel end needs its own address"),
                );
            }
        }
    }
}

fn addresses_inside_lans(t: &Topology, out: &mut Vec<Problem>) {
    for (i, s) in t.sites.iter().enumerate() {
        let mut check = |addr: std::net::Ipv4Addr, p: Path, what: &str| {
            if !s.lan.contains(addr) {
                out.push(
                    Problem::error(
                        "topology::address",
                        p,
                        format!("{what} {addr} is outside the LAN {} of `{}`", s.lan, s.name),
                    )
                    .label("outside the site's LAN")
                    .related(path!["sites", i, "lan"], "the site's LAN")
                    .help("the tunnel routes only the LAN prefix to the other sites; use an address inside it"),
                );
            }
        };
        check(s.cluster.api_address, path!["sites", i, "cluster", "api_address"], "API address");
        for (j, n) in s.cluster.nodes.iter().enumerate() {
            check(n.address, path!["sites", i, "cluster", "nodes", j, "address"], "node address");
        }
        for (j, w) in s.external_workloads.iter().enumerate() {
            check(w.address, path!["sites", i, "external_workloads", j, "address"], "host address");
        }
    }
}

fn nodes(t: &Topology, out: &mut Vec<Problem>) {
    for (i, s) in t.sites.iter().enumerate() {
        let np = path!["sites", i, "cluster", "nodes"];
        if !s.cluster.nodes.iter().any(|n| n.role == NodeRole::ControlPlane) {
            out.push(
                Problem::error(
                    "topology::node",
                    np.clone(),
                    format!("cluster `{}` has no control-plane node", s.cluster.name),
                )
                .label("no node with role control-plane")
                .help("add a node with `role: control-plane`: fabric configures K3s there"),
            );
        }
        for (j, n) in s.cluster.nodes.iter().enumerate() {
            if n.role == NodeRole::Gpu && n.gpu.as_ref().is_none_or(|g| g.count == 0) {
                out.push(
                    Problem::error(
                        "topology::node",
                        np.index(j).key("role"),
                        format!("node `{}` has role gpu but no GPUs", n.name),
                    )
                    .label("role gpu")
                    .help("add `gpu: {model: ..., count: N, memory_gib: M}` or change the role to worker"),
                );
            }
            if !s.cluster.existing {
                joinable(t, i, s, j, n, out);
            }
            if n.role == NodeRole::ControlPlane && n.ssh.is_none() {
                out.push(
                    Problem::error(
                        "topology::node",
                        np.index(j).key("name"),
                        format!("control-plane node `{}` has no ssh access", n.name),
                    )
                    .label("no `ssh:`")
                    .help("add `ssh: {host: ...}`: fabric writes /etc/rancher/k3s/config.yaml there (A.1/A.2)"),
                );
            }
        }
    }
}

/// A node of a new cluster (`existing: false`) is there only once K3s runs on it and has joined
/// the cluster. With `k3s_airgap`, fabric installs the cluster (A.1) over SSH: a node without
/// `ssh` is then never joined, an error at its line, since what counts it (the site's GPUs, its
/// queues' quotas, D.1's labels) would wait for it forever. Without `k3s_airgap`, fabric installs
/// no K3s at all (the documented mode where the hosts have it already, as in the lab): each node
/// is a warning at its line saying it joins only if K3s is put there by other means. (A control
/// plane without SSH has its own error below.)
fn joinable(t: &Topology, i: usize, s: &Site, j: usize, n: &Node, out: &mut Vec<Problem>) {
    let at = path!["sites", i, "cluster", "nodes", j];
    let counted = match n.gpu.as_ref().filter(|g| g.count > 0) {
        Some(g) => format!("its {} GPU(s) count in the site's capacity but never appear", g.count),
        None => "it never appears in the cluster".to_string(),
    };
    let new_cluster = (path!["sites", i, "cluster", "existing"], "a new cluster: A.1 installs every node");
    if t.k3s_airgap.is_some() {
        if n.ssh.is_none() && n.role != NodeRole::ControlPlane {
            out.push(
                Problem::error(
                    "topology::node",
                    at,
                    format!(
                        "node `{}` of the new cluster `{}` has no `ssh`: fabric can never install K3s there and join it, so {counted}",
                        n.name, s.cluster.name
                    ),
                )
                .label("no ssh")
                .related(new_cluster.0, new_cluster.1)
                .help("add `ssh: { host: … }` to the node (A.1 installs K3s from k3s_airgap and joins it), or remove the node"),
            );
        }
    } else {
        out.push(
            Problem::warning(
                "topology::node",
                at,
                format!(
                    "node `{}` of the new cluster `{}` is never installed by fabric: there is no `k3s_airgap`, so it joins only if K3s is put there by other means",
                    n.name, s.cluster.name
                ),
            )
            .label("nothing to install from")
            .related(new_cluster.0, new_cluster.1)
            .help(format!(
                "add `k3s_airgap:` with the K3s {} release's k3s, images tarball and install.sh (a `url:` and its sha256 each; see docs/topology.md), and `ssh` to every node",
                t.versions.k3s
            )),
        );
    }
}

/// A `statefulset` service runs at one site: Karmada propagates a workload's dependencies from its
/// pod template (ConfigMaps, Secrets, a ServiceAccount, PVCs named by `volumes`) but not the PVCs
/// of `volumeClaimTemplates` (karmada-io/karmada pkg/util/helper/pod.go, `getPVCNames`), which
/// each member's StatefulSet controller makes empty: placed at two sites, the service would have
/// two unrelated sets of data. And what a service lists it is made of are object names.
fn service_parts(t: &Topology, out: &mut Vec<Problem>) {
    for (i, svc) in t.services.iter().enumerate() {
        let class = t.placement.iter().enumerate().find(|(_, c)| c.name == svc.class);
        if let (ServiceWorkload::Statefulset, Some((k, c))) = (svc.workload, class) {
            let sites: Vec<&str> = match c.strategy {
                PlacementStrategy::Affinity => c.prefer.iter().map(String::as_str).collect(),
                _ if c.sites.is_empty() => t.sites.iter().map(|s| s.name.as_str()).collect(),
                _ => c.sites.iter().map(String::as_str).collect(),
            };
            if sites.len() > 1 {
                out.push(
                    Problem::error(
                        "topology::placement",
                        path!["services", i, "workload"],
                        format!(
                            "StatefulSet `{}` would run at {} ({}): each member makes its own empty volumes from `volumeClaimTemplates`, Karmada does not propagate them",
                            svc.name,
                            sites.join(" and "),
                            c.name
                        ),
                    )
                    .label("its data would split")
                    .related(path!["placement", k, "strategy"], "placed here")
                    .help("give it a class with `strategy: affinity` and `prefer:` the site that keeps the data (reached from the others with `global: true`)"),
                );
            }
        }
        let lists = [("configmaps", &svc.configmaps), ("secrets", &svc.secrets)];
        for (key, names) in lists {
            for (j, n) in names.iter().enumerate() {
                if !is_dns_subdomain(n) {
                    out.push(
                        Problem::error(
                            "topology::name",
                            path!["services", i, key, j],
                            format!("`{n}` is not a Kubernetes object name (a DNS subdomain)"),
                        )
                        .label("not an object name")
                        .help("lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit, at most 253 characters"),
                    );
                }
            }
        }
    }
}

/// A Kubernetes object name (RFC 1123 subdomain): what ConfigMaps and Secrets are named.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && !s.is_empty() && s.split('.').all(is_dns_label)
}

/// The MultiKueue dispatch queue of a site, if the site is the manager: its quota is a dispatch
/// budget over the workers' GPUs (Kueue recommends the sum of the workers' quotas), not local GPUs.
fn dispatch_queue<'a>(t: &'a Topology, s: &Site) -> Option<&'a str> {
    t.multikueue.as_ref().filter(|m| m.manager == s.name).map(|m| m.queue.as_str())
}

fn gpu_quotas(t: &Topology, out: &mut Vec<Problem>) {
    for (i, s) in t.sites.iter().enumerate() {
        let have = site_gpus(s);
        let mut total = 0u64;
        for (j, q) in s.queues.iter().enumerate() {
            let p = path!["sites", i, "queues", j, "gpu_quota"];
            if dispatch_queue(t, s) == Some(q.name.as_str()) {
                let mk = t.multikueue.as_ref().expect("dispatch queue implies multikueue");
                let workers: u64 = t
                    .sites
                    .iter()
                    .filter(|w| mk.workers.contains(&w.name))
                    .flat_map(|w| w.queues.iter().filter(|wq| wq.name == q.name))
                    .map(|wq| u64::from(wq.gpu_quota))
                    .sum();
                if u64::from(q.gpu_quota) > workers {
                    out.push(
                        Problem::error(
                            "topology::quota",
                            p,
                            format!(
                                "MultiKueue queue `{}` dispatches {} GPUs but its workers' `{}` queues have {workers}",
                                q.name, q.gpu_quota, q.name
                            ),
                        )
                        .label(format!("more than the workers' {workers} GPUs"))
                        .related(path!["multikueue", "workers"], "the workers")
                        .help("the manager's quota of the dispatching queue should equal the workers' total quota"),
                    );
                }
                continue;
            }
            total += u64::from(q.gpu_quota);
            if q.gpu_quota > have {
                out.push(
                    Problem::error(
                        "topology::quota",
                        p,
                        format!(
                            "queue `{}` has a quota of {} GPUs but site `{}` has {have}",
                            q.name, q.gpu_quota, s.name
                        ),
                    )
                    .label(format!("more than the site's {have} GPUs"))
                    .help("lower the quota, or add GPU nodes to the site's cluster"),
                );
            } else if total > u64::from(have) {
                out.push(
                    Problem::error(
                        "topology::quota",
                        p,
                        format!("the queues of site `{}` have {total} GPUs of quota together but the site has {have}", s.name),
                    )
                    .label(format!("total so far {total} > {have}"))
                    .help("nominal quotas are guarantees: together they may not exceed the site's GPUs (share idle GPUs with a cohort instead)"),
                );
            }
        }
    }
}

fn weights(t: &Topology, out: &mut Vec<Problem>) {
    let bad = |w: f64| w.is_nan() || w <= 0.0 || w.is_infinite();
    for (i, c) in t.placement.iter().enumerate() {
        for (site, w) in &c.weights {
            if bad(*w as f64) {
                out.push(
                    Problem::error(
                        "topology::weight",
                        path!["placement", i, "weights", site],
                        format!("weight {w} for `{site}` is not positive"),
                    )
                    .label("must be > 0")
                    .help("a site that should get nothing is left out of `sites` and `weights`"),
                );
            }
        }
    }
    if let Some(g) = &t.gateway {
        for (i, m) in g.models.iter().enumerate() {
            for (j, r) in m.routes.iter().enumerate() {
                if bad(r.weight) {
                    out.push(
                        Problem::error(
                            "topology::weight",
                            path!["gateway", "models", i, "routes", j, "weight"],
                            format!("route weight {} for `{}` is not positive", r.weight, r.site),
                        )
                        .label("must be > 0")
                        .help("remove the route instead of giving it weight 0; list the site under `fallback` to keep it as a fallback"),
                    );
                }
            }
        }
    }
}

/// `major.minor.patch` of a version string such as `v1.33.5+k3s1` or `1.18.4`.
pub fn parse_version(s: &str) -> Option<(u64, u64, u64)> {
    let core = s.trim_start_matches('v');
    let core = core.split(['+', '-']).next()?;
    let mut it = core.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    let patch = match it.next() {
        Some(p) => p.parse().ok()?,
        None => 0,
    };
    if it.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

/// A component fabric installs has its version pinned: unset, the chart would be written with
/// an empty version (helm-controller then takes whatever the repository calls latest) and the
/// gateway's image as `:latest`. A component fabric does not install needs none.
fn pins(t: &Topology, out: &mut Vec<Problem>) {
    let v = &t.versions;
    let unpinned = [
        (
            v.argocd.is_none() && t.federation.argocd.install,
            "argocd",
            "the argo-cd chart",
            "9.1.0",
            "ArgoCD is installed",
        ),
        (
            v.tensorzero.is_none() && t.gateway.is_some(),
            "tensorzero",
            "the TensorZero gateway's image",
            "2026.4.1",
            "the gateway runs",
        ),
    ];
    for (_, key, what, example, why) in unpinned.into_iter().filter(|u| u.0) {
        out.push(
            Problem::error(
                "topology::version",
                path!["versions"],
                format!("`versions.{key}` is not set: {what} would not be pinned"),
            )
            .label(format!("no `{key}:` here, and {why}"))
            .help(format!("pin an exact release under `versions:`, e.g. `{key}: {example}`")),
        );
    }
}

fn versions(t: &Topology, out: &mut Vec<Problem>) {
    pins(t, out);
    let v = &t.versions;
    let mut parsed = BTreeMap::new();
    let mut fields = vec![("k3s", &v.k3s), ("cilium", &v.cilium), ("karmada", &v.karmada), ("kueue", &v.kueue)];
    if let Some(a) = &v.argocd {
        fields.push(("argocd", a));
    }
    if let Some(a) = &v.tensorzero {
        // TensorZero uses calendar versions (2026.4.1), which parse the same way.
        fields.push(("tensorzero", a));
    }
    for (name, s) in fields {
        match parse_version(s) {
            Some(p) => {
                parsed.insert(name, p);
            }
            None => out.push(
                Problem::error("topology::version", path!["versions", name], format!("`{s}` is not a version"))
                    .label("not major.minor.patch")
                    .help("pin an exact release, e.g. `1.18.4` (K3s: `v1.33.5+k3s1`)"),
            ),
        }
    }
    let mut need = |name: &str, ok: bool, message: String, help: &str, related: Option<(Path, &str)>| {
        if !ok {
            let mut p = Problem::error("topology::version", path!["versions", name], message)
                .label("unsupported with this topology")
                .help(help);
            if let Some((rp, rl)) = related {
                p = p.related(rp, rl);
            }
            out.push(p);
        }
    };
    if let Some(&c) = parsed.get("cilium") {
        if t.mesh.join == JoinMethod::CiliumExternalWorkloads {
            need(
                "cilium",
                c < (1, 18, 0),
                format!("Cilium {} has no External Workloads (removed in 1.18)", v.cilium),
                "pin Cilium 1.17.x to use external workloads, or set `mesh.join: k3s-agent` to join VMs and bare metal as tainted K3s agents",
                Some((path!["mesh", "join"], "external workloads chosen here")),
            );
        }
        need(
            "cilium",
            c >= (1, 14, 0),
            format!("Cilium {} predates `kubeProxyReplacement: true`", v.cilium),
            "use Cilium 1.14 or later (the seed's kube-proxy replacement and Cluster Mesh settings need it)",
            None,
        );
    }
    if let Some(&k) = parsed.get("kueue") {
        need(
            "kueue",
            k >= (0, 15, 0),
            format!("Kueue {} does not serve kueue.x-k8s.io/v1beta2", v.kueue),
            "fabric writes Kueue objects as v1beta2 (v1beta1 is deprecated and gone in 0.20): use Kueue 0.15 or later",
            None,
        );
    }
    if let Some(&k) = parsed.get("karmada")
        && t.federation.karmada.failover
    {
        need(
            "karmada",
            k >= (1, 14, 0),
            format!("Karmada {} cannot taint clusters through a ClusterTaintPolicy", v.karmada),
            "failover needs Karmada 1.14 or later (ClusterTaintPolicy), or set `federation.karmada.failover: false`",
            Some((path!["federation", "karmada", "failover"], "failover on")),
        );
    }
}
/// What a site's `cluster_migration` needs of its cluster: SSH to every node (each node moves on
/// the node itself), and for `new-cluster` the running cluster's kubeconfig.
fn migration(
    i: usize,
    s: &crate::topology::model::Site,
    d: &crate::topology::model::Decisions,
    out: &mut Vec<Problem>,
) {
    use crate::topology::model::MigrationChoice;
    let choice = d.cluster_migration.get(&s.name).filter(|_| s.cluster.existing);
    // (what the choice does on the nodes, its name, and why SSH)
    let needs_ssh = match choice {
        Some(MigrationChoice::InPlace) => Some((
            "an in-place migration moves every node of the cluster",
            "in-place",
            ": fabric restarts its K3s and removes Flannel's interfaces and rules there",
        )),
        Some(MigrationChoice::NewCluster) => Some((
            "a new cluster is built on its server hosts and the cutover moves every other node",
            "new-cluster",
            "",
        )),
        _ => None,
    };
    if let Some((why, decided, help)) = needs_ssh {
        for (j, n) in s.cluster.nodes.iter().enumerate().filter(|(_, n)| n.ssh.is_none()) {
            out.push(
                Problem::error(
                    "topology::decision",
                    path!["sites", i, "cluster", "nodes", j],
                    format!("node `{}` has no `ssh`, but {why}", n.name),
                )
                .label("no ssh")
                .related(path!["decisions", "cluster_migration", &s.name], format!("decided {decided} here"))
                .help(format!("add `ssh: {{ host: … }}` to the node{help}")),
            );
        }
    }
    let new_cluster = choice == Some(&MigrationChoice::NewCluster);
    if new_cluster && s.cluster.previous.is_none() {
        out.push(
            Problem::error(
                "topology::decision",
                path!["sites", i, "cluster"],
                format!(
                    "site `{}` builds a new cluster beside the running one, but `cluster.previous` (the running cluster's kubeconfig) is not set",
                    s.name
                ),
            )
            .label("no previous")
            .related(path!["decisions", "cluster_migration", &s.name], "decided new-cluster here")
            .help("add `previous: { kubeconfig: { path: … } }` to the cluster: the cutover (A.5) drains each moving node there; `nodes` and `kubeconfig` describe the new cluster"),
        );
    } else if !new_cluster && s.cluster.previous.is_some() {
        out.push(
            Problem::error(
                "topology::decision",
                path!["sites", i, "cluster", "previous"],
                format!("`cluster.previous` of site `{}` is only for `cluster_migration: new-cluster` on an existing cluster", s.name),
            )
            .label("not a new-cluster migration")
            .help("remove `previous`, or decide `new-cluster` for this site with `existing: true`"),
        );
    }
}

fn decisions(t: &Topology, out: &mut Vec<Problem>) {
    let d = &t.decisions;
    for (i, s) in t.sites.iter().enumerate() {
        let addr = d.public_address.get(&s.name).copied().unwrap_or(PublicAddressChoice::Undecided);
        if addr == PublicAddressChoice::Fixed && s.router.public_address.is_none() {
            out.push(
                Problem::error(
                    "topology::decision",
                    path!["sites", i, "router"],
                    format!("site `{}` has a fixed public address but `router.public_address` is not set", s.name),
                )
                .label("no public_address")
                .related(path!["decisions", "public_address", &s.name], "decided fixed here")
                .help("add `public_address: a.b.c.d` to the router, or decide `dynamic`"),
            );
        }
        migration(i, s, d, out);
        if !s.cluster.existing && d.cluster_migration.contains_key(&s.name) {
            out.push(
                Problem::warning(
                    "topology::decision",
                    path!["decisions", "cluster_migration", &s.name],
                    format!("site `{}` has a new cluster: a migration decision does not apply", s.name),
                )
                .label("ignored")
                .related(path!["sites", i, "cluster"], "cluster.existing is false")
                .help("remove this entry, or set `cluster.existing: true` if the cluster runs today"),
            );
        }
    }
    let choices: Vec<PublicAddressChoice> = t
        .sites
        .iter()
        .map(|s| d.public_address.get(&s.name).copied().unwrap_or(PublicAddressChoice::Undecided))
        .collect();
    if t.sites.len() > 1 && choices.iter().all(|c| *c == PublicAddressChoice::Dynamic) {
        let mut p = Problem::error(
            "topology::decision",
            path!["decisions", "public_address"],
            "every site's public address is dynamic: no site can be dialed",
        )
        .label("all dynamic")
        .help("WireGuard needs at least one end with a fixed address; make one site `fixed`");
        for s in &t.sites {
            p = p.related(path!["decisions", "public_address", &s.name], "dynamic");
        }
        out.push(p);
    }
    if d.karmada_host == KarmadaHostChoice::DedicatedVm && t.federation.karmada.vm.is_none() {
        out.push(
            Problem::error(
                "topology::decision",
                path!["federation", "karmada"],
                "Karmada runs on a dedicated VM but `federation.karmada.vm` is not set",
            )
            .label("no vm")
            .related(path!["decisions", "karmada_host"], "decided here")
            .help("add `vm: {name, address, ssh}` under federation.karmada"),
        );
    }
}

fn placement_classes(t: &Topology, out: &mut Vec<Problem>) {
    for (i, c) in t.placement.iter().enumerate() {
        let p = path!["placement", i];
        match c.strategy {
            PlacementStrategy::Spread if c.weights.is_empty() => out.push(
                Problem::error(
                    "topology::placement",
                    p.key("strategy"),
                    format!("class `{}` spreads but has no weights", c.name),
                )
                .label("spread needs weights")
                .help("add `weights: {site: 1, ...}` for each site of the class"),
            ),
            PlacementStrategy::Affinity if c.prefer.is_none() => out.push(
                Problem::error(
                    "topology::placement",
                    p.key("strategy"),
                    format!("class `{}` has affinity but no preferred site", c.name),
                )
                .label("affinity needs `prefer`")
                .help("add `prefer: <site>`"),
            ),
            _ => {}
        }
        if c.failover_after_seconds.is_some() && !t.federation.karmada.failover {
            out.push(
                Problem::error(
                    "topology::placement",
                    p.key("failover_after_seconds"),
                    format!("class `{}` fails over but Karmada failover is off", c.name),
                )
                .label("needs failover")
                .related(path!["federation", "karmada", "failover"], "off here")
                .help("set `federation.karmada.failover: true` (the Failover feature gate is off by default upstream)"),
            );
        }
    }
    // A gateway backend must be a service that runs at that site.
    if let Some(g) = &t.gateway {
        for (i, m) in g.models.iter().enumerate() {
            let Some(svc) = t.services.iter().find(|s| s.name == m.service) else { continue };
            let Some(class) = t.placement.iter().find(|c| c.name == svc.class) else { continue };
            for (j, r) in m.routes.iter().enumerate() {
                let runs_there = class.sites.is_empty() || class.sites.contains(&r.site);
                if !runs_there {
                    out.push(
                        Problem::error(
                            "topology::reference",
                            path!["gateway", "models", i, "routes", j, "site"],
                            format!("service `{}` does not run at `{}` (class `{}`)", svc.name, r.site, class.name),
                        )
                        .label("no backend there")
                        .help(format!(
                            "add `{}` to the sites of placement class `{}`, or remove this route",
                            r.site, class.name
                        )),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argocd_never_syncs_what_fabric_renders() {
        let text = include_str!("../../topology.example.yaml");
        for (path, clash) in
            [("services", false), ("apps", true), ("apps/karmada", true), ("/", true), ("gitops/services", false)]
        {
            let t =
                crate::topology::load_str("t.yaml", text.replace("    path: services", &format!("    path: {path}")));
            let found = match t {
                Ok(l) => check(&l.topology).iter().any(|p| p.code == "topology::argocd-path"),
                Err(crate::topology::LoadError::Invalid { diags, .. }) => {
                    let d = diags.iter().find(|d| d.problem.code == "topology::argocd-path").expect("{path}");
                    let line = text.lines().position(|l| l.starts_with("    path: services")).unwrap() + 1;
                    assert_eq!(d.line, line, "points at the path's line");
                    true
                }
                Err(e) => panic!("{e}"),
            };
            assert_eq!(found, clash, "{path}");
        }
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns_label("franca"));
        assert!(is_dns_label("pve-labri-31"));
        assert!(!is_dns_label("Franca"));
        assert!(!is_dns_label("-x"));
        assert!(!is_dns_label("x-"));
        assert!(!is_dns_label(""));
        assert!(!is_dns_label("a_b"));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert!(dns_help("Sao_Paulo").contains("`sao-paulo`"));
    }

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version("v1.33.5+k3s1"), Some((1, 33, 5)));
        assert_eq!(parse_version("1.18"), Some((1, 18, 0)));
        assert_eq!(parse_version("0.15.2-rc.1"), Some((0, 15, 2)));
        assert_eq!(parse_version("latest"), None);
        assert_eq!(parse_version("1.2.3.4"), None);
    }
}
