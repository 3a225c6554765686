//! Data services run in Franca and are reached from SP as Cilium global services (issue 12,
//! item 1): `placement[].global` makes Karmada put the Services in every member with the
//! global-service annotations, and `verify` shows SP's Service with Franca's backends, read
//! from the EndpointSlices Cluster Mesh synchronises (`fabric_testkit::cilium_mesh`).

use std::time::Duration;

use fabric::apply::StepWork;
use fabric::catalog::{Catalog, StepGraph};
use fabric::topology::Topology;
use fabric_testkit::{cilium_mesh, karmada, kube_api, run};
use serde_json::{Value, json};

const EXAMPLE: &str = include_str!("../topology.example.yaml");

fn load(text: &str) -> Topology {
    fabric::topology::load_str("t.yaml", text.to_string()).unwrap().topology
}

fn objects(t: &Topology, key: &str) -> Vec<Value> {
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    StepWork::alone(&g, t, key).unwrap().resources.iter().filter_map(|r| r.kube_object().cloned()).collect()
}

fn named<'a>(objs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objs.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

/// `global` changes what fabric writes: with it, the data services' Services go to every
/// member, annotated; without it, they stay with their workloads.
#[test]
fn global_places_the_services_everywhere_with_the_annotations() {
    let t = load(EXAMPLE);
    let c5 = objects(&t, "C.5");
    let pp = named(&c5, "PropagationPolicy", "data-services-services").expect("the Services' own policy");
    assert_eq!(pp["spec"]["placement"]["clusterAffinity"]["clusterNames"], json!(["franca", "sp"]));
    let main = named(&c5, "PropagationPolicy", "data-services").unwrap();
    assert!(main["spec"]["resourceSelectors"].as_array().unwrap().iter().all(|s| s["kind"] == "StatefulSet"));
    let op = named(&c5, "OverridePolicy", "data-services-global").expect("the annotations' override");
    let annotations = &op["spec"]["overrideRules"][0]["overriders"]["annotationsOverrider"][0]["value"];
    assert_eq!(annotations["service.cilium.io/global"], "true");
    assert_eq!(annotations["service.cilium.io/affinity"], "local");
    let b2 = objects(&t, "B.2");
    let cfg = b2.iter().find(|o| o["kind"] == "HelmChartConfig").unwrap();
    assert!(cfg["spec"]["valuesContent"].as_str().unwrap().contains("enableEndpointSliceSynchronization: true"));

    let local = load(&EXAMPLE.replace("    prefer: franca\n    global: true\n", "    prefer: franca\n"));
    let c5 = objects(&local, "C.5");
    assert!(named(&c5, "PropagationPolicy", "data-services-services").is_none());
    assert!(named(&c5, "OverridePolicy", "data-services-global").is_none());
}

/// On the test API servers: Karmada has put qdrant's Deployment in Franca and its Service, with
/// C.5's override, in both clusters. SP's Service is global; once Cluster Mesh synchronised
/// Franca's backends into SP, `verify C.5` shows them; with synchronisation off it says so.
#[test]
fn verify_shows_sp_reaching_francas_backends() {
    let f = kube_api::ExampleFabric::start("global");
    let (dir, franca, sp) = (&f.dir, &f.franca, &f.sp);
    // qdrant as a Deployment here: the test API server's EndpointSlice controller makes endpoints
    // from Deployments' ready replicas and runs no StatefulSet controller. What is checked is
    // reach across the mesh, whatever the workload's kind (the kind's policy is checked above).
    let text = f.text.replace("port: 6333, workload: statefulset }", "port: 6333 }");
    assert_ne!(text, f.text);
    std::fs::write(dir.join("topology.yaml"), &text).unwrap();
    let t = load(&text);
    let c5 = objects(&t, "C.5");
    let rule = &named(&c5, "OverridePolicy", "data-services-global").unwrap()["spec"]["overrideRules"][0];
    let repo_service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "qdrant", "namespace": "data"},
        "spec": {"selector": {"app": "qdrant"}, "ports": [{"port": 6333}]}});
    let propagated = karmada::apply_overriders(&repo_service, &rule["overriders"]).unwrap();
    for s in [franca, sp] {
        s.put_raw_as(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "data"}}), "karmada");
        s.put_raw_as(propagated.clone(), "karmada-execution-controller");
    }
    franca.put_raw_as(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "qdrant", "namespace": "data"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "qdrant"}},
                "template": {"metadata": {"labels": {"app": "qdrant"}}, "spec": {"containers": [{"name": "q", "image": "q"}]}}}}),
        "karmada-execution-controller",
    );
    std::thread::sleep(Duration::from_millis(400));
    let verify = || {
        let o = run::fabric_in(dir, &dir.join("topology.yaml"), &dir.join("ssh_config"), &["verify", "--step", "C.5"]);
        run::out(&o)
    };
    // Cluster Mesh without EndpointSlice synchronisation: nothing in SP's API shows Franca's.
    let mesh = |on: bool| {
        let b2 = objects(&t, "B.2");
        let mut cfg =
            b2.iter().find(|o| o["kind"] == "HelmChartConfig" && o["metadata"]["name"] == "cilium").unwrap().clone();
        let values = cfg["spec"]["valuesContent"].as_str().unwrap().to_string();
        cfg["spec"]["valuesContent"] =
            json!(values.replace(
                "enableEndpointSliceSynchronization: true",
                &format!("enableEndpointSliceSynchronization: {on}")
            ));
        sp.put_raw_as(cfg, "fabric");
        cilium_mesh::sync(franca, "franca", sp)
    };
    assert_eq!(mesh(false), 0);
    let text = verify();
    assert!(
        text.contains("FAIL  C.5")
            && text.contains("cluster.sp: Service data/qdrant is global but has no backend from another cluster"),
        "{text}"
    );
    assert!(text.contains("cluster.franca: Service data/qdrant global, its backends run here"), "{text}");
    assert!(mesh(true) > 0);
    let text = verify();
    assert!(
        text.contains("PASS  C.5") && text.contains("cluster.sp: Service data/qdrant global, backends: 1 from franca"),
        "{text}"
    );
}

/// Issue #22 item 7: the data services are StatefulSets, and C.5's policy propagates what they
/// are made of (`propagateDeps`) to Franca only. Karmada's dependency rule (the double,
/// `fabric_testkit::karmada::dependencies`, after karmada-io/karmada pkg/util/helper/pod.go)
/// carries the ConfigMaps, Secrets and ServiceAccount a StatefulSet's pods name, and never the
/// PVCs of its `volumeClaimTemplates`: Franca's StatefulSet controller makes them, so the data
/// stays in Franca; SP gets only the Service (global).
#[test]
fn data_services_are_statefulsets_whose_parts_follow_them_to_franca_only() {
    let t = load(EXAMPLE);
    let c5 = objects(&t, "C.5");
    let main = named(&c5, "PropagationPolicy", "data-services").unwrap();
    assert_eq!(main["spec"]["propagateDeps"], true, "{main:#}");
    assert_eq!(main["spec"]["placement"]["clusterAffinity"]["clusterNames"], json!(["franca"]), "{main:#}");
    let selected: Vec<(&str, &str)> = main["spec"]["resourceSelectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["kind"].as_str().unwrap(), s["name"].as_str().unwrap()))
        .collect();
    assert_eq!(selected, [("StatefulSet", "qdrant"), ("StatefulSet", "neo4j"), ("StatefulSet", "postgresql")]);
    let services = named(&c5, "PropagationPolicy", "data-services-services").unwrap();
    assert!(
        services["spec"].get("propagateDeps").is_none(),
        "the Services' policy carries only Services: {services:#}"
    );
    assert!(services["spec"]["resourceSelectors"].as_array().unwrap().iter().all(|s| s["kind"] == "Service"));

    // PostgreSQL as the repository usually has it: what Karmada carries with it to Franca.
    let pg = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "postgresql", "namespace": "data"},
        "spec": {"serviceName": "postgresql", "template": {"spec": {
            "serviceAccountName": "postgresql",
            "containers": [{"name": "pg", "envFrom": [{"secretRef": {"name": "postgresql-auth"}}],
                            "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"}]}],
            "volumes": [{"name": "conf", "configMap": {"name": "postgresql-conf"}}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Gi"}}}}]}});
    let deps = karmada::dependencies(&pg);
    assert_eq!(
        deps,
        vec![
            ("ConfigMap", "postgresql-conf".to_string()),
            ("Secret", "postgresql-auth".to_string()),
            ("ServiceAccount", "postgresql".to_string())
        ]
    );
    assert!(!deps.iter().any(|(k, _)| *k == "PersistentVolumeClaim"), "the data's PVCs are Franca's own");

    // Parts the pod template does not name are listed, and selected beside the workload.
    let listed = load(&EXAMPLE.replace(
        "port: 5432, workload: statefulset }",
        "port: 5432, workload: statefulset, configmaps: [postgresql-initdb], secrets: [postgresql-backup] }",
    ));
    let main = named(&objects(&listed, "C.5"), "PropagationPolicy", "data-services").unwrap().clone();
    let sel = main["spec"]["resourceSelectors"].as_array().unwrap();
    assert!(sel.contains(&json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "postgresql-initdb"})), "{main:#}");
    assert!(sel.contains(&json!({"apiVersion": "v1", "kind": "Secret", "name": "postgresql-backup"})), "{main:#}");
}
