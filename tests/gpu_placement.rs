//! GPU services land on GPU nodes (issue 12, item 3): the node labels fabric sets (D.1), the
//! Karmada overriders that select on them (C.6) and the scheduler's view agree. Karmada's
//! overriders are applied as Karmada applies them (`fabric_testkit::karmada`: RFC 6902 JSON
//! patch), and the pods are scheduled by the test API server (a nodeSelector that matches no
//! node leaves the Deployment unavailable, see `kube_api.md`).

use std::time::Duration;

use fabric::apply::journal::Journal;
use fabric::apply::{self, ApplyError, Options, StepWork};
use fabric::catalog::{Catalog, StepGraph};
use fabric::live::observe::{self, Targets};
use fabric::topology::Topology;
use fabric::transport::ssh_config::SshConfig;
use fabric_testkit::{karmada, kube_api};
use serde_json::{Value, json};

#[path = "support/apply_step.rs"]
mod apply_step;
use apply_step::apply_step;

fn example() -> Topology {
    fabric::topology::load_str("example.yaml", include_str!("../topology.example.yaml").to_string()).unwrap().topology
}

/// Every object of step `key`'s instance.
fn objects(t: &Topology, key: &str) -> Vec<Value> {
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    StepWork::alone(&g, t, key).unwrap().resources.iter().filter_map(|r| r.kube_object().cloned()).collect()
}

/// A service's Deployment as the GitOps repository may have it: with no node selector and no
/// annotations, or with both.
fn deployments(name: &str) -> [Value; 2] {
    let bare = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "ai"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": name, "image": name}]}}}});
    let mut full = bare.clone();
    full["metadata"]["annotations"] = json!({"team": "ai"});
    full["spec"]["template"]["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
    [bare, full]
}

/// Each member's OverridePolicy applies to the GPU services' Deployments whatever shape they
/// come in, and what it selects is set on a GPU node of that member by D.1.
#[test]
fn overriders_apply_and_select_labels_the_nodes_carry() {
    let t = example();
    let policies: Vec<Value> = objects(&t, "C.6").into_iter().filter(|o| o["kind"] == "OverridePolicy").collect();
    assert!(!policies.is_empty());
    for p in &policies {
        let rule = &p["spec"]["overrideRules"][0];
        let cluster = rule["targetCluster"]["clusterNames"][0].as_str().unwrap();
        let site = t.sites.iter().find(|s| s.cluster.name == cluster).unwrap();
        let nodes: Vec<Value> =
            objects(&t, &format!("D.1@{}", site.name)).into_iter().filter(|o| o["kind"] == "Node").collect();
        assert!(!nodes.is_empty(), "D.1 labels {cluster}'s GPU nodes");
        for sel in p["spec"]["resourceSelectors"].as_array().unwrap() {
            for d in deployments(sel["name"].as_str().unwrap()) {
                let out = karmada::apply_overriders(&d, &rule["overriders"])
                    .unwrap_or_else(|e| panic!("Karmada refuses {} at {cluster}: {e}", p["metadata"]["name"]));
                let selector = out["spec"]["template"]["spec"]["nodeSelector"].as_object().unwrap().clone();
                let placed = nodes.iter().any(|n| selector.iter().all(|(k, v)| &n["metadata"]["labels"][k] == v));
                assert!(placed, "{cluster}: no GPU node has {selector:?}: {nodes:?}");
            }
        }
    }
}

/// On sp's API: a GPU service selecting the site's model stays unavailable while the nodes have
/// no labels; D.1 labels the registered GPU nodes (server-side apply, fabric owns only those
/// labels) and the service becomes available. A GPU node that has not joined is refused by the
/// plan, never created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_labels_the_gpu_nodes_and_the_services_schedule() {
    let dir = std::env::temp_dir().join(format!("fabric-gpu-placement-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (_franca, sp, _karmada) = kube_api::fabric_apis_without_nodes(&dir);
    sp.simulate_controllers(Duration::from_millis(50));
    let text = kube_api::example_topology(&dir);
    let t = fabric::topology::load_str("t.yaml", text).unwrap().topology;
    sp.register_nodes(&["sp-cp1", "pve-ippri-31", "pve-ippri-33"]);
    let [mut vllm, _] = deployments("vllm");
    vllm["spec"]["template"]["spec"]["nodeSelector"] = json!({"gpu.model": "a5000"});
    sp.put_raw_as(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ai"}}), "argocd");
    sp.put_raw_as(vllm, "karmada-execution-controller");
    let available = || {
        sp.object("apps/v1", "Deployment", Some("ai"), "vllm").unwrap()["status"]["availableReplicas"]
            .as_i64()
            .unwrap_or(0)
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(available(), 0, "no node has gpu.model=a5000 yet: the pod stays Pending");

    let g = StepGraph::build(&Catalog::embedded().unwrap(), &t).unwrap();
    let step = StepWork::alone(&g, &t, "D.1@sp").unwrap();
    let targets = Targets::from_topology(&t, &SshConfig::default()).unwrap();
    let live = observe::observe(&step.resources, &observe::key_targets(&step.resources), &targets).await;
    // pve-ippri-34 has not joined: its labels are refused, not a Node created.
    let refused: Vec<String> = live.refusals.values().map(|e| e.to_string()).collect();
    assert!(refused.iter().any(|r| r.contains("node pve-ippri-34 is not in the cluster yet")), "{refused:?}");
    let opts = Options {
        run: "20261201T101500Z-1".into(),
        state_dir: dir.clone(),
        confirm_timeout: Duration::from_secs(30),
        force_conflicts: false,
        wait_timeout: Duration::from_secs(60),
        lease: Default::default(),
    };
    let mut j = Journal::create(&dir, &opts.run).unwrap();
    let err = apply::run(&t, std::slice::from_ref(&step), &targets, live, &opts, &mut j, &|_| {}).await.unwrap_err();
    assert!(matches!(err, ApplyError::Reverted { .. }), "{err}");
    assert!(err.to_string().contains("node pve-ippri-34 is not in the cluster yet"), "{err}");
    assert!(sp.object("v1", "Node", None, "pve-ippri-34").is_none(), "no Node is ever created");
    let n1 = sp.object("v1", "Node", None, "pve-ippri-31").unwrap();
    assert!(
        n1["metadata"]["labels"].get("gpu.model").is_none(),
        "put back: {n1:#}\n{}",
        std::fs::read_to_string(&j.path).unwrap()
    );

    sp.register_nodes(&["pve-ippri-34"]);
    let live = observe::observe(&step.resources, &observe::key_targets(&step.resources), &targets).await;
    let opts = Options { run: "20261201T101501Z-1".into(), ..opts };
    let mut j = Journal::create(&dir, &opts.run).unwrap();
    apply::run(&t, std::slice::from_ref(&step), &targets, live, &opts, &mut j, &|_| {}).await.expect("D.1 applies");
    let node = sp.object("v1", "Node", None, "pve-ippri-31").unwrap();
    let labels = &node["metadata"]["labels"];
    assert_eq!(
        (labels["gpu.model"].as_str(), labels["gpu.memory-gib"].as_str(), labels["gpu.count"].as_str()),
        (Some("a5000"), Some("24"), Some("1"))
    );
    assert_eq!(labels["kubernetes.io/hostname"], "pve-ippri-31", "the kubelet's labels stay");
    assert!(sp.object("v1", "Node", None, "sp-cp1").unwrap()["metadata"]["labels"].get("gpu.model").is_none());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(available(), 1, "vllm schedules on a labelled GPU node");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The example with whisper at half a GPU too (so vLLM and whisper share one), and without
/// docling and bge-m3 (which would no longer fit the interactive queue's one GPU).
fn two_halves(dir: &std::path::Path) -> Topology {
    let text = kube_api::example_topology(dir)
        .replace(
            "gpu_memory_mib: 4096, queue: gpu-interactive, replicas: 2 }\n  - { name: docling",
            "gpu_fraction: 0.5, queue: gpu-interactive, replicas: 2 }\n  - { name: docling",
        )
        .lines()
        .filter(|l| !l.contains("name: docling") && !l.contains("name: bge-m3"))
        .collect::<Vec<_>>()
        .join("\n");
    fabric::topology::load_str("t.yaml", text).unwrap().topology
}

/// A Deployment of the GitOps repository, with one replica at the member, after C.6's overriders
/// for `site` (as Karmada's execution controller writes it there).
fn at_member(t: &Topology, service: &str, site: &str) -> Value {
    let policy = objects(t, "C.6")
        .into_iter()
        .find(|p| p["metadata"]["name"] == format!("{service}-{site}"))
        .unwrap_or_else(|| panic!("C.6 has a policy {service}-{site}"));
    let [mut d, _] = deployments(service);
    d["spec"]["replicas"] = json!(1);
    karmada::apply_overriders(&d, &policy["spec"]["overrideRules"][0]["overriders"]).unwrap()
}

/// KAI's placement in the test double: at each site, the two half-GPU services land on one
/// device of one GPU node; a third pod asking for 0.6 does not fit on that device and goes to
/// another GPU node; a pod with the same annotation but not KAI's is placed by the default rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_half_gpu_pods_share_one_gpu_at_each_site() {
    let dir = std::env::temp_dir().join(format!("fabric-gpu-sharing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, sp, _karmada) = kube_api::fabric_apis(&dir);
    let t = two_halves(&dir);
    for (api, site) in [(&franca, "franca"), (&sp, "sp")] {
        api.simulate_controllers(Duration::from_millis(20));
        // The device plugin's one GPU per node, D.1's labels and D.5's queues.
        for o in objects(&t, &format!("D.1@{site}")).into_iter().filter(|o| o["kind"] == "Node") {
            let name = o["metadata"]["name"].as_str().unwrap();
            api.set_allocatable_gpus(name, 1);
            let mut n = api.object("v1", "Node", None, name).unwrap();
            n["metadata"].as_object_mut().unwrap().remove("managedFields");
            for (k, v) in o["metadata"]["labels"].as_object().unwrap() {
                n["metadata"]["labels"][k] = v.clone();
            }
            api.put_raw_as(n, "fabric");
        }
        for q in objects(&t, &format!("D.5@{site}")).into_iter().filter(|o| o["kind"] == "Queue") {
            api.put_raw_as(q, "fabric");
        }
        api.put_raw_as(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ai"}}), "argocd");
        let mut third = at_member(&t, "whisper", site);
        third["metadata"]["name"] = json!("z-more");
        third["spec"]["template"]["metadata"]["annotations"]["gpu-fraction"] = json!("0.6");
        let mut not_kai = at_member(&t, "whisper", site);
        not_kai["metadata"]["name"] = json!("default-scheduled");
        not_kai["spec"]["template"]["spec"].as_object_mut().unwrap().remove("schedulerName");
        for d in [at_member(&t, "vllm", site), at_member(&t, "whisper", site), third, not_kai] {
            api.put_raw_as(d, "karmada-execution-controller");
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (api, site) in [(&franca, "franca"), (&sp, "sp")] {
        let placed = api.kai_placements();
        let at = |d: &str| placed.iter().find(|p| p.deployment == d).map(|p| (p.node.clone(), p.device));
        let (vllm, whisper, more) = (at("vllm"), at("whisper"), at("z-more"));
        assert!(vllm.is_some() && vllm == whisper, "{site}: the two halves share one GPU: {placed:?}");
        let shared = vllm.unwrap().0;
        let gpu_node = if site == "sp" { "pve-ippri-" } else { "franca-gpu" };
        assert!(shared.starts_with(gpu_node), "{site}: on a GPU node: {shared}");
        assert!(more.as_ref().is_some_and(|m| m.0 != shared), "{site}: 0.6 does not fit beside them: {placed:?}");
        assert!(at("default-scheduled").is_none(), "{site}: not KAI's pods are not placed by KAI: {placed:?}");
        for d in ["vllm", "whisper", "z-more", "default-scheduled"] {
            let s = api.object("apps/v1", "Deployment", Some("ai"), d).unwrap();
            assert_eq!(s["status"]["availableReplicas"], 1, "{site}: {d} runs: {s:#}");
        }
    }
    // With one GPU node left in the cluster, the 0.6 pod stays Pending: it fits no device.
    for n in ["pve-ippri-33", "pve-ippri-34"] {
        sp.set_allocatable_gpus(n, 0);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let d = sp.object("apps/v1", "Deployment", Some("ai"), "z-more").unwrap();
    assert!(d["status"]["availableReplicas"].is_null(), "Pending: {:#}", d["status"]);
    assert_eq!(d["status"]["unavailableReplicas"], 1);
    assert_eq!(sp.kai_placements().iter().filter(|p| p.node == "pve-ippri-31").count(), 2, "{:?}", sp.kai_placements());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `cluster.gpu_taint` at sp: D.1 taints sp's GPU nodes through the API (server-side apply,
/// field manager `fabric`), franca's stay as they are; sp's GPU flavor and the GPU services'
/// overriders there carry the toleration, and KAI places the tolerating pods on the tainted
/// nodes while a pod without the toleration finds no node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_taint_keeps_the_gpu_nodes_for_gpu_work() {
    let dir = std::env::temp_dir().join(format!("fabric-gpu-taint-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (_franca, sp, _karmada) = kube_api::fabric_apis(&dir);
    sp.simulate_controllers(Duration::from_millis(20));
    let text = kube_api::example_topology(&dir);
    let at = text.find("      api_address: 192.168.2.10\n").expect("sp's cluster");
    let text = format!("{}      gpu_taint: true\n{}", &text[..at], &text[at..]);
    let t = fabric::topology::load_str("t.yaml", text).unwrap().topology;

    let taint = json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]);
    let toleration = json!({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"});
    let flavor = objects(&t, "D.1@sp").into_iter().find(|o| o["kind"] == "ResourceFlavor").unwrap();
    assert_eq!(flavor["spec"]["tolerations"], json!([toleration]), "Kueue's batch Jobs tolerate it");
    let franca_flavor = objects(&t, "D.1@franca").into_iter().find(|o| o["kind"] == "ResourceFlavor").unwrap();
    assert!(franca_flavor["spec"].get("tolerations").is_none());
    let vllm = at_member(&t, "vllm", "sp");
    assert_eq!(vllm["spec"]["template"]["spec"]["tolerations"], json!([toleration]), "{vllm:#}");
    assert!(at_member(&t, "vllm", "franca")["spec"]["template"]["spec"].get("tolerations").is_none());

    apply_step(&t, &dir, "D.1@sp", "20261201T101500Z-1").await.expect("D.1 applies");
    let node = sp.object("v1", "Node", None, "pve-ippri-31").unwrap();
    assert_eq!(node["spec"]["taints"], taint, "{node:#}");
    let owners: Vec<&str> = node["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["fieldsV1"]["f:spec"].get("f:taints").is_some())
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert_eq!(owners, ["fabric"], "fabric owns the taints it set: {node:#}");
    assert!(sp.object("v1", "Node", None, "sp-cp1").unwrap()["spec"].get("taints").is_none(), "not a GPU node");

    for n in ["pve-ippri-31", "pve-ippri-33", "pve-ippri-34"] {
        sp.set_allocatable_gpus(n, 1);
    }
    for q in objects(&t, "D.5@sp").into_iter().filter(|o| o["kind"] == "Queue") {
        sp.put_raw_as(q, "fabric");
    }
    sp.put_raw_as(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ai"}}), "argocd");
    let mut intolerant = vllm.clone();
    intolerant["metadata"]["name"] = json!("intolerant");
    intolerant["spec"]["template"]["spec"].as_object_mut().unwrap().remove("tolerations");
    sp.put_raw_as(vllm, "karmada-execution-controller");
    sp.put_raw_as(intolerant, "karmada-execution-controller");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let placed = sp.kai_placements();
    assert!(placed.iter().any(|p| p.deployment == "vllm" && p.node.starts_with("pve-ippri-")), "{placed:?}");
    assert!(!placed.iter().any(|p| p.deployment == "intolerant"), "the taint keeps it off: {placed:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
