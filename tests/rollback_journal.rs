//! A rollback whose journal cannot be written says so and fails, instead of reporting the run
//! rolled back: the journal is what a later rollback or apply trusts (issue "One house").
//!
//! The journal lives on a real, full file system: a 4 KiB tmpfs whose one page the journal
//! fills, so the first `rolled-back` line fails with ENOSPC, as on a full disk.

use std::path::{Path, PathBuf};
use std::process::Command;

use fabric_testkit::lab::require_root;
use fabric_testkit::tmpfs::Tmpfs;

/// The run the tests roll back.
const RUN: &str = "20261201T061502Z-4242";

/// A journal of one applied step whose object is in a cluster the topology does not have (so
/// putting it back touches nothing), padded to exactly `size` bytes.
fn journal(size: usize) -> String {
    let begin = &r#"{"event":"begin","run":"{RUN}","step":"C.2","priors":[{"address":"cluster.zz/ns/ConfigMap/x","target":"cluster.zz","provider":"kube","sensitive":false,"prior":{"state":"absent"},"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}}]}"#
        .replace("{RUN}", RUN);
    let done = &r#"{"event":"done","run":"{RUN}","step":"C.2"}"#.replace("{RUN}", RUN);
    let start = |user: &str| {
        format!(r#"{{"event":"start","run":"{RUN}","fabric":"lab","topology_digest":"d","user":"{user}"}}"#)
    };
    let fixed = start("").len() + begin.len() + done.len() + 3;
    format!("{}\n{begin}\n{done}\n", start(&"u".repeat(size - fixed)))
}

fn fabric(state: &Path, args: &[&str]) -> std::process::Output {
    let topology = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/lab-full.yaml");
    Command::new(env!("CARGO_BIN_EXE_fabric"))
        .arg("-f")
        .arg(topology)
        .arg("--state-dir")
        .arg(state)
        .arg("--no-color")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_rollback_that_cannot_journal_fails_and_says_why() {
    require_root();
    let fs = Tmpfs::mount("rollback-full", "4k");
    let runs = fs.0.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let text = journal(4096);
    assert_eq!(text.len(), 4096);
    std::fs::write(runs.join(format!("{RUN}.jsonl")), &text).unwrap();

    let out = fabric(&fs.0, &["rollback", RUN]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stderr.contains("cannot write the journal"), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(!stdout.contains("Rolled back run"), "{stdout}");
    // Nothing was recorded as rolled back: the step is still to roll back next time.
    assert_eq!(std::fs::read_to_string(runs.join(format!("{RUN}.jsonl"))).unwrap(), text);

    // With room on the disk, the same rollback succeeds and is journaled.
    drop(fs);
    let dir = tempdir();
    std::fs::create_dir_all(dir.join("runs")).unwrap();
    std::fs::write(dir.join(format!("runs/{RUN}.jsonl")), &text).unwrap();
    let out = fabric(&dir, &["rollback", RUN]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("Rolled back run {RUN}: 1 step(s).")));
    let after = std::fs::read_to_string(dir.join(format!("runs/{RUN}.jsonl"))).unwrap();
    assert!(after.ends_with(&format!("{{\"event\":\"rolled-back\",\"run\":\"{RUN}\",\"step\":\"C.2\"}}\n")), "{after}");
    // A second rollback finds nothing left to do.
    let out = fabric(&dir, &["rollback", RUN]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("Nothing to roll back in run {RUN}.")));
    // A name that is no run id is refused before it is joined into a path.
    let out = fabric(&dir, &["rollback", "../../etc/x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a run id"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A rollback whose state directory is read-only (a full or remounted disk) changes nothing and
/// says why: the journal comes before any change.
#[test]
fn a_read_only_state_directory_stops_a_rollback_before_it_changes_anything() {
    require_root();
    let fs = Tmpfs::mount("rollback-ro", "64k");
    let runs = fs.0.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let text = journal(1000);
    std::fs::write(runs.join(format!("{RUN}.jsonl")), &text).unwrap();
    fs.read_only();
    let out = fabric(&fs.0, &["rollback", RUN]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stderr.contains("cannot create the journal") && stderr.contains("Read-only file system"), "{stderr}");
    assert!(!stdout.contains("Rolled back run"), "{stdout}");
    assert_eq!(std::fs::read_to_string(runs.join(format!("{RUN}.jsonl"))).unwrap(), text);
}

fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("fabric-rollback-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}
