//! Step C.2 through the engine against test API servers: Karmada's credentials for each member
//! are copied from the member's ServiceAccount token at apply time, never shown or journaled;
//! without a token yet, the step fails and is reverted.

use fabric_testkit::kube_api;

use fabric::apply::journal::Journal;
use fabric::apply::{self, Options, StepWork};
use fabric::catalog::{Catalog, StepGraph};
use fabric::live::observe::{self, Targets};
use fabric::transport::ssh_config::SshConfig;
use serde_json::json;

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn token_secret(token: Option<&str>) -> serde_json::Value {
    let mut s = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "karmada-member-token", "namespace": "karmada-cluster",
            "annotations": {"kubernetes.io/service-account.name": "karmada-member"}}});
    if let Some(t) = token {
        s["data"] = json!({"token": b64(t), "ca.crt": b64("member CA")});
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_credentials_are_copied_from_the_token() {
    let dir = std::env::temp_dir().join(format!("fabric-kube-secrets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, sp, karmada) = kube_api::fabric_apis(&dir);
    // Karmada's cluster-status controller marks a member Ready once its credentials exist (the
    // members run none: their tokens are put in place by hand below).
    karmada.simulate_controllers(std::time::Duration::from_millis(50));
    let text = kube_api::example_topology(&dir);
    let l = fabric::topology::load_str("t.yaml", text).unwrap();
    let t = &l.topology;
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    let step = StepWork::alone(&g, t, "C.2").unwrap();
    let targets = Targets::from_topology(t, &SshConfig::default()).unwrap();
    // Karmada has its own namespace for member credentials; in the members it exists with the
    // ServiceAccount's token (created by a token controller, which the test double does not run).
    for server in [&karmada, &franca, &sp] {
        server.put_raw(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karmada-cluster"}}));
    }

    // 1. No token controller has filled sp's token yet: the step fails and is put back.
    franca.put_raw_as(token_secret(Some("franca-token-123")), "kube-controller-manager");
    sp.put_raw_as(token_secret(None), "kube-controller-manager");
    // Copies wait for their source to be filled: a short wait makes the missing token fail fast.
    let run = |name: &str| Options {
        run: name.into(),
        state_dir: dir.clone(),
        confirm_timeout: std::time::Duration::from_secs(30),
        force_conflicts: false,
        wait_timeout: std::time::Duration::from_secs(2),
        lease: Default::default(),
    };
    let live = observe::observe(&step.resources, &observe::key_targets(&step.resources), &targets).await;
    let mut j = Journal::create(&dir, "run-1").unwrap();
    let r = apply::run(t, std::slice::from_ref(&step), &targets, live, &run("run-1"), &mut j, &|_| {}).await;
    let err = r.expect_err("no token yet").to_string();
    assert!(err.contains("has no `token` yet") && err.contains("was reverted"), "{err}");
    assert!(
        karmada
            .objects()
            .iter()
            .all(|o| !(o["kind"] == "Cluster"
                || (o["kind"] == "Secret" && o["metadata"]["namespace"] == "karmada-cluster"))),
        "the failed step left nothing in Karmada: {:?}",
        karmada.objects().iter().map(|o| format!("{}/{}", o["kind"], o["metadata"]["name"])).collect::<Vec<_>>()
    );

    // 2. With the token there, Karmada gets the member's credentials, copied, never journaled.
    sp.put_raw_as(token_secret(Some("sp-token-456")), "kube-controller-manager");
    let live = observe::observe(&step.resources, &observe::key_targets(&step.resources), &targets).await;
    let mut j = Journal::create(&dir, "run-2").unwrap();
    apply::run(t, std::slice::from_ref(&step), &targets, live, &run("run-2"), &mut j, &|_| {}).await.unwrap();
    let objs = karmada.objects();
    let creds = objs
        .iter()
        .find(|o| o["kind"] == "Secret" && o["metadata"]["name"] == "sp")
        .expect("sp's credentials in Karmada");
    assert_eq!(creds["data"]["token"], json!(b64("sp-token-456")));
    assert_eq!(creds["data"]["caBundle"], json!(b64("member CA")));
    let cluster = objs.iter().find(|o| o["kind"] == "Cluster" && o["metadata"]["name"] == "sp").expect("Cluster sp");
    assert_eq!(cluster["spec"]["secretRef"], json!({"namespace": "karmada-cluster", "name": "sp"}));
    let journal: String = ["run-1", "run-2"]
        .iter()
        .map(|r| std::fs::read_to_string(dir.join(format!("runs/{r}.jsonl"))).unwrap())
        .collect();
    assert!(
        !journal.contains(&b64("sp-token-456")) && !journal.contains("sp-token-456"),
        "a token reached the journal"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
