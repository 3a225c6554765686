//! Every path a Karmada `plaintext` overrider patches exists in the object it targets, or is
//! created by it (`consistency::patch-path`).
//!
//! Karmada applies plaintext overriders as a JSON patch (RFC 6902, its `operator` being the
//! patch's `op`): `add` needs the parent of its path to exist (§4.1), `replace` and `remove`
//! the path itself (§4.2, §4.3); a failing operation fails the whole override. The target is
//! the object fabric makes when it makes it; otherwise (the services' Deployments come from the
//! GitOps repository) only what every valid object of the kind has: the fields its schema
//! requires, and for workloads the pod template's labels (the selector must match them).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{Input, names::kind_name, origin};
use crate::addr::Target;
use crate::desired::Resource;
use crate::topology::problem::Problem;

pub fn check(input: &Input, out: &mut Vec<Problem>) {
    let karmada: Vec<&Resource> =
        input.resources().map(|(_, r)| r).filter(|r| *r.target() == Target::Karmada).collect();
    for r in &karmada {
        let Some(o) = r.kube_object() else { continue };
        if !matches!(o["kind"].as_str(), Some("OverridePolicy" | "ClusterOverridePolicy")) {
            continue;
        }
        // Each failing operation once, with every target it fails in.
        let mut failing: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
        let ns = o["metadata"]["namespace"].as_str();
        for sel in o["spec"]["resourceSelectors"].as_array().into_iter().flatten() {
            let target = made(&karmada, sel, ns).unwrap_or_else(|| skeleton(sel, ns));
            let what = format!("{} {}", sel["kind"].as_str().unwrap_or_default(), sel["name"].as_str().unwrap_or("*"));
            for rule in o["spec"]["overrideRules"].as_array().into_iter().flatten() {
                for e in apply_all(&target, &rule["overriders"]["plaintext"]) {
                    failing.entry((e.op, e.path, e.missing)).or_default().push(what.clone());
                }
            }
        }
        for ((op, path, missing), targets) in failing {
            let message = format!(
                "{} would {op} {path} in {}, which lack(s) {missing}: Karmada's JSON patch (RFC 6902) rejects it and the override fails",
                kind_name(r),
                targets.join(", ")
            );
            let help = format!(
                "add the whole missing object instead (op add at {missing} with an object value), or make the targets carry {missing}"
            );
            out.push(
                Problem::error("consistency::patch-path", origin(input.t, r, None), message)
                    .label("overridden here")
                    .help(help),
            );
        }
    }
}

/// The object fabric makes that `sel` selects in the Karmada API.
fn made(karmada: &[&Resource], sel: &Value, ns: Option<&str>) -> Option<Value> {
    karmada.iter().filter_map(|r| r.kube_object()).find_map(|o| {
        let same = o["kind"] == sel["kind"]
            && o["metadata"]["name"] == sel["name"]
            && o["metadata"]["namespace"].as_str() == ns
            && o["apiVersion"] == sel["apiVersion"];
        same.then(|| o.clone())
    })
}

/// What every valid object `sel` may select has.
pub fn skeleton(sel: &Value, ns: Option<&str>) -> Value {
    let mut meta = Map::new();
    meta.insert("name".into(), sel["name"].clone());
    if let Some(ns) = ns {
        meta.insert("namespace".into(), json!(ns));
    }
    let mut o = json!({ "apiVersion": sel["apiVersion"], "kind": sel["kind"], "metadata": meta });
    match sel["kind"].as_str() {
        Some("Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet") => {
            o["spec"] =
                json!({ "selector": {}, "template": { "metadata": { "labels": {} }, "spec": { "containers": [] } } });
        }
        Some("Job") => o["spec"] = json!({ "template": { "spec": { "containers": [] } } }),
        _ => {}
    }
    o
}

/// Why an operation of a patch fails.
#[derive(Debug, PartialEq)]
pub struct PatchError {
    pub op: String,
    pub path: String,
    /// The pointer that does not exist.
    pub missing: String,
}

/// Applies the overriders to a copy of `target`, in order (an `add` creates what a later one
/// may rely on), and returns every operation that fails (Karmada fails the override on the first).
pub fn apply_all(target: &Value, plaintext: &Value) -> Vec<PatchError> {
    let mut doc = target.clone();
    let mut out = Vec::new();
    for p in plaintext.as_array().into_iter().flatten() {
        let op = p["operator"].as_str().unwrap_or_default();
        let path = p["path"].as_str().unwrap_or_default();
        if let Err(Missing(missing)) = apply(&mut doc, op, path, &p["value"]) {
            out.push(PatchError { op: op.into(), path: path.into(), missing });
        }
    }
    out
}

/// The JSON pointer an operation needs and the document lacks.
struct Missing(String);

/// One RFC 6902 operation.
fn apply(doc: &mut Value, op: &str, path: &str, value: &Value) -> Result<(), Missing> {
    let (parent, last) = match path.rfind('/') {
        Some(i) => (&path[..i], unescape(&path[i + 1..])),
        None => return Err(Missing(path.to_string())),
    };
    let holder = doc.pointer_mut(parent).ok_or_else(|| Missing(parent.to_string()))?;
    match (op, holder) {
        ("add", Value::Object(m)) => {
            m.insert(last, value.clone());
        }
        ("add", Value::Array(a)) if last == "-" => a.push(value.clone()),
        ("add", Value::Array(a)) => match last.parse::<usize>() {
            Ok(i) if i <= a.len() => a.insert(i, value.clone()),
            _ => return Err(Missing(path.to_string())),
        },
        ("replace" | "remove", h) => {
            let slot = match h {
                Value::Object(m) => m.get_mut(&last),
                Value::Array(a) => last.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
                _ => None,
            };
            let slot = slot.ok_or_else(|| Missing(path.to_string()))?;
            *slot = if op == "replace" { value.clone() } else { Value::Null };
        }
        _ => return Err(Missing(parent.to_string())),
    }
    Ok(())
}

/// A JSON pointer segment's text (RFC 6901: `~1` is `/`, `~0` is `~`).
fn unescape(seg: &str) -> String {
    seg.replace("~1", "/").replace("~0", "~")
}

#[cfg(test)]
mod tests {
    use super::super::Level;
    use super::super::fixture::Fix;
    use super::*;

    fn policy(plaintext: Value) -> Value {
        json!({ "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": { "name": "gpu-sp", "namespace": "ai" },
            "spec": { "resourceSelectors": [{ "apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm" }],
                "overrideRules": [{ "targetCluster": { "clusterNames": ["sp"] }, "overriders": { "plaintext": plaintext } }] } })
    }

    #[test]
    fn add_under_a_missing_parent_is_reported() {
        let mut f = Fix::new();
        let add = json!([{ "path": "/spec/template/spec/nodeSelector/gpu.model", "operator": "add", "value": "a100" }]);
        f.put("C.6", None, policy(add));
        let found: Vec<_> =
            f.found(Level::Objects).into_iter().filter(|(c, _)| *c == "consistency::patch-path").collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].1.contains("in Deployment vllm, which lack(s) /spec/template/spec/nodeSelector"), "{found:?}");
        // Only render/plan look at overriders.
        assert!(f.found(Level::Topology).iter().all(|(c, _)| *c != "consistency::patch-path"));
    }

    #[test]
    fn add_of_the_parent_first_or_under_an_existing_parent_passes() {
        let mut f = Fix::new();
        let ok = json!([
            { "path": "/spec/template/spec/nodeSelector", "operator": "add", "value": {} },
            { "path": "/spec/template/spec/nodeSelector/gpu.model", "operator": "add", "value": "a100" },
            { "path": "/spec/template/metadata/labels/fabric.io~1site", "operator": "add", "value": "sp" },
            { "path": "/spec/template/metadata/labels/fabric.io~1site", "operator": "replace", "value": "sp" },
        ]);
        f.put("C.6", None, policy(ok));
        assert!(f.found(Level::Objects).iter().all(|(c, _)| *c != "consistency::patch-path"));
    }

    #[test]
    fn replace_and_remove_need_the_path_itself() {
        let target = skeleton(&json!({ "apiVersion": "apps/v1", "kind": "Deployment", "name": "x" }), Some("ai"));
        let e = apply_all(&target, &json!([{ "path": "/metadata/annotations/a", "operator": "remove" }]));
        assert_eq!(e[0].missing, "/metadata/annotations");
        let e = apply_all(&target, &json!([{ "path": "/metadata/labels", "operator": "replace", "value": {} }]));
        assert_eq!(e[0].missing, "/metadata/labels");
        let ok = apply_all(
            &target,
            &json!([{ "path": "/spec/template/spec/containers/-", "operator": "add", "value": {} }]),
        );
        assert_eq!(ok, vec![]);
        // Every failing operation is reported, not only the first.
        let two = json!([
            { "path": "/spec/template/spec/nodeSelector/a", "operator": "add", "value": "x" },
            { "path": "/metadata/annotations/b", "operator": "add", "value": "y" },
        ]);
        assert_eq!(apply_all(&target, &two).len(), 2);
    }
}
