//! Where a batch Job runs (issue 13, part 4; issue 34, item 3) with the real Kueue v0.15.2 and
//! MultiKueue at both sites of the real-control-plane lab (`support/realkube_lab.rs`), after
//! fabric applied its Kubernetes steps (D.1 at both sites, D.2, D.3, D.4). What it shows is what
//! Kueue does with the queues fabric renders: a site's own queues run their Jobs at the site while
//! they have room; the dispatching queue sends every Job to a worker with room, and waits while
//! none has, whatever the manager's own GPUs do (`docs/design.md`, "MultiKueue: local first?").
//!
//! Each test starts from a lab without Jobs (`clear_jobs`) and the tests take turns: they share
//! the sites' GPUs. Kueue's verdicts are read from its Workloads, its messages as Kueue writes
//! them; kwok completes a Job's pod at once unless the Job is a holder.

use std::sync::OnceLock;

use fabric::apply::StepWork;
use fabric::catalog::{Catalog, StepGraph};
use fabric::topology::Topology;
use serde_json::{Value, json};
use tokio::sync::MutexGuard;

#[path = "support/apply_step.rs"]
mod apply_step;
#[path = "support/kueue_jobs.rs"]
mod kueue_jobs;
// The lab's plan helpers (`PLANNED`) serve `realkube_apply.rs`, not these tests.
#[allow(dead_code)]
#[path = "support/realkube_lab.rs"]
mod realkube_lab;

use kueue_jobs::{admitted, clear_jobs, finished, is_true, job, kept_out, send_d4, verify_d4, workload};
use realkube_lab::{Lab, apply_all};

/// The lab with fabric's Kubernetes steps applied, once for this binary, and this test's turn.
async fn lab() -> (MutexGuard<'static, ()>, &'static Lab, Topology) {
    static LAB: OnceLock<Lab> = OnceLock::new();
    static APPLY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let turn = TURN.lock().await;
    let l = LAB.get_or_init(|| Lab::start("multikueue"));
    APPLY.get_or_init(|| apply_all(l)).await;
    clear_jobs(l, &["batch", "ai"]);
    // The queues as fabric applied them, whatever an earlier test (failed or not) changed.
    let t = l.topology();
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    for key in ["D.1@franca", "D.1@sp", "D.3"] {
        let run = format!("20261206T03{:04}Z-1", RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        apply_step::apply_step(&t, &l.dir, key, &run).await.unwrap_or_else(|e| panic!("{key} again: {e}"));
    }
    (turn, l, t)
}

const D4: &str = "fabric-multikueue-test";

/// The flavor Kueue assigned the GPUs of an admitted Workload.
fn gpu_flavor(w: &Value) -> &str {
    w["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"].as_str().unwrap_or_default()
}

/// A short Job (its pod completes at once) of one GPU.
fn short(name: &str, ns: &str, queue: &str) -> Value {
    job(name, ns, queue, 1, false)
}

/// A Job of `gpus` GPUs whose pod runs until the Job is deleted.
fn holder(name: &str, ns: &str, queue: &str, gpus: u32) -> Value {
    job(name, ns, queue, gpus, true)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_site_queue_runs_at_the_site_and_the_dispatching_queue_in_a_worker_with_room() {
    let (_turn, l, t) = lab().await;

    // Franca's own queue (gpu-interactive, 1 GPU): a Job runs in Franca, on Franca's flavor,
    // whose node label Kueue puts in the Job's pods.
    l.franca.apply(&[short("local", "ai", "interactive")], "test");
    let w = admitted(&l.franca, "ai", "local");
    assert_eq!(
        (w["status"]["admission"]["clusterQueue"].as_str(), gpu_flavor(&w)),
        (Some("gpu-interactive"), "gpu-a5500")
    );
    let local = finished(&l.franca, "ai", "local", "Complete");
    assert_eq!(local["spec"]["template"]["spec"]["nodeSelector"]["gpu.model"], "a5500", "{local:#}");
    assert!(l.sp.get("job", "local", Some("ai")).is_none());

    // The dispatching queue: D.4's Job, which asks cpu and memory besides its GPU as a real Job
    // does, runs in SP while SP has room; MultiKueue copies its status back and removes SP's
    // copy once it finished.
    send_d4(&t, &l.franca);
    let at_manager = finished(&l.franca, "batch", D4, "Complete");
    assert_eq!(at_manager["spec"]["managedBy"], "kueue.x-k8s.io/multikueue", "{at_manager:#}");
    let w = workload(&l.franca, "batch", D4).expect("the manager's Workload");
    assert_eq!(w["status"]["clusterName"], "sp", "the worker that ran it: {w:#}");
    l.sp.wait_until(60, "SP's copy of the finished Job removed", |s| s.get("job", D4, Some("batch")).is_none());
    let pods = l.franca.kubectl_ok(&["get", "pods", "-n", "batch", "-o", "name"]);
    assert!(!pods.contains(D4), "no pod of it ran at Franca: {pods}");
    // verify reads the Job's end at Franca, though SP's copy is gone.
    let (code, out) = verify_d4(l);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("batch/fabric-multikueue-test completed in a worker"), "{out}");
    assert!(out.contains("dispatching ClusterQueue Active") && out.contains("MultiKueue worker Active"), "{out}");
}

/// Issue 22, item 3: a ClusterQueue that covers only `nvidia.com/gpu` (what fabric rendered
/// before) admits no real Job: SP's Kueue keeps a Job that asks cpu and memory out, as Kueue's
/// flavor assigner says. With fabric's queues (cpu and memory covered) the same Job runs; and cpu is
/// counted: a Job asking more cores than the site's GPU nodes offer waits though GPUs are free.
#[tokio::test(flavor = "multi_thread")]
async fn a_queue_must_cover_the_cpu_and_memory_a_job_asks() {
    let (_turn, l, t) = lab().await;
    let cq = l.sp.get("clusterqueue", "gpu-batch", None).expect("SP's gpu-batch");
    let rg = &cq["spec"]["resourceGroups"][0];
    assert_eq!(rg["coveredResources"], json!(["cpu", "memory", "nvidia.com/gpu"]), "{cq:#}");
    // SP's two GPU nodes' share: 2 of its 3 GPUs' worth of 3 × 16 cores and 3 × 62 GiB.
    assert_eq!(
        rg["flavors"][0]["resources"],
        json!([{"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "124Gi"},
            {"name": "nvidia.com/gpu", "nominalQuota": "2"}])
    );
    // What fabric rendered before issue 22, written by hand.
    let gpu_only = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "gpu-batch"},
        "spec": {"namespaceSelector": {}, "cohortName": cq["spec"]["cohortName"],
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "gpu-a5000", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]}});
    l.sp.apply(&[gpu_only], "fabric");
    l.sp.apply(&[holder("direct", "batch", "batch", 1)], "test");
    let why = kept_out(&l.sp, "batch", "direct");
    // Kueue names the first uncovered resource it meets, cpu or memory (a Go map's order).
    let uncovered =
        ["cpu", "memory"].iter().any(|r| why.contains(&format!("resource {r} unavailable in ClusterQueue")));
    assert!(uncovered, "{why}");

    // fabric's queue again (D.1@sp applied anew): the Job runs.
    apply_step::apply_step(&t, &l.dir, "D.1@sp", "20261206T010000Z-2").await.expect("D.1@sp again");
    admitted(&l.sp, "batch", "direct");
    // cpu counts: 49 cores are more than sp's queues and its cohort offer (3 × 16), 1 GPU or not.
    let mut hungry = holder("hungry", "batch", "batch", 1);
    hungry["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("49");
    l.sp.apply(&[hungry], "test");
    let why = kept_out(&l.sp, "batch", "hungry");
    assert!(why.contains("cpu") && why.contains("quota"), "{why}");
    assert!(!why.contains("nvidia.com/gpu"), "the GPU fits, cpu does not: {why}");
}

/// Issue 22, item 8: with Franca the manager, Franca's batch Jobs have a queue of their own beside
/// the dispatching one, and the plan says which goes where: a Job in `batch/batch-local` runs in
/// Franca on Franca's GPUs, one in `batch/batch` is dispatched to SP. The dispatching queue is
/// outside Franca's cohort: Franca's own queues cannot borrow its dispatch budget beyond Franca's
/// 3 GPUs.
#[tokio::test(flavor = "multi_thread")]
async fn the_manager_site_runs_its_local_batch_queue_and_dispatches_the_other() {
    let (_turn, l, t) = lab().await;
    l.franca.apply(&[holder("here", "batch", "batch-local", 1), short("there", "batch", "batch")], "test");
    let w = admitted(&l.franca, "batch", "here");
    assert_eq!(
        (w["status"]["admission"]["clusterQueue"].as_str(), gpu_flavor(&w)),
        (Some("gpu-batch-local"), "gpu-a5500")
    );
    let here = l.franca.get("job", "here", Some("batch")).unwrap();
    assert_eq!(here["spec"]["template"]["spec"]["nodeSelector"]["gpu.model"], "a5500", "{here:#}");
    finished(&l.franca, "batch", "there", "Complete");
    assert_eq!(workload(&l.franca, "batch", "there").unwrap()["status"]["clusterName"], "sp");
    l.franca.kubectl_ok(&["delete", "job", "here", "-n", "batch"]);

    // Franca's GPUs are 3: its own queues (2 + 1 through the cohort) may take all 3, not a 4th
    // by borrowing the dispatching queue's budget.
    l.franca.apply(&[holder("local-3", "batch", "batch-local", 3)], "test");
    admitted(&l.franca, "batch", "local-3");
    l.franca.apply(&[holder("local-1", "batch", "batch-local", 1)], "test");
    let why = kept_out(&l.franca, "batch", "local-1");
    assert!(why.contains("nvidia.com/gpu"), "no 4th GPU at franca: {why}");

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
/// finishes, it is dispatched and runs there. A Job of Franca's own interactive queue runs in
/// Franca meanwhile: local-first is a per-queue choice with Kueue 0.15.
#[tokio::test(flavor = "multi_thread")]
async fn the_dispatching_queue_waits_for_a_worker_with_room() {
    let (_turn, l, t) = lab().await;
    l.sp.apply(
        &[holder("hold-batch", "batch", "batch", 2), holder("hold-interactive", "ai", "interactive", 1)],
        "test",
    );
    admitted(&l.sp, "batch", "hold-batch");
    admitted(&l.sp, "ai", "hold-interactive");

    send_d4(&t, &l.franca);
    // MultiKueue offers it to SP, whose Kueue keeps it out: no worker has room.
    let why = kept_out(&l.sp, "batch", D4);
    assert!(why.contains("nvidia.com/gpu"), "{why}");
    let waiting = l.franca.get("job", D4, Some("batch")).unwrap();
    assert_eq!(waiting["spec"]["suspend"], true, "{waiting:#}");
    assert!(l.sp.get("job", D4, Some("batch")).is_none(), "only a Workload is offered, no Job");
    let (code, out) = verify_d4(l);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("is in no worker (sp): not dispatched yet (queued in franca"), "{out}");
    l.franca.apply(&[short("local", "ai", "interactive")], "test");
    finished(&l.franca, "ai", "local", "Complete");

    l.sp.kubectl_ok(&["delete", "job", "hold-batch", "-n", "batch"]);
    finished(&l.franca, "batch", D4, "Complete");
    assert_eq!(workload(&l.franca, "batch", D4).unwrap()["status"]["clusterName"], "sp");
}

/// A queue borrows what the other queues of its cohort (`<site>-gpu`, as D.1 renders them) leave
/// unused, and the lender then waits for its own quota until the borrower finishes.
#[tokio::test(flavor = "multi_thread")]
async fn a_queue_borrows_what_its_cohort_leaves_unused() {
    let (_turn, l, _) = lab().await;
    l.sp.apply(&[holder("big", "batch", "batch", 3)], "test");
    let w = admitted(&l.sp, "batch", "big");
    assert_eq!(w["status"]["admission"]["clusterQueue"], "gpu-batch", "2 GPUs of gpu-batch and 1 of gpu-interactive");
    l.sp.apply(&[short("small", "ai", "interactive")], "test");
    let why = kept_out(&l.sp, "ai", "small");
    assert!(why.contains("nvidia.com/gpu"), "gpu-interactive's GPU is lent out: {why}");
    l.sp.apply(&[holder("bigger", "batch", "batch", 4)], "test");
    kept_out(&l.sp, "batch", "bigger");
    l.sp.kubectl_ok(&["delete", "job", "big", "-n", "batch"]);
    finished(&l.sp, "ai", "small", "Complete");
    let bigger = workload(&l.sp, "batch", "bigger").unwrap();
    assert!(!is_true(&bigger, "QuotaReserved"), "4 GPUs never fit sp's 3: {bigger:#}");
}

/// The seed's D.4 ("Franca está lotada, SP tem GPU livre?"): Franca's local batch GPUs are all
/// held by running Jobs, so one more local Job waits for quota; a Job sent to the dispatching
/// queue at Franca is dispatched by MultiKueue to SP, runs and completes there, and its status
/// comes back to Franca's Job. Then `fabric verify` reports D.4 from these real objects.
#[tokio::test(flavor = "multi_thread")]
async fn d4_a_batch_job_at_a_full_franca_runs_in_sp() {
    let (_turn, l, t) = lab().await;
    let franca = t.sites.iter().find(|s| s.name == "franca").unwrap();
    let local = franca.queues.iter().find(|q| q.name == "gpu-batch-local").expect("Franca's local batch queue");
    let local_queue = &local.local_queues[0].name;
    // Fill Franca's local batch queue with running one-GPU Jobs until Kueue admits no more: its
    // own quota, and what its cohort lends it, are all in use.
    let franca_gpus: u32 = franca.cluster.nodes.iter().filter_map(|n| n.gpu.as_ref()).map(|g| g.count).sum();
    let mut filled = 0;
    let why = loop {
        assert!(filled <= franca_gpus, "Kueue admitted {filled} one-GPU Jobs on {franca_gpus} GPUs");
        let name = format!("fill-{filled}");
        l.franca.apply(&[job(&name, "batch", local_queue, 1, true)], "test");
        let mut verdict = None;
        l.franca.wait_until(60, &format!("Kueue's verdict on {name}"), |s| {
            let Some(w) = workload(s, "batch", &name) else { return false };
            verdict = match kueue_jobs::condition(&w, "QuotaReserved") {
                Some(c) if c["status"] == "True" && is_true(&w, "Admitted") => Some(None),
                Some(c) if c["status"] == "False" && c["message"].as_str().is_some_and(|m| !m.is_empty()) => {
                    Some(Some(c["message"].as_str().unwrap_or_default().to_string()))
                }
                _ => None,
            };
            verdict.is_some()
        });
        match verdict.flatten() {
            Some(why) => break why,
            None => filled += 1,
        }
    };
    assert!(filled >= local.gpu_quota, "Franca's local queue ran {filled} Jobs, its quota is {}", local.gpu_quota);
    assert!(why.contains("nvidia.com/gpu"), "fill-{filled} waits on GPU quota: {why}");

    // The same work sent to the dispatching queue runs in SP.
    let mk = t.multikueue.as_ref().expect("the example has MultiKueue");
    let dispatch = t.sites.iter().flat_map(|s| &s.queues).find(|q| q.name == mk.queue).expect("the dispatching queue");
    l.franca.apply(&[job("goes-to-sp", "batch", &dispatch.local_queues[0].name, 1, false)], "test");
    finished(&l.franca, "batch", "goes-to-sp", "Complete");
    let w = workload(&l.franca, "batch", "goes-to-sp").unwrap();
    assert_eq!(w["status"]["clusterName"], "sp", "MultiKueue's Workload names the worker: {w:#}");
    assert!(l.franca.log("kueue").contains("goes-to-sp"), "Franca's Kueue manager handled the Job");
    let pods_at_franca = l.franca.kubectl_ok(&["get", "pods", "-n", "batch", "-o", "name"]);
    assert!(!pods_at_franca.contains("goes-to-sp"), "no pod of it ran at Franca: {pods_at_franca}");

    // fabric verify reports D.4 from the real objects (its own test Job is dispatched too).
    send_d4(&t, &l.franca);
    finished(&l.franca, "batch", D4, "Complete");
    let (code, out) = verify_d4(l);
    assert_eq!(code, Some(0), "verify D.4:\n{out}");
    assert!(out.contains("PASS") && !out.contains("FAIL"), "{out}");
}
