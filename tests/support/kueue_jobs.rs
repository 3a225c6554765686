//! Jobs for the real Kueue of the real-control-plane lab (`realkube_lab.rs`), and Kueue's verdicts
//! on them read from its Workloads. Included with `#[path = "support/kueue_jobs.rs"] mod
//! kueue_jobs;` beside `realkube_lab`.

use fabric::apply::StepWork;
use fabric::catalog::{Catalog, StepGraph};
use fabric::topology::Topology;
use fabric_testkit::realkube::Site;
use serde_json::{Value, json};

use super::realkube_lab::{Lab, fabric};

/// D.4's test Job, as fabric renders it, applied at the manager as fabric's apply does.
pub fn send_d4(t: &Topology, manager: &Site) {
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    let step = StepWork::alone(&g, t, "D.4").unwrap();
    let job = step.resources.iter().find_map(|r| r.kube_object().cloned()).expect("D.4 renders its Job");
    manager.apply(&[job], "fabric");
}

/// `fabric verify --step D.4` in the lab: (exit code, output).
pub fn verify_d4(l: &Lab) -> (Option<i32>, String) {
    let o = fabric(l, &["verify", "--step", "D.4"]);
    (o.status.code(), fabric_testkit::run::out(&o))
}

/// Every running site of the lab (the VM's last).
pub fn sites(l: &Lab) -> Vec<&Site> {
    [&l.franca, &l.sp].into_iter().chain(l.vm.as_ref()).collect()
}

/// A batch Job of `gpus` GPUs in LocalQueue `queue` of namespace `ns`, asking 1 cpu and 1 GiB as
/// every real Job does. `hold` keeps its pod running until the Job is deleted (kwok ends no pod
/// labelled `realkube.fabric.test/hold`); otherwise kwok completes its pod at once.
pub fn job(name: &str, ns: &str, queue: &str, gpus: u32, hold: bool) -> Value {
    let mut labels = json!({});
    if hold {
        labels["realkube.fabric.test/hold"] = "true".into();
    }
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels}, "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "work", "image": "registry.example/train:1",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": gpus}}}],
        }}},
    })
}

/// The condition `ty` of `obj` when it is True.
pub fn is_true(obj: &Value, ty: &str) -> bool {
    condition(obj, ty).is_some_and(|c| c["status"] == "True")
}

/// The condition `ty` of `obj`.
pub fn condition<'a>(obj: &'a Value, ty: &str) -> Option<&'a Value> {
    obj["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == ty)
}

/// The Workload Kueue made at `site` for Job `ns/name`: the Job owns it, or, in a MultiKueue
/// worker before the Job is copied there, it has the manager's Workload's name (Kueue names a
/// Job's Workload `job-<name>-<hash>`, `pkg/controller/jobframework` `GetWorkloadNameForOwnerWithGVK`).
pub fn workload(site: &Site, ns: &str, name: &str) -> Option<Value> {
    let list: Value =
        serde_json::from_str(&site.kubectl_ok(&["get", "workloads.kueue.x-k8s.io", "-n", ns, "-o", "json"]))
            .expect("kubectl's JSON");
    let of_job = |w: &&Value| {
        let owned = w["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|o| o.iter().any(|r| r["kind"] == "Job" && r["name"] == name));
        let hash = w["metadata"]["name"].as_str().and_then(|n| n.strip_prefix(&format!("job-{name}-")));
        owned || hash.is_some_and(|h| !h.contains('-'))
    };
    list["items"].as_array()?.iter().find(of_job).cloned()
}

/// What a failed wait shows: the Job's and its Workload's status at `site`.
fn state(site: &Site, ns: &str, name: &str) -> String {
    let job = site.get("job", name, Some(ns)).map(|j| j["status"].clone());
    let wl = workload(site, ns, name).map(|w| json!({"name": w["metadata"]["name"], "status": w["status"]}));
    format!("Job {ns}/{name} at {}: {job:?}\nits Workload: {wl:?}", site.name)
}

/// Waits up to `secs` for `f` to return something; panics with the Job's state otherwise.
fn wait_for<T>(site: &Site, ns: &str, name: &str, what: &str, secs: u64, mut f: impl FnMut(&Site) -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = f(site) {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "after {secs} s, not {what}:\n{}", state(site, ns, name));
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// Waits until Kueue admitted Job `ns/name` at `site`; its Workload.
pub fn admitted(site: &Site, ns: &str, name: &str) -> Value {
    wait_for(site, ns, name, "admitted by Kueue", 60, |s| workload(s, ns, name).filter(|w| is_true(w, "Admitted")))
}

/// Waits until Kueue has looked at Job `ns/name` at `site` and keeps it out (its Workload's
/// QuotaReserved is False, with Kueue's reason); Kueue's message.
pub fn kept_out(site: &Site, ns: &str, name: &str) -> String {
    wait_for(site, ns, name, "kept out by Kueue", 60, |s| {
        let w = workload(s, ns, name)?;
        let c = condition(&w, "QuotaReserved").filter(|c| c["status"] == "False")?;
        c["message"].as_str().filter(|m| !m.is_empty()).map(str::to_string)
    })
}

/// Waits until Job `ns/name` at `site` has condition `ty` (`Complete`, `Failed`); the Job.
pub fn finished(site: &Site, ns: &str, name: &str, ty: &str) -> Value {
    wait_for(site, ns, name, ty, 90, |s| s.get("job", name, Some(ns)).filter(|j| is_true(j, ty)))
}

/// Deletes every Job of the test namespaces at every site and waits until Kueue has released
/// their Workloads (and so their quota): the next test starts with every GPU free.
pub fn clear_jobs(l: &Lab, namespaces: &[&str]) {
    for site in sites(l) {
        for ns in namespaces {
            site.kubectl_ok(&["delete", "jobs", "--all", "-n", ns, "--ignore-not-found"]);
        }
    }
    for site in sites(l) {
        site.wait_until(60, "no Workload left in the test namespaces", |s| {
            namespaces.iter().all(|ns| {
                s.kubectl_ok(&["get", "workloads.kueue.x-k8s.io", "-n", ns, "-o", "name", "--ignore-not-found"])
                    .trim()
                    .is_empty()
            })
        });
    }
}
