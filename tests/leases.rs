//! The lock every operator sees (issue "Pull requests and teams"): a Kubernetes Lease per site's
//! cluster for that site's steps, and the host cluster's for steps that span sites. Against the
//! test API servers, whose writes carry resourceVersion (a stale one is a 409 Conflict):
//! a live holder refuses a run, naming it, while the other site's steps go on; a dead run's
//! Lease expires and is taken over; of two runs at once exactly one changes anything; `fabric
//! lock status` and `release` show and break Leases.

use fabric::apply::ApplyError;
use fabric_testkit::kube_api::{self, TestApiServer};
use fabric_testkit::run;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

#[path = "support/apply_step.rs"]
mod apply_step;
use apply_step::apply_step;

/// A Lease as another operator's run left it, renewed `ago` seconds ago.
fn lease(holder: &str, ago: i64) -> Value {
    let renewed = Timestamp::now() - SignedDuration::from_secs(ago);
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "fabric-apply", "namespace": "fabric-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60, "acquireTime": renewed.to_string(),
            "renewTime": renewed.to_string(), "leaseTransitions": 0}})
}

fn held_by(server: &TestApiServer) -> String {
    server
        .object("coordination.k8s.io/v1", "Lease", Some("fabric-system"), "fabric-apply")
        .map(|l| l["spec"]["holderIdentity"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sites_lease_guards_its_steps_and_a_dead_runs_lease_expires() {
    let f = kube_api::ExampleFabric::start("leases");
    let (dir, franca, sp, text) = (&f.dir, &f.franca, &f.sp, &f.text);
    let t = fabric::topology::load_str("t.yaml", text.clone()).unwrap().topology;
    let chart = |s: &TestApiServer| s.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue").is_some();

    // 1. Another operator's run holds sp's Lease: sp's step is refused, naming it; nothing changes.
    let other = "fabric run 20261201T090000Z-7 by ops@laptop (pid 7, since 1)";
    sp.put_raw_as(lease(other, 5), "fabric");
    let err = apply_step(&t, dir, "D.1@sp", "20261201T100000Z-1").await.unwrap_err();
    assert!(matches!(err, ApplyError::Locked { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("cluster.sp (Lease fabric-system/fabric-apply) is locked by another apply") && msg.contains(other),
        "{msg}"
    );
    assert!(!chart(sp), "nothing applied");
    // ...while franca's own step goes on: its Lease is franca's (a partition leaves each site
    // operable from its side).
    apply_step(&t, dir, "D.1@franca", "20261201T100000Z-2").await.expect("franca's step is not held");
    assert!(chart(franca));
    assert_eq!(held_by(franca), "", "released when the run ended");

    // 2. That run died: its Lease was last renewed 2 minutes ago, past its 60 s. This run takes
    // it over (a transition), applies, and releases it.
    sp.put_raw_as(lease(other, 120), "fabric");
    let changed = apply_step(&t, dir, "D.1@sp", "20261201T100000Z-3").await.expect("an expired Lease is taken over");
    assert_eq!(changed, ["D.1@sp"]);
    let l = sp.object("coordination.k8s.io/v1", "Lease", Some("fabric-system"), "fabric-apply").unwrap();
    assert_eq!(l["spec"]["leaseTransitions"], 1, "{l}");
    assert_eq!(held_by(sp), "");

    // 3. Two runs at once (two operators, two state directories): exactly one changes anything;
    // the other is refused naming the first, or comes after it and finds nothing to do.
    let sp_batch = "local_queues: [{ name: batch, namespace: batch }]\n\nmesh:";
    assert!(text.contains(sp_batch));
    let more = text.replace(
        sp_batch,
        "local_queues: [{ name: batch, namespace: batch }, { name: batch2, namespace: batch }]\n\nmesh:",
    );
    let t2 = fabric::topology::load_str("t.yaml", more).unwrap().topology;
    let (a_dir, b_dir) = (dir.join("a"), dir.join("b"));
    let (a, b) = tokio::join!(
        apply_step(&t2, &a_dir, "D.1@sp", "20261201T100000Z-4"),
        apply_step(&t2, &b_dir, "D.1@sp", "20261201T100000Z-5")
    );
    let changed: usize = [&a, &b].iter().map(|r| r.as_ref().map_or(0, Vec::len)).sum();
    assert_eq!(changed, 1, "exactly one run changed sp: {a:?} {b:?}");
    for (r, other_run) in [(&a, "20261201T100000Z-5"), (&b, "20261201T100000Z-4")] {
        if let Err(e) = r {
            assert!(matches!(e, ApplyError::Locked { .. }) && e.to_string().contains(other_run), "{e}");
        }
    }
    assert_eq!(held_by(sp), "");

    // 4. `fabric lock status` shows a Lease a dead run left, as stale; `release` breaks it.
    sp.put_raw_as(lease(other, 120), "fabric");
    let fabric =
        |args: &[&str]| run::out(&run::fabric_in(dir, &dir.join("topology.yaml"), &dir.join("ssh_config"), args));
    let status = fabric(&["lock", "status"]);
    assert!(status.contains(&format!("cluster.sp Lease: held by {other} (stale: not renewed for")), "{status}");
    assert!(status.contains("cluster.franca Lease: free"), "{status}");
    let released = fabric(&["lock", "release"]);
    assert!(released.contains(&format!("released cluster.sp: {other}")), "{released}");
    assert_eq!(held_by(sp), "");

    // 5. One history: the runs were shared next to sp's Lease, so another operator (another
    // state directory) lists them and rolls one back from there.
    let elsewhere = dir.join("elsewhere");
    let state = elsewhere.to_str().unwrap();
    let runs = fabric(&["--state-dir", state, "runs"]);
    assert!(runs.contains("20261201T100000Z-3  ok") && runs.contains("D.1@sp  [cluster.sp]"), "{runs}");
    let o = fabric(&["--state-dir", state, "rollback", "20261201T100000Z-3"]);
    assert!(o.contains("Rolled back run 20261201T100000Z-3: 1 step(s)."), "{o}");
    assert!(o.contains("fetched from the clusters"), "{o}");
    assert!(!chart(sp), "the other operator's rollback put sp back");
    let runs = fabric(&["runs"]);
    assert!(runs.contains("20261201T100000Z-3  rolled back"), "every operator sees it rolled back: {runs}");
}
