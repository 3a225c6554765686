//! Self-test of the `crates/testkit/src/kube_schema.rs` validator against the upstream schemas in
//! `shared/specs/crds/`: known kinds, valid objects that must pass, and typos, renamed fields,
//! wrong types, bad enums, bad scopes and bad quantities that must fail with a precise message.

use fabric_testkit::kube_schema;

use std::sync::OnceLock;

use kube_schema::Schemas;
use serde_json::{Value, json};

fn schemas() -> &'static Schemas {
    static S: OnceLock<Schemas> = OnceLock::new();
    S.get_or_init(|| Schemas::from_shared().unwrap_or_else(|e| panic!("{e}")))
}

fn assert_valid(obj: &Value) {
    let report = schemas().check(obj);
    assert!(report.errors.is_empty(), "expected valid, got errors:\n{}\nobject: {obj:#}", report.errors.join("\n"));
}

/// Validates `obj`, expects failure, and asserts that some error contains every `needles` entry.
fn assert_error(obj: &Value, needles: &[&str]) -> Vec<String> {
    let errors = match schemas().validate(obj) {
        Ok(()) => panic!("expected an error containing {needles:?}, but the object is valid: {obj:#}"),
        Err(e) => e,
    };
    assert!(
        errors.iter().any(|e| needles.iter().all(|n| e.contains(n))),
        "no error contains all of {needles:?}; errors:\n{}",
        errors.join("\n")
    );
    errors
}

fn set(obj: &mut Value, pointer: &str, value: Value) {
    *obj.pointer_mut(pointer).unwrap_or_else(|| panic!("no {pointer} in the object")) = value;
}

fn remove(obj: &mut Value, pointer: &str, key: &str) -> Value {
    obj.pointer_mut(pointer).and_then(Value::as_object_mut).and_then(|m| m.remove(key)).expect("key to remove")
}

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------

#[test]
fn loads_every_expected_kind() {
    let kinds = schemas().kinds();
    let has = |g: &str, v: &str, k: &str| kinds.iter().any(|(a, b, c)| a == g && b == v && c == k);
    for k in ["ClusterQueue", "LocalQueue", "ResourceFlavor", "AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster"]
    {
        assert!(has("kueue.x-k8s.io", "v1beta2", k), "kueue v1beta2 {k} missing");
        assert!(has("kueue.x-k8s.io", "v1beta1", k), "kueue v1beta1 {k} missing");
    }
    for k in ["PropagationPolicy", "OverridePolicy", "ClusterPropagationPolicy", "ClusterOverridePolicy"] {
        assert!(has("policy.karmada.io", "v1alpha1", k), "karmada {k} missing");
    }
    assert!(has("cluster.karmada.io", "v1alpha1", "Cluster"), "karmada Cluster (swagger) missing");
    assert!(has("work.karmada.io", "v1alpha2", "ResourceBinding"), "karmada ResourceBinding (swagger) missing");
    assert!(!kinds.iter().any(|(_, _, k)| k == "ClusterList"), "List kinds must not be registered");
    assert!(has("helm.cattle.io", "v1", "HelmChart") && has("helm.cattle.io", "v1", "HelmChartConfig"));
    assert!(has("cilium.io", "v2", "CiliumNetworkPolicy") && has("cilium.io", "v2", "CiliumClusterwideNetworkPolicy"));
    assert!(kinds.len() >= 39, "only {} kinds loaded", kinds.len());

    let s = schemas();
    // Policies come from the CRDs, not from swagger.json, where both exist.
    let src = s.source("policy.karmada.io/v1alpha1", "PropagationPolicy").unwrap();
    assert!(src.to_string_lossy().ends_with("policy.karmada.io_propagationpolicies.yaml"), "{}", src.display());
    assert!(s.source("cluster.karmada.io/v1alpha1", "Cluster").unwrap().ends_with("swagger.json"));

    assert_eq!(s.namespaced("kueue.x-k8s.io/v1beta2", "ClusterQueue"), Some(false));
    assert_eq!(s.namespaced("kueue.x-k8s.io/v1beta2", "LocalQueue"), Some(true));
    assert_eq!(s.namespaced("helm.cattle.io/v1", "HelmChart"), Some(true));
    assert_eq!(s.namespaced("cluster.karmada.io/v1alpha1", "Cluster"), Some(false));
    assert_eq!(s.namespaced("policy.karmada.io/v1alpha1", "ClusterOverridePolicy"), Some(false));
    assert_eq!(s.namespaced("v1", "ConfigMap"), None);
    assert_eq!(s.namespaced("kueue.x-k8s.io/v1alpha9", "ClusterQueue"), None);

    assert!(s.cel_rules_skipped() > 10, "CEL rules must be counted, got {}", s.cel_rules_skipped());
    assert!(s.cel_rules().iter().any(|r| r.contains("coveredResources")));
    assert!(s.load_warnings().is_empty(), "load warnings: {:?}", s.load_warnings());

    // Shareable across threads (an in-process API server serves from several).
    fn send_sync<T: Send + Sync>(_: &T) {}
    send_sync(s);
}

#[test]
fn missing_directory_is_a_clear_error() {
    let err = Schemas::load(std::path::Path::new("/nonexistent/specs/crds")).err().expect("must fail");
    assert!(err.contains("/nonexistent/specs/crds") && err.contains("does not exist"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Kueue
// ---------------------------------------------------------------------------------------------

fn cluster_queue() -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "gpu-cq", "labels": {"app.kubernetes.io/part-of": "fabric"}},
        "spec": {
            "cohortName": "research",
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [{
                    "name": "site-a-gpu",
                    "resources": [
                        {"name": "cpu", "nominalQuota": 64},
                        {"name": "memory", "nominalQuota": "256Gi"},
                        {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": "4"}
                    ]
                }]
            }],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "multikueue"}]},
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
        }
    })
}

#[test]
fn valid_cluster_queue_passes() {
    let cq = cluster_queue();
    assert_valid(&cq);
    assert!(schemas().check(&cq).warnings.is_empty(), "{:?}", schemas().check(&cq).warnings);
}

#[test]
fn misspelled_nominal_quota_is_an_unknown_field_with_suggestion() {
    let mut cq = cluster_queue();
    let q = remove(&mut cq, "/spec/resourceGroups/0/flavors/0/resources/2", "nominalQuota");
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuouta"] = q;
    let errors = assert_error(
        &cq,
        &[
            ".spec.resourceGroups[0].flavors[0].resources[2].nominalQuouta: ",
            "unknown field \"spec.resourceGroups[0].flavors[0].resources[2].nominalQuouta\"",
            "did you mean \"nominalQuota\"",
        ],
    );
    // The now-missing required field is reported too: every problem, not only the first.
    assert!(
        errors.iter().any(|e| e == ".spec.resourceGroups[0].flavors[0].resources[2].nominalQuota: Required value"),
        "{errors:#?}"
    );
}

#[test]
fn cohort_was_renamed_in_v1beta2() {
    let mut cq = cluster_queue();
    let c = remove(&mut cq, "/spec", "cohortName");
    cq["spec"]["cohort"] = c;
    assert_error(&cq, &[".spec.cohort: ", "unknown field \"spec.cohort\"", "did you mean \"cohortName\""]);

    // ... but v1beta1 still has `cohort` (and is deprecated, not unserved).
    cq["apiVersion"] = json!("kueue.x-k8s.io/v1beta1");
    let report = schemas().check(&cq);
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert!(
        report.warnings.iter().any(|w| w.contains("deprecated") && w.contains("Use v1beta2")),
        "{:#?}",
        report.warnings
    );
}

#[test]
fn admission_checks_is_gone_in_v1beta2() {
    let mut cq = cluster_queue();
    remove(&mut cq, "/spec", "admissionChecksStrategy");
    cq["spec"]["admissionChecks"] = json!(["multikueue"]);
    assert_error(&cq, &["unknown field \"spec.admissionChecks\"", "did you mean \"admissionChecksStrategy\""]);
    cq["apiVersion"] = json!("kueue.x-k8s.io/v1beta1");
    remove(&mut cq, "/spec", "cohortName");
    assert_valid(&cq);
}

#[test]
fn wrong_types_name_path_expected_and_found() {
    let mut cq = cluster_queue();
    cq["spec"]["resourceGroups"][0]["coveredResources"] = json!("cpu");
    cq["spec"]["queueingStrategy"] = json!(3);
    let errors =
        assert_error(&cq, &[".spec.resourceGroups[0].coveredResources: ", "must be of type array", "\"string\""]);
    assert!(
        errors.iter().any(|e| e.starts_with(".spec.queueingStrategy: ") && e.contains("must be of type string")),
        "{errors:#?}"
    );
}

#[test]
fn quantities_are_checked() {
    // Garbage string: fails the CRD's quantity pattern.
    let mut cq = cluster_queue();
    set(&mut cq, "/spec/resourceGroups/0/flavors/0/resources/1/nominalQuota", json!("lots"));
    assert_error(&cq, &[".spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: ", "should match", "\"lots\""]);

    // A float is neither integer nor string (x-kubernetes-int-or-string).
    let mut cq = cluster_queue();
    set(&mut cq, "/spec/resourceGroups/0/flavors/0/resources/2/nominalQuota", json!(1.5));
    assert_error(&cq, &["resources[2].nominalQuota: ", "integer or string"]);

    // Negative: the CRD pattern allows a sign, Kueue's webhook rejects it.
    for negative in [json!("-4"), json!(-4)] {
        let mut cq = cluster_queue();
        set(&mut cq, "/spec/resourceGroups/0/flavors/0/resources/2/nominalQuota", negative.clone());
        assert!(schemas().validate_schema_only(&cq).is_ok(), "schema alone accepts {negative}");
        assert_error(
            &cq,
            &[".spec.resourceGroups[0].flavors[0].resources[2].nominalQuota: ", "greater than or equal to 0"],
        );
    }

    // Valid forms.
    let mut cq = cluster_queue();
    set(&mut cq, "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", json!("500m"));
    set(&mut cq, "/spec/resourceGroups/0/flavors/0/resources/1/nominalQuota", json!("1.5e3"));
    assert_valid(&cq);
}

#[test]
fn cluster_scoped_kind_rejects_namespace_and_typos_in_metadata() {
    let flavor = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "site-a-gpu"},
        "spec": {"nodeLabels": {"fabric.example/site": "a"}}
    });
    assert_valid(&flavor);

    let mut bad = flavor.clone();
    bad["metadata"]["namespace"] = json!("kueue-system");
    assert_error(&bad, &[".metadata.namespace: ", "cluster-scoped", "must not be set"]);

    let mut bad = flavor.clone();
    bad["metadata"]["lables"] = json!({"a": "b"});
    assert_error(&bad, &[".metadata.lables: ", "unknown field \"metadata.lables\"", "did you mean \"labels\""]);

    let mut bad = flavor.clone();
    bad["metadata"]["name"] = json!("Site_A");
    assert_error(&bad, &[".metadata.name: ", "RFC 1123 subdomain"]);

    let mut bad = flavor.clone();
    bad["metadata"]["labels"] = json!({"tier": "a b"});
    assert_error(&bad, &[".metadata.labels[tier]: ", "label value"]);

    let mut bad = flavor.clone();
    bad["metadata"] = json!({"generateName": "site-"});
    assert_valid(&bad);
    bad["metadata"] = json!({});
    assert_error(&bad, &[".metadata.name: Required value"]);

    let mut bad = flavor;
    remove(&mut bad, "", "metadata");
    assert_error(&bad, &[".metadata.name: Required value"]);
}

#[test]
fn kueue_v1beta1_is_deprecated_but_served() {
    let s = schemas();
    for kind in ["ClusterQueue", "LocalQueue", "ResourceFlavor", "AdmissionCheck", "MultiKueueCluster"] {
        let st = s.version_status("kueue.x-k8s.io/v1beta1", kind).unwrap();
        assert!(st.served && st.deprecated && !st.storage, "{kind}: {st:?}");
        let st2 = s.version_status("kueue.x-k8s.io/v1beta2", kind).unwrap();
        assert!(st2.served && st2.storage && !st2.deprecated, "{kind}: {st2:?}");
    }
    // MultiKueueConfig v1beta1 is served and not marked deprecated (per SOURCES.md and the file).
    let st = s.version_status("kueue.x-k8s.io/v1beta1", "MultiKueueConfig").unwrap();
    assert!(st.served && !st.deprecated, "{st:?}");

    let lq = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": "team-a", "namespace": "team-a"},
        "spec": {"clusterQueue": "gpu-cq"}
    });
    let report = s.check(&lq);
    assert!(report.is_ok(), "{:#?}", report.errors);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.starts_with(".apiVersion: ") && w.contains("kueue.x-k8s.io/v1beta1 LocalQueue is deprecated")),
        "{:#?}",
        report.warnings
    );
}

#[test]
fn unserved_version_is_an_error() {
    // None of the shipped CRDs has an unserved version, so make one.
    let dir = std::env::temp_dir().join(format!("kube-schema-selftest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/specs/crds/kueue/kueue.x-k8s.io_clusterqueues.yaml");
    let text = std::fs::read_to_string(src).unwrap();
    let patched = text.replacen("    served: true\n    storage: false", "    served: false\n    storage: false", 1);
    assert_ne!(text, patched, "the v1beta1 served flag was not found");
    std::fs::write(dir.join("cq.yaml"), patched).unwrap();
    let s = Schemas::load(&dir).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let mut cq = cluster_queue();
    cq["apiVersion"] = json!("kueue.x-k8s.io/v1beta1");
    let errors = s.validate(&cq).unwrap_err();
    assert!(
        errors.iter().any(|e| e == ".apiVersion: kueue.x-k8s.io/v1beta1 ClusterQueue is not served"),
        "{errors:#?}"
    );
}

#[test]
fn unknown_kinds_and_versions() {
    let mut cq = cluster_queue();
    cq["kind"] = json!("ClusterQueu");
    assert_error(&cq, &[".kind: ", "unknown kind \"ClusterQueu\"", "LocalQueue", "did you mean \"ClusterQueue\""]);
    let mut cq = cluster_queue();
    cq["apiVersion"] = json!("kueue.x-k8s.io/v1alpha1");
    assert_error(&cq, &[".apiVersion: ", "v1beta1, v1beta2"]);
    let mut cq = cluster_queue();
    remove(&mut cq, "", "kind");
    assert_error(&cq, &[".kind: Required value"]);
    let mut cq = cluster_queue();
    cq["specc"] = json!({});
    assert_error(&cq, &[".specc: ", "unknown field \"specc\"", "did you mean \"spec\""]);
}

// ---------------------------------------------------------------------------------------------
// Karmada
// ---------------------------------------------------------------------------------------------

fn propagation_policy() -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "training", "namespace": "research"},
        "spec": {
            "resourceSelectors": [
                {"apiVersion": "batch/v1", "kind": "Job", "labelSelector": {"matchLabels": {"fabric/propagate": "true"}}}
            ],
            "placement": {
                "clusterAffinity": {"clusterNames": ["site-a", "site-b"]},
                "clusterTolerations": [
                    {"key": "cluster.karmada.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                ],
                "replicaScheduling": {
                    "replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"staticWeightList": [
                        {"targetCluster": {"clusterNames": ["site-a"]}, "weight": 2},
                        {"targetCluster": {"clusterNames": ["site-b"]}, "weight": 1}
                    ]}
                }
            }
        }
    })
}

#[test]
fn valid_propagation_policy_passes() {
    assert_valid(&propagation_policy());
}

#[test]
fn propagation_policy_errors() {
    let mut pp = propagation_policy();
    set(&mut pp, "/spec/placement/clusterTolerations/0/tolerationSeconds", json!("300"));
    assert_error(
        &pp,
        &[".spec.placement.clusterTolerations[0].tolerationSeconds: ", "must be of type integer", "\"string\""],
    );

    let mut pp = propagation_policy();
    set(&mut pp, "/spec/placement/replicaScheduling/weightPreference/staticWeightList/1/weight", json!(0));
    assert_error(&pp, &["staticWeightList[1].weight: ", "greater than or equal to 1"]);

    let mut pp = propagation_policy();
    set(&mut pp, "/spec/placement/replicaScheduling/replicaSchedulingType", json!("Divide"));
    assert_error(&pp, &["replicaSchedulingType: Unsupported value: \"Divide\"", "\"Divided\""]);

    let mut pp = propagation_policy();
    remove(&mut pp, "/metadata", "namespace");
    assert_error(&pp, &[".metadata.namespace: Required value", "namespaced"]);

    let mut pp = propagation_policy();
    remove(&mut pp, "/spec", "resourceSelectors");
    assert_error(&pp, &[".spec.resourceSelectors: Required value"]);
}

fn override_policy() -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "OverridePolicy",
        "metadata": {"name": "site-b-image", "namespace": "research"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "trainer"}],
            "overrideRules": [{
                "targetCluster": {"clusterNames": ["site-b"]},
                "overriders": {
                    "plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 2}],
                    "imageOverrider": [{"component": "Registry", "operator": "replace", "value": "registry.site-b"}]
                }
            }]
        }
    })
}

#[test]
fn override_policy_plaintext() {
    let op = override_policy();
    assert_valid(&op);
    let mut bad = op.clone();
    set(&mut bad, "/spec/overrideRules/0/overriders/plaintext/0/operator", json!("Replace"));
    assert_error(
        &bad,
        &[".spec.overrideRules[0].overriders.plaintext[0].operator: Unsupported value: \"Replace\"", "\"replace\""],
    );
    // `value` preserves unknown fields: any JSON is allowed there.
    let mut any = op;
    set(&mut any, "/spec/overrideRules/0/overriders/plaintext/0/value", json!({"nested": [1, {"x": null}]}));
    assert_valid(&any);
}

fn karmada_cluster() -> Value {
    json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "site-a", "labels": {"fabric/site": "a"}},
        "spec": {
            "apiEndpoint": "https://10.0.0.10:6443",
            "secretRef": {"namespace": "karmada-cluster", "name": "site-a"},
            "syncMode": "Push",
            "region": "eu-west",
            "taints": [{"key": "maintenance", "effect": "NoSchedule"}],
            "resourceModels": [{"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": 1}]}]
        }
    })
}

#[test]
fn karmada_cluster_from_swagger() {
    let c = karmada_cluster();
    assert_valid(&c);

    let mut bad = c.clone();
    set(&mut bad, "/spec/syncMode", json!("Pushh"));
    assert_error(&bad, &[".spec.syncMode: Unsupported value: \"Pushh\"", "\"Push\"", "karmada"]);
    // The swagger itself has no enum for syncMode: only the server's Go validation rejects it.
    assert!(schemas().validate_schema_only(&bad).is_ok());

    let mut bad = c.clone();
    bad["spec"]["secretRef"]["nmae"] = json!("x");
    assert_error(&bad, &[".spec.secretRef.nmae: ", "unknown field \"spec.secretRef.nmae\"", "did you mean \"name\""]);

    let mut bad = c.clone();
    set(&mut bad, "/spec/taints/0/effect", json!("NoExecut"));
    assert_error(&bad, &[".spec.taints[0].effect: Unsupported value: \"NoExecut\""]);

    let mut bad = c.clone();
    set(&mut bad, "/spec/resourceModels/0/ranges/0/max", json!("many"));
    assert_error(&bad, &[".spec.resourceModels[0].ranges[0].max: ", "quantities must match"]);

    let mut bad = c.clone();
    bad["metadata"]["namespace"] = json!("karmada-system");
    assert_error(&bad, &[".metadata.namespace: ", "cluster-scoped"]);

    let mut bad = c;
    bad["spec"]["apiEndpoint"] = json!("10.0.0.10:6443");
    assert_error(&bad, &[".spec.apiEndpoint: ", "host must be provided"]);
}

// ---------------------------------------------------------------------------------------------
// k3s helm-controller, Cilium
// ---------------------------------------------------------------------------------------------

fn helm_chart() -> Value {
    json!({
        "apiVersion": "helm.cattle.io/v1",
        "kind": "HelmChart",
        "metadata": {"name": "kueue", "namespace": "kube-system"},
        "spec": {
            "chart": "oci://registry.k8s.io/kueue/charts/kueue",
            "version": "0.19.2",
            "targetNamespace": "kueue-system",
            "createNamespace": true,
            "valuesContent": "controllerManager:\n  replicas: 1\n"
        }
    })
}

#[test]
fn helm_chart_scope_and_fields() {
    let hc = helm_chart();
    assert_valid(&hc);

    let mut bad = hc.clone();
    remove(&mut bad, "/metadata", "namespace");
    assert_error(&bad, &[".metadata.namespace: Required value", "HelmChart is namespaced"]);

    let mut bad = hc.clone();
    bad["spec"]["valueContent"] = json!("a: 1");
    assert_error(&bad, &["unknown field \"spec.valueContent\"", "did you mean \"valuesContent\""]);

    let config = json!({
        "apiVersion": "helm.cattle.io/v1",
        "kind": "HelmChartConfig",
        "metadata": {"name": "traefik", "namespace": "kube-system"},
        "spec": {"valuesContent": "ports: {}\n"}
    });
    assert_valid(&config);
}

#[test]
fn cilium_network_policy() {
    let cnp = json!({
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "allow-dns", "namespace": "research"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "trainer"}},
            "egress": [{
                "toEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "kube-system", "k8s:k8s-app": "kube-dns"}}],
                "toPorts": [{"ports": [{"port": "53", "protocol": "UDP"}]}]
            }, {
                "toCIDR": ["10.20.0.0/16"]
            }]
        }
    });
    assert_valid(&cnp);

    let mut bad = cnp.clone();
    set(&mut bad, "/spec/egress/1/toCIDR/0", json!("10.20.0.0/99"));
    assert_error(&bad, &[".spec.egress[1].toCIDR[0]: "]);

    let mut bad = cnp.clone();
    set(&mut bad, "/spec/egress/0/toPorts/0/ports/0/protocol", json!("udp"));
    assert_error(&bad, &[".spec.egress[0].toPorts[0].ports[0].protocol: Unsupported value: \"udp\""]);

    // Removed on main (SOURCES.md): fromRequires/toRequires.
    let mut bad = cnp;
    bad["spec"]["egress"][0]["toRequires"] = json!([{"matchLabels": {"a": "b"}}]);
    assert_error(&bad, &["unknown field \"spec.egress[0].toRequires\""]);
}

#[test]
fn removed_cilium_kind_warns() {
    let cew = json!({
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumExternalWorkload",
        "metadata": {"name": "vm-1"},
        "spec": {"ipv4-alloc-cidr": "10.192.1.0/30"}
    });
    let report = schemas().check(&cew);
    assert!(report.is_ok(), "{:#?}", report.errors);
    assert!(report.warnings.iter().any(|w| w.contains("removed upstream")), "{:#?}", report.warnings);
}

#[test]
fn yaml_documents_round_trip() {
    let docs = Schemas::yaml_documents(
        "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor\n---\n",
    )
    .unwrap();
    assert_eq!(docs.len(), 1);
    assert_valid(&docs[0]);
}
