//! Issue 23, item 4: prune forgets no kind. Every kind of object fabric writes, for every test
//! topology, is classified in `desired::kinds::WRITTEN`: pruned, or never pruned with its
//! reason. A new kind written without a decision fails here.

use std::collections::BTreeSet;

use fabric::desired::kinds::{Prune, WRITTEN, classify, is_prunable};

#[path = "support/topologies.rs"]
mod topologies;
use topologies::TOPOLOGIES;

/// The example joined with Cilium External Workloads (the seed's choice, which needs Cilium
/// 1.17): the one option that writes a kind the others do not.
fn external_workloads() -> String {
    let text = include_str!("../topology.example.yaml")
        .replace("cilium: 1.18.4", "cilium: 1.17.9")
        .replace("join: k3s-agent", "join: cilium-external-workloads");
    assert!(text.contains("join: cilium-external-workloads"), "the example's mesh.join line moved");
    text
}

/// (apiVersion, kind) of every object fabric writes for these topologies.
fn written() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let texts = TOPOLOGIES.iter().map(|(_, t)| t.to_string()).chain(std::iter::once(external_workloads()));
    for text in texts {
        let l = fabric::topology::load_str("t.yaml", text).unwrap();
        let g = fabric::catalog::StepGraph::build(&fabric::catalog::Catalog::embedded().unwrap(), &l.topology).unwrap();
        for r in g.instances().flat_map(|i| fabric::steps::for_instance(i, &l.topology)) {
            if let Some(o) = r.kube_object() {
                out.insert((o["apiVersion"].as_str().unwrap().to_string(), o["kind"].as_str().unwrap().to_string()));
            }
        }
    }
    out
}

#[test]
fn every_kind_fabric_writes_is_pruned_or_excluded_with_a_reason() {
    let written = written();
    assert!(written.len() > 15, "{written:?}");
    let unclassified: Vec<_> = written.iter().filter(|(a, k)| classify(a, k).is_none()).collect();
    assert!(
        unclassified.is_empty(),
        "fabric writes these kinds but desired::kinds::WRITTEN does not say whether prune deletes them: {unclassified:?}"
    );
    // What issue 23 found missing is pruned now.
    for (a, k) in [
        ("scheduling.run.ai/v2", "Queue"),
        ("v1", "ServiceAccount"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ] {
        assert!(written.contains(&(a.to_string(), k.to_string())), "fabric writes {a} {k}");
        assert!(is_prunable(a, k), "{a} {k}");
    }
    // The deliberate exclusions, each with its reason.
    for (a, k) in [("v1", "Namespace"), ("v1", "Secret"), ("v1", "Node"), ("node.k8s.io/v1", "RuntimeClass")] {
        match classify(a, k) {
            Some(Prune::Never(why)) => assert!(why.len() > 20, "{a} {k}: {why}"),
            other => panic!("{a} {k}: {other:?}"),
        }
    }
    // The list names no kind twice, and no kind fabric stopped writing is still pruned (a pruned
    // kind that nothing writes would only be listed for nothing).
    let mut seen = BTreeSet::new();
    for (a, k, p) in WRITTEN {
        assert!(seen.insert((a, k)), "{a} {k} twice");
        if *p == Prune::Yes {
            assert!(written.contains(&(a.to_string(), k.to_string())), "{a} {k} is prunable but nothing writes it");
        }
    }
}
