//! `cargo bench --bench plan_realkube` (as root, after `bash scripts/realkube.sh build`): the time
//! `fabric plan` takes for the Kubernetes steps against the two sites' real API servers (the
//! `realkube_apply` lab, its steps applied first), next to `kubectl diff --server-side` of the
//! same objects with the sites' own kubectl (Kubernetes v1.33.5), one process per cluster, both at
//! once. Both do a server-side dry run per object and compare it with the live one. Prints the
//! medians and their ratio; asserts nothing (timing is not a test). docs/benchmarks.md says how to
//! read it.

#[path = "../tests/support/apply_step.rs"]
mod apply_step;
#[path = "../tests/support/realkube_lab.rs"]
mod realkube_lab;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fabric::catalog::{Catalog, StepGraph};
use fabric::desired::Desired;
use realkube_lab::{Lab, PLANNED, apply_all, fabric};

const RUNS: usize = 5;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return; // `cargo test` runs benches once without --bench: nothing to measure then
    }
    let lab = Lab::start("bench-realkube");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(apply_all(&lab));

    // The planned steps' objects per cluster, as fabric sends them (the Secrets fabric fills at
    // apply are left out: kubectl would see their placeholders as changes to make).
    let t = fabric::topology::load_str("bench.yaml", lab.text.clone()).unwrap().topology;
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &t).unwrap();
    let mut per_cluster: Vec<(String, Vec<serde_json::Value>)> = vec![("franca".into(), vec![]), ("sp".into(), vec![])];
    let mut count = 0;
    for key in PLANNED {
        let step = fabric::apply::StepWork::alone(&g, &t, key).unwrap();
        for r in step.resources.iter().filter(|r| !r.sensitive) {
            let Desired::Kube(obj) = &r.desired else { continue };
            let site = r.site.clone().unwrap_or_default();
            if let Some((_, objs)) = per_cluster.iter_mut().find(|(s, _)| *s == site) {
                objs.push(obj.clone());
                count += 1;
            }
        }
    }
    let files: Vec<(String, std::path::PathBuf)> = per_cluster
        .iter()
        .map(|(site, objs)| {
            let path = lab.dir.join(format!("{site}-objects.json"));
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objs});
            std::fs::write(&path, list.to_string()).unwrap();
            (site.clone(), path)
        })
        .collect();

    let mut plan_args = vec!["plan", "--detailed-exitcode"];
    for s in PLANNED {
        plan_args.extend(["--step", s]);
    }
    let mut fabric_times = Vec::new();
    let mut kubectl_times = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let out = fabric(&lab, &plan_args);
        fabric_times.push(start.elapsed());
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

        let start = Instant::now();
        let children: Vec<_> = files
            .iter()
            .map(|(site, path)| {
                let s = if site == "franca" { &lab.franca } else { &lab.sp };
                Command::new(fabric_testkit::realkube::bin_dir().join("kube"))
                    .args(["kubectl", "--kubeconfig"])
                    .arg(&s.kubeconfig)
                    .args(["diff", "--server-side", "--field-manager=fabric", "--force-conflicts", "-f"])
                    .arg(path)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            // 0: no differences, 1: differences (fields fabric leaves to controllers); >1 an error.
            assert!(
                out.status.code().is_some_and(|c| c <= 1),
                "kubectl diff: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        kubectl_times.push(start.elapsed());
    }
    let (f, k) = (median(fabric_times), median(kubectl_times));
    println!("plan_realkube: {count} objects of {} steps on two real API servers, median of {RUNS}", PLANNED.len());
    println!("  fabric plan (whole process, both clusters):          {:>7.1} ms", f.as_secs_f64() * 1e3);
    println!("  kubectl diff --server-side (one per cluster, at once): {:>7.1} ms", k.as_secs_f64() * 1e3);
    println!("  ratio fabric / kubectl: {:.2}", f.as_secs_f64() / k.as_secs_f64());
}
