//! `cargo bench --bench validate`: how long validating the example takes.
//!
//! Prints the median of the in-process load (parse, schema pass, rules, catalog refusals) and the
//! median wall time of the binary `fabric -f topology.example.yaml validate` of the profile the
//! bench is built in (`--profile dist`: the binary operators download), which is what an
//! operator waits for. The target is under 20 ms; this prints the figures and the ratio
//! to that budget rather than asserting (timing is not a test).

use std::process::Command;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // `cargo test --all-targets` runs bench targets too; measure only under `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        println!("validate benchmark: run it with `cargo bench --bench validate`");
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/topology.example.yaml")).unwrap();
    let mut inproc = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let l = fabric::topology::load_str("topology.example.yaml", text.clone()).expect("example is valid");
        let catalog = fabric::catalog::Catalog::embedded().unwrap();
        let g = fabric::catalog::StepGraph::build(&catalog, &l.topology).unwrap();
        std::hint::black_box(fabric::catalog::refusal::refusals(&g, &l.topology));
        inproc.push(t.elapsed());
    }
    // Cargo builds the binary of the bench's own profile for it: no second build.
    let bin = env!("CARGO_BIN_EXE_fabric");
    let mut wall = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let o = Command::new(bin)
            .args(["-f", "topology.example.yaml", "validate", "-q"])
            .current_dir(root)
            .output()
            .unwrap();
        wall.push(t.elapsed());
        assert!(o.status.success());
    }
    let (a, b) = (median(inproc), median(wall));
    println!("validate, in process (median of 200): {:.3} ms", a.as_secs_f64() * 1e3);
    println!("validate, binary wall time (median of 50): {:.3} ms", b.as_secs_f64() * 1e3);
    println!("ratio to the 20 ms budget: {:.3}", b.as_secs_f64() / 0.020);
}
