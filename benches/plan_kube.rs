//! `cargo bench --bench plan_kube`: how long reading every Kubernetes object of the example takes
//! (what `fabric plan` does for the clusters and Karmada), next to reading one object, against
//! three in-process test API servers that answer each request after a WAN-like delay.
//!
//! Each object costs two requests (GET and a server-side-apply dry run) and each copied Secret two
//! more (its source); read one after the other, the example's objects would take hundreds of
//! round trips. fabric reads a target's objects all at once, so the whole read should stay within
//! a few round trips of one object's. Prints the figures; asserts nothing (timing is not a test).

use fabric_testkit::kube_api;

use std::time::{Duration, Instant};

use fabric::catalog::{Catalog, StepGraph};
use fabric::desired::{Desired, Resource};
use fabric::live::observe::{self, Targets};
use fabric::transport::ssh_config::SshConfig;

const RUNS: usize = 7;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return; // `cargo test` runs benches once without --bench: nothing to measure then
    }
    let dir = std::env::temp_dir().join(format!("fabric-bench-kube-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, sp, karmada) = kube_api::fabric_apis(&dir);
    let text = kube_api::example_topology(&dir);
    let l = fabric::topology::load_str("bench.yaml", text).unwrap();
    let t = &l.topology;
    let g = StepGraph::build(&Catalog::embedded().unwrap(), t).unwrap();
    let all: Vec<Resource> = g
        .instances()
        .flat_map(|i| fabric::steps::for_instance(i, t))
        .filter(|r| matches!(r.desired, Desired::Kube(_)))
        .collect();
    let one: Vec<Resource> = all.iter().take(1).cloned().collect();
    // Only Kubernetes targets are read: no SSH host of the example is contacted.
    let targets = Targets::from_topology(t, &SshConfig::default()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let time = |rs: &[Resource]| {
        median(
            (0..RUNS)
                .map(|_| {
                    let start = Instant::now();
                    let live = rt.block_on(observe::observe(rs, &Default::default(), &targets));
                    assert!(live.unreachable.is_empty(), "{:?}", live.unreachable);
                    start.elapsed()
                })
                .collect(),
        )
    };
    let per_target = |rs: &[Resource]| {
        let mut m = std::collections::BTreeMap::<&fabric::addr::Target, usize>::new();
        for r in rs {
            *m.entry(r.target()).or_default() += 1;
        }
        m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    };
    println!("plan_kube: {} objects of the example ({})", all.len(), per_target(&all));
    for latency in [Duration::ZERO, Duration::from_millis(25)] {
        for s in [&franca, &sp, &karmada] {
            s.set_latency(latency);
        }
        let (t1, tn) = (time(&one), time(&all));
        let sequential = latency * 2 * all.len() as u32;
        println!(
            "  latency {:>2} ms per request: one object {:>6.1} ms, all {} objects {:>6.1} ms (ratio {:.2}); one after the other would be ≥ {} ms",
            latency.as_millis(),
            t1.as_secs_f64() * 1000.0,
            all.len(),
            tn.as_secs_f64() * 1000.0,
            tn.as_secs_f64() / t1.as_secs_f64(),
            sequential.as_millis()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
