//! Which topology entry an object comes from, so a finding points at the line to change.
//!
//! The builders walk the topology and name objects after its entries (a LocalQueue after its
//! `local_queues` entry, a policy's selectors after the services, a flavor after the site's GPU
//! nodes); this reads the same names back. What matches no entry points at its site, or at
//! `federation.karmada` for the Karmada API.

use serde_json::Value;

use crate::desired::Resource;
use crate::desired::refs::{Fact, Thing};
use crate::path;
use crate::topology::Topology;
use crate::topology::tree::Path;

/// The topology path that causes `r` (and its need `fact`, when the finding is about one).
pub fn origin(t: &Topology, r: &Resource, fact: Option<&Fact>) -> Path {
    if let Some(Fact { at, thing: Thing::NodeLabel { value, .. } }) = fact {
        // The nodes that should carry the label: a GPU node of that model, else the site's nodes.
        if let Some(i) = t.sites.iter().position(|s| Some(s.name.as_str()) == at.site()) {
            let nodes = &t.sites[i].cluster.nodes;
            return match nodes.iter().position(|n| n.gpu.as_ref().is_some_and(|g| g.model == *value)) {
                Some(j) => path!["sites", i, "cluster", "nodes", j, "gpu", "model"],
                None => path!["sites", i, "cluster", "nodes"],
            };
        }
    }
    let Some(o) = r.kube_object() else { return site_path(t, r) };
    by_queue(t, o)
        .or_else(|| by_kind(t, o))
        .or_else(|| by_route(t, o))
        .or_else(|| by_service(t, o))
        .unwrap_or_else(|| site_path(t, r))
}

fn site_path(t: &Topology, r: &Resource) -> Path {
    match r.site.as_deref().and_then(|s| t.sites.iter().position(|x| x.name == s)) {
        Some(i) => path!["sites", i, "name"],
        None if r.target().is_api() => path!["federation", "karmada"],
        None => path!["name"],
    }
}

/// A LocalQueue, a ClusterQueue, or a workload sent to a LocalQueue: that queue's entry.
fn by_queue(t: &Topology, o: &Value) -> Option<Path> {
    let kind = o["kind"].as_str()?;
    let name = o["metadata"]["name"].as_str()?;
    let ns = o["metadata"]["namespace"].as_str();
    let local = match kind {
        "LocalQueue" => Some(name),
        _ => o["metadata"]["labels"]["kueue.x-k8s.io/queue-name"].as_str(),
    };
    for (i, s) in t.sites.iter().enumerate() {
        for (j, q) in s.queues.iter().enumerate() {
            if kind == "ClusterQueue" && q.name == name {
                return Some(path!["sites", i, "queues", j, "name"]);
            }
            for (k, l) in q.local_queues.iter().enumerate() {
                if Some(l.name.as_str()) == local && Some(l.namespace.as_str()) == ns {
                    return Some(path!["sites", i, "queues", j, "local_queues", k, "name"]);
                }
            }
        }
    }
    None
}

/// Kinds that come from one part of the topology whatever their name.
fn by_kind(t: &Topology, o: &Value) -> Option<Path> {
    match o["kind"].as_str()? {
        "Application" => Some(path!["federation", "argocd", "path"]),
        "AdmissionCheck" | "MultiKueueConfig" | "MultiKueueCluster" => {
            t.multikueue.as_ref().map(|_| path!["multikueue"])
        }
        "PropagationPolicy" => {
            let name = o["metadata"]["name"].as_str()?;
            t.placement.iter().position(|c| c.name == name).map(|i| path!["placement", i, "name"])
        }
        _ => None,
    }
}

/// A per-site Service of the gateway (`<service>-<site>`, `tensorzero::site_service`): the route (or
/// fallback) to that site.
fn by_route(t: &Topology, o: &Value) -> Option<Path> {
    let name = o["metadata"]["name"].as_str()?;
    let g = t.gateway.as_ref()?;
    for (i, m) in g.models.iter().enumerate() {
        let Some(site) = name.strip_prefix(&format!("{}-", m.service)) else { continue };
        if let Some(j) = m.routes.iter().position(|r| r.site == site) {
            return Some(path!["gateway", "models", i, "routes", j, "site"]);
        }
        if let Some(j) = m.fallback.iter().position(|f| f == site) {
            return Some(path!["gateway", "models", i, "fallback", j]);
        }
    }
    None
}

/// An object named after a service (`vllm`, `vllm-sp`), or selecting one (a policy): that
/// service's entry.
fn by_service(t: &Topology, o: &Value) -> Option<Path> {
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    let selected: Vec<&str> =
        o["spec"]["resourceSelectors"].as_array().into_iter().flatten().filter_map(|s| s["name"].as_str()).collect();
    let hit = |svc: &str| {
        name == svc || name.strip_prefix(svc).is_some_and(|rest| rest.starts_with('-')) || selected.contains(&svc)
    };
    t.services.iter().position(|s| hit(&s.name)).map(|i| path!["services", i, "name"])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn resource(t: &Topology, site: Option<&str>, obj: Value) -> Resource {
        crate::desired::kube_resource(t, site, obj, None)
    }

    #[test]
    fn objects_point_at_the_entries_they_come_from() {
        let t = super::super::fixture::Fix::new().t;
        let svc = resource(
            &t,
            Some("sp"),
            json!({ "kind": "Service", "metadata": { "name": "vllm-sp", "namespace": "ai" } }),
        );
        assert_eq!(origin(&t, &svc, None).to_string(), "gateway.models[0].routes[1].site");
        let svc =
            resource(&t, Some("sp"), json!({ "kind": "Service", "metadata": { "name": "vllm", "namespace": "ai" } }));
        assert_eq!(origin(&t, &svc, None).to_string(), "services[0].name");
        let app = resource(&t, Some("franca"), json!({ "kind": "Application", "metadata": { "name": "a" } }));
        assert_eq!(origin(&t, &app, None).to_string(), "federation.argocd.path");
        let other = resource(&t, Some("sp"), json!({ "kind": "ConfigMap", "metadata": { "name": "x" } }));
        assert!(origin(&t, &other, None).to_string().ends_with("].name"));
        let label = Fact {
            at: crate::addr::Target::cluster("sp"),
            thing: Thing::NodeLabel { key: "gpu.model".into(), value: "nope".into() },
        };
        assert!(origin(&t, &other, Some(&label)).to_string().ends_with("cluster.nodes"));
    }
}
