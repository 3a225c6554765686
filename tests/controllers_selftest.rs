//! The testkit's simulated controllers against the upstream rules they follow (each module's
//! doc names its files; Kueue is no longer simulated: the real one runs in
//! `tests/multikueue_dispatch.rs`): Karmada's propagation
//! (`fabric_testkit::karmada`), ArgoCD's health (`fabric_testkit::argocd`) and what the charts
//! the helm-controller installs make from their values (`fabric_testkit::helm_charts`,
//! `fabric_testkit::helm_workloads`), the DaemonSet controller's Pods with the status their
//! Nodes' kubelets report (`fabric_testkit::daemonset`), and the Deployment, ReplicaSet and
//! StatefulSet controllers with the scheduler (`fabric_testkit::workloads`). A double that
//! drifted from its rule fails here, not silently in the tests that rely on it.

use base64::Engine as _;
use fabric_testkit::kube_api::{TestApiServer, shared_schemas};
use fabric_testkit::{argocd, karmada};
use serde_json::{Value, json};

fn server() -> TestApiServer {
    TestApiServer::start_blocking(shared_schemas())
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

// ---- helm-controller: what the charts make from their values (`fabric_testkit::helm_charts`) ----

/// Polls `f` until it holds (the simulated controllers run a moment after each write).
fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn helm_chart(name: &str, chart: &str, target: &str, values: &str) -> Value {
    json!({"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart", "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"repo": "https://charts.invalid/", "chart": chart, "version": "1.0.0", "targetNamespace": target,
            "valuesContent": values}})
}

fn helm_chart_config(name: &str, values: &str) -> Value {
    json!({"apiVersion": "helm.cattle.io/v1", "kind": "HelmChartConfig", "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"valuesContent": values}})
}

/// Cilium's clustermesh-apiserver and peer Secret exist only with the values the chart's templates
/// need (`clustermesh.useAPIServer`, and `clustermesh.config.enabled` for the Secret); the
/// HelmChartConfig's values are layered over the HelmChart's, and what an upgrade no longer
/// renders is deleted.
#[test]
fn cilium_chart_makes_the_clustermesh_apiserver_only_when_its_values_ask() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.register_nodes(&["n1"]);
    let get = |kind: &str, name: &str| {
        let av = if kind == "Service" || kind == "Secret" { "v1" } else { "apps/v1" };
        api.object(av, kind, Some("kube-system"), name)
    };
    api.put_raw(helm_chart("cilium", "cilium", "kube-system", "operator:\n  replicas: 1\n"));
    eventually("the agents and the operator", || {
        get("DaemonSet", "cilium").is_some() && get("Deployment", "cilium-operator").is_some()
    });
    let op = get("Deployment", "cilium-operator").unwrap();
    assert_eq!(op["spec"]["replicas"], 1, "operator.replicas from the HelmChart's values");
    assert_eq!(op["metadata"]["annotations"]["meta.helm.sh/release-name"], "cilium");
    eventually("the operator rolled out", || {
        get("Deployment", "cilium-operator").is_some_and(|d| d["status"]["availableReplicas"] == 1)
    });
    // Cluster Mesh values without `useAPIServer` (its default is false): the chart makes neither
    // the clustermesh-apiserver nor the peer Secret.
    let peers = "clustermesh:\n  apiserver:\n    service: { type: NodePort, nodePort: 32379 }\n  config:\n    enabled: true\n    clusters: [{ name: sp, ips: [10.0.0.2], port: 32379 }]\n";
    let job = || api.object("batch/v1", "Job", Some("kube-system"), "helm-install-cilium").unwrap();
    let hash = |j: &Value| j["metadata"]["annotations"]["helmcharts.helm.cattle.io/configHash"].clone();
    let first = hash(&job());
    api.put_raw(helm_chart_config("cilium", peers));
    eventually("the reinstall with the config's values", || {
        let j = job();
        j["status"]["succeeded"] == 1 && hash(&j) != first
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(get("Deployment", "clustermesh-apiserver").is_none(), "no useAPIServer, no clustermesh-apiserver");
    assert!(get("Service", "clustermesh-apiserver").is_none());
    assert!(get("Secret", "cilium-clustermesh").is_none(), "the Secret needs useAPIServer too");
    assert_eq!(get("Deployment", "cilium-operator").unwrap()["spec"]["replicas"], 1, "the HelmChart's values stay");
    // With it: Deployment, NodePort Service, a key per peer.
    api.put_raw(helm_chart_config("cilium", &format!("{peers}  useAPIServer: true\n")));
    eventually("the clustermesh-apiserver", || get("Secret", "cilium-clustermesh").is_some());
    assert!(get("Deployment", "clustermesh-apiserver").is_some());
    assert_eq!(get("Service", "clustermesh-apiserver").unwrap()["spec"]["ports"][0]["nodePort"], 32379);
    let keys: Vec<String> =
        get("Secret", "cilium-clustermesh").unwrap()["data"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["sp"]);
    // Turned off again: the upgrade deletes what it no longer renders.
    api.put_raw(helm_chart_config("cilium", "clustermesh:\n  useAPIServer: false\n"));
    eventually("the clustermesh-apiserver gone", || {
        get("Deployment", "clustermesh-apiserver").is_none() && get("Secret", "cilium-clustermesh").is_none()
    });
    assert!(get("DaemonSet", "cilium").is_some(), "the agents stay");
    // The chart removed: the release goes with it.
    api.delete_raw("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "cilium");
    eventually("the release uninstalled", || get("DaemonSet", "cilium").is_none());
}

/// Karmada's control plane is named after the release (the HelmChart's name) in its target
/// namespace, and only with `installMode: host`.
#[test]
fn karmada_chart_control_plane_follows_release_and_install_mode() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    let dep = |name: &str| api.object("apps/v1", "Deployment", Some("karmada-system"), name);
    api.put_raw(helm_chart("karmada", "karmada", "karmada-system", "installMode: host\n"));
    eventually("karmada's control plane", || {
        ["karmada-apiserver", "karmada-controller-manager", "karmada-scheduler"].iter().all(|n| dep(n).is_some())
    });
    api.put_raw(helm_chart("kfed", "karmada", "karmada-system", "installMode: agent\n"));
    eventually("kfed installed", || {
        api.object("batch/v1", "Job", Some("kube-system"), "helm-install-kfed")
            .is_some_and(|j| j["status"]["succeeded"] == 1)
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(dep("kfed-scheduler").is_none(), "agent mode makes no control plane");
    // A chart the double does not render makes nothing (it says so in kube_api.md).
    api.put_raw(helm_chart("other", "not-a-known-chart", "default", ""));
    eventually("other installed", || {
        api.object("batch/v1", "Job", Some("kube-system"), "helm-install-other")
            .is_some_and(|j| j["status"]["succeeded"] == 1)
    });
}

/// The chart's templates can fail the install: a Cluster Mesh peer with neither `ips` nor
/// `address` (`required` in cilium's `clustermesh-config-generate-etcd-cfg`), or values that are
/// no YAML mapping. The install Job fails and the HelmChart says so; nothing is rendered.
#[test]
fn helm_install_fails_when_the_chart_templates_fail_on_the_values() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    let failed = |name: &str| install_failed(&api, name);
    let no_address =
        "clustermesh:\n  useAPIServer: true\n  config:\n    enabled: true\n    clusters: [{ name: sp, port: 32379 }]\n";
    api.put_raw(helm_chart("cilium", "cilium", "kube-system", no_address));
    eventually("the cilium install failed", || failed("cilium"));
    assert!(
        api.object("apps/v1", "DaemonSet", Some("kube-system"), "cilium").is_none(),
        "a failed install makes nothing"
    );
    // The same peer with its address installs.
    api.put_raw(helm_chart(
        "cilium",
        "cilium",
        "kube-system",
        &no_address.replace("port: 32379", "address: 10.0.0.2, port: 32379"),
    ));
    eventually("the cilium install", || {
        api.object("v1", "Secret", Some("kube-system"), "cilium-clustermesh").is_some()
    });
    assert!(!failed("cilium"));
    let cfg = api.object("v1", "Secret", Some("kube-system"), "cilium-clustermesh").unwrap()["data"]["sp"].clone();
    let cfg = base64::engine::general_purpose::STANDARD.decode(cfg.as_str().unwrap()).unwrap();
    assert!(String::from_utf8(cfg).unwrap().starts_with("endpoints:\n- https://10.0.0.2:32379\n"));
    api.put_raw(helm_chart("karmada", "karmada", "karmada-system", "- not a mapping\n"));
    eventually("the karmada install failed", || failed("karmada"));
}

/// Whether the HelmChart `name` says its install failed.
fn install_failed(api: &TestApiServer, name: &str) -> bool {
    api.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), name).is_some_and(|c| {
        c["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| x["type"] == "Failed" && x["status"] == "True")
    })
}

/// The Pods of DaemonSet `ds` in `ns`, as (node, Ready) sorted by node.
fn daemon_pods(api: &TestApiServer, ns: &str, ds: &str) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = api
        .objects()
        .into_iter()
        .filter(|o| {
            o["kind"] == "Pod" && o["metadata"]["namespace"] == ns && o["metadata"]["ownerReferences"][0]["name"] == ds
        })
        .map(|p| {
            let ready = p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            (p["spec"]["nodeName"].as_str().unwrap_or_default().to_string(), ready)
        })
        .collect();
    out.sort();
    out
}

fn owned(names: &[(&str, bool)]) -> Vec<(String, bool)> {
    names.iter().map(|(n, r)| (n.to_string(), *r)).collect()
}

// ---- DaemonSet controller and kubelets (`fabric_testkit::daemonset`) ----

/// The Cilium DaemonSet the chart renders gets one agent Pod per Node its nodeSelector (the
/// chart's default `kubernetes.io/os: linux`) selects, cordoned or not; a Node whose kubelet sees
/// the agent crash reports it not Ready; a Node that goes takes its Pod along; a deleted Pod comes
/// back; a nodeSelector no Node has leaves the DaemonSet with nothing to run.
#[test]
fn daemonset_runs_one_pod_per_selected_node_ready_as_its_kubelet_says() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.register_nodes(&["n1", "n2"]);
    // A Node registered without the OS label (not by a kubelet): no agent there.
    api.put_raw_as(
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        "kubelet",
    );
    let mut cordoned = api.object("v1", "Node", None, "n2").unwrap();
    cordoned["spec"] =
        json!({"unschedulable": true, "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]});
    cordoned["metadata"].as_object_mut().unwrap().remove("managedFields");
    api.put_raw_as(cordoned, "kubectl");
    api.put_raw(helm_chart("cilium", "cilium", "kube-system", ""));
    eventually("an agent per linux node", || {
        daemon_pods(&api, "kube-system", "cilium") == owned(&[("n1", true), ("n2", true)])
    });
    let ds = || api.object("apps/v1", "DaemonSet", Some("kube-system"), "cilium").unwrap_or_default();
    eventually("the DaemonSet counts them", || {
        ds()["status"]["numberReady"] == 2 && ds()["status"]["desiredNumberScheduled"] == 2
    });
    // The agent crashes on n1: its Pod is not Ready, the DaemonSet is short of one.
    api.set_crash_loop("n1", "cilium-agent", true);
    eventually("n1's agent not Ready", || {
        daemon_pods(&api, "kube-system", "cilium") == owned(&[("n1", false), ("n2", true)])
    });
    let pod = api.objects().into_iter().find(|o| o["kind"] == "Pod" && o["spec"]["nodeName"] == "n1").unwrap();
    assert_eq!(pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"], "CrashLoopBackOff");
    eventually("numberUnavailable", || ds()["status"]["numberUnavailable"] == 1);
    api.set_crash_loop("n1", "cilium-agent", false);
    eventually("n1's agent Ready again", || {
        daemon_pods(&api, "kube-system", "cilium") == owned(&[("n1", true), ("n2", true)])
    });
    // Its Pod deleted: the controller makes another.
    let name = pod["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("cilium-") && name.len() == "cilium-".len() + 5, "{name}");
    assert!(api.delete_raw("v1", "Pod", Some("kube-system"), &name));
    eventually("n1's agent back", || daemon_pods(&api, "kube-system", "cilium").len() == 2);
    // n2 leaves the cluster: its Pod goes.
    assert!(api.delete_raw("v1", "Node", None, "n2"));
    eventually("n2's agent gone", || daemon_pods(&api, "kube-system", "cilium") == owned(&[("n1", true)]));
    // The DaemonSet deleted: its Pods go with it (garbage collection by owner reference).
    assert!(api.delete_raw("apps/v1", "DaemonSet", Some("kube-system"), "cilium"));
    eventually("the agents gone with it", || daemon_pods(&api, "kube-system", "cilium").is_empty());
    // A nodeSelector no Node has: nothing to run anywhere.
    api.put_raw(helm_chart("cilium", "cilium", "kube-system", "nodeSelector:\n  kubernetes.io/os: windows\n"));
    eventually("no agent", || daemon_pods(&api, "kube-system", "cilium").is_empty());
    eventually("nothing desired", || ds()["status"]["desiredNumberScheduled"] == 0);
}

/// Cilium's chart checks its values against its `values.schema.json` before rendering: a value of
/// the wrong type fails the install.
#[test]
fn cilium_chart_refuses_values_its_schema_refuses() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.put_raw(helm_chart("cilium", "cilium", "kube-system", "operator:\n  replicas: two\n"));
    eventually("the install failed", || install_failed(&api, "cilium"));
    let c = api.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "cilium").unwrap();
    assert!(api.object("apps/v1", "DaemonSet", Some("kube-system"), "cilium").is_none(), "{c}");
    api.put_raw(helm_chart("cilium", "cilium", "kube-system", "operator:\n  replicas: 2\n"));
    eventually("installed", || api.object("apps/v1", "DaemonSet", Some("kube-system"), "cilium").is_some());
}

/// Kueue's chart: the controller manager and its two Services, named after the release, sized by
/// `controllerManager.replicas`; an invalid replica count or feature-gate list fails the install.
#[test]
fn kueue_chart_makes_its_controller_manager_and_refuses_what_its_templates_fail_on() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.register_nodes(&["n1"]);
    let get = |av: &str, kind: &str, name: &str| api.object(av, kind, Some("kueue-system"), name);
    let gates = "controllerManager:\n  replicas: 2\n  featureGates: [{ name: MultiKueue, enabled: true }]\n";
    api.put_raw(helm_chart("kueue", "oci://registry.invalid/kueue/charts/kueue", "kueue-system", gates));
    eventually("the controller manager available", || {
        get("apps/v1", "Deployment", "kueue-controller-manager").is_some_and(|d| d["status"]["availableReplicas"] == 2)
    });
    for svc in ["kueue-webhook-service", "kueue-controller-manager-metrics-service"] {
        let s = get("v1", "Service", svc).unwrap_or_else(|| panic!("{svc}"));
        assert_eq!(s["spec"]["selector"]["control-plane"], "controller-manager", "{svc}");
    }
    api.put_raw(helm_chart(
        "kq",
        "oci://registry.invalid/kueue/charts/kueue",
        "kueue-system",
        "controllerManager:\n  replicas: -1\n",
    ));
    eventually("a negative replica count fails", || install_failed(&api, "kq"));
    api.put_raw(helm_chart(
        "kg",
        "oci://registry.invalid/kueue/charts/kueue",
        "kueue-system",
        "controllerManager:\n  featureGates: MultiKueue\n",
    ));
    eventually("feature gates that are no list fail", || install_failed(&api, "kg"));
    assert!(get("apps/v1", "Deployment", "kg-kueue-controller-manager").is_none());
    // A nodeSelector no Node has: the manager never becomes available.
    api.put_raw(helm_chart(
        "kueue",
        "oci://registry.invalid/kueue/charts/kueue",
        "kueue-system",
        "controllerManager:\n  nodeSelector: { gpu: none }\n",
    ));
    eventually("no node for the manager", || {
        get("apps/v1", "Deployment", "kueue-controller-manager")
            .is_some_and(|d| d["status"]["unavailableReplicas"] == 1)
    });
}

/// KAI Scheduler's chart makes its operator (`operator.replicaCount`); a replica count that is
/// no integer fails the install.
#[test]
fn kai_chart_makes_its_operator() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.put_raw(helm_chart(
        "kai-scheduler",
        "oci://registry.invalid/kai-scheduler/kai-scheduler",
        "kai-scheduler",
        "global:\n  gpuSharing: true\n",
    ));
    eventually("kai-operator", || api.object("apps/v1", "Deployment", Some("kai-scheduler"), "kai-operator").is_some());
    api.put_raw(helm_chart(
        "kai2",
        "oci://registry.invalid/kai-scheduler/kai-scheduler",
        "kai2",
        "operator:\n  replicaCount: many\n",
    ));
    eventually("the install failed", || install_failed(&api, "kai2"));
}

/// Argo CD's chart: the application controller (a StatefulSet), server, repo server and Redis,
/// named `argocd-*` by the chart's `nameOverride`; Redis only while `redis.enabled`.
#[test]
fn argocd_chart_makes_its_components() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.put_raw(helm_chart("argocd", "argo-cd", "argocd", ""));
    let get = |kind: &str, name: &str| {
        api.object(if kind == "Service" { "v1" } else { "apps/v1" }, kind, Some("argocd"), name)
    };
    eventually("argocd's components", || get("StatefulSet", "argocd-application-controller").is_some());
    for d in ["argocd-server", "argocd-repo-server", "argocd-redis"] {
        assert!(get("Deployment", d).is_some() && get("Service", d).is_some(), "{d}");
    }
    api.put_raw(helm_chart("argocd", "argo-cd", "argocd", "redis:\n  enabled: false\n"));
    eventually("redis gone", || get("Deployment", "argocd-redis").is_none());
    assert!(get("Deployment", "argocd-server").is_some());
}

/// The NVIDIA device plugin's chart: its DaemonSet runs where its affinity selects (fabric's GPU
/// label here, NFD's labels by default), tolerating `nvidia.com/gpu:NoSchedule`; its
/// validation template refuses the `default` namespace and an explicit `namespace` value.
#[test]
fn nvidia_device_plugin_chart_runs_where_its_affinity_selects() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.register_nodes(&["cpu", "gpu"]);
    let mut gpu = api.object("v1", "Node", None, "gpu").unwrap();
    gpu["metadata"]["labels"]["gpu.model"] = json!("l40s");
    gpu["spec"] = json!({"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]});
    gpu["metadata"].as_object_mut().unwrap().remove("managedFields");
    api.put_raw_as(gpu, "kubectl");
    let ns = "nvidia-device-plugin";
    let chart = "https://charts.invalid/nvidia-device-plugin";
    // The chart's default affinity wants NFD's labels: no Node has them.
    api.put_raw(helm_chart("nvidia-device-plugin", chart, ns, ""));
    eventually("the DaemonSet", || api.object("apps/v1", "DaemonSet", Some(ns), "nvidia-device-plugin").is_some());
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(daemon_pods(&api, ns, "nvidia-device-plugin").is_empty());
    let affinity = "affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchExpressions: [{ key: gpu.model, operator: Exists }]\n";
    api.put_raw(helm_chart("nvidia-device-plugin", chart, ns, affinity));
    eventually("a plugin on the GPU node only", || {
        daemon_pods(&api, ns, "nvidia-device-plugin") == owned(&[("gpu", true)])
    });
    // Without the chart's toleration, the GPU node's taint keeps it off.
    api.put_raw(helm_chart("nvidia-device-plugin", chart, ns, &format!("{affinity}tolerations: []\n")));
    eventually("no plugin", || daemon_pods(&api, ns, "nvidia-device-plugin").is_empty());
    api.put_raw(helm_chart("ndp", chart, "default", ""));
    eventually("the default namespace is refused", || install_failed(&api, "ndp"));
    api.put_raw(helm_chart("ndp2", chart, ns, "namespace: gpu\n"));
    eventually("an explicit namespace value is refused", || install_failed(&api, "ndp2"));
}

// ---- Deployments, ReplicaSets, StatefulSets and the scheduler (`fabric_testkit::workloads`) ----

fn web(image: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": image}]}}}})
}

/// The Pods of `ns` labelled `app`, as (name, node, Ready), by name.
fn app_pods(api: &TestApiServer, ns: &str, app: &str) -> Vec<(String, String, bool)> {
    fabric_testkit::workloads::app_pods(&api.objects(), ns, app)
}

fn replica_sets(api: &TestApiServer, owner: &str) -> Vec<Value> {
    api.objects()
        .into_iter()
        .filter(|o| o["kind"] == "ReplicaSet" && o["metadata"]["ownerReferences"][0]["name"] == owner)
        .collect()
}

/// A Deployment's Pods come from a ReplicaSet `<name>-<pod-template-hash>` the Deployment owns,
/// spread over the Nodes; a new template rolls to a new ReplicaSet without ever dropping below
/// `replicas - maxUnavailable` Ready Pods (3 − 0 here), the old one scaled to 0 and kept; the
/// status then says what `kubectl rollout status` waits for.
#[test]
fn a_deployment_rolls_its_pods_through_replicasets_within_its_availability() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.register_nodes(&["n1", "n2", "n3"]);
    api.put_raw(web("web:1", 3));
    let d = || api.object("apps/v1", "Deployment", Some("default"), "web").unwrap();
    eventually("3 available", || d()["status"]["availableReplicas"] == 3);
    let first = replica_sets(&api, "web");
    assert_eq!(first.len(), 1);
    let hash = first[0]["metadata"]["labels"]["pod-template-hash"].as_str().unwrap().to_string();
    assert_eq!(first[0]["metadata"]["name"], format!("web-{hash}"));
    assert_eq!(first[0]["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "1");
    let pods = app_pods(&api, "default", "web");
    let nodes: std::collections::BTreeSet<&str> = pods.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(nodes.len(), 3, "one per Node (fewest pods first): {pods:?}");
    assert!(pods.iter().all(|(n, _, r)| n.starts_with(&format!("web-{hash}-")) && *r), "{pods:?}");
    // A new image: a second ReplicaSet, revision 2.
    api.put_raw(web("web:2", 3));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut lowest = usize::MAX;
    loop {
        let pods = app_pods(&api, "default", "web");
        lowest = lowest.min(pods.iter().filter(|(_, _, r)| *r).count());
        let st = d()["status"].clone();
        if st["updatedReplicas"] == 3
            && st["replicas"] == 3
            && st["availableReplicas"] == 3
            && st["observedGeneration"] == 2
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never rolled out: {st:#} {pods:?}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(lowest >= 3, "maxUnavailable 0 (25% of 3, rounded down): {lowest} Ready at one point");
    let sets = replica_sets(&api, "web");
    assert_eq!(sets.len(), 2, "the old ReplicaSet is kept (revisionHistoryLimit)");
    let old = sets.iter().find(|r| r["metadata"]["name"] == format!("web-{hash}")).unwrap();
    assert_eq!(old["spec"]["replicas"], 0);
    let progressing =
        d()["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Progressing").cloned().unwrap();
    assert_eq!(progressing["reason"], "NewReplicaSetAvailable", "{progressing:#}");
    assert!(app_pods(&api, "default", "web").iter().all(|(n, _, _)| !n.starts_with(&format!("web-{hash}-"))));
    // Deleting the Deployment takes its ReplicaSets and Pods along (garbage collection).
    assert!(api.delete_raw("apps/v1", "Deployment", Some("default"), "web"));
    eventually("everything gone", || {
        replica_sets(&api, "web").is_empty() && app_pods(&api, "default", "web").is_empty()
    });
}

/// The scheduler binds a Pod only to a Node it may run on (not cordoned, selector and affinity
/// met, taints tolerated); with none, the Pod stays Pending saying why, and the Deployment is not
/// Available. An evicted Pod is made again elsewhere; a Node that goes takes its Pods along
/// (pod GC) and the ReplicaSet makes them again.
#[test]
fn replicaset_pods_go_where_the_scheduler_lets_them_and_come_back_when_lost() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.register_nodes(&["n1", "n2"]);
    let mut taint = api.object("v1", "Node", None, "n2").unwrap();
    taint["spec"] = json!({"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]});
    taint["metadata"].as_object_mut().unwrap().remove("managedFields");
    api.put_raw_as(taint, "kubectl");
    api.put_raw(web("web:1", 2));
    eventually("2 pods on n1", || {
        let p = app_pods(&api, "default", "web");
        p.len() == 2 && p.iter().all(|(_, n, r)| n == "n1" && *r)
    });
    // n1 cordoned, one pod evicted: its replacement has nowhere to go.
    let mut cordon = api.object("v1", "Node", None, "n1").unwrap();
    cordon["spec"] = json!({"unschedulable": true});
    cordon["metadata"].as_object_mut().unwrap().remove("managedFields");
    api.put_raw_as(cordon, "kubectl");
    let victim = app_pods(&api, "default", "web")[0].0.clone();
    assert!(api.delete_raw("v1", "Pod", Some("default"), &victim));
    eventually("a Pending replacement", || {
        app_pods(&api, "default", "web").iter().any(|(n, node, _)| *n != victim && node.is_empty())
    });
    let pending = api.objects().into_iter().find(|o| o["kind"] == "Pod" && o["spec"]["nodeName"].is_null()).unwrap();
    assert_eq!(pending["status"]["phase"], "Pending");
    assert_eq!(
        pending["status"]["conditions"][0]["message"],
        "0/2 nodes are available: 1 node(s) had untolerated taint {gpu: yes}, 1 node(s) were unschedulable."
    );
    let d = || api.object("apps/v1", "Deployment", Some("default"), "web").unwrap();
    eventually("not available", || {
        d()["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Available" && c["status"] == "False"))
    });
    assert_eq!(d()["status"]["unavailableReplicas"], 1);
    // A toleration in the template: the rollout moves both Pods to n2.
    let mut tolerant = web("web:1", 2);
    tolerant["spec"]["template"]["spec"]["tolerations"] = json!([{"key": "gpu", "operator": "Exists"}]);
    api.put_raw(tolerant);
    eventually("2 Ready pods on n2", || {
        let p = app_pods(&api, "default", "web");
        p.len() == 2 && p.iter().all(|(_, n, r)| n == "n2" && *r)
    });
    // n2 leaves: its pods go (pod GC), their replacements wait for a Node.
    assert!(api.delete_raw("v1", "Node", None, "n2"));
    eventually("replacements Pending", || {
        let p = app_pods(&api, "default", "web");
        p.len() == 2 && p.iter().all(|(_, n, _)| n.is_empty())
    });
}

/// A Deployment whose selector does not select its template (written past the API's validation
/// with `put_raw`) makes no ReplicaSet and no Pod: a wait for it never ends.
#[test]
fn a_deployment_whose_selector_misses_its_template_makes_nothing() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.register_nodes(&["n1"]);
    let mut d = web("web:1", 1);
    d["spec"]["selector"]["matchLabels"] = json!({"app": "other"});
    api.put_raw(d);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(replica_sets(&api, "web").is_empty());
    assert!(app_pods(&api, "default", "web").is_empty());
    let d = api.object("apps/v1", "Deployment", Some("default"), "web").unwrap();
    assert!(d["status"]["availableReplicas"].is_null(), "{d:#}");
}

/// A StatefulSet's Pods are `<name>-0..N-1`, made one at a time once the ones before are Ready
/// (`OrderedReady`): a crash-looping pod-0 holds pod-1 back. A new template replaces them from the
/// highest ordinal; the status counts them by revision.
#[test]
fn a_statefulset_makes_numbered_pods_in_order() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.register_nodes(&["n1"]);
    api.set_crash_loop("n1", "db", true);
    let sts = |image: &str| {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
            "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": image}]}}}})
    };
    api.put_raw(sts("db:1"));
    eventually("db-0, not Ready", || {
        app_pods(&api, "default", "db") == [("db-0".to_string(), "n1".to_string(), false)]
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(app_pods(&api, "default", "db").len(), 1, "db-1 waits for db-0");
    api.set_crash_loop("n1", "db", false);
    eventually("3 Ready", || app_pods(&api, "default", "db").iter().filter(|(_, _, r)| *r).count() == 3);
    let names: Vec<String> = app_pods(&api, "default", "db").into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, ["db-0", "db-1", "db-2"]);
    let s = || api.object("apps/v1", "StatefulSet", Some("default"), "db").unwrap();
    eventually("status", || s()["status"]["readyReplicas"] == 3);
    let first = s()["status"]["updateRevision"].clone();
    api.put_raw(sts("db:2"));
    eventually("rolled", || {
        let st = s()["status"].clone();
        st["updatedReplicas"] == 3
            && st["readyReplicas"] == 3
            && st["currentRevision"] == st["updateRevision"]
            && st["updateRevision"] != first
    });
    let pod = api.object("v1", "Pod", Some("default"), "db-2").unwrap();
    assert_eq!(pod["spec"]["containers"][0]["image"], "db:2");
    assert_eq!(pod["spec"]["subdomain"], "db");
}

/// ArgoCD reconciles an Application only while the argo-cd chart's application controller runs
/// (a Ready Pod of its StatefulSet, made by the StatefulSet controller from what the chart
/// rendered), and renders its source only while the repo server does: no install, or one whose
/// pods cannot run, leaves the Application without status.
#[test]
fn argocd_syncs_only_while_the_charts_controller_and_repo_server_run() {
    let api = server();
    api.simulate_controllers(std::time::Duration::from_millis(20));
    api.register_nodes(&["n1"]);
    let repo = std::env::temp_dir().join(format!("fabric-argocd-selftest-{}", std::process::id()));
    std::fs::create_dir_all(repo.join("apps")).unwrap();
    std::fs::write(
        repo.join("apps/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: { name: hello, namespace: default }\ndata: { a: b }\n",
    )
    .unwrap();
    api.put_raw(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "argocd"}}));
    api.put_raw(json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "apps", "namespace": "argocd"},
        "spec": {"source": {"repoURL": "https://git.invalid/r", "path": "apps"},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "default"},
            "syncPolicy": {"automated": {}}}}));
    let url = "https://git.invalid/r";
    // No ArgoCD installed: nothing happens.
    assert_eq!(
        argocd::sync(&api, url, &repo, &[]),
        ["argocd/apps: not reconciled: no Ready application controller in argocd"]
    );
    assert!(api.object("v1", "ConfigMap", Some("default"), "hello").is_none());
    // Installed on a node selector no Node has: its pods stay Pending, still nothing.
    api.put_raw(helm_chart("argocd", "argo-cd", "argocd", "global:\n  nodeSelector: { zone: nowhere }\n"));
    eventually("the controller's StatefulSet", || {
        api.object("apps/v1", "StatefulSet", Some("argocd"), "argocd-application-controller").is_some()
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(argocd::sync(&api, url, &repo, &[])[0].contains("not reconciled"));
    // Schedulable, but without a repo server: a comparison error. (The Pending pod-0 holds an
    // OrderedReady StatefulSet's rollout back until it is deleted: Kubernetes' "Forced rollback",
    // `stateful_set_control.go` waits for every pod to be Running and Ready.)
    api.put_raw(helm_chart("argocd", "argo-cd", "argocd", "repoServer:\n  replicas: 0\n"));
    eventually("the new template", || {
        api.object("apps/v1", "StatefulSet", Some("argocd"), "argocd-application-controller")
            .is_some_and(|s| s["spec"]["template"]["spec"]["nodeSelector"].is_null())
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(argocd::sync(&api, url, &repo, &[])[0].contains("not reconciled"), "stuck");
    assert!(api.delete_raw("v1", "Pod", Some("argocd"), "argocd-application-controller-0"));
    let ev = || argocd::sync(&api, url, &repo, &[]);
    eventually("the controller running", || !ev()[0].contains("not reconciled"));
    assert!(ev()[0].contains("ComparisonError: the repo server is not reachable"), "{:?}", ev());
    // The whole chart: synced.
    api.put_raw(helm_chart("argocd", "argo-cd", "argocd", ""));
    eventually("synced", || ev() == ["argocd/apps: Synced, Healthy (1 resources)"]);
    assert!(api.object("v1", "ConfigMap", Some("default"), "hello").is_some());
    let _ = std::fs::remove_dir_all(&repo);
}
