//! Issue 36, item 6: `--lock-timeout` (wait for a colleague's lock instead of failing) and the
//! JSON event stream of apply and rollback, against the test API servers (no network namespace):
//! another run's Lease held, then released within the timeout, lets the run go on (told once who
//! holds it and that it waits); held past the timeout, the run fails as without it, naming the
//! holder. `--json` prints one event per line, in the run's order, ending with a summary, and no
//! credential.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use fabric::apply::ApplyError;
use fabric_testkit::kube_api::{self, ExampleFabric, TestApiServer};
use fabric_testkit::run;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

#[path = "support/apply_step.rs"]
mod apply_step;

const OTHER: &str = "fabric run 20261201T090000Z-7 by ops@laptop (pid 7, since 1)";

/// The Lease as another operator's live run holds it (renewed now), or free (`holder` empty).
fn lease(holder: &str) -> Value {
    let now = Timestamp::now() - SignedDuration::from_secs(1);
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "fabric-apply", "namespace": "fabric-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60, "acquireTime": now.to_string(),
            "renewTime": now.to_string(), "leaseTransitions": 0}})
}

fn topology(f: &ExampleFabric) -> fabric::topology::Topology {
    fabric::topology::load_str("t.yaml", f.text.clone()).unwrap().topology
}

/// Applies step `key` through the engine as `fabric apply --lock-timeout` does, its progress
/// lines collected in `lines`.
async fn apply_waiting(
    t: &fabric::topology::Topology,
    dir: &std::path::Path,
    key: &str,
    run: &str,
    wait: Duration,
    lines: &Mutex<Vec<String>>,
) -> Result<Vec<String>, ApplyError> {
    let progress = |l: &str| lines.lock().unwrap().push(l.to_string());
    let hooks = fabric::apply::Hooks { progress: &progress, events: None, lock_timeout: wait };
    apply_step::apply_step_with_hooks(t, dir, key, run, hooks).await
}

/// The lines that say the run waits for `OTHER`.
fn waits(lines: &Mutex<Vec<String>>) -> Vec<String> {
    lines.lock().unwrap().iter().filter(|l| l.contains("waiting up to")).cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_released_within_the_lock_timeout_lets_the_apply_go_on() {
    let f = ExampleFabric::start("lock-wait-released");
    let t = topology(&f);
    f.sp.put_raw_as(lease(OTHER), "fabric");
    let lines = Mutex::new(Vec::new());
    let started = Instant::now();
    let release = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        f.sp.put_raw_as(lease(""), "fabric");
    };
    let wait = Duration::from_secs(60);
    let (r, ()) = tokio::join!(apply_waiting(&t, &f.dir, "D.1@sp", "20261206T100000Z-1", wait, &lines), release);
    assert_eq!(r.expect("applied once the Lease was free"), ["D.1@sp"]);
    assert!(started.elapsed() >= Duration::from_secs(3), "it waited: {:?}", started.elapsed());
    let said = waits(&lines);
    assert_eq!(
        said,
        [format!(
            "cluster.sp (Lease fabric-system/fabric-apply) is locked by another apply: {OTHER}; waiting up to 60 s for it (--lock-timeout)"
        )],
        "told once who holds it: {:?}",
        lines.lock().unwrap()
    );
    assert!(f.sp.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_held_past_the_lock_timeout_fails_naming_its_holder() {
    let f = ExampleFabric::start("lock-wait-held");
    let t = topology(&f);
    f.sp.put_raw_as(lease(OTHER), "fabric");
    let lines = Mutex::new(Vec::new());
    let started = Instant::now();
    let wait = Duration::from_secs(2);
    let err = apply_waiting(&t, &f.dir, "D.1@sp", "20261206T100000Z-2", wait, &lines).await.unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, ApplyError::Locked { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("cluster.sp (Lease fabric-system/fabric-apply) is locked by another apply") && msg.contains(OTHER),
        "{msg}"
    );
    assert!(err.help().contains("--lock-timeout"), "{}", err.help());
    assert!(took >= wait && took < Duration::from_secs(20), "{took:?}");
    assert_eq!(waits(&lines).len(), 1, "{:?}", lines.lock().unwrap());
    assert!(f.sp.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue").is_none(), "nothing applied");
    // Without --lock-timeout, refused at once, as before.
    let lines = Mutex::new(Vec::new());
    let started = Instant::now();
    let err = apply_waiting(&t, &f.dir, "D.1@sp", "20261206T100000Z-3", Duration::ZERO, &lines).await.unwrap_err();
    assert!(matches!(err, ApplyError::Locked { .. }) && started.elapsed() < wait, "{err}");
    assert!(waits(&lines).is_empty());
}

/// Every stdout line of a `--json` run, parsed; each must be one JSON object.
fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            assert!(v["type"].is_string() && v["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')), "{l}");
            v
        })
        .collect()
}

fn types(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["type"].as_str().unwrap().to_string()).collect()
}

/// The position of the first event of `kind` (with `step`, when given).
fn at(events: &[Value], kind: &str, step: Option<&str>) -> usize {
    events
        .iter()
        .position(|e| e["type"] == kind && step.is_none_or(|s| e["step"] == s))
        .unwrap_or_else(|| panic!("no {kind} {step:?} in {events:#?}"))
}

/// `fabric ARGS` on the example fabric in `dir`, its runs journaled there.
fn fabric_at(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let state = dir.display().to_string();
    let args: Vec<&str> = ["--state-dir", state.as_str()].into_iter().chain(args.iter().copied()).collect();
    run::fabric_in(dir, &dir.join("topology.yaml"), &dir.join("ssh_config"), &args)
}

fn fabric(f: &ExampleFabric, args: &[&str]) -> std::process::Output {
    fabric_at(&f.dir, args)
}

/// `fabric ARGS` while `server`'s Lease is held by `OTHER`, released 3 s after the start: its
/// output, and how long it took.
async fn fabric_while_held(
    f: &ExampleFabric,
    server: &TestApiServer,
    args: &[&str],
) -> (std::process::Output, Duration) {
    server.put_raw_as(lease(OTHER), "fabric");
    let release = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        server.put_raw_as(lease(""), "fabric");
    };
    let (dir, args): (_, Vec<String>) = (f.dir.clone(), args.iter().map(|a| a.to_string()).collect());
    let started = Instant::now();
    let cmd =
        tokio::task::spawn_blocking(move || fabric_at(&dir, &args.iter().map(String::as_str).collect::<Vec<_>>()));
    let (o, ()) = tokio::join!(cmd, release);
    (o.unwrap(), started.elapsed())
}

/// `fabric rollback --json --lock-timeout`: it waits for the Lease another run holds, says so
/// once as a message event, then puts the step back; every line is an event, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_json_waits_for_the_lease_and_reports_each_step() {
    let f = ExampleFabric::start("lock-wait-rollback");
    let t = topology(&f);
    let run_id = "20261206T100000Z-4";
    apply_step::apply_step(&t, &f.dir, "D.1@sp", run_id).await.expect("applied");
    let (o, took) = fabric_while_held(&f, &f.sp, &["rollback", run_id, "--lock-timeout", "1m", "--json"]).await;
    assert_eq!(o.status.code(), Some(0), "{}", run::out(&o));
    assert!(took >= Duration::from_secs(3), "it waited: {took:?}");
    let out = run::stdout(&o);
    let ev = events(&out);
    let kinds = types(&ev);
    assert_eq!(kinds.first().map(String::as_str), Some("start"), "{kinds:?}");
    assert_eq!(ev[0]["command"], "rollback");
    assert_eq!(ev[0]["format_version"], "1.0");
    assert_eq!(kinds.last().map(String::as_str), Some("summary"), "{kinds:?}");
    let waited: Vec<&Value> = ev
        .iter()
        .filter(|e| e["type"] == "message" && e["message"].as_str().unwrap().contains("waiting up to"))
        .collect();
    assert_eq!(waited.len(), 1, "{out}");
    assert!(waited[0]["message"].as_str().unwrap().contains(OTHER), "{out}");
    let done = at(&ev, "step_complete", Some("D.1@sp"));
    assert_eq!(ev[done]["outcome"], "rolled-back", "{out}");
    assert!(at(&ev, "message", None) < done);
    let s = ev.last().unwrap();
    assert_eq!((s["outcome"].as_str(), s["run"].as_str()), (Some("rolled-back"), Some(run_id)), "{s}");
    assert_eq!(s["steps"], json!(["D.1@sp"]));
    assert!(!out.contains(kube_api::TEST_TOKEN), "no credential in the events");
    assert!(f.sp.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue").is_none(), "put back");

    // Held past the timeout: exit 1 once it waited, the holder named on stderr and in the
    // summary event; nothing put back.
    let run2 = "20261206T100000Z-5";
    apply_step::apply_step(&t, &f.dir, "D.1@sp", run2).await.expect("applied again");
    f.sp.put_raw_as(lease(OTHER), "fabric");
    let started = Instant::now();
    let o = fabric(&f, &["rollback", run2, "--lock-timeout", "2s", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", run::out(&o));
    assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(run::stderr(&o).contains(OTHER), "{}", run::stderr(&o));
    let ev = events(&run::stdout(&o));
    let s = ev.last().unwrap();
    assert_eq!(s["type"], "summary");
    assert_eq!(s["outcome"], "failed");
    assert!(s["message"].as_str().unwrap().contains(OTHER), "{s}");
    assert!(s["help"].as_str().unwrap().contains("--lock-timeout"), "{s}");
    assert_eq!(s["code"], "apply::failed");
    assert!(f.sp.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "kueue").is_some(), "left as it was");
}

/// `fabric apply --json --lock-timeout` on real steps (D.2 and D.3, fabric-wide: guarded by the
/// host cluster's Lease, Franca's; what they need, C.1 and D.1, applied first through the
/// engine): it waits for the Lease a colleague's run holds, says so once, then applies; every
/// line is one JSON event, in the run's order, and no credential or diff is in them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_json_waits_for_a_colleagues_lease_and_reports_every_event_in_order() {
    let f = ExampleFabric::start("lock-wait-apply-json");
    let t = topology(&f);
    for (i, key) in ["C.1", "D.1@franca", "D.1@sp"].iter().enumerate() {
        apply_step::apply_step(&t, &f.dir, key, &format!("20261206T0900{i:02}Z-1"))
            .await
            .unwrap_or_else(|e| panic!("{key}: {e}"));
    }
    let args = ["apply", "--step", "D.2", "--step", "D.3", "--auto-approve", "--lock-timeout", "1m", "--json"];
    let (o, took) = fabric_while_held(&f, &f.franca, &args).await;
    assert_eq!(o.status.code(), Some(0), "{}", run::out(&o));
    assert!(took >= Duration::from_secs(3), "it waited: {took:?}");
    let out = run::stdout(&o);

    let ev = events(&out);
    let kinds = types(&ev);
    assert_eq!(kinds.first().map(String::as_str), Some("start"), "{out}");
    assert_eq!((ev[0]["command"].as_str(), ev[0]["format_version"].as_str()), (Some("apply"), Some("1.0")));
    assert_eq!(kinds.iter().filter(|k| *k == "summary").count(), 1, "{out}");
    assert_eq!(kinds.last().map(String::as_str), Some("summary"), "{out}");
    let waited: Vec<&Value> = ev
        .iter()
        .filter(|e| e["type"] == "message" && e["message"].as_str().unwrap().contains("waiting up to 60 s"))
        .collect();
    assert_eq!(waited.len(), 1, "told once: {out}");
    assert!(waited[0]["message"].as_str().unwrap().contains(OTHER), "{out}");
    // In order: the plan's changes, then per step its start, its changes, its end.
    let first_change = at(&ev, "planned_change", None);
    for step in ["D.2", "D.3"] {
        let (start, sent, end) = (
            at(&ev, "step_start", Some(step)),
            at(&ev, "apply_start", Some(step)),
            at(&ev, "step_complete", Some(step)),
        );
        assert!(first_change < start && start < sent && sent < end, "{step}: {out}");
        assert_eq!(ev[end]["outcome"], "applied", "{out}");
        assert!(at(&ev, "planned_change", Some(step)) < start, "{out}");
        assert!(at(&ev, "message", None) < end);
        for e in ev.iter().filter(|e| e["type"] == "apply_start" && e["step"] == step) {
            assert!(matches!(e["action"].as_str(), Some("create" | "update" | "delete")), "{e}");
            assert!(e["address"].as_str().unwrap().contains('/'), "{e}");
        }
    }
    assert!(at(&ev, "message", None) < at(&ev, "step_start", None), "the wait comes before any step");
    let s = ev.last().unwrap();
    assert_eq!(s["outcome"], "applied", "{s}");
    assert_eq!(s["steps"], json!(["D.2", "D.3"]), "{s}");
    let run_id = s["run"].as_str().unwrap();
    assert!(f.dir.join("runs").join(format!("{run_id}.jsonl")).exists(), "{s}");
    assert!(!out.contains(kube_api::TEST_TOKEN) && !out.contains("\"diff\"") && !out.contains("@@"), "{out}");

    // Nothing left to do: one summary saying so. Without --auto-approve, refused before any read.
    let o = fabric(&f, &["apply", "--step", "D.2", "--auto-approve", "--json"]);
    let ev = events(&run::stdout(&o));
    assert_eq!(o.status.code(), Some(0), "{}", run::out(&o));
    assert_eq!(types(&ev), ["start", "summary"], "{}", run::stdout(&o));
    assert_eq!(ev[1]["outcome"], "no-changes");
    let o = fabric(&f, &["apply", "--step", "D.2", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", run::out(&o));
    let ev = events(&run::stdout(&o));
    assert_eq!(types(&ev), ["start", "summary"]);
    assert_eq!((ev[1]["outcome"].as_str(), ev[1]["code"].as_str()), (Some("failed"), Some("apply::approve")));
    assert!(run::stderr(&o).contains("needs --auto-approve or a PLANFILE; nothing was read"), "{}", run::stderr(&o));
}
