//! Issue 35, item 1 (first milestone): the real Karmada, out of cluster on loopback, federating the
//! lab's two real sites (`fabric_testkit::realkube`), with fabric's C.2, C.5 and C.6 applied to it
//! through fabric's apply engine.
//!
//! What runs, and what stands in for what:
//! - karmada-apiserver is the kube-apiserver of Kubernetes v1.33.5 (the sites' own build) with
//!   Karmada's flags (karmada-io/karmada v1.16.0 `artifacts/deploy/karmada-apiserver.yaml`) on a
//!   kine datastore of its own, where the chart runs `registry.k8s.io/kube-apiserver` on its etcd
//!   in Franca's cluster; a kube-controller-manager with Karmada's controller list runs beside it.
//! - karmada-aggregated-apiserver, karmada-webhook, karmada-controller-manager and
//!   karmada-scheduler are Karmada v1.16.0's own programs (`tests/realkube/karmada`; the example
//!   pins 1.15.0, which the Go module proxy does not serve), run as processes on loopback where
//!   the chart runs them as pods. The harness (`tests/realkube/kube/karmada.go`) does what the
//!   chart's install does in karmada-apiserver: Karmada's CRDs (the v1.16.0 module's
//!   `charts/karmada/_crds`), the aggregated API's APIService (its Service an ExternalName to
//!   localhost) and the webhook configurations (by url on 127.0.0.1, a test CA).
//! - The controller manager gets the flags the chart renders from fabric's values
//!   (`desired::karmada::karmada_values`: the feature gates and `extraCommandArgs`).
//! - The members are the lab's real sites (API servers on 127.0.10.10 and 127.0.12.10 with kwok
//!   nodes), joined in push mode exactly as fabric's C.2 writes it: fabric's apply engine makes
//!   Karmada's identity and token in each member and copies the token into Karmada's `Cluster`
//!   Secrets; the real cluster status controller then reports each Cluster Ready.
//! - The services' workloads are created in karmada-apiserver by the test, as ArgoCD's sync of
//!   the repository's `services/` would (C.3, not here yet); the namespaces as its
//!   `CreateNamespace` would. fabric's C.5 PropagationPolicies place them, its C.6
//!   OverridePolicies change them per member, and the real scheduler and controllers write them
//!   into the members.

use std::collections::BTreeMap;

use fabric_testkit::realkube::{self, Karmada, KarmadaOptions, Site};
use serde_json::{Value, json};

#[path = "support/apply_step.rs"]
mod apply_step;
// Only the lab's sites are used here, not its apply of the other steps.
#[allow(dead_code)]
#[path = "support/realkube_lab.rs"]
mod realkube_lab;

use realkube_lab::Lab;

/// The flags Karmada's chart renders for the controller manager from these values
/// (karmada-io/karmada `charts/karmada/templates/_helpers.tpl`, `karmada.controllerManager.featureGates`
/// and `karmada.controllerManager.extraCommandArgs`; Helm ranges over a map in key order).
fn chart_controller_manager_flags(cm: &Value) -> Vec<String> {
    let mut flags = Vec::new();
    let gates: BTreeMap<String, Value> = serde_json::from_value(cm["featureGates"].clone()).unwrap_or_default();
    if !gates.is_empty() {
        let list: Vec<String> = gates.iter().map(|(k, v)| format!("{k}={v}")).collect();
        flags.push(format!("--feature-gates={}", list.join(",")));
    }
    let extra: BTreeMap<String, Value> = serde_json::from_value(cm["extraCommandArgs"].clone()).unwrap_or_default();
    for (k, v) in extra {
        let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
        flags.push(format!("--{k}={v}"));
    }
    flags
}

/// A Deployment or StatefulSet of `replicas` of a service, as the repository's `services/`
/// would hold it (kwok runs its pods; nothing is pulled).
fn workload(kind: &str, ns: &str, name: &str, replicas: u32) -> Value {
    let mut spec = json!({
        "replicas": replicas,
        "selector": { "matchLabels": { "app": name } },
        "template": {
            "metadata": { "labels": { "app": name } },
            "spec": { "containers": [{ "name": name, "image": format!("registry.invalid/{name}:1") }] },
        },
    });
    if kind == "StatefulSet" {
        spec["serviceName"] = name.into();
    }
    json!({ "apiVersion": "apps/v1", "kind": kind, "metadata": { "name": name, "namespace": ns }, "spec": spec })
}

fn service(ns: &str, name: &str, port: u16) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service", "metadata": { "name": name, "namespace": ns },
        "spec": { "selector": { "app": name }, "ports": [{ "port": port }] },
    })
}

/// `.spec.replicas` of `kind/name` in `site`, None when it is not there.
fn replicas(site: &Site, kind: &str, ns: &str, name: &str) -> Option<u64> {
    site.get(kind, name, Some(ns)).map(|o| o["spec"]["replicas"].as_u64().unwrap_or(1))
}

#[tokio::test(flavor = "multi_thread")]
async fn real_karmada_joins_the_sites_as_c2_writes_and_propagates_by_c5_and_c6() {
    let lab = Lab::start_with("karmada", false);
    let t = fabric::topology::load_str("lab.yaml", lab.text.clone()).unwrap().topology;
    let values = fabric::desired::karmada::karmada_values(&t);
    let cm_flags = chart_controller_manager_flags(&values["controllerManager"]);
    assert!(cm_flags.iter().any(|f| f.contains("PropagateDeps=true")), "{cm_flags:?}");
    // karmada-apiserver at Franca's address, where the chart's NodePort would be.
    let address = "127.0.10.10";
    let started = std::time::Instant::now();
    let karmada = Karmada::start(
        &lab.dir.join("karmada"),
        &KarmadaOptions {
            address: Some(address.into()),
            port: Some(realkube::free_port(address)),
            controller_manager_args: cm_flags,
            ..Default::default()
        },
    );
    eprintln!("karmada: control plane ready in {:.1} s", started.elapsed().as_secs_f64());

    // C.2 through fabric's apply engine: identities and tokens in the members, the Clusters
    // and their Secrets in Karmada.
    let joined = std::time::Instant::now();
    apply_step::apply_step(&t, &lab.dir, "C.2", "20261206T000001Z-1")
        .await
        .unwrap_or_else(|e| panic!("C.2 on the real Karmada: {e}\n{}", karmada.log("karmada-controller-manager")));
    karmada.wait_until(180, "both members' Clusters Ready (karmada-controller-manager's cluster status)", |k| {
        let out = k.kubectl_ok(&[
            "get",
            "clusters.cluster.karmada.io",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status} {end}",
        ]);
        let mut ready: Vec<&str> = out.split_whitespace().filter(|c| c.ends_with("=True")).collect();
        ready.sort();
        ready == ["franca=True", "sp=True"]
    });
    eprintln!("karmada: C.2 applied and both members Ready in {:.1} s", joined.elapsed().as_secs_f64());
    // The status is the real controller's, read from the members: their kwok nodes are counted.
    let franca = karmada.get("clusters.cluster.karmada.io", "franca", None).expect("Cluster franca");
    assert_eq!(franca["spec"]["syncMode"], "Push", "{franca}");
    let nodes = t.sites.iter().find(|s| s.name == "franca").unwrap().cluster.nodes.len() as u64;
    assert_eq!(franca["status"]["nodeSummary"]["totalNum"], nodes, "{}", franca["status"]);

    // The services' namespaces and workloads, as ArgoCD's sync would make them in Karmada.
    for ns in ["ai", "data", "web"] {
        karmada
            .apply(&[json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})], "argocd-controller");
    }
    apply_step::apply_step(&t, &lab.dir, "C.5", "20261206T000002Z-1")
        .await
        .unwrap_or_else(|e| panic!("C.5 on the real Karmada: {e}\n{}", karmada.log("karmada-webhook")));
    apply_step::apply_step(&t, &lab.dir, "C.6", "20261206T000003Z-1")
        .await
        .unwrap_or_else(|e| panic!("C.6 on the real Karmada: {e}\n{}", karmada.log("karmada-webhook")));
    // Every service of the topology, as the repository's `services/` would hold it.
    let objects: Vec<Value> = t
        .services
        .iter()
        .flat_map(|svc| {
            let kind = svc.workload.kind();
            [workload(kind, &svc.namespace, &svc.name, svc.replicas), service(&svc.namespace, &svc.name, svc.port.0)]
        })
        .collect();
    karmada.apply(&objects, "argocd-controller");
    let propagated = std::time::Instant::now();
    // web-services: replicas at both sites (Duplicated).
    for site in [&lab.franca, &lab.sp] {
        site.wait_until(180, "open-webui propagated by Karmada", |s| {
            replicas(s, "deployment", "web", "open-webui") == Some(1)
        });
        // (The Service is a Work of its own: it may arrive after the Deployment.)
        site.wait_until(60, "Service web/open-webui propagated by Karmada", |s| {
            s.get("service", "open-webui", Some("web")).is_some()
        });
    }
    // gpu-services: 2 replicas divided by the static weights 1:1.
    for site in [&lab.franca, &lab.sp] {
        site.wait_until(180, "vllm divided by weight", |s| replicas(s, "deployment", "ai", "vllm") == Some(1));
    }
    // C.6: at each member, vllm's pod template carries that site's GPU model (the real
    // override manager applied fabric's OverridePolicies: a5500 at Franca, a5000 at SP).
    for site in [&lab.franca, &lab.sp] {
        let s = t.sites.iter().find(|s| s.name == site.name).unwrap();
        let model = fabric::desired::gpu_model(s).expect("a GPU site");
        let vllm = site.get("deployment", "vllm", Some("ai")).unwrap();
        let pod = &vllm["spec"]["template"];
        assert_eq!(
            pod["spec"]["nodeSelector"][fabric::desired::objects::GPU_MODEL_LABEL],
            model,
            "{}: {pod}",
            site.name
        );
        assert_eq!(pod["metadata"]["labels"]["fabric.io/site"], site.name.as_str(), "{}: {pod}", site.name);
    }
    // data-services: the StatefulSet in Franca only; its Service at both (global).
    lab.franca.wait_until(180, "qdrant in Franca", |s| replicas(s, "statefulset", "data", "qdrant") == Some(1));
    lab.sp.wait_until(60, "qdrant's Service at SP (global)", |s| s.get("service", "qdrant", Some("data")).is_some());
    assert_eq!(replicas(&lab.sp, "statefulset", "data", "qdrant"), None, "qdrant must stay in Franca");
    let svc = lab.sp.get("service", "qdrant", Some("data")).unwrap();
    assert_eq!(svc["metadata"]["annotations"]["service.cilium.io/global"], "true", "{svc}");
    eprintln!("karmada: workloads propagated in {:.1} s", propagated.elapsed().as_secs_f64());

    // fabric verify reads C.2's and C.6's checks from the real objects: the Clusters' Ready
    // condition in Karmada, each member's GPU model on the GPU services there.
    let out = realkube_lab::fabric(&lab, &["verify", "--step", "C.2", "--step", "C.6"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        stdout.contains("PASS") && !stdout.contains("FAIL"),
        "verify C.2, C.6:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The bindings Karmada's scheduler wrote say the same.
    let rb = karmada.get("resourcebindings.work.karmada.io", "vllm-deployment", Some("ai")).expect("vllm's binding");
    let mut placed: Vec<(String, u64)> = rb["spec"]["clusters"]
        .as_array()
        .expect("scheduled clusters")
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["replicas"].as_u64().unwrap_or(0)))
        .collect();
    placed.sort();
    assert_eq!(placed, [("franca".to_string(), 1), ("sp".to_string(), 1)], "{}", rb["spec"]);
}
