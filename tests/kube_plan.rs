//! Planning Kubernetes objects against in-process test API servers (two clusters and Karmada):
//! creates, drift limited to the fields fabric manages, secrets by presence, a conflict with
//! another field manager shown by the server-side dry run, and an unreachable cluster named while
//! the others are still planned.

use fabric_testkit::{kube_api, run};

use run::out;

use kube_api::TestApiServer;
use std::process::Output;

struct Env {
    dir: std::path::PathBuf,
    franca: TestApiServer,
    sp: TestApiServer,
    karmada: TestApiServer,
}

fn env(name: &str) -> Env {
    let dir = std::env::temp_dir().join(format!("fabric-kube-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, sp, karmada) = kube_api::fabric_apis(&dir);
    let topology = kube_api::example_topology(&dir);
    std::fs::write(dir.join("topology.yaml"), topology).unwrap();
    // No SSH host of this topology exists here: an empty ssh_config keeps fabric from trying the
    // example's addresses through ~/.ssh/config; the hosts are reported unreachable.
    std::fs::write(dir.join("ssh_config"), "Host *\n    HostName 127.0.0.1\n    Port 9\n    ConnectTimeout 2\n")
        .unwrap();
    Env { dir, franca, sp, karmada }
}

impl Env {
    fn fabric(&self, args: &[&str]) -> Output {
        run::fabric_in(&self.dir, &self.dir.join("topology.yaml"), &self.dir.join("ssh_config"), args)
    }
}

#[test]
fn kubernetes_objects_are_planned_against_the_api() {
    let e = env("plan");
    // C.5 with everything it needs: the Kubernetes parts are read from the test API servers,
    // the routers and hosts are unreachable here and named so.
    let o = e.fabric(&["plan", "--step", "C.5", "--with-deps"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(3), "unreachable hosts make the plan partial: {text}");
    assert!(text.contains("? unknown: router.sp unreachable ("), "{text}");
    assert!(text.contains("+ karmada/ai/PropagationPolicy/gpu-services"), "{text}");
    assert!(text.contains("+ cluster.franca/kube-system/HelmChart/karmada"), "{text}");
    assert!(text.contains("unreachable: router.sp"), "{text}");
    // Every planned read went to the servers with fabric's field manager and a dry run.
    let reqs = e.karmada.requests().join("\n");
    assert!(reqs.contains("fieldManager=fabric") && reqs.contains("dryRun=All"), "{reqs}");
    assert!(e.karmada.objects().iter().all(|o| o["kind"] != "PropagationPolicy"), "a plan changed nothing");

    // Drift limited to managed fields: an object created by someone else with one field
    // different (and fields fabric does not manage) shows as one changed line.
    let mut pp: serde_json::Value = serde_saphyr::from_str::<serde_json::Value>(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/snapshots/example/apps/karmada/propagation-policies/web-services.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    pp["spec"]["placement"]["replicaScheduling"]["replicaSchedulingType"] = serde_json::json!("Divided");
    pp["metadata"]["annotations"] = serde_json::json!({ "note": "not fabric's" });
    e.karmada.put_raw(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}));
    e.karmada.put_raw_as(pp, "fabric");
    let o = e.fabric(&["plan", "--step", "C.5", "--with-deps"]);
    let text = out(&o);
    assert!(text.contains("~ karmada/web/PropagationPolicy/web-services"), "{text}");
    assert!(
        text.contains("-      replicaSchedulingType: Divided")
            && text.contains("+      replicaSchedulingType: Duplicated"),
        "{text}"
    );
    assert!(
        !text.contains("not fabric's") && !text.contains("resourceVersion") && !text.contains("managedFields"),
        "{text}"
    );

    // A field owned by another manager: the dry run reports the conflict at plan time.
    let queues = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/snapshots/example/apps/kueue/cluster-queues/gpu-sp.yaml"
    ))
    .unwrap();
    let doc = queues.split("---\n").find(|d| d.contains("kind: ClusterQueue")).unwrap();
    let mut cq: serde_json::Value = serde_saphyr::from_str::<serde_json::Value>(doc).unwrap();
    cq["spec"]["cohortName"] = serde_json::json!("someone-else");
    e.sp.put_raw_as(cq, "kubectl");
    let o = e.fabric(&["plan", "--step", "D.1@sp", "--with-deps", "--site", "sp"]);
    let text = out(&o);
    assert!(text.contains("~ cluster.sp/ClusterQueue/gpu-interactive"), "{text}");
    assert!(text.contains("the API server refuses this (dry run): 409 Conflict"), "{text}");
    assert!(text.contains("kubectl"), "the conflict names the other manager: {text}");

    // A queue removed from the topology (but still in the cluster, with fabric's labels) is
    // planned as a deletion of D.1@sp; nothing else of the step changes because of it.
    e.sp.put_raw_as(
        serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "gpu-eval", "labels": {"app.kubernetes.io/managed-by": "fabric", "app.kubernetes.io/part-of": "sp-franca"}},
            "spec": {"namespaceSelector": {}, "resourceGroups": []}}),
        "fabric",
    );
    let o = e.fabric(&["plan", "--step", "D.1@sp", "--with-deps", "--site", "sp", "--format", "json"]);
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let d1 = plan["steps"].as_array().unwrap().iter().find(|s| s["key"] == "D.1@sp").unwrap();
    let deletes: Vec<&str> = d1["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] == "delete")
        .map(|c| c["address"].as_str().unwrap())
        .collect();
    assert_eq!(deletes, ["cluster.sp/ClusterQueue/gpu-eval"]);

    // Secrets are compared by presence only: their content never appears.
    e.franca.put_raw(serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cilium-ca", "namespace": "kube-system"},
        "data": {"ca.key": "c2VjcmV0LWtleS1tYXRlcmlhbA=="}}));
    let o = e.fabric(&["plan", "--step", "B.2", "--with-deps", "--format", "json"]);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(!text.contains("c2VjcmV0") && !text.contains("secret-key-material"), "secret content leaked");

    // A snapshot of the live state plans the same without reading anything (CI without
    // credentials): even with every API down.
    // The hosts are not read here: the snapshot is written, records them, and exits 3.
    let o = e.fabric(&["state", "snapshot", "--step", "C.5", "--with-deps", "--out", "state.json"]);
    assert_eq!(o.status.code(), Some(3), "{}", out(&o));
    assert!(out(&o).contains("target(s) could not be read: their state is unknown"), "{}", out(&o));
    let snapshot = std::fs::read_to_string(e.dir.join("state.json")).unwrap();
    assert!(!snapshot.contains("c2VjcmV0"), "no secret content in a snapshot");
    let live_plan = e.fabric(&["plan", "--step", "C.5", "--with-deps", "--format", "json"]);
    e.franca.set_down(true);
    e.karmada.set_down(true);
    e.sp.set_down(true);
    let observed = e.fabric(&["plan", "--observed", "state.json", "--step", "C.5", "--with-deps", "--format", "json"]);
    let (a, b): (serde_json::Value, serde_json::Value) =
        (serde_json::from_slice(&live_plan.stdout).unwrap(), serde_json::from_slice(&observed.stdout).unwrap());
    assert_eq!(a["steps"], b["steps"], "the plan from the snapshot equals the live one");
    assert_eq!(b["mode"]["kind"], "observed");
    let md = e.fabric(&[
        "plan",
        "--observed",
        "state.json",
        "--step",
        "C.5",
        "--with-deps",
        "--format",
        "markdown",
        "--detailed-exitcode",
    ]);
    assert!(String::from_utf8_lossy(&md.stdout).contains("state from the snapshot state.json"), "{}", out(&md));
    e.franca.set_down(false);
    e.karmada.set_down(false);

    // verify reads the status controllers write: franca's member is Ready, sp's is not.
    for (name, ready) in [("franca", "True"), ("sp", "False")] {
        e.karmada.put_raw(serde_json::json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name}, "spec": {"syncMode": "Push"},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "ClusterNotReachable", "message": "cluster is not reachable"}]}}));
    }
    let o = e.fabric(&["verify", "--step", "C.2"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("PASS  C.2          member Ready: Cluster/franca: karmada: Cluster/franca Ready=True"),
        "{text}"
    );
    assert!(
        text.contains(
            "FAIL  C.2          member Ready: Cluster/sp: karmada: Cluster/sp Ready=False (cluster is not reachable)"
        ),
        "{text}"
    );
    assert!(text.contains("Verify: 1 passed, 1 failed"), "{text}");

    // A.3 at franca: each VM is a Ready node of the cluster, tainted; a VM that never joined
    // and one that joined untainted fail, each named. (The kubelets register the nodes.)
    let node = |name: &str, ready: &str, tainted: bool| {
        let taints = if tainted {
            serde_json::json!([{"key": "fabric.io/external-workload", "value": "true", "effect": "NoSchedule"}])
        } else {
            serde_json::json!([])
        };
        serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady", "message": "kubelet is posting ready status"}]}})
    };
    e.franca.put_raw_as(node("debian-proxy", "True", true), "kubelet");
    let o = e.fabric(&["verify", "--step", "A.3@franca"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("PASS  A.3@franca   debian-proxy joined: cluster.franca: node debian-proxy Ready, tainted fabric.io/external-workload"), "{text}");
    assert!(
        text.contains(
            "FAIL  A.3@franca   vm-cpps-03 joined: cluster.franca: no node `vm-cpps-03` (has its k3s-agent joined?)"
        ),
        "{text}"
    );
    e.franca.put_raw_as(node("vm-cpps-03", "True", false), "kubelet");
    let text = out(&e.fabric(&["verify", "--step", "A.3@franca"]));
    assert!(text.contains("node vm-cpps-03 is Ready but not tainted"), "{text}");
    e.franca.put_raw_as(node("vm-cpps-03", "True", true), "kubelet");
    let o = e.fabric(&["verify", "--step", "A.3@franca"]);
    assert!(o.status.success(), "{}", out(&o));

    // One cluster down: it is named, the others are still planned.
    e.sp.set_down(true);
    let o = e.fabric(&["plan", "--step", "C.5", "--with-deps"]);
    let text = out(&o);
    assert!(text.contains("unreachable: cluster.sp"), "{text}");
    assert!(text.contains("karmada/ai/PropagationPolicy/gpu-services"), "{text}");
    e.sp.set_down(false);

    // A kubeconfig missing on this machine is the operator's to fix here, named with its path
    // before anything is read: not an unreachable Karmada with advice about the link.
    let karmada = e.dir.join("karmada.yaml");
    std::fs::rename(&karmada, e.dir.join("karmada.away")).unwrap();
    let asked = e.karmada.requests().len();
    let o = e.fabric(&["plan", "--step", "C.5", "--with-deps"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    let want = format!("kubeconfig {} for karmada does not exist: ", karmada.display());
    assert!(text.contains(&want) && text.contains("fabric::local-file"), "{text}");
    assert!(!text.contains("unreachable") && !text.contains("Plan: "), "nothing was read: {text}");
    assert_eq!(e.karmada.requests().len(), asked);
    std::fs::remove_dir_all(&e.dir).unwrap();
}
