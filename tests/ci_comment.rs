//! The pull-request comment script (examples/ci/post-plan.js) outside GitHub: node runs its test
//! (tests/ci/post_plan_test.js) against a stand-in for the API client: one comment per pull
//! request, updated in place; a fork's read-only token writes the job summary instead.

#[test]
fn the_comment_script_updates_one_comment_and_copes_with_forks() {
    let root = env!("CARGO_MANIFEST_DIR");
    let o = std::process::Command::new("node")
        .arg("tests/ci/post_plan_test.js")
        .current_dir(root)
        .output()
        .expect("node is installed (scripts/test.sh installs nodejs)");
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{text}");
    assert!(text.contains("post-plan: all cases pass"), "{text}");
}
