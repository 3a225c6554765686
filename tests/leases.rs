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

/// A Lease that cannot be renewed mid-apply (issue #24, item 3): the API refuses its updates
/// (403, an operator's role that lost `update` on leases) or does not answer them (stalled),
/// while the step waits for its controllers. Past the renew deadline the run stops before its
/// next change, puts the step back and journals why, as client-go's leader election gives up
/// leading at `RenewDeadline`, before `LeaseDuration` lets anyone else take over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_cannot_be_renewed_stops_the_run_and_reverts_the_step() {
    for (case, answer, said) in [
        ("refused", kube_api::LeaseUpdates::Refused(403), "is forbidden"),
        ("stalled", kube_api::LeaseUpdates::Stalled, "no answer within"),
    ] {
        let f = kube_api::ExampleFabric::start(&format!("lease-lapse-{case}"));
        let (dir, sp) = (&f.dir, &f.sp);
        // Kueue's kinds never come: the step waits for them after applying its chart.
        sp.set_served("kueue.x-k8s.io", false);
        let t = fabric::topology::load_str("t.yaml", f.text.clone()).unwrap().topology;
        let run = format!("20261202T100000Z-{case}");
        let times = fabric::apply::lease::Times {
            duration: std::time::Duration::from_secs(6),
            renew_deadline: std::time::Duration::from_secs(3),
            retry_period: std::time::Duration::from_secs(1),
        };
        assert!(times.valid() && times.margin() == std::time::Duration::from_secs(3));
        // Once the run holds sp's Lease and has applied the chart, its updates fail.
        let holder = fabric::apply::holder(&run);
        let fault = async {
            let chart = || sp.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue").is_some();
            while !(held_by(sp) == holder && chart()) {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            sp.set_lease_updates(answer);
        };
        let (r, ()) = tokio::join!(apply_step_with(&t, dir, "D.1@sp", &run, times), fault);
        sp.set_lease_updates(kube_api::LeaseUpdates::Accepted);
        let err = r.expect_err("the run stops");
        assert!(matches!(err, ApplyError::Reverted { .. }), "{case}: {err}");
        let msg = err.to_string();
        assert!(
            msg.contains("cluster.sp: the Lease fabric-system/fabric-apply was not renewed for 3 s")
                && msg.contains(said),
            "{case}: {msg}"
        );
        assert!(
            sp.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue").is_none(),
            "{case}: the step's chart is back at its rollback point (absent)"
        );
        let journal = dir.join(".fabric-lease").join("runs").join(format!("{run}.jsonl"));
        let entries = fabric::apply::journal::Journal::read(&journal).unwrap();
        assert!(
            entries.iter().any(|e| matches!(e, fabric::apply::journal::Entry::Reverted { step, reason, .. }
                if step == "D.1@sp" && reason.contains("was not renewed"))),
            "{case}: {entries:?}"
        );
        assert!(matches!(entries.last(), Some(fabric::apply::journal::Entry::End { ok: false, .. })), "{entries:?}");
        let text = std::fs::read_to_string(&journal).unwrap();
        assert!(!text.contains(kube_api::TEST_TOKEN), "{case}: no credential in the journal");
    }
}

/// Applies step `key` of `t` like `apply_step`, with the Lease `times` given.
async fn apply_step_with(
    t: &fabric::topology::Topology,
    dir: &std::path::Path,
    key: &str,
    run: &str,
    times: fabric::apply::lease::Times,
) -> Result<Vec<String>, ApplyError> {
    use fabric::apply::{Options, StepWork};
    use fabric::catalog::{Catalog, StepGraph};
    use fabric::live::observe::{self, Targets};
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    let step = StepWork::alone(&g, t, key).unwrap();
    let targets = Targets::from_topology(t, &fabric::transport::ssh_config::SshConfig::default()).unwrap();
    let live = observe::observe(&step.resources, &observe::key_targets(&step.resources), &targets).await;
    let opts = Options {
        run: run.into(),
        state_dir: dir.join(".fabric-lease"),
        confirm_timeout: std::time::Duration::from_secs(30),
        force_conflicts: false,
        wait_timeout: std::time::Duration::from_secs(60),
        lease: times,
    };
    let mut j = fabric::apply::journal::Journal::create(&opts.state_dir, run).unwrap();
    fabric::apply::run(t, std::slice::from_ref(&step), &targets, live, &opts, &mut j, &|_| {}).await
}

/// Issue 36, item 1, for `fabric runs`: a runs folder it cannot read is never "No runs." No
/// folder is no runs (exit 0); a journal found that cannot be read is listed with its path and
/// the command exits 3 (partial), the runs it read still listed; a folder that cannot be listed
/// is an error (exit 1) naming it. The test runs as root, which file permissions do not stop, so
/// the unreadable things are made of what no permission changes: a directory and a dangling
/// symbolic link where a journal file goes, a journal whose line is not JSON, and a regular file
/// where the runs folder goes.
#[test]
fn runs_names_what_it_cannot_read() {
    let f = kube_api::ExampleFabric::start("runs-unreadable");
    let dir = &f.dir;
    let fabric = |args: &[&str]| run::fabric_in(dir, &dir.join("topology.yaml"), &dir.join("ssh_config"), args);
    let o = fabric(&["runs"]);
    assert_eq!(o.status.code(), Some(0), "{}", run::out(&o));
    assert_eq!(run::stdout(&o).trim(), "No runs.", "{}", run::out(&o));

    // Named as fabric names them: under the state directory as given (`.fabric`, relative).
    let runs = std::path::PathBuf::from(".fabric").join("runs");
    std::fs::create_dir_all(dir.join(&runs)).unwrap();
    let good = "20261201T090000Z-1";
    std::fs::write(
        dir.join(&runs).join(format!("{good}.jsonl")),
        format!(
            "{}\n{}\n",
            json!({"event": "start", "run": good, "fabric": "0", "topology_digest": "0", "user": "ops@laptop"}),
            json!({"event": "end", "run": good, "ok": true})
        ),
    )
    .unwrap();
    let a_dir = runs.join("20261201T090000Z-2.jsonl");
    std::fs::create_dir(dir.join(&a_dir)).unwrap();
    let dangling = runs.join("20261201T090000Z-3.jsonl");
    std::os::unix::fs::symlink(dir.join("nowhere.jsonl"), dir.join(&dangling)).unwrap();
    let corrupt = runs.join("20261201T090000Z-4.jsonl");
    std::fs::write(dir.join(&corrupt), "{\"event\": \"start\", not json\n").unwrap();
    std::fs::write(dir.join(&runs).join("notes.txt"), "not a journal: not looked at\n").unwrap();

    let o = fabric(&["runs"]);
    let text = run::out(&o);
    assert_eq!(o.status.code(), Some(3), "partial:\n{text}");
    let out = run::stdout(&o);
    assert!(out.contains(&format!("{good}  ok")) && out.contains("by ops@laptop"), "what was read is listed:\n{text}");
    for p in [&a_dir, &dangling, &corrupt] {
        assert!(out.contains(&format!("?  unreadable: {}: ", p.display())), "{} listed:\n{text}", p.display());
    }
    assert!(out.contains(&format!("{}: line 1: ", corrupt.display())), "{text}");
    assert!(!text.contains("notes.txt"), "{text}");
    assert!(run::stderr(&o).contains("3 run journal(s) could not be read: those runs are unknown"), "{text}");

    let o = fabric(&["runs", "--format", "json"]);
    assert_eq!(o.status.code(), Some(3), "{}", run::out(&o));
    let v: Value = serde_json::from_str(&run::stdout(&o)).unwrap();
    assert_eq!(v["runs"][0]["run"], good, "{v}");
    assert_eq!(v["unreadable"].as_array().map(Vec::len), Some(3), "{v}");

    // A runs "folder" that is a file: nothing can be listed, an error naming it.
    std::fs::remove_dir_all(dir.join(&runs)).unwrap();
    std::fs::write(dir.join(&runs), "").unwrap();
    let o = fabric(&["runs"]);
    let text = run::out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(run::stdout(&o).is_empty(), "not \"No runs.\":\n{text}");
    assert!(text.contains(&format!("cannot read the runs folder {}: ", runs.display())), "{text}");
}
