//! Every Helm value fabric renders is one the chart has (issue 12's consistency: "Helm ignores an
//! unknown key", so a misspelt or misplaced value would silently do nothing). Each HelmChart's
//! and HelmChartConfig's `valuesContent` is checked against the chart's own definition in
//! `../shared/specs/helm/`: Cilium's `values.schema.json`, the others' default `values.yaml`
//! (a key must exist there, except under a map the chart leaves empty for the user, such as
//! `nodeSelector: {}`). Charts without a definition there are named, so none is skipped silently.

use std::path::Path;

use serde_json::Value;

fn specs() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/specs/helm"))
}

/// The charts fabric installs whose definitions the specs do not hold.
const UNCHECKED: &[&str] = &["argo-cd", "nvidia-device-plugin"];

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Paths of `values` that `defaults` does not have. Some maps are the user's to fill: one the
/// chart leaves empty, and `featureGates` (Karmada's charts range over it as `key=value`
/// feature gates, whatever their names).
fn unknown_in_defaults(values: &Value, defaults: &Value, at: &str, out: &mut Vec<String>) {
    let (Value::Object(v), Value::Object(d)) = (values, defaults) else { return };
    if d.is_empty() || at.ends_with(".featureGates") {
        return;
    }
    for (k, vv) in v {
        let path = format!("{at}.{k}");
        match d.get(k) {
            None => out.push(path),
            Some(dv) => unknown_in_defaults(vv, dv, &path, out),
        }
    }
}

/// Paths of `values` that a JSON schema's `properties` do not describe (where the schema says
/// which properties an object has).
fn unknown_in_schema(values: &Value, schema: &Value, at: &str, out: &mut Vec<String>) {
    let Value::Object(v) = values else { return };
    // A schema may list alternatives (`anyOf`, `oneOf`): the object's properties are in one.
    let props: Vec<&Value> = std::iter::once(schema)
        .chain(["anyOf", "oneOf"].iter().flat_map(|k| schema[*k].as_array().into_iter().flatten()))
        .filter(|s| s["properties"].is_object())
        .collect();
    if props.is_empty() {
        return;
    }
    for (k, vv) in v {
        let path = format!("{at}.{k}");
        match props.iter().find_map(|s| s["properties"].get(k)) {
            None => out.push(path),
            Some(sub) => unknown_in_schema(vv, sub, &path, out),
        }
    }
}

fn check(topology: &str) -> Vec<String> {
    let l = fabric::topology::load_str("t.yaml", topology.to_string()).unwrap();
    let g = fabric::catalog::StepGraph::build(&fabric::catalog::Catalog::embedded().unwrap(), &l.topology).unwrap();
    let mut problems = Vec::new();
    let mut charts_of_configs = std::collections::BTreeMap::new();
    let objects: Vec<Value> = g
        .instances()
        .flat_map(|i| fabric::steps::for_instance(i, &l.topology))
        .filter_map(|r| r.kube_object().cloned())
        .filter(|o| o["apiVersion"] == "helm.cattle.io/v1")
        .collect();
    for o in objects.iter().filter(|o| o["kind"] == "HelmChart") {
        charts_of_configs.insert(
            o["metadata"]["name"].as_str().unwrap().to_string(),
            o["spec"]["chart"].as_str().unwrap().rsplit('/').next().unwrap().to_string(),
        );
    }
    for o in &objects {
        let name = o["metadata"]["name"].as_str().unwrap();
        let chart =
            charts_of_configs.get(name).cloned().unwrap_or_else(|| panic!("HelmChartConfig {name} has no HelmChart"));
        let values: Value = serde_saphyr::from_str(o["spec"]["valuesContent"].as_str().unwrap_or("{}")).unwrap();
        let at = format!("{} {name} ({chart})", o["kind"].as_str().unwrap());
        let mut unknown = Vec::new();
        match chart.as_str() {
            "cilium" => {
                let schema: Value =
                    serde_json::from_str(&std::fs::read_to_string(specs().join("cilium/values.schema.json")).unwrap())
                        .unwrap();
                unknown_in_schema(&values, &schema, "", &mut unknown);
            }
            c if UNCHECKED.contains(&c) => continue,
            c => unknown_in_defaults(&values, &yaml(&specs().join(c).join("values.yaml")), "", &mut unknown),
        }
        problems.extend(unknown.into_iter().map(|p| format!("{at}: `{}` is not a value of the chart", &p[1..])));
    }
    problems
}

#[test]
fn every_rendered_helm_value_exists_in_its_chart() {
    for (name, text) in [
        ("example", include_str!("../topology.example.yaml")),
        ("three-sites", include_str!("data/three-sites.yaml")),
        ("lab-full", include_str!("data/lab-full.yaml")),
    ] {
        let problems = check(text);
        assert!(problems.is_empty(), "{name}:\n{}", problems.join("\n"));
    }
}

#[test]
fn a_misspelt_value_is_found() {
    let mut unknown = Vec::new();
    let defaults: Value = serde_json::json!({"global": {"gpuSharing": false, "nodeSelector": {}}});
    let values = serde_json::json!({"global": {"gpuSharng": true, "nodeSelector": {"any": "x"}}});
    unknown_in_defaults(&values, &defaults, "", &mut unknown);
    assert_eq!(unknown, [".global.gpuSharng"]);
    let schema = serde_json::json!({"properties": {"clustermesh": {"properties": {"useAPIServer": {}}}}});
    let mut unknown = Vec::new();
    unknown_in_schema(&serde_json::json!({"clustermesh": {"useAPIserver": true}}), &schema, "", &mut unknown);
    assert_eq!(unknown, [".clustermesh.useAPIserver"]);
}
