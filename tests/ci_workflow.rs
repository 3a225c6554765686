//! The commands of examples/ci/fabric-plan.yml, run on the example topology: the workflow and
//! the CLI cannot drift apart.

use std::process::Command;

fn fabric(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fabric")).args(args).env("NO_COLOR", "1").current_dir(dir).output().unwrap()
}

#[test]
fn the_workflow_commands_work() {
    let workflow = include_str!("../examples/ci/fabric-plan.yml");
    // The repository of the workflow: the topology and its rendered files.
    let dir = std::env::temp_dir().join(format!("fabric-ci-workflow-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("topology.yaml"), include_str!("../topology.example.yaml")).unwrap();
    // The base branch's topology: the pull request raises both dispatch quotas from 1 to 2.
    let example = include_str!("../topology.example.yaml");
    let batch = "local_queues: [{ name: batch, namespace: batch }]";
    let base = example.replace(&format!("gpu_quota: 2\n        {batch}"), &format!("gpu_quota: 1\n        {batch}"));
    std::fs::write(dir.join("base.yaml"), base).unwrap();
    let o = fabric(&dir, &["-f", "topology.yaml", "render", "--out", ".", "-q"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    for line in workflow.lines().map(str::trim) {
        let cmd = line.strip_prefix("run: ").unwrap_or(line);
        if !cmd.starts_with("fabric ") {
            continue;
        }
        let cmd = cmd.split(" > ").next().unwrap().replace("$BASE", "--base base.yaml");
        let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
        let o = fabric(&dir, &args);
        let code = o.status.code();
        if args.contains(&"--detailed-exitcode") {
            assert_eq!(code, Some(2), "`{cmd}` plans changes: {}", String::from_utf8_lossy(&o.stderr));
            let md = String::from_utf8_lossy(&o.stdout);
            assert!(md.starts_with("### fabric plan: `sp-franca`"), "{md}");
            // Just the pull request's change: the two sites' batch queues in Kueue (Franca's
            // dispatching one, its cpu and memory the worker's) and SP's in KAI Scheduler (the
            // dispatching queue holds no GPUs at Franca: no KAI queue there).
            assert!(md.contains("**Plan: 0 to create, 3 to update, 0 to delete.**"), "{md}");
        } else {
            assert_eq!(code, Some(0), "`{cmd}`: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
    // The workflow really contains the three checks.
    for needed in [
        "validate",
        "fmt --check",
        "render --out . --check",
        "plan --offline $BASE --format markdown --detailed-exitcode",
        "git show \"origin/$GITHUB_BASE_REF:topology.yaml\" > base.yaml",
        "postPlan(",
    ] {
        assert!(workflow.contains(needed), "workflow lacks `{needed}`");
    }
    // A hand edit of a rendered file makes the render check fail, as in a pull request.
    let f = dir.join("apps/kueue/cluster-queues/gpu-sp.yaml");
    std::fs::write(&f, std::fs::read_to_string(&f).unwrap().replace("nominalQuota: 2", "nominalQuota: 9")).unwrap();
    let o = fabric(&dir, &["-f", "topology.yaml", "render", "--out", ".", "--check"]);
    assert_eq!(o.status.code(), Some(1));
    std::fs::remove_dir_all(&dir).unwrap();
}
