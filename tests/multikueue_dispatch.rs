//! Where a batch Job runs (issue 13, part 4), on the example's test API servers after fabric
//! applied D.1 (both sites), D.2 and D.3, with Kueue's admission and MultiKueue's dispatch
//! modelled by `fabric_testkit::kueue` (see `kube_api.md`, "Kueue admission", "MultiKueue
//! dispatch"). What it shows is what Kueue 0.15 does with what fabric renders: a site's own
//! queues run their Jobs at the site while they have room; the dispatching queue sends every Job
//! to a worker with room, and waits while none has, whatever the manager's own GPUs do
//! (`docs/design.md`, "MultiKueue: local first?").

use std::time::Duration;

use fabric::apply::StepWork;
use fabric::catalog::{Catalog, StepGraph};
use fabric::topology::Topology;
use fabric_testkit::kube_api::{ExampleFabric, TestApiServer, shared_schemas, with_test_kubeconfigs};
use fabric_testkit::{kueue, run};
use serde_json::{Value, json};

#[path = "support/apply_step.rs"]
mod apply_step;

/// fabric applies D.1 at both sites, D.2 and D.3, as `apply` does, one step after the other.
async fn apply_d_steps(f: &ExampleFabric) -> Topology {
    let t = fabric::topology::load_str("t.yaml", f.text.clone()).unwrap().topology;
    for (i, key) in ["D.1@franca", "D.1@sp", "D.2", "D.3"].iter().enumerate() {
        apply_step::apply_step(&t, &f.dir, key, &format!("20261201T2000{i:02}Z-1"))
            .await
            .unwrap_or_else(|e| panic!("{key}: {e}"));
    }
    // From here Kueue's model runs the Jobs (the double's job controller would finish any Job
    // at once, holders included).
    for s in [&f.franca, &f.sp] {
        s.hold("Job", true);
    }
    t
}

/// D.4's test Job, as fabric renders it.
fn d4_job(t: &Topology) -> Value {
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    let step = StepWork::alone(&g, t, "D.4").unwrap();
    step.resources.iter().find_map(|r| r.kube_object().cloned()).expect("D.4 renders its Job")
}

/// A Job that holds `gpus` GPUs of `queue` (in namespace `ns`) until the test finishes it; like
/// every real Job it asks cpu and memory too.
fn holder(name: &str, ns: &str, queue: &str, gpus: u32) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {kueue::QUEUE_LABEL: queue}},
        "spec": {"suspend": true, "backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "work", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "args": ["pause"], "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                    "limits": {"memory": "1Gi", "nvidia.com/gpu": gpus}}}]}}}})
}

/// A short Job like D.4's in another LocalQueue.
fn short(name: &str, ns: &str, queue: &str) -> Value {
    let mut j = holder(name, ns, queue, 1);
    j["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["entrypoint-tester", "fabric test"]);
    j
}

/// Kueue and MultiKueue until nothing more happens; every event, in order.
fn settle(f: &ExampleFabric) -> Vec<String> {
    let mut all = Vec::new();
    for _ in 0..10 {
        let ev = kueue::reconcile(&[("franca", &f.franca), ("sp", &f.sp)]);
        if ev.is_empty() {
            return all;
        }
        all.extend(ev);
    }
    panic!("Kueue does not settle: {all:#?}");
}

/// `fabric verify --step D.4` against the servers: (exit code, output).
fn verify_d4(f: &ExampleFabric) -> (Option<i32>, String) {
    let o =
        run::fabric_in(&f.dir, &f.dir.join("topology.yaml"), &f.dir.join("ssh_config"), &["verify", "--step", "D.4"]);
    (o.status.code(), run::out(&o))
}

fn job(s: &TestApiServer, ns: &str, name: &str) -> Option<Value> {
    s.object("batch/v1", "Job", Some(ns), name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_queue_runs_at_the_site_and_the_dispatching_queue_in_a_worker_with_room() {
    let f = ExampleFabric::start("multikueue-dispatch");
    let t = apply_d_steps(&f).await;

    // Franca's own queue (gpu-interactive, 1 GPU): a Job runs in Franca, on Franca's flavor.
    f.franca.put_raw(short("local", "ai", "interactive"));
    let ev = settle(&f);
    assert_eq!(ev, ["franca: ai/local admitted on gpu-a5500", "franca: ai/local completed"], "{ev:#?}");
    let local = job(&f.franca, "ai", "local").unwrap();
    assert_eq!(local["spec"]["template"]["spec"]["nodeSelector"]["gpu.model"], "a5500");
    assert!(job(&f.sp, "ai", "local").is_none());

    // The dispatching queue: D.4's Job, which asks cpu and memory besides its GPU as a real Job
    // does, runs in SP while SP has room; MultiKueue copies its status back and removes SP's
    // copy once it finished.
    let d4 = d4_job(&t);
    let asks = kueue::job_requests(&f.franca, &d4).unwrap();
    assert_eq!(asks.keys().collect::<Vec<_>>(), ["cpu", "memory", "nvidia.com/gpu"], "{d4:#}");
    f.franca.put_raw(d4);
    let ev = settle(&f);
    assert_eq!(
        ev,
        [
            "franca: batch/fabric-multikueue-test dispatched to sp",
            "sp: batch/fabric-multikueue-test admitted on gpu-a5000",
            "sp: batch/fabric-multikueue-test completed",
            "franca: batch/fabric-multikueue-test finished in sp; its copy there removed",
        ],
        "{ev:#?}"
    );
    let at_manager = job(&f.franca, "batch", "fabric-multikueue-test").unwrap();
    assert!(kueue::finished(&at_manager), "status synced from sp: {at_manager:#}");
    assert_eq!(at_manager["spec"]["managedBy"], kueue::MULTIKUEUE);
    assert!(job(&f.sp, "batch", "fabric-multikueue-test").is_none());
    // verify reads the Job's end at Franca, though SP's copy is gone.
    let (code, out) = verify_d4(&f);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("batch/fabric-multikueue-test completed in a worker"), "{out}");
    assert!(out.contains("dispatching ClusterQueue Active") && out.contains("MultiKueue worker Active"), "{out}");
}

/// Issue 22, item 3: a ClusterQueue that covers only `nvidia.com/gpu` (what fabric rendered
/// before) admits no real Job: SP's Kueue keeps D.4's copy out ("resource cpu unavailable in
/// ClusterQueue", as Kueue's flavor assigner says), so MultiKueue dispatches it nowhere. With
/// fabric's queues (cpu and memory covered) the same Job runs; and cpu is counted: a Job asking
/// more cores than the site's GPU nodes offer waits though GPUs are free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_must_cover_the_cpu_and_memory_a_job_asks() {
    let f = ExampleFabric::start("multikueue-cover");
    let t = apply_d_steps(&f).await;
    let cq = f.sp.object("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-batch").unwrap();
    let rg = &cq["spec"]["resourceGroups"][0];
    assert_eq!(rg["coveredResources"], json!(["cpu", "memory", "nvidia.com/gpu"]), "{cq:#}");
    // SP's two GPU nodes' share: 2 of its 3 GPUs' worth of 3 × 16 cores and 3 × 62 GiB.
    assert_eq!(
        rg["flavors"][0]["resources"],
        json!([{"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "124Gi"},
            {"name": "nvidia.com/gpu", "nominalQuota": 2}])
    );
    let mut gpu_only = cq.clone();
    gpu_only["spec"]["resourceGroups"] = json!([{"coveredResources": ["nvidia.com/gpu"],
        "flavors": [{"name": "gpu-a5000", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]);
    for k in ["managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"] {
        gpu_only["metadata"].as_object_mut().unwrap().remove(k);
    }
    f.sp.put_raw_as(gpu_only, "kubectl");
    f.franca.put_raw(d4_job(&t));
    assert_eq!(settle(&f), Vec::<String>::new(), "sp's GPU-only queue admits nothing that asks cpu");
    f.sp.put_raw(holder("direct", "batch", "batch", 1));
    assert_eq!(settle(&f), Vec::<String>::new());
    let why = kueue::why_pending(&f.sp, "batch", "direct").unwrap();
    assert_eq!(why, "couldn't assign flavors: resource cpu unavailable in ClusterQueue gpu-batch");
    // fabric's queue again (D.1@sp applied anew): both run.
    f.sp.delete_raw("batch/v1", "Job", Some("batch"), "direct");
    f.sp.delete_raw("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "gpu-batch");
    f.sp.put_raw(cq_for_apply(cq));
    let ev = settle(&f);
    assert_eq!(ev[0], "franca: batch/fabric-multikueue-test dispatched to sp", "{ev:#?}");
    // cpu counts: 49 cores are more than sp's queues and its cohort offer (3 × 16), 1 GPU or not.
    let mut hungry = holder("hungry", "batch", "batch", 1);
    hungry["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("49");
    f.sp.put_raw(hungry);
    assert_eq!(settle(&f), Vec::<String>::new());
    let why = kueue::why_pending(&f.sp, "batch", "hungry").unwrap();
    assert!(why.contains("insufficient unused quota for cpu"), "{why}");
}

fn cq_for_apply(mut cq: Value) -> Value {
    for k in ["managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"] {
        cq["metadata"].as_object_mut().unwrap().remove(k);
    }
    cq
}

/// Issue 22, item 8: with Franca the manager, Franca's batch Jobs have a queue of their own beside
/// the dispatching one, and the plan says which goes where: a Job in `batch/batch-local` runs in
/// Franca on Franca's GPUs, one in `batch/batch` is dispatched to SP. The dispatching queue is
/// outside Franca's cohort: Franca's own queues cannot borrow its dispatch budget beyond Franca's
/// 3 GPUs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_site_runs_its_local_batch_queue_and_dispatches_the_other() {
    let f = ExampleFabric::start("multikueue-local");
    let t = apply_d_steps(&f).await;
    f.franca.put_raw(short("here", "batch", "batch-local"));
    f.franca.put_raw(short("there", "batch", "batch"));
    let ev = settle(&f);
    assert_eq!(
        ev,
        [
            "franca: batch/here admitted on gpu-a5500",
            "franca: batch/there dispatched to sp",
            "sp: batch/there admitted on gpu-a5000",
            "franca: batch/here completed",
            "sp: batch/there completed",
            "franca: batch/there finished in sp; its copy there removed",
        ],
        "{ev:#?}"
    );
    assert_eq!(
        job(&f.franca, "batch", "here").unwrap()["spec"]["template"]["spec"]["nodeSelector"]["gpu.model"],
        "a5500"
    );
    // Franca's GPUs are 3: its own queues (1 + 2) may not take a 4th by borrowing the
    // dispatching queue's budget.
    f.franca.put_raw(holder("local-3", "batch", "batch-local", 3));
    assert_eq!(settle(&f), ["franca: batch/local-3 admitted on gpu-a5500"], "2 GPUs + interactive's lent one");
    f.franca.put_raw(holder("local-1", "batch", "batch-local", 1));
    assert_eq!(settle(&f), Vec::<String>::new(), "no 4th GPU at franca");
    // The plan says where each LocalQueue's Jobs go.
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &t).unwrap();
    let summaries: Vec<String> = ["D.1@franca", "D.3"]
        .iter()
        .flat_map(|k| StepWork::alone(&g, &t, k).unwrap().resources)
        .filter(|r| r.address.to_string().contains("LocalQueue/batch"))
        .map(|r| format!("{}  {}", r.address, r.summary))
        .collect();
    assert_eq!(
        summaries,
        [
            "cluster.franca/batch/LocalQueue/batch-local  → gpu-batch-local: its Jobs run at franca",
            "cluster.franca/batch/LocalQueue/batch  → gpu-batch: its Jobs are dispatched to sp, never run at franca",
        ]
    );
}

/// SP full (its batch queue's 2 GPUs and, through the cohort, interactive's one): D.4's Job
/// waits at Franca, not dispatched, though Franca's GPUs are all free; when SP's holder
/// finishes, it is dispatched and runs there. A Job of Franca's own batch-free queue runs in
/// Franca meanwhile: local-first is a per-queue choice with Kueue 0.15.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dispatching_queue_waits_for_a_worker_with_room() {
    let f = ExampleFabric::start("multikueue-full");
    let t = apply_d_steps(&f).await;
    f.sp.put_raw(holder("hold-batch", "batch", "batch", 2));
    f.sp.put_raw(holder("hold-interactive", "ai", "interactive", 1));
    let ev = settle(&f);
    assert_eq!(ev, ["sp: batch/hold-batch admitted on gpu-a5000", "sp: ai/hold-interactive admitted on gpu-a5000"]);

    f.franca.put_raw(d4_job(&t));
    assert_eq!(settle(&f), Vec::<String>::new(), "no worker has room: nothing is dispatched");
    let waiting = job(&f.franca, "batch", "fabric-multikueue-test").unwrap();
    assert_eq!(waiting["spec"]["suspend"], true, "{waiting:#}");
    assert!(job(&f.sp, "batch", "fabric-multikueue-test").is_none());
    let (code, out) = verify_d4(&f);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("is in no worker (sp): not dispatched yet (queued in franca"), "{out}");
    f.franca.put_raw(short("local", "ai", "interactive"));
    assert_eq!(settle(&f), ["franca: ai/local admitted on gpu-a5500", "franca: ai/local completed"]);

    kueue::finish(&f.sp, "batch", "hold-batch");
    let ev = settle(&f);
    assert_eq!(ev[0], "franca: batch/fabric-multikueue-test dispatched to sp", "{ev:#?}");
    assert!(kueue::finished(&job(&f.franca, "batch", "fabric-multikueue-test").unwrap()), "{ev:#?}");
}

/// A queue borrows what the other queues of its cohort (`<site>-gpu`, as D.1 renders them) leave
/// unused, and the lender then waits for its own quota until the borrower finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_borrows_what_its_cohort_leaves_unused() {
    let f = ExampleFabric::start("multikueue-cohort");
    apply_d_steps(&f).await;
    f.sp.put_raw(holder("big", "batch", "batch", 3));
    assert_eq!(settle(&f), ["sp: batch/big admitted on gpu-a5000"], "2 GPUs of gpu-batch and 1 of gpu-interactive");
    f.sp.put_raw(short("small", "ai", "interactive"));
    assert_eq!(settle(&f), Vec::<String>::new(), "gpu-interactive's GPU is lent out");
    f.sp.put_raw(holder("bigger", "batch", "batch", 4));
    kueue::finish(&f.sp, "batch", "big");
    let ev = settle(&f);
    assert_eq!(ev, ["sp: ai/small admitted on gpu-a5000", "sp: ai/small completed"], "4 GPUs never fit sp's 3");
}

// ---- MultiKueue's manager on Karmada's VM (tests/data/multikueue-vm.yaml) --------------------

/// The example's servers with a fourth, the K3s of Karmada's VM, and the topology whose
/// MultiKueue manager it is (workers `[franca, sp]`); fabric has applied D.1 to D.3.
async fn vm_manager(name: &str) -> (ExampleFabric, TestApiServer, Topology) {
    let mut f = ExampleFabric::start(name);
    let vm = TestApiServer::start_blocking(shared_schemas());
    vm.kubeconfig(&f.dir.join("karmada-vm.yaml"), "karmada-vm");
    vm.simulate_controllers(Duration::from_millis(50));
    f.text = with_test_kubeconfigs(include_str!("data/multikueue-vm.yaml"), &f.dir);
    std::fs::write(f.dir.join("topology.yaml"), &f.text).unwrap();
    let t = apply_d_steps(&f).await;
    vm.hold("Job", true);
    (f, vm, t)
}

/// Kueue and MultiKueue over the VM and both sites until nothing more happens; `first` is the
/// site whose Kueue answers first when both have room (real Kueue: whichever reserves first).
fn settle_vm(f: &ExampleFabric, vm: &TestApiServer, first: &str) -> Vec<String> {
    let sites =
        if first == "sp" { [("sp", &f.sp), ("franca", &f.franca)] } else { [("franca", &f.franca), ("sp", &f.sp)] };
    let clusters = [("karmada-vm", vm), sites[0], sites[1]];
    let mut all = Vec::new();
    for _ in 0..10 {
        let ev = kueue::reconcile(&clusters);
        if ev.is_empty() {
            return all;
        }
        all.extend(ev);
    }
    panic!("Kueue does not settle: {all:#?}");
}

/// The events of a short Job `name` submitted at the VM that runs and finishes at `site`.
fn ran_at(name: &str, site: &str, flavor: &str) -> Vec<String> {
    vec![
        format!("karmada-vm: batch/{name} dispatched to {site}"),
        format!("{site}: batch/{name} admitted on {flavor}"),
        format!("{site}: batch/{name} completed"),
        format!("karmada-vm: batch/{name} finished in {site}; its copy there removed"),
    ]
}

/// Jobs submitted at the VM: Franca free, a Job runs in Franca; Franca's batch quota full, the
/// next runs in SP. Both free, Kueue gives no preference: the Job runs where a worker reserved
/// first, even SP though Franca is listed first. D.4's verify reads where its Job went.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_on_karmadas_vm_sends_a_job_to_a_site_with_room() {
    let (f, vm, t) = vm_manager("multikueue-vm").await;
    let config = vm.object("kueue.x-k8s.io/v1beta2", "MultiKueueConfig", None, "multikueue").unwrap();
    assert_eq!(config["spec"]["clusters"], json!(["franca", "sp"]));

    // Franca has room: D.4's Job runs there, and verify sees it finished in a worker.
    vm.put_raw(d4_job(&t));
    assert_eq!(settle_vm(&f, &vm, "franca"), ran_at("fabric-multikueue-test", "franca", "gpu-a5500"));
    assert!(kueue::finished(&job(&vm, "batch", "fabric-multikueue-test").unwrap()));
    let (code, out) = verify_d4(&f);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("completed in a worker (MultiKueue copied its status to karmada-vm"), "{out}");

    // Franca's batch queue full (its 2 GPUs and, through the cohort, interactive's one): SP.
    f.franca.put_raw(holder("hold-batch", "batch", "batch", 2));
    f.franca.put_raw(holder("hold-interactive", "ai", "interactive", 1));
    assert_eq!(settle_vm(&f, &vm, "franca").len(), 2, "Franca's holders admitted");
    vm.put_raw(short("overflow", "batch", "batch"));
    assert_eq!(settle_vm(&f, &vm, "franca"), ran_at("overflow", "sp", "gpu-a5000"));

    // Both have room again: whichever worker's Kueue reserves first gets the Job.
    kueue::finish(&f.franca, "batch", "hold-batch");
    kueue::finish(&f.franca, "ai", "hold-interactive");
    vm.put_raw(short("either", "batch", "batch"));
    assert_eq!(settle_vm(&f, &vm, "sp"), ran_at("either", "sp", "gpu-a5000"), "no preference for Franca");
    assert!(job(&f.franca, "batch", "either").is_none());
}

/// Both sites' batch queues full: the Job waits at the VM (verify says so), and runs at the first
/// site that frees its GPUs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_on_karmadas_vm_waits_while_no_site_has_room() {
    let (f, vm, t) = vm_manager("multikueue-vm-full").await;
    for s in [&f.franca, &f.sp] {
        s.put_raw(holder("hold-batch", "batch", "batch", 3));
    }
    assert_eq!(settle_vm(&f, &vm, "franca").len(), 2, "each site's 3 GPUs held");
    vm.put_raw(d4_job(&t));
    assert_eq!(settle_vm(&f, &vm, "franca"), Vec::<String>::new(), "no worker has room");
    assert_eq!(job(&vm, "batch", "fabric-multikueue-test").unwrap()["spec"]["suspend"], true);
    let (code, out) = verify_d4(&f);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("is in no worker (franca, sp): not dispatched yet (queued in karmada-vm"), "{out}");

    kueue::finish(&f.sp, "batch", "hold-batch");
    assert_eq!(settle_vm(&f, &vm, "franca"), ran_at("fabric-multikueue-test", "sp", "gpu-a5000"));
}
