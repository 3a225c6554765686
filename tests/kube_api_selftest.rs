//! Self-test of the kube-apiserver test double `tests/support/kube_api.rs`: discovery, auth,
//! CRUD with Status bodies, server-side apply (no-op, change, removal, conflicts, force), dry run,
//! schema validation, namespaces, connection failures and injected failures.

#[path = "support/kube_api.rs"]
mod kube_api;

use std::path::Path;

use kube_api::{HttpResponse, TEST_TOKEN, TestApiServer, http_request, kube_schema::Schemas, shared_schemas};
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
    for (plural, namespaced) in
        [("namespaces", false), ("secrets", true), ("serviceaccounts", true), ("services", true), ("configmaps", true)]
    {
        assert_eq!(find(&core.body, plural)["namespaced"], namespaced, "{plural}");
    }
    assert_eq!(get(&s, "/api").await.body["versions"], json!(["v1"]));
    assert_eq!(find(&get(&s, "/apis/apps/v1").await.body, "deployments")["kind"], "Deployment");
    assert_eq!(find(&get(&s, "/apis/argoproj.io/v1alpha1").await.body, "applications")["namespaced"], true);
    assert_eq!(get(&s, "/apis/nope.example.com/v1").await.status, 404);
    let v = http_request(s.addr, "GET", "/version", None, None, None).await.unwrap();
    assert_eq!(v.status, 200);
    assert!(v.body["gitVersion"].as_str().unwrap().starts_with("v1."));
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
    assert_status(&get(&s, "/api/v1/pods").await, 404, "NotFound");
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
    let r = apply(&s, &format!("{CQ}/gpu-batch"), "fabric", "", &cq).await;
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
