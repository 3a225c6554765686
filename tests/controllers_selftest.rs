//! The testkit's simulated controllers against the upstream rules they follow (each module's
//! doc names its files): Kueue's admission (`fabric_testkit::kueue`), Karmada's propagation
//! (`fabric_testkit::karmada`) and ArgoCD's health (`fabric_testkit::argocd`). A double that
//! drifted from its rule fails here, not silently in the tests that rely on it.

use fabric_testkit::kube_api::{TestApiServer, shared_schemas};
use fabric_testkit::{argocd, karmada, kueue};
use serde_json::{Value, json};

fn server() -> TestApiServer {
    TestApiServer::start_blocking(shared_schemas())
}

#[test]
fn quantities_as_kubernetes_reads_them() {
    let m = |s: &str| kueue::milli(&json!(s));
    assert_eq!(m("100m"), Some(100));
    assert_eq!(m("1.5"), Some(1500));
    assert_eq!(m("64Mi"), Some(64 * 1024 * 1024 * 1000));
    assert_eq!(m("2G"), Some(2_000_000_000_000));
    assert_eq!(m("1e3"), Some(1_000_000));
    assert_eq!(m("0.5m"), Some(1), "rounded up");
    assert_eq!(kueue::milli(&json!(3)), Some(3000));
    assert_eq!(m("1Gb"), None);
    assert_eq!(m("abc"), None);
}

fn job(pod: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "batch",
        "labels": {kueue::QUEUE_LABEL: "batch"}}, "spec": {"suspend": true, "template": {"spec": pod}}})
}

#[test]
fn kueue_requests_are_kubernetes_pod_requests() {
    let api = server();
    // Limits stand for missing requests; containers add up; an init container is a floor; a
    // sidecar adds; overhead adds; parallelism multiplies.
    let pod = json!({
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": 1}}},
            {"name": "b", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}],
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            {"name": "init", "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}],
        "overhead": {"cpu": "50m"}});
    let mut j = job(pod);
    j["spec"]["parallelism"] = json!(2);
    let r = kueue::job_requests(&api, &j).unwrap();
    // cpu: max(500 + 250 + 100, 2000 + 100) + 50 = 2150 millicores per pod.
    assert_eq!(r["cpu"], 2 * 2150);
    assert_eq!(r["memory"], 2 * (1024 + 512) * 1024 * 1024);
    assert_eq!(r["nvidia.com/gpu"], 2);
    j["spec"]["completions"] = json!(1);
    assert_eq!(kueue::job_requests(&api, &j).unwrap()["nvidia.com/gpu"], 1, "completions below parallelism");
    // The RuntimeClass's overhead when the pod has none.
    api.put_raw(json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
        "handler": "nvidia", "overhead": {"podFixed": {"memory": "1.5Ki"}}}));
    let j = job(json!({"runtimeClassName": "nvidia", "containers": [{"name": "a"}]}));
    assert_eq!(kueue::job_requests(&api, &j).unwrap(), kueue::Requests::from([("memory".into(), 1536)]));
    let bad = job(json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}));
    assert!(kueue::job_requests(&api, &bad).unwrap_err().contains("cpu"));
}

fn queue(covered: &[&str], quota: Value) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": covered,
            "flavors": [{"name": "f", "resources": quota}]}]}})
}

#[test]
fn kueue_admits_only_what_its_queue_covers_and_has_room_for() {
    let api = server();
    let real = job(json!({"containers": [{"name": "a", "resources": {
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": 1}}}]}));
    let gpu_only = queue(&["nvidia.com/gpu"], json!([{"name": "nvidia.com/gpu", "nominalQuota": 2}]));
    assert_eq!(kueue::assign(&api, &gpu_only, &real), Err("resource cpu unavailable in ClusterQueue".into()));
    let all = queue(
        &["cpu", "memory", "nvidia.com/gpu"],
        json!([{"name": "cpu", "nominalQuota": 2}, {"name": "memory", "nominalQuota": "2Gi"},
            {"name": "nvidia.com/gpu", "nominalQuota": 2}]),
    );
    assert_eq!(kueue::assign(&api, &all, &real), Ok(vec!["f".to_string()]));
    // cpu counts: 3 cores do not fit a quota of 2, though the GPU would.
    let mut big = real.clone();
    big["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("3");
    assert!(kueue::assign(&api, &all, &big).unwrap_err().contains("insufficient unused quota for cpu"));
    // A resource named at 0 still has to be covered.
    let zero = job(json!({"containers": [{"name": "a", "resources": {"requests": {"example.com/x": 0}}}]}));
    assert_eq!(kueue::assign(&api, &all, &zero), Err("resource example.com/x unavailable in ClusterQueue".into()));
}

fn policy(name: &str, selectors: Value, extra: Value) -> Value {
    let mut spec =
        json!({"resourceSelectors": selectors, "placement": {"clusterAffinity": {"clusterNames": ["a", "b"]}}});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "data"}, "spec": spec})
}

fn statefulset() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "pg", "namespace": "data", "labels": {"tier": "db"}},
        "spec": {"replicas": 3, "serviceName": "pg", "selector": {"matchLabels": {"app": "pg"}},
            "template": {"metadata": {"labels": {"app": "pg"}}, "spec": {
                "containers": [{"name": "pg", "image": "pg", "envFrom": [{"secretRef": {"name": "pg-auth"}}]}],
                "volumes": [{"name": "conf", "configMap": {"name": "pg-conf"}}]}}}})
}

fn karmada_with(policies: &[Value]) -> (TestApiServer, TestApiServer, TestApiServer) {
    let (k, a, b) = (server(), server(), server());
    k.put_raw(statefulset());
    k.put_raw(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pg-conf", "namespace": "data"}, "data": {"x": "1"}}));
    k.put_raw(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pg-auth", "namespace": "data"}, "data": {}}),
    );
    for p in policies {
        k.put_raw(p.clone());
    }
    (k, a, b)
}

#[test]
fn karmada_propagates_any_kind_and_its_dependencies_only_when_asked() {
    let by_name = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "pg"}]);
    let (k, a, b) = karmada_with(&[policy("db", by_name.clone(), json!({}))]);
    let ev = karmada::propagate(&k, &[("a", &a), ("b", &b)]);
    assert_eq!(ev, ["a: StatefulSet data/pg by db", "b: StatefulSet data/pg by db"]);
    assert_eq!(b.object("apps/v1", "StatefulSet", Some("data"), "pg").unwrap()["spec"]["replicas"], 3, "Duplicated");
    assert!(a.object("v1", "ConfigMap", Some("data"), "pg-conf").is_none(), "no propagateDeps: no dependencies");
    let (k, a, b) = karmada_with(&[policy("db", by_name, json!({"propagateDeps": true}))]);
    karmada::propagate(&k, &[("a", &a), ("b", &b)]);
    for m in [&a, &b] {
        assert!(m.object("v1", "ConfigMap", Some("data"), "pg-conf").is_some());
        assert!(m.object("v1", "Secret", Some("data"), "pg-auth").is_some());
    }
}

#[test]
fn karmada_picks_the_policy_by_name_over_labels_over_kind_and_divides_by_weight() {
    let kind_only = policy("a-kind", json!([{"apiVersion": "apps/v1", "kind": "StatefulSet"}]), json!({}));
    let labels = policy(
        "b-labels",
        json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "labelSelector": {"matchLabels": {"tier": "db"}}}]),
        json!({}),
    );
    let mut weighted =
        policy("c-name", json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "pg"}]), json!({}));
    weighted["spec"]["placement"]["replicaScheduling"] = json!({"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
        "weightPreference": {"staticWeightList": [
            {"targetCluster": {"clusterNames": ["a"]}, "weight": 1}, {"targetCluster": {"clusterNames": ["b"]}, "weight": 2}]}});
    let (k, a, b) = karmada_with(&[kind_only.clone(), labels.clone(), weighted]);
    let ev = karmada::propagate(&k, &[("a", &a), ("b", &b)]);
    assert_eq!(ev, ["a: StatefulSet data/pg by c-name", "b: StatefulSet data/pg by c-name"]);
    // 3 × 1/3 = 1 and 3 × 2/3 = 2.
    let replicas =
        |m: &TestApiServer| m.object("apps/v1", "StatefulSet", Some("data"), "pg").unwrap()["spec"]["replicas"].clone();
    assert_eq!((replicas(&a), replicas(&b)), (json!(1), json!(2)));
    let (k, a, b) = karmada_with(&[kind_only.clone(), labels]);
    assert_eq!(karmada::propagate(&k, &[("a", &a), ("b", &b)])[0], "a: StatefulSet data/pg by b-labels");
    // A higher explicit priority wins over a better selector.
    let mut urgent = kind_only;
    urgent["spec"]["priority"] = json!(5);
    let (k, a, b) = karmada_with(&[
        urgent,
        policy("z", json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "pg"}]), json!({})),
    ]);
    assert_eq!(karmada::propagate(&k, &[("a", &a), ("b", &b)])[0], "a: StatefulSet data/pg by a-kind");
    // A selector of another kind or name selects nothing.
    let (k, a, b) =
        karmada_with(&[policy("x", json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "pg"}]), json!({}))]);
    assert_eq!(karmada::propagate(&k, &[("a", &a), ("b", &b)]), Vec::<String>::new());
}

#[test]
fn argocd_deployment_health_as_gitops_engine() {
    let d = |generation: i64, st: Value| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"generation": generation}, "spec": {"replicas": 2}, "status": st});
    assert_eq!(argocd::deployment_health(&d(2, json!({"observedGeneration": 1}))), "Progressing");
    let rolling = json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1});
    assert_eq!(argocd::deployment_health(&d(1, rolling)), "Progressing");
    let done = json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
    assert_eq!(argocd::deployment_health(&d(1, done)), "Healthy");
    let mut paused = d(1, json!({}));
    paused["spec"]["paused"] = json!(true);
    assert_eq!(argocd::deployment_health(&paused), "Suspended");
}
