//! What Karmada does with an OverridePolicy's overriders when it propagates a resource to a
//! member (`pkg/util/overridemanager`), for the overriders fabric writes: `labelsOverrider` and
//! `annotationsOverrider` (a map under `metadata`, made when missing), then `plaintext`, which
//! Karmada applies as a JSON patch with `github.com/evanphx/json-patch/v5`, so RFC 6902 holds:
//! `add` needs the parent to exist (and replaces a member that exists), `replace` and `remove`
//! need the target. A patch that fails is Karmada's error, and the member gets nothing.

use serde_json::Value;

/// `obj` with `overriders` (an `overrideRules[].overriders` value) applied, or why Karmada
/// would refuse it.
pub fn apply_overriders(obj: &Value, overriders: &Value) -> Result<Value, String> {
    let mut out = obj.clone();
    for (field, key) in [("labelsOverrider", "labels"), ("annotationsOverrider", "annotations")] {
        for o in overriders[field].as_array().into_iter().flatten() {
            let map = out["metadata"].as_object_mut().ok_or("object without metadata")?;
            let entry = map.entry(key).or_insert_with(|| Value::Object(Default::default()));
            let m = entry.as_object_mut().ok_or(format!("metadata.{key} is not a map"))?;
            for (k, v) in o["value"].as_object().into_iter().flatten() {
                match o["operator"].as_str() {
                    Some("add" | "replace") => {
                        m.insert(k.clone(), v.clone());
                    }
                    Some("remove") => {
                        m.remove(k);
                    }
                    other => return Err(format!("{field}: unknown operator {other:?}")),
                }
            }
        }
    }
    for p in overriders["plaintext"].as_array().into_iter().flatten() {
        let path = p["path"].as_str().ok_or("plaintext overrider without path")?;
        let op = p["operator"].as_str().unwrap_or_default();
        json_patch(&mut out, op, path, p.get("value"))?;
    }
    Ok(out)
}

/// One object a workload depends on, as Karmada's dependencies distributor propagates it beside
/// the workload when the policy has `propagateDeps: true`: `(kind, name)`, in the workload's
/// namespace.
pub type Dependency = (&'static str, String);

/// The dependencies Karmada's default interpreter finds in `workload`
/// (karmada-io/karmada `pkg/resourceinterpreter/default/native/dependencies.go`: Deployment, Job,
/// CronJob, Pod, DaemonSet and StatefulSet, each from its pod template only, through
/// `pkg/util/helper/pod.go` `GetDependenciesFromPodTemplate`):
/// - ConfigMaps and Secrets the pod names (`pkg/util/lifted` `VisitPodConfigmapNames` /
///   `VisitPodSecretNames`, lifted from Kubernetes: `env[].valueFrom`, `envFrom`, of every
///   container, init and ephemeral ones too; `volumes[]` `configMap`, `secret`, `projected`
///   sources, and the secret references of `azureFile`, `cephfs`, `cinder`, `flexVolume`,
///   `iscsi`, `rbd`, `scaleIO`, `storageos` and `csi`; `imagePullSecrets`);
/// - its ServiceAccount, unless empty or `default` (`getServiceAccountNames`);
/// - the PVCs of `volumes[].persistentVolumeClaim.claimName` (`getPVCNames`). A StatefulSet's
///   `volumeClaimTemplates` are not read: their PVCs are never propagated, each member's
///   StatefulSet controller makes its own.
///
/// Another kind has no default dependencies (an empty list). Sorted, each once.
pub fn dependencies(workload: &Value) -> Vec<Dependency> {
    let template = match workload["kind"].as_str() {
        Some("Deployment" | "StatefulSet" | "DaemonSet" | "Job") => &workload["spec"]["template"],
        Some("CronJob") => &workload["spec"]["jobTemplate"]["spec"]["template"],
        Some("Pod") => workload,
        _ => return Vec::new(),
    };
    let spec = &template["spec"];
    let mut out: Vec<Dependency> = Vec::new();
    let mut add = |kind: &'static str, name: &Value| {
        if let Some(n) = name.as_str().filter(|n| !n.is_empty()) {
            out.push((kind, n.to_string()));
        }
    };
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            for e in c["envFrom"].as_array().into_iter().flatten() {
                add("ConfigMap", &e["configMapRef"]["name"]);
                add("Secret", &e["secretRef"]["name"]);
            }
            for e in c["env"].as_array().into_iter().flatten() {
                add("ConfigMap", &e["valueFrom"]["configMapKeyRef"]["name"]);
                add("Secret", &e["valueFrom"]["secretKeyRef"]["name"]);
            }
        }
    }
    for p in spec["imagePullSecrets"].as_array().into_iter().flatten() {
        add("Secret", &p["name"]);
    }
    for v in spec["volumes"].as_array().into_iter().flatten() {
        add("ConfigMap", &v["configMap"]["name"]);
        add("Secret", &v["secret"]["secretName"]);
        for src in v["projected"]["sources"].as_array().into_iter().flatten() {
            add("ConfigMap", &src["configMap"]["name"]);
            add("Secret", &src["secret"]["name"]);
        }
        add("Secret", &v["azureFile"]["secretName"]);
        for k in ["cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "storageos", "iscsi"] {
            add("Secret", &v[k]["secretRef"]["name"]);
        }
        add("Secret", &v["csi"]["nodePublishSecretRef"]["name"]);
        add("PersistentVolumeClaim", &v["persistentVolumeClaim"]["claimName"]);
    }
    if let Some(sa) = spec["serviceAccountName"].as_str().filter(|n| *n != "default") {
        add("ServiceAccount", &Value::String(sa.to_string()));
    }
    out.sort();
    out.dedup();
    out
}

/// One RFC 6902 operation, with RFC 6901 pointers (`~1` is `/`, `~0` is `~`).
fn json_patch(doc: &mut Value, op: &str, path: &str, value: Option<&Value>) -> Result<(), String> {
    let (parent, last) = path.rsplit_once('/').ok_or(format!("bad JSON pointer {path:?}"))?;
    let last = last.replace("~1", "/").replace("~0", "~");
    let missing = || format!("doc is missing path: \"{path}\": missing value");
    let target = doc.pointer_mut(parent).ok_or_else(missing)?;
    match (op, target) {
        ("add", Value::Object(m)) => {
            m.insert(last, value.cloned().unwrap_or(Value::Null));
        }
        ("replace", Value::Object(m)) if m.contains_key(&last) => {
            m.insert(last, value.cloned().unwrap_or(Value::Null));
        }
        ("remove", Value::Object(m)) if m.contains_key(&last) => {
            m.remove(&last);
        }
        ("add" | "replace" | "remove", Value::Array(a)) => {
            let i = if last == "-" { a.len() } else { last.parse::<usize>().map_err(|_| missing())? };
            match op {
                "add" if i <= a.len() => a.insert(i, value.cloned().unwrap_or(Value::Null)),
                "replace" if i < a.len() => a[i] = value.cloned().unwrap_or(Value::Null),
                "remove" if i < a.len() => {
                    a.remove(i);
                }
                _ => return Err(missing()),
            }
        }
        ("add" | "replace" | "remove", _) => return Err(missing()),
        (other, _) => return Err(format!("unexpected kind of operation {other:?}")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dependencies_are_the_pod_templates_references_not_volume_claim_templates() {
        let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "pg"},
            "spec": {"serviceName": "pg", "template": {"spec": {
                "serviceAccountName": "pg",
                "imagePullSecrets": [{"name": "registry"}],
                "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "pg-init"}}]}],
                "containers": [{"name": "c",
                    "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "pg-auth", "key": "p"}}},
                            {"name": "L", "value": "x"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/d"}]}],
                "volumes": [{"name": "conf", "configMap": {"name": "pg-conf"}},
                            {"name": "tls", "projected": {"sources": [{"secret": {"name": "pg-tls"}}]}},
                            {"name": "backup", "persistentVolumeClaim": {"claimName": "pg-backup"}}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}});
        let want: Vec<Dependency> = vec![
            ("ConfigMap", "pg-conf".into()),
            ("ConfigMap", "pg-init".into()),
            ("PersistentVolumeClaim", "pg-backup".into()),
            ("Secret", "pg-auth".into()),
            ("Secret", "pg-tls".into()),
            ("Secret", "registry".into()),
            ("ServiceAccount", "pg".into()),
        ];
        assert_eq!(dependencies(&sts), want);
        assert!(!dependencies(&sts).iter().any(|(_, n)| n.starts_with("data")), "no volumeClaimTemplates' PVC");
        let mut default_sa = sts.clone();
        default_sa["spec"]["template"]["spec"]["serviceAccountName"] = json!("default");
        assert!(!dependencies(&default_sa).iter().any(|(k, _)| *k == "ServiceAccount"));
        assert!(dependencies(&json!({"kind": "Service", "spec": {}})).is_empty(), "no interpreter for a Service");
    }

    #[test]
    fn rfc_6902_holds() {
        let d = json!({"metadata": {"name": "x"}, "spec": {"a": {"b": 1}, "l": [1, 2]}});
        let p = |op: &str, path: &str| json!({"plaintext": [{"operator": op, "path": path, "value": 9}]});
        assert_eq!(apply_overriders(&d, &p("add", "/spec/a/c")).unwrap()["spec"]["a"]["c"], 9);
        assert_eq!(apply_overriders(&d, &p("add", "/spec/a/b")).unwrap()["spec"]["a"]["b"], 9, "add replaces");
        assert!(apply_overriders(&d, &p("add", "/spec/missing/c")).is_err(), "add needs the parent");
        assert!(apply_overriders(&d, &p("replace", "/spec/a/c")).is_err(), "replace needs the target");
        assert!(apply_overriders(&d, &p("remove", "/spec/a/c")).is_err(), "remove needs the target");
        assert_eq!(apply_overriders(&d, &p("add", "/spec/l/-")).unwrap()["spec"]["l"], json!([1, 2, 9]));
        let a = json!({"annotationsOverrider": [{"operator": "add", "value": {"k": "v"}}]});
        assert_eq!(apply_overriders(&d, &a).unwrap()["metadata"]["annotations"]["k"], "v", "the map is made");
    }
}
