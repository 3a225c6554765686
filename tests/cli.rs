//! End-to-end tests of the `fabric` binary: exit codes, output formats, selection.
//! Nothing here contacts any host: every plan is --offline.

use fabric_testkit::run::{stderr, stdout};
use std::path::PathBuf;
use std::process::{Command, Output};

fn fabric(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fabric"))
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("FABRIC_TOPOLOGY")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run fabric")
}

/// A temporary file holding `text`, removed when dropped, each in a directory of its own (tests
/// run at once: a directory shared between them could be removed by one while another writes).
struct TempFile(PathBuf);
impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("fabric-cli-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        TempFile(p)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}
impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

const EXAMPLE: &str = include_str!("../topology.example.yaml");

/// The example without its `k3s_airgap` (for tests that give a bundle of their own).
fn example_without_bundle() -> String {
    EXAMPLE[..EXAMPLE.find("# K3s from its air-gap bundle").expect("the example has a bundle")].to_string()
}

/// A `k3s_airgap.digests` entry for the example's release: three distinct stand-in digests.
fn digests() -> String {
    format!(
        "  digests:\n    v1.33.5+k3s1: {{ binary: {}, images: {}, install_script: {} }}\n",
        "a".repeat(64),
        "b".repeat(64),
        "c".repeat(64)
    )
}

#[test]
fn validate_example_exits_zero() {
    let o = fabric(&["-f", "topology.example.yaml", "validate"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // No warning: the bundle's digests are recorded (issue 37).
    assert_eq!(stdout(&o), "topology.example.yaml: valid (2 sites, 9 services, 0 warnings)\n");
    assert!(!stderr(&o).contains("digest"), "{}", stderr(&o));
}

/// The example installs K3s (issue 37): its offline plan shows every K3s install with the
/// recorded binary digest and the release's own URLs, none "not recorded", and `render` writes
/// the resolved bundle out.
#[test]
fn the_example_plans_its_k3s_installs_with_recorded_digests() {
    let o = fabric(&["--example", "plan", "--offline"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    let installs: Vec<&str> = out.lines().filter(|l| l.contains("/command:k3s-install")).collect();
    assert!(installs.len() >= 4, "{out}");
    let release = "https://github.com/k3s-io/k3s/releases/download/v1.33.5%2Bk3s1";
    for l in &installs {
        assert!(l.contains("K3s v1.33.5+k3s1") && l.contains("(k3s sha256 ba2bc6892347…;"), "{l}");
        assert!(l.contains(&format!("k3s from {release}/k3s,")), "{l}");
        assert!(
            l.contains("install.sh from https://raw.githubusercontent.com/k3s-io/k3s/v1.33.5%2Bk3s1/install.sh"),
            "{l}"
        );
    }
    assert!(!out.contains("not recorded") && !out.contains("apply refuses it until"), "{out}");
    let dir = std::env::temp_dir().join(format!("fabric-k3s-render-{}", std::process::id()));
    let o = fabric(&["--example", "render", "--out", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let bundle = std::fs::read_to_string(dir.join("config/k3s/airgap-bundle.yaml")).unwrap();
    assert!(bundle.contains(&format!("url: {release}/k3s-airgap-images-amd64.tar.zst")), "{bundle}");
    assert!(bundle.contains("sha256: c1d71ab864b6b7de087d0827a1810c5fd271134e317af8730ec9211eaf34b097"), "{bundle}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn validate_reports_file_line_column_and_exits_one() {
    let bad = TempFile::new("bad.yaml", &EXAMPLE.replace("id: 2", "id: 300").replace("weight: 20", "weight: 0"));
    let o = fabric(&["-f", bad.path(), "validate"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("cluster id 300 is outside 1–255"), "{err}");
    assert!(err.contains("route weight 0 for `sp` is not positive"), "{err}");
    let line = EXAMPLE.lines().position(|l| l.trim() == "id: 2").unwrap() + 1;
    assert!(err.contains(&format!("{}:{line}:11", bad.path())), "file:line:col of the id: {err}");
    assert!(err.contains("2 errors in"), "{err}");
    // The same as JSON on stdout.
    let o = fabric(&["-f", bad.path(), "validate", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["valid"], false);
    let d = &v["diagnostics"][0];
    assert_eq!((d["line"].as_u64(), d["column"].as_u64()), (Some(line as u64), Some(11)), "{d}");
    assert_eq!(d["code"], "topology::cluster-id");
    assert_eq!(d["path"], "sites[1].cluster.id");
}

#[test]
fn missing_topology_file_says_what_to_do() {
    let o = fabric(&["-f", "/nonexistent/topology.yaml", "validate"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read topology file /nonexistent/topology.yaml"), "{}", stderr(&o));
    let o = Command::new(env!("CARGO_BIN_EXE_fabric"))
        .args(["validate"])
        .env_remove("FABRIC_TOPOLOGY")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--example"), "{}", stderr(&o));
}

#[test]
fn topology_from_environment() {
    let o = Command::new(env!("CARGO_BIN_EXE_fabric"))
        .args(["validate", "-q"])
        .env("FABRIC_TOPOLOGY", "tests/data/three-sites.yaml")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "", "-q prints nothing on success");
}

#[test]
fn undecided_decision_warns_in_validate_and_is_refused_by_plan() {
    let t = TempFile::new("undecided.yaml", &EXAMPLE.replace("argocd: single", "argocd: undecided"));
    let o = fabric(&["-f", t.path(), "validate"]);
    assert_eq!(o.status.code(), Some(0), "open decisions are warnings: {}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("`decisions.argocd` is undecided: plan and apply will refuse C.3, C.4, C.5, C.6, C.7, G.1"),
        "{err}"
    );
    let o = fabric(&["-f", t.path(), "plan", "--offline"]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("refused: step C.3 (ArgoCD deploys to the Karmada API) needs the decision `decisions.argocd`, which is undecided"), "{out}");
    assert!(out.contains("refused: step C.5 needs step C.3, which is refused"), "{out}");
    assert!(stderr(&o).contains("6 selected step(s) refused"), "{}", stderr(&o));
    // Leaving the refused steps out of the selection plans the rest.
    let o = fabric(&["-f", t.path(), "plan", "--offline", "--phase", "A", "--phase", "B"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A per-site decision names the site.
    let t = TempFile::new("undecided2.yaml", &EXAMPLE.replace("  cluster_migration:\n    franca: in-place\n", ""));
    let o = fabric(&["-f", t.path(), "plan", "--offline", "--step", "A.2"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("needs the decision `decisions.cluster_migration.franca`"), "{}", stdout(&o));
}

/// `cluster_migration: new-cluster`: A.2 builds the new cluster on its own server host, the
/// running one is left alone, and the cutover (A.5) runs only when named.
#[test]
fn a_new_cluster_is_built_beside_the_running_one_and_cut_over_explicitly() {
    let text = std::fs::read_to_string("tests/data/three-sites.yaml").unwrap();
    let t = TempFile::new("new-cluster.yaml", &text);
    let o = fabric(&["-f", t.path(), "validate"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = fabric(&["-f", t.path(), "plan", "--offline"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("+ host.franca-cp2/file:/etc/rancher/k3s/config.yaml"), "the new server: {out}");
    assert!(!out.contains("host.franca-cp1") && !out.contains("cni-migration"), "nothing in place: {out}");
    assert!(!out.contains("A.5@franca") && !out.contains("cluster.franca-previous"), "the cutover is explicit: {out}");
    // Named, the cutover moves each node that is not the new server, saying what stays.
    let o = fabric(&["-f", t.path(), "plan", "--offline", "--step", "A.5@franca", "--with-deps"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for n in ["franca-gpu1", "franca-gpu2", "franca-gpu3"] {
        assert!(out.contains(&format!("+ host.{n}/command:cutover-leave")), "{out}");
        assert!(out.contains(&format!("+ host.{n}/command:cutover-join")), "{out}");
    }
    assert!(out.contains("data volumes stay where they are"), "{out}");
    assert!(!out.contains("host.franca-cp2/command:cutover"), "the new server does not move: {out}");
    // Without the running cluster's kubeconfig, the decision cannot be carried out: an error there.
    let t = TempFile::new(
        "no-previous.yaml",
        &text.replace(
            "      previous: { kubeconfig: { path: ~/.kube/franca-flannel.yaml, context: franca-flannel } }\n",
            "",
        ),
    );
    let o = fabric(&["-f", t.path(), "validate"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("`cluster.previous` (the running cluster's kubeconfig) is not set"), "{}", stderr(&o));
}

/// `karmada_host: dedicated-vm`: C.1 puts a single-node K3s on the VM (from the bundle) and
/// Karmada's chart into it; the estimators follow; the host site's cluster gets none of it.
#[test]
fn a_dedicated_vm_hosts_karmada() {
    let text = format!(
        "{}\nk3s_airgap:\n  binary: {{ path: b/k3s }}\n  images: {{ path: b/k3s-airgap-images-amd64.tar.zst }}\n  install_script: {{ path: b/install.sh }}\n{}",
        example_without_bundle().replace("karmada_host: host-cluster", "karmada_host: dedicated-vm").replace(
            "    host_site: franca\n",
            "    host_site: franca\n    vm: { name: karmada-vm, address: 192.168.0.50, ssh: { host: karmada-vm }, kubeconfig: { path: ~/.kube/karmada-vm.yaml } }\n",
        ),
        digests()
    );
    let t = TempFile::new("dedicated.yaml", &text);
    let o = fabric(&["-f", t.path(), "validate"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = fabric(&["-f", t.path(), "plan", "--offline"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    for want in [
        "+ host.karmada-vm/file:/etc/rancher/k3s/config.yaml",
        "+ host.karmada-vm/command:k3s-install",
        "+ cluster.karmada-vm/kube-system/HelmChart/karmada",
        "+ cluster.karmada-vm/karmada-system/Deployment/karmada-scheduler-estimator-sp",
    ] {
        assert!(out.contains(want), "{want} missing: {out}");
    }
    assert!(!out.contains("cluster.franca/kube-system/HelmChart/karmada"), "{out}");
}

/// Bundle files by URL: `validate` and `plan` contact no server (only apply fetches, on this
/// machine), and the plan names the URLs without their credentials.
#[test]
fn a_plan_fetches_no_bundle_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let at = listener.local_addr().unwrap();
    let digests = digests();
    let text = format!(
        "{}\nk3s_airgap:\n  binary: {{ url: \"http://fabric:s3cret@{at}/k3s\" }}\n  \
         images: {{ url: \"http://{at}/k3s-airgap-images-amd64.tar.zst\" }}\n  \
         install_script: {{ path: b/install.sh }}\n{digests}",
        example_without_bundle()
    );
    let t = TempFile::new("bundle-url.yaml", &text);
    let o = fabric(&["-f", t.path(), "validate"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = fabric(&["-f", t.path(), "plan", "--offline"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(
        out.contains(&format!("+ host.sp-cp1/command:k3s-install  K3s v1.33.5+k3s1 k3s from the air-gap bundle (k3s sha256 aaaaaaaaaaaa…; fetched here at apply: k3s from http://{at}/k3s, k3s-airgap-images-amd64.tar.zst from http://{at}/k3s-airgap-images-amd64.tar.zst), nothing downloaded on the host; over a running K3s: datastore and token backed up first, then cordon, drain, install, Ready, uncordon")),
        "{out}"
    );
    assert!(!out.contains("s3cret") && !stderr(&o).contains("s3cret"), "{out}");
    let asked = listener.accept().map(|(_, from)| from.to_string());
    assert!(
        matches!(&asked, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the bundle's server was contacted: {asked:?}"
    );
}

#[test]
fn a_zero_wait_timeout_is_refused() {
    // 0 would fail every step at once rather than mean "do not wait": refused at the flag.
    // A usage error: 1, as every error (2 is "changes").
    let o = fabric(&["--example", "apply", "--wait-timeout", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--wait-timeout"), "{}", stderr(&o));
}

#[test]
fn graph_formats() {
    let o = fabric(&["--example", "graph"]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    assert!(
        text.lines().any(|l| l.starts_with("A.3@franca ") && l.contains("  Join VMs to the Cilium mesh")),
        "{text}"
    );
    assert!(text.contains("needs A.1@sp, A.2@franca/franca-gpu3, B.1"), "{text}");
    // A.2 in place: the site's instance, then one per node, each after the one before.
    assert!(
        text.contains(
            "A.2@franca/franca-cp1   Migrate K3s to Cilium (existing cluster)  risk high    needs A.2@franca\n"
        ),
        "{text}"
    );
    assert!(text.contains("needs A.2@franca/franca-cp1\n"), "{text}");
    let dot = stdout(&fabric(&["--example", "graph", "--format", "dot"]));
    assert!(dot.starts_with("digraph fabric {"));
    assert!(dot.contains("\"A.2@franca/franca-gpu3\" -> \"A.3@franca\";"), "{dot}");
    assert!(
        dot.contains("\"A.2@franca\" [label=\"A.2@franca\\nMigrate K3s to Cilium (existing cluster)\", color=red"),
        "{dot}"
    );
    let mm = stdout(&fabric(&["--example", "graph", "--format", "mermaid"]));
    assert!(mm.starts_with("flowchart LR\n"));
    assert!(mm.contains("  A_1_sp --> B_2\n"), "{mm}");
}

#[test]
fn third_site_needs_no_code_change() {
    let o = fabric(&["-f", "tests/data/three-sites.yaml", "graph"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("A.1@rio"), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("A.3@rio ")
            && l.contains(" Join VMs to the Cilium mesh ")
            && l.ends_with("needs A.1@rio")),
        "{text}"
    );
    assert!(text.contains("D.1@rio"), "{text}");
    let o = fabric(&["-f", "tests/data/three-sites.yaml", "plan", "--offline", "--step", "B.1"]);
    let out = stdout(&o);
    assert!(out.contains("router.rio/wireguard:wg0"), "{out}");
    assert!(out.contains("router.franca/vyos:protocols static route 192.168.4.0/23"), "{out}");
}

/// Issue #22 item 6: SP's new cluster is installed from the bundle on its server and on the
/// seed's GPU hosts (pve-ippri-31/33/34), which A.1 joins as agents; D.1 then labels them, and
/// nothing is refused. A.4@sp is gone: those Proxmox hosts are listed once, as GPU nodes.
#[test]
fn the_example_plans_sp_k3s_on_its_server_and_gpu_agents() {
    let o = fabric(&["--example", "plan", "--offline"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let a1 = out.split("\n\n").find(|b| b.starts_with("A.1@sp ")).expect("A.1@sp is planned");
    assert!(a1.contains("+ host.sp-cp1/command:k3s-install  K3s v1.33.5+k3s1 k3s from the air-gap bundle"), "{a1}");
    for n in ["pve-ippri-31", "pve-ippri-33", "pve-ippri-34"] {
        for want in [
            format!("+ host.{n}/file:/etc/rancher/k3s/config.yaml  K3s agent config joining `sp`"),
            format!("+ host.{n}/file:/etc/rancher/k3s/token  K3s join token, copied from sp-cp1 (sensitive)"),
            format!("+ host.{n}/command:k3s-install  K3s v1.33.5+k3s1 k3s-agent from the air-gap bundle"),
        ] {
            assert!(a1.contains(&want), "{want}: {a1}");
        }
        assert!(out.contains(&format!("+ cluster.sp/Node/{n}  labels gpu.model=a5000")), "D.1 labels {n}: {out}");
    }
    assert!(!out.contains("refused"), "{out}");
    assert!(!out.contains("A.4@sp"), "listed once, as GPU nodes: {out}");
    // Item 9: the risk line says what the seed's choices cost here.
    let risk = a1.lines().next().unwrap();
    assert!(risk.starts_with("A.1@sp  Provision K3s with Cilium (new cluster)  risk low; cost: Proxmox hosts pve-ippri-31, pve-ippri-33, pve-ippri-34 run the kubelet and Cilium's agent"), "{risk}");
    assert!(
        risk.contains("this site's own DRBD replication and Proxmox corosync included")
            && risk.contains("`direct` keeps Cilium out of it"),
        "{risk}"
    );
    let o = fabric(&["--example", "plan", "--offline", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let a1 = v["steps"].as_array().unwrap().iter().find(|s| s["key"] == "A.1@sp").unwrap();
    assert_eq!(a1["costs"].as_array().map(Vec::len), Some(2), "{a1}");
}

#[test]
fn plan_offline_lists_steps_and_resources() {
    let o = fabric(&["--example", "plan", "--offline"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("fabric plan: sp-franca (topology.example.yaml (embedded))\n"), "{out}");
    assert!(out.contains("A.1@sp  Provision K3s with Cilium (new cluster)  risk low"));
    assert!(out.contains("+ cluster.sp/kube-system/HelmChart/cilium"), "{out}");
    assert!(out.contains("+ router.franca/vyos:interfaces wireguard wg0"), "{out}");
    assert!(out.contains("K3s join token, copied from franca-cp1 (sensitive)"), "{out}");
    let summary = out.lines().last().unwrap();
    assert!(summary.starts_with("Plan: ") && summary.ends_with("to create, 0 to update, 0 to delete."), "{summary}");
    // --detailed-exitcode: 2 when there are changes.
    let o = fabric(&["--example", "plan", "--offline", "--detailed-exitcode", "-q"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn plan_refuses_live_planning_of_the_example() {
    let o = fabric(&["--example", "plan"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("production addresses"), "{}", stderr(&o));
}

#[test]
fn plan_selection() {
    // Phase B needs phase A's pending steps.
    let o = fabric(&["--example", "plan", "--offline", "--phase", "B"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("step B.2 needs A.1@sp, which is not selected and has pending changes"), "{err}");
    assert!(err.contains("--with-deps"), "{err}");
    let o = fabric(&["--example", "plan", "--offline", "--phase", "B", "--with-deps", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let keys: Vec<&str> = v["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    let nodes = ["franca-cp1", "franca-gpu1", "franca-gpu2", "franca-gpu3"].map(|n| format!("A.2@franca/{n}"));
    let mut want = vec!["A.1@sp".to_string(), "A.2@franca".into()];
    want.extend(nodes.iter().cloned());
    want.extend(["B.1", "B.2", "B.3"].map(String::from));
    assert_eq!(keys, want);
    // `--step A.2@franca` is the site's migration with its nodes; one node's part selects itself.
    let o = fabric(&["--example", "plan", "--offline", "--step", "A.2@franca", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let keys: Vec<&str> = v["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys.len(), 5, "{keys:?}");
    let o = fabric(&[
        "--example",
        "plan",
        "--offline",
        "--step",
        "A.2@franca/franca-gpu2",
        "--with-deps",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let keys: Vec<&str> = v["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["A.2@franca", "A.2@franca/franca-cp1", "A.2@franca/franca-gpu1", "A.2@franca/franca-gpu2"]);
    // A site selects that site's steps and only its resources of fabric-wide steps.
    let o = fabric(&["--example", "plan", "--offline", "--step", "B.1", "--site", "sp", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let addrs: Vec<&str> =
        v["steps"][0]["changes"].as_array().unwrap().iter().map(|c| c["address"].as_str().unwrap()).collect();
    assert_eq!(
        addrs,
        [
            "router.sp/vyos:interfaces wireguard wg0",
            "router.sp/vyos:protocols static route 192.168.0.0/23",
            "router.sp/vyos:firewall ipv4 input filter rule 50",
            "router.sp/vyos:firewall ipv4 input filter rule 51",
            "router.sp/vyos:firewall ipv4 forward filter rule 50",
            "router.sp/vyos:firewall ipv4 forward filter rule 51",
            "router.sp/vyos:nat source rule 50"
        ]
    );
    // Unknown names get a suggestion.
    let o = fabric(&["--example", "plan", "--offline", "--site", "sao-paulo"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("there is no site `sao-paulo`"), "{}", stderr(&o));
    let o = fabric(&["--example", "plan", "--offline", "--step", "A.9"]);
    assert!(stderr(&o).contains("there is no step `A.9`"), "{}", stderr(&o));
}

#[test]
fn plan_json_is_versioned_and_markdown_is_a_table() {
    let o = fabric(&["--example", "plan", "--offline", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["format_version"], "1.6");
    assert_eq!(v["mode"]["kind"], "offline");
    assert_eq!(v["steps"][0]["status"], "changes");
    assert_eq!(v["summary"]["unknown_steps"], 0);
    assert!(v["summary"]["create"].as_u64().unwrap() > 50);
    let c = &v["steps"][0]["changes"][0];
    assert_eq!(c["action"], "create");
    assert_eq!(c["address"], "host.sp-cp1/file:/etc/rancher/k3s/config.yaml");
    let o = fabric(&["--example", "plan", "--offline", "--format", "markdown"]);
    let md = stdout(&o);
    assert!(md.starts_with("### fabric plan: `sp-franca`"), "{md}");
    assert!(
        md.contains("| `A.2@franca` | Migrate K3s to Cilium (existing cluster) | high | 1 | 0 | 0 | changes |")
            && md.contains(
                "| `A.2@franca/franca-gpu1` | Migrate K3s to Cilium (existing cluster) | high | 1 | 0 | 0 | changes |"
            )
            && md.contains("changes here, node by node: franca-cp1, franca-gpu1, franca-gpu2, franca-gpu3: review"),
        "{md}"
    );
    assert!(md.contains("```diff\n# A.1@sp"), "{md}");
}

#[test]
fn plan_out_writes_the_json_plan() {
    let dir = std::env::temp_dir().join(format!("fabric-plan-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("plan.json");
    let o = fabric(&["--example", "plan", "--offline", "-q", "--out", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(v["fabric"], "sp-franca");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_explains_with_examples() {
    for cmd in ["validate", "graph", "plan", "show", "schema", "render", "apply", "rollback", "completions", "man"] {
        let o = fabric(&[cmd, "--help"]);
        assert_eq!(o.status.code(), Some(0));
        assert!(stdout(&o).contains("Example"), "{cmd} --help has an example");
    }
}

#[test]
fn render_writes_then_checks_then_prunes() {
    let dir = std::env::temp_dir().join(format!("fabric-render-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    // --check on an empty directory: every file is missing, exit 1.
    let o = fabric(&["--example", "render", "--out", d, "--check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("+ config/vyos/wireguard/sp.conf"), "{}", stdout(&o));
    assert!(stderr(&o).contains("of the rendered files differ from"), "{}", stderr(&o));
    // Write, then --check passes.
    let o = fabric(&["--example", "render", "--out", d]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = fabric(&["--example", "render", "--out", d, "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("files in") && stdout(&o).contains("match the topology"), "{}", stdout(&o));
    // A hand edit is found.
    let f = dir.join("apps/kueue/cluster-queues/gpu-sp.yaml");
    let text = std::fs::read_to_string(&f).unwrap().replace("nominalQuota: 2", "nominalQuota: 3");
    std::fs::write(&f, text).unwrap();
    let o = fabric(&["--example", "render", "--out", d, "--check"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o).trim(), "~ apps/kueue/cluster-queues/gpu-sp.yaml");
    // A file fabric wrote that the topology no longer produces is stale, and render removes it;
    // a file of someone else's is left alone.
    std::fs::write(dir.join("apps/cilium/values-rio.yaml"), "# Rendered by fabric from topology `x`\n").unwrap();
    std::fs::write(dir.join("apps/cilium/README.md"), "mine\n").unwrap();
    let o = fabric(&["--example", "render", "--out", d, "--check"]);
    assert!(stdout(&o).contains("- apps/cilium/values-rio.yaml"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("README"), "{}", stdout(&o));
    let o = fabric(&["--example", "render", "--out", d]);
    assert_eq!(o.status.code(), Some(0));
    assert!(!dir.join("apps/cilium/values-rio.yaml").exists());
    assert!(dir.join("apps/cilium/README.md").exists());
    let o = fabric(&["--example", "render", "--out", d, "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rendered_output_holds_no_secret_material() {
    let dir = std::env::temp_dir().join(format!("fabric-render-secrets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = fabric(&["--example", "render", "--out", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let mut files = vec![dir.clone()];
    let mut texts = String::new();
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else {
            texts.push_str(&std::fs::read_to_string(&p).unwrap());
        }
    }
    for forbidden in ["private-key", "PrivateKey", "BEGIN ", "token:", "kind: Secret", "kubeconfig:"] {
        assert!(!texts.contains(forbidden), "rendered files contain `{forbidden}`");
    }
    assert!(texts.contains("<public-key:router.sp>"), "public keys are placeholders");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn with_deps_follows_the_edges_derived_from_the_objects() {
    // D.4's Job is sent to the LocalQueue D.3 makes, whose ClusterQueue names D.2's admission
    // check: the table (C.1, D.1) alone left both out (issue 12, item 4).
    let o = fabric(&["--example", "plan", "--offline", "--step", "D.4", "--with-deps", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let keys: Vec<&str> = v["steps"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap()).collect();
    assert!(keys.contains(&"D.2") && keys.contains(&"D.3"), "{keys:?}");
    // The gateway's per-site Services select the label C.6's overriders set.
    let text = stdout(&fabric(&["--example", "graph"]));
    assert!(text.contains("needs B.3, C.5, C.6*\n"), "{text}");
    assert!(text.contains("* C.6 makes pod label fabric.io/site="), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&fabric(&["--example", "graph", "--format", "json"]))).unwrap();
    let d4 = json["steps"].as_array().unwrap().iter().find(|s| s["key"] == "D.4").unwrap();
    assert_eq!(d4["derived"][0]["step"], "D.3", "{d4}");
    let dot = stdout(&fabric(&["--example", "graph", "--format", "dot"]));
    assert!(dot.contains("\"D.3\" -> \"D.4\" [style=dashed"), "{dot}");
}

#[test]
fn the_example_passes_the_consistency_pass() {
    let o = fabric(&["--example", "validate", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stdout(&o).contains("consistency::"), "{}", stdout(&o));
    for cmd in [&["--example", "plan", "--offline"][..], &["--example", "render", "--out", "/nonexistent/x", "--check"]]
    {
        let o = fabric(cmd);
        assert!(!stderr(&o).contains("consistency::"), "{cmd:?}: {}", stderr(&o));
    }
}

/// The example with SP's GPU nodes made plain workers (no GPUs, no GPU quota, no MultiKueue), and
/// the GPU services placed at Franca only, one replica each (at SP they would not fit).
fn example_without_sp_gpus() -> String {
    let mut s = EXAMPLE.to_string();
    for i in [31, 33, 34] {
        let gpu = format!(
            "- {{ name: pve-ippri-{i}, role: gpu, address: 192.168.2.{}, ssh: {{ host: 192.168.2.{} }}, gpu: {{ model: a5000, count: 1, memory_gib: 24 }}, runs: [proxmox, linstor-satellite], allocatable: {{ cpus: 16, memory_gib: 62 }} }}",
            i + 10,
            i + 10
        );
        assert!(s.contains(&gpu), "{gpu}");
        s = s.replace(
            &gpu,
            &format!("- {{ name: sp-w{i}, role: worker, address: 192.168.2.2{i}, ssh: {{ host: 192.168.2.2{i} }} }}"),
        );
    }
    let queues = "        gpu_quota: 1\n        local_queues: [{ name: interactive, namespace: ai }]\n      - name: gpu-batch\n        gpu_quota: 2\n        local_queues: [{ name: batch, namespace: batch }]\n\nmesh";
    assert!(s.contains(queues));
    s = s.replace(queues, &queues.replace("gpu_quota: 1", "gpu_quota: 0").replace("gpu_quota: 2", "gpu_quota: 0"));
    let mk = s.find("\nmultikueue:\n").unwrap();
    let end = s[mk + 1..].find("\n\n").unwrap() + mk + 1;
    s.replace_range(mk..end, "");
    // Without MultiKueue Franca's gpu-batch is a local queue: its own batch queue beside it goes.
    let local = s.find("      - name: gpu-batch-local").unwrap();
    let end = s[local..].find("      - name: gpu-batch ").unwrap() + local;
    s.replace_range(local..end, "");
    let class = "    sites: [franca, sp]\n    weights: { franca: 1, sp: 1 }";
    assert!(s.contains(class));
    // One replica each: together they fit Franca's shared GPU.
    s.replacen(class, "    sites: [franca]\n    weights: { franca: 1 }", 1)
        .replace("queue: gpu-interactive, replicas: 2 }", "queue: gpu-interactive, replicas: 1 }")
}

#[test]
fn a_gateway_route_to_a_site_without_gpus_is_an_error_at_the_route() {
    let text = example_without_sp_gpus();
    let f = TempFile::new("no-sp-gpus.yaml", &text);
    let o = fabric(&["-f", f.path(), "validate"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("topology::reference"), "{err}");
    assert!(err.contains("service `vllm` does not run at `sp` (class `gpu-services`)"), "{err}");
    // At the route to SP (column of its `sp`).
    let line = text.lines().position(|l| l.contains("{ site: sp, weight: 20 }")).unwrap() + 1;
    assert!(err.contains(&format!("no-sp-gpus.yaml:{line}:19")), "{err}");
    let o = fabric(&["-f", f.path(), "plan", "--offline"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // With the GPU services at SP too, they would not fit its (no) GPUs.
    let at_sp = text.replacen(
        "    sites: [franca]\n    weights: { franca: 1 }",
        "    sites: [franca, sp]\n    weights: { franca: 1, sp: 1 }",
        1,
    );
    let f = TempFile::new("no-sp-gpus-placed.yaml", &at_sp);
    let err = stderr(&fabric(&["-f", f.path(), "validate"]));
    assert!(
        err.contains("service `vllm` needs KAI Scheduler at site `sp`, which has none: the site has no GPU nodes"),
        "{err}"
    );
    // Routed only to Franca, the same topology passes.
    let fixed = text
        .replace("        - { site: sp, weight: 20 }\n", "")
        .replace("{ site: franca, weight: 80 }", "{ site: franca, weight: 100 }");
    let f = TempFile::new("no-sp-gpus-fixed.yaml", &fixed);
    let o = fabric(&["-f", f.path(), "validate"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = fabric(&["-f", f.path(), "plan", "--offline", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A snapshot (`fabric state snapshot`'s file) whose reads say `franca-cp1` runs K3s `server`,
/// the agent `franca-gpu1` runs `agent`, and franca's Cilium chart is at `cilium`.
fn running_snapshot(server: &str, agent: &str, cilium: &str) -> TempFile {
    use fabric::providers::Observed;
    let mut live = fabric::live::observe::Live::default();
    let sha = "a".repeat(64);
    for (node, svc, v) in [("franca-cp1", "k3s", server), ("franca-gpu1", "k3s-agent", agent)] {
        let addr = format!("host.{node}/command:k3s-install").parse().unwrap();
        live.observed.insert(addr, Observed::Present(format!("{svc} {sha} {v}\n")));
    }
    live.observed.insert(
        "cluster.franca/kube-system/HelmChart/cilium".parse().unwrap(),
        Observed::Present(format!("kind: HelmChart\nspec:\n  version: {cilium}\n")),
    );
    let snap = fabric::live::snapshot::Snapshot::new("test", "", live, vec![]);
    TempFile::new("state.json", &serde_json::to_string(&snap).unwrap())
}

#[test]
fn validate_refuses_a_forbidden_upgrade_at_its_versions_line() {
    // One minor up, servers not behind their agents: allowed.
    let ok = running_snapshot("v1.32.9+k3s1", "v1.32.9+k3s1", "1.17.9");
    let o = fabric(&["-f", "topology.example.yaml", "validate", "--observed", ok.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // K3s two minors up, Cilium skipping 1.17, an agent newer than the servers will be.
    let bad = running_snapshot("v1.31.4+k3s1", "v1.34.1+k3s1", "1.16.5");
    let o = fabric(&["-f", "topology.example.yaml", "validate", "--observed", bad.path()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let k3s = EXAMPLE.lines().position(|l| l.trim().starts_with("k3s: v")).unwrap() + 1;
    let cilium = EXAMPLE.lines().position(|l| l.trim().starts_with("cilium: 1")).unwrap() + 1;
    assert!(err.contains(&format!("topology.example.yaml:{k3s}:8")), "the k3s line: {err}");
    assert!(err.contains(&format!("topology.example.yaml:{cilium}:11")), "the cilium line: {err}");
    assert!(err.contains("skips minor 1.32") && err.contains("Manual Upgrades"), "{err}");
    assert!(err.contains("skips minor 1.17") && err.contains("consecutive minor releases"), "{err}");
    assert!(err.contains("agent franca-gpu1 runs K3s v1.34.1+k3s1, newer"), "{err}");
    assert!(err.contains("3 version change(s) upstream's upgrade rules forbid"), "{err}");
    // JSON: the same, as data.
    let o = fabric(&["-f", "topology.example.yaml", "validate", "--observed", bad.path(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let skews: Vec<&serde_json::Value> =
        v["diagnostics"].as_array().unwrap().iter().filter(|d| d["code"] == "topology::skew").collect();
    assert_eq!(skews.len(), 3, "{v}");
    assert_eq!(skews[0]["path"], "versions.k3s");
}

/// `rotate wireguard` refuses, before it contacts anything, a site the topology lacks and the
/// embedded example (its addresses are production's).
#[test]
fn rotate_wireguard_refuses_before_contacting_anything() {
    let o = fabric(&["--example", "rotate", "wireguard", "--site", "nowhere", "--auto-approve"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("there is no site `nowhere`"), "{}", stderr(&o));
    let o = fabric(&["--example", "rotate", "wireguard", "--site", "sp", "--auto-approve"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("the example topology is never read live"), "{}", stderr(&o));
    let o = fabric(&["rotate", "wireguard", "--help"]);
    assert!(stdout(&o).contains("fabric rotate wireguard --site sp --auto-approve"), "{}", stdout(&o));
}

/// A usage error exits 1 as terraform's does (clap's own 2 is "changes" under
/// --detailed-exitcode, which CI and the drift timer take as success); help and version exit 0.
#[test]
fn usage_errors_exit_1_and_help_exits_0() {
    for (args, says) in [
        (&["--example", "plan", "--offline", "--fromat", "markdown"][..], "unexpected argument '--fromat'"),
        (&["--example", "plan", "--offline", "--format", "md"], "invalid value 'md' for '--format <FORMAT>'"),
        (&["--example", "plan", "--base", "base.yaml"], "the following required arguments were not provided"),
        (&["bogus"], "unrecognized subcommand 'bogus'"),
        (&["--example", "plan", "--offline", "--detailed-exitcode", "--bogus"], "unexpected argument '--bogus'"),
    ] {
        let o = fabric(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?}: {}", stdout(&o));
    }
    for args in [&["--help"][..], &["--version"], &["plan", "--help"], &["help", "plan"]] {
        let o = fabric(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert!(!stdout(&o).is_empty(), "{args:?}");
    }
}

/// A snapshot whose reads could not reach sp's server: what A.1@sp would change there is not
/// known, and no format says "no changes" about it.
#[test]
fn a_target_not_read_is_unknown_in_every_format_and_exits_3() {
    let mut live = fabric::live::observe::Live::default();
    live.unreachable.insert("host.sp-cp1".parse().unwrap(), "connection timed out".into());
    let snap = fabric::live::snapshot::Snapshot::new("test", "", live, vec![]);
    let state = TempFile::new("state.json", &serde_json::to_string(&snap).unwrap());
    let plan = |extra: &[&str]| {
        let mut args = vec!["-f", "topology.example.yaml", "plan", "--observed", state.path(), "--step", "A.1@sp"];
        args.extend(extra);
        Command::new(env!("CARGO_BIN_EXE_fabric"))
            .args(&args)
            .env("NO_COLOR", "1")
            // Contacts nothing: the chart indexes are not asked either.
            .env("FABRIC_CHART_INDEXES", "off")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap()
    };
    let o = plan(&[]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = stdout(&o);
    let step = out.split("A.1@sp  ").nth(1).unwrap().split("\n\n").next().unwrap();
    assert!(step.contains("\n  ? unknown: host.sp-cp1 unreachable (connection timed out)\n"), "{out}");
    assert!(!step.contains("no changes"), "{out}");
    assert!(out.contains("1 step unknown: 1 target(s) unreachable."), "{out}");
    assert!(stderr(&o).contains("the changes of 1 step(s) are unknown"), "{}", stderr(&o));
    let o = plan(&["--detailed-exitcode", "--format", "json"]);
    assert_eq!(o.status.code(), Some(3), "never 0 or 2 when something is unknown: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["steps"][0]["status"], "unknown");
    assert_eq!(v["steps"][0]["unreachable"][0], "host.sp-cp1");
    assert_eq!(v["summary"]["unknown_steps"], 1);
    let o = plan(&["--format", "markdown"]);
    assert_eq!(o.status.code(), Some(3));
    let md = stdout(&o);
    assert!(md.contains("> :question: **`A.1@sp`** ? unknown: host.sp-cp1 unreachable (connection timed out)"), "{md}");
    assert!(md.contains("| `A.1@sp` | "), "{md}");
    assert!(md.contains(" | unknown |"), "{md}");
}

/// A one-site fabric (issue 36, item 7): no tunnel, no Cluster Mesh, no public-address decision;
/// Karmada then needs the host cluster itself.
#[test]
fn one_site_plans_no_tunnel_and_no_mesh_and_asks_for_no_peer() {
    let lab = include_str!("data/lab-linux.yaml");
    let (start, end) = (lab.find("  - name: sp\n").unwrap(), lab.find("federation:").unwrap());
    let one =
        format!("{}{}", &lab[..start], &lab[end..]).replace("  public_address: { franca: fixed, sp: fixed }\n", "");
    assert!(!one.contains("public_address: {"), "no decision about a peer: {one}");
    let f = TempFile::new("one-site.yaml", &one);
    let o = fabric(&["-f", f.path(), "validate"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("public_address"), "{}", stderr(&o));
    let o = fabric(&["-f", f.path(), "graph"]);
    let graph = stdout(&o);
    assert!(!graph.contains("B.1") && !graph.contains("B.2") && !graph.contains("B.3"), "{graph}");
    assert!(graph.lines().any(|l| l.starts_with("C.1 ") && l.ends_with("needs A.1@franca")), "{graph}");
    let o = fabric(&["-f", f.path(), "plan", "--offline", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let steps: Vec<&str> = v["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert!(steps.contains(&"C.1") && !steps.iter().any(|s| s.starts_with("B.")), "{steps:?}");
    let plan = stdout(&o);
    assert!(!plan.contains("wireguard") && !plan.contains("clustermesh"), "{plan}");
    let o = fabric(&["-f", f.path(), "plan", "--offline", "--step", "B.1"]);
    assert_eq!(o.status.code(), Some(1));
}

/// A loopback port where a test's ssh config sends every host: it counts the connections made
/// to it and closes each at once (fabric then finds the host unreachable), so a test sees
/// whether fabric connected at all. Nothing else is ever contacted.
struct Loopback {
    connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ssh_config: TempFile,
    _key: TempFile,
}

impl Loopback {
    fn start() -> Loopback {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(stream);
            }
        });
        let key = TempFile::new("id_ed25519", "");
        let config = format!(
            "Host *\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {}\n  \
             UserKnownHostsFile {}.known_hosts\n",
            key.path(),
            key.path()
        );
        Loopback { connections, ssh_config: TempFile::new("ssh_config", &config), _key: key }
    }

    fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// fabric with this ssh config, stdin not a terminal, in `dir`.
    fn fabric(&self, dir: &std::path::Path, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_fabric"))
            .args(["--ssh-config", self.ssh_config.path(), "-q"])
            .args(args)
            .env("NO_COLOR", "1")
            .env("FABRIC_CHART_INDEXES", "off")
            .env_remove("FABRIC_TOPOLOGY")
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run fabric")
    }
}

/// The lab's topology (routers over SSH only for B.1, kubeconfigs that do not exist) in a
/// directory of its own, and an offline plan of B.1 made from it, turned
/// into a plan of live state (as `plan --out` writes after a read) unless `offline`.
fn planned(offline: bool) -> (TempFile, TempFile) {
    let topology = TempFile::new("topology.yaml", include_str!("data/lab-linux.yaml"));
    let plan = TempFile::new("b1.plan", "");
    let o = fabric(&["-f", topology.path(), "plan", "--offline", "--step", "B.1", "-q", "--out", plan.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    if !offline {
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan.0).unwrap()).unwrap();
        v["mode"] = serde_json::json!({ "kind": "live", "fingerprint": "0".repeat(64) });
        std::fs::write(&plan.0, v.to_string()).unwrap();
    }
    (topology, plan)
}

/// Issue 36, item 3: every local check before any connection, each mismatch said exactly.
#[test]
fn apply_checks_everything_local_before_any_connection() {
    let net = Loopback::start();
    let (topology, plan) = planned(false);
    let dir = topology.0.parent().unwrap().to_path_buf();
    // No terminal to ask at, no --auto-approve, no planfile: refused before anything is read.
    let o = net.fabric(&dir, &["apply", "--step", "B.1"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("apply needs approval and stdin is not a terminal; nothing was read"),
        "{}",
        stderr(&o)
    );
    // Another topology than the plan's: both named, with their digests.
    let other = TempFile::new("other.yaml", &format!("{}# changed\n", include_str!("data/lab-linux.yaml")));
    let o = net.fabric(&dir, &["-f", other.path(), "apply", plan.path()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let made = std::fs::canonicalize(&topology.0).unwrap();
    let given = std::fs::canonicalize(&other.0).unwrap();
    let err = stderr(&o);
    assert!(err.contains(&format!("{} was made from {} (sha256 ", plan.path(), made.display())), "{err}");
    assert!(err.contains(&format!("…), not from {} (sha256 ", given.display())), "{err}");
    // Another fabric release.
    let text = std::fs::read_to_string(&plan.0).unwrap();
    let older = TempFile::new("older.plan", &text.replace("\"fabric_version\":\"", "\"fabric_version\":\"0.0.0-"));
    let o = net.fabric(&dir, &["apply", older.path()]);
    assert!(stderr(&o).contains(&format!("{} was made by fabric 0.0.0-", older.path())), "{}", stderr(&o));
    // An offline plan, an open decision, an unrecorded bundle digest.
    let (_t, offline) = planned(true);
    let o = net.fabric(&dir, &["apply", offline.path()]);
    assert!(stderr(&o).contains("an offline plan cannot be applied"), "{}", stderr(&o));
    let undecided = TempFile::new(
        "undecided.yaml",
        &include_str!("data/lab-linux.yaml").replace("argocd: single", "argocd: undecided"),
    );
    let o = net.fabric(&dir, &["-f", undecided.path(), "apply", "--auto-approve"]);
    assert!(stderr(&o).contains("wait on a decision: C.3: "), "{}", stderr(&o));
    assert_eq!(net.connections(), 0, "nothing was contacted");
}

/// Issue 36, item 3, for the rotations too: without --auto-approve and no terminal to ask at,
/// `rotate wireguard` and `rotate credentials` refuse at once, as apply does, before reading any
/// router or cluster (the loopback listener counts every connection attempt).
#[test]
fn rotations_refuse_without_a_terminal_before_any_connection() {
    let net = Loopback::start();
    let (topology, _plan) = planned(true);
    let dir = topology.0.parent().unwrap().to_path_buf();
    for rotation in ["wireguard", "credentials"] {
        let o = net.fabric(&dir, &["rotate", rotation]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let says = format!("rotate {rotation} needs approval and stdin is not a terminal; nothing was read");
        assert!(stderr(&o).contains(&says), "{}", stderr(&o));
        assert!(stderr(&o).contains("--auto-approve"), "{}", stderr(&o));
        assert!(o.stdout.is_empty(), "nothing shown before the refusal: {}", String::from_utf8_lossy(&o.stdout));
    }
    assert_eq!(net.connections(), 0, "nothing was contacted");
}

/// Issue 36, item 5, for the ssh config: what a `Host *` block asks that fabric does not do is
/// one warning per cause (its file and line), naming every target it applies to, not one per
/// host. The targets are a loopback port nobody listens on (the plan finds them unreachable).
#[test]
fn ssh_config_warnings_once_per_cause_with_the_targets() {
    let (topology, _plan) = planned(true);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = TempFile::new(
        "ssh_config_warn",
        &format!(
            "Host *\n  HostName 127.0.0.1\n  Port {port}\n  HostKeyAlias everywhere\n  \
             ProxyCommand nc %h %p\n  StrictHostKeyChecking accept-new\n"
        ),
    );
    let o = Command::new(env!("CARGO_BIN_EXE_fabric"))
        .args(["-f", topology.path(), "--ssh-config", config.path(), "plan", "--step", "B.1"])
        .env("NO_COLOR", "1")
        .env("FABRIC_CHART_INDEXES", "off")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run fabric");
    let err = stderr(&o);
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ssh config: ")).collect();
    let at = |line: usize| format!("warning: ssh config: {}:{line}: ", config.path());
    for (line, says) in [
        (4, "`hostkeyalias` is not supported by fabric and is ignored (for "),
        (5, "ProxyCommand is not supported by fabric: it connects directly (use ProxyJump for a jump host) (for "),
        (6, "StrictHostKeyChecking accept-new: fabric always checks host keys strictly and never adds one (for "),
    ] {
        let cause: Vec<&&str> = warnings.iter().filter(|w| w.starts_with(&at(line))).collect();
        assert_eq!(cause.len(), 1, "line {line} warned once:\n{err}");
        assert!(cause[0].contains(says), "{err}");
        for target in ["router.franca", "router.sp", "host.franca-lan", "host.sp-lan"] {
            assert!(cause[0].contains(target), "line {line} names {target}:\n{err}");
        }
    }
    assert_eq!(warnings.len(), 3, "one warning per cause:\n{err}");
}

/// `apply PLANFILE` needs no -f (the plan names its topology) and asks nothing (it was
/// reviewed): it goes on to read, here finds the targets unreachable and refuses.
#[test]
fn apply_planfile_reads_its_own_topology_and_asks_nothing() {
    let net = Loopback::start();
    let (_topology, plan) = planned(false);
    let elsewhere = std::env::temp_dir();
    let o = net.fabric(&elsewhere, &["apply", plan.path()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(!err.contains("stdin is not a terminal") && !err.contains("no topology.yaml"), "{err}");
    assert!(err.contains("cannot apply: ") && err.contains("could not be read"), "{err}");
    assert!(net.connections() > 0, "the read happened, after the local checks");
}

/// `fabric show PLANFILE`: the saved plan in every format, nothing read.
#[test]
fn show_prints_a_saved_plan_in_every_format() {
    let (_topology, plan) = planned(true);
    let o = fabric(&["show", plan.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("fabric plan: lab ("), "{}", stdout(&o));
    assert!(stdout(&o).contains("+ router.franca/wireguard:wg0"), "{}", stdout(&o));
    let o = fabric(&["show", plan.path(), "--format", "markdown"]);
    assert!(stdout(&o).starts_with("### fabric plan: `lab`"), "{}", stdout(&o));
    let o = fabric(&["show", plan.path(), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["selection"]["steps"][0], "B.1");
    let o = fabric(&["show", "/nonexistent/b1.plan"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read /nonexistent/b1.plan"), "{}", stderr(&o));
}

/// Issue 36, item 5: a new object's whole content in every format (a secret's never); what
/// does not change hidden unless asked; `-q` keeps the summary line.
#[test]
fn plans_show_new_objects_whole_and_hide_what_does_not_change() {
    let o = fabric(&["--example", "plan", "--offline", "--step", "A.1@sp", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let changes = v["steps"][0]["changes"].as_array().unwrap();
    let cilium = changes.iter().find(|c| c["address"] == "cluster.sp/kube-system/HelmChart/cilium").unwrap();
    let diff = cilium["diff"].as_str().unwrap();
    assert!(diff.contains("+kind: HelmChart\n") && diff.contains("+  chart: cilium\n"), "{diff}");
    let secret = changes.iter().find(|c| c["sensitive"] == true).expect("A.1 copies the join token");
    assert_eq!(secret["diff"], serde_json::Value::Null, "never a secret's content: {secret}");
    let o = fabric(&["--example", "plan", "--offline", "--step", "A.1@sp"]);
    assert!(stdout(&o).contains("      +kind: HelmChart\n"), "{}", stdout(&o));
    let o = fabric(&["--example", "plan", "--offline", "--step", "A.1@sp", "--format", "markdown"]);
    assert!(stdout(&o).contains("\n+kind: HelmChart\n"), "{}", stdout(&o));

    // The change from a base that differs in one quota: the rest is hidden in every view.
    let batch = "local_queues: [{ name: batch, namespace: batch }]";
    let base = EXAMPLE.replace(&format!("gpu_quota: 2\n        {batch}"), &format!("gpu_quota: 1\n        {batch}"));
    let base = TempFile::new("base.yaml", &base);
    let plan = |extra: &[&str]| {
        let mut args = vec!["-f", "topology.example.yaml", "plan", "--offline", "--base", base.path()];
        args.extend(extra);
        fabric(&args)
    };
    let o = plan(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // An unchanged resource's line is `    <address>` (no symbol); a diff's lines are indented more.
    let unchanged_line = |l: &str| l.starts_with("    ") && !l.starts_with("     ");
    assert!(!out.contains("no changes") && !out.lines().any(unchanged_line), "{out}");
    assert!(out.contains(" step(s) without changes not shown (--show-unchanged shows them)"), "{out}");
    let all = stdout(&plan(&["--show-unchanged"]));
    assert!(all.lines().filter(|l| unchanged_line(l)).count() > 50, "{all}");
    let json = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["--format", "json"];
        args.extend(extra);
        serde_json::from_str(&stdout(&plan(&args))).unwrap()
    };
    let count = |v: &serde_json::Value| {
        v["steps"].as_array().unwrap().iter().map(|s| s["changes"].as_array().unwrap().len()).sum::<usize>()
    };
    let (few, every) = (json(&[]), json(&["--show-unchanged"]));
    let n = |k: &str| few["summary"][k].as_u64().unwrap() as usize;
    assert_eq!((n("create"), n("delete")), (0, 0), "{few}");
    assert!(n("update") > 0 && n("no_op") > 50, "{few}");
    assert_eq!(count(&few), n("update"), "{few}");
    assert_eq!(count(&every), n("update") + n("no_op"));
    assert_eq!(few["summary"], every["summary"]);
    // -q: the summary line, and nothing else.
    assert_eq!(stdout(&plan(&["-q"])), format!("Plan: 0 to create, {} to update, 0 to delete.\n", n("update")));
}

/// Issue 36, item 5: one cause (no `k3s_airgap` for a new cluster's nodes) is one warning that
/// names its other places, not one warning per node.
#[test]
fn a_warning_is_printed_once_per_cause_with_its_places() {
    let o = fabric(&["-f", "tests/data/lab-linux.yaml", "graph"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.matches("is never installed by fabric").count(), 2, "{err}");
    assert_eq!(err.matches("⚠").count(), 1, "{err}");
    assert!(err.contains("the same cause at 1 more place(s):\n"), "{err}");
    assert!(err.contains("tests/data/lab-linux.yaml:47:11 (node `sp-lan` of the new cluster `sp`"), "{err}");
}

/// A reader that goes away (`fabric graph | head -c 0`) ends nothing badly: no panic, no
/// message, the command's own exit status (as ripgrep's).
#[test]
fn a_closed_stdout_is_quiet() {
    // The plan is far longer than a pipe's buffer: some of its writes fail whenever the read
    // end closes.
    for args in [&["--example", "graph"][..], &["--example", "plan", "--offline", "--show-unchanged"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fabric"))
            .args(args)
            .env("NO_COLOR", "1")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The read end closed before (or while) fabric writes: its writes fail with EPIPE.
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe") && !err.contains("stdout"),
            "{args:?}: {err}"
        );
    }
}
