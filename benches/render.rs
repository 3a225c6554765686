//! `cargo bench --bench render`: render time of the example and of a synthetic topology with
//! 1,000 nodes and 200 services. Prints the medians and their ratio to the budgets (50 ms and
//! 1 s); timing is measured here, never asserted in tests.

use std::time::{Duration, Instant};

use fabric::catalog::{Catalog, StepGraph};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The example with 500 extra GPU nodes per site and 200 extra services.
fn synthetic(example: &str) -> String {
    let mut text = example.to_string();
    for (site, lan, marker) in [
        ("franca", "192.168.0", "    external_workloads:\n      - { name: debian-proxy"),
        ("sp", "192.168.2", "    external_workloads:\n      - { name: pve-ippri-31"),
    ] {
        let mut nodes = String::new();
        for i in 0..500u32 {
            let (third, fourth) = (i / 250, 2 + i % 250);
            let third = lan.rsplit('.').next().unwrap().parse::<u32>().unwrap() + third;
            let prefix = lan.rsplit_once('.').unwrap().0;
            nodes.push_str(&format!(
                "        - {{ name: {site}-n{i}, role: worker, address: {prefix}.{third}.{fourth} }}\n"
            ));
        }
        text = text.replacen(marker, &format!("{nodes}{marker}"), 1);
    }
    let mut services = String::new();
    for i in 0..200 {
        let class = ["gpu-services", "data-services", "web-services"][i % 3];
        services.push_str(&format!(
            "  - {{ name: svc-{i}, namespace: ns-{}, class: {class}, port: {} }}\n",
            i % 20,
            1000 + i
        ));
    }
    text.replacen("\nfederation:", &format!("{services}\nfederation:"), 1)
}

fn time_render(text: &str, runs: usize) -> (Duration, Duration, usize) {
    let mut load = vec![];
    let mut render = vec![];
    let mut files = 0;
    for _ in 0..runs {
        let t0 = Instant::now();
        let l = fabric::topology::load_str("bench.yaml", text.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let t1 = Instant::now();
        let g = StepGraph::build(&Catalog::embedded().unwrap(), &l.topology).unwrap();
        let out = fabric::operation::render::render(&g, &l.topology);
        let t2 = Instant::now();
        files = out.len();
        std::hint::black_box(out);
        load.push(t1 - t0);
        render.push(t2 - t1);
    }
    (median(load), median(render), files)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("render benchmark: run it with `cargo bench --bench render`");
        return;
    }
    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/topology.example.yaml")).unwrap();
    let (l, r, n) = time_render(&example, 50);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "example: load {:.2} ms, render {:.2} ms ({n} files); render+load / 50 ms budget = {:.3}",
        ms(l),
        ms(r),
        (ms(l) + ms(r)) / 50.0
    );
    let big = synthetic(&example);
    let (l, r, n) = time_render(&big, 5);
    println!(
        "1,000 nodes + 200 services: load {:.1} ms, render {:.1} ms ({n} files); render+load / 1 s budget = {:.3}",
        ms(l),
        ms(r),
        (ms(l) + ms(r)) / 1000.0
    );
}
