//! Karmada's propagation of resource templates to its members, as one reconcile a test calls
//! ([`propagate`]), and what it does with an OverridePolicy's overriders ([`apply_overriders`]).
//!
//! **Propagation** (karmada-io/karmada v1.15): a template in the Karmada API (any kind but
//! Karmada's own and namespaces) is claimed by the PropagationPolicy of its namespace that
//! selects it with the highest explicit `priority`, then the best implicit one (a selector by
//! `name` over one by `labelSelector` over one by kind alone), then the smallest name
//! (`pkg/detector/compare.go` `getHighestPriorityPropagationPolicy`); a selector matches on
//! `apiVersion`, `kind`, `namespace` when set, then `name` (ignoring the label selector) or else
//! `labelSelector` or else everything (`pkg/util/selector.go` `ResourceSelectorPriority`;
//! `matchLabels` and `matchExpressions` `In`/`NotIn`/`Exists`/`DoesNotExist`). Without a
//! PropagationPolicy, the ClusterPropagationPolicies the same way (`getAndApplyClusterPolicy`).
//! It goes to `placement.clusterAffinity.clusterNames` (every member when unset). Replicas
//! (`spec.replicas`) are copied to each cluster (`Duplicated`, the default), or `Divided` by
//! `weightPreference.staticWeightList`: each cluster `weight × replicas / sum`, rounded down, the
//! remainder one by one to the heaviest (`pkg/util/helper/binding.go` `Dispenser.TakeByWeight`;
//! Karmada orders equal weights at random, the double in `members`' order). Each member's copy
//! gets the OverridePolicies of the namespace that select it (none = all) and whose
//! `targetCluster` names the member (none = all), ordered by implicit priority then name, the
//! best last (`pkg/util/overridemanager/overridemanager.go`). Dependencies travel only when the
//! policy says `propagateDeps: true` (`pkg/dependenciesdistributor`, feature PropagateDeps): the
//! ConfigMaps, Secrets, non-default ServiceAccount and PersistentVolumeClaims the pod template
//! names ([`dependencies`], `pkg/util/helper/pod.go` `GetDependenciesFromPodTemplate`), to the
//! same clusters. The double runs the dependencies distributor as if the PropagateDeps gate were
//! on; in Karmada it starts only with the gate (`cmd/controller-manager/app/controllermanager.go`),
//! which the chart's `values.yaml` turns off, so fabric's chart values are held against the
//! chart's defaults instead (tests/karmada_chart_flags.rs).
//! Each member's status of a Deployment or StatefulSet is summed back into the template's
//! (`pkg/resourceinterpreter/default/native/aggregatestatus.go`), `observedGeneration` the
//! template's once every member observed its own. Not modelled: dynamic weights, spread
//! constraints and cluster taints (the estimator's and failover's work), removing a copy a policy
//! no longer selects, the Work/ResourceBinding objects.
//!
//! **Overriders** (`pkg/util/overridemanager`), for the overriders fabric writes: `labelsOverrider` and
//! `annotationsOverrider` (a map under `metadata`, made when missing), then `plaintext`, which
//! Karmada applies as a JSON patch with `github.com/evanphx/json-patch/v5`, so RFC 6902 holds:
//! `add` needs the parent to exist (and replaces a member that exists), `replace` and `remove`
//! need the target. A patch that fails is Karmada's error, and the member gets nothing.

use serde_json::{Value, json};

use crate::kube_api::TestApiServer;

const POLICY: &str = "policy.karmada.io/v1alpha1";

/// Selector priorities, as Karmada's `ImplicitPriority`.
const MISMATCH: u8 = 0;
const MATCH_ALL: u8 = 1;
const MATCH_LABELS: u8 = 2;
const MATCH_NAME: u8 = 3;

/// One pass of Karmada's controllers: every template the policies select goes to its clusters'
/// APIs (manager `karmada-execution-controller`), and their Deployments' and StatefulSets'
/// status comes back to the template. Returns one line per object written
/// (`sp: Deployment ai/vllm (1 replica(s)) by data-services`), or the overrider error that kept
/// a member from getting it.
pub fn propagate(karmada: &TestApiServer, members: &[(&str, &TestApiServer)]) -> Vec<String> {
    let all = karmada.objects();
    let policies =
        |kind: &str| -> Vec<&Value> { all.iter().filter(|o| o["apiVersion"] == POLICY && o["kind"] == kind).collect() };
    let (pps, cpps, ops) =
        (policies("PropagationPolicy"), policies("ClusterPropagationPolicy"), policies("OverridePolicy"));
    let mut events = Vec::new();
    for template in all.iter().filter(|o| is_template(o)) {
        let ns = template["metadata"]["namespace"].as_str();
        let local: Vec<&Value> =
            pps.iter().copied().filter(|p| ns.is_some() && p["metadata"]["namespace"].as_str() == ns).collect();
        let Some(policy) = best_policy(template, &local).or_else(|| best_policy(template, &cpps)) else { continue };
        let names = policy["spec"]["placement"]["clusterAffinity"]["clusterNames"].as_array();
        let targets: Vec<(&str, &TestApiServer)> =
            members.iter().copied().filter(|(m, _)| names.is_none_or(|n| n.iter().any(|x| x == *m))).collect();
        let replicas = divide(template, &policy["spec"]["placement"]["replicaScheduling"], &targets);
        for (i, (member, api)) in targets.iter().enumerate() {
            let mut copy = for_member(template);
            if let (Some(r), true) = (replicas.get(i), template["spec"]["replicas"].is_number()) {
                copy["spec"]["replicas"] = json!(r);
            }
            match overridden(&copy, &ops, member) {
                Ok(obj) => {
                    events.push(format!(
                        "{member}: {} {}{} by {}",
                        obj["kind"].as_str().unwrap_or_default(),
                        ns.map(|n| format!("{n}/")).unwrap_or_default(),
                        obj["metadata"]["name"].as_str().unwrap_or_default(),
                        policy["metadata"]["name"].as_str().unwrap_or_default()
                    ));
                    api.put_raw_as(obj, "karmada-execution-controller");
                }
                Err(e) => events.push(format!("{member}: {e}")),
            }
            if policy["spec"]["propagateDeps"] == true {
                for dep in dependencies(template).iter().filter_map(|(k, n)| karmada.object("v1", k, ns, n)) {
                    events.push(format!(
                        "{member}: {} {} as a dependency",
                        dep["kind"].as_str().unwrap_or_default(),
                        dep["metadata"]["name"].as_str().unwrap_or_default()
                    ));
                    api.put_raw_as(for_member(&dep), "karmada-execution-controller");
                }
            }
        }
        aggregate_status(karmada, template, &targets);
    }
    events
}

/// What Karmada propagates at all: not its own objects, not namespaces (its namespace
/// controller's), not what the API server makes by itself.
fn is_template(o: &Value) -> bool {
    let api = o["apiVersion"].as_str().unwrap_or_default();
    let own =
        ["policy.karmada.io", "work.karmada.io", "cluster.karmada.io", "config.karmada.io", "apiregistration.k8s.io"];
    !own.iter().any(|g| api.starts_with(&format!("{g}/")))
        && !matches!(o["kind"].as_str(), Some("Namespace" | "Event" | "Lease" | "EndpointSlice" | "Endpoints"))
}

fn best_policy<'a>(template: &Value, policies: &[&'a Value]) -> Option<&'a Value> {
    let mut best: Option<(&Value, i64, u8)> = None;
    for p in policies {
        let implicit = selectors_priority(template, &p["spec"]["resourceSelectors"]);
        if implicit == MISMATCH {
            continue;
        }
        let explicit = p["spec"]["priority"].as_i64().unwrap_or(0);
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let better = match best {
            None => true,
            Some((b, be, bi)) => {
                explicit > be
                    || (explicit == be
                        && (implicit > bi
                            || (implicit == bi && name < b["metadata"]["name"].as_str().unwrap_or_default())))
            }
        };
        if better {
            best = Some((p, explicit, implicit));
        }
    }
    best.map(|(p, _, _)| p)
}

/// The best priority of any of `selectors` for `o` (`ResourceMatchSelectorsPriority`).
fn selectors_priority(o: &Value, selectors: &Value) -> u8 {
    selectors.as_array().into_iter().flatten().map(|rs| selector_priority(o, rs)).max().unwrap_or(MISMATCH)
}

fn selector_priority(o: &Value, rs: &Value) -> u8 {
    let ns = rs["namespace"].as_str().unwrap_or_default();
    if o["apiVersion"] != rs["apiVersion"]
        || o["kind"] != rs["kind"]
        || (!ns.is_empty() && o["metadata"]["namespace"] != ns)
    {
        return MISMATCH;
    }
    match rs["name"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => return if o["metadata"]["name"] == n { MATCH_NAME } else { MISMATCH },
        None if rs["labelSelector"].is_null() => return MATCH_ALL,
        None => {}
    }
    if label_selector_matches(&rs["labelSelector"], &o["metadata"]["labels"]) { MATCH_LABELS } else { MISMATCH }
}

/// A `metav1.LabelSelector` against an object's labels.
pub fn label_selector_matches(sel: &Value, labels: &Value) -> bool {
    let has = |k: &str| labels[k].as_str();
    let ml = sel["matchLabels"].as_object().into_iter().flatten().all(|(k, v)| has(k) == v.as_str());
    let me = sel["matchExpressions"].as_array().into_iter().flatten().all(|e| {
        let k = e["key"].as_str().unwrap_or_default();
        let in_values = || e["values"].as_array().into_iter().flatten().any(|v| has(k).is_some_and(|h| v == h));
        match e["operator"].as_str() {
            Some("In") => in_values(),
            Some("NotIn") => !in_values(),
            Some("Exists") => has(k).is_some(),
            Some("DoesNotExist") => has(k).is_none(),
            _ => false,
        }
    });
    ml && me
}

/// Replicas per target, in `targets`' order.
fn divide(template: &Value, scheduling: &Value, targets: &[(&str, &TestApiServer)]) -> Vec<i64> {
    let total = template["spec"]["replicas"].as_i64().unwrap_or(1);
    if scheduling["replicaSchedulingType"] != "Divided" {
        return vec![total; targets.len()];
    }
    let weight = |m: &str| -> i64 {
        let list = scheduling["weightPreference"]["staticWeightList"].as_array();
        list.into_iter()
            .flatten()
            .filter(|w| w["targetCluster"]["clusterNames"].as_array().is_some_and(|n| n.iter().any(|x| x == m)))
            .map(|w| w["weight"].as_i64().unwrap_or(0))
            .next()
            .unwrap_or(0)
    };
    let weights: Vec<i64> = targets.iter().map(|(m, _)| weight(m)).collect();
    let sum: i64 = weights.iter().sum();
    if sum == 0 {
        return vec![0; targets.len()];
    }
    let mut out: Vec<i64> = weights.iter().map(|w| w * total / sum).collect();
    let mut remain = total - out.iter().sum::<i64>();
    // The remainder goes one by one to the heaviest first (a stable sort keeps `targets`' order
    // among equals, where Karmada picks at random).
    let mut order: Vec<usize> = (0..targets.len()).collect();
    order.sort_by_key(|i| std::cmp::Reverse(weights[*i]));
    for i in order {
        if remain == 0 {
            break;
        }
        out[i] += 1;
        remain -= 1;
    }
    out
}

/// The template as a member gets it: without what the Karmada API server set.
fn for_member(template: &Value) -> Value {
    let mut copy = template.clone();
    if let Some(m) = copy["metadata"].as_object_mut() {
        for k in ["managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"] {
            m.remove(k);
        }
    }
    if let Some(o) = copy.as_object_mut() {
        o.remove("status");
    }
    copy
}

fn overridden(copy: &Value, ops: &[&Value], member: &str) -> Result<Value, String> {
    let mut matching: Vec<(u8, &str, &Value)> = ops
        .iter()
        .filter(|p| p["metadata"]["namespace"] == copy["metadata"]["namespace"])
        .filter_map(|p| {
            let sel = &p["spec"]["resourceSelectors"];
            let prio =
                if sel.as_array().is_none_or(|a| a.is_empty()) { MATCH_ALL } else { selectors_priority(copy, sel) };
            (prio != MISMATCH).then(|| (prio, p["metadata"]["name"].as_str().unwrap_or_default(), *p))
        })
        .collect();
    matching.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let mut out = copy.clone();
    for (_, _, p) in matching {
        for rule in p["spec"]["overrideRules"].as_array().into_iter().flatten() {
            let names = rule["targetCluster"]["clusterNames"].as_array();
            if rule["targetCluster"].is_null() || names.is_some_and(|n| n.iter().any(|x| x == member)) {
                out = apply_overriders(&out, &rule["overriders"]).map_err(|e| {
                    format!("OverridePolicy {} refused: {e}", p["metadata"]["name"].as_str().unwrap_or_default())
                })?;
            }
        }
    }
    Ok(out)
}

/// The members' status of a Deployment or StatefulSet, summed into the template's.
fn aggregate_status(karmada: &TestApiServer, template: &Value, targets: &[(&str, &TestApiServer)]) {
    if !matches!(template["kind"].as_str(), Some("Deployment" | "StatefulSet")) {
        return;
    }
    let (av, kind, ns, name) = (
        template["apiVersion"].as_str().unwrap_or_default(),
        template["kind"].as_str().unwrap_or_default(),
        template["metadata"]["namespace"].as_str(),
        template["metadata"]["name"].as_str().unwrap_or_default(),
    );
    let fields =
        ["replicas", "readyReplicas", "updatedReplicas", "availableReplicas", "unavailableReplicas", "currentReplicas"];
    let mut sum = serde_json::Map::new();
    let mut observed = true;
    for (_, api) in targets {
        let Some(m) = api.object(av, kind, ns, name) else {
            observed = false;
            continue;
        };
        observed &= m["status"]["observedGeneration"].as_i64().unwrap_or(0)
            >= m["metadata"]["generation"].as_i64().unwrap_or(1);
        for f in fields {
            if let Some(v) = m["status"][f].as_i64() {
                let e = sum.entry(f).or_insert(json!(0));
                *e = json!(e.as_i64().unwrap_or(0) + v);
            }
        }
    }
    let Some(mut current) = karmada.object(av, kind, ns, name) else { return };
    if observed {
        sum.insert("observedGeneration".into(), current["metadata"]["generation"].clone());
    }
    if current["status"] != Value::Object(sum.clone()) {
        current["status"] = Value::Object(sum);
        karmada.put_raw_as(current, "karmada-controller-manager");
    }
}

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
