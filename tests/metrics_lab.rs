//! The drift check's metrics (`fabric plan --metrics FILE`, src/plan/metrics.rs) on the two-site
//! lab with Linux routers (real sshd, real wireguard-go): after B.1 is applied the file says
//! nothing drifted, both tunnels are in sync and when the apply ran; after a router is changed
//! by hand it says which step and which site drifted. Every file is read back with Prometheus's
//! own parser (the `prometheus-client` Python package, `text_string_to_metric_families`,
//! installed by scripts/prometheus-client-venv.sh): a file it refuses fails the test. Needs root.

use fabric_testkit::{lab, run};

use run::out;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const LINUX: &str = include_str!("data/lab-linux.yaml");

/// The pinned parser (scripts/prometheus-client-venv.sh reads this line).
const PROMETHEUS_CLIENT: &str = "0.21.1";

/// Parses `file` with prometheus-client; sample name and sorted labels → value. The parser
/// raises on anything the text format does not allow, and the test fails with its message.
fn parsed(file: &Path) -> BTreeMap<String, f64> {
    let venv = match std::env::var_os("FABRIC_PROMETHEUS_VENV") {
        Some(v) => PathBuf::from(v),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(format!(".cache/fabric/prometheus-client-{PROMETHEUS_CLIENT}")),
    };
    let py = venv.join("bin/python");
    assert!(
        py.exists(),
        "prometheus-client is not installed: no {} (run scripts/prometheus-client-venv.sh, which scripts/test.sh runs); this test does not skip",
        py.display()
    );
    let script = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for fam in text_string_to_metric_families(open(sys.argv[1]).read()):
    assert fam.type == "gauge", fam.name
    for s in fam.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
        print(f"{s.name}{{{labels}}} {s.value!r}")
"#;
    let o = std::process::Command::new(&py).args(["-c", script]).arg(file).output().unwrap();
    assert!(
        o.status.success(),
        "Prometheus's parser refused {}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

fn get(m: &BTreeMap<String, f64>, key: &str) -> f64 {
    *m.get(key).unwrap_or_else(|| panic!("no {key} in {m:#?}"))
}

#[test]
fn the_metrics_file_holds_the_figures_and_follows_a_hand_change() {
    let lab = lab::Lab::up("dx", "10.219", &[], &[]);
    let dir = std::env::temp_dir().join(format!("fabric-metrics-lab-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("topology.yaml");
    std::fs::write(&topo, LINUX).unwrap();
    let fabric = |args: &[&str]| run::fabric_in(&dir, &topo, &lab.ssh_config(), args);
    let prom = dir.join("fabric.prom");
    let prom_arg = prom.display().to_string();

    // Before any apply: B.1's resources are all to create, neither tunnel is in sync, and no
    // apply has succeeded (no such sample).
    let o = fabric(&["plan", "--step", "B.1", "--detailed-exitcode", "-q", "--metrics", &prom_arg]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    let m = parsed(&prom);
    assert!(get(&m, "fabric_plan_resources_drifted{step=B.1}") > 0.0, "{m:#?}");
    assert_eq!(get(&m, "fabric_tunnel_in_sync{site=franca}"), 0.0);
    assert_eq!(get(&m, "fabric_tunnel_in_sync{site=sp}"), 0.0);
    assert!(!m.keys().any(|k| k.starts_with("fabric_last_successful_apply")), "{m:#?}");

    // Applied: nothing drifted, both in sync, and the apply's time is its run id's.
    let o = fabric(&["apply", "--step", "B.1", "--auto-approve", "--confirm-timeout", "15"]);
    assert!(o.status.success(), "{}", out(&o));
    let run = std::fs::read_dir(dir.join(".fabric/runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".jsonl").to_string())
        .max()
        .unwrap();
    let o = fabric(&["plan", "--step", "B.1", "--detailed-exitcode", "-q", "--metrics", &prom_arg]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let m = parsed(&prom);
    assert_eq!(get(&m, "fabric_plan_resources_drifted{step=B.1}"), 0.0);
    assert_eq!(get(&m, "fabric_tunnel_in_sync{site=franca}"), 1.0);
    assert_eq!(get(&m, "fabric_tunnel_in_sync{site=sp}"), 1.0);
    let started = get(&m, "fabric_last_successful_apply_timestamp_seconds{}");
    let (ymd, hms) = (&run[..8], &run[9..15]);
    let date = format!("{}-{}-{}T{}:{}:{}Z", &ymd[..4], &ymd[4..6], &ymd[6..], &hms[..2], &hms[2..4], &hms[4..]);
    let o = std::process::Command::new("date").args(["-u", "-d", &date, "+%s"]).output().unwrap();
    assert_eq!(started, String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().unwrap(), "run {run}");
    assert!(get(&m, "fabric_plan_timestamp_seconds{}") >= started);

    // A change by hand at sp's router: B.1 drifted by one resource, at sp only.
    let edit = "sed -i 's/^ListenPort = 51820/ListenPort = 51999/' /etc/wireguard/wg0.conf";
    assert!(lab.exec("sp-router", edit).status.success());
    let o = fabric(&["plan", "--step", "B.1", "--detailed-exitcode", "-q", "--metrics", &prom_arg]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    let m = parsed(&prom);
    assert_eq!(get(&m, "fabric_plan_resources_drifted{step=B.1}"), 1.0);
    assert_eq!(get(&m, "fabric_tunnel_in_sync{site=franca}"), 1.0);
    assert_eq!(get(&m, "fabric_tunnel_in_sync{site=sp}"), 0.0);
    assert_eq!(get(&m, "fabric_last_successful_apply_timestamp_seconds{}"), started);
    // Only the file itself is left in its directory's view of *.prom (no temporary beside it).
    let proms: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.contains("prom"))
        .collect();
    assert_eq!(proms, ["fabric.prom"]);
    let _ = std::fs::remove_dir_all(&dir);
}
