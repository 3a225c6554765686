//! What an object names exists where it is needed: the labels its selectors ask for
//! (`consistency::label`), the objects, queues and namespaces it names
//! (`consistency::reference`), and its kind's API group (`consistency::kind`). An object or
//! group counts only when the naming step makes it itself or depends on the step that does
//! (otherwise apply could run them in the wrong order); a label counts wherever it is set,
//! since labels are read continuously by the controllers that select on them.

use std::collections::BTreeSet;

use petgraph::graph::NodeIndex;

use super::{Input, Level, origin};
use crate::desired::Resource;
use crate::desired::refs::{self, Need, Thing};
use crate::topology::problem::Problem;

pub fn check(input: &Input, level: Level, out: &mut Vec<Problem>) {
    for (n, r) in input.resources() {
        let ancestors = input.graph.with_ancestors(&BTreeSet::from([n]));
        for need in refs::requires(input.t, r) {
            let code = match need.fact.thing {
                Thing::NodeLabel { .. } | Thing::PodLabel { .. } => "consistency::label",
                Thing::Group(_) if level == Level::Topology => continue,
                Thing::Group(_) => "consistency::kind",
                Thing::Object { .. } | Thing::Namespace(_) => "consistency::reference",
            };
            if let Some(p) = problem(input, n, r, &need, &ancestors, code) {
                out.push(p);
            }
        }
    }
}

/// The problem with `need` of resource `r` of instance `n`, if any.
fn problem(
    input: &Input,
    n: NodeIndex,
    r: &Resource,
    need: &Need,
    ancestors: &BTreeSet<NodeIndex>,
    code: &'static str,
) -> Option<Problem> {
    if need.facts().any(|f| refs::is_given(&f, &input.given)) {
        return None;
    }
    let makers: BTreeSet<NodeIndex> = need.facts().filter_map(|f| input.providers.get(&f)).flatten().copied().collect();
    let labels = code == "consistency::label";
    if !makers.is_empty() && (labels || makers.iter().any(|p| ancestors.contains(p))) {
        return None;
    }
    let makers = Some(makers).filter(|m| !m.is_empty());
    let step = input.graph.graph[n].key();
    let what = format!("{} {} ({step})", kind_name(r), need.field);
    let (thing, at) = (&need.fact.thing, &need.fact.at);
    let message = match (&makers, &need.fact.thing) {
        (Some(m), _) => {
            let by: Vec<String> = m.iter().map(|p| input.graph.graph[*p].key()).collect();
            format!("{what} needs {thing} at {at}, which {} makes, but {step} does not depend on it", by.join(", "))
        }
        (None, Thing::NodeLabel { .. }) => format!("{what} needs {thing}, but no node of {at} carries it"),
        (None, Thing::PodLabel { .. }) => {
            let mut wheres: Vec<String> = need.facts().map(|f| f.at.to_string()).collect();
            wheres.sort();
            format!("{what} selects {thing}, but no pod of {} carries it", wheres.join(" or "))
        }
        (None, Thing::Group(_)) => format!("{what}: {at} does not serve {thing}, and no step installs it there"),
        (None, _) => format!("{what} names {thing} at {at}, which nothing makes"),
    };
    let help = match thing {
        Thing::NodeLabel { .. } => {
            "label the nodes (D.1 applies the GPU labels of `objects::gpu_labels` to GPU nodes), or select on a label they carry"
        }
        Thing::PodLabel { .. } => "select on a label the pods carry, or have the step that places them set it",
        Thing::Group(_) => {
            "install the chart or CRDs that serve it in a step this one depends on, or apply the object where it is served"
        }
        _ => "create it in a step this one depends on, or name one that exists",
    };
    Some(Problem::error(code, origin(input.t, r, Some(&need.fact)), message).label(thing.to_string()).help(help))
}

/// `Job batch/test`, for messages.
pub fn kind_name(r: &Resource) -> String {
    let Some(o) = r.kube_object() else { return r.address.to_string() };
    let kind = o["kind"].as_str().unwrap_or_default();
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    match o["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixture::Fix;
    use super::*;

    fn job(queue: &str) -> serde_json::Value {
        json!({ "apiVersion": "batch/v1", "kind": "Job", "metadata": { "name": "j", "namespace": "default",
            "labels": { "kueue.x-k8s.io/queue-name": queue } },
            "spec": { "template": { "spec": { "containers": [] } } } })
    }

    fn local_queue(name: &str) -> serde_json::Value {
        json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": { "name": name, "namespace": "default" }, "spec": {} })
    }

    fn kueue_chart() -> serde_json::Value {
        json!({ "apiVersion": "helm.cattle.io/v1", "kind": "HelmChart", "metadata": { "name": "kueue", "namespace": "kube-system" },
            "spec": { "chart": "kueue", "targetNamespace": "kueue-system", "createNamespace": true } })
    }

    #[test]
    fn a_queue_made_by_a_step_the_job_does_not_depend_on_is_reported() {
        let mut f = Fix::new();
        f.put("D.4", Some("franca"), job("q1")).put("D.3", Some("franca"), local_queue("q1"));
        let found = f.found(Level::Topology);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "consistency::reference");
        assert!(
            found[0]
                .1
                .contains("LocalQueue default/q1 at cluster.franca, which D.3 makes, but D.4 does not depend on it"),
            "{found:?}"
        );
        // Made by a dependency (D.1 comes before D.4 in the table): fine.
        let mut f = Fix::new();
        f.put("D.4", Some("franca"), job("q1")).put("D.1@franca", Some("franca"), local_queue("q1"));
        assert_eq!(f.found(Level::Topology), vec![]);
    }

    #[test]
    fn a_queue_nothing_makes_is_reported() {
        let mut f = Fix::new();
        f.put("D.4", Some("franca"), job("nowhere"));
        let found = f.found(Level::Topology);
        assert!(
            found[0].1.contains("names LocalQueue default/nowhere at cluster.franca, which nothing makes"),
            "{found:?}"
        );
    }

    #[test]
    fn a_node_label_no_node_carries_is_reported_and_one_they_carry_is_not() {
        let flavor = |k: &str, v: &str| {
            json!({ "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": { "name": "f" },
                "spec": { "nodeLabels": { k: v } } })
        };
        let mut f = Fix::new();
        f.put("D.1@sp", Some("sp"), flavor("gpu.model", "nonexistent"));
        let found = f.found(Level::Topology);
        assert!(
            found.iter().any(|(c, m)| *c == "consistency::label"
                && m.contains("needs node label gpu.model=nonexistent, but no node of cluster.sp carries it")),
            "{found:?}"
        );
        let mut f = Fix::new();
        let node = f.t.sites.iter().find(|s| s.name == "sp").unwrap().cluster.nodes[0].name.clone();
        f.put("D.1@sp", Some("sp"), flavor("kubernetes.io/hostname", &node));
        assert!(f.found(Level::Topology).iter().all(|(c, _)| *c != "consistency::label"));
    }

    #[test]
    fn a_kind_is_served_only_after_the_chart_that_installs_it() {
        let mut f = Fix::new();
        f.put("D.1@sp", Some("sp"), local_queue("q"));
        // Nothing installs Kueue: the kind is not served (only render/plan check kinds).
        assert!(f.found(Level::Topology).is_empty());
        let found = f.found(Level::Objects);
        assert!(
            found
                .iter()
                .any(|(c, m)| *c == "consistency::kind"
                    && m.contains("cluster.sp does not serve API group kueue.x-k8s.io")),
            "{found:?}"
        );
        f.put("D.1@sp", Some("sp"), kueue_chart());
        assert!(
            f.found(Level::Objects).iter().all(|(c, _)| *c != "consistency::kind"),
            "{:?}",
            f.found(Level::Objects)
        );
        // Karmada's API does not serve K3s's helm.cattle.io.
        let mut f = Fix::new();
        f.put("C.5", None, kueue_chart());
        let found = f.found(Level::Objects);
        assert!(found.iter().any(|(_, m)| m.contains("karmada does not serve API group helm.cattle.io")), "{found:?}");
    }
}
