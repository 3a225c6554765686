//! End to end: phases A to D on the lab (SSH: K3s configs, the WireGuard tunnel) and on three
//! test API servers (franca, sp, Karmada) whose simulated controllers fill statuses, tokens and
//! install Jobs. One apply creates everything; the next plan is clean; a hand edit is drift;
//! removing a queue plans only its deletion; a 422 mid-step reverts the step; a wait that never
//! ends fails and reverts; one cluster down leaves the other site plannable and appliable;
//! verify reports the seed's checks. Needs root (network namespaces).

use fabric_testkit::{argocd, cilium_mesh, kube_api, lab, run};

use std::process::Output;
use std::time::Duration;

use base64::Engine as _;
use kube_api::TestApiServer;
use run::out;
use serde_json::{Value, json};

const TOPOLOGY: &str = include_str!("data/lab-full.yaml");

fn b64(v: &Value) -> String {
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap_or_default()).unwrap())
        .unwrap()
}

fn secret(server: &TestApiServer, ns: &str, name: &str) -> Value {
    server.object("v1", "Secret", Some(ns), name).unwrap_or_else(|| panic!("Secret {ns}/{name}"))["data"].clone()
}

/// An object as read back, made fit to be written again by another manager: without what the
/// server sets.
fn unstore(obj: &mut Value) {
    for k in ["managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"] {
        obj["metadata"].as_object_mut().unwrap().remove(k);
    }
}

fn condition(obj: &Value, kind: &str) -> String {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .map(|c| c["status"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

#[test]
fn phases_a_to_d_end_to_end() {
    let lab = lab::Lab::up("ee", "10.247", &[], &[]);
    let dir = std::env::temp_dir().join(format!("fabric-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // (The clusters' nodes have joined, `fabric_apis` registers them: D.1 labels the GPU nodes,
    // and the GPU services schedule only once it has.)
    let (franca, sp, karmada) = kube_api::fabric_apis(&dir);
    // `fabric_apis` registers the example's nodes; lab-full's SP GPU node has a name of its own.
    sp.register_nodes(&["sp-gpu1"]);
    for s in [&franca, &sp, &karmada] {
        s.simulate_controllers(Duration::from_millis(100));
    }
    let topology = |t: &str| kube_api::with_test_kubeconfigs(t, &dir);
    let write = |t: &str| std::fs::write(dir.join("topology.yaml"), topology(t)).unwrap();
    write(TOPOLOGY);
    let fabric =
        |args: &[&str]| -> Output { run::fabric_in(&dir, &dir.join("topology.yaml"), &lab.ssh_config(), args) };
    let all = ["--phase", "A", "--phase", "B", "--phase", "C", "--phase", "D"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { all.iter().chain(extra).copied().collect() };

    // 1. One apply of phases A to D creates everything, waiting for the controllers.
    let o = fabric(&[&["apply"][..], &with(&["--auto-approve", "--wait-timeout", "30"])].concat());
    let text = out(&o);
    if std::env::var_os("E2E_SHOW").is_some() {
        eprintln!("{text}"); // to read the apply as an operator sees it
    }
    assert!(o.status.success(), "{text}");
    // Objects in namespaces the same plan creates are not refused by the dry run.
    assert!(!text.contains("the API server refuses"), "{text}");
    for evidence in [
        "kube-system/HelmChart/cilium ready: install job helm-install-cilium complete",
        "B.1: check passed",
        "karmada/Cluster/sp ready: Ready=True",
        "cluster.franca/MultiKueueCluster/sp ready: Active=True",
        "cluster.sp/ClusterQueue/gpu-batch ready: Active=True",
        "cluster.franca/ClusterQueue/gpu-batch ready: Active=True",
    ] {
        assert!(text.contains(evidence), "missing `{evidence}` in:\n{text}");
    }
    // The mesh has one CA: generated in franca, copied to sp.
    let (ca_franca, ca_sp) = (secret(&franca, "kube-system", "cilium-ca"), secret(&sp, "kube-system", "cilium-ca"));
    assert!(b64(&ca_franca["ca.crt"]).starts_with("-----BEGIN CERTIFICATE-----"), "a generated CA");
    assert!(b64(&ca_franca["ca.key"]).contains("PRIVATE KEY"));
    assert_eq!(ca_franca, ca_sp, "sp has franca's CA");
    // Karmada's credentials for each member are the member's ServiceAccount token.
    let sp_token = secret(&sp, "karmada-cluster", "karmada-member-token");
    assert_eq!(secret(&karmada, "karmada-cluster", "sp")["token"], sp_token["token"]);
    assert_eq!(
        condition(&karmada.object("cluster.karmada.io/v1alpha1", "Cluster", None, "sp").unwrap(), "Ready"),
        "True"
    );
    // ArgoCD's cluster secret holds Karmada's token for the Karmada API.
    let argo = secret(&franca, "argocd", "karmada-api");
    let config: Value = serde_json::from_str(&b64(&argo["config"])).unwrap();
    let karmada_token = b64(&secret(&karmada, "kube-system", "argocd-manager-token")["token"]);
    assert_eq!(config["bearerToken"], karmada_token.as_str());
    assert_eq!(b64(&argo["server"]), "https://172.30.1.10:32443");
    assert_eq!(b64(&argo["name"]), "karmada");
    // MultiKueue's kubeconfig for sp: sp's API and sp's token for MultiKueue.
    let kc = b64(&secret(&franca, "kueue-system", "multikueue-sp")["kubeconfig"]);
    let worker_token = b64(&secret(&sp, "kueue-system", "multikueue-worker-token")["token"]);
    assert!(
        kc.contains("server: \"https://172.30.2.10:6443\"") || kc.contains("server: https://172.30.2.10:6443"),
        "{kc}"
    );
    assert!(kc.contains(&worker_token), "the kubeconfig authenticates with sp's token");
    // No secret reached the output or the journal.
    let journal: String = std::fs::read_dir(dir.join(".fabric/runs"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    for s in [&karmada_token, &worker_token, &b64(&sp_token["token"]), &b64(&ca_franca["ca.key"])] {
        let needle = s.lines().nth(1).unwrap_or(s);
        assert!(!text.contains(needle) && !journal.contains(needle), "a secret leaked");
    }

    // 2. The next plan has nothing to do.
    let o = fabric(&[&["plan"][..], &with(&["--detailed-exitcode"])].concat());
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));

    // (Kueue's admission of D.4's Job, its `spec.suspend` then Kueue's and the plan still clean,
    // are shown with the real Kueue on real API servers: `tests/realkube_apply.rs`.)

    // 2b. A rotated token: the copy in Karmada no longer matches its source, so it is planned
    // as an update (content never shown) and apply copies the new one.
    let mut rotated = sp.object("v1", "Secret", Some("karmada-cluster"), "karmada-member-token").unwrap();
    rotated["data"]["token"] = json!(base64::engine::general_purpose::STANDARD.encode("rotated-token-789"));
    unstore(&mut rotated);
    sp.put_raw_as(rotated, "kube-controller-manager");
    // Both copies made from that token are stale: Karmada's credentials and the estimator's
    // kubeconfig.
    let o = fabric(&["plan", "--step", "C.2", "--step", "C.4", "--detailed-exitcode"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains("~ karmada/karmada-cluster/Secret/sp"), "{text}");
    assert!(text.contains("~ cluster.franca/karmada-system/Secret/sp-kubeconfig"), "{text}");
    assert!(text.contains("Plan: 0 to create, 2 to update, 0 to delete."), "{text}");
    assert!(!text.contains("rotated-token-789") && !text.contains("cm90YXRlZC10b2tlbi03ODk"), "{text}");
    let o = fabric(&["apply", "--step", "C.2", "--step", "C.4", "--auto-approve"]);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(b64(&secret(&karmada, "karmada-cluster", "sp")["token"]), "rotated-token-789");

    // 3. verify: the seed's checks against what the controllers report. The simulated
    // controllers make what the real ones would from the objects fabric applied: ArgoCD syncs
    // the repository's services into Karmada (`fabric_testkit::argocd`), Karmada propagates them
    // by fabric's PropagationPolicies and OverridePolicies (`fabric_testkit::karmada`), Cluster
    // Mesh imports the global Service's backends (`cilium_mesh`). The charts' own workloads (Cilium's agents, operator, clustermesh-apiserver
    // and peer Secret; Karmada's control plane) come from the simulated helm-controller, rendered
    // from the values fabric gave the HelmCharts (`fabric_testkit::helm_charts`).
    let o = fabric(&["verify", "--step", "C.5"]);
    assert_eq!(o.status.code(), Some(1), "nothing propagated yet: {}", out(&o));
    assert!(out(&o).contains("cluster.sp: Deployment ai/vllm not propagated"), "{}", out(&o));
    // The services' repository ArgoCD syncs (`federation.argocd.path`: services/), as its
    // owners would write it: fabric adds nothing to it.
    let repo = dir.join("repo");
    let services = repo.join("services");
    std::fs::create_dir_all(&services).unwrap();
    let deployment = |name: &str, ns: &str, replicas: u32| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{ name: {name}, namespace: {ns} }}\nspec:\n  replicas: {replicas}\n  selector: {{ matchLabels: {{ app: {name} }} }}\n  template:\n    metadata: {{ labels: {{ app: {name} }} }}\n    spec: {{ containers: [{{ name: {name}, image: {name} }}] }}\n---\napiVersion: v1\nkind: Service\nmetadata: {{ name: {name}, namespace: {ns} }}\nspec: {{ selector: {{ app: {name} }}, ports: [{{ port: 8000 }}] }}\n"
        )
    };
    std::fs::write(services.join("vllm.yaml"), deployment("vllm", "ai", 2)).unwrap();
    std::fs::write(services.join("qdrant.yaml"), deployment("qdrant", "data", 1)).unwrap();
    // The Karmada API runs no kube-controller-manager (no Deployment, ReplicaSet, StatefulSet or
    // DaemonSet controller): a template's status is what Karmada gathers from the members.
    for kind in ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"] {
        karmada.hold(kind, true);
    }
    let repo_url = "https://example.invalid/devops";
    let members = [("franca", &franca), ("sp", &sp)];
    let ev = argocd::sync(&franca, repo_url, &repo, &[("karmada", &karmada)]);
    assert_eq!(ev, ["argocd/fabric-apps: Synced, Progressing (4 resources)"], "templates without status yet");
    let ev = fabric_testkit::karmada::propagate(&karmada, &members);
    for e in [
        "franca: Deployment ai/vllm by gpu-services",
        "sp: Deployment ai/vllm by gpu-services",
        "franca: Deployment data/qdrant by data-services",
        "sp: Service data/qdrant by data-services-services",
    ] {
        assert!(ev.iter().any(|x| x == e), "missing `{e}` in {ev:#?}");
    }
    assert!(
        sp.object("apps/v1", "Deployment", Some("data"), "qdrant").is_none(),
        "data services stay in franca: {ev:#?}"
    );
    // Divided 1:1 by the class's weights, with C.6's GPU model node selector at each member.
    for (server, model) in [(&franca, "a5500"), (&sp, "a5000")] {
        let d = server.object("apps/v1", "Deployment", Some("ai"), "vllm").unwrap();
        assert_eq!(
            (d["spec"]["replicas"].as_i64(), d["spec"]["template"]["spec"]["nodeSelector"]["gpu.model"].as_str()),
            (Some(1), Some(model))
        );
    }
    // qdrant's Service, global: C.5's OverridePolicy annotates it in both members, and Cluster
    // Mesh (EndpointSlice synchronisation on, from B.2) shows Franca's backends in sp.
    let global = sp.object("v1", "Service", Some("data"), "qdrant").unwrap();
    assert_eq!(global["metadata"]["annotations"]["service.cilium.io/global"], "true", "{global:#}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(cilium_mesh::sync(&franca, "franca", &sp) > 0, "sp imports franca's global services");
    // No Kueue runs here: D.4's Job waits at the manager, and verify says so (its dispatch by
    // the real MultiKueue: `tests/multikueue_dispatch.rs`).
    let o = fabric(&["verify", "--step", "D.4"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("batch/fabric-multikueue-test is in no worker (sp): not dispatched yet"), "{}", out(&o));
    // The test puts the copy MultiKueue would make in sp (same name and namespace), so that the
    // verify below reads a dispatched Job.
    let mut copy = franca.object("batch/v1", "Job", Some("batch"), "fabric-multikueue-test").expect("D.4's Job");
    unstore(&mut copy);
    // Without what MultiKueue leaves out (`batchjob_adapter.go` `SyncJob`): the manager's
    // `managedBy` and the selector the manager's API server generated.
    copy["spec"].as_object_mut().unwrap().remove("managedBy");
    copy["spec"].as_object_mut().unwrap().remove("selector");
    if let Some(labels) = copy["spec"]["template"]["metadata"]["labels"].as_object_mut() {
        labels
            .retain(|k, _| !k.contains("controller-uid") && k != "job-name" && !k.starts_with("batch.kubernetes.io/"));
    }
    sp.hold("Job", true);
    sp.put_raw(copy);
    // The members' Deployments roll out; Karmada gathers their status into the templates, and
    // ArgoCD then sees its Application healthy.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        fabric_testkit::karmada::propagate(&karmada, &members);
        let ev = argocd::sync(&franca, repo_url, &repo, &[("karmada", &karmada)]);
        if ev == ["argocd/fabric-apps: Synced, Healthy (4 resources)"] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{ev:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    // The simulated controllers report the new Deployments' status a moment later.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let o = fabric(&[&["verify"][..], &all].concat());
        if o.status.success() || std::time::Instant::now() > deadline {
            assert!(o.status.success(), "{}", out(&o));
            break out(&o);
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(!text.contains("SKIP"), "every step has a check: {text}");
    for check in [
        "PASS  B.1",
        "the same cilium-ca in 2 clusters",
        "the mesh CA's expiry: Secret kube-system/cilium-ca (ca.crt): valid until",
        "connects to sp",
        "Cluster/sp Ready=True",
        "ready backend(s)",
        "Deployment ai/vllm present",
        "MultiKueueCluster/sp Active=True",
        "karmada-scheduler running",
        "PASS  C.1          Karmada's API certificate: Secret karmada-system/karmada-cert: valid until",
        "fabric-apps sync Synced, health Healthy",
        "karmada-scheduler-estimator-sp 1/1 replicas available",
        "cluster.sp: vllm runs on gpu.model=a5000",
        "cluster.sp: Service data/qdrant global, backends: 1 from franca",
        "batch/fabric-multikueue-test dispatched to sp",
        "dispatching ClusterQueue Active: ClusterQueue/gpu-batch",
        "the Karmada chart turns the Failover gate and NoExecute eviction on",
        "ClusterTaintPolicy fabric-not-ready covers 2 member(s)",
    ] {
        assert!(text.contains(check), "missing `{check}` in:\n{text}");
    }
    // A cluster that lost its view of the peer (a hand edit of the chart's Secret, which no
    // controller repairs until the next install) fails B.2, naming it.
    sp.put_raw_as(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cilium-clustermesh", "namespace": "kube-system"}, "data": {}}),
        "kubectl",
    );
    let o = fabric(&["verify", "--phase", "B"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("cluster.sp: no connection configured to franca"), "{}", out(&o));

    // 4. A hand edit is drift, with the other manager named; --force-conflicts repairs it.
    let mut cq = sp.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-interactive").unwrap();
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = json!(5);
    unstore(&mut cq);
    sp.put_raw_as(cq, "kubectl");
    let o = fabric(&["plan", "--phase", "D", "--detailed-exitcode"]);
    let text = out(&o);
    assert!(text.contains("~ cluster.sp/ClusterQueue/gpu-interactive"), "{text}");
    assert!(text.contains("nominalQuota: 5"), "{text}");
    let o = fabric(&["apply", "--phase", "D", "--auto-approve", "--force-conflicts"]);
    assert!(o.status.success(), "{}", out(&o));

    // 5. Removing a queue from the topology plans its deletion and nothing else.
    // franca's queue (the first of the two with that name).
    let without = TOPOLOGY.replacen(
        "      - name: gpu-interactive\n        gpu_quota: 1\n        local_queues: [{ name: interactive, namespace: ai }]\n",
        "",
        1,
    );
    assert_ne!(without, TOPOLOGY);
    write(&without);
    let o = fabric(&[&["plan"][..], &with(&["--detailed-exitcode"])].concat());
    let text = out(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains("- cluster.franca/ClusterQueue/gpu-interactive"), "{text}");
    assert!(text.contains("- cluster.franca/ai/LocalQueue/interactive"), "{text}");
    assert!(text.contains("Plan: 0 to create, 0 to update, 2 to delete."), "{text}");
    let o = fabric(&[&["apply"][..], &with(&["--auto-approve"])].concat());
    assert!(o.status.success(), "{}", out(&o));
    assert!(franca.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-interactive").is_none());
    assert!(sp.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-interactive").is_some(), "sp keeps its own");
    write(TOPOLOGY);
    let o = fabric(&["apply", "--step", "D.1@franca", "--auto-approve"]);
    assert!(o.status.success(), "{}", out(&o));

    // 6. A 422 in the middle of a step reverts what the step did before it: a new queue's
    // ClusterQueue is created, its LocalQueue refused, so the ClusterQueue goes again.
    let more = TOPOLOGY.replacen(
        "  - name: sp\n",
        "      - name: gpu-extra\n        gpu_quota: 0\n        local_queues: [{ name: extra, namespace: ai }]\n  - name: sp\n",
        1,
    );
    write(&more);
    franca.fail_next("apply", "LocalQueue", 422);
    let o = fabric(&["apply", "--step", "D.1@franca", "--auto-approve"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("failed and was reverted"), "{text}");
    assert!(franca.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-extra").is_none(), "reverted: {text}");

    // 7. A controller that never reports ready: the wait times out and the step is reverted.
    franca.hold("ClusterQueue", true);
    let o = fabric(&["apply", "--step", "D.1@franca", "--auto-approve", "--wait-timeout", "3"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("ClusterQueue/gpu-extra") && text.contains("not ready after 3 s"), "{text}");
    assert!(franca.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-extra").is_none(), "reverted: {text}");
    franca.hold("ClusterQueue", false);

    // 8. One cluster down: plan names it and still plans the other site; apply of the other
    // site works.
    sp.set_down(true);
    let o = fabric(&["plan", "--phase", "D"]);
    let text = out(&o);
    // Partial (3): sp's steps are unknown, franca's planned (issue 36's exit codes).
    assert_eq!(o.status.code(), Some(3), "{text}");
    assert!(text.contains("cluster.sp") && text.contains("unreachable"), "{text}");
    assert!(text.contains("+ cluster.franca/ClusterQueue/gpu-extra"), "{text}");
    let o = fabric(&["apply", "--step", "D.1@franca", "--site", "franca", "--auto-approve"]);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(
        condition(&franca.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-extra").unwrap(), "Active"),
        "True"
    );
    sp.set_down(false);
    let o = fabric(&[&["plan"][..], &with(&["--detailed-exitcode"])].concat());
    assert_eq!(o.status.code(), Some(0), "everything converged: {}", out(&o));

    // 9. A K3s join token (A.3/A.4) is copied from a server host to the joining host over SSH:
    // mode 0600, never in the output or the journal; without a source the step says so.
    join_token_is_copied(&lab, &dir, &topology(&more));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn join_token_is_copied(lab: &lab::Lab, dir: &std::path::Path, text: &str) {
    use fabric::apply::{self, Options, StepWork};
    use fabric::desired::{Desired, ProviderKind, Resource};
    let l = fabric::topology::load_str("t.yaml", text.to_string()).unwrap();
    let t = &l.topology;
    let targets = fabric::live::observe::Targets::from_topology(
        t,
        &fabric::transport::ssh_config::SshConfig::load(&lab.ssh_config()).unwrap(),
    )
    .unwrap();
    let source = format!("host.franca-lan/file:{}", fabric::desired::K3S_NODE_TOKEN);
    let step = StepWork {
        key: "A.3@sp".into(),
        id: "A.3".into(),
        needs: vec![],
        resources: vec![Resource {
            address: "host.sp-lan/file:/etc/rancher/k3s/token".parse().unwrap(),
            site: Some("sp".into()),
            provider: ProviderKind::File,
            summary: "K3s join token".into(),
            sensitive: true,
            desired: Desired::Secret(Some(source.parse().unwrap())),
            file: None,
        }],
    };
    let opts = |run: &str| Options {
        run: run.into(),
        state_dir: dir.to_path_buf(),
        confirm_timeout: Duration::from_secs(30),
        force_conflicts: false,
        wait_timeout: Duration::from_secs(10),
        lease: Default::default(),
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let apply = |run: &str| {
        rt.block_on(async {
            let keys = fabric::live::observe::key_targets(&step.resources);
            let live = fabric::live::observe::observe(&step.resources, &keys, &targets).await;
            let mut j = fabric::apply::journal::Journal::create(dir, run).unwrap();
            apply::run(t, std::slice::from_ref(&step), &targets, live, &opts(run), &mut j, &|_| {}).await
        })
    };
    // No server token yet: refused with the reason, nothing written.
    let err = apply("token-1").expect_err("no source yet").to_string();
    assert!(err.contains("does not exist yet"), "{err}");
    assert!(!lab.exec("sp-lan", "test -e /etc/rancher/k3s/token").status.success());
    let token = "K10f00dcafe::server:0123456789abcdef";
    let o = lab.exec(
        "franca-lan",
        &format!(
            "mkdir -p /var/lib/rancher/k3s/server && printf '%s\\n' {token} > {}",
            fabric::desired::K3S_NODE_TOKEN
        ),
    );
    assert!(o.status.success());
    apply("token-2").expect("copied");
    let o = lab.exec("sp-lan", "stat -c %a /etc/rancher/k3s/token && cat /etc/rancher/k3s/token");
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("600\n{token}\n"));
    let journal = std::fs::read_to_string(dir.join("runs/token-2.jsonl")).unwrap_or_default();
    assert!(!journal.is_empty() && !journal.contains(token), "journaled, without the token");
}
