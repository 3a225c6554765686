//! The pull request's change, offline (issue "Pull requests and teams"): `plan --offline --base
//! FILE` plans from what the base topology would write to what this one would, so the comment a
//! reviewer reads shows just what the pull request changes.

use std::path::{Path, PathBuf};
use std::process::Output;

const EXAMPLE: &str = include_str!("../topology.example.yaml");

struct Pr {
    dir: PathBuf,
}

impl Pr {
    /// A pull request whose base is the example and whose head is `head`.
    fn new(name: &str, head: &str) -> Pr {
        let dir = std::env::temp_dir().join(format!("fabric-pr-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("base.yaml"), EXAMPLE).unwrap();
        std::fs::write(dir.join("topology.yaml"), head).unwrap();
        Pr { dir }
    }

    fn plan(&self, extra: &[&str]) -> Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_fabric"))
            .current_dir(&self.dir)
            .args(["-f", "topology.yaml", "plan", "--offline", "--base", "base.yaml", "--detailed-exitcode"])
            .args(extra)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }
}

impl Drop for Pr {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Both sites' dispatch quotas lowered from 2 to 1 (the MultiKueue rule wants them equal).
fn quota_change() -> String {
    let mine = "        gpu_quota: 2\n        local_queues: [{ name: batch, namespace: batch }]";
    assert_eq!(EXAMPLE.matches(mine).count(), 2);
    EXAMPLE.replace(mine, "        gpu_quota: 1\n        local_queues: [{ name: batch, namespace: batch }]")
}

#[test]
fn a_quota_change_shows_just_that_change_with_its_diff() {
    let pr = Pr::new("quota", &quota_change());
    let o = pr.plan(&["--format", "markdown"]);
    let md = text(&o);
    assert_eq!(o.status.code(), Some(2), "{md}");
    // Each quota is a Kueue ClusterQueue's (GPUs, and the cpu and memory that follow them) and,
    // at SP, a KAI Scheduler Queue's (Franca's dispatching queue holds no GPUs there: no KAI
    // queue).
    assert!(md.contains("**Plan: 0 to create, 3 to update, 0 to delete.**"), "{md}");
    assert!(
        md.contains("~ cluster.sp/ClusterQueue/gpu-batch") && md.contains("~ cluster.franca/ClusterQueue/gpu-batch"),
        "{md}"
    );
    assert!(md.contains("~ cluster.sp/Queue/gpu-batch"), "{md}");
    assert!(md.contains("-        nominalQuota: 2\n+        nominalQuota: 1"), "{md}");
    assert!(md.contains("| `D.1@sp` | Kueue in each cluster | low | 0 | 1 | 0 | changes |"), "{md}");
    assert!(!md.contains("`B.1`"), "steps without changes are only counted: {md}");
    assert!(md.contains("step(s) without changes._"), "{md}");
    // The JSON says where the state came from, and such a plan can never be applied.
    let o = pr.plan(&["--format", "json", "--out", "pr.plan"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mode"]["kind"], "base");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fabric"))
        .current_dir(&pr.dir)
        .args(["-f", "topology.yaml", "apply", "pr.plan", "--auto-approve"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn one_quota_is_one_change() {
    // Franca's own batch queue lowered from 2 GPUs to 1 (its cpu and memory follow).
    let one = "batch/batch-local run here\n        gpu_quota: 2\n";
    let i = EXAMPLE.find(one).unwrap();
    let head =
        format!("{}batch/batch-local run here\n        gpu_quota: 1\n{}", &EXAMPLE[..i], &EXAMPLE[i + one.len()..]);
    let pr = Pr::new("one-quota", &head);
    let o = pr.plan(&["--format", "markdown"]);
    let md = text(&o);
    assert_eq!(o.status.code(), Some(2), "{md}");
    assert!(md.contains("**Plan: 0 to create, 2 to update, 0 to delete.**"), "{md}");
    assert!(md.contains("~ cluster.franca/ClusterQueue/gpu-batch-local"), "{md}");
    assert!(md.contains("~ cluster.franca/Queue/gpu-batch-local"), "KAI's queue follows Kueue's: {md}");
    assert!(md.contains("-        nominalQuota: 2\n+        nominalQuota: 1"), "{md}");
    assert!(md.contains("-        nominalQuota: \"32\"\n+        nominalQuota: \"16\""), "the cpu follows: {md}");
}

#[test]
fn a_comment_only_change_changes_nothing() {
    let pr = Pr::new("comment", &EXAMPLE.replace("# Pinned versions.", "# Pinned versions (reviewed)."));
    let o = pr.plan(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("Plan: 0 to create, 0 to update, 0 to delete."), "{}", text(&o));
}

#[test]
fn what_the_head_drops_is_planned_for_deletion() {
    // The head no longer has the web services: their policy goes, nothing else changes.
    let head = EXAMPLE
        .replace("  - name: web-services          # Open WebUI, Backstage: replicas at both sites\n    strategy: replicas\n    sites: [franca, sp]\n    failover_after_seconds: 120\n", "")
        .replace("  - { name: open-webui, namespace: web, class: web-services, port: 8080 }\n", "")
        .replace("  - { name: backstage, namespace: web, class: web-services, port: 7007 }\n", "");
    let pr = Pr::new("drop", &head);
    let o = pr.plan(&[]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("- karmada/web/PropagationPolicy/web-services"), "{t}");
    assert!(t.contains("Plan: 0 to create, 0 to update, 1 to delete."), "{t}");
}

#[test]
fn base_needs_offline_and_a_valid_file() {
    let pr = Pr::new("usage", EXAMPLE);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fabric"))
        .current_dir(&pr.dir)
        .args(["-f", "topology.yaml", "plan", "--base", "base.yaml"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "a usage error exits 1 (2 is \"changes\"): {}", text(&o));
    assert!(text(&o).contains("--offline"), "{}", text(&o));
    std::fs::write(Path::new(&pr.dir).join("base.yaml"), "version: 1\nname: [\n").unwrap();
    let o = pr.plan(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("base.yaml"), "the error names the base file: {}", text(&o));
}
