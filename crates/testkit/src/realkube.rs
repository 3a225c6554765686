//! Real Kubernetes control planes for the tests: one per site, on loopback, started by
//! `target/realkube/kube site` (`tests/realkube/kube/site.go`): kine with SQLite, the real
//! kube-apiserver, kube-controller-manager and kube-scheduler of Kubernetes v1.33.5 (K3s
//! v1.33.5's), kwok standing in for the kubelets, and K3s's own helm-controller with the klipper
//! stand-in installing charts with the real Helm library (`tests/realkube/helm`). The binaries
//! are built by `scripts/realkube.sh build`, which `scripts/test.sh` runs first; a test that
//! finds them missing fails and says so (never a silent skip).
//!
//! [`Karmada`] is Karmada's control plane beside them (`kube karmada`, `tests/realkube/kube/karmada.go`).
//!
//! Each [`Site`] is a child process holding its parts as its own children (they die with it);
//! dropping the `Site` stops it. Sites are started once per test binary (a `OnceLock` in the
//! test), not per test: an API server takes seconds to start.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};

use serde_json::Value;

/// Where `scripts/realkube.sh build` puts the binaries.
pub fn bin_dir() -> PathBuf {
    crate::repo_root().join("target/realkube")
}

/// The chart archives the sites' helm-controller installs from (the example's pins).
pub fn charts_dir() -> PathBuf {
    crate::repo_root().join("../shared/specs/charts")
}

fn binary(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.is_file(),
        "{} is missing: build the real control plane first with `bash scripts/realkube.sh build` \
         (scripts/test.sh does)",
        p.display()
    );
    p
}

/// How a site starts.
#[derive(Debug, Clone, Default)]
pub struct SiteOptions {
    /// The API server's address (a loopback one; default 127.0.0.1) and port (default: a free one).
    pub address: Option<String>,
    pub port: Option<u16>,
    /// The cluster's Service and Pod ranges (K3s's `--service-cidr`, `--cluster-cidr`), as the
    /// topology gives them; K3s's defaults when unset.
    pub service_cidr: Option<String>,
    pub cluster_cidr: Option<String>,
    /// Run K3s's helm-controller and the klipper stand-in (with helm-controller's CRDs applied
    /// first, as K3s applies them).
    pub helm: bool,
    /// Run no kwok: Nodes stay as the test writes them, no Pod runs.
    pub no_kwok: bool,
}

/// One site's running control plane.
pub struct Site {
    pub name: String,
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    child: Child,
    // Held open: `kube site --stdin-lifeline` stops when it closes (this process ended).
    _lifeline: ChildStdin,
}

impl Site {
    /// Starts site `name` with its data in `dir` (made if missing) and waits until it is ready.
    pub fn start(dir: &Path, name: &str, opts: &SiteOptions) -> Site {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut cmd = Command::new(binary("kube"));
        cmd.args(["site", "--stdin-lifeline", "--name", name, "--dir"]).arg(dir);
        if opts.helm {
            binary("helm-controller");
            binary("klipper");
            cmd.arg("--crds").arg(bin_dir().join("crds")).arg("--charts").arg(charts_dir());
        }
        for (flag, value) in [
            ("--address", opts.address.clone()),
            ("--port", opts.port.map(|p| p.to_string())),
            ("--service-cidr", opts.service_cidr.clone()),
            ("--cluster-cidr", opts.cluster_cidr.clone()),
        ] {
            if let Some(v) = value {
                cmd.arg(flag).arg(v);
            }
        }
        if opts.no_kwok {
            cmd.arg("--no-kwok");
        } else {
            binary("kwok");
        }
        spawn(cmd, name, dir)
    }

    /// Runs the site's own kubectl (Kubernetes v1.33.5) with `args`.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_with_input(args, None)
    }

    /// [`Site::kubectl`] with `input` on its standard input (`-f -`).
    pub fn kubectl_with_input(&self, args: &[&str], input: Option<&str>) -> Output {
        let mut cmd = Command::new(binary("kube"));
        cmd.arg("kubectl").arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl");
        if let Some(text) = input {
            use std::io::Write;
            child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("kubectl stdin");
        }
        child.wait_with_output().expect("kubectl")
    }

    /// kubectl that must succeed; its standard output.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?} at {}: {}", self.name, String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Applies `objects` (JSON) with server-side apply as `manager`.
    pub fn apply(&self, objects: &[Value], manager: &str) {
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
        let out = self.kubectl_with_input(
            &["apply", "--server-side", "--force-conflicts", &format!("--field-manager={manager}"), "-f", "-"],
            Some(&list.to_string()),
        );
        assert!(out.status.success(), "apply at {}: {}", self.name, String::from_utf8_lossy(&out.stderr));
    }

    /// The object at `kind/name` (`-n namespace` when given), None when it does not exist.
    pub fn get(&self, kind: &str, name: &str, namespace: Option<&str>) -> Option<Value> {
        let mut args = vec!["get", kind, name, "-o", "json"];
        if let Some(ns) = namespace {
            args.extend(["-n", ns]);
        }
        let out = self.kubectl(&args);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("NotFound") || err.contains("not found"), "kubectl get {kind}/{name}: {err}");
            return None;
        }
        Some(serde_json::from_slice(&out.stdout).expect("kubectl's JSON"))
    }

    /// Waits until `f` holds, up to `secs` seconds; panics with `what` otherwise.
    pub fn wait_until(&self, secs: u64, what: &str, mut f: impl FnMut(&Site) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while !f(self) {
            assert!(std::time::Instant::now() < deadline, "{} after {secs} s: {what}", self.name);
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// A part's log (`apiserver`, `kwok`, `helm-controller`, `klipper`, ...).
    pub fn log(&self, part: &str) -> String {
        std::fs::read_to_string(self.dir.join("logs").join(format!("{part}.log"))).unwrap_or_default()
    }
}

/// Runs a control plane's `cmd` (`kube site` or `kube karmada`, with `--stdin-lifeline`) and
/// waits for its `ready <kubeconfig>` line.
fn spawn(mut cmd: Command, name: &str, dir: &Path) -> Site {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    let stdout = child.stdout.take().expect("piped stdout");
    let mut first = String::new();
    let _ = BufReader::new(stdout).read_line(&mut first);
    let Some(kubeconfig) = first.trim().strip_prefix("ready ") else {
        let _ = child.kill();
        let logs = std::fs::read_dir(dir.join("logs"))
            .map(|d| d.flatten().map(|e| e.path().display().to_string()).collect::<Vec<_>>().join(", "))
            .unwrap_or_default();
        panic!("{name} did not start (its logs: {logs})");
    };
    let lifeline = child.stdin.take().expect("piped stdin");
    Site { name: name.into(), dir: dir.into(), kubeconfig: kubeconfig.into(), child, _lifeline: lifeline }
}

/// How Karmada's control plane starts.
#[derive(Debug, Clone, Default)]
pub struct KarmadaOptions {
    /// karmada-apiserver's address (a loopback one; default 127.0.0.1) and port (default: a free one).
    pub address: Option<String>,
    pub port: Option<u16>,
    /// Flags for karmada-controller-manager after the harness's own, e.g. the `--feature-gates`
    /// the chart renders from fabric's values.
    pub controller_manager_args: Vec<String>,
    /// Flags for karmada-scheduler after the harness's own.
    pub scheduler_args: Vec<String>,
    /// A karmada-scheduler-estimator per member: (Karmada's name of the cluster, its kubeconfig).
    pub estimators: Vec<(String, PathBuf)>,
}

/// Karmada's control plane, started by `target/realkube/kube karmada`
/// (`tests/realkube/kube/karmada.go`): karmada-apiserver (the kube-apiserver of Kubernetes
/// v1.33.5 with Karmada's flags, on a kine datastore of its own) with a kube-controller-manager,
/// and Karmada v1.16.0's aggregated API server, webhook, controller manager, scheduler and
/// estimators (`target/realkube/karmada`, `tests/realkube/karmada`), out of cluster on loopback
/// where Karmada's chart runs them as pods in the host cluster. Its kubeconfig's context is
/// `karmada-apiserver`. Everything a [`Site`] offers (kubectl, get, logs) works on it.
pub struct Karmada(pub Site);

impl Karmada {
    /// Starts Karmada with its data in `dir` (made if missing) and waits until its API, the
    /// aggregated API and the webhook answer.
    pub fn start(dir: &Path, opts: &KarmadaOptions) -> Karmada {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        binary("karmada");
        binary("kine");
        let assets = bin_dir().join("karmada-assets");
        assert!(assets.is_dir(), "{} is missing: run `bash scripts/realkube.sh build`", assets.display());
        let mut cmd = Command::new(binary("kube"));
        cmd.args(["karmada", "--stdin-lifeline", "--dir"]).arg(dir).arg("--assets").arg(assets);
        for (flag, value) in [("--address", opts.address.clone()), ("--port", opts.port.map(|p| p.to_string()))] {
            if let Some(v) = value {
                cmd.arg(flag).arg(v);
            }
        }
        for a in &opts.controller_manager_args {
            cmd.arg(format!("--controller-manager-arg={a}"));
        }
        for a in &opts.scheduler_args {
            cmd.arg(format!("--scheduler-arg={a}"));
        }
        for (cluster, kubeconfig) in &opts.estimators {
            cmd.arg(format!("--estimator={cluster}={}", kubeconfig.display()));
        }
        Karmada(spawn(cmd, "karmada", dir))
    }
}

impl std::ops::Deref for Karmada {
    type Target = Site;
    fn deref(&self) -> &Site {
        &self.0
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        // SIGTERM: the site stops its parts in order; they are killed with it at worst.
        terminate(self.child.id());
        let _ = self.child.wait();
    }
}

/// Sends SIGTERM by running `kill` (the testkit has no libc binding of its own).
fn terminate(pid: u32) {
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
}

/// A free TCP port on `address`.
pub fn free_port(address: &str) -> u16 {
    let l = std::net::TcpListener::bind((address, 0)).unwrap_or_else(|e| panic!("bind {address}: {e}"));
    l.local_addr().expect("local address").port()
}

/// A Node as K3s's agent registers it, managed by kwok (its annotation), with `capacity` (also
/// its allocatable): labels `kubernetes.io/hostname`, `os`, `arch`, and for a server the
/// `control-plane` and `master` roles a K3s server's node carries (helm-controller's bootstrap
/// Jobs select `node-role.kubernetes.io/control-plane: "true"`). Create it (not apply): the
/// API keeps a new Node's status, as it does for a kubelet registering.
pub fn kwok_node(name: &str, server: bool, capacity: Value, kubelet_version: &str) -> Value {
    let mut labels = serde_json::json!({
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "type": "kwok",
    });
    if server {
        labels["node-role.kubernetes.io/control-plane"] = "true".into();
        labels["node-role.kubernetes.io/master"] = "true".into();
    }
    serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "status": {
            "capacity": capacity, "allocatable": capacity,
            "nodeInfo": {"kubeletVersion": kubelet_version, "kubeProxyVersion": kubelet_version, "operatingSystem": "linux", "architecture": "amd64"},
        },
    })
}
