//! What the Karmada chart makes of fabric's values: the flags karmada-controller-manager runs
//! with, held against what the objects fabric writes need from it (issue #22's cross-check).
//!
//! The chart's side is upstream's, not fabric's: the defaults are the chart's `values.yaml` in
//! `../shared/specs/helm/karmada/` (whose `controllerManager.featureGates` holds
//! `PropagateDeps: false`), merged under fabric's values as Helm merges a values file (maps key
//! by key, anything else replaced), and the flags are made as karmada-io/karmada
//! `charts/karmada/templates/_helpers.tpl` makes them: `karmada.controllerManager.featureGates`
//! (one `--feature-gates=K=V,...` from every key of the map) and
//! `karmada.controllerManager.extraCommandArgs` (one `--K=V` per key).
//!
//! What the objects need, and where Karmada decides it (v1.15.0):
//! - `propagateDeps: true` in a PropagationPolicy does nothing unless the PropagateDeps gate is
//!   on: `cmd/controller-manager/app/controllermanager.go` starts the dependencies distributor
//!   only `if features.FeatureGate.Enabled(features.PropagateDeps)`.
//! - A ClusterTaintPolicy's NoExecute taint evicts nothing unless the controller-manager runs
//!   with `--enable-no-execute-taint-eviction=true` (`cmd/controller-manager/app/options/failover.go`,
//!   default false; read by `pkg/controllers/cluster/taint_manager.go`), and the taint manager and
//!   the ClusterTaintPolicy controller start only with the Failover gate
//!   (`controllermanager.go`, `startClusterController`, `startClusterTaintPolicyController`).

#[path = "support/topologies.rs"]
mod topologies;

use std::path::Path;

use serde_json::{Map, Value};

fn chart_defaults() -> Value {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/specs/helm/karmada/values.yaml"));
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `over` merged onto `base` as Helm merges a values file onto the chart's defaults: maps key by
/// key, any other value replaced whole.
fn helm_merge(base: &Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            let mut out: Map<String, Value> = b.clone();
            for (k, v) in o {
                let merged = b.get(k).map(|bv| helm_merge(bv, v)).unwrap_or_else(|| v.clone());
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        _ => over.clone(),
    }
}

/// A value as Helm's `toString` prints it in the chart's templates.
fn to_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The controller-manager flags the chart's helpers make from the merged values (an empty value
/// is skipped, as `if not (empty (toString $value))` does).
fn controller_manager_flags(values: &Value) -> Vec<String> {
    let cm = &values["controllerManager"];
    let mut flags = Vec::new();
    let gates: Vec<String> = cm["featureGates"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, to_string(v)))
        .filter(|(_, v)| !v.is_empty() && v != "null")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !gates.is_empty() {
        flags.push(format!("--feature-gates={}", gates.join(",")));
    }
    for (k, v) in cm["extraCommandArgs"].as_object().into_iter().flatten() {
        flags.push(format!("--{k}={}", to_string(v)));
    }
    flags
}

fn gate_on(flags: &[String], gate: &str) -> bool {
    flags
        .iter()
        .filter_map(|f| f.strip_prefix("--feature-gates="))
        .flat_map(|g| g.split(','))
        .any(|g| g == format!("{gate}=true"))
}

struct Rendered {
    flags: Vec<String>,
    objects: Vec<Value>,
}

fn rendered(text: &str) -> Option<Rendered> {
    let l = fabric::topology::load_str("t.yaml", text.to_string()).unwrap();
    let g = fabric::catalog::StepGraph::build(&fabric::catalog::Catalog::embedded().unwrap(), &l.topology).unwrap();
    let objects: Vec<Value> = g
        .instances()
        .flat_map(|i| fabric::steps::for_instance(i, &l.topology))
        .filter_map(|r| r.kube_object().cloned())
        .collect();
    let chart = objects.iter().find(|o| o["kind"] == "HelmChart" && o["metadata"]["name"] == "karmada")?;
    let values: Value = serde_saphyr::from_str(chart["spec"]["valuesContent"].as_str().unwrap_or("{}")).unwrap();
    let flags = controller_manager_flags(&helm_merge(&chart_defaults(), &values));
    Some(Rendered { flags, objects })
}

/// Problems of one topology: what its objects need from the controller-manager that its flags
/// do not give.
fn problems(r: &Rendered) -> Vec<String> {
    let mut out = Vec::new();
    let deps = r.objects.iter().filter(|o| o["kind"] == "PropagationPolicy" && o["spec"]["propagateDeps"] == true);
    if let Some(p) = deps.map(|o| o["metadata"]["name"].as_str().unwrap_or("?")).next()
        && !gate_on(&r.flags, "PropagateDeps")
    {
        out.push(format!("PropagationPolicy {p} has propagateDeps, but the PropagateDeps gate is off: {:?}", r.flags));
    }
    let no_execute = r
        .objects
        .iter()
        .filter(|o| o["kind"] == "ClusterTaintPolicy")
        .find(|o| o["spec"]["taints"].as_array().into_iter().flatten().any(|t| t["effect"] == "NoExecute"));
    if let Some(p) = no_execute {
        let name = p["metadata"]["name"].as_str().unwrap_or("?");
        if !gate_on(&r.flags, "Failover") {
            out.push(format!(
                "ClusterTaintPolicy {name} taints NoExecute, but the Failover gate is off: {:?}",
                r.flags
            ));
        }
        if !r.flags.iter().any(|f| f == "--enable-no-execute-taint-eviction=true") {
            out.push(format!(
                "ClusterTaintPolicy {name} taints NoExecute, but NoExecute eviction is off: {:?}",
                r.flags
            ));
        }
    }
    out
}

#[test]
fn the_controller_manager_runs_what_the_karmada_objects_need() {
    let mut checked = 0;
    for (name, text) in topologies::TOPOLOGIES {
        let Some(r) = rendered(text) else { continue };
        checked += 1;
        let p = problems(&r);
        assert!(p.is_empty(), "{name}:\n{}", p.join("\n"));
    }
    assert!(checked > 0, "no topology installs Karmada's chart");
}

/// The check can fail: the chart's own defaults (no values from fabric) leave PropagateDeps off
/// and NoExecute eviction off, which is what the example's objects would meet.
#[test]
fn the_charts_defaults_alone_are_refused() {
    let r = rendered(topologies::TOPOLOGIES[0].1).expect("the example installs Karmada");
    let bare = Rendered { flags: controller_manager_flags(&chart_defaults()), objects: r.objects };
    assert_eq!(bare.flags, ["--feature-gates=PropagateDeps=false"]);
    let p = problems(&bare);
    assert!(p.iter().any(|m| m.contains("PropagateDeps gate is off")), "{p:?}");
    assert!(p.iter().any(|m| m.contains("NoExecute eviction is off")), "{p:?}");
}

#[test]
fn helm_merges_maps_and_replaces_the_rest() {
    let base = serde_json::json!({"a": {"x": false, "y": 1}, "l": [1, 2]});
    let over = serde_json::json!({"a": {"z": true}, "l": [3]});
    assert_eq!(helm_merge(&base, &over), serde_json::json!({"a": {"x": false, "y": 1, "z": true}, "l": [3]}));
}
