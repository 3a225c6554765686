//! The rendered files of the example and of a three-site topology, pinned in tests/snapshots/.
//! After an intended change: `FABRIC_BLESS=1 cargo test --test render_snapshots`, review the diff
//! of tests/snapshots/ and commit it.

use std::path::Path;

use fabric::catalog::{Catalog, StepGraph};
use fabric::operation::render::{self, Artifact, Status};

fn rendered(topology: &str) -> Vec<Artifact> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(topology)).unwrap();
    let l = fabric::topology::load_str(topology, text).unwrap_or_else(|e| panic!("{topology}: {e}"));
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &l.topology).unwrap();
    render::render(&g, &l.topology)
}

fn check(topology: &str, snapshot: &str) {
    let artifacts = rendered(topology);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(snapshot);
    if std::env::var_os("FABRIC_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        for a in &artifacts {
            let p = dir.join(&a.path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, &a.content).unwrap();
        }
    }
    let diff: Vec<(String, Status)> =
        render::compare(&artifacts, &dir).unwrap().into_iter().filter(|(_, s)| *s != Status::Same).collect();
    assert!(
        diff.is_empty(),
        "{snapshot} differs from the rendering of {topology}: {diff:?}\n(bless with FABRIC_BLESS=1)"
    );
}

#[test]
fn example_snapshot() {
    check("topology.example.yaml", "tests/snapshots/example");
}

#[test]
fn three_sites_snapshot() {
    check("tests/data/three-sites.yaml", "tests/snapshots/three-sites");
}

#[test]
fn rendering_is_deterministic() {
    let a = rendered("topology.example.yaml");
    let b = rendered("topology.example.yaml");
    assert_eq!(a, b);
}

#[test]
fn the_seed_paths_are_all_there() {
    let paths: Vec<String> = rendered("topology.example.yaml").into_iter().map(|a| a.path).collect();
    for p in [
        "apps/cilium/values-franca.yaml",
        "apps/cilium/values-sp.yaml",
        "config/vyos/wireguard/franca.conf",
        "config/vyos/wireguard/sp.conf",
        "apps/karmada/values.yaml",
        "apps/karmada/propagation-policies/gpu-services.yaml",
        "apps/karmada/propagation-policies/data-services.yaml",
        "apps/karmada/propagation-policies/web-services.yaml",
        "apps/karmada/override-policies/franca.yaml",
        "apps/karmada/override-policies/sp.yaml",
        "apps/kueue/values-franca.yaml",
        "apps/kueue/values-sp.yaml",
        "apps/kueue/cluster-queues/gpu-franca.yaml",
        "apps/kueue/cluster-queues/gpu-sp.yaml",
        "apps/karmada/multikueue/multikueue-config.yaml",
        "config/k3s/franca/server.yaml",
        "config/k3s/sp/server.yaml",
        "apps/tensorzero/tensorzero.toml",
    ] {
        assert!(paths.iter().any(|x| x == p), "{p} is not rendered: {paths:?}");
    }
}

#[test]
fn a_new_queue_or_node_changes_only_its_files() {
    let base = rendered("topology.example.yaml");
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("topology.example.yaml")).unwrap();
    let text = text.replace(
        "      - name: gpu-batch\n        gpu_quota: 2\n        local_queues: [{ name: batch, namespace: batch }]\n\nmesh:",
        "      - name: gpu-batch\n        gpu_quota: 2\n        local_queues: [{ name: batch, namespace: batch }]\n      - name: cpu-eval\n        gpu_quota: 0\n\nmesh:",
    );
    // (No quota of its own: the GPU queues hold SP's nodes' cpu and memory; it borrows theirs.)
    let l = fabric::topology::load_str("t.yaml", text).unwrap_or_else(|e| panic!("{e}"));
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &l.topology).unwrap_or_else(|e| panic!("{e}"));
    let after = render::render(&g, &l.topology);
    let changed: Vec<&str> = after
        .iter()
        .filter(|a| base.iter().find(|b| b.path == a.path).is_none_or(|b| b.content != a.content))
        .map(|a| a.path.as_str())
        .collect();
    assert_eq!(
        changed,
        ["apps/kai-scheduler/sp.yaml", "apps/kueue/cluster-queues/gpu-sp.yaml"],
        "a new SP queue changes SP's queue files (Kueue's and KAI Scheduler's) only"
    );
    let sp = after.iter().find(|a| a.path == "apps/kueue/cluster-queues/gpu-sp.yaml").unwrap();
    assert!(sp.content.contains("name: cpu-eval"), "{}", sp.content);
}
