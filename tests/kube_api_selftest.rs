//! Self-test of the kube-apiserver test double `crates/testkit/src/kube_api.rs`: discovery, auth,
//! CRUD with Status bodies, server-side apply (no-op, change, removal, conflicts, force), dry run,
//! schema validation, namespaces, connection failures and injected failures; CRD objects,
//! `set_served`, EndpointSlices and the opt-in simulated controllers.

use fabric_testkit::kube_api;
use fabric_testkit::kube_schema::Schemas;

use std::path::Path;
use std::time::{Duration, Instant};

use kube_api::{HttpResponse, TEST_TOKEN, TestApiServer, http_request, shared_schemas};
use serde_json::{Value, json};

const CQ: &str = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues";
const APPLY: &str = "application/apply-patch+yaml";

async fn server() -> TestApiServer {
    TestApiServer::start(shared_schemas()).await
}

fn cluster_queue(name: &str) -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "fabric"}},
        "spec": {
            "cohortName": "research",
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [{
                "coveredResources": ["cpu", "nvidia.com/gpu"],
                "flavors": [{
                    "name": "site-a-gpu",
                    "resources": [
                        {"name": "cpu", "nominalQuota": 64},
                        {"name": "nvidia.com/gpu", "nominalQuota": 8}
                    ]
                }]
            }]
        }
    })
}

fn config_map(ns: &str, name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": data})
}

async fn apply(s: &TestApiServer, path: &str, manager: &str, extra: &str, obj: &Value) -> HttpResponse {
    let q = format!("{path}?fieldManager={manager}{extra}");
    s.request("PATCH", &q, Some(APPLY), Some(&obj.to_string())).await.expect("request")
}

async fn get(s: &TestApiServer, path: &str) -> HttpResponse {
    s.request("GET", path, None, None).await.expect("request")
}

fn rv(v: &Value) -> String {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no resourceVersion: {v:#}"))
        .to_string()
}

fn assert_status(r: &HttpResponse, code: u16, reason: &str) {
    assert_eq!(r.status, code, "{:#}", r.body);
    assert_eq!(r.body["kind"], "Status", "{:#}", r.body);
    assert_eq!(r.body["apiVersion"], "v1");
    assert_eq!(r.body["status"], "Failure");
    assert_eq!(r.body["reason"], reason, "{:#}", r.body);
    assert_eq!(r.body["code"], code);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()));
}

/// The fields a manager owns in `managedFields` (FieldsV1), or `None` if it has no entry.
fn owned<'a>(obj: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    obj.pointer("/metadata/managedFields")?
        .as_array()?
        .iter()
        .find(|m| m["manager"] == manager && m["operation"] == operation)
        .map(|m| &m["fieldsV1"])
}

// ---------------------------------------------------------------------------------------------
// Discovery
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn discovery_lists_clusterqueues_and_helmcharts() {
    let s = server().await;
    let groups = get(&s, "/apis").await;
    assert_eq!(groups.status, 200);
    assert_eq!(groups.body["kind"], "APIGroupList");
    let names: Vec<&str> =
        groups.body["groups"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    for g in [
        "kueue.x-k8s.io",
        "helm.cattle.io",
        "cilium.io",
        "policy.karmada.io",
        "cluster.karmada.io",
        "apps",
        "batch",
        "rbac.authorization.k8s.io",
        "argoproj.io",
    ] {
        assert!(names.contains(&g), "{g} missing from /apis: {names:?}");
    }
    let kueue = groups.body["groups"].as_array().unwrap().iter().find(|g| g["name"] == "kueue.x-k8s.io").unwrap();
    assert_eq!(kueue["preferredVersion"]["groupVersion"], "kueue.x-k8s.io/v1beta2", "{kueue:#}");

    let find = |list: &Value, plural: &str| -> Value {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == plural)
            .cloned()
            .unwrap_or_else(|| panic!("{plural} missing: {list:#}"))
    };
    let kq = get(&s, "/apis/kueue.x-k8s.io/v1beta2").await;
    assert_eq!(kq.body["kind"], "APIResourceList");
    assert_eq!(kq.body["groupVersion"], "kueue.x-k8s.io/v1beta2");
    let cq = find(&kq.body, "clusterqueues");
    assert_eq!(cq["kind"], "ClusterQueue");
    assert_eq!(cq["namespaced"], false);
    assert_eq!(cq["singularName"], "clusterqueue");
    assert!(cq["verbs"].as_array().unwrap().iter().any(|v| v == "patch"));
    assert_eq!(find(&kq.body, "localqueues")["namespaced"], true);

    let helm = get(&s, "/apis/helm.cattle.io/v1").await;
    let hc = find(&helm.body, "helmcharts");
    assert_eq!(hc["kind"], "HelmChart");
    assert_eq!(hc["namespaced"], true);

    let core = get(&s, "/api/v1").await;
    for (plural, namespaced) in [
        ("namespaces", false),
        ("secrets", true),
        ("serviceaccounts", true),
        ("services", true),
        ("configmaps", true),
        ("nodes", false),
    ] {
        assert_eq!(find(&core.body, plural)["namespaced"], namespaced, "{plural}");
    }
    assert_eq!(get(&s, "/api").await.body["versions"], json!(["v1"]));
    assert_eq!(find(&get(&s, "/apis/apps/v1").await.body, "deployments")["kind"], "Deployment");
    assert_eq!(find(&get(&s, "/apis/argoproj.io/v1alpha1").await.body, "applications")["namespaced"], true);
    assert_eq!(get(&s, "/apis/nope.example.com/v1").await.status, 404);
    let v = get(&s, "/version").await;
    assert_eq!(v.status, 200);
    assert!(v.body["gitVersion"].as_str().unwrap().starts_with("v1."));
}

/// K3s runs kube-apiserver with `--anonymous-auth=false` (k3s-io/k3s
/// `pkg/daemons/control/server.go`): without credentials even `/version` and `/healthz` are
/// `401`. The double let them through before, so fabric's "API up" check (`/version`) passed
/// with a kubeconfig whose credentials the real server refuses.
#[tokio::test]
async fn no_anonymous_requests_as_k3s() {
    let s = server().await;
    for path in ["/version", "/healthz", "/livez", "/readyz", "/api"] {
        let r = http_request(s.addr, "GET", path, None, None, None).await.unwrap();
        assert_eq!(r.status, 401, "{path} answered without credentials: {r:?}");
        let r = http_request(s.addr, "GET", path, Some("wrong-token"), None, None).await.unwrap();
        assert_eq!(r.status, 401, "{path} answered a wrong token: {r:?}");
    }
    s.set_allow_anonymous(true);
    assert_eq!(http_request(s.addr, "GET", "/version", None, None, None).await.unwrap().status, 200);
}

/// The plural the double derives for every schema kind equals `spec.names.plural` of its CRD (or
/// the resource in the swagger paths for Karmada's aggregated API).
#[tokio::test]
async fn discovery_plurals_match_the_upstream_crds() {
    let s = server().await;
    let schemas = shared_schemas();
    let mut checked = 0;
    for (g, v, k) in schemas.kinds() {
        let av = format!("{g}/{v}");
        if !schemas.version_status(&av, &k).unwrap().served {
            let path = format!("/apis/{av}/{}", kube_api::plural_of(&k));
            assert_eq!(get(&s, &path).await.status, 404, "{av} {k} is not served");
            continue;
        }
        let src = schemas.source(&av, &k).unwrap().to_path_buf();
        let text = std::fs::read_to_string(&src).unwrap();
        let expected = if src.ends_with("swagger.json") {
            let doc: Value = serde_json::from_str(&text).unwrap();
            let mut found = None;
            for (p, ops) in doc["paths"].as_object().unwrap() {
                let gvk = &ops["post"]["x-kubernetes-group-version-kind"];
                if gvk["group"] == g.as_str() && gvk["version"] == v.as_str() && gvk["kind"] == k.as_str() {
                    found = p.rsplit('/').next().map(str::to_string);
                }
            }
            found.unwrap_or_else(|| panic!("no post path for {av} {k}"))
        } else {
            let docs = Schemas::yaml_documents(&text).unwrap();
            let crd = docs.iter().find(|d| d.pointer("/spec/names/kind").and_then(Value::as_str) == Some(&k)).unwrap();
            crd.pointer("/spec/names/plural").and_then(Value::as_str).unwrap().to_string()
        };
        let list = get(&s, &format!("/apis/{av}")).await;
        let r = list.body["resources"].as_array().unwrap().iter().find(|r| r["kind"] == k.as_str()).cloned();
        let r = r.unwrap_or_else(|| panic!("{av} {k} not in discovery"));
        assert_eq!(r["name"], expected.as_str(), "{av} {k}");
        assert_eq!(r["namespaced"], schemas.namespaced(&av, &k).unwrap(), "{av} {k}");
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} kinds checked");
}

// ---------------------------------------------------------------------------------------------
// Auth, CRUD, Status bodies
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn requests_without_the_bearer_token_get_401() {
    let s = server().await;
    for token in [None, Some("wrong-token")] {
        let r = http_request(s.addr, "GET", "/api/v1/namespaces/default/configmaps", token, None, None).await.unwrap();
        assert_status(&r, 401, "Unauthorized");
        let r = http_request(s.addr, "GET", "/apis", token, None, None).await.unwrap();
        assert_eq!(r.status, 401);
    }
    let ok = http_request(s.addr, "GET", "/api/v1/namespaces/default/configmaps", Some(TEST_TOKEN), None, None).await;
    assert_eq!(ok.unwrap().status, 200);
}

#[tokio::test]
async fn create_get_list_delete_with_status_bodies() {
    let s = server().await;
    let base = "/api/v1/namespaces/default/configmaps";
    let a = config_map("default", "a", json!({"app": "web", "tier": "front"}), json!({"k": "v"}));
    let b = config_map("default", "b", json!({"app": "db"}), json!({}));
    let r = s.request("POST", base, None, Some(&a.to_string())).await.unwrap();
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert_eq!(r.body["data"]["k"], "v");
    assert!(r.body.pointer("/metadata/uid").is_some() && r.body.pointer("/metadata/creationTimestamp").is_some());
    assert_eq!(s.request("POST", base, None, Some(&b.to_string())).await.unwrap().status, 201);

    let dup = s.request("POST", base, None, Some(&a.to_string())).await.unwrap();
    assert_status(&dup, 409, "AlreadyExists");
    assert_eq!(dup.body["message"], "configmaps \"a\" already exists");
    assert_eq!(dup.body["details"]["name"], "a");

    let got = get(&s, &format!("{base}/a")).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body["metadata"]["labels"]["tier"], "front");

    let all = get(&s, base).await;
    assert_eq!(all.body["kind"], "ConfigMapList");
    assert_eq!(all.body["items"].as_array().unwrap().len(), 2);
    let names = |r: &HttpResponse| -> Vec<String> {
        r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&get(&s, &format!("{base}?labelSelector=app%3Dweb")).await), ["a"]);
    assert_eq!(names(&get(&s, &format!("{base}?labelSelector=app=web,tier")).await), ["a"]);
    assert_eq!(names(&get(&s, &format!("{base}?labelSelector=app!=web")).await), ["b"]);
    assert_eq!(names(&get(&s, &format!("{base}?labelSelector=!tier")).await), ["b"]);
    assert!(names(&get(&s, &format!("{base}?labelSelector=app=nope")).await).is_empty());
    // All namespaces.
    assert_eq!(names(&get(&s, "/api/v1/configmaps").await), ["a", "b"]);

    let del = s.request("DELETE", &format!("{base}/a"), None, None).await.unwrap();
    assert_eq!(del.status, 200);
    assert_eq!(del.body["kind"], "Status");
    assert_eq!(del.body["status"], "Success");
    let gone = get(&s, &format!("{base}/a")).await;
    assert_status(&gone, 404, "NotFound");
    assert_eq!(gone.body["message"], "configmaps \"a\" not found");
    assert_status(&s.request("DELETE", &format!("{base}/a"), None, None).await.unwrap(), 404, "NotFound");
    let missing_cq = get(&s, &format!("{CQ}/nope")).await;
    assert_status(&missing_cq, 404, "NotFound");
    assert_eq!(missing_cq.body["message"], "clusterqueues.kueue.x-k8s.io \"nope\" not found");
}

#[tokio::test]
async fn unserved_kinds_and_paths_are_404_status() {
    let s = server().await;
    assert_status(&get(&s, "/apis/kueue.x-k8s.io/v1alpha9/clusterqueues").await, 404, "NotFound");
    assert_status(&get(&s, "/apis/example.com/v1/widgets").await, 404, "NotFound");
    assert_status(&get(&s, "/api/v1/persistentvolumes").await, 404, "NotFound");
    let r = apply(
        &s,
        "/apis/example.com/v1/widgets/w",
        "fabric",
        "",
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    )
    .await;
    assert_status(&r, 404, "NotFound");
    assert!(s.objects().iter().all(|o| o["kind"] != "Widget"));
}

// ---------------------------------------------------------------------------------------------
// Server-side apply
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn apply_creates_and_a_noop_reapply_keeps_the_resource_version() {
    let s = server().await;
    let cq = cluster_queue("gpu-batch");
    let first = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "", &cq).await;
    assert_eq!(first.status, 201, "{:#}", first.body);
    assert_eq!(first.body["metadata"]["generation"], 1);
    let rv1 = rv(&first.body);
    let counter = s.resource_version();
    let again = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "", &cq).await;
    assert_eq!(again.status, 200, "{:#}", again.body);
    assert_eq!(rv(&again.body), rv1);
    assert_eq!(again.body["metadata"]["managedFields"], first.body["metadata"]["managedFields"]);
    assert_eq!(s.resource_version(), counter, "a no-op apply must not write");
    assert_eq!(rv(&get(&s, &format!("{CQ}/gpu-batch")).await.body), rv1);
}

#[tokio::test]
async fn apply_with_a_change_bumps_resource_version_and_generation() {
    let s = server().await;
    let mut cq = cluster_queue("gpu-batch");
    let first = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "", &cq).await;
    cq["spec"]["queueingStrategy"] = json!("StrictFIFO");
    let second = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "", &cq).await;
    assert_eq!(second.status, 200, "{:#}", second.body);
    assert_eq!(second.body["spec"]["queueingStrategy"], "StrictFIFO");
    assert!(rv(&second.body).parse::<u64>().unwrap() > rv(&first.body).parse::<u64>().unwrap());
    assert_eq!(second.body["metadata"]["generation"], 2);
    assert_eq!(second.body["metadata"]["uid"], first.body["metadata"]["uid"]);
    // A metadata-only change bumps the resourceVersion, not the generation.
    cq["metadata"]["labels"]["extra"] = json!("yes");
    let third = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "", &cq).await;
    assert_ne!(rv(&third.body), rv(&second.body));
    assert_eq!(third.body["metadata"]["generation"], 2);
}

#[tokio::test]
async fn a_field_dropped_from_the_applied_config_is_removed() {
    let s = server().await;
    let path = format!("{CQ}/gpu-batch");
    let cq = cluster_queue("gpu-batch");
    apply(&s, &path, "fabric", "", &cq).await;
    let mut smaller = cq.clone();
    smaller["spec"].as_object_mut().unwrap().remove("cohortName");
    smaller["metadata"].as_object_mut().unwrap().remove("labels");
    let r = apply(&s, &path, "fabric", "", &smaller).await;
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert!(r.body["spec"].get("cohortName").is_none(), "{:#}", r.body);
    assert!(r.body["metadata"].get("labels").is_none(), "{:#}", r.body);
    assert!(owned(&r.body, "fabric", "Apply").unwrap()["f:spec"].get("f:cohortName").is_none());
    let stored = get(&s, &path).await.body;
    assert!(stored["spec"].get("cohortName").is_none());
    assert_eq!(stored["spec"]["queueingStrategy"], "BestEffortFIFO");

    // A field another manager also owns stays.
    let mut with_cohort = smaller.clone();
    with_cohort["spec"]["cohortName"] = json!("shared");
    apply(&s, &path, "fabric", "", &with_cohort).await;
    apply(&s, &path, "other", "", &json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "gpu-batch"}, "spec": {"cohortName": "shared"}})).await;
    let r = apply(&s, &path, "fabric", "", &smaller).await;
    assert_eq!(r.body["spec"]["cohortName"], "shared", "{:#}", r.body);
}

#[tokio::test]
async fn conflict_with_another_manager_then_force_moves_ownership() {
    let s = server().await;
    let path = format!("{CQ}/gpu-batch");
    let mut theirs = cluster_queue("gpu-batch");
    theirs["spec"]["cohortName"] = json!("theirs");
    s.put_raw(theirs);
    let before = s.resource_version();

    let ours = cluster_queue("gpu-batch");
    let r = apply(&s, &path, "fabric", "", &ours).await;
    assert_status(&r, 409, "Conflict");
    let msg = r.body["message"].as_str().unwrap();
    assert!(msg.starts_with("Apply failed with 1 conflict: conflict with \"kubectl\""), "{msg}");
    assert!(msg.ends_with(": .spec.cohortName"), "{msg}");
    assert_eq!(r.body["details"]["causes"][0]["reason"], "FieldManagerConflict");
    assert_eq!(r.body["details"]["causes"][0]["field"], ".spec.cohortName");
    assert_eq!(s.resource_version(), before, "a conflicting apply must not write");
    assert_eq!(get(&s, &path).await.body["spec"]["cohortName"], "theirs");

    // Same values as theirs: no conflict, shared ownership.
    let r = apply(&s, &path, "fabric", "&dryRun=All", &{
        let mut o = ours.clone();
        o["spec"]["cohortName"] = json!("theirs");
        o
    })
    .await;
    assert_eq!(r.status, 200, "{:#}", r.body);

    let r = apply(&s, &path, "fabric", "&force=true", &ours).await;
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert_eq!(r.body["spec"]["cohortName"], "research");
    assert!(owned(&r.body, "fabric", "Apply").unwrap()["f:spec"].get("f:cohortName").is_some());
    let kubectl = owned(&r.body, "kubectl", "Update").expect("kubectl keeps its other fields");
    assert!(kubectl["f:spec"].get("f:cohortName").is_none(), "{kubectl:#}");
    // Now kubectl's former field is ours: applying without force succeeds.
    let mut again = ours.clone();
    again["spec"]["cohortName"] = json!("mine-now");
    assert_eq!(apply(&s, &path, "fabric", "", &again).await.status, 200);
}

#[tokio::test]
async fn managed_fields_use_the_kubernetes_format() {
    let s = server().await;
    let r = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "", &cluster_queue("gpu-batch")).await;
    let mf = r.body["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf.len(), 1);
    let e = &mf[0];
    assert_eq!(e["manager"], "fabric");
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "kueue.x-k8s.io/v1beta2");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert!(e["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(e["fieldsV1"]["f:spec"]["f:queueingStrategy"], json!({}));
    assert_eq!(e["fieldsV1"]["f:spec"]["f:resourceGroups"], json!({}), "lists are atomic");
    assert_eq!(e["fieldsV1"]["f:metadata"]["f:labels"]["f:app.kubernetes.io/part-of"], json!({}));
    assert!(e["fieldsV1"]["f:metadata"].get("f:name").is_none());
}

#[tokio::test]
async fn apply_requires_a_field_manager_and_accepts_yaml() {
    let s = server().await;
    let r = s
        .request("PATCH", &format!("{CQ}/gpu-batch"), Some(APPLY), Some(&cluster_queue("gpu-batch").to_string()))
        .await
        .unwrap();
    assert_status(&r, 422, "Invalid");
    assert!(r.body["message"].as_str().unwrap().contains("fieldManager"));
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  answer: \"42\"\n";
    let r = s
        .request(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/from-yaml?fieldManager=fabric",
            Some(APPLY),
            Some(yaml),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert_eq!(r.body["data"]["answer"], "42");
    assert_eq!(r.body["metadata"]["namespace"], "default");
}

// ---------------------------------------------------------------------------------------------
// Dry run
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn dry_run_returns_the_would_be_object_and_changes_nothing() {
    let s = server().await;
    let path = format!("{CQ}/gpu-batch");
    let mut cq = cluster_queue("gpu-batch");
    // Create (dry): nothing stored.
    let r = apply(&s, &path, "fabric", "&dryRun=All", &cq).await;
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert_eq!(r.body["spec"]["cohortName"], "research");
    assert!(r.body["metadata"]["managedFields"].is_array());
    assert_status(&get(&s, &path).await, 404, "NotFound");

    let created = apply(&s, &path, "fabric", "", &cq).await.body;
    let counter = s.resource_version();
    let objects = s.objects();
    cq["spec"]["cohortName"] = json!("elsewhere");
    let r = apply(&s, &path, "fabric", "&dryRun=All", &cq).await;
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert_eq!(r.body["spec"]["cohortName"], "elsewhere");
    assert_eq!(rv(&r.body), rv(&created), "dry run must not bump the resourceVersion");
    assert_eq!(r.body["metadata"]["generation"], 2, "the would-be generation");
    assert_eq!(s.resource_version(), counter);
    assert_eq!(s.objects(), objects);
    assert_eq!(get(&s, &path).await.body["spec"]["cohortName"], "research");
    // A dry-run delete deletes nothing either.
    assert_eq!(s.request("DELETE", &format!("{path}?dryRun=All"), None, None).await.unwrap().status, 200);
    assert_eq!(get(&s, &path).await.status, 200);
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_field_of_a_cluster_queue_is_422_with_a_cause() {
    let s = server().await;
    let mut cq = cluster_queue("gpu-batch");
    let res = cq.pointer_mut("/spec/resourceGroups/0/flavors/0/resources/0").unwrap();
    let q = res.as_object_mut().unwrap().remove("nominalQuota").unwrap();
    res["nominalquota"] = q;
    let r = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "&fieldValidation=Strict", &cq).await;
    assert_status(&r, 422, "Invalid");
    let msg = r.body["message"].as_str().unwrap();
    assert!(msg.starts_with("ClusterQueue.kueue.x-k8s.io \"gpu-batch\" is invalid: "), "{msg}");
    assert_eq!(r.body["details"]["kind"], "ClusterQueue");
    assert_eq!(r.body["details"]["group"], "kueue.x-k8s.io");
    let causes = r.body["details"]["causes"].as_array().unwrap();
    let field = "spec.resourceGroups[0].flavors[0].resources[0].nominalquota";
    assert!(
        causes.iter().any(|c| c["field"] == field && c["message"].as_str().unwrap().contains("unknown field")),
        "{causes:#?}"
    );
    assert!(s.objects().iter().all(|o| o["kind"] != "ClusterQueue"));
}

#[tokio::test]
async fn wrongly_typed_field_is_422() {
    let s = server().await;
    let mut cq = cluster_queue("gpu-batch");
    cq["spec"]["queueingStrategy"] = json!(7);
    cq["spec"]["namespaceSelector"] = json!("everything");
    let r = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "", &cq).await;
    assert_status(&r, 422, "Invalid");
    let causes = r.body["details"]["causes"].as_array().unwrap();
    for f in ["spec.queueingStrategy", "spec.namespaceSelector"] {
        assert!(causes.iter().any(|c| c["field"] == f), "{f} not in {causes:#?}");
    }
    assert!(r.body["message"].as_str().unwrap().contains("is invalid: ["), "two errors are listed");
    // Also on create (POST) and for kinds without a schema (basic metadata checks).
    let r = s.request("POST", CQ, None, Some(&cq.to_string())).await.unwrap();
    assert_status(&r, 422, "Invalid");
    let bad = config_map("default", "Bad_Name", json!({}), json!({}));
    let r = s.request("POST", "/api/v1/namespaces/default/configmaps", None, Some(&bad.to_string())).await.unwrap();
    assert_status(&r, 422, "Invalid");
    assert_eq!(r.body["details"]["causes"][0]["field"], "metadata.name");
}

#[tokio::test]
async fn a_namespace_that_does_not_exist_is_404() {
    let s = server().await;
    let cm = config_map("team-a", "c", json!({}), json!({}));
    let r = apply(&s, "/api/v1/namespaces/team-a/configmaps/c", "fabric", "", &cm).await;
    assert_status(&r, 404, "NotFound");
    assert_eq!(r.body["message"], "namespaces \"team-a\" not found");
    let r = apply(&s, "/api/v1/namespaces/team-a/configmaps/c", "fabric", "&dryRun=All", &cm).await;
    assert_status(&r, 404, "NotFound");
    // default and kube-system exist; creating the namespace makes the object possible.
    assert_eq!(
        apply(
            &s,
            "/api/v1/namespaces/kube-system/configmaps/c",
            "fabric",
            "",
            &config_map("kube-system", "c", json!({}), json!({}))
        )
        .await
        .status,
        201
    );
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}});
    assert_eq!(apply(&s, "/api/v1/namespaces/team-a", "fabric", "", &ns).await.status, 201);
    assert_eq!(apply(&s, "/api/v1/namespaces/team-a/configmaps/c", "fabric", "", &cm).await.status, 201);
    // Deleting the namespace deletes its objects.
    assert_eq!(s.request("DELETE", "/api/v1/namespaces/team-a", None, None).await.unwrap().status, 200);
    assert!(s.objects().iter().all(|o| o["metadata"]["namespace"] != "team-a"));
}

#[tokio::test]
async fn secrets_store_base64_data() {
    let s = server().await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "type": "Opaque", "stringData": {"token": "hello"}, "data": {"raw": "d29ybGQ="}});
    let r = apply(&s, "/api/v1/namespaces/default/secrets/token", "fabric", "", &secret).await;
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert_eq!(r.body["data"]["token"], "aGVsbG8=");
    assert_eq!(r.body["data"]["raw"], "d29ybGQ=");
    assert!(r.body.get("stringData").is_none());
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"}, "data": {"x": "not base64!"}});
    assert_status(&apply(&s, "/api/v1/namespaces/default/secrets/bad", "fabric", "", &bad).await, 422, "Invalid");
}

/// kube-apiserver's default when a client sends no `fieldValidation` is Warn (kubernetes/kubernetes
/// `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go`, `fieldValidation`): the
/// misspelled field is dropped with a warning header, the write succeeds. The double defaulted to
/// Strict before, which let a client that sends nothing look strict in tests.
#[tokio::test]
async fn absent_field_validation_is_warn_as_upstream() {
    let s = server().await;
    let mut cq = cluster_queue("gpu-batch");
    cq["spec"]["cohortname"] = json!("typo");
    let r = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "", &cq).await;
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert!(r.body["spec"].get("cohortname").is_none(), "{:#}", r.body);
    assert!(r.header("warning").is_some_and(|w| w.contains("unknown field") && w.contains("spec.cohortname")), "{r:?}");
}

/// fabric asks for Strict itself (`providers::kube`, both the plan's dry run and the apply), so
/// a misspelled field is refused by a real kube-apiserver too, not dropped with a warning.
#[tokio::test]
async fn fabric_sends_strict_field_validation() {
    let s = server().await;
    let dir = std::env::temp_dir().join(format!("fabric-kube-strict-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    s.kubeconfig(&kc, "strict");
    let access = fabric::providers::kube::KubeAccess::new(kc.to_str().unwrap(), Some("strict"));
    let client = fabric::providers::kube::client(&fabric::addr::Target::cluster("strict"), &access).await.unwrap();
    let mut cq = cluster_queue("gpu-batch");
    cq["spec"]["cohortname"] = json!("typo");
    let refusal = fabric::providers::kube::read(&client, &cq, false).await.unwrap().refusal;
    let refusal = refusal.expect("the plan's dry run passed a misspelled field").to_string();
    assert!(refusal.contains("unknown field") && refusal.contains("cohortname"), "{refusal}");
    let err = fabric::providers::kube::apply(&client, &cq, false).await.expect_err("applied a misspelled field");
    assert!(err.to_string().contains("cohortname"), "{err}");
    assert!(s.objects().iter().all(|o| o["kind"] != "ClusterQueue"), "stored despite the refusal");
    let patches: Vec<String> = s.requests().into_iter().filter(|r| r.starts_with("PATCH ")).collect();
    assert!(!patches.is_empty() && patches.iter().all(|r| r.contains("fieldValidation=Strict")), "{patches:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn field_validation_warn_and_ignore_drop_unknown_fields() {
    let s = server().await;
    let mut cq = cluster_queue("gpu-batch");
    cq["spec"]["cohortname"] = json!("typo");
    let r = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "&fieldValidation=Warn", &cq).await;
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert!(r.body["spec"].get("cohortname").is_none(), "{:#}", r.body);
    assert!(r.header("warning").is_some_and(|w| w.contains("unknown field") && w.contains("spec.cohortname")), "{r:?}");
    let owner = owned(&r.body, "fabric", "Apply").unwrap();
    assert!(owner["f:spec"].get("f:cohortname").is_none() && owner["f:spec"].get("f:cohortName").is_some());
    let r = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "&fieldValidation=Ignore", &cq).await;
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert!(r.header("warning").is_none());
    // Other errors still fail.
    cq["spec"]["queueingStrategy"] = json!("Sometimes");
    let r = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "&fieldValidation=Ignore", &cq).await;
    assert_status(&r, 422, "Invalid");
}

// ---------------------------------------------------------------------------------------------
// Failure simulation, request log, kubeconfig
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn set_down_fails_requests_at_the_connection_level() {
    let s = server().await;
    assert_eq!(get(&s, "/api").await.status, 200);
    s.set_down(true);
    let r = s.request("GET", "/api", None, None).await;
    assert!(r.is_err(), "expected a connection error, got {r:?}");
    s.set_down(false);
    assert_eq!(get(&s, "/api").await.status, 200);
}

#[tokio::test]
async fn fail_next_injects_the_status_once() {
    let s = server().await;
    let path = format!("{CQ}/gpu-batch");
    s.fail_next("apply", "ClusterQueue", 422);
    // A dry run does not consume an `apply` injection.
    assert_eq!(apply(&s, &path, "fabric", "&dryRun=All", &cluster_queue("gpu-batch")).await.status, 201);
    let r = apply(&s, &path, "fabric", "", &cluster_queue("gpu-batch")).await;
    assert_status(&r, 422, "Invalid");
    assert!(r.body["message"].as_str().unwrap().contains("injected"));
    assert_status(&get(&s, &path).await, 404, "NotFound");
    assert_eq!(apply(&s, &path, "fabric", "", &cluster_queue("gpu-batch")).await.status, 201);
    s.fail_next("get", "clusterqueues", 503);
    assert_status(&get(&s, &path).await, 503, "ServiceUnavailable");
    assert_eq!(get(&s, &path).await.status, 200);
}

#[tokio::test]
async fn the_request_log_records_method_path_and_query() {
    let s = server().await;
    apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "&dryRun=All", &cluster_queue("gpu-batch")).await;
    get(&s, "/api/v1/namespaces/default/configmaps?labelSelector=a%3Db").await;
    assert_eq!(
        s.requests(),
        [
            "PATCH /apis/kueue.x-k8s.io/v1beta2/clusterqueues/gpu-batch?fieldManager=fabric&dryRun=All",
            "GET /api/v1/namespaces/default/configmaps?labelSelector=a%3Db",
        ]
    );
}

#[tokio::test]
async fn the_kubeconfig_points_at_the_server_with_the_token() {
    let s = server().await;
    let dir = std::env::temp_dir().join(format!("kube-api-selftest-{}", std::process::id()));
    let path = dir.join("kubeconfig");
    s.kubeconfig(&path, "site-a");
    let text = std::fs::read_to_string(&path).unwrap();
    let cfg = &Schemas::yaml_documents(&text).unwrap()[0];
    assert_eq!(cfg["current-context"], "site-a");
    assert_eq!(cfg["clusters"][0]["cluster"]["server"], s.url.as_str());
    assert_eq!(cfg["users"][0]["user"]["token"], TEST_TOKEN);
    assert_eq!(cfg["contexts"][0]["context"]["cluster"], "site-a");
    kubectl_round_trip(&s, &path).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// When `kubectl` is installed: it can discover, server-side apply and get through the kubeconfig.
async fn kubectl_round_trip(s: &TestApiServer, kubeconfig: &Path) {
    let Ok(probe) = std::process::Command::new("kubectl").arg("version").arg("--client").output() else {
        eprintln!("kubectl not installed: skipping the kubectl round trip");
        return;
    };
    if !probe.status.success() {
        return;
    }
    // client-go never sends a bearer token over plain http.
    s.set_allow_anonymous(true);
    let manifest = kubeconfig.with_file_name("cq.yaml");
    std::fs::write(&manifest, serde_json::to_string(&cluster_queue("via-kubectl")).unwrap()).unwrap();
    let kc = kubeconfig.to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kc)
            .args(["apply", "--server-side", "--field-manager=fabric", "-f"])
            .arg(&manifest)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "kubectl apply failed: {text}\nrequests: {:#?}", s.requests());
    let obj = s.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "via-kubectl").expect("applied by kubectl");
    // kubectl's strict validation (fieldValidation=Strict) surfaces the server's 422.
    let mut bad = cluster_queue("bad-via-kubectl");
    bad["spec"]["cohortname"] = json!("typo");
    let manifest = kubeconfig.with_file_name("bad.yaml");
    std::fs::write(&manifest, bad.to_string()).unwrap();
    let kc = kubeconfig.to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kc)
            .args(["apply", "--server-side", "--field-manager=fabric", "-f"])
            .arg(&manifest)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && text.contains("unknown field") && text.contains("spec.cohortname"), "{text}");
    assert!(owned(&obj, "fabric", "Apply").is_some(), "{obj:#}");
    assert!(
        s.requests().iter().any(|r| r.starts_with("PATCH ") && r.contains("fieldValidation=Strict")),
        "{:#?}",
        s.requests()
    );
}

// ---------------------------------------------------------------------------------------------
// CRD objects, set_served, simulated controllers
// ---------------------------------------------------------------------------------------------

const DELAY: Duration = Duration::from_millis(50);
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// The API path of an object (from its apiVersion, kind, namespace and name).
fn path_of(obj: &Value) -> String {
    let av = obj["apiVersion"].as_str().unwrap();
    let prefix = if av.contains('/') { format!("/apis/{av}") } else { format!("/api/{av}") };
    let plural = kube_api::plural_of(obj["kind"].as_str().unwrap());
    let name = obj["metadata"]["name"].as_str().unwrap();
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{prefix}/namespaces/{ns}/{plural}/{name}"),
        None => format!("{prefix}/{plural}/{name}"),
    }
}

/// Server-side apply by `fabric`; must succeed.
async fn put(s: &TestApiServer, obj: &Value) -> Value {
    let r = apply(s, &path_of(obj), "fabric", "", obj).await;
    assert!(r.status == 200 || r.status == 201, "{:#}", r.body);
    r.body
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// Polls `f` every 10 ms until it returns `Some`, for at most 10 s (then panics, showing the
/// stored objects).
async fn eventually<T>(s: &TestApiServer, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            let objects: Vec<String> = s.objects().iter().map(|o| o.to_string()).collect();
            panic!("timed out waiting for {what}; objects:\n{}", objects.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Long enough for several reconcile hops: used only to show that something does NOT happen.
async fn quiet() {
    tokio::time::sleep(DELAY * 6).await;
}

fn condition<'a>(obj: &'a Value, ty: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == ty)
}

/// `Some(condition)` when the object's condition `ty` has status `want` (`"True"`/`"False"`).
fn with_condition(obj: Option<Value>, ty: &str, want: &str) -> Option<Value> {
    let obj = obj?;
    let c = condition(&obj, ty)?;
    (c["status"] == want).then(|| c.clone())
}

/// The status-subresource managedFields entry of `manager`.
fn status_owner<'a>(obj: &'a Value, manager: &str) -> Option<&'a Value> {
    obj.pointer("/metadata/managedFields")?
        .as_array()?
        .iter()
        .find(|m| m["manager"] == manager && m["operation"] == "Update" && m["subresource"] == "status")
}

fn helm_chart(name: &str, version: &str) -> Value {
    json!({"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"chart": name, "repo": "https://charts.example.org", "version": version,
            "targetNamespace": "kueue-system"}})
}

fn deployment(name: &str, replicas: Option<i64>, labels: Value) -> Value {
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                "ports": [{"name": "http", "containerPort": 8080}]}]}}}});
    if let Some(r) = replicas {
        d["spec"]["replicas"] = json!(r);
    }
    d
}

fn resource_flavor(name: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}})
}

fn local_queue(name: &str, cq: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterQueue": cq}})
}

fn token_secret(ns: &str, name: &str, sa: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": name, "namespace": ns, "annotations": {"kubernetes.io/service-account.name": sa}}})
}

fn karmada_cluster(name: &str) -> Value {
    json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://10.20.0.10:6443",
            "secretRef": {"namespace": "karmada-cluster", "name": name}}})
}

fn multikueue_cluster(name: &str, secret: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": name},
        "spec": {"clusterSource": {"kubeConfig": {"location": secret, "locationType": "Secret"}}}})
}

fn multikueue_config(name: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig", "metadata": {"name": name},
        "spec": {"clusters": ["sp"]}})
}

fn kubeconfig_secret(name: &str, kubeconfig: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "kueue-system"},
        "stringData": {"kubeconfig": kubeconfig}})
}

fn admission_check(name: &str, controller: &str, config: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": name},
        "spec": {"controllerName": controller,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config}}})
}

const GOOD_KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: sp
  cluster:
    server: https://10.20.0.10:6443
users:
- name: sp
  user:
    token: abc
contexts:
- name: sp
  context:
    cluster: sp
    user: sp
current-context: sp
";

#[tokio::test]
async fn without_simulate_controllers_nothing_is_reconciled() {
    let s = server().await;
    put(&s, &helm_chart("kueue", "0.14.1")).await;
    put(&s, &deployment("web", Some(2), json!({"app": "web"}))).await;
    put(&s, &cluster_queue("gpu-batch")).await;
    put(&s, &resource_flavor("site-a-gpu")).await;
    let rv = s.resource_version();
    quiet().await;
    assert_eq!(s.resource_version(), rv, "nothing may be written without simulate_controllers");
    assert!(s.objects().iter().all(|o| o.get("status").is_none() || o["kind"] == "Namespace"), "{:#?}", s.objects());
    assert!(s.objects().iter().all(|o| o["kind"] != "Job" && o["kind"] != "EndpointSlice"));
    // Turning them on reconciles what exists.
    s.simulate_controllers(DELAY);
    eventually(&s, "the ClusterQueue to become active", || {
        with_condition(s.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-batch"), "Active", "True")
    })
    .await;
}

/// The RuntimeClass admission plugin: a Deployment whose pods name a RuntimeClass that does not
/// exist gets no replica (`ReplicaFailure`, `FailedCreate`) until it exists.
#[tokio::test]
async fn pods_of_a_missing_runtime_class_are_not_admitted() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    s.register_nodes(&["n1"]);
    let mut d = deployment("vllm", Some(2), json!({"app": "vllm"}));
    d["spec"]["template"]["spec"]["runtimeClassName"] = json!("nvidia");
    put(&s, &d).await;
    let get = || s.object("apps/v1", "Deployment", Some("default"), "vllm");
    let failure =
        eventually(&s, "the ReplicaFailure condition", || with_condition(get(), "ReplicaFailure", "True")).await;
    assert!(
        failure["message"].as_str().unwrap().contains("pod rejected: RuntimeClass \"nvidia\" not found"),
        "{failure:#}"
    );
    assert_eq!(condition(&get().unwrap(), "Available").unwrap()["status"], "False");
    assert!(get().unwrap()["status"].get("readyReplicas").is_none());
    // K3s's RuntimeClass appears: the pods are admitted.
    s.put_raw(fabric_testkit::kube_api::k3s_nvidia_runtime_class());
    eventually(&s, "the Deployment to become available", || with_condition(get(), "Available", "True")).await;
    assert!(condition(&get().unwrap(), "ReplicaFailure").is_none(), "{:#}", get().unwrap());
    assert_eq!(get().unwrap()["status"]["readyReplicas"], 2);
}

/// helm-controller + klipper-helm: an OCI chart goes whole in `spec.chart` with no `repo` and
/// installs; `repo: oci://…` with a chart name makes the install run `helm repo add` with the
/// registry, which fails (the Job and the HelmChart say `Failed`).
#[tokio::test]
async fn an_oci_registry_as_repo_fails_the_install_and_a_whole_oci_chart_installs() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    let job = |n: &str| s.object("batch/v1", "Job", Some("kube-system"), &format!("helm-install-{n}"));
    let env = |j: &Value, k: &str| {
        let e = j["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap().clone();
        e.iter().find(|v| v["name"] == k).map(|v| v["value"].as_str().unwrap().to_string()).unwrap()
    };
    let mut wrong = helm_chart("kueue", "0.15.2");
    wrong["spec"]["repo"] = json!("oci://registry.k8s.io/kueue/charts");
    put(&s, &wrong).await;
    let failed =
        eventually(&s, "the install Job to fail", || with_condition(job("kueue"), "Failed", "True").and(job("kueue")))
            .await;
    assert_eq!(env(&failed, "REPO"), "oci://registry.k8s.io/kueue/charts");
    assert_eq!(env(&failed, "CHART"), "kueue/kueue", "with a repo, CHART is <HelmChart name>/<chart>");
    assert!(
        fabric_testkit::kube_api::helm_install_cannot_fetch(&failed).unwrap().contains("not a valid chart repository")
    );
    let c = eventually(&s, "the HelmChart to say Failed", || {
        with_condition(s.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue"), "Failed", "True")
    })
    .await;
    assert_eq!(c["reason"], "Job failed", "{c:#}");

    let mut right = helm_chart("kai-scheduler", "v0.10.2");
    right["spec"] = json!({"chart": "oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler", "version": "v0.10.2",
        "targetNamespace": "kai-scheduler"});
    put(&s, &right).await;
    let done = eventually(&s, "the OCI chart's Job to complete", || {
        with_condition(job("kai-scheduler"), "Complete", "True").and(job("kai-scheduler"))
    })
    .await;
    assert_eq!(env(&done, "CHART"), "oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler");
    assert_eq!(env(&done, "REPO"), "");
    // An HTTP repository's chart installs as before.
    put(&s, &helm_chart("cilium", "1.18.4")).await;
    let http = eventually(&s, "the repo chart's Job to complete", || {
        with_condition(job("cilium"), "Complete", "True").and(job("cilium"))
    })
    .await;
    assert_eq!(env(&http, "CHART"), "cilium/cilium");
}

#[tokio::test]
async fn helm_chart_install_job_is_created_completes_and_is_recreated_on_spec_change() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    let job = || s.object("batch/v1", "Job", Some("kube-system"), "helm-install-kueue");
    let chart = || s.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue").unwrap();
    // A dry run creates nothing.
    apply(&s, &path_of(&helm_chart("kueue", "0.14.1")), "fabric", "&dryRun=All", &helm_chart("kueue", "0.14.1")).await;
    quiet().await;
    assert!(job().is_none());

    let applied = put(&s, &helm_chart("kueue", "0.14.1")).await;
    let first =
        eventually(&s, "the install Job to complete", || with_condition(job(), "Complete", "True").and(job())).await;
    assert_eq!(first["status"]["succeeded"], 1, "{first:#}");
    assert!(first["status"]["completionTime"].as_str().is_some_and(|t| t.ends_with('Z')), "{first:#}");
    assert_eq!(first["metadata"]["labels"]["helmcharts.helm.cattle.io/chart"], "kueue");
    let hash1 = first["metadata"]["annotations"]["helmcharts.helm.cattle.io/configHash"].as_str().unwrap().to_string();
    assert!(hash1.starts_with("SHA256="), "{hash1}");
    let hc = chart();
    assert_eq!(hc["status"]["jobName"], "helm-install-kueue", "{hc:#}");
    assert_eq!(condition(&hc, "JobCreated").unwrap()["status"], "True", "{hc:#}");
    assert_eq!(condition(&hc, "Failed").unwrap()["status"], "False", "{hc:#}");
    let owner = status_owner(&hc, "helm-controller").expect("status owned by helm-controller");
    assert!(owner["fieldsV1"]["f:status"].get("f:jobName").is_some(), "{owner:#}");
    assert!(owned(&hc, "fabric", "Apply").unwrap().get("f:status").is_none());
    assert_eq!(hc["metadata"]["generation"], 1, "a status write does not bump the generation");
    assert!(rv(&hc).parse::<u64>().unwrap() > rv(&applied).parse::<u64>().unwrap(), "status writes bump rv");

    // A metadata-only change keeps the Job.
    let mut labelled = helm_chart("kueue", "0.14.1");
    labelled["metadata"]["labels"] = json!({"team": "ml"});
    put(&s, &labelled).await;
    quiet().await;
    assert_eq!(job().unwrap()["metadata"]["uid"], first["metadata"]["uid"]);

    // A spec change replaces the Job: new uid, new hash, completes again.
    put(&s, &helm_chart("kueue", "0.14.2")).await;
    let second = eventually(&s, "a new completed install Job", || {
        job().filter(|j| j["metadata"]["uid"] != first["metadata"]["uid"] && condition(j, "Complete").is_some())
    })
    .await;
    assert_ne!(second["metadata"]["annotations"]["helmcharts.helm.cattle.io/configHash"], hash1.as_str());
    assert!(second["spec"]["template"]["spec"]["containers"][0]["args"].to_string().contains("0.14.2"), "{second:#}");
    assert_eq!(chart()["metadata"]["generation"], 2, "labels do not bump it, the spec does");
    // So does a HelmChartConfig of the same name (its values go into the Job).
    let config = json!({"apiVersion": "helm.cattle.io/v1", "kind": "HelmChartConfig",
        "metadata": {"name": "kueue", "namespace": "kube-system"}, "spec": {"valuesContent": "replicas: 2\n"}});
    put(&s, &config).await;
    let third = eventually(&s, "a Job re-run for the HelmChartConfig", || {
        job().filter(|j| j["metadata"]["uid"] != second["metadata"]["uid"] && condition(j, "Complete").is_some())
    })
    .await;
    assert_ne!(third["metadata"]["annotations"], second["metadata"]["annotations"]);
    // Deleting the chart removes its Job.
    assert_eq!(s.request("DELETE", &path_of(&helm_chart("kueue", "")), None, None).await.unwrap().status, 200);
    eventually(&s, "the install Job to be deleted", || job().is_none().then_some(())).await;
    assert!(s.controller_errors().is_empty(), "{:#?}", s.controller_errors());

    // Deleted and created again at once (before the controllers ran): the new chart (another
    // uid) gets a Job of its own, not its predecessor's.
    put(&s, &helm_chart("kueue", "0.14.2")).await;
    let fourth =
        eventually(&s, "a Job for the new chart", || job().filter(|j| condition(j, "Complete").is_some())).await;
    assert_eq!(s.request("DELETE", &path_of(&helm_chart("kueue", "")), None, None).await.unwrap().status, 200);
    put(&s, &helm_chart("kueue", "0.14.2")).await;
    let owner = chart()["metadata"]["uid"].clone();
    let fifth = eventually(&s, "a Job owned by the re-created chart", || {
        job().filter(|j| j["metadata"]["ownerReferences"][0]["uid"] == owner && condition(j, "Complete").is_some())
    })
    .await;
    assert_ne!(fifth["metadata"]["uid"], fourth["metadata"]["uid"]);
}

#[tokio::test]
async fn fail_helm_job_fails_the_next_install_job_and_the_chart() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    s.fail_helm_job("kueue");
    let job = || s.object("batch/v1", "Job", Some("kube-system"), "helm-install-kueue");
    let chart = || s.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue");
    put(&s, &helm_chart("kueue", "0.14.1")).await;
    let failed = eventually(&s, "the Job to fail", || with_condition(job(), "Failed", "True")).await;
    let j = job().unwrap();
    assert_eq!(j["status"]["failed"], 1, "{j:#}");
    assert!(j["status"].get("succeeded").is_none() && condition(&j, "Complete").is_none(), "{j:#}");
    assert_eq!(failed["message"], kube_api::JOB_FAILED_MESSAGE);
    let hc_failed =
        eventually(&s, "the HelmChart to report Failed", || with_condition(chart(), "Failed", "True")).await;
    assert_eq!(hc_failed["message"], failed["message"]);
    // Only the next Job fails: the one after a spec change completes and clears Failed.
    put(&s, &helm_chart("kueue", "0.14.2")).await;
    eventually(&s, "the new Job to complete", || with_condition(job(), "Complete", "True")).await;
    eventually(&s, "Failed to clear", || with_condition(chart(), "Failed", "False")).await;
}

#[tokio::test]
async fn deployment_and_daemonset_status_report_a_finished_rollout() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    // The Nodes the pods run on (without Nodes every pod stays Pending).
    s.register_nodes(&["n1", "n2"]);
    let get_d = |n: &str| s.object("apps/v1", "Deployment", Some("default"), n);
    put(&s, &deployment("web", Some(3), json!({"app": "web"}))).await;
    put(&s, &deployment("single", None, json!({"app": "single"}))).await;
    let done = |d: &Value| d["status"]["observedGeneration"] == 1 && d["status"]["availableReplicas"] == 3;
    let d = eventually(&s, "web rolled out", || get_d("web").filter(done)).await;
    for f in ["replicas", "updatedReplicas", "readyReplicas", "availableReplicas"] {
        assert_eq!(d["status"][f], 3, "{f}: {d:#}");
    }
    // Made by the controllers: a ReplicaSet for the template, its three Pods bound to Nodes.
    let rs: Vec<Value> = s
        .objects()
        .into_iter()
        .filter(|o| o["kind"] == "ReplicaSet" && o["metadata"]["ownerReferences"][0]["name"] == "web")
        .collect();
    assert_eq!(rs.len(), 1, "{rs:#?}");
    let hash = rs[0]["metadata"]["labels"]["pod-template-hash"].as_str().unwrap().to_string();
    assert_eq!(rs[0]["metadata"]["name"], format!("web-{hash}"));
    let pods: Vec<Value> = s
        .objects()
        .into_iter()
        .filter(|o| o["kind"] == "Pod" && o["metadata"]["labels"]["pod-template-hash"] == hash.as_str())
        .collect();
    assert_eq!(pods.len(), 3, "{pods:#?}");
    assert!(
        pods.iter()
            .all(|p| p["spec"]["nodeName"].is_string() && p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet")
    );
    assert_eq!(condition(&d, "Available").unwrap()["status"], "True");
    assert!(status_owner(&d, "kube-controller-manager").is_some(), "{d:#}");
    // Finished when every replica the controller made is updated and available (a status written
    // mid-rollout has no availableReplicas yet: CI once read it there).
    let finished = |d: &Value| {
        let st = &d["status"];
        st["observedGeneration"] == 1
            && st["replicas"].is_u64()
            && st["updatedReplicas"] == st["replicas"]
            && st["availableReplicas"] == st["replicas"]
    };
    let single = eventually(&s, "single rolled out", || get_d("single").filter(finished)).await;
    assert_eq!(single["spec"]["replicas"], 1, "replicas default to 1: {single:#}");
    assert_eq!(single["status"]["availableReplicas"], 1, "{single:#}");
    // A new generation is observed.
    put(&s, &deployment("web", Some(2), json!({"app": "web"}))).await;
    // (Observed at once; the ReplicaSet's extra Pod goes a moment later.)
    let d = eventually(&s, "web generation 2", || {
        get_d("web").filter(|d| d["status"]["observedGeneration"] == 2 && d["status"]["replicas"] == 2)
    })
    .await;
    assert_eq!(d["metadata"]["generation"], 2);
    assert_eq!(d["status"]["readyReplicas"], 2);

    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {"metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "a", "image": "busybox"}]}}}});
    // One pod per Node (the DaemonSet controller's, `fabric_testkit::daemonset`; its rules are
    // tested in controllers_selftest.rs).
    put(&s, &ds).await;
    let ds = eventually(&s, "the DaemonSet status", || {
        s.object("apps/v1", "DaemonSet", Some("kube-system"), "agent").filter(|d| d["status"]["numberReady"] == 2)
    })
    .await;
    for f in ["desiredNumberScheduled", "numberReady", "updatedNumberScheduled", "numberAvailable"] {
        assert_eq!(ds["status"][f], 2, "{f}: {ds:#}");
    }
    assert_eq!(ds["status"]["observedGeneration"], 1, "{ds:#}");
}

#[tokio::test]
async fn service_account_tokens_are_filled_once_the_account_exists_and_kept_on_reapply() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    put(&s, &namespace("karmada-cluster")).await;
    let secret = token_secret("karmada-cluster", "member-token", "karmada-member");
    put(&s, &secret).await;
    quiet().await;
    let get = |n: &str| s.object("v1", "Secret", Some("karmada-cluster"), n).unwrap();
    assert!(get("member-token").get("data").is_none(), "no ServiceAccount, no token: {:#}", get("member-token"));

    let sa = |n: &str| {
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": n, "namespace": "karmada-cluster"}})
    };
    put(&s, &sa("karmada-member")).await;
    let filled = eventually(&s, "the token", || {
        let x = get("member-token");
        x.pointer("/data/token").is_some().then_some(x)
    })
    .await;
    let decode = |v: &Value| String::from_utf8(kube_api::base64_decode(v.as_str().unwrap()).unwrap()).unwrap();
    let token = decode(&filled["data"]["token"]);
    assert_eq!(token.split('.').count(), 3, "JWT-looking: {token}");
    let ca = decode(&filled["data"]["ca.crt"]);
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----\n") && ca.ends_with("-----END CERTIFICATE-----\n"), "{ca}");
    assert_eq!(decode(&filled["data"]["namespace"]), "karmada-cluster");
    let kcm = owned(&filled, "kube-controller-manager", "Update").expect("data owned by the token controller");
    assert!(kcm["f:data"].get("f:token").is_some(), "{kcm:#}");

    // Another token: unique, same CA.
    put(&s, &sa("other")).await;
    put(&s, &token_secret("karmada-cluster", "other-token", "other")).await;
    let other = eventually(&s, "the other token", || {
        let x = get("other-token");
        x.pointer("/data/token").is_some().then_some(x)
    })
    .await;
    assert_ne!(other["data"]["token"], filled["data"]["token"]);
    assert_eq!(other["data"]["ca.crt"], filled["data"]["ca.crt"]);

    // Re-applying the Secret without data keeps the data: a no-op, then with a real change.
    let r = apply(&s, &path_of(&secret), "fabric", "", &secret).await;
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert_eq!(r.body["data"], filled["data"]);
    assert_eq!(rv(&r.body), rv(&filled), "nothing changed");
    let mut labelled = secret.clone();
    labelled["metadata"]["labels"] = json!({"fabric/role": "member"});
    let r = apply(&s, &path_of(&labelled), "fabric", "", &labelled).await;
    assert_eq!(r.body["data"], filled["data"], "{:#}", r.body);
    quiet().await;
    assert_eq!(get("member-token")["data"], filled["data"], "the token is not regenerated");
}

#[tokio::test]
async fn karmada_cluster_ready_follows_its_secret() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    put(&s, &namespace("karmada-cluster")).await;
    put(&s, &karmada_cluster("sp")).await;
    let cluster = || s.object("cluster.karmada.io/v1alpha1", "Cluster", None, "sp");
    let c = eventually(&s, "Ready False", || with_condition(cluster(), "Ready", "False")).await;
    assert_eq!(c["reason"], "ClusterNotReachable");
    assert!(c["message"].as_str().unwrap().contains("not found"), "{c:#}");
    assert!(c["lastTransitionTime"].as_str().is_some());
    assert!(status_owner(&cluster().unwrap(), "karmada-controller-manager").is_some());

    let secret = |token: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sp", "namespace": "karmada-cluster"},
        "data": {"token": kube_api::base64_encode(token.as_bytes()), "caBundle": kube_api::base64_encode(b"ca")}})
    };
    put(&s, &secret("")).await;
    let c = eventually(&s, "the empty-token message", || {
        with_condition(cluster(), "Ready", "False").filter(|c| c["message"].as_str().unwrap().contains("no token"))
    })
    .await;
    assert_eq!(c["reason"], "ClusterNotReachable");
    put(&s, &secret("member-token")).await;
    let c = eventually(&s, "Ready True", || with_condition(cluster(), "Ready", "True")).await;
    assert_eq!(c["reason"], "ClusterReady");
    assert_eq!(s.request("DELETE", &path_of(&secret("")), None, None).await.unwrap().status, 200);
    eventually(&s, "Ready False again", || with_condition(cluster(), "Ready", "False")).await;
}

#[tokio::test]
async fn cluster_queue_becomes_active_when_its_flavor_appears() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    let created = put(&s, &cluster_queue("gpu-batch")).await;
    let cq = || s.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-batch");
    let c = eventually(&s, "Active False", || with_condition(cq(), "Active", "False")).await;
    assert_eq!(c["reason"], "FlavorNotFound");
    assert!(c["message"].as_str().unwrap().contains("site-a-gpu"), "{c:#}");
    assert_eq!(c["observedGeneration"], 1);
    let inactive = cq().unwrap();
    assert!(rv(&inactive).parse::<u64>().unwrap() > rv(&created).parse::<u64>().unwrap(), "status writes bump rv");
    let owner = status_owner(&inactive, "kueue").expect("status owned by kueue");
    assert!(owner["fieldsV1"]["f:status"].get("f:conditions").is_some(), "{owner:#}");
    // fabric re-applying the same manifest is a no-op and keeps the status.
    let again = put(&s, &cluster_queue("gpu-batch")).await;
    assert_eq!(rv(&again), rv(&inactive));
    assert_eq!(again["status"], inactive["status"]);
    // A main-resource Update (merge patch) keeps the status and kueue's ownership of it.
    let patch = json!({"metadata": {"labels": {"patched": "yes"}}}).to_string();
    let r = s
        .request(
            "PATCH",
            &format!("{CQ}/gpu-batch?fieldManager=kubectl"),
            Some("application/merge-patch+json"),
            Some(&patch),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert_eq!(r.body["status"], inactive["status"]);
    assert!(status_owner(&r.body, "kueue").is_some(), "{:#}", r.body["metadata"]["managedFields"]);

    put(&s, &resource_flavor("site-a-gpu")).await;
    let c = eventually(&s, "Active True", || with_condition(cq(), "Active", "True")).await;
    assert_eq!(c["reason"], "Ready");
    // Reconciling again without a change writes nothing.
    let settled = s.resource_version();
    quiet().await;
    assert_eq!(s.resource_version(), settled);
    // Deleting the flavor makes it inactive again.
    assert_eq!(s.request("DELETE", &path_of(&resource_flavor("site-a-gpu")), None, None).await.unwrap().status, 200);
    eventually(&s, "Active False again", || with_condition(cq(), "Active", "False")).await;
}

#[tokio::test]
async fn local_queue_is_active_when_its_cluster_queue_is() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    put(&s, &local_queue("team-a", "gpu-batch")).await;
    let lq = || s.object("kueue.x-k8s.io/v1beta2", "LocalQueue", Some("default"), "team-a");
    let c = eventually(&s, "ClusterQueueDoesNotExist", || with_condition(lq(), "Active", "False")).await;
    assert_eq!(c["reason"], "ClusterQueueDoesNotExist");
    put(&s, &cluster_queue("gpu-batch")).await;
    eventually(&s, "ClusterQueueIsInactive", || {
        with_condition(lq(), "Active", "False").filter(|c| c["reason"] == "ClusterQueueIsInactive")
    })
    .await;
    put(&s, &resource_flavor("site-a-gpu")).await;
    let c = eventually(&s, "LocalQueue active", || with_condition(lq(), "Active", "True")).await;
    assert_eq!(c["reason"], "Ready");
}

#[tokio::test]
async fn admission_check_and_multikueue_cluster_are_active_by_config_and_secret() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    put(&s, &namespace("kueue-system")).await;
    let mkc = || s.object("kueue.x-k8s.io/v1beta2", "MultiKueueCluster", None, "sp");
    let ac = |n: &str| s.object("kueue.x-k8s.io/v1beta2", "AdmissionCheck", None, n);
    let cq = || s.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-batch");

    // MultiKueueCluster: secret missing, kubeconfig incomplete, then good.
    put(&s, &multikueue_cluster("sp", "sp-kubeconfig")).await;
    let c = eventually(&s, "BadConfig (no secret)", || with_condition(mkc(), "Active", "False")).await;
    assert_eq!(c["reason"], "BadConfig");
    assert!(c["message"].as_str().unwrap().contains("not found"), "{c:#}");
    put(&s, &kubeconfig_secret("sp-kubeconfig", "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\n")).await;
    let c = eventually(&s, "BadConfig (no contexts)", || {
        with_condition(mkc(), "Active", "False").filter(|c| c["message"].as_str().unwrap().contains("contexts"))
    })
    .await;
    assert_eq!(c["reason"], "BadConfig");
    put(&s, &kubeconfig_secret("sp-kubeconfig", GOOD_KUBECONFIG)).await;
    eventually(&s, "MultiKueueCluster active", || with_condition(mkc(), "Active", "True")).await;

    // ClusterQueue with an admission check: not found, inactive, active.
    put(&s, &resource_flavor("site-a-gpu")).await;
    let mut q = cluster_queue("gpu-batch");
    q["spec"]["admissionChecksStrategy"] = json!({"admissionChecks": [{"name": "multikueue"}]});
    put(&s, &q).await;
    eventually(&s, "AdmissionCheckNotFound", || {
        with_condition(cq(), "Active", "False").filter(|c| c["reason"] == "AdmissionCheckNotFound")
    })
    .await;
    put(&s, &admission_check("multikueue", "kueue.x-k8s.io/multikueue", "fabric")).await;
    let c = eventually(&s, "AdmissionCheck BadConfig", || with_condition(ac("multikueue"), "Active", "False")).await;
    assert_eq!(c["reason"], "BadConfig");
    assert!(c["message"].as_str().unwrap().contains("\"fabric\" not found"), "{c:#}");
    eventually(&s, "AdmissionCheckInactive", || {
        with_condition(cq(), "Active", "False").filter(|c| c["reason"] == "AdmissionCheckInactive")
    })
    .await;
    let config = multikueue_config("fabric");
    put(&s, &config).await;
    eventually(&s, "AdmissionCheck active", || with_condition(ac("multikueue"), "Active", "True")).await;
    eventually(&s, "ClusterQueue active", || with_condition(cq(), "Active", "True")).await;
    // Another controller's check is not simulated.
    put(&s, &admission_check("prov", "kueue.x-k8s.io/provisioning-request", "fabric")).await;
    let c = eventually(&s, "Inactive", || with_condition(ac("prov"), "Active", "False")).await;
    assert_eq!(c["reason"], "Inactive");
}

/// The design the MultiKueue docs do not allow: a local flavor first and the MultiKueue check
/// scoped to a second flavor. Kueue keeps such a ClusterQueue inactive (`pkg/cache`
/// clusterQueue: "Cannot specify MultiKueue AdmissionCheck per flavor"), and also one with two
/// MultiKueue checks; `onFlavors` naming every flavor is the same as none.
#[tokio::test]
async fn a_multikueue_check_scoped_to_some_flavors_keeps_the_cluster_queue_inactive() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    put(&s, &namespace("kueue-system")).await;
    put(&s, &multikueue_config("fabric")).await;
    put(&s, &admission_check("multikueue", "kueue.x-k8s.io/multikueue", "fabric")).await;
    put(&s, &resource_flavor("local")).await;
    put(&s, &resource_flavor("remote")).await;
    let cq = || s.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-batch");
    let mut q = cluster_queue("gpu-batch");
    let gpu = |f: &str| json!({"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}]});
    q["spec"]["resourceGroups"] =
        json!([{"coveredResources": ["nvidia.com/gpu"], "flavors": [gpu("local"), gpu("remote")]}]);
    q["spec"]["admissionChecksStrategy"] =
        json!({"admissionChecks": [{"name": "multikueue", "onFlavors": ["remote"]}]});
    put(&s, &q).await;
    let c = eventually(&s, "per flavor", || {
        with_condition(cq(), "Active", "False").filter(|c| c["reason"] == "MultiKueueAdmissionCheckAppliedPerFlavor")
    })
    .await;
    assert_eq!(
        c["message"],
        "Can't admit new workloads: Cannot specify MultiKueue AdmissionCheck per flavor, found: multikueue."
    );
    q["spec"]["admissionChecksStrategy"] =
        json!({"admissionChecks": [{"name": "multikueue", "onFlavors": ["remote", "local"]}]});
    put(&s, &q).await;
    eventually(&s, "all flavors", || with_condition(cq(), "Active", "True")).await;
    put(&s, &admission_check("multikueue-2", "kueue.x-k8s.io/multikueue", "fabric")).await;
    q["spec"]["admissionChecksStrategy"] =
        json!({"admissionChecks": [{"name": "multikueue"}, {"name": "multikueue-2"}]});
    put(&s, &q).await;
    eventually(&s, "two MultiKueue checks", || {
        with_condition(cq(), "Active", "False").filter(|c| c["reason"] == "MultipleMultiKueueAdmissionChecks")
    })
    .await;
}

#[tokio::test]
async fn hold_keeps_the_status_until_released() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    s.hold("deployment", true);
    put(&s, &deployment("web", Some(2), json!({"app": "web"}))).await;
    put(&s, &deployment("api", Some(1), json!({"app": "api"}))).await;
    quiet().await;
    let d = |n: &str| s.object("apps/v1", "Deployment", Some("default"), n).unwrap();
    assert!(d("web").get("status").is_none() && d("api").get("status").is_none(), "{:#}", d("web"));
    // Other kinds are not held.
    put(&s, &cluster_queue("gpu-batch")).await;
    eventually(&s, "the ClusterQueue status", || {
        with_condition(s.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-batch"), "Active", "False")
    })
    .await;
    // Released objects are reconciled at once, not one (now very long) delay later.
    s.simulate_controllers(Duration::from_secs(120));
    let released = Instant::now();
    s.hold("Deployment", false);
    eventually(&s, "both rolled out", || {
        (d("web").get("status").is_some() && d("api").get("status").is_some()).then_some(())
    })
    .await;
    assert!(released.elapsed() < Duration::from_secs(10), "{:?}", released.elapsed());
}

#[tokio::test]
async fn crd_objects_are_served_established_and_can_be_held() {
    let s = server().await;
    let disco = get(&s, "/apis/apiextensions.k8s.io/v1").await;
    let r =
        disco.body["resources"].as_array().unwrap().iter().find(|r| r["name"] == "customresourcedefinitions").cloned();
    let r = r.unwrap_or_else(|| panic!("{:#}", disco.body));
    assert_eq!(r["namespaced"], false);
    assert_eq!(r["verbs"], json!(["get", "list"]));

    let crd = get(&s, &format!("{CRDS}/clusterqueues.kueue.x-k8s.io")).await;
    assert_eq!(crd.status, 200, "{:#}", crd.body);
    let b = &crd.body;
    assert_eq!(b["kind"], "CustomResourceDefinition");
    assert_eq!(b["spec"]["group"], "kueue.x-k8s.io");
    assert_eq!(b["spec"]["names"]["kind"], "ClusterQueue");
    assert_eq!(b["spec"]["names"]["plural"], "clusterqueues");
    assert_eq!(b["spec"]["scope"], "Cluster");
    let versions = b["spec"]["versions"].as_array().unwrap();
    assert!(versions.contains(&json!({"name": "v1beta2", "served": true, "storage": true})), "{versions:#?}");
    assert!(versions.contains(&json!({"name": "v1beta1", "served": true, "storage": false})), "{versions:#?}");
    assert_eq!(condition(b, "Established").unwrap()["status"], "True");
    assert_eq!(condition(b, "NamesAccepted").unwrap()["status"], "True");
    let hc = get(&s, &format!("{CRDS}/helmcharts.helm.cattle.io")).await;
    assert_eq!(hc.body["spec"]["scope"], "Namespaced");
    assert_status(&get(&s, &format!("{CRDS}/clusters.cluster.karmada.io")).await, 404, "NotFound");
    let missing = get(&s, &format!("{CRDS}/widgets.example.com")).await;
    assert_status(&missing, 404, "NotFound");
    assert_eq!(
        missing.body["message"],
        "customresourcedefinitions.apiextensions.k8s.io \"widgets.example.com\" not found"
    );

    // One per CRD file kind, all established.
    let list = get(&s, CRDS).await;
    assert_eq!(list.body["kind"], "CustomResourceDefinitionList");
    let items = list.body["items"].as_array().unwrap();
    let schemas = shared_schemas();
    let mut crd_kinds = std::collections::BTreeSet::new();
    for (g, v, k) in schemas.kinds() {
        if !schemas.source(&format!("{g}/{v}"), &k).unwrap().ends_with("swagger.json") {
            crd_kinds.insert((g, k));
        }
    }
    assert_eq!(items.len(), crd_kinds.len());
    assert!(items.len() >= 15, "{}", items.len());
    assert!(items.iter().all(|i| condition(i, "Established").unwrap()["status"] == "True"));
    // Read-only.
    let post = s.request("POST", CRDS, None, Some(&crd.body.to_string())).await.unwrap();
    assert_status(&post, 405, "MethodNotAllowed");

    // Held (with controllers on): not established until released.
    s.hold("CustomResourceDefinition", true);
    let cq_crd = format!("{CRDS}/clusterqueues.kueue.x-k8s.io");
    let unheld = get(&s, &cq_crd).await;
    assert_eq!(condition(&unheld.body, "Established").unwrap()["status"], "True", "holding needs the controllers");
    s.simulate_controllers(DELAY);
    let held = get(&s, &cq_crd).await;
    let est = condition(&held.body, "Established").unwrap();
    assert_eq!(est["status"], "False");
    assert_eq!(est["reason"], "Installing");
    s.hold("customresourcedefinition", false);
    let back = get(&s, &cq_crd).await;
    assert_eq!(condition(&back.body, "Established").unwrap()["status"], "True");
}

#[tokio::test]
async fn set_served_hides_a_group_and_restores_it_with_its_objects() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    let created = put(&s, &cluster_queue("gpu-batch")).await;
    let cq = || s.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-batch");
    eventually(&s, "FlavorNotFound", || with_condition(cq(), "Active", "False")).await;

    s.set_served("kueue.x-k8s.io", false);
    let groups = get(&s, "/apis").await;
    assert!(groups.body["groups"].as_array().unwrap().iter().all(|g| g["name"] != "kueue.x-k8s.io"));
    assert!(groups.body["groups"].as_array().unwrap().iter().any(|g| g["name"] == "helm.cattle.io"));
    assert_status(&get(&s, "/apis/kueue.x-k8s.io").await, 404, "NotFound");
    assert_status(&get(&s, "/apis/kueue.x-k8s.io/v1beta2").await, 404, "NotFound");
    let r = get(&s, &format!("{CQ}/gpu-batch")).await;
    assert_status(&r, 404, "NotFound");
    assert_eq!(r.body["message"], "the server could not find the requested resource");
    assert_status(&apply(&s, &format!("{CQ}/other"), "fabric", "", &cluster_queue("other")).await, 404, "NotFound");
    let crds = get(&s, CRDS).await;
    assert!(crds.body["items"].as_array().unwrap().iter().all(|i| i["spec"]["group"] != "kueue.x-k8s.io"));
    assert!(crds.body["items"].as_array().unwrap().iter().any(|i| i["spec"]["group"] == "helm.cattle.io"));
    assert_status(&get(&s, &format!("{CRDS}/clusterqueues.kueue.x-k8s.io")).await, 404, "NotFound");
    // Not reconciled while hidden.
    s.put_raw(resource_flavor("site-a-gpu"));
    quiet().await;
    assert_eq!(condition(&cq().unwrap(), "Active").unwrap()["status"], "False");

    s.set_served("kueue.x-k8s.io", true);
    let back = get(&s, &format!("{CQ}/gpu-batch")).await;
    assert_eq!(back.status, 200);
    assert_eq!(back.body["metadata"]["uid"], created["metadata"]["uid"]);
    assert!(get(&s, "/apis").await.body["groups"].as_array().unwrap().iter().any(|g| g["name"] == "kueue.x-k8s.io"));
    assert_eq!(get(&s, &format!("{CRDS}/clusterqueues.kueue.x-k8s.io")).await.status, 200);
    eventually(&s, "reconciled once served again", || with_condition(cq(), "Active", "True")).await;
}

#[tokio::test]
async fn endpoint_slices_follow_ready_deployments() {
    let s = server().await;
    // Served without controllers: an empty list.
    let list = get(&s, "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices").await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body["kind"], "EndpointSliceList");
    s.simulate_controllers(DELAY);
    s.register_nodes(&["n1", "n2"]);
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
    "spec": {"selector": {"app": "web"}, "ports": [
        {"name": "http", "port": 80, "targetPort": "http"},
        {"name": "metrics", "port": 9090, "targetPort": 9091},
    ]}});
    put(&s, &svc).await;
    put(&s, &deployment("web", Some(2), json!({"app": "web", "tier": "front"}))).await;
    put(&s, &deployment("other", Some(4), json!({"app": "other"}))).await;
    let slice = || s.object("discovery.k8s.io/v1", "EndpointSlice", Some("default"), "web-fabric");
    let count = |v: &Value| v["endpoints"].as_array().map_or(0, Vec::len);
    let first = eventually(&s, "2 endpoints", || slice().filter(|x| count(x) == 2)).await;
    assert_eq!(first["metadata"]["labels"]["kubernetes.io/service-name"], "web");
    assert_eq!(first["addressType"], "IPv4");
    assert_eq!(
        first["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "metrics", "port": 9091, "protocol": "TCP"}])
    );
    let ep = &first["endpoints"][0];
    assert_eq!(ep["conditions"]["ready"], true);
    let ip = ep["addresses"][0].as_str().unwrap();
    let octets: Vec<u8> = ip.split('.').map(|o| o.parse().unwrap()).collect();
    assert_eq!((octets.len(), octets[0]), (4, 10), "{ip}");
    assert!(owned(&first, "endpointslice-controller", "Update").is_some(), "{first:#}");
    let by_label = get(
        &s,
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb",
    )
    .await;
    assert_eq!(by_label.body["items"].as_array().unwrap().len(), 1, "{:#}", by_label.body);

    // Each endpoint is a Ready Pod the selector selects, with the address its kubelet reports.
    let pod = s.object("v1", "Pod", Some("default"), ep["targetRef"]["name"].as_str().unwrap()).unwrap();
    assert_eq!(pod["status"]["podIP"].as_str(), Some(ip), "{pod:#}");
    // Scaling up adds endpoints; the existing Pods' addresses stay.
    put(&s, &deployment("web", Some(3), json!({"app": "web", "tier": "front"}))).await;
    let scaled = eventually(&s, "3 endpoints", || slice().filter(|x| count(x) == 3)).await;
    for e in first["endpoints"].as_array().unwrap() {
        assert!(scaled["endpoints"].as_array().unwrap().contains(e), "{e} kept: {scaled:#}");
    }

    // A held Deployment contributes nothing until its status says it is ready.
    s.hold("Deployment", true);
    put(&s, &deployment("web-canary", Some(1), json!({"app": "web"}))).await;
    quiet().await;
    assert_eq!(count(&slice().unwrap()), 3);
    s.hold("Deployment", false);
    eventually(&s, "4 endpoints", || slice().filter(|x| count(x) == 4)).await;

    // Deleting the Service deletes its slice.
    assert_eq!(s.request("DELETE", &path_of(&svc), None, None).await.unwrap().status, 200);
    eventually(&s, "the slice to go", || slice().is_none().then_some(())).await;
}

/// Every status a simulated controller writes (True and False variants) passes the CRD schema
/// (or Karmada's swagger) of its kind.
#[tokio::test]
async fn controller_statuses_validate_against_the_crd_schemas() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    let schemas = shared_schemas();
    let check_all = |stage: &str| {
        let mut checked = 0;
        for mut o in s.objects() {
            let (av, kind) = (o["apiVersion"].as_str().unwrap().to_string(), o["kind"].as_str().unwrap().to_string());
            if !schemas.knows(&av, &kind) || o.get("status").is_none() {
                continue;
            }
            o["metadata"].as_object_mut().unwrap().remove("managedFields");
            let report = schemas.check(&o);
            assert!(report.is_ok(), "{stage}: {kind} status fails its schema: {:#?}\n{o:#}", report.errors);
            checked += 1;
        }
        checked
    };
    // Every controller's verdict, all healthy or all failing; the LocalQueue's condition when so.
    let statuses = |healthy: bool| {
        let (failed, ok) = if healthy { ("False", "True") } else { ("True", "False") };
        with_condition(s.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue"), "Failed", failed)?;
        with_condition(s.object("cluster.karmada.io/v1alpha1", "Cluster", None, "sp"), "Ready", ok)?;
        with_condition(s.object("kueue.x-k8s.io/v1beta2", "MultiKueueCluster", None, "sp"), "Active", ok)?;
        with_condition(s.object("kueue.x-k8s.io/v1beta2", "AdmissionCheck", None, "multikueue"), "Active", ok)?;
        with_condition(s.object("kueue.x-k8s.io/v1beta2", "LocalQueue", Some("default"), "team-a"), "Active", ok)
    };
    for ns in ["kueue-system", "karmada-cluster"] {
        put(&s, &namespace(ns)).await;
    }
    // Failing variants first.
    s.fail_helm_job("kueue");
    put(&s, &helm_chart("kueue", "0.14.1")).await;
    put(&s, &karmada_cluster("sp")).await;
    put(&s, &local_queue("team-a", "gpu-batch")).await;
    put(&s, &cluster_queue("gpu-batch")).await;
    put(&s, &multikueue_cluster("sp", "sp-kubeconfig")).await;
    put(&s, &admission_check("multikueue", "kueue.x-k8s.io/multikueue", "fabric")).await;
    eventually(&s, "the failing statuses", || {
        statuses(false).filter(|lq| lq["reason"] == "ClusterQueueIsInactive").map(|_| ())
    })
    .await;
    assert!(check_all("failing") >= 6);
    // Then everything healthy.
    put(&s, &resource_flavor("site-a-gpu")).await;
    put(&s, &kubeconfig_secret("sp-kubeconfig", GOOD_KUBECONFIG)).await;
    put(&s, &multikueue_config("fabric")).await;
    put(
        &s,
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sp", "namespace": "karmada-cluster"},
        "stringData": {"token": "t"}}),
    )
    .await;
    put(&s, &helm_chart("kueue", "0.14.2")).await;
    eventually(&s, "the healthy statuses", || statuses(true).map(|_| ())).await;
    assert!(check_all("healthy") >= 6);
    assert!(s.controller_errors().is_empty(), "{:#?}", s.controller_errors());
}

/// `set_latency` delays every answer (by at least that much: a lower bound, not a timing
/// assertion); how answers on different connections overlap is measured by `benches/plan_kube.rs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_delays_each_answer() {
    let s = server().await;
    s.set_latency(std::time::Duration::from_millis(200));
    let t = std::time::Instant::now();
    assert_eq!(get(&s, "/api/v1/namespaces/default").await.status, 200);
    assert!(t.elapsed() >= std::time::Duration::from_millis(200), "delayed: {:?}", t.elapsed());
    s.set_latency(std::time::Duration::ZERO);
    assert_eq!(get(&s, "/api/v1/namespaces/default").await.status, 200);
}

#[tokio::test]
async fn pods_are_listed_by_node_and_evicted_within_their_disruption_budget() {
    let s = server().await;
    let pod = |name: &str, node: &str, ready: bool| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": {"app": "db"}},
               "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
               "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    };
    s.put_raw(pod("db-0", "n1", true));
    s.put_raw(pod("db-1", "n2", true));
    // kubectl drain lists a node's pods by `spec.nodeName`; other kinds do not have that field.
    let on_n1 = get(&s, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1").await;
    assert_eq!(on_n1.status, 200, "{:#}", on_n1.body);
    let names: Vec<&str> =
        on_n1.body["items"].as_array().unwrap().iter().map(|p| p["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["db-0"]);
    let bad = get(&s, "/api/v1/namespaces/default/configmaps?fieldSelector=spec.nodeName%3Dn1").await;
    assert_eq!(bad.status, 400, "{:#}", bad.body);
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "default"},
                     "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}});
    s.put_raw(pdb);
    let s = &s;
    let evict = |name: &str| {
        let body = json!({"metadata": {"name": name}}).to_string();
        let path = format!("/api/v1/namespaces/default/pods/{name}/eviction");
        async move { s.request("POST", &path, Some("application/json"), Some(&body)).await.unwrap() }
    };
    // Two Ready pods and minAvailable 2: evicting one would break the budget.
    let r = evict("db-0").await;
    assert_status(&r, 429, "TooManyRequests");
    assert_eq!(r.body["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert!(s.object("v1", "Pod", Some("default"), "db-0").is_some());
    // With minAvailable 1, the eviction deletes the pod (201 Success), and a second one is 404.
    s.put_raw(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "default"},
                     "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}));
    let r = evict("db-0").await;
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert_eq!(r.body["status"], "Success");
    assert!(s.object("v1", "Pod", Some("default"), "db-0").is_none());
    assert_status(&evict("db-0").await, 404, "NotFound");
    // A body for another pod is refused.
    let body = json!({"kind": "Eviction", "metadata": {"name": "other"}}).to_string();
    let r = s
        .request("POST", "/api/v1/namespaces/default/pods/db-1/eviction", Some("application/json"), Some(&body))
        .await
        .unwrap();
    assert_eq!(r.status, 400, "{:#}", r.body);
}

// ---------------------------------------------------------------------------------------------
// Built-in kinds: canonical quantities, defaults, Service addresses, the status subresource,
// a controller's merge patch (crates/testkit/src/kube_builtin.rs, kube_api.md "Built-in kinds")
// ---------------------------------------------------------------------------------------------

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

fn job(limits: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "probe", "namespace": "default"},
        "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "probe", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "resources": {"limits": limits}}]}}}})
}

#[tokio::test]
async fn built_in_quantities_are_stored_canonical_and_custom_resources_as_sent() {
    let s = server().await;
    let limits = json!({"nvidia.com/gpu": 1, "cpu": 0.5, "memory": "1024Mi", "ephemeral-storage": "1000m"});
    let r = apply(&s, &format!("{JOBS}/probe"), "fabric", "", &job(limits.clone())).await;
    assert_eq!(r.status, 201, "{:#}", r.body);
    let got = &r.body["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"];
    assert_eq!(got, &json!({"nvidia.com/gpu": "1", "cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1"}));
    // Re-applying the same (uncanonical) configuration changes nothing: values compare typed.
    let before = rv(&r.body);
    let again = apply(&s, &format!("{JOBS}/probe"), "fabric", "", &job(limits)).await;
    assert_eq!(again.status, 200, "{:#}", again.body);
    assert_eq!(rv(&again.body), before, "a no-op apply");
    // A quantity that does not parse is refused as the decoder refuses it.
    let bad = apply(&s, &format!("{JOBS}/probe"), "fabric", "", &job(json!({"cpu": "lots"}))).await;
    assert_status(&bad, 400, "BadRequest");
    assert!(
        bad.body["message"].as_str().unwrap().contains("quantities must match the regular expression"),
        "{:#}",
        bad.body
    );
    // A CRD's field is stored as sent (a number stays a number).
    let r = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "", &cluster_queue("gpu-batch")).await;
    assert_eq!(r.body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"], json!(8));
}

#[tokio::test]
async fn built_in_kinds_are_defaulted_and_the_defaults_are_nobodys() {
    let s = server().await;
    let r = apply(&s, &format!("{JOBS}/probe"), "fabric", "", &job(json!({"nvidia.com/gpu": 1}))).await;
    let spec = &r.body["spec"];
    for (k, v) in [
        ("completions", json!(1)),
        ("parallelism", json!(1)),
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
        ("manualSelector", json!(false)),
        ("suspend", json!(true)),
    ] {
        assert_eq!(spec[k], v, "Job spec.{k}: {:#}", r.body);
    }
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["restartPolicy"], "Never", "a given value is kept");
    assert_eq!(pod["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(pod["containers"][0]["terminationMessagePath"], "/dev/termination-log");
    let mine = owned(&r.body, "fabric", "Apply").expect("fabric's entry").to_string();
    assert!(!mine.contains("completions") && !mine.contains("dnsPolicy"), "defaults are owned by nobody: {mine}");

    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}});
    let r = apply(&s, "/apis/apps/v1/namespaces/default/deployments/web", "fabric", "", &dep).await;
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert_eq!(r.body["spec"]["replicas"], 1);
    assert_eq!(
        r.body["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(r.body["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(r.body["spec"]["progressDeadlineSeconds"], 600);
    let c = &r.body["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["imagePullPolicy"], "Always", "no tag is `latest`");
    assert_eq!(c["ports"][0]["protocol"], "TCP");

    let crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "b"},
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "ana"}, {"kind": "ServiceAccount", "name": "s", "namespace": "default"}]});
    let r = apply(&s, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/b", "fabric", "", &crb).await;
    assert_eq!(r.body["roleRef"]["apiGroup"], "rbac.authorization.k8s.io", "{:#}", r.body);
    assert_eq!(r.body["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    assert!(r.body["subjects"][1].get("apiGroup").is_none(), "a ServiceAccount's stays empty");
}

#[tokio::test]
async fn services_get_their_addresses_from_the_allocator_and_keep_them() {
    let s = server().await;
    let svc = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80}]}})
    };
    let path = |n: &str| format!("/api/v1/namespaces/default/services/{n}");
    // A dry run answers with the would-be address and keeps nothing.
    let dry = apply(&s, &path("a"), "fabric", "&dryRun=All", &svc("a")).await;
    assert_eq!(dry.body["spec"]["clusterIP"], "10.43.0.2", "{:#}", dry.body);
    let a = apply(&s, &path("a"), "fabric", "", &svc("a")).await.body;
    let spec = &a["spec"];
    assert_eq!(spec["clusterIP"], "10.43.0.2", "the dry run consumed nothing: {a:#}");
    assert_eq!(spec["clusterIPs"], json!(["10.43.0.2"]));
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");
    assert_eq!(spec["ports"][0], json!({"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}));
    let b = apply(&s, &path("b"), "fabric", "", &svc("b")).await.body;
    assert_eq!(b["spec"]["clusterIP"], "10.43.0.3", "the next free address");
    // Re-applied without the address: kept, and nothing changes.
    let again = apply(&s, &path("a"), "fabric", "", &svc("a")).await.body;
    assert_eq!(again["spec"]["clusterIP"], "10.43.0.2");
    assert_eq!(rv(&again), rv(&a));
    // A headless Service without selector asks for both families.
    let mut h = svc("h");
    h["spec"] = json!({"clusterIP": "None", "ports": [{"port": 53}]});
    let h = apply(&s, &path("h"), "fabric", "", &h).await.body;
    assert_eq!(h["spec"]["clusterIPs"], json!(["None"]));
    assert_eq!(h["spec"]["ipFamilyPolicy"], "RequireDualStack");
}

#[tokio::test]
async fn status_changes_only_through_its_subresource() {
    let s = server().await;
    let path = format!("{JOBS}/probe");
    let mut j = job(json!({"cpu": "1"}));
    j["status"] = json!({"active": 3});
    let r = apply(&s, &path, "fabric", "", &j).await;
    assert!(r.body.get("status").is_none(), "a write to the main resource ignores status: {:#}", r.body);
    // PUT .../status: only the status changes, the spec in the body is ignored.
    let mut body = r.body.clone();
    body["status"] = json!({"active": 1});
    body["spec"]["suspend"] = json!(false);
    let w = s
        .request(
            "PUT",
            &format!("{path}/status?fieldManager=job-controller"),
            Some("application/json"),
            Some(&body.to_string()),
        )
        .await
        .unwrap();
    assert_eq!(w.status, 200, "{:#}", w.body);
    assert_eq!(w.body["status"], json!({"active": 1}));
    assert_eq!(w.body["spec"]["suspend"], true, "the status subresource leaves the spec");
    let entry = w.body["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "job-controller")
        .expect("the writer's entry")
        .clone();
    assert_eq!(entry["subresource"], "status", "{entry:#}");
    assert_eq!(get(&s, &format!("{path}/status")).await.body["status"], json!({"active": 1}));
}

#[tokio::test]
async fn a_controllers_merge_patch_takes_the_field_and_a_reapply_without_it_keeps_its_value() {
    let s = server().await;
    let path = format!("{JOBS}/probe");
    apply(&s, &path, "fabric", "", &job(json!({"nvidia.com/gpu": 1}))).await;
    // Kueue unsuspends the Job with a merge patch and no fieldManager: kube-apiserver names
    // the manager from the user agent (`kueue/v0.15.0 (linux/amd64) abcdef0`).
    // (Kueue sends none; the double derives the manager from the user agent as kube does, the
    // name is given here.)
    let r = s
        .request(
            "PATCH",
            &format!("{path}?fieldManager=kueue"),
            Some("application/merge-patch+json"),
            Some(&json!({"spec": {"suspend": false}}).to_string()),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{:#}", r.body);
    let kueue = owned(&r.body, "kueue", "Update").expect("kueue's entry");
    assert!(kueue.pointer("/f:spec/f:suspend").is_some(), "{kueue:#}");
    assert!(owned(&r.body, "fabric", "Apply").unwrap().pointer("/f:spec/f:suspend").is_none());
    // fabric re-applying suspend: true conflicts with kueue; without the field it keeps false.
    let c = apply(&s, &path, "fabric", "&dryRun=All", &job(json!({"nvidia.com/gpu": 1}))).await;
    assert_status(&c, 409, "Conflict");
    let mut without = job(json!({"nvidia.com/gpu": 1}));
    without["spec"].as_object_mut().unwrap().remove("suspend");
    let ok = apply(&s, &path, "fabric", "", &without).await;
    assert_eq!(ok.status, 200, "{:#}", ok.body);
    assert_eq!(ok.body["spec"]["suspend"], false);
}

#[test]
fn list_types_come_from_the_crd_schemas_and_the_built_in_definitions() {
    use fabric_testkit::kube_builtin::{ListType, shared_builtins};
    let cq = |p: &[&str]| shared_schemas().list_type("kueue.x-k8s.io/v1beta2", "ClusterQueue", p);
    assert_eq!(cq(&["spec", "resourceGroups"]), Some(ListType::Atomic));
    assert_eq!(cq(&["spec", "resourceGroups", "flavors"]), Some(ListType::Map(vec!["name".into()])));
    assert_eq!(cq(&["spec", "cohortName"]), None);
    let b = shared_builtins();
    let pod = ["spec", "template", "spec"];
    let at = |rest: &[&str]| b.list_type("apps", "v1", "Deployment", &[&pod[..], rest].concat());
    assert_eq!(at(&["containers"]), Some(ListType::Map(vec!["name".into()])));
    assert_eq!(at(&["containers", "ports"]), Some(ListType::Map(vec!["containerPort".into(), "protocol".into()])));
    assert_eq!(at(&["tolerations"]), Some(ListType::Atomic));
    assert_eq!(
        b.list_type("", "v1", "Service", &["spec", "ports"]),
        Some(ListType::Map(vec!["port".into(), "protocol".into()]))
    );
    assert_eq!(b.list_type("apps", "v1", "Deployment", &["metadata", "finalizers"]), Some(ListType::Set));
}

#[tokio::test]
async fn map_lists_merge_by_key_and_each_item_has_its_owner() {
    let s = server().await;
    let path = "/apis/apps/v1/namespaces/default/deployments/web";
    let dep = |containers: Value, finalizers: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "finalizers": finalizers},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": containers}}}})
    };
    let names = |o: &Value| -> Vec<String> {
        o["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    // `containers` is `x-kubernetes-list-type: map` keyed by name, `finalizers` a set (v1.33
    // definitions): two managers apply their own items without conflict, both are kept.
    let r = apply(&s, path, "fabric", "", &dep(json!([{"name": "a", "image": "a:1"}]), json!(["x/one"]))).await;
    assert_eq!(r.status, 201, "{:#}", r.body);
    let r = apply(&s, path, "injector", "", &dep(json!([{"name": "b", "image": "b:1"}]), json!(["x/two"]))).await;
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert_eq!(names(&r.body), ["a", "b"]);
    assert_eq!(r.body["metadata"]["finalizers"], json!(["x/one", "x/two"]));
    let fabric = owned(&r.body, "fabric", "Apply").unwrap();
    let item = "/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"a\"}";
    assert!(
        fabric.pointer(&format!("{item}/f:image")).is_some() && fabric.pointer(&format!("{item}/.")).is_some(),
        "{fabric:#}"
    );
    assert!(fabric.pointer("/f:metadata/f:finalizers/v:\"x~1one\"").is_some(), "{fabric:#}");
    let injector = owned(&r.body, "injector", "Apply").unwrap();
    assert!(
        injector.pointer("/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"b\"}/f:image").is_some(),
        "{injector:#}"
    );
    // Changing another manager's item's field is a conflict naming the item.
    let c = apply(
        &s,
        path,
        "injector",
        "",
        &dep(json!([{"name": "a", "image": "a:2"}, {"name": "b", "image": "b:1"}]), json!(["x/two"])),
    )
    .await;
    assert_status(&c, 409, "Conflict");
    let msg = c.body["message"].as_str().unwrap();
    assert!(msg.contains(".spec.template.spec.containers[name=\"a\"].image") && msg.contains("\"fabric\""), "{msg}");
    // An item its manager no longer applies goes (with its keys); the other manager's stays.
    let r = apply(&s, path, "fabric", "", &dep(json!([{"name": "c", "image": "c:1"}]), json!(["x/one"]))).await;
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert_eq!(names(&r.body), ["b", "c"]);
}

/// What the double does not model, said where the tests are read: a map list's items keep the
/// applier's order only roughly (new items are appended; kube orders the merged list by the
/// applied configuration), and an `atomic` list of a CRD whose schema declares no list type
/// stays one leaf as in kube. Granular ownership inside `x-kubernetes-map-type: granular` maps
/// of built-in kinds is modelled for every object map (labels, annotations, selectors), which
/// is kube's default. What fabric's comparison needs of keyed items it reads from FieldsV1
/// (`src/providers/kube.rs`, `restrict_follows_fields_v1_with_keyed_items`).
#[test]
#[ignore = "NOT COVERED: not modelled by the API double: the merged order of a map list's items (kube follows the applied configuration's order)"]
fn not_covered_merged_item_order() {
    panic!("the double appends new items of a map list; see kube_api.md, Built-in kinds");
}

// ---- What fabric depends on and the double cannot model (kube_api.md, "Upstream sources") ----

#[test]
#[ignore = "NOT COVERED: not modelled by the API double: CRD CEL rules (x-kubernetes-validations) and admission webhooks (Kueue's, Karmada's); a real server's dry run refuses what they refuse, the double's passes it, so plan's dry-run check is proven only against the schemas"]
fn not_covered_admission_webhooks_and_cel_rules() {
    panic!("not covered by the API double: needs a real kube-apiserver with the charts' webhooks");
}

#[test]
#[ignore = "NOT COVERED: not modelled by the API double: RBAC (403 Forbidden); one static token may do everything, so a kubeconfig with too few rights is not caught"]
fn not_covered_rbac_refusals() {
    panic!("not covered by the API double: needs a real kube-apiserver with RBAC");
}

#[test]
#[ignore = "NOT COVERED: not modelled by the API double: TLS; it serves http://, so a kubeconfig's CA, certificate SANs and the rewritten server URL of bootstrap are not checked"]
fn not_covered_tls_and_ca_of_a_kubeconfig() {
    panic!("not covered by the API double: needs a real K3s server (the lab's)");
}

#[test]
#[ignore = "NOT COVERED: not modelled by the API double: finalizers, graceful deletion and Terminating namespaces (deletion is immediate); a re-create right after a delete (prune, rollback) is not shown to wait or fail"]
fn not_covered_finalizers_and_terminating_namespaces() {
    panic!("not covered by the API double: needs a real kube-apiserver and its controllers");
}

#[test]
#[ignore = "NOT COVERED: not modelled by the API double: conversion between served versions of a kind (CRD conversion webhooks); reading through another version only rewrites apiVersion"]
fn not_covered_version_conversion() {
    panic!("not covered by the API double: needs a real kube-apiserver with the CRDs' conversion");
}

/// The `services/proxy` subresource proxies the methods kube-apiserver's `proxyMethods` lists
/// (kubernetes/kubernetes `pkg/registry/core/service/proxy.go`: GET, POST, PUT, PATCH, DELETE,
/// HEAD, OPTIONS) and refuses others with `405`.
#[tokio::test]
async fn the_service_proxy_forwards_patch_and_refuses_trace() {
    use std::io::{Read, Write};
    let s = server().await;
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": "default"},
        "spec": {"selector": {"app": "echo"}, "ports": [{"port": 80}]}});
    assert_eq!(apply(&s, "/api/v1/namespaces/default/services/echo", "t", "", &svc).await.status, 201);
    // A loopback endpoint that answers with the method it was asked with.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut c in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let n = c.read(&mut buf).unwrap_or(0);
            let method = String::from_utf8_lossy(&buf[..n]).split_whitespace().next().unwrap_or_default().to_string();
            let body = format!("\"{method}\"");
            let _ = write!(c, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            // Drain what is left of the request (its body may come in a later segment): closing a
            // socket with unread bytes sends a reset, which the proxy reports as a 503.
            let _ = c.shutdown(std::net::Shutdown::Write);
            let _ = std::io::copy(&mut c, &mut std::io::sink());
        }
    });
    s.set_service_endpoint("default", "echo", addr);
    let path = "/api/v1/namespaces/default/services/echo:80/proxy/x";
    let r = s.request("PATCH", path, Some("application/merge-patch+json"), Some("{}")).await.unwrap();
    assert_eq!((r.status, r.body.clone()), (200, json!("PATCH")), "{:#}", r.body);
    let r = s.request("TRACE", path, None, None).await.unwrap();
    assert_status(&r, 405, "MethodNotAllowed");
}

/// A workload whose selector does not select its pod template, or is empty, is refused as
/// kube-apiserver's validation refuses it (kubernetes/kubernetes
/// `pkg/apis/apps/validation/validation.go`, `ValidateDeploymentSpec`): no Deployment is stored,
/// so no ReplicaSet or Pod is made.
#[tokio::test]
async fn a_workload_whose_selector_misses_its_template_is_refused() {
    let s = server().await;
    s.simulate_controllers(DELAY);
    s.register_nodes(&["n1"]);
    let mut d = deployment("web", Some(1), json!({"app": "web"}));
    d["spec"]["selector"]["matchLabels"] = json!({"app": "other"});
    let r = apply(&s, &path_of(&d), "fabric", "", &d).await;
    assert_status(&r, 422, "Invalid");
    assert!(
        r.body["message"].as_str().unwrap().contains("`selector` does not match template `labels`"),
        "{:#}",
        r.body
    );
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec.template.metadata.labels", "{:#}", r.body);
    d["spec"]["selector"] = json!({});
    let r = apply(&s, &path_of(&d), "fabric", "&dryRun=All", &d).await;
    assert_status(&r, 422, "Invalid");
    assert!(r.body["message"].as_str().unwrap().contains("empty selector is invalid for deployment"), "{:#}", r.body);
    quiet().await;
    assert!(s.objects().iter().all(|o| o["kind"] != "Deployment" && o["kind"] != "ReplicaSet" && o["kind"] != "Pod"));
}
