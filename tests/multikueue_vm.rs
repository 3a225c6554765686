//! MultiKueue's manager on Karmada's VM (`tests/data/multikueue-vm.yaml`), with the real Kueue
//! v0.15.2 at three real control planes: the VM's single-node K3s (the manager, where batch Jobs
//! are submitted) and both sites (the workers, Franca listed first). fabric applied its
//! Kubernetes steps (D.1 installs Kueue at the VM too). A Job runs at a site with room; with no
//! site having room it waits at the VM, and `fabric verify` says so. Kueue gives the first worker
//! no preference: whichever worker reserves first gets the Job (`docs/design.md`, "Local first,
//! then the other site?").

use std::sync::OnceLock;

use fabric::topology::Topology;
use fabric_testkit::realkube::Site;
use serde_json::json;
use tokio::sync::MutexGuard;

#[path = "support/apply_step.rs"]
mod apply_step;
#[path = "support/kueue_jobs.rs"]
mod kueue_jobs;
// The lab's plan helpers (`PLANNED`) serve `realkube_apply.rs`, not these tests.
#[allow(dead_code)]
#[path = "support/realkube_lab.rs"]
mod realkube_lab;

use kueue_jobs::{admitted, clear_jobs, finished, job, kept_out, send_d4, verify_d4, workload};
use realkube_lab::{Lab, apply_steps};

const D4: &str = "fabric-multikueue-test";

async fn lab() -> (MutexGuard<'static, ()>, &'static Lab, &'static Site, Topology) {
    static LAB: OnceLock<Lab> = OnceLock::new();
    static APPLY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let turn = TURN.lock().await;
    let l = LAB.get_or_init(|| Lab::start_from("multikueue-vm", include_str!("data/multikueue-vm.yaml"), true));
    // C.1 would install K3s on the VM over SSH: the VM's K3s is running already.
    APPLY.get_or_init(|| apply_steps(l, &["D.1@franca", "D.1@sp", "D.2", "D.3", "D.4"])).await;
    clear_jobs(l, &["batch", "ai"]);
    let vm = l.vm.as_ref().expect("the VM's K3s");
    (turn, l, vm, l.topology())
}

/// Waits until Job `batch/name`, submitted at the VM, completed there (its status copied back
/// from a worker); the worker MultiKueue ran it in.
fn ran_in(vm: &Site, name: &str) -> String {
    finished(vm, "batch", name, "Complete");
    let w = workload(vm, "batch", name).expect("the VM's Workload");
    w["status"]["clusterName"].as_str().unwrap_or_default().to_string()
}

/// Jobs submitted at the VM: Franca free, D.4's Job runs at a site; Franca's batch quota full,
/// the next runs in SP. verify reads where D.4's Job went.
#[tokio::test(flavor = "multi_thread")]
async fn a_manager_on_karmadas_vm_sends_a_job_to_a_site_with_room() {
    let (_turn, l, vm, t) = lab().await;
    let config = vm.get("multikueueconfig", "multikueue", None).expect("the MultiKueueConfig at the VM");
    assert_eq!(config["spec"]["clusters"], json!(["franca", "sp"]));

    send_d4(&t, vm);
    let worker = ran_in(vm, D4);
    assert!(worker == "franca" || worker == "sp", "{worker}");
    let (code, out) = verify_d4(l);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("completed in a worker (MultiKueue copied its status to karmada-vm"), "{out}");
    let pods = vm.kubectl_ok(&["get", "pods", "-A", "-o", "name"]);
    assert!(!pods.contains(D4), "no pod of it ran at the VM: {pods}");

    // Franca's batch queue full (its 2 GPUs and, through the cohort, interactive's one): SP.
    l.franca.apply(
        &[job("hold-batch", "batch", "batch", 2, true), job("hold-interactive", "ai", "interactive", 1, true)],
        "test",
    );
    admitted(&l.franca, "batch", "hold-batch");
    admitted(&l.franca, "ai", "hold-interactive");
    vm.apply(&[job("overflow", "batch", "batch", 1, false)], "test");
    assert_eq!(ran_in(vm, "overflow"), "sp");
    assert!(l.franca.get("job", "overflow", Some("batch")).is_none());
}

/// Both sites' batch queues full: the Job waits at the VM (verify says so), and runs at the
/// first site that frees its GPUs.
#[tokio::test(flavor = "multi_thread")]
async fn a_manager_on_karmadas_vm_waits_while_no_site_has_room() {
    let (_turn, l, vm, t) = lab().await;
    for s in [&l.franca, &l.sp] {
        s.apply(&[job("hold-batch", "batch", "batch", 3, true)], "test");
        admitted(s, "batch", "hold-batch");
    }
    send_d4(&t, vm);
    for s in [&l.franca, &l.sp] {
        let why = kept_out(s, "batch", D4);
        assert!(why.contains("nvidia.com/gpu"), "{}: {why}", s.name);
    }
    assert_eq!(vm.get("job", D4, Some("batch")).unwrap()["spec"]["suspend"], true);
    let (code, out) = verify_d4(l);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("is in no worker (franca, sp): not dispatched yet (queued in karmada-vm"), "{out}");

    l.sp.kubectl_ok(&["delete", "job", "hold-batch", "-n", "batch"]);
    assert_eq!(ran_in(vm, D4), "sp");
}
