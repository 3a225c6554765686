//! Test support: an in-process test double of the Kubernetes API server (kube-apiserver) with
//! server-side apply, dry run, discovery and strict schema validation against the upstream CRD
//! schemas (through `kube_schema.rs`), read-only CRD objects, and opt-in simulated controllers
//! (`simulate_controllers`: HelmChart install Jobs and the charts' workloads, Deployment → ReplicaSet →
//! Pod rollouts, StatefulSets, DaemonSets, the scheduler and kubelets, ServiceAccount tokens, EndpointSlices,
//! Karmada Cluster readiness, Kueue activity). See `kube_api.md` beside this file for what it does,
//! what it simplifies and how to use it.
//!
//! Use it from an integration test with `use fabric_testkit::kube_api;` (the validator is
//! [`crate::kube_schema`], whose `Schemas` is re-exported here).
//!
//! The server runs on **its own thread with its own single-threaded tokio runtime**, so it works
//! from `#[tokio::test]` (any flavour), from plain `#[test]`s and while the code under test blocks.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

pub use crate::kube_schema::Schemas;

/// The bearer token every request must carry (`Authorization: Bearer <TEST_TOKEN>`).
pub const TEST_TOKEN: &str = "fabric-test-token";

/// The version reported by `GET /version`.
pub const SERVER_GIT_VERSION: &str = "v1.31.4+k3s1";

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/// The running test double. Serves until dropped.
pub struct TestApiServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    ctl: watch::Sender<Ctl>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A response received by [`TestApiServer::request`].
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Value::Null` when empty, `Value::String` when not JSON).
    pub body: Value,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

impl TestApiServer {
    /// Starts the server on 127.0.0.1 with an ephemeral port, on a dedicated thread with its own
    /// tokio runtime (so it is independent of the caller's runtime). `async` only for symmetry with
    /// async callers; it does not need to be awaited on any particular runtime.
    pub async fn start(schemas: Arc<Schemas>) -> TestApiServer {
        TestApiServer::start_blocking(schemas)
    }

    /// [`TestApiServer::start`] with the schemas of `shared/specs/crds`, loaded once per process.
    pub async fn start_shared() -> TestApiServer {
        TestApiServer::start_blocking(shared_schemas())
    }

    /// Synchronous variant of [`TestApiServer::start`] (for plain `#[test]`s).
    pub fn start_blocking(schemas: Arc<Schemas>) -> TestApiServer {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        std_listener.set_nonblocking(true).expect("nonblocking listener");
        let addr = std_listener.local_addr().expect("local addr");
        let url = format!("http://{addr}");
        // The runtime is built here so that its handle can spawn the controllers' tasks (see
        // `simulate_controllers`); it runs on the server thread.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let handle = rt.handle().clone();
        let shared = Arc::new_cyclic(|me| Shared::new(schemas, addr, handle, me.clone()));
        let (ctl, ctl_rx) = watch::channel(Ctl::Up);
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("kube-api-double-{}", addr.port()))
            .spawn(move || {
                rt.block_on(accept_loop(std_listener, s2, ctl_rx));
            })
            .expect("spawn server thread");
        TestApiServer { url, addr, shared, ctl, thread: Some(thread) }
    }

    /// Gives Service `namespace/name` a ready endpoint: `addr`, a loopback server of the test,
    /// which the `services/proxy` subresource then forwards to (see [`service_proxy`]).
    pub fn set_service_endpoint(&self, namespace: &str, name: &str, addr: SocketAddr) {
        self.shared.lock().endpoints.insert((namespace.to_string(), name.to_string()), addr);
    }

    /// Simulates an unreachable cluster: while down, new connections are reset (TCP RST) and
    /// kept-alive ones closed, without a response. `set_down(false)` makes it reachable again, with its state kept.
    pub fn set_down(&self, down: bool) {
        self.ctl.send_replace(if down { Ctl::Down } else { Ctl::Up });
    }

    /// A snapshot of every stored object as the API would return it (with `managedFields`),
    /// including the initial namespaces `default` and `kube-system`.
    pub fn objects(&self) -> Vec<Value> {
        let st = self.shared.lock();
        st.objects.values().map(|s| s.render(None)).collect()
    }

    /// One stored object (as the API would return it), by apiVersion, kind, namespace and name.
    pub fn object(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let (group, _) = split_api_version(api_version);
        let key = (group.to_string(), kind.to_string(), namespace.unwrap_or("").to_string(), name.to_string());
        self.shared.lock().objects.get(&key).map(|s| s.render(Some(api_version)))
    }

    /// Seeds (creates or replaces) an object as if written by someone else with an `Update`
    /// (manager `kubectl`): no validation, no namespace check; `status` is kept as given. The
    /// object must carry `apiVersion`, `kind`, `metadata.name` (and `metadata.namespace` when
    /// namespaced). Panics on a kind the server does not serve.
    pub fn put_raw(&self, obj: Value) {
        self.put_raw_as(obj, "kubectl");
    }

    /// [`TestApiServer::put_raw`] with another manager name.
    pub fn put_raw_as(&self, mut obj: Value, manager: &str) {
        let api_version = obj["apiVersion"].as_str().expect("put_raw: apiVersion").to_string();
        let kind = obj["kind"].as_str().expect("put_raw: kind").to_string();
        let res = self
            .shared
            .resource_for(&api_version, &kind)
            .unwrap_or_else(|| panic!("put_raw: {api_version} {kind} is not served by the test double"))
            .clone();
        assert!(!is_crd(&res), "put_raw: CustomResourceDefinitions are synthesized from the schemas, not stored");
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).expect("put_raw: metadata.name").to_string();
        let ns = if res.namespaced {
            obj.pointer("/metadata/namespace").and_then(Value::as_str).expect("put_raw: metadata.namespace").to_string()
        } else {
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("namespace");
            }
            String::new()
        };
        let status = obj.as_object_mut().and_then(|m| m.remove("status"));
        let key = (res.group.clone(), res.kind.clone(), ns, name);
        let mut st = self.shared.lock();
        let old = st.objects.get(&key).cloned();
        let lists = self.shared.lists_for(&res);
        let managers = update_managers(old.as_ref(), &obj, manager, &api_version, &lists);
        let c = st.commit(&res, &key, old.as_ref(), obj, managers, false, manager);
        let (mut stored, mut changed) = (c.stored, c.changed);
        if let Some(s) = status
            && stored.obj.get("status") != Some(&s)
        {
            stored.obj["status"] = s;
            st.objects.insert(key.clone(), stored);
            changed = true;
        }
        if changed {
            self.shared.trigger(&st, vec![key]);
        }
    }

    /// Removes an object as a controller would (no finalizers, no cascade); `false` when there was
    /// none.
    pub fn delete_raw(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> bool {
        let (group, _) = split_api_version(api_version);
        let key = (group.to_string(), kind.to_string(), namespace.unwrap_or("").to_string(), name.to_string());
        let mut st = self.shared.lock();
        if st.objects.remove(&key).is_none() {
            return false;
        }
        st.rv += 1;
        self.shared.trigger(&st, vec![key]);
        true
    }

    /// Accepts requests without a valid bearer token too (default: `false`, such requests get 401).
    /// Needed for `kubectl`: client-go does not send a bearer token over plain `http://`.
    pub fn set_allow_anonymous(&self, allowed: bool) {
        self.shared.anonymous.store(allowed, Ordering::SeqCst);
    }

    /// Waits `latency` before answering every request (a WAN round trip to a remote cluster's
    /// API); requests on different connections wait at the same time, as they would.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.latency_us.store(latency.as_micros() as u64, Ordering::SeqCst);
    }

    /// Makes the next matching request fail once with `status` (a Status body; nothing is
    /// changed). `verb`: `get`, `list`, `create`, `update`, `delete`, `patch` (any PATCH,
    /// including server-side apply and dry runs), `apply` (server-side apply that is **not** a dry
    /// run), `dryrun-apply` (server-side apply with `dryRun=All`) or `*`. `kind`: the Kind
    /// (`ClusterQueue`), the plural (`clusterqueues`) or `*`, case-insensitive. Several
    /// injections queue up and each fires once, first match first.
    pub fn fail_next(&self, verb: &str, kind: &str, status: u16) {
        self.shared.lock().failures.push(Injected {
            verb: verb.to_ascii_lowercase(),
            kind: kind.to_ascii_lowercase(),
            status,
        });
    }

    /// How the server answers updates (PUT) of Leases from now on, until set back to
    /// [`LeaseUpdates::Accepted`]: refused with a status, or stalled (no answer while it
    /// lasts, the connection kept open). A narrow control for "a Lease that cannot be renewed
    /// mid-apply"; reads of the Lease and every other request are served as usual.
    pub fn set_lease_updates(&self, answer: LeaseUpdates) {
        self.shared.lock().lease_updates = answer;
    }

    /// Makes the next request with `verb` on `resource` meet `fault` (see
    /// [`crate::kube_api_faults`]: kube-apiserver's throttling and unavailability answers, a
    /// connection dropped before or after the request is handled, a stalled answer). `verb`:
    /// `get` (and list), `patch`, `apply` (server-side apply, not a dry run), `dryrun-apply`,
    /// `create`, `update`, `delete` or `*`; `resource`: the plural (`clusterqueues`) or `*`.
    /// Faults queue up and each fires once, first match first.
    pub fn fault_next(&self, verb: &str, resource: &str, fault: Fault) {
        self.shared.lock().faults.push(Armed::new(verb, resource, fault));
    }

    /// How many faults given with [`TestApiServer::fault_next`] have not met their request yet.
    pub fn faults_left(&self) -> usize {
        self.shared.lock().faults.len()
    }

    /// Every request received, in order, as `METHOD /path?query` (query as sent), e.g.
    /// `PATCH /apis/kueue.x-k8s.io/v1beta2/clusterqueues/a?fieldManager=fabric&dryRun=All`.
    /// Requests on connections reset by [`TestApiServer::set_down`] are not logged.
    pub fn requests(&self) -> Vec<String> {
        self.shared.lock().requests.clone()
    }

    /// Clears the request log.
    pub fn clear_requests(&self) {
        self.shared.lock().requests.clear();
    }

    /// Writes a kubeconfig with one cluster, user (bearer token [`TEST_TOKEN`]) and context named
    /// `context`, which is also the current context. Overwrites `path`.
    pub fn kubeconfig(&self, path: &Path, context: &str) {
        write_kubeconfig(path, &[(self, context)]);
    }

    /// The current resourceVersion counter (the last resourceVersion handed out).
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().rv
    }

    /// A small HTTP/1.1 client (one connection per request, `Connection: close`) that sends the
    /// test token. `content_type` defaults to `application/json` when a body is given.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&str>,
    ) -> std::io::Result<HttpResponse> {
        http_request(self.addr, method, path, Some(TEST_TOKEN), content_type, body).await
    }

    /// Where KAI Scheduler has placed the replicas of the KAI Deployments (the simulated
    /// scheduler's view: the double has no Pods), computed from the current objects.
    pub fn kai_placements(&self) -> Vec<crate::kai::Placement> {
        kai_placements(&self.shared.lock())
    }

    /// Gives a registered Node `gpus` allocatable `nvidia.com/gpu`, as the NVIDIA device plugin
    /// reports them (an update of its status by the `kubelet`).
    pub fn set_allocatable_gpus(&self, node: &str, gpus: u32) {
        let mut n = self.object("v1", "Node", None, node).unwrap_or_else(|| panic!("node {node} is not registered"));
        n["status"]["allocatable"]["nvidia.com/gpu"] = json!(gpus.to_string());
        if let Some(m) = n["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
        self.put_raw_as(n, "kubelet");
    }

    /// Registers Nodes as their kubelets do when hosts join: Ready, labelled with their
    /// hostname, OS and architecture (kubernetes/kubernetes `pkg/kubelet/kubelet_node_status.go`
    /// `initialNode`: `kubernetes.io/hostname`, `kubernetes.io/os` = GOOS, `kubernetes.io/arch` =
    /// GOARCH; the lab's hosts are linux/amd64), owned by the `kubelet` field manager.
    pub fn register_nodes(&self, names: &[&str]) {
        for name in names {
            let labels =
                json!({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"});
            self.put_raw_as(
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                    "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]}}),
                "kubelet",
            );
        }
    }

    /// The kubelet of `node` sees `container` exit at start in every pod it runs (`crashing`), or
    /// run again (`false`): the pods there report it waiting in `CrashLoopBackOff` and are
    /// not Ready (see the DaemonSet and workload rows of "Controllers (opt-in)" in `kube_api.md`).
    /// Reconciles the DaemonSets, ReplicaSets and StatefulSets.
    pub fn set_crash_loop(&self, node: &str, container: &str, crashing: bool) {
        let keys: Vec<Key> = {
            let mut st = self.shared.lock();
            let k = (node.to_string(), container.to_string());
            if crashing {
                st.crashing.insert(k);
            } else {
                st.crashing.remove(&k);
            }
            st.objects
                .keys()
                .filter(|k| k.0 == "apps" && matches!(k.1.as_str(), "DaemonSet" | "ReplicaSet" | "StatefulSet"))
                .cloned()
                .collect()
        };
        self.shared.schedule(keys, Duration::ZERO);
    }

    /// Turns on the simulated controllers (see "Controllers (opt-in)" in `kube_api.md`): after
    /// every real write (create, apply, update, merge patch, delete, [`TestApiServer::put_raw`]) the
    /// written object and the objects that depend on it are reconciled `delay` later, on the
    /// server's runtime; every write a controller makes is reconciled the same way (one `delay` per
    /// hop). Objects that exist already are reconciled too. Calling it again changes the delay.
    pub fn simulate_controllers(&self, delay: Duration) {
        let keys: Vec<Key> = {
            let mut st = self.shared.lock();
            st.controllers = Some(delay);
            st.objects.keys().cloned().collect()
        };
        self.shared.schedule(keys, delay);
    }

    /// Makes the next install Job of the HelmChart named `chart` (any namespace) fail instead of
    /// completing: Job condition `Failed`, `status.failed: 1`, HelmChart condition `Failed` with
    /// the same message. Each call fails one more Job.
    pub fn fail_helm_job(&self, chart: &str) {
        *self.shared.lock().fail_helm.entry(chart.to_string()).or_default() += 1;
    }

    /// While held, objects of `kind` (Kind name, case-insensitive; `EndpointSlice` holds the
    /// endpointslice controller, `CustomResourceDefinition` makes every CRD report `Established`
    /// False) are not reconciled and keep their status. Releasing reconciles them at once.
    pub fn hold(&self, kind: &str, held: bool) {
        let kind = kind.to_ascii_lowercase();
        let keys: Vec<Key> = {
            let mut st = self.shared.lock();
            if held {
                st.held.insert(kind);
                return;
            }
            if !st.held.remove(&kind) || st.controllers.is_none() {
                return;
            }
            let target = if kind == "endpointslice" { "service" } else { kind.as_str() };
            st.objects.keys().filter(|k| k.1.to_ascii_lowercase() == target).cloned().collect()
        };
        self.shared.schedule(keys, Duration::ZERO);
    }

    /// Serves (`true`, the default) or hides an API group (`""` is the core group): while hidden it
    /// is missing from discovery, its resources answer `404` like an unknown kind, its CRD objects
    /// are not listed and its objects are not reconciled. Stored objects are kept, and reconciled
    /// again when the group is served again.
    pub fn set_served(&self, group: &str, served: bool) {
        let keys: Vec<Key> = {
            let mut st = self.shared.lock();
            if !served {
                st.unserved.insert(group.to_string());
                return;
            }
            if !st.unserved.remove(group) || st.controllers.is_none() {
                return;
            }
            st.objects
                .keys()
                .filter(|k| k.0 == group || (group == "discovery.k8s.io" && k.0.is_empty() && k.1 == "Service"))
                .cloned()
                .collect()
        };
        self.shared.schedule(keys, Duration::ZERO);
    }

    /// Statuses the simulated controllers computed but did not write because the object would then
    /// fail its schema (a bug in the double); empty in a healthy run.
    pub fn controller_errors(&self) -> Vec<String> {
        self.shared.lock().controller_errors.clone()
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        self.ctl.send_replace(Ctl::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Writes one kubeconfig with a cluster/user/context per `(server, context name)`; the first
/// context is the current one. Overwrites `path`.
pub fn write_kubeconfig(path: &Path, entries: &[(&TestApiServer, &str)]) {
    let mut y = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (s, c) in entries {
        let _ = writeln!(y, "- name: {c}\n  cluster:\n    server: {}", s.url);
    }
    y.push_str("users:\n");
    for (_, c) in entries {
        let _ = writeln!(y, "- name: {c}\n  user:\n    token: {TEST_TOKEN}");
    }
    y.push_str("contexts:\n");
    for (_, c) in entries {
        let _ = writeln!(y, "- name: {c}\n  context:\n    cluster: {c}\n    user: {c}\n    namespace: default");
    }
    let _ = writeln!(y, "current-context: {}\npreferences: {{}}", entries.first().map_or("", |e| e.1));
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(path, y).unwrap_or_else(|e| panic!("write kubeconfig {}: {e}", path.display()));
}

/// The schemas of `shared/specs/crds`, loaded once per process.
pub fn shared_schemas() -> Arc<Schemas> {
    static S: OnceLock<Arc<Schemas>> = OnceLock::new();
    S.get_or_init(|| Arc::new(Schemas::from_shared().unwrap_or_else(|e| panic!("{e}")))).clone()
}

/// The plural resource name Kubernetes tooling derives from a Kind (lowercase, English rules),
/// with a table for irregular ones.
pub fn plural_of(kind: &str) -> String {
    const IRREGULAR: &[(&str, &str)] = &[("Endpoints", "endpoints"), ("PodSecurityPolicy", "podsecuritypolicies")];
    if let Some((_, p)) = IRREGULAR.iter().find(|(k, _)| *k == kind) {
        return (*p).to_string();
    }
    let l = kind.to_ascii_lowercase();
    let b = l.as_bytes();
    if l.ends_with('y') && b.len() >= 2 && !b"aeiou".contains(&b[b.len() - 2]) {
        format!("{}ies", &l[..l.len() - 1])
    } else if l.ends_with('s') || l.ends_with('x') || l.ends_with('z') || l.ends_with("ch") || l.ends_with("sh") {
        format!("{l}es")
    } else {
        format!("{l}s")
    }
}

/// A one-shot HTTP/1.1 request (used by [`TestApiServer::request`]); `token: None` sends no
/// `Authorization` header.
pub async fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    content_type: Option<&str>,
    body: Option<&str>,
) -> std::io::Result<HttpResponse> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\n");
    if let Some(t) = token {
        let _ = write!(head, "Authorization: Bearer {t}\r\n");
    }
    let body = body.unwrap_or("");
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        let _ = write!(head, "Content-Type: {}\r\n", content_type.unwrap_or("application/json"));
    }
    let _ = write!(head, "Content-Length: {}\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).await?;
    s.write_all(body.as_bytes()).await?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await?;
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| bad("no HTTP response head"))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status: u16 =
        status_line.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| bad("bad status line"))?;
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))).collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked =
        headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).to_string()))
    };
    Ok(HttpResponse { status, headers, body })
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&b[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = eol + 2;
        out.extend_from_slice(&b[start..(start + size).min(b.len())]);
        b = &b[(start + size + 2).min(b.len())..];
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Server plumbing
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ctl {
    Up,
    Down,
    Stop,
}

async fn accept_loop(std_listener: std::net::TcpListener, shared: Arc<Shared>, mut ctl: watch::Receiver<Ctl>) {
    let listener = tokio::net::TcpListener::from_std(std_listener).expect("tokio listener");
    loop {
        tokio::select! {
            r = ctl.changed() => {
                if r.is_err() || *ctl.borrow() == Ctl::Stop {
                    return;
                }
            }
            acc = listener.accept() => {
                let Ok((stream, _)) = acc else { continue };
                if *ctl.borrow() != Ctl::Up {
                    let _ = stream.set_zero_linger();
                    drop(stream);
                    continue;
                }
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                let mut conn_ctl = ctl.clone();
                tokio::spawn(async move {
                    let io = TokioIo::new(stream);
                    // A service error makes hyper close the connection without an answer: how
                    // the faults that drop a connection are played.
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let shared = shared.clone();
                        async move { serve(shared, req).await.ok_or_else(|| std::io::Error::other("dropped by a fault")) }
                    });
                    let conn = http1::Builder::new().keep_alive(true).serve_connection(io, svc);
                    tokio::select! {
                        biased;
                        _ = conn_ctl.wait_for(|c| *c != Ctl::Up) => {}
                        _ = conn => {}
                    }
                });
            }
        }
    }
}

/// Answers one request; None: close the connection without an answer (an injected fault).
async fn serve(shared: Arc<Shared>, req: Request<Incoming>) -> Option<Response<Full<Bytes>>> {
    let latency = shared.latency_us.load(Ordering::SeqCst);
    if latency > 0 {
        tokio::time::sleep(Duration::from_micros(latency)).await;
    }
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes().to_vec(),
        Err(_) => Vec::new(),
    };
    let header = |n: &str| parts.headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
    let r = Req {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        raw_query: parts.uri.query().unwrap_or("").to_string(),
        query: parse_query(parts.uri.query().unwrap_or("")),
        authorization: header("authorization"),
        content_type: header("content-type"),
        user_agent: header("user-agent"),
        body,
    };
    let fault = {
        let mut st = shared.lock();
        let i = st.faults.iter().position(|f| f.matches(&r.method, &r.path, &r.raw_query, r.content_type.as_deref()));
        i.map(|i| st.faults.remove(i).fault)
    };
    match &fault {
        Some(Fault::DropBefore) => return None,
        Some(Fault::Stall(d)) => tokio::time::sleep(*d).await,
        Some(f) => {
            if let Some((status, headers, body)) = kube_api_faults::answer(f) {
                let mut b = Response::builder().status(status);
                for (k, v) in headers {
                    b = b.header(k, v);
                }
                return Some(b.body(Full::new(Bytes::from(body))).expect("response"));
            }
        }
        None => {}
    }
    if let Some(proxied) = service_proxy(&shared, &r).await {
        return Some(proxied);
    }
    // A stalled Lease update waits without an answer while the setting lasts (bounded, so a
    // forgotten setting cannot hang a test run forever).
    if updates_lease(&r) {
        let since = std::time::Instant::now();
        while shared.lock().lease_updates == LeaseUpdates::Stalled && since.elapsed() < Duration::from_secs(600) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let out = shared.handle(&r);
    if fault == Some(Fault::DropAfter) {
        return None;
    }
    let mut b = Response::builder().status(out.status).header("Content-Type", "application/json");
    for w in &out.warnings {
        b = b.header("Warning", format!("299 - {}", serde_json::to_string(w).unwrap_or_default()));
    }
    let text = serde_json::to_vec(&out.body).unwrap_or_default();
    Some(b.body(Full::new(Bytes::from(text))).expect("response"))
}

/// The `services/proxy` subresource, as kube-apiserver serves it
/// (kubernetes/kubernetes pkg/registry/core/service/proxy.go and
/// pkg/registry/core/service/storage/storage.go `ResourceLocation`):
/// `/api/v1/namespaces/{ns}/services/{[scheme:]name[:port]}/proxy/{path}` with the methods
/// `proxyMethods` lists; a Service that does not exist is a 404, a numeric port the Service does
/// not have a 503 `no service port N found for service "x"`, a Service without ready endpoints a
/// 503 `no endpoints available for service "x"`. Otherwise the request goes to the endpoint (here
/// the loopback address a test gave with `set_service_endpoint`) and its answer comes back as
/// it is. None when the path is not a service proxy.
async fn service_proxy(shared: &Arc<Shared>, r: &Req) -> Option<Response<Full<Bytes>>> {
    let segs: Vec<&str> = r.path.split('/').filter(|s| !s.is_empty()).collect();
    let ["api", "v1", "namespaces", ns, "services", id, "proxy", rest @ ..] = segs.as_slice() else { return None };
    let respond = |status: u16, body: Vec<u8>, json: bool| {
        let mut b = Response::builder().status(status);
        if json {
            b = b.header("Content-Type", "application/json");
        }
        Some(b.body(Full::new(Bytes::from(body))).expect("response"))
    };
    let failure = |status: u16, reason: &str, message: String| {
        respond(status, serde_json::to_vec(&status_failure(status, reason, message, None)).unwrap_or_default(), true)
    };
    {
        let mut st = shared.lock();
        st.requests.push(format!("{} {}", r.method, r.path));
    }
    let authorized =
        r.authorization.as_deref().and_then(|a| a.strip_prefix("Bearer ")).is_some_and(|t| t.trim() == TEST_TOKEN);
    if !authorized && !shared.anonymous.load(Ordering::SeqCst) {
        return failure(401, "Unauthorized", "Unauthorized".into());
    }
    // `proxyMethods` of kubernetes/kubernetes pkg/registry/core/service/proxy.go.
    if !["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"].contains(&r.method.as_str()) {
        return failure(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({})", r.method),
        );
    }
    // `[scheme:]name[:port]` (k8s.io/apimachinery/pkg/util/net/port_split.go `SplitSchemeNamePort`).
    let parts: Vec<&str> = id.split(':').collect();
    let (name, port) = match parts.as_slice() {
        [n] => (*n, ""),
        [n, p] => (*n, *p),
        [_, n, p] => (*n, *p),
        _ => return failure(400, "BadRequest", format!("invalid service request {id:?}")),
    };
    let (svc, endpoint) = {
        let st = shared.lock();
        let key = (String::new(), "Service".to_string(), ns.to_string(), name.to_string());
        (st.objects.get(&key).map(|s| s.obj.clone()), st.endpoints.get(&(ns.to_string(), name.to_string())).copied())
    };
    let Some(svc) = svc else {
        return failure(404, "NotFound", format!("services \"{name}\" not found"));
    };
    if let Ok(n) = port.parse::<i64>() {
        let has = svc["spec"]["ports"].as_array().into_iter().flatten().any(|p| p["port"].as_i64() == Some(n));
        if !has {
            return failure(503, "ServiceUnavailable", format!("no service port {n} found for service \"{name}\""));
        }
    }
    let Some(addr) = endpoint else {
        return failure(503, "ServiceUnavailable", format!("no endpoints available for service \"{name}\""));
    };
    let path = format!(
        "/{}{}",
        rest.join("/"),
        if r.raw_query.is_empty() { String::new() } else { format!("?{}", r.raw_query) }
    );
    let (method, body, ctype) = (r.method.clone(), r.body.clone(), r.content_type.clone());
    let answer = tokio::task::spawn_blocking(move || forward(addr, &method, &path, ctype.as_deref(), &body)).await;
    match answer {
        Ok(Ok((status, body))) => respond(status, body, true),
        Ok(Err(e)) => failure(503, "ServiceUnavailable", format!("error trying to reach service: {e}")),
        Err(e) => failure(500, "InternalError", e.to_string()),
    }
}

/// One HTTP/1.1 request to `addr` (`Connection: close`): the status and the body.
fn forward(
    addr: SocketAddr,
    method: &str,
    path: &str,
    ctype: Option<&str>,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    c.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if let Some(t) = ctype {
        head.push_str(&format!("Content-Type: {t}\r\n"));
    }
    head.push_str("\r\n");
    c.write_all(head.as_bytes())?;
    c.write_all(body)?;
    let mut raw = Vec::new();
    c.read_to_end(&mut raw)?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| std::io::Error::other("no HTTP header"))?;
    let status_line = String::from_utf8_lossy(&raw[..split]).lines().next().unwrap_or_default().to_string();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(status_line.clone()))?;
    Ok((status, raw[split + 4..].to_vec()))
}

struct Req {
    method: String,
    path: String,
    raw_query: String,
    query: Vec<(String, String)>,
    authorization: Option<String>,
    content_type: Option<String>,
    user_agent: Option<String>,
    body: Vec<u8>,
}

impl Req {
    fn q(&self, k: &str) -> Option<&str> {
        self.query.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
    }
}

struct Out {
    status: u16,
    body: Value,
    warnings: Vec<String>,
}

fn out(status: u16, body: Value) -> Out {
    Out { status, body, warnings: Vec::new() }
}

fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(x) => {
                        out.push(x);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

// ---------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------

/// A served resource (one group/version/kind).
#[derive(Clone, Debug)]
struct Resource {
    group: String,
    version: String,
    kind: String,
    plural: String,
    singular: String,
    namespaced: bool,
    /// Validated by `Schemas` (otherwise only basic metadata checks).
    schema: bool,
}

impl Resource {
    fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
    /// `clusterqueues.kueue.x-k8s.io` / `secrets` (the resource in NotFound-style messages).
    fn qualified_plural(&self) -> String {
        if self.group.is_empty() { self.plural.clone() } else { format!("{}.{}", self.plural, self.group) }
    }
    /// `ClusterQueue.kueue.x-k8s.io` / `Secret` (the kind in Invalid messages).
    fn qualified_kind(&self) -> String {
        if self.group.is_empty() { self.kind.clone() } else { format!("{}.{}", self.kind, self.group) }
    }
}

/// Kinds served without a schema (basic metadata checks only), unless the schemas know the
/// (group, kind): (group, version, kind, namespaced).
const BUILTIN: &[(&str, &str, &str, bool)] = &[
    ("", "v1", "Namespace", false),
    ("", "v1", "Secret", true),
    ("", "v1", "ServiceAccount", true),
    ("", "v1", "Service", true),
    ("", "v1", "ConfigMap", true),
    // Registered by the kubelets (here: `put_raw`), read by `fabric verify`.
    ("", "v1", "Node", false),
    // Made by controllers and the kubelets (here: `put_raw`); a drain evicts them.
    ("", "v1", "Pod", true),
    // Read by the eviction API: an eviction that would break one is refused (429).
    ("policy", "v1", "PodDisruptionBudget", true),
    ("apps", "v1", "Deployment", true),
    // Made by the Deployment controller (simulated), with their Pods.
    ("apps", "v1", "ReplicaSet", true),
    ("apps", "v1", "StatefulSet", true),
    ("apps", "v1", "DaemonSet", true),
    ("batch", "v1", "Job", true),
    ("discovery.k8s.io", "v1", "EndpointSlice", true),
    // fabric's lock (`fabric-system/fabric-apply`): writes carry resourceVersion, and a stale one
    // is a 409 Conflict, as for every kind here.
    ("coordination.k8s.io", "v1", "Lease", true),
    // The `nvidia` runtime class (D.1); K3s serves node.k8s.io like any cluster.
    ("node.k8s.io", "v1", "RuntimeClass", false),
    // Synthesized from the schemas (get and list only), see `Shared::crd_objects`.
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", false),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", false),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", false),
    ("rbac.authorization.k8s.io", "v1", "Role", true),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", true),
    ("argoproj.io", "v1alpha1", "Application", true),
    ("argoproj.io", "v1alpha1", "AppProject", true),
];

/// (group, kind, namespace or "", name).
type Key = (String, String, String, String);

/// A field path from the root: object keys, and list items as FieldsV1 names them: `k:{"name":"x"}`
/// for an item of a `map` list (by its keys), `v:"x"` for an item of a `set` list. An `atomic`
/// list is one leaf.
type FieldPath = Vec<String>;

/// How the list at a field path merges (from the kind's schema or built-in definitions).
type Lists<'a> = dyn Fn(&[String]) -> ListType + 'a;

pub use crate::kube_api_faults::Fault;

/// The Deployment, ReplicaSet and StatefulSet controllers, the scheduler and the kubelets of
/// their Pods (`kube_api_workloads.rs`, on this module's state).
#[path = "kube_api_workloads.rs"]
mod workloads_ctl;
use crate::kube_api_faults::{self, Armed};
use crate::kube_builtin::ListType;

/// Whether a path segment names a list item (`k:{...}` or `v:...`), not a field.
fn is_item(seg: &str) -> bool {
    seg.starts_with("k:{") || seg.starts_with("v:")
}

/// The `k:` segment of a map list's item: its keys as JSON with sorted names; None when the item
/// lacks one of them.
fn item_key(item: &Value, keys: &[String]) -> Option<String> {
    let o = item.as_object()?;
    let mut m = BTreeMap::new();
    for k in keys {
        m.insert(k.clone(), o.get(k)?.clone());
    }
    Some(format!("k:{}", serde_json::to_string(&m).ok()?))
}

/// The item of `list` a `k:`/`v:` segment names.
fn find_item(list: &[Value], seg: &str) -> Option<usize> {
    if let Some(keys) = seg.strip_prefix("k:") {
        let keys: Map<String, Value> = serde_json::from_str(keys).ok()?;
        list.iter().position(|i| keys.iter().all(|(k, v)| i.get(k) == Some(v)))
    } else {
        let v: Value = serde_json::from_str(seg.strip_prefix("v:")?).ok()?;
        list.iter().position(|i| *i == v)
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Manager {
    name: String,
    /// `Apply` or `Update`.
    operation: &'static str,
    api_version: String,
    time: String,
    fields: BTreeSet<FieldPath>,
    /// `Some("status")` for a controller's writes to the status (its fields are all under
    /// `status`); main-resource writes never touch such an entry.
    subresource: Option<&'static str>,
}

#[derive(Clone, Debug)]
struct Stored {
    /// The object without `metadata.managedFields`.
    obj: Value,
    managers: Vec<Manager>,
}

impl Stored {
    /// The object as the API returns it, with `managedFields` and the requested apiVersion.
    fn render(&self, api_version: Option<&str>) -> Value {
        let mut o = self.obj.clone();
        if let Some(av) = api_version {
            o["apiVersion"] = json!(av);
        }
        if !self.managers.is_empty()
            && let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut)
        {
            m.insert("managedFields".into(), Value::Array(self.managers.iter().map(managed_entry).collect()));
        }
        o
    }
}

fn managed_entry(m: &Manager) -> Value {
    let mut e = json!({
        "manager": m.name,
        "operation": m.operation,
        "apiVersion": m.api_version,
        "time": m.time,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(&m.fields),
    });
    if let Some(sub) = m.subresource {
        e["subresource"] = json!(sub);
    }
    e
}

/// The FieldsV1 encoding of a field set: `{"f:spec": {"f:replicas": {}}}`, a map list's item as
/// `"k:{\"name\":\"x\"}": {".": {}, "f:image": {}}` (the item itself and its fields), a set's
/// item as `"v:\"x\"": {}`.
fn fields_v1(fields: &BTreeSet<FieldPath>) -> Value {
    let mut root = Map::new();
    for p in fields {
        let mut cur = &mut root;
        for seg in p {
            let name = if is_item(seg) { seg.clone() } else { format!("f:{seg}") };
            let e = cur.entry(name).or_insert_with(|| json!({}));
            cur = e.as_object_mut().expect("fieldsV1 node");
            if seg.starts_with("k:{") {
                cur.entry(".").or_insert_with(|| json!({}));
            }
        }
    }
    Value::Object(root)
}

/// How Lease updates are answered ([`TestApiServer::set_lease_updates`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LeaseUpdates {
    /// Served as usual.
    #[default]
    Accepted,
    /// Refused with this status, in kube-apiserver's shape (see `lease_refusal`).
    Refused(u16),
    /// Not answered while the setting lasts (an apiserver or etcd that hangs).
    Stalled,
}

/// Whether `r` updates a Lease (`PUT /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME`).
fn updates_lease(r: &Req) -> bool {
    let segs: Vec<&str> = r.path.split('/').filter(|s| !s.is_empty()).collect();
    r.method == "PUT" && matches!(segs.as_slice(), ["apis", "coordination.k8s.io", "v1", "namespaces", _, "leases", _])
}

/// A refused Lease update as kube-apiserver answers it (apimachinery `pkg/api/errors/errors.go`):
/// 403 as `NewForbidden` with the RBAC authorizer's reason (an operator's role that lost
/// `update` on leases), 503 as `NewServiceUnavailable`, 429 as `NewTooManyRequests` (the
/// max-in-flight and priority-and-fairness filters), anything else with its generic reason.
fn lease_refusal(r: &Req, code: u16) -> Out {
    let segs: Vec<&str> = r.path.split('/').filter(|s| !s.is_empty()).collect();
    let (ns, name) = (segs.get(4).copied().unwrap_or_default(), segs.get(6).copied().unwrap_or_default());
    let (message, details) = match code {
        403 => (
            format!(
                "leases.coordination.k8s.io \"{name}\" is forbidden: User \"fabric\" cannot update resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"{ns}\""
            ),
            Some(json!({"name": name, "group": "coordination.k8s.io", "kind": "leases"})),
        ),
        503 => ("the server is currently unable to handle the request".to_string(), None),
        429 => (
            "the server has received too many requests and has asked us to try again later".to_string(),
            Some(json!({"retryAfterSeconds": 1})),
        ),
        _ => (format!("the Lease update failed ({code}, test double)"), None),
    };
    out(code, status_failure(code, reason_for(code), message, details))
}

struct Injected {
    verb: String,
    kind: String,
    status: u16,
}

struct State {
    objects: BTreeMap<Key, Stored>,
    rv: u64,
    uids: u64,
    requests: Vec<String>,
    failures: Vec<Injected>,
    /// How Lease updates are answered ([`TestApiServer::set_lease_updates`]).
    lease_updates: LeaseUpdates,
    /// Faults waiting for their request ([`TestApiServer::fault_next`]).
    faults: Vec<Armed>,
    /// API groups hidden by [`TestApiServer::set_served`].
    unserved: BTreeSet<String>,
    /// The reconcile delay while the controllers are simulated.
    controllers: Option<Duration>,
    /// Lowercase Kind names not reconciled ([`TestApiServer::hold`]).
    held: BTreeSet<String>,
    /// HelmChart name → number of its next install Jobs that fail.
    fail_helm: BTreeMap<String, u32>,
    /// (Node, container name): containers that exit at start on that Node
    /// ([`TestApiServer::set_crash_loop`]).
    crashing: BTreeSet<(String, String)>,
    /// Statuses a controller computed that fail the schema (not written).
    controller_errors: Vec<String>,
    /// (namespace, Service) → the loopback address standing for its ready endpoints, for the
    /// `services/proxy` subresource ([`TestApiServer::set_service_endpoint`]).
    endpoints: BTreeMap<(String, String), SocketAddr>,
}

struct Shared {
    state: Mutex<State>,
    resources: Vec<Resource>,
    schemas: Arc<Schemas>,
    /// The built-in kinds' definitions (quantities, list types), `kube_builtin`.
    builtins: Arc<crate::kube_builtin::Builtins>,
    addr: SocketAddr,
    /// Accept requests without the bearer token (see [`TestApiServer::set_allow_anonymous`]).
    anonymous: AtomicBool,
    /// Delay before every response, in microseconds (see [`TestApiServer::set_latency`]).
    latency_us: std::sync::atomic::AtomicU64,
    /// The server's runtime (controllers' tasks are spawned on it) and a handle on ourselves.
    rt: tokio::runtime::Handle,
    me: Weak<Shared>,
    /// Per-server seed of tokens and of the cluster CA, and the start time (CRD objects).
    seed: u64,
    started: String,
}

struct Committed {
    stored: Stored,
    changed: bool,
}

impl Shared {
    fn new(schemas: Arc<Schemas>, addr: SocketAddr, rt: tokio::runtime::Handle, me: Weak<Shared>) -> Shared {
        let mut resources = Vec::new();
        let known: BTreeSet<(String, String)> = schemas.kinds().into_iter().map(|(g, _, k)| (g, k)).collect();
        for (g, v, k) in schemas.kinds() {
            let av = if g.is_empty() { v.clone() } else { format!("{g}/{v}") };
            let status = schemas.version_status(&av, &k);
            if !status.is_some_and(|s| s.served) {
                continue;
            }
            let namespaced = schemas.namespaced(&av, &k).unwrap_or(true);
            let plural = plural_of(&k);
            resources.push(Resource {
                singular: k.to_ascii_lowercase(),
                group: g,
                version: v,
                kind: k,
                plural,
                namespaced,
                schema: true,
            });
        }
        for (g, v, k, namespaced) in BUILTIN {
            if known.contains(&(g.to_string(), k.to_string())) {
                continue;
            }
            resources.push(Resource {
                group: g.to_string(),
                version: v.to_string(),
                kind: k.to_string(),
                plural: plural_of(k),
                singular: k.to_ascii_lowercase(),
                namespaced: *namespaced,
                schema: false,
            });
        }
        let mut st = State {
            objects: BTreeMap::new(),
            rv: 0,
            uids: 0,
            requests: Vec::new(),
            failures: Vec::new(),
            lease_updates: LeaseUpdates::Accepted,
            faults: Vec::new(),
            unserved: BTreeSet::new(),
            controllers: None,
            held: BTreeSet::new(),
            fail_helm: BTreeMap::new(),
            crashing: BTreeSet::new(),
            controller_errors: Vec::new(),
            endpoints: BTreeMap::new(),
        };
        let ns_res = resources.iter().find(|r| r.group.is_empty() && r.kind == "Namespace").cloned().expect("ns");
        for ns in ["default", "kube-system"] {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            let key = (String::new(), "Namespace".to_string(), String::new(), ns.to_string());
            let managers = update_managers(None, &obj, "k3s", "v1", &|_: &[String]| ListType::Atomic);
            st.commit(&ns_res, &key, None, obj, managers, false, "k3s");
        }
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        Shared {
            state: Mutex::new(st),
            resources,
            schemas,
            builtins: crate::kube_builtin::shared_builtins(),
            addr,
            anonymous: AtomicBool::new(false),
            latency_us: std::sync::atomic::AtomicU64::new(0),
            rt,
            me,
            seed: nanos ^ u64::from(addr.port()).rotate_left(48),
            started: now_rfc3339(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn resource_for(&self, api_version: &str, kind: &str) -> Option<&Resource> {
        let (g, v) = split_api_version(api_version);
        self.resources.iter().find(|r| r.group == g && r.version == v && r.kind == kind)
    }

    /// The resources of the groups currently served (see [`TestApiServer::set_served`]).
    fn served(&self) -> Vec<&Resource> {
        let unserved = self.lock().unserved.clone();
        self.resources.iter().filter(|r| !unserved.contains(&r.group)).collect()
    }

    fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for r in self.served() {
            if !r.group.is_empty() {
                m.entry(r.group.clone()).or_default().insert(r.version.clone());
            }
        }
        m.into_iter()
            .map(|(g, vs)| {
                let mut vs: Vec<String> = vs.into_iter().collect();
                vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
                (g, vs)
            })
            .collect()
    }

    fn handle(&self, r: &Req) -> Out {
        {
            let mut st = self.lock();
            let line = if r.raw_query.is_empty() {
                format!("{} {}", r.method, r.path)
            } else {
                format!("{} {}?{}", r.method, r.path, r.raw_query)
            };
            st.requests.push(line);
        }
        let segs: Vec<&str> = r.path.split('/').filter(|s| !s.is_empty()).collect();
        let authorized =
            r.authorization.as_deref().and_then(|a| a.strip_prefix("Bearer ")).is_some_and(|t| t.trim() == TEST_TOKEN);
        // No anonymous requests, not even `/version` or `/healthz` (which kube's default RBAC
        // would let `system:unauthenticated` read): K3s runs kube-apiserver with
        // `--anonymous-auth=false` (k3s-io/k3s `pkg/daemons/control/server.go`, `apiServer`), so
        // a request without valid credentials is `401` on every path. fabric's "API up" check
        // (`apply::bootstrap`, `/version` with the kubeconfig's credentials) thereby also proves
        // the credentials.
        if !authorized && !self.anonymous.load(Ordering::SeqCst) {
            return out(401, status_failure(401, "Unauthorized", "Unauthorized".into(), None));
        }
        match segs.as_slice() {
            ["version"] if r.method == "GET" => {
                return out(
                    200,
                    json!({"major": "1", "minor": "31", "gitVersion": SERVER_GIT_VERSION, "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean", "buildDate": "2024-12-10T00:00:00Z", "goVersion": "go1.22.9", "compiler": "gc", "platform": "linux/amd64"}),
                );
            }
            ["healthz"] | ["livez"] | ["readyz"] if r.method == "GET" => return out(200, json!("ok")),
            _ => {}
        }
        match segs.as_slice() {
            ["api"] if r.method == "GET" => {
                return out(
                    200,
                    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self.addr.to_string()}]}),
                );
            }
            ["api", "v1"] if r.method == "GET" => return out(200, self.resource_list("", "v1")),
            ["openapi", "v3"] if r.method == "GET" => {
                let mut paths = Map::new();
                paths.insert("api/v1".into(), json!({"serverRelativeURL": "/openapi/v3/api/v1"}));
                for (g, vs) in self.groups() {
                    for v in vs {
                        paths.insert(
                            format!("apis/{g}/{v}"),
                            json!({"serverRelativeURL": format!("/openapi/v3/apis/{g}/{v}")}),
                        );
                    }
                }
                return out(200, json!({"paths": paths}));
            }
            ["openapi", "v3", "api", "v1"] if r.method == "GET" => return out(200, self.openapi_v3("", "v1")),
            ["openapi", "v3", "apis", g, v] if r.method == "GET" => {
                if !self.served().iter().any(|r| r.group == *g && r.version == *v) {
                    return not_found_path();
                }
                return out(200, self.openapi_v3(g, v));
            }
            ["apis"] if r.method == "GET" => {
                let groups: Vec<Value> = self.groups().iter().map(|(g, vs)| group_json(g, vs)).collect();
                return out(200, json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}));
            }
            ["apis", g] if r.method == "GET" => {
                return match self.groups().into_iter().find(|(n, _)| n == g) {
                    Some((g, vs)) => out(200, group_json(&g, &vs)),
                    None => not_found_path(),
                };
            }
            ["apis", g, v] if r.method == "GET" => {
                if !self.served().iter().any(|r| r.group == *g && r.version == *v) {
                    return not_found_path();
                }
                return out(200, self.resource_list(g, v));
            }
            _ => {}
        }
        let (group, version, rest) = match segs.as_slice() {
            ["api", "v1", rest @ ..] => ("", "v1", rest),
            ["apis", g, v, rest @ ..] => (*g, *v, rest),
            _ => return not_found_path(),
        };
        if let (["namespaces", ns, "pods", name, "eviction"], "", "POST") = (rest, group, r.method.as_str()) {
            return self.evict(ns, name, r);
        }
        // The status subresource (`.../<name>/status`): only `status` changes through it.
        let (rest, status_sub) = match rest {
            [head @ .., "status"] if head.len() >= 2 && head.len() != 3 => (head, true),
            _ => (rest, false),
        };
        let served = self.served();
        let find = |plural: &str| {
            served.iter().copied().find(|r| r.group == group && r.version == version && r.plural == plural)
        };
        // (resource, namespace from the URL, name)
        let (res, ns, name) = match rest {
            ["namespaces", ns, plural] => (find(plural), Some(*ns), None),
            ["namespaces", ns, plural, name] => (find(plural), Some(*ns), Some(*name)),
            ["namespaces", ns, _, _, ..] if !ns.is_empty() => return not_found_path(),
            [plural] => (find(plural), None, None),
            [plural, name] => (find(plural), None, Some(*name)),
            _ => return not_found_path(),
        };
        let Some(res) = res else { return not_found_path() };
        // `/api/v1/namespaces/x` is the Namespace `x`, handled by the `[plural, name]` arm above
        // only when the segment count matches; a namespaced path for a cluster-scoped kind is 404.
        if ns.is_some() && !res.namespaced {
            return not_found_path();
        }
        // A namespaced kind is only listed (across namespaces) without a namespace in the path.
        if ns.is_none() && res.namespaced && !(r.method == "GET" && name.is_none()) {
            return not_found_path();
        }
        let verb = match (r.method.as_str(), name) {
            ("GET", Some(_)) => "get",
            ("GET", None) => "list",
            ("POST", None) => "create",
            ("PUT", Some(_)) => "update",
            ("PATCH", Some(_)) => "patch",
            ("DELETE", Some(_)) => "delete",
            _ => {
                return out(
                    405,
                    status_failure(
                        405,
                        "MethodNotAllowed",
                        "the server does not allow this method on the requested resource".into(),
                        None,
                    ),
                );
            }
        };
        if let Some(o) = self.injected(r, res, verb) {
            return o;
        }
        if let LeaseUpdates::Refused(code) = self.lock().lease_updates
            && updates_lease(r)
        {
            return lease_refusal(r, code);
        }
        if is_crd(res) {
            return match verb {
                "get" => self.crd_get(res, name.unwrap_or("")),
                "list" => self.list(res, "", r),
                _ => out(
                    405,
                    status_failure(
                        405,
                        "MethodNotAllowed",
                        "the test double serves CustomResourceDefinitions read-only (get, list)".into(),
                        None,
                    ),
                ),
            };
        }
        let ns = ns.unwrap_or("");
        if status_sub {
            return match verb {
                "get" => self.get(res, ns, name.unwrap_or("")),
                "update" | "patch" => self.write_status_subresource(res, ns, name.unwrap_or(""), verb, r),
                _ => out(
                    405,
                    status_failure(
                        405,
                        "MethodNotAllowed",
                        "the server does not allow this method on the requested resource".into(),
                        None,
                    ),
                ),
            };
        }
        match verb {
            "get" => self.get(res, ns, name.unwrap_or("")),
            "list" => self.list(res, ns, r),
            "delete" => self.delete(res, ns, name.unwrap_or(""), r),
            _ => self.write(res, ns, name, verb, r),
        }
    }

    /// A write to the status subresource: PUT replaces `status`, a merge patch or an apply
    /// merges into it; everything else in the body is ignored (the status strategies'
    /// `PrepareForUpdate` keeps the stored spec and metadata). The writer owns what it changed
    /// in a `subresource: status` entry of managedFields.
    fn write_status_subresource(&self, res: &Resource, ns: &str, name: &str, verb: &str, r: &Req) -> Out {
        let dry = match dry_run(r) {
            Ok(d) => d,
            Err(o) => return o,
        };
        let apply = verb == "patch" && is_apply(r);
        let merge =
            verb == "patch" && r.content_type.as_deref().is_some_and(|c| c.starts_with("application/merge-patch+json"));
        if verb == "patch" && !apply && !merge {
            return out(415, status_failure(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: application/apply-patch+yaml, application/merge-patch+json".into(), None));
        }
        let manager = match r.q("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) => m.to_string(),
            None => default_manager(r.user_agent.as_deref(), verb),
        };
        let body = match parse_body(&r.body, apply) {
            Ok(b) => b,
            Err(e) => return bad_request(e),
        };
        let key = Shared::key(res, ns, name);
        let mut st = self.lock();
        let Some(old) = st.objects.get(&key).cloned() else { return not_found(res, name) };
        let given = body.get("status").cloned().unwrap_or(Value::Null);
        let mut status = old.obj.get("status").cloned().unwrap_or_else(|| json!({}));
        if verb == "update" {
            status = given;
        } else if merge {
            json_merge_patch(&mut status, &given);
        } else {
            merge_into(&mut status, &given, &mut vec!["status".to_string()], &self.lists_for(res));
        }
        let av = res.api_version();
        if dry {
            let mut would = old.clone();
            would.obj["status"] = status;
            return out(200, would.render(Some(&av)));
        }
        if self.write_status(&mut st, &key, status, &manager).is_some() {
            self.trigger(&st, vec![key.clone()]);
        }
        let stored = st.objects.get(&key).cloned().expect("still stored");
        out(200, stored.render(Some(&av)))
    }

    /// The list types of a kind's fields: its CRD schema's, else the built-in definitions'
    /// (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`); atomic when neither says.
    fn lists_for<'a>(&'a self, res: &'a Resource) -> impl Fn(&[String]) -> ListType + 'a {
        move |path: &[String]| {
            let names: Vec<&str> = path.iter().filter(|s| !is_item(s)).map(String::as_str).collect();
            let t = if res.schema {
                self.schemas.list_type(&res.api_version(), &res.kind, &names)
            } else {
                self.builtins.list_type(&res.group, &res.version, &res.kind, &names)
            };
            t.unwrap_or(ListType::Atomic)
        }
    }

    /// Quantities of a built-in kind in canonical form (`kube_builtin`); a quantity that does
    /// not parse is refused as the decoder refuses it (400).
    fn builtin_canonical(&self, res: &Resource, v: &mut Value) -> Result<(), Out> {
        if res.schema || !self.builtins.knows(&res.group, &res.version, &res.kind) {
            return Ok(());
        }
        match self.builtins.canonicalize(&res.group, &res.version, &res.kind, v).first() {
            None => Ok(()),
            Some((field, msg)) => Err(bad_request(format!("{}.{field}: {msg}", res.qualified_kind()))),
        }
    }

    fn injected(&self, r: &Req, res: &Resource, verb: &str) -> Option<Out> {
        let apply = verb == "patch" && is_apply(r);
        let dry = r.q("dryRun").is_some();
        let mut st = self.lock();
        let idx = st.failures.iter().position(|f| {
            let kind_ok = f.kind == "*" || f.kind == res.kind.to_ascii_lowercase() || f.kind == res.plural;
            let verb_ok = match f.verb.as_str() {
                "*" => true,
                "apply" => apply && !dry,
                "dryrun-apply" | "dry-run-apply" => apply && dry,
                v => v == verb,
            };
            kind_ok && verb_ok
        })?;
        let f = st.failures.remove(idx);
        let reason = reason_for(f.status);
        let msg = format!("injected failure ({} {} {}) by the test double", f.status, verb, res.kind);
        let details = if f.status == 422 {
            Some(
                json!({"name": "", "group": res.group, "kind": res.kind, "causes": [{"reason": "FieldValueInvalid", "message": msg, "field": ""}]}),
            )
        } else {
            None
        };
        Some(out(f.status, status_failure(f.status, reason, msg, details)))
    }

    /// A minimal OpenAPI v3 document of one group/version: operations and query parameters only
    /// (no schemas), enough for kubectl to see that `fieldValidation` is supported.
    fn openapi_v3(&self, group: &str, version: &str) -> Value {
        let prefix = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
        let param = |n: &str| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let write_params: Vec<Value> =
            ["dryRun", "fieldManager", "fieldValidation", "force"].iter().map(|n| param(n)).collect();
        let mut paths = Map::new();
        for r in self.served().into_iter().filter(|r| r.group == group && r.version == version) {
            let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
            let op = |id: &str| json!({"operationId": format!("{id}{}", r.kind), "parameters": write_params, "responses": {"200": {"description": "OK"}}, "x-kubernetes-group-version-kind": gvk});
            let base = if r.namespaced {
                format!("{prefix}/namespaces/{{namespace}}/{}", r.plural)
            } else {
                format!("{prefix}/{}", r.plural)
            };
            if is_crd(r) {
                // Read-only here.
                paths.insert(base.clone(), json!({"get": op("list")}));
                paths.insert(format!("{base}/{{name}}"), json!({"get": op("read")}));
                continue;
            }
            paths.insert(base.clone(), json!({"post": op("create"), "get": op("list")}));
            paths.insert(
                format!("{base}/{{name}}"),
                json!({"get": op("read"), "put": op("replace"), "patch": op("patch"), "delete": op("delete")}),
            );
        }
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes (test double)", "version": SERVER_GIT_VERSION}, "paths": paths, "components": {"schemas": {}}})
    }

    fn resource_list(&self, group: &str, version: &str) -> Value {
        let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
        let resources: Vec<Value> = self
            .served()
            .into_iter()
            .filter(|r| r.group == group && r.version == version)
            .map(|r| {
                let verbs = if is_crd(r) {
                    json!(["get", "list"])
                } else {
                    json!(["create", "delete", "get", "list", "patch", "update"])
                };
                json!({
                    "name": r.plural,
                    "singularName": r.singular,
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": verbs,
                })
            })
            .collect();
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
    }

    fn key(res: &Resource, ns: &str, name: &str) -> Key {
        (res.group.clone(), res.kind.clone(), ns.to_string(), name.to_string())
    }

    fn get(&self, res: &Resource, ns: &str, name: &str) -> Out {
        let st = self.lock();
        match st.objects.get(&Shared::key(res, ns, name)) {
            Some(s) => out(200, s.render(Some(&res.api_version()))),
            None => not_found(res, name),
        }
    }

    fn list(&self, res: &Resource, ns: &str, r: &Req) -> Out {
        if r.q("watch").is_some_and(|w| w == "true" || w == "1") {
            return bad_request("watch is not supported by the kube-apiserver test double".into());
        }
        let selector = match r.q("labelSelector").map(parse_selector).transpose() {
            Ok(s) => s.unwrap_or_default(),
            Err(e) => return bad_request(e),
        };
        let fields = match r.q("fieldSelector").map(|f| parse_field_selector(f, &res.kind)).transpose() {
            Ok(s) => s.unwrap_or_default(),
            Err(e) => return bad_request(e),
        };
        let st = self.lock();
        let selected = |obj: &Value| {
            selector.iter().all(|t| t.matches(obj.pointer("/metadata/labels")))
                && fields.iter().all(|(f, want, eq)| {
                    let got = obj.pointer(&format!("/{}", f.replace('.', "/"))).and_then(Value::as_str).unwrap_or("");
                    (got == want) == *eq
                })
        };
        let items: Vec<Value> = if is_crd(res) {
            self.crd_objects(&st).into_iter().filter(|o| selected(o)).collect()
        } else {
            st.objects
                .iter()
                .filter(|((g, k, n, _), _)| *g == res.group && *k == res.kind && (ns.is_empty() || n == ns))
                .filter(|(_, s)| selected(&s.obj))
                .map(|(_, s)| s.render(Some(&res.api_version())))
                .collect()
        };
        out(
            200,
            json!({"kind": format!("{}List", res.kind), "apiVersion": res.api_version(), "metadata": {"resourceVersion": st.rv.to_string()}, "items": items}),
        )
    }

    fn delete(&self, res: &Resource, ns: &str, name: &str, r: &Req) -> Out {
        let dry = match dry_run(r) {
            Ok(d) => d,
            Err(o) => return o,
        };
        let key = Shared::key(res, ns, name);
        let mut st = self.lock();
        let Some(old) = st.objects.get(&key).cloned() else { return not_found(res, name) };
        let is_ns = res.group.is_empty() && res.kind == "Namespace";
        if is_ns && matches!(name, "default" | "kube-system" | "kube-public") {
            return out(
                403,
                status_failure(
                    403,
                    "Forbidden",
                    format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
                    Some(json!({"name": name, "kind": "namespaces"})),
                ),
            );
        }
        if !dry {
            st.objects.remove(&key);
            let mut removed = vec![key];
            if is_ns {
                removed.extend(st.objects.keys().filter(|(_, _, n, _)| n == name).cloned());
                st.objects.retain(|(_, _, n, _), _| n != name);
            }
            st.rv += 1;
            self.trigger(&st, removed);
        }
        let uid = old.obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null);
        out(
            200,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": {"name": name, "group": res.group, "kind": res.plural, "uid": uid}}),
        )
    }

    /// `POST …/pods/<name>/eviction` (policy/v1 Eviction), as the API's eviction subresource does
    /// it (`pkg/registry/core/pod/storage/eviction.go`): the pod is deleted unless a
    /// PodDisruptionBudget of its namespace selects it and its `minAvailable` would no longer be
    /// met by the other Ready pods it selects; then `429 TooManyRequests` with a
    /// `DisruptionBudget` cause, which kubectl drain retries.
    fn evict(&self, ns: &str, name: &str, r: &Req) -> Out {
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        // kind and apiVersion may be left out (the API defaults them; kube-rs sends neither).
        let kind_ok = body.get("kind").is_none_or(|k| k == "Eviction");
        if !kind_ok || body["metadata"]["name"].as_str() != Some(name) {
            return bad_request(format!("name in URL does not match name in Eviction object ({name})"));
        }
        let Some(pods) = self.served().into_iter().find(|r| r.group.is_empty() && r.kind == "Pod") else {
            return not_found_path();
        };
        {
            let st = self.lock();
            let Some(pod) = st.objects.get(&Shared::key(pods, ns, name)).map(|s| s.obj.clone()) else {
                return not_found(pods, name);
            };
            let of_ns = |kind: &str| -> Vec<Value> {
                st.objects
                    .iter()
                    .filter(|((g, k, n, _), _)| g.is_empty() == (kind == "Pod") && k == kind && n == ns)
                    .map(|(_, s)| s.obj.clone())
                    .collect()
            };
            for pdb in of_ns("PodDisruptionBudget") {
                let sel = pdb["spec"]["selector"]["matchLabels"].as_object().cloned().unwrap_or_default();
                let selects = |p: &Value| !sel.is_empty() && sel.iter().all(|(k, v)| p["metadata"]["labels"][k] == *v);
                let Some(min) = pdb["spec"]["minAvailable"].as_i64() else { continue };
                if !selects(&pod) {
                    continue;
                }
                let ready = |p: &Value| {
                    p["status"]["conditions"]
                        .as_array()
                        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
                };
                let healthy = of_ns("Pod").iter().filter(|p| selects(p) && ready(p)).count() as i64;
                if healthy - i64::from(ready(&pod)) < min {
                    let message = "Cannot evict pod as it would violate the pod's disruption budget.".to_string();
                    let details = json!({"causes": [{"reason": "DisruptionBudget", "message": format!(
                        "The disruption budget {} needs {min} healthy pods and has {healthy} currently",
                        pdb["metadata"]["name"].as_str().unwrap_or_default())}]});
                    return out(429, status_failure(429, "TooManyRequests", message, Some(details)));
                }
            }
        }
        let deleted = self.delete(pods, ns, name, r);
        if deleted.status != 200 {
            return deleted;
        }
        out(201, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}))
    }

    /// create (POST), update (PUT), patch (apply or merge patch).
    fn write(&self, res: &Resource, ns: &str, url_name: Option<&str>, verb: &str, r: &Req) -> Out {
        let dry = match dry_run(r) {
            Ok(d) => d,
            Err(o) => return o,
        };
        let apply = verb == "patch" && is_apply(r);
        let merge =
            verb == "patch" && r.content_type.as_deref().is_some_and(|c| c.starts_with("application/merge-patch+json"));
        if verb == "patch" && !apply && !merge {
            let ct = r.content_type.clone().unwrap_or_default();
            return out(
                415,
                status_failure(
                    415,
                    "UnsupportedMediaType",
                    format!(
                        "the body of the request was in an unknown format - accepted media types include: application/apply-patch+yaml, application/merge-patch+json (got {ct:?})"
                    ),
                    None,
                ),
            );
        }
        let manager = match r.q("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) => m.to_string(),
            None if apply => {
                return out(
                    422,
                    status_failure(
                        422,
                        "Invalid",
                        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into(),
                        Some(json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]})),
                    ),
                );
            }
            None => default_manager(r.user_agent.as_deref(), verb),
        };
        let force = r.q("force") == Some("true");
        // Warn when absent, as kube-apiserver (kubernetes/kubernetes
        // `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go`, `fieldValidation`:
        // `if directive == "" { return metav1.FieldValidationWarn }`). kubectl sends Strict
        // itself; a client that sends nothing gets its unknown fields dropped with a warning.
        let mode = match r.q("fieldValidation").unwrap_or("Warn") {
            m @ ("Strict" | "Warn" | "Ignore") => m,
            other => {
                return bad_request(format!(
                    "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
                ));
            }
        };
        if force && !apply {
            return out(
                422,
                status_failure(
                    422,
                    "Invalid",
                    "force: Forbidden: may not be specified for non-apply patch".into(),
                    None,
                ),
            );
        }
        let body = match parse_body(&r.body, apply) {
            Ok(b) => b,
            Err(e) => return bad_request(e),
        };
        let mut body = match body {
            Value::Object(m) => Value::Object(m),
            _ => return bad_request("the request body must be an object".into()),
        };
        // apiVersion / kind must match the URL (filled in when absent).
        let av = res.api_version();
        if !merge {
            for (field, want) in [("apiVersion", av.as_str()), ("kind", res.kind.as_str())] {
                match body.get(field) {
                    None | Some(Value::Null) => body[field] = json!(want),
                    Some(Value::String(s)) if s == want => {}
                    Some(other) => {
                        return bad_request(format!(
                            "the API version in the data ({}) does not match the expected API version ({av}) or kind {} (expected {})",
                            body.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
                            other,
                            res.kind
                        ));
                    }
                }
            }
        }
        if !body.get("metadata").is_none_or(Value::is_object) {
            return bad_request("metadata must be an object".into());
        }
        if body.get("metadata").is_none() && !merge {
            body["metadata"] = json!({});
        }
        if apply && body.pointer("/metadata/managedFields").is_some_and(|m| !m.is_null()) {
            return bad_request("metadata.managedFields must be nil".into());
        }
        // Namespace: from the URL; a different one in the body is an error; dropped for
        // cluster-scoped kinds (as the API does).
        if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            match (res.namespaced, m.get("namespace").and_then(Value::as_str)) {
                (true, Some(b)) if !b.is_empty() && b != ns => {
                    return bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request".into(),
                    );
                }
                (true, _) => {
                    if !merge {
                        m.insert("namespace".into(), json!(ns));
                    }
                }
                (false, _) => {
                    m.remove("namespace");
                }
            }
        }
        // Name.
        let body_name = body.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string);
        let name = match (verb, url_name) {
            ("create", _) => match body_name {
                Some(n) if !n.is_empty() => n,
                _ => match body.pointer("/metadata/generateName").and_then(Value::as_str) {
                    Some(g) if !g.is_empty() => {
                        let n = format!("{g}{}", random_suffix(self.lock().uids));
                        body["metadata"]["name"] = json!(n);
                        n
                    }
                    _ => {
                        return invalid(
                            res,
                            "",
                            vec![("metadata.name".into(), "Required value: name or generateName is required".into())],
                        );
                    }
                },
            },
            (_, Some(u)) => {
                match body_name {
                    Some(b) if b != u => {
                        return bad_request(format!(
                            "the name of the object ({b}) does not match the name on the URL ({u})"
                        ));
                    }
                    None if !merge => body["metadata"]["name"] = json!(u),
                    _ => {}
                }
                u.to_string()
            }
            _ => return not_found_path(),
        };
        // The namespace must exist (NamespaceLifecycle admission), also for dry runs.
        let mut st = self.lock();
        if res.namespaced && !st.objects.contains_key(&(String::new(), "Namespace".into(), String::new(), ns.into())) {
            return out(
                404,
                status_failure(
                    404,
                    "NotFound",
                    format!("namespaces \"{ns}\" not found"),
                    Some(json!({"name": ns, "kind": "namespaces"})),
                ),
            );
        }
        let key = Shared::key(res, ns, &name);
        let old = st.objects.get(&key).cloned();
        // Status is a subresource: writes to the main resource ignore it.
        let strip_status = |v: &mut Value| {
            if let Some(m) = v.as_object_mut() {
                m.remove("status");
            }
        };
        // The body is typed before it is merged or compared: a built-in kind's quantities are
        // compared in canonical form (a `1` applied over a stored "1" changes nothing).
        if !merge && let Err(o) = self.builtin_canonical(res, &mut body) {
            return o;
        }
        let (content, mut managers) = match verb {
            "create" => {
                if old.is_some() {
                    return out(
                        409,
                        status_failure(
                            409,
                            "AlreadyExists",
                            format!("{} \"{name}\" already exists", res.qualified_plural()),
                            Some(json!({"name": name, "group": res.group, "kind": res.plural})),
                        ),
                    );
                }
                strip_status(&mut body);
                let managers = update_managers(None, &body, &manager, &av, &self.lists_for(res));
                (body, managers)
            }
            "update" => {
                let Some(old) = old.as_ref() else { return not_found(res, &name) };
                let want_rv = body.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("");
                let have_rv = old.obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("");
                if !want_rv.is_empty() && want_rv != have_rv {
                    return conflict_modified(res, &name);
                }
                strip_status(&mut body);
                let managers = update_managers(Some(old), &body, &manager, &av, &self.lists_for(res));
                (body, managers)
            }
            _ if merge => {
                let Some(old) = old.as_ref() else { return not_found(res, &name) };
                strip_status(&mut body);
                let mut content = old.obj.clone();
                json_merge_patch(&mut content, &body);
                let managers = update_managers(Some(old), &content, &manager, &av, &self.lists_for(res));
                (content, managers)
            }
            _ => {
                strip_status(&mut body);
                match server_side_apply(old.as_ref(), &body, &manager, &av, force, &self.lists_for(res)) {
                    Ok(x) => x,
                    Err(conflicts) => return conflict_apply(res, &name, &conflicts),
                }
            }
        };
        // Identity from the URL, then type-specific conversion and validation of the result.
        let mut content = content;
        content["apiVersion"] = json!(av);
        content["kind"] = json!(res.kind);
        if !content.get("metadata").is_some_and(Value::is_object) {
            content["metadata"] = json!({});
        }
        content["metadata"]["name"] = json!(name);
        if res.namespaced {
            content["metadata"]["namespace"] = json!(ns);
        }
        if let Err(causes) = prepare_builtin(res, &mut content) {
            return invalid(res, &name, causes);
        }
        // A built-in kind is decoded, defaulted and (a Service) given its addresses, as
        // kube-apiserver does before admission: see `kube_builtin`.
        if let Err(o) = self.builtin_canonical(res, &mut content) {
            return o;
        }
        if !res.schema {
            crate::kube_builtin::apply_defaults(&res.group, &res.kind, &mut content);
            if res.group.is_empty()
                && res.kind == "Service"
                && let Err(o) = allocate_service(&st, res, &name, old.as_ref(), &mut content)
            {
                return o;
            }
        }
        let mut warnings = Vec::new();
        let mut check = content.clone();
        if let Some(m) = check.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        if res.schema {
            let mut report = self.schemas.check(&check);
            if mode != "Strict" {
                // Unknown fields are dropped (pruned), with a warning for `Warn`.
                let (unknown, rest): (Vec<String>, Vec<String>) =
                    report.errors.into_iter().partition(|e| e.contains(": unknown field \""));
                for e in &unknown {
                    let (field, msg) = split_error(e);
                    let segs = parse_error_path(&field);
                    prune(&mut content, &segs);
                    prune(&mut check, &segs);
                    if segs.iter().all(|s| matches!(s, ErrSeg::Field(_))) {
                        let p: FieldPath = segs
                            .iter()
                            .map(|s| if let ErrSeg::Field(f) = s { f.clone() } else { String::new() })
                            .collect();
                        for m in &mut managers {
                            m.fields.retain(|q| !q.starts_with(&p));
                        }
                        managers.retain(|m| !m.fields.is_empty());
                    }
                    if mode == "Warn" {
                        warnings.push(format!("{field}: {msg}"));
                    }
                }
                report.errors = rest;
            }
            warnings.extend(report.warnings);
            if !report.errors.is_empty() {
                let causes = report.errors.iter().map(|e| split_error(e)).collect();
                let mut o = invalid(res, &name, causes);
                o.warnings = warnings;
                return o;
            }
        } else if let Err(causes) = basic_checks(res, &check) {
            return invalid(res, &name, causes);
        }
        let c = st.commit(res, &key, old.as_ref(), content, managers, dry, &manager);
        if !dry && c.changed {
            self.trigger(&st, vec![key]);
        }
        let code = if old.is_none() { 201 } else { 200 };
        Out { status: code, body: c.stored.render(Some(&av)), warnings }
    }
}

impl State {
    /// Stores `content` (unless it and the field ownership are unchanged, or `dry`), setting the
    /// server-owned metadata. Returns what is (or would be) stored.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &mut self,
        res: &Resource,
        key: &Key,
        old: Option<&Stored>,
        mut content: Value,
        mut managers: Vec<Manager>,
        dry: bool,
        acting: &str,
    ) -> Committed {
        if let Some(m) = content.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        if let Some(old) = old {
            let same_content = ownable(&old.obj) == ownable(&content);
            let same_fields = managers.len() == old.managers.len()
                && managers.iter().zip(&old.managers).all(|(a, b)| {
                    a.name == b.name
                        && a.operation == b.operation
                        && a.subresource == b.subresource
                        && a.fields == b.fields
                });
            if same_content && same_fields {
                return Committed { stored: old.clone(), changed: false };
            }
        }
        let now = now_rfc3339();
        for m in &mut managers {
            let before = old.and_then(|o| {
                o.managers
                    .iter()
                    .find(|b| b.name == m.name && b.operation == m.operation && b.subresource == m.subresource)
            });
            if m.name == acting || before.is_none_or(|b| b.fields != m.fields) || m.time.is_empty() {
                m.time = now.clone();
            }
        }
        let old_meta = old.and_then(|o| o.obj.get("metadata")).cloned().unwrap_or(json!({}));
        let uid = match old_meta.get("uid") {
            Some(u) => u.clone(),
            None => {
                self.uids += 1;
                json!(make_uid(self.uids))
            }
        };
        let created = old_meta.get("creationTimestamp").cloned().unwrap_or_else(|| json!(now));
        let generation = match old {
            None => 1,
            Some(o) => {
                let g = o.obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
                if spec_part(&o.obj) != spec_part(&content) { g + 1 } else { g }
            }
        };
        let rv = if dry {
            old_meta.get("resourceVersion").cloned()
        } else {
            self.rv += 1;
            Some(json!(self.rv.to_string()))
        };
        // Rebuild metadata: identity and server fields first, then the user's fields.
        let user_meta = content.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut meta = Map::new();
        meta.insert("name".into(), json!(key.3));
        if !key.2.is_empty() {
            meta.insert("namespace".into(), json!(key.2));
        }
        meta.insert("uid".into(), uid);
        if let Some(rv) = rv {
            meta.insert("resourceVersion".into(), rv);
        }
        meta.insert("generation".into(), json!(generation));
        meta.insert("creationTimestamp".into(), created);
        for (k, v) in user_meta {
            if !matches!(
                k.as_str(),
                "name"
                    | "namespace"
                    | "uid"
                    | "resourceVersion"
                    | "generation"
                    | "creationTimestamp"
                    | "managedFields"
                    | "selfLink"
            ) {
                meta.insert(k, v);
            }
        }
        let mut obj = Map::new();
        obj.insert("apiVersion".into(), json!(res.api_version()));
        obj.insert("kind".into(), json!(res.kind));
        obj.insert("metadata".into(), Value::Object(meta));
        if let Some(m) = content.as_object() {
            for (k, v) in m {
                if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
                    obj.insert(k.clone(), v.clone());
                }
            }
        }
        // The main resource keeps the stored status (status is a subresource).
        if let Some(s) = old.and_then(|o| o.obj.get("status")) {
            obj.insert("status".into(), s.clone());
        } else if res.group.is_empty() && res.kind == "Namespace" {
            obj.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
            obj.insert("status".into(), json!({"phase": "Active"}));
        }
        let stored = Stored { obj: Value::Object(obj), managers };
        if !dry {
            self.objects.insert(key.clone(), stored.clone());
        }
        Committed { stored, changed: true }
    }
}

// ---------------------------------------------------------------------------------------------
// Server-side apply and field ownership
// ---------------------------------------------------------------------------------------------

/// A conflict: (other manager's display name, field path).
type Conflict = (String, String);

/// The object without identity, server-set metadata and status: what field managers own.
fn ownable(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
        m.remove("status");
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "managedFields",
                "selfLink",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generateName",
            ] {
                meta.remove(k);
            }
            if meta.is_empty() {
                m.remove("metadata");
            }
        }
    }
    o
}

/// Everything but metadata and status (a change bumps `metadata.generation`).
fn spec_part(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    o
}

/// Leaf field paths: scalars, atomic lists, empty objects, the fields of a map list's items (by
/// key) and a set's items (by value).
fn leaf_paths(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>, lists: &Lists<'_>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                prefix.push(k.clone());
                leaf_paths(c, prefix, out, lists);
                prefix.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match lists(prefix) {
            ListType::Map(keys) if !keys.is_empty() && items.iter().all(|i| item_key(i, &keys).is_some()) => {
                for i in items {
                    prefix.push(item_key(i, &keys).expect("checked"));
                    leaf_paths(i, prefix, out, lists);
                    prefix.pop();
                }
            }
            ListType::Set if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
                for i in items {
                    prefix.push(format!("v:{i}"));
                    out.insert(prefix.clone());
                    prefix.pop();
                }
            }
            _ => {
                out.insert(prefix.clone());
            }
        },
        _ => {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
        }
    }
}

fn leaves(v: &Value, lists: &Lists<'_>) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    leaf_paths(v, &mut Vec::new(), &mut out, lists);
    out
}

fn get_path<'a>(v: &'a Value, p: &[String]) -> Option<&'a Value> {
    let mut cur = v;
    for s in p {
        cur = match cur {
            Value::Array(items) if is_item(s) => &items[find_item(items, s)?],
            _ => cur.as_object()?.get(s)?,
        };
    }
    Some(cur)
}

fn get_path_mut<'a>(v: &'a mut Value, p: &[String]) -> Option<&'a mut Value> {
    let mut cur = v;
    for s in p {
        cur = match cur {
            Value::Array(items) if is_item(s) => {
                let i = find_item(items, s)?;
                &mut items[i]
            }
            Value::Object(m) => m.get_mut(s)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Removes the field or item at `p` (not the root).
fn remove_at(v: &mut Value, p: &[String]) {
    let Some((last, parent)) = p.split_last() else { return };
    match get_path_mut(v, parent) {
        Some(Value::Array(items)) if is_item(last) => {
            if let Some(i) = find_item(items, last) {
                items.remove(i);
            }
        }
        Some(Value::Object(m)) => {
            m.remove(last);
        }
        _ => {}
    }
}

fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// A path as kube shows it in conflicts: `.spec.containers[name="probe"].image`.
fn show_field(p: &[String]) -> String {
    let mut s = String::new();
    for seg in p {
        if let Some(keys) = seg.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(keys).unwrap_or_default();
            let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = seg.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else {
            s.push('.');
            s.push_str(seg);
        }
    }
    s
}

/// Removes the field at `p`, then the parent objects (and items) left empty (not the root,
/// `metadata` or an object someone owns as a leaf).
fn remove_path(v: &mut Value, p: &[String], owned: &dyn Fn(&[String]) -> bool) {
    if p.is_empty() {
        return;
    }
    remove_at(v, p);
    for depth in (1..p.len()).rev() {
        let pp = &p[..depth];
        let empty = get_path(v, pp).is_some_and(|x| x.as_object().is_some_and(Map::is_empty));
        if !empty || owned(pp) || pp == ["metadata"] {
            break;
        }
        remove_at(v, pp);
    }
}

/// Deep merge: objects merge key by key, a map list's items by their keys, a set's items by
/// value; anything else (an atomic list) is replaced.
fn merge_into(target: &mut Value, patch: &Value, path: &mut FieldPath, lists: &Lists<'_>) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                path.push(k.clone());
                match t.get_mut(k) {
                    Some(tv) if (tv.is_object() && v.is_object()) || (tv.is_array() && v.is_array()) => {
                        merge_into(tv, v, path, lists)
                    }
                    _ => {
                        t.insert(k.clone(), v.clone());
                    }
                }
                path.pop();
            }
        }
        (Value::Array(t), Value::Array(p)) => match lists(path) {
            ListType::Map(keys)
                if !keys.is_empty() && t.iter().chain(p.iter()).all(|i| item_key(i, &keys).is_some()) =>
            {
                for item in p {
                    let k = item_key(item, &keys).expect("checked");
                    match t.iter_mut().find(|x| item_key(x, &keys).as_ref() == Some(&k)) {
                        Some(ti) => {
                            path.push(k);
                            merge_into(ti, item, path, lists);
                            path.pop();
                        }
                        None => t.push(item.clone()),
                    }
                }
            }
            ListType::Set => {
                for item in p {
                    if !t.contains(item) {
                        t.push(item.clone());
                    }
                }
            }
            _ => *t = p.clone(),
        },
        (t, p) => *t = p.clone(),
    }
}

/// RFC 7386 JSON merge patch.
fn json_merge_patch(target: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().expect("object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            json_merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

fn manager_display(m: &Manager) -> String {
    if m.operation == "Update" { format!("\"{}\" using {}", m.name, m.api_version) } else { format!("\"{}\"", m.name) }
}

/// Server-side apply of `applied` by `manager` onto `live`. Returns the new content and field
/// managers, or the conflicts.
fn server_side_apply(
    live: Option<&Stored>,
    applied: &Value,
    manager: &str,
    api_version: &str,
    force: bool,
    lists: &Lists<'_>,
) -> Result<(Value, Vec<Manager>), Vec<Conflict>> {
    let applied_c = ownable(applied);
    let new_set = leaves(&applied_c, lists);
    let live_obj = live.map(|l| l.obj.clone()).unwrap_or_else(|| json!({}));
    let live_c = ownable(&live_obj);
    let mut managers: Vec<Manager> = live.map(|l| l.managers.clone()).unwrap_or_default();
    let is_self = |m: &Manager| m.name == manager && m.operation == "Apply" && m.subresource.is_none();
    // Conflicts: another manager owns an overlapping field whose value would change.
    let mut conflicts: Vec<Conflict> = Vec::new();
    let mut conflicting: Vec<(usize, FieldPath)> = Vec::new();
    for (i, m) in managers.iter().enumerate() {
        if is_self(m) {
            continue;
        }
        for q in &m.fields {
            for p in new_set.iter().filter(|p| overlaps(p, q)) {
                let short: &[String] = if p.len() <= q.len() { p } else { q };
                if get_path(&live_c, short) != get_path(&applied_c, short) {
                    conflicting.push((i, q.clone()));
                    let c = (manager_display(m), show_field(short));
                    if !conflicts.contains(&c) {
                        conflicts.push(c);
                    }
                    break;
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    for (i, q) in &conflicting {
        managers[*i].fields.remove(q);
    }
    // Fields this manager applied before and omits now are removed unless someone else owns
    // them (or they are still applied through an overlapping path).
    let old_set = managers.iter().find(|m| is_self(m)).map(|m| m.fields.clone()).unwrap_or_default();
    let mut content = live_obj.clone();
    if let Some(m) = content.as_object_mut() {
        m.remove("status");
    }
    {
        let others: Vec<&Manager> = managers.iter().filter(|m| !is_self(m)).collect();
        let owned_elsewhere = |q: &[String]| {
            new_set.iter().any(|p| overlaps(p, q)) || others.iter().any(|m| m.fields.iter().any(|f| overlaps(f, q)))
        };
        let exact_owned = |q: &[String]| {
            new_set.iter().any(|p| p.as_slice() == q)
                || others.iter().any(|m| m.fields.iter().any(|f| f.as_slice() == q))
        };
        let removed: Vec<&FieldPath> = old_set.difference(&new_set).filter(|q| !owned_elsewhere(q)).collect();
        // A list item nobody keeps a field of goes as a whole (its keys with it).
        let kept = |item: &[String]| {
            new_set.iter().any(|p| p.starts_with(item))
                || others.iter().any(|m| m.fields.iter().any(|f| f.starts_with(item)))
        };
        let mut items: BTreeSet<FieldPath> = BTreeSet::new();
        for q in &removed {
            for (i, seg) in q.iter().enumerate() {
                if is_item(seg) {
                    items.insert(q[..=i].to_vec());
                }
            }
        }
        // Deepest first: an inner item before the item that holds it.
        let mut items: Vec<FieldPath> = items.into_iter().filter(|i| !kept(i)).collect();
        items.sort_by_key(|i| std::cmp::Reverse(i.len()));
        for item in &items {
            remove_path(&mut content, item, &exact_owned);
        }
        for q in removed {
            if !items.iter().any(|i| q.starts_with(i)) {
                remove_path(&mut content, q, &exact_owned);
            }
        }
    }
    merge_into(&mut content, &applied_c, &mut Vec::new(), lists);
    // Ownership.
    match managers.iter_mut().find(|m| is_self(m)) {
        Some(m) => {
            m.fields = new_set;
            m.api_version = api_version.to_string();
        }
        None => managers.push(Manager {
            name: manager.to_string(),
            operation: "Apply",
            api_version: api_version.to_string(),
            time: String::new(),
            fields: new_set,
            subresource: None,
        }),
    }
    managers.retain(|m| !m.fields.is_empty());
    Ok((content, managers))
}

/// Field ownership after an `Update` (create, PUT, merge patch, put_raw) by `manager`: it owns
/// every field it changed; other managers lose changed and removed fields.
fn update_managers(
    old: Option<&Stored>,
    new: &Value,
    manager: &str,
    api_version: &str,
    lists: &Lists<'_>,
) -> Vec<Manager> {
    let new_c = ownable(new);
    let old_c = old.map(|o| ownable(&o.obj)).unwrap_or_else(|| json!({}));
    let changed: BTreeSet<FieldPath> =
        leaves(&new_c, lists).into_iter().filter(|p| get_path(&old_c, p) != get_path(&new_c, p)).collect();
    let mut managers: Vec<Manager> = old.map(|o| o.managers.clone()).unwrap_or_default();
    // Status-subresource entries are not affected by writes to the main resource.
    for m in managers.iter_mut().filter(|m| m.subresource.is_none()) {
        m.fields.retain(|q| get_path(&new_c, q).is_some() && !changed.iter().any(|p| overlaps(p, q)));
    }
    let me =
        match managers.iter_mut().position(|m| m.name == manager && m.operation == "Update" && m.subresource.is_none())
        {
            Some(i) => i,
            None => {
                managers.push(Manager {
                    name: manager.to_string(),
                    operation: "Update",
                    api_version: api_version.to_string(),
                    time: String::new(),
                    fields: BTreeSet::new(),
                    subresource: None,
                });
                managers.len() - 1
            }
        };
    managers[me].fields.extend(changed);
    managers[me].api_version = api_version.to_string();
    managers.retain(|m| !m.fields.is_empty());
    managers
}

// ---------------------------------------------------------------------------------------------
// Service addresses (pkg/registry/core/service/storage/alloc.go)
// ---------------------------------------------------------------------------------------------

/// The service CIDR of every test cluster (K3s's default `--service-cidr`, 10.43.0.0/16); its
/// first address is the `kubernetes` Service's.
const SERVICE_CIDR_BASE: [u8; 2] = [10, 43];
const NODE_PORTS: std::ops::RangeInclusive<u64> = 30000..=32767;

/// What the Service REST storage does on create and update (`alloc.go`): `initIPFamilyFields`
/// (ipFamilyPolicy SingleStack unless headless without selector, RequireDualStack then;
/// ipFamilies from the cluster's one family, IPv4), `allocClusterIPs` (the next free address of
/// the service CIDR unless headless or ExternalName; `clusterIP` and `clusterIPs`), `initNodePorts`
/// (NodePort and LoadBalancer ports without one get the next free node port). On update, what
/// was allocated is kept when the new object leaves it out (`patchAllocatedValues`). A dry run
/// computes the same without keeping anything (the next free address is found from what is
/// stored, so nothing is consumed).
fn allocate_service(st: &State, res: &Resource, name: &str, old: Option<&Stored>, obj: &mut Value) -> Result<(), Out> {
    let ty = obj.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP").to_string();
    if ty == "ExternalName" {
        return Ok(());
    }
    let old_spec = old.and_then(|o| o.obj.get("spec")).cloned().unwrap_or(json!({}));
    let spec = obj["spec"].as_object_mut().expect("defaults made spec");
    for k in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if spec.get(k).is_none_or(|v| v.is_null() || v == "") && old_spec.get(k).is_some_and(|v| !v.is_null()) {
            spec.insert(k.into(), old_spec[k].clone());
        }
    }
    if let (Some(was), Some(now)) =
        (old_spec.get("clusterIP").and_then(Value::as_str), spec.get("clusterIP").and_then(Value::as_str))
        && was != now
    {
        return Err(invalid(
            res,
            name,
            vec![("spec.clusterIPs[0]".into(), format!("Invalid value: {now:?}: may not change once set"))],
        ));
    }
    let headless = spec.get("clusterIP").is_some_and(|v| v == "None");
    let selectorless = spec.get("selector").and_then(Value::as_object).is_none_or(Map::is_empty);
    if spec.get("ipFamilyPolicy").is_none_or(Value::is_null) {
        let p = if headless && selectorless { "RequireDualStack" } else { "SingleStack" };
        spec.insert("ipFamilyPolicy".into(), json!(p));
    }
    if spec.get("ipFamilies").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        spec.insert("ipFamilies".into(), json!(["IPv4"]));
    }
    let used: BTreeSet<String> = st
        .objects
        .iter()
        .filter(|(k, _)| k.0.is_empty() && k.1 == "Service" && !(k.3 == name && old.is_some()))
        .filter_map(|(_, o)| o.obj.pointer("/spec/clusterIP").and_then(Value::as_str).map(String::from))
        .collect();
    if headless {
        spec.insert("clusterIPs".into(), json!(["None"]));
    } else {
        let ip = match spec.get("clusterIP").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            Some(ip) => ip.to_string(),
            None => {
                let Some(ip) = (2u32..65535)
                    .map(|n| format!("{}.{}.{}.{}", SERVICE_CIDR_BASE[0], SERVICE_CIDR_BASE[1], n >> 8, n & 255))
                    .find(|ip| !used.contains(ip))
                else {
                    return Err(out(
                        500,
                        status_failure(
                            500,
                            "InternalError",
                            "failed to allocate a serviceIP: range is full".into(),
                            None,
                        ),
                    ));
                };
                ip
            }
        };
        spec.insert("clusterIP".into(), json!(ip));
        if spec.get("clusterIPs").and_then(Value::as_array).is_none_or(Vec::is_empty) {
            spec.insert("clusterIPs".into(), json!([ip]));
        }
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        let mut taken: BTreeSet<u64> = st
            .objects
            .iter()
            .filter(|(k, _)| k.0.is_empty() && k.1 == "Service" && !(k.3 == name && old.is_some()))
            .flat_map(|(_, o)| {
                o.obj
                    .pointer("/spec/ports")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|p| p["nodePort"].as_u64())
            })
            .collect();
        let old_ports = old_spec.get("ports").and_then(Value::as_array).cloned().unwrap_or_default();
        for p in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
            if p.get("nodePort").is_some_and(|n| n.as_u64().is_some_and(|n| n != 0)) {
                continue;
            }
            let kept = old_ports
                .iter()
                .find(|o| o["port"] == p["port"] && o["protocol"] == p["protocol"])
                .and_then(|o| o["nodePort"].as_u64());
            let np = kept.or_else(|| NODE_PORTS.clone().find(|n| !taken.contains(n)));
            if let Some(np) = np {
                taken.insert(np);
                p["nodePort"] = json!(np);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Validation of kinds without a schema, Secret conversion
// ---------------------------------------------------------------------------------------------

type Cause = (String, String);

fn prepare_builtin(res: &Resource, obj: &mut Value) -> Result<(), Vec<Cause>> {
    if !(res.group.is_empty() && res.kind == "Secret") {
        return Ok(());
    }
    let mut causes = Vec::new();
    let Some(m) = obj.as_object_mut() else { return Ok(()) };
    if let Some(sd) = m.remove("stringData") {
        match sd {
            Value::Object(sd) => {
                let data = m.entry("data").or_insert_with(|| json!({}));
                if !data.is_object() {
                    *data = json!({});
                }
                for (k, v) in sd {
                    match v.as_str() {
                        Some(s) => {
                            data[k.as_str()] = json!(base64_encode(s.as_bytes()));
                        }
                        None => causes.push((format!("stringData[{k}]"), "Invalid value: must be a string".into())),
                    }
                }
            }
            Value::Null => {}
            _ => causes.push(("stringData".into(), "Invalid value: must be an object".into())),
        }
    }
    if let Some(data) = m.get("data") {
        match data.as_object() {
            Some(d) => {
                for (k, v) in d {
                    if v.as_str().is_none_or(|s| base64_decode(s).is_none()) {
                        causes.push((
                            format!("data[{k}]"),
                            "Invalid value: illegal base64 data (the data of a Secret is base64-encoded)".into(),
                        ));
                    }
                }
            }
            None if data.is_null() => {}
            None => causes.push(("data".into(), "Invalid value: must be an object".into())),
        }
    }
    if causes.is_empty() { Ok(()) } else { Err(causes) }
}

fn basic_checks(res: &Resource, obj: &Value) -> Result<(), Vec<Cause>> {
    let mut causes = Vec::new();
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let label_only = res.group.is_empty() && matches!(res.kind.as_str(), "Namespace" | "Service");
    let ok = if label_only { is_dns_label(name) } else { is_dns_subdomain(name) };
    if !ok {
        let what = if label_only { "RFC 1123 label" } else { "RFC 1123 subdomain" };
        causes.push((
            "metadata.name".into(),
            format!("Invalid value: {name:?}: a lowercase {what} must consist of lower case alphanumeric characters, '-'{}, and must start and end with an alphanumeric character", if label_only { "" } else { " or '.'" }),
        ));
    }
    for f in ["labels", "annotations"] {
        if let Some(v) = obj.pointer(&format!("/metadata/{f}")).filter(|v| !v.is_null()) {
            match v.as_object() {
                Some(m) => {
                    for (k, v) in m {
                        if !v.is_string() {
                            causes.push((format!("metadata.{f}[{k}]"), "Invalid value: must be a string".into()));
                        }
                    }
                }
                None => causes.push((format!("metadata.{f}"), "Invalid value: must be an object".into())),
            }
        }
    }
    // A workload's selector must select its pod template (kubernetes/kubernetes
    // `pkg/apis/apps/validation/validation.go`, `ValidateDeploymentSpec` and its siblings).
    if res.group == "apps"
        && matches!(res.kind.as_str(), "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        && let Some(problem) = crate::workloads::selector_problem(obj)
    {
        causes.push(problem);
    }
    if res.group.is_empty()
        && res.kind == "ConfigMap"
        && let Some(d) = obj.get("data").and_then(Value::as_object)
    {
        for (k, v) in d {
            if !v.is_string() {
                causes.push((format!("data[{k}]"), "Invalid value: must be a string".into()));
            }
        }
    }
    if causes.is_empty() { Ok(()) } else { Err(causes) }
}

fn is_dns_label(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| alnum(c) || c == '-')
        && s.starts_with(alnum)
        && s.ends_with(alnum)
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

enum ErrSeg {
    Field(String),
    /// `[x]`: a list index or a map key.
    Bracket(String),
}

/// `spec.a[0].b[key]` → segments.
fn parse_error_path(p: &str) -> Vec<ErrSeg> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if !cur.is_empty() {
                    out.push(ErrSeg::Field(std::mem::take(&mut cur)));
                }
            }
            '[' => {
                if !cur.is_empty() {
                    out.push(ErrSeg::Field(std::mem::take(&mut cur)));
                }
                let mut k = String::new();
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                    k.push(c);
                }
                out.push(ErrSeg::Bracket(k));
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(ErrSeg::Field(cur));
    }
    out
}

/// Removes the value at an error path (no-op when it does not resolve).
fn prune(v: &mut Value, segs: &[ErrSeg]) {
    let Some((last, parents)) = segs.split_last() else { return };
    let mut cur = v;
    for s in parents {
        let next = match (s, &mut *cur) {
            (ErrSeg::Field(f) | ErrSeg::Bracket(f), Value::Object(m)) => m.get_mut(f),
            (ErrSeg::Bracket(i), Value::Array(a)) => i.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let (ErrSeg::Field(f) | ErrSeg::Bracket(f), Value::Object(m)) = (last, cur) {
        m.remove(f);
    }
}

/// `".spec.foo: unknown field ..."` (kube_schema's format) → (`spec.foo`, message).
fn split_error(e: &str) -> Cause {
    match e.split_once(": ") {
        Some((p, m)) if p.starts_with('.') => (p.trim_start_matches('.').to_string(), m.to_string()),
        _ => (String::new(), e.to_string()),
    }
}

fn cause_reason(msg: &str) -> &'static str {
    let m = msg.trim_start();
    if m.starts_with("Required value") {
        "FieldValueRequired"
    } else if m.starts_with("Unsupported value") {
        "FieldValueNotSupported"
    } else if m.starts_with("Forbidden") {
        "FieldValueForbidden"
    } else if m.starts_with("Too long") {
        "FieldValueTooLong"
    } else if m.starts_with("Too many") {
        "FieldValueTooMany"
    } else if m.starts_with("Duplicate value") {
        "FieldValueDuplicate"
    } else if m.contains("must be of type") || m.starts_with("Invalid type") {
        "FieldValueTypeInvalid"
    } else {
        "FieldValueInvalid"
    }
}

// ---------------------------------------------------------------------------------------------
// Status bodies
// ---------------------------------------------------------------------------------------------

fn status_failure(code: u16, reason: &str, message: String, details: Option<Value>) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason});
    if let Some(d) = details {
        s["details"] = d;
    }
    s["code"] = json!(code);
    s
}

/// A `400 BadRequest` answer with `message`.
fn bad_request(message: String) -> Out {
    out(400, status_failure(400, "BadRequest", message, None))
}

fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

fn not_found_path() -> Out {
    out(
        404,
        status_failure(404, "NotFound", "the server could not find the requested resource".into(), Some(json!({}))),
    )
}

fn not_found(res: &Resource, name: &str) -> Out {
    out(
        404,
        status_failure(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", res.qualified_plural()),
            Some(json!({"name": name, "group": res.group, "kind": res.plural})),
        ),
    )
}

fn invalid(res: &Resource, name: &str, causes: Vec<Cause>) -> Out {
    let parts: Vec<String> =
        causes.iter().map(|(f, m)| if f.is_empty() { m.clone() } else { format!("{f}: {m}") }).collect();
    let joined = if parts.len() == 1 { parts[0].clone() } else { format!("[{}]", parts.join(", ")) };
    let message = format!("{} \"{name}\" is invalid: {joined}", res.qualified_kind());
    let causes: Vec<Value> =
        causes.iter().map(|(f, m)| json!({"reason": cause_reason(m), "message": m, "field": f})).collect();
    out(
        422,
        status_failure(
            422,
            "Invalid",
            message,
            Some(json!({"name": name, "group": res.group, "kind": res.kind, "causes": causes})),
        ),
    )
}

fn conflict_apply(res: &Resource, name: &str, conflicts: &[Conflict]) -> Out {
    let n = conflicts.len();
    let message = if n == 1 {
        format!("Apply failed with 1 conflict: conflict with {}: {}", conflicts[0].0, conflicts[0].1)
    } else {
        let mut by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (m, f) in conflicts {
            by.entry(m).or_default().push(f);
        }
        let mut s = format!("Apply failed with {n} conflicts: ");
        let groups: Vec<String> = by
            .iter()
            .map(|(m, fs)| {
                let list: String = fs.iter().map(|f| format!("\n- {f}")).collect();
                format!("conflicts with {m}:{list}")
            })
            .collect();
        s.push_str(&groups.join("\n"));
        s
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, f)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": f}))
        .collect();
    out(
        409,
        status_failure(
            409,
            "Conflict",
            message,
            Some(json!({"name": name, "group": res.group, "kind": res.plural, "causes": causes})),
        ),
    )
}

fn conflict_modified(res: &Resource, name: &str) -> Out {
    out(
        409,
        status_failure(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                res.qualified_plural()
            ),
            Some(json!({"name": name, "group": res.group, "kind": res.plural})),
        ),
    )
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

fn split_api_version(av: &str) -> (&str, &str) {
    match av.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", av),
    }
}

fn is_apply(r: &Req) -> bool {
    r.content_type.as_deref().is_some_and(|c| c.starts_with("application/apply-patch+yaml"))
}

fn dry_run(r: &Req) -> Result<bool, Out> {
    match r.q("dryRun") {
        None => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(bad_request(format!("dryRun: Unsupported value: {other:?}: supported values: \"All\""))),
    }
}

/// The manager name kube-apiserver derives when `fieldManager` is absent (from the user agent).
fn default_manager(user_agent: Option<&str>, verb: &str) -> String {
    match user_agent.map(|u| u.split('/').next().unwrap_or("").trim()).filter(|u| !u.is_empty()) {
        Some(u) => u.to_string(),
        None => format!("unknown-{verb}"),
    }
}

fn parse_body(body: &[u8], yaml_ok: bool) -> Result<Value, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err("the request body is empty".into());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => Ok(v),
        Err(_) if yaml_ok => {
            let text = std::str::from_utf8(body).map_err(|e| format!("the body is not UTF-8: {e}"))?;
            serde_saphyr::from_str::<Value>(text).map_err(|e| format!("error decoding YAML: {e}"))
        }
        Err(je) => Err(format!("error decoding JSON: {je}")),
    }
}

/// Kube version priority: GA > beta > alpha, then by numbers.
fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else { return (0, 0, 0) };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (level, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (level, major, minor)
}

fn group_json(g: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions.iter().map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v})).collect();
    let preferred = vs.first().cloned().unwrap_or(Value::Null);
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": g, "versions": vs, "preferredVersion": preferred})
}

/// One label selector requirement (equality-based: `a=b`, `a==b`, `a!=b`, `a`, `!a`).
#[derive(Debug)]
enum LabelTerm {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    NotExists(String),
}

impl LabelTerm {
    fn matches(&self, labels: Option<&Value>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        match self {
            LabelTerm::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelTerm::Ne(k, v) => get(k) != Some(v.as_str()),
            LabelTerm::Exists(k) => get(k).is_some(),
            LabelTerm::NotExists(k) => get(k).is_none(),
        }
    }
}

fn parse_selector(s: &str) -> Result<Vec<LabelTerm>, String> {
    if s.contains('(') {
        return Err(format!(
            "unable to parse requirement: set-based selectors are not supported by the test double: {s:?}"
        ));
    }
    let mut out = Vec::new();
    for t in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        out.push(if let Some((k, v)) = t.split_once("!=") {
            LabelTerm::Ne(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = t.split_once("==") {
            LabelTerm::Eq(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = t.split_once('=') {
            LabelTerm::Eq(k.trim().into(), v.trim().into())
        } else if let Some(k) = t.strip_prefix('!') {
            LabelTerm::NotExists(k.trim().into())
        } else {
            LabelTerm::Exists(t.into())
        });
    }
    Ok(out)
}

/// `metadata.name=x,metadata.namespace!=y` → (field, value, equal). Pods also take `spec.nodeName`
/// and `status.phase` (kube-apiserver's pod field labels, `pkg/registry/core/pod` `ToSelectableFields`,
/// which kubectl drain lists a node's pods with); any other field is refused as the API does.
fn parse_field_selector(s: &str, kind: &str) -> Result<Vec<(String, String, bool)>, String> {
    let mut out = Vec::new();
    for t in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (k, v, eq) = if let Some((k, v)) = t.split_once("!=") {
            (k, v, false)
        } else if let Some((k, v)) = t.split_once("==") {
            (k, v, true)
        } else if let Some((k, v)) = t.split_once('=') {
            (k, v, true)
        } else {
            return Err(format!("invalid field selector {t:?}"));
        };
        let pod_field = kind == "Pod" && matches!(k.trim(), "spec.nodeName" | "status.phase");
        if !matches!(k.trim(), "metadata.name" | "metadata.namespace") && !pod_field {
            return Err(format!("field label not supported: {}", k.trim()));
        }
        out.push((k.trim().to_string(), v.trim().to_string(), eq));
    }
    Ok(out)
}

fn make_uid(n: u64) -> String {
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let x = seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    format!("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}", (x >> 32) as u32, (x >> 16) & 0xffff, x & 0xfff, n & 0xfff, n)
}

fn random_suffix(n: u64) -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos() as u64).unwrap_or(0) ^ (n * 7919);
    (0..5)
        .map(|_| {
            let c = ALPHA[(x % ALPHA.len() as u64) as usize] as char;
            x /= ALPHA.len() as u64;
            x ^= 0x5bd1_e995;
            c
        })
        .collect()
}

fn now_rfc3339() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs() as i64;
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Year, month (1 to 12) and day (1 to 31) of the day `days` after 1970-01-01, in the proleptic
/// Gregorian calendar: Howard Hinnant's `civil_from_days`, the inverse of his `days_from_civil`
/// ("chrono-Compatible Low-Level Date Algorithms", https://howardhinnant.github.io/date_algorithms.html).
/// The same algorithm as fabric's journal uses, kept here so that the testkit does not depend on
/// fabric.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(data: &[u8]) -> String {
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// Standard base64 with padding; `None` if malformed.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for (ci, chunk) in b.chunks(4).enumerate() {
        let last = ci == b.len() / 4 - 1;
        let mut n = 0u32;
        let mut pad = 0;
        for (i, &c) in chunk.iter().enumerate() {
            let v = if c == b'=' && last && i >= 2 {
                pad += 1;
                0
            } else if pad > 0 {
                return None;
            } else {
                B64.iter().position(|&x| x == c)? as u32
            };
            n = (n << 6) | v;
        }
        out.push((n >> 16) as u8);
        if pad < 2 {
            out.push((n >> 8) as u8);
        }
        if pad < 1 {
            out.push(n as u8);
        }
    }
    Some(out)
}

/// Three servers as one fabric's Kubernetes APIs (franca, sp, Karmada), with a kubeconfig
/// each written into `dir` (`franca.yaml`, `sp.yaml`, `karmada.yaml`, contexts named alike).
pub fn fabric_apis(dir: &Path) -> (TestApiServer, TestApiServer, TestApiServer) {
    let apis = fabric_apis_without_nodes(dir);
    // The example's cluster nodes have joined (their kubelets registered them).
    // (SP's GPU nodes are the seed's Proxmox hosts pve-ippri-31/33/34.)
    apis.0.register_nodes(&["franca-cp1", "franca-gpu1", "franca-gpu2", "franca-gpu3"]);
    apis.1.register_nodes(&["sp-cp1", "pve-ippri-31", "pve-ippri-33", "pve-ippri-34"]);
    apis
}

/// The example fabric on test API servers, for tests that run the binary or the engine against
/// it: a fresh directory with `topology.yaml` (the example, pointing at the servers) and an
/// `ssh_config` that sends every SSH host to a closed port (none is contacted), and both
/// clusters' controllers simulated.
pub struct ExampleFabric {
    pub dir: std::path::PathBuf,
    pub franca: TestApiServer,
    pub sp: TestApiServer,
    pub karmada: TestApiServer,
    /// The topology's text.
    pub text: String,
}

impl ExampleFabric {
    pub fn start(name: &str) -> ExampleFabric {
        let dir = std::env::temp_dir().join(format!("fabric-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("test directory");
        let (franca, sp, karmada) = fabric_apis(&dir);
        for s in [&franca, &sp] {
            s.simulate_controllers(Duration::from_millis(50));
        }
        let text = example_topology(&dir);
        std::fs::write(dir.join("topology.yaml"), &text).expect("topology");
        std::fs::write(dir.join("ssh_config"), "Host *\n    HostName 127.0.0.1\n    Port 9\n    ConnectTimeout 2\n")
            .expect("ssh_config");
        ExampleFabric { dir, franca, sp, karmada, text }
    }
}

impl Drop for ExampleFabric {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// [`fabric_apis`] with no Node in either cluster.
pub fn fabric_apis_without_nodes(dir: &Path) -> (TestApiServer, TestApiServer, TestApiServer) {
    let (franca, sp, karmada) = (
        TestApiServer::start_blocking(shared_schemas()),
        TestApiServer::start_blocking(shared_schemas()),
        TestApiServer::start_blocking(shared_schemas()),
    );
    // What each API serves, as the real ones do: the Karmada API server serves core kinds and
    // Karmada's own groups, never K3s's HelmCharts, ArgoCD's or Kueue's kinds (nobody installs
    // their CRDs there); the member clusters do not serve Karmada's groups.
    for group in ["helm.cattle.io", "argoproj.io", "kueue.x-k8s.io", "cilium.io"] {
        karmada.set_served(group, false);
    }
    for member in [&franca, &sp] {
        for group in ["policy.karmada.io", "cluster.karmada.io", "work.karmada.io", "config.karmada.io"] {
            member.set_served(group, false);
        }
    }
    // K3s deploys its RuntimeClasses at start (k3s-io/k3s manifests/runtimes.yaml): the GPU
    // services' pods run with `nvidia`.
    for member in [&franca, &sp] {
        member.put_raw(k3s_nvidia_runtime_class());
    }
    franca.kubeconfig(&dir.join("franca.yaml"), "franca");
    sp.kubeconfig(&dir.join("sp.yaml"), "sp");
    karmada.kubeconfig(&dir.join("karmada.yaml"), "karmada");
    (franca, sp, karmada)
}

/// The `nvidia` RuntimeClass as K3s ships it (k3s-io/k3s manifests/runtimes.yaml): no labels of
/// fabric's.
pub fn k3s_nvidia_runtime_class() -> Value {
    json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"})
}

// ---------------------------------------------------------------------------------------------
// Controllers (opt-in: `TestApiServer::simulate_controllers`) and CRD objects
// ---------------------------------------------------------------------------------------------

const HELM_GROUP: &str = "helm.cattle.io";
const KUEUE: &str = "kueue.x-k8s.io";
const KARMADA_CLUSTER_GROUP: &str = "cluster.karmada.io";
const DISCOVERY_GROUP: &str = "discovery.k8s.io";
const CRD_GROUP: &str = "apiextensions.k8s.io";
const HELM_CHART_LABEL: &str = "helmcharts.helm.cattle.io/chart";
const HELM_CONFIG_HASH: &str = "helmcharts.helm.cattle.io/configHash";
const HELM_JOB_IMAGE: &str = "rancher/klipper-helm:v0.9.4-build20250113";
const SA_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
const SA_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
const MULTIKUEUE_CONTROLLER: &str = "kueue.x-k8s.io/multikueue";
const KUEUE_NAMESPACE: &str = "kueue-system";
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
const SLICE_MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
const SLICE_MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// The message of a failed Job (kube's, for `BackoffLimitExceeded`), also on the HelmChart.
pub const JOB_FAILED_MESSAGE: &str = "Job has reached the specified backoff limit";

/// Field managers of the simulated controllers.
const KCM: &str = "kube-controller-manager";
const HELM_CONTROLLER: &str = "helm-controller";
/// The field manager of Helm's own writes (klipper-helm runs `helm`).
const HELM_MANAGER: &str = "helm";
const KUEUE_MANAGER: &str = "kueue";
const KARMADA_MANAGER: &str = "karmada-controller-manager";
const ENDPOINTSLICE_MANAGER: &str = "endpointslice-controller";

fn is_crd(res: &Resource) -> bool {
    res.group == CRD_GROUP && res.kind == "CustomResourceDefinition"
}

fn mk_key(group: &str, kind: &str, ns: &str, name: &str) -> Key {
    (group.to_string(), kind.to_string(), ns.to_string(), name.to_string())
}

/// The string at a JSON pointer, or `""`.
fn text_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// `metadata.<map>.<key>` (labels, annotations: keys contain `/`, so no JSON pointer), or `""`.
fn meta_str<'a>(obj: &'a Value, map: &str, key: &str) -> &'a str {
    obj.get("metadata").and_then(|m| m.get(map)).and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or("")
}

fn generation_of(obj: &Value) -> i64 {
    obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1)
}

/// The condition of type `ty` in `status.conditions`.
fn find_condition<'a>(obj: &'a Value, ty: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?.as_array()?.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
}

fn condition_is_true(obj: &Value, ty: &str) -> bool {
    find_condition(obj, ty).is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"))
}

/// The current status as an object (`{}` when absent or not an object).
fn status_of(obj: &Value) -> Value {
    obj.get("status").filter(|s| s.is_object()).cloned().unwrap_or_else(|| json!({}))
}

/// A metav1.Condition (`observedGeneration` when `generation` is given).
fn condition(ty: &str, ok: bool, reason: &str, message: &str, generation: Option<i64>) -> Value {
    let mut c = Map::new();
    c.insert("type".into(), json!(ty));
    c.insert("status".into(), json!(if ok { "True" } else { "False" }));
    if let Some(g) = generation {
        c.insert("observedGeneration".into(), json!(g));
    }
    c.insert("lastTransitionTime".into(), json!(now_rfc3339()));
    c.insert("reason".into(), json!(reason));
    c.insert("message".into(), json!(message));
    Value::Object(c)
}

/// `meta.SetStatusCondition` for each of `new`: a condition of the same type is replaced in place
/// (others are kept); `lastTransitionTime` is kept while the status does not change, and
/// `lastUpdateTime` / `lastProbeTime` while status, reason and message do not. This is what
/// makes a reconcile of an unchanged object a no-op.
fn set_conditions(status: &mut Value, new: Vec<Value>) {
    if !status.is_object() {
        *status = json!({});
    }
    let mut list = status.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    for mut c in new {
        match list.iter_mut().find(|o| o.get("type") == c.get("type")) {
            Some(o) => {
                let same_status = o.get("status") == c.get("status");
                let same_text =
                    same_status && o.get("reason") == c.get("reason") && o.get("message") == c.get("message");
                for (field, keep) in
                    [("lastTransitionTime", same_status), ("lastUpdateTime", same_text), ("lastProbeTime", same_text)]
                {
                    if keep
                        && c.get(field).is_some()
                        && let Some(v) = o.get(field)
                    {
                        c[field] = v.clone();
                    }
                }
                *o = c;
            }
            None => list.push(c),
        }
    }
    status["conditions"] = Value::Array(list);
}

/// JSON with object keys sorted (a stable input for hashes).
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", serde_json::to_string(k).unwrap_or_default(), canonical(&m[*k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

fn sha256(data: &[u8]) -> Vec<u8> {
    Sha256::digest(data).iter().copied().collect()
}

fn hex_upper(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

fn base64_url(data: &[u8]) -> String {
    base64_encode(data).replace('+', "-").replace('/', "_").trim_end_matches('=').to_string()
}

/// kube's pod-template-hash alphabet (10 characters).
fn template_hash(template: Option<&Value>) -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let h = sha256(canonical(template.unwrap_or(&Value::Null)).as_bytes());
    let mut x = u64::from_le_bytes(h[..8].try_into().expect("8 bytes"));
    (0..10)
        .map(|_| {
            let c = ALPHA[(x % ALPHA.len() as u64) as usize] as char;
            x /= ALPHA.len() as u64;
            c
        })
        .collect()
}

/// The flavors a ClusterQueue names (`spec.resourceGroups[].flavors[].name`).
fn cq_flavors(cq: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for rg in cq.pointer("/spec/resourceGroups").and_then(Value::as_array).into_iter().flatten() {
        for f in rg.get("flavors").and_then(Value::as_array).into_iter().flatten() {
            let n = text_at(f, "/name");
            if !n.is_empty() && !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
    }
    out
}

/// The admission checks a ClusterQueue names: `spec.admissionChecksStrategy.admissionChecks[].name`
/// (v1beta1 and v1beta2) and `spec.admissionChecks[]` (v1beta1 only).
fn cq_checks(cq: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let strategy = cq.pointer("/spec/admissionChecksStrategy/admissionChecks").and_then(Value::as_array);
    let names = strategy.into_iter().flatten().map(|c| text_at(c, "/name"));
    let plain = cq.pointer("/spec/admissionChecks").and_then(Value::as_array);
    for n in names.chain(plain.into_iter().flatten().filter_map(Value::as_str)) {
        if !n.is_empty() && !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    }
    out
}

/// The flavors an admission check of a ClusterQueue is scoped to
/// (`spec.admissionChecksStrategy.admissionChecks[].onFlavors`); empty means every flavor.
fn cq_check_flavors(cq: &Value, check: &str) -> Vec<String> {
    let strategy = cq.pointer("/spec/admissionChecksStrategy/admissionChecks").and_then(Value::as_array);
    let entry = strategy.into_iter().flatten().find(|c| text_at(c, "/name") == check);
    let on = entry.and_then(|c| c.get("onFlavors")).and_then(Value::as_array);
    on.into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

/// A MultiKueueCluster's kubeconfig source: `spec.clusterSource.kubeConfig` (v1beta2) or
/// `spec.kubeConfig` (v1beta1) as (locationType, location).
fn mkc_kubeconfig(mkc: &Value) -> Option<(String, String)> {
    let kc = mkc.pointer("/spec/clusterSource/kubeConfig").or_else(|| mkc.pointer("/spec/kubeConfig"))?;
    let lt = match text_at(kc, "/locationType") {
        "" => "Secret",
        t => t,
    };
    Some((lt.to_string(), text_at(kc, "/location").to_string()))
}

fn is_sa_token_for(secret: &Value, sa: &str) -> bool {
    text_at(secret, "/type") == SA_TOKEN_TYPE && meta_str(secret, "annotations", SA_NAME_ANNOTATION) == sa
}

/// Where KAI Scheduler puts the replicas of the cluster's KAI Deployments, given its Nodes and
/// Queues (`scheduling.run.ai/v2`).
fn kai_placements(st: &State) -> Vec<crate::kai::Placement> {
    let of = |g: &str, k: &str| -> Vec<&Value> {
        st.objects.iter().filter(|(key, _)| key.0 == g && key.1 == k).map(|(_, s)| &s.obj).collect()
    };
    crate::kai::place(&of("", "Node"), &of(KAI_GROUP, "Queue"), &of("apps", "Deployment"))
}

/// KAI Scheduler's API group (its Queues).
const KAI_GROUP: &str = "scheduling.run.ai";

/// The address the kubelet reports for a pod (`status.podIP`, `podIPs`): one of K3s's default
/// cluster CIDR 10.42.0.0/16, from the pod's namespace and name (deterministic).
fn with_pod_ip(status: &mut Value, pod: &Key) {
    let h = sha256(format!("{}/{}", pod.2, pod.3).as_bytes());
    let ip = format!("10.42.{}.{}", h[0], h[1] % 254 + 1);
    status["podIP"] = json!(ip);
    status["podIPs"] = json!([{ "ip": ip }]);
}

/// The decoded `data.<key>` of a Secret, when present, valid and non-empty.
fn secret_value(secret: &Value, key: &str) -> Option<Vec<u8>> {
    let v = secret.get("data")?.get(key)?.as_str()?;
    base64_decode(v).filter(|b| !b.is_empty())
}

impl Shared {
    /// Reconciles `keys` (and their dependants) `delay` from now, on the server's runtime.
    fn schedule(&self, keys: Vec<Key>, delay: Duration) {
        if keys.is_empty() {
            return;
        }
        let me = self.me.clone();
        self.rt.spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if let Some(s) = me.upgrade() {
                s.reconcile(&keys);
            }
        });
    }

    /// After a real write of `keys`: schedules their reconciliation when controllers are on.
    fn trigger(&self, st: &State, keys: Vec<Key>) {
        if let Some(delay) = st.controllers {
            self.schedule(keys, delay);
        }
    }

    /// One reconcile round: the written objects and their dependants, in key order; whatever the
    /// controllers write is reconciled one `delay` later.
    fn reconcile(&self, keys: &[Key]) {
        let mut st = self.lock();
        let Some(delay) = st.controllers else { return };
        let mut targets = BTreeSet::new();
        for k in keys {
            targets.extend(self.dependants(&st, k));
            targets.insert(k.clone());
        }
        let mut written: Vec<Key> = Vec::new();
        for t in &targets {
            for w in self.reconcile_one(&mut st, t) {
                if !written.contains(&w) {
                    written.push(w);
                }
            }
        }
        drop(st);
        self.schedule(written, delay);
    }

    /// The objects whose reconciliation reads `key` (other than `key` itself).
    fn dependants(&self, st: &State, key: &Key) -> Vec<Key> {
        let (ns, name) = (key.2.as_str(), key.3.as_str());
        let of = |group: &'static str, kind: &'static str| {
            st.objects.iter().filter(move |(k, _)| k.0 == group && k.1 == kind)
        };
        let pick = |it: &mut dyn Iterator<Item = (&Key, &Stored)>| it.map(|(k, _)| k.clone()).collect::<Vec<Key>>();
        match (key.0.as_str(), key.1.as_str()) {
            ("", "ServiceAccount") => {
                pick(&mut of("", "Secret").filter(|(k, s)| k.2 == ns && is_sa_token_for(&s.obj, name)))
            }
            ("", "Secret") => {
                let mut out = pick(&mut of(KARMADA_CLUSTER_GROUP, "Cluster").filter(|(_, s)| {
                    text_at(&s.obj, "/spec/secretRef/namespace") == ns
                        && text_at(&s.obj, "/spec/secretRef/name") == name
                }));
                if ns == KUEUE_NAMESPACE {
                    out.extend(pick(
                        &mut of(KUEUE, "MultiKueueCluster")
                            .filter(|(_, s)| mkc_kubeconfig(&s.obj).is_some_and(|(t, l)| t == "Secret" && l == name)),
                    ));
                }
                out
            }
            ("apps", "Deployment") => {
                let mut out = pick(&mut of("", "Service").filter(|(k, _)| k.2 == ns));
                // Its ReplicaSets (a deleted Deployment's go with it).
                out.extend(pick(&mut of("apps", "ReplicaSet").filter(|(k, r)| {
                    k.2 == ns && crate::workloads::controller_of(&r.obj).is_some_and(|(_, n, _)| n == name)
                })));
                // KAI's pods share devices: one Deployment's change moves the others'.
                if st.objects.get(key).is_none_or(|d| crate::kai::is_kai(&d.obj)) {
                    out.extend(pick(
                        &mut of("apps", "Deployment").filter(|(k, d)| *k != key && crate::kai::is_kai(&d.obj)),
                    ));
                    out.extend(pick(&mut of("apps", "ReplicaSet").filter(|(_, r)| crate::kai::is_kai(&r.obj))));
                }
                out
            }
            // A ReplicaSet's status is summed into its Deployment's.
            ("apps", "ReplicaSet") => pick(&mut of("apps", "Deployment").filter(|(k, _)| {
                k.2 == ns
                    && st
                        .objects
                        .get(key)
                        .and_then(|r| crate::workloads::controller_of(&r.obj))
                        .is_some_and(|(kind, n, _)| kind == "Deployment" && n == k.3)
            })),
            (KAI_GROUP, "Queue") => {
                let mut out = pick(&mut of("apps", "Deployment").filter(|(_, d)| crate::kai::is_kai(&d.obj)));
                out.extend(pick(&mut of("apps", "ReplicaSet").filter(|(_, r)| crate::kai::is_kai(&r.obj))));
                out
            }
            // A Node's labels, taints and readiness decide where pods can be scheduled (and a
            // gone Node's pods go); a RuntimeClass whether they are admitted.
            ("", "Node") | ("node.k8s.io", "RuntimeClass") => {
                let mut out = pick(&mut of("apps", "Deployment"));
                for kind in ["DaemonSet", "ReplicaSet", "StatefulSet"] {
                    out.extend(pick(&mut of("apps", kind)));
                }
                out
            }
            // A pod gone (deleted, evicted) or changed: its controller makes it again or counts
            // it.
            ("", "Pod") => {
                let mut out = pick(&mut of("", "Service").filter(|(k, _)| k.2 == ns));
                for kind in ["DaemonSet", "ReplicaSet", "StatefulSet"] {
                    out.extend(pick(&mut of("apps", kind).filter(|(k, _)| k.2 == ns)));
                }
                out
            }
            ("batch", "Job") => {
                let chart = match st.objects.get(key) {
                    Some(j) => meta_str(&j.obj, "labels", HELM_CHART_LABEL).to_string(),
                    None => name.strip_prefix("helm-install-").unwrap_or("").to_string(),
                };
                let k = mk_key(HELM_GROUP, "HelmChart", ns, &chart);
                if !chart.is_empty() && st.objects.contains_key(&k) { vec![k] } else { Vec::new() }
            }
            (HELM_GROUP, "HelmChartConfig") => {
                let k = mk_key(HELM_GROUP, "HelmChart", ns, name);
                if st.objects.contains_key(&k) { vec![k] } else { Vec::new() }
            }
            (KUEUE, "ResourceFlavor") => {
                pick(&mut of(KUEUE, "ClusterQueue").filter(|(_, s)| cq_flavors(&s.obj).iter().any(|f| f == name)))
            }
            (KUEUE, "AdmissionCheck") => {
                pick(&mut of(KUEUE, "ClusterQueue").filter(|(_, s)| cq_checks(&s.obj).iter().any(|c| c == name)))
            }
            (KUEUE, "ClusterQueue") => {
                pick(&mut of(KUEUE, "LocalQueue").filter(|(_, s)| text_at(&s.obj, "/spec/clusterQueue") == name))
            }
            (KUEUE, "MultiKueueConfig") => pick(&mut of(KUEUE, "AdmissionCheck").filter(|(_, s)| {
                text_at(&s.obj, "/spec/parameters/kind") == "MultiKueueConfig"
                    && text_at(&s.obj, "/spec/parameters/name") == name
            })),
            _ => Vec::new(),
        }
    }

    /// Runs the controller of `key`'s kind (unless held or its group is not served). Returns the
    /// keys of the objects it wrote or deleted.
    fn reconcile_one(&self, st: &mut State, key: &Key) -> Vec<Key> {
        let (g, k) = (key.0.as_str(), key.1.as_str());
        let service = g.is_empty() && k == "Service";
        let held = if service { "endpointslice".to_string() } else { k.to_ascii_lowercase() };
        if st.held.contains(&held) || st.unserved.contains(g) || (service && st.unserved.contains(DISCOVERY_GROUP)) {
            return Vec::new();
        }
        let written = match (g, k) {
            (HELM_GROUP, "HelmChart") => self.helm_controller(st, key),
            ("batch", "Job") => self.job_controller(st, key),
            ("apps", "Deployment") => self.deployment_controller(st, key),
            ("apps", "ReplicaSet") => self.replicaset_controller(st, key),
            ("apps", "StatefulSet") => self.statefulset_controller(st, key),
            ("apps", "DaemonSet") => self.daemonset_controller(st, key),
            ("", "Secret") => self.token_controller(st, key),
            ("", "Service") => self.endpointslice_controller(st, key),
            (KARMADA_CLUSTER_GROUP, "Cluster") => self.karmada_cluster_controller(st, key),
            (KUEUE, "ClusterQueue") => self.kueue_cluster_queue(st, key),
            (KUEUE, "LocalQueue") => self.kueue_local_queue(st, key),
            (KUEUE, "AdmissionCheck") => self.kueue_admission_check(st, key),
            (KUEUE, "MultiKueueCluster") => self.kueue_multikueue_cluster(st, key),
            _ => None,
        };
        written.unwrap_or_default()
    }

    // -- writes by controllers ------------------------------------------------------------------

    /// Creates or updates an object (not its status) as an `Update` by `manager`; its key when
    /// something changed.
    fn ctl_put(&self, st: &mut State, obj: Value, manager: &str) -> Option<Key> {
        let av = text_at(&obj, "/apiVersion").to_string();
        let res = self.resource_for(&av, text_at(&obj, "/kind"))?.clone();
        let ns = if res.namespaced { text_at(&obj, "/metadata/namespace") } else { "" };
        let key = Shared::key(&res, ns, text_at(&obj, "/metadata/name"));
        let old = st.objects.get(&key).cloned();
        let managers = update_managers(old.as_ref(), &obj, manager, &av, &self.lists_for(&res));
        st.commit(&res, &key, old.as_ref(), obj, managers, false, manager).changed.then_some(key)
    }

    fn ctl_delete(st: &mut State, key: &Key) -> Option<Key> {
        st.objects.remove(key)?;
        st.rv += 1;
        Some(key.clone())
    }

    /// Replaces `status` as an `Update` of the status subresource by `manager` (who then owns the
    /// status fields it changed). Bumps the resourceVersion, not the generation. Nothing happens
    /// when the status is unchanged, or when the object would fail its schema (recorded in
    /// `controller_errors`).
    fn write_status(&self, st: &mut State, key: &Key, status: Value, manager: &str) -> Option<Key> {
        let res = self.resources.iter().find(|r| r.group == key.0 && r.kind == key.1).cloned()?;
        let lists = self.lists_for(&res);
        let old = st.objects.get(key)?;
        if old.obj.get("status") == Some(&status) {
            return None;
        }
        let mut new = old.clone();
        new.obj["status"] = status.clone();
        let av = text_at(&new.obj, "/apiVersion").to_string();
        if self.schemas.knows(&av, &key.1) {
            let report = self.schemas.check(&new.obj);
            if !report.errors.is_empty() {
                let e = format!("{manager}: {} {}/{}: {}", key.1, key.2, key.3, report.errors.join("; "));
                eprintln!("kube_api test double: status not written: {e}");
                if !st.controller_errors.contains(&e) {
                    st.controller_errors.push(e);
                }
                return None;
            }
        }
        let old_w = json!({"status": old.obj.get("status").cloned().unwrap_or_else(|| json!({}))});
        let new_w = json!({ "status": status });
        let changed: BTreeSet<FieldPath> =
            leaves(&new_w, &lists).into_iter().filter(|p| get_path(&old_w, p) != get_path(&new_w, p)).collect();
        for m in new.managers.iter_mut().filter(|m| m.subresource.is_some()) {
            m.fields.retain(|q| get_path(&new_w, q).is_some() && !changed.iter().any(|p| overlaps(p, q)));
        }
        let now = now_rfc3339();
        let mine = |m: &Manager| m.name == manager && m.operation == "Update" && m.subresource == Some("status");
        match new.managers.iter_mut().find(|m| mine(m)) {
            Some(m) => {
                m.fields.extend(changed);
                m.time = now;
                m.api_version = av;
            }
            None => new.managers.push(Manager {
                name: manager.to_string(),
                operation: "Update",
                api_version: av,
                time: now,
                fields: changed,
                subresource: Some("status"),
            }),
        }
        new.managers.retain(|m| !m.fields.is_empty());
        st.rv += 1;
        new.obj["metadata"]["resourceVersion"] = json!(st.rv.to_string());
        st.objects.insert(key.clone(), new);
        Some(key.clone())
    }

    // -- controllers ----------------------------------------------------------------------------

    /// helm-controller: one install Job per HelmChart, recreated (new uid) when the spec changes;
    /// `status.jobName`, conditions `JobCreated` and `Failed` (from the Job).
    fn helm_controller(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let (ns, name) = (key.2.as_str(), key.3.as_str());
        let job_key = mk_key("batch", "Job", ns, &format!("helm-install-{name}"));
        let mut written = Vec::new();
        let Some(chart) = st.objects.get(key).map(|s| s.obj.clone()) else {
            // The chart is gone: so is its install Job (the real controller first runs a
            // helm-delete Job).
            if st.objects.get(&job_key).is_some_and(|j| meta_str(&j.obj, "labels", HELM_CHART_LABEL) == name) {
                written.extend(Shared::ctl_delete(st, &job_key));
            }
            // ... which uninstalls the release: its objects go.
            written.extend(self.helm_release(st, name, None));
            return Some(written);
        };
        let spec = chart.get("spec").cloned().unwrap_or_else(|| json!({}));
        if text_at(&spec, "/chart").is_empty() && text_at(&spec, "/chartContent").is_empty() {
            return None; // not managed by helm-controller
        }
        // The HelmChartConfig of the same name adds its values (and failure policy) to the Job.
        let config = st
            .objects
            .get(&mk_key(HELM_GROUP, "HelmChartConfig", ns, name))
            .and_then(|c| c.obj.get("spec").cloned())
            .filter(|c| c.as_object().is_some_and(|m| !m.is_empty()));
        let hashed = match &config {
            Some(c) => format!("{}\n{}", canonical(&spec), canonical(c)),
            None => canonical(&spec),
        };
        let hash = format!("SHA256={}", hex_upper(&sha256(hashed.as_bytes())));
        let current = st.objects.get(&job_key).map(|j| meta_str(&j.obj, "annotations", HELM_CONFIG_HASH).to_string());
        // A Job owned by an earlier chart of the same name (deleted and created again before
        // the garbage collector got to its Job) belongs to that chart, not this one.
        let owner = st.objects.get(&job_key).and_then(|j| j.obj.pointer("/metadata/ownerReferences/0/uid").cloned());
        let stale_owner = owner.is_some() && owner.as_ref() != chart.pointer("/metadata/uid");
        if current.as_deref() != Some(hash.as_str()) || stale_owner {
            // Replaced, not patched: delete and create, so the Job gets a new uid.
            if current.is_some() {
                Shared::ctl_delete(st, &job_key);
            }
            written.extend(self.ctl_put(st, helm_install_job(&chart, &job_key.3, &hash), HELM_CONTROLLER));
            if current.is_some() && written.is_empty() {
                written.push(job_key.clone());
            }
        }
        let failed = st
            .objects
            .get(&job_key)
            .and_then(|j| find_condition(&j.obj, "Failed").cloned())
            .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"));
        let mut status = status_of(&chart);
        status["jobName"] = json!(job_key.3);
        let created = json!({"type": "JobCreated", "status": "True", "reason": "Job created",
            "message": format!("Applying HelmChart using Job {ns}/{}", job_key.3)});
        let failed = match failed {
            Some(c) => {
                json!({"type": "Failed", "status": "True", "reason": "Job failed", "message": text_at(&c, "/message")})
            }
            None => json!({"type": "Failed", "status": "False"}),
        };
        set_conditions(&mut status, vec![created, failed]);
        written.extend(self.write_status(st, key, status, HELM_CONTROLLER));
        // The install Job of the current spec and values completed: the release is what the
        // chart renders from them (`crate::helm_charts`).
        let installed = st.objects.get(&job_key).is_some_and(|j| {
            condition_is_true(&j.obj, "Complete") && meta_str(&j.obj, "annotations", HELM_CONFIG_HASH) == hash
        });
        if installed {
            match helm_render(st, ns, name) {
                Ok(Some((target, objs))) => {
                    // A release that does not exist yet is installed: the chart's `pre-install`
                    // hooks run first, and what they make is no part of the release
                    // (`crate::helm_charts::pre_install`).
                    if !release_exists(st, name, &target) {
                        for obj in helm_pre_install(st, ns, name).unwrap_or_default() {
                            written.extend(self.ctl_put(st, obj, "kubectl"));
                        }
                    }
                    written.extend(self.helm_release(st, name, Some((&target, objs))))
                }
                Ok(None) => {}
                // The Job's install would have failed (`job_controller`); the values changed since.
                Err(e) => {
                    let e = format!("{HELM_CONTROLLER}: HelmChart {ns}/{name}: {e}");
                    if !st.controller_errors.contains(&e) {
                        st.controller_errors.push(e);
                    }
                }
            }
        }
        Some(written)
    }

    /// Helm's side of an install, upgrade (`Some`: the release's namespace and rendered objects)
    /// or uninstall (`None`) of release `release`: creates or updates what is rendered, deletes
    /// the release's objects (found by Helm's release annotations, `crate::helm_charts`) that no
    /// longer are.
    fn helm_release(&self, st: &mut State, release: &str, rendered: Option<(&str, Vec<Value>)>) -> Vec<Key> {
        use crate::helm_charts::{RELEASE_NAME, RELEASE_NAMESPACE, RENDERED_KINDS};
        let mut written = Vec::new();
        let (target, objs) = match rendered {
            Some((t, o)) => (Some(t.to_string()), o),
            None => (None, Vec::new()),
        };
        let mut keep = BTreeSet::new();
        for obj in objs {
            keep.insert((text_at(&obj, "/kind").to_string(), text_at(&obj, "/metadata/name").to_string()));
            written.extend(self.ctl_put(st, obj, HELM_MANAGER));
        }
        let stale: Vec<Key> = st
            .objects
            .iter()
            .filter(|(k, o)| {
                RENDERED_KINDS.iter().any(|(g, kind)| k.0 == *g && k.1 == *kind)
                    && meta_str(&o.obj, "annotations", RELEASE_NAME) == release
                    && target.as_deref().is_none_or(|t| meta_str(&o.obj, "annotations", RELEASE_NAMESPACE) == t)
                    && !keep.contains(&(k.1.clone(), k.3.clone()))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            written.extend(Shared::ctl_delete(st, &k));
        }
        written
    }

    /// Job controller: a Job without a terminal condition completes (or fails, see
    /// `fail_helm_job`). A Job whose `spec.managedBy` names another controller is not its
    /// (KEP-4368 JobManagedBy, on by default since 1.32: MultiKueue's manager-side Jobs).
    fn job_controller(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let job = st.objects.get(key)?.obj.clone();
        let managed_by = text_at(&job, "/spec/managedBy");
        if !(managed_by.is_empty() || managed_by == "kubernetes.io/job-controller")
            || condition_is_true(&job, "Complete")
            || condition_is_true(&job, "Failed")
            || job.pointer("/spec/suspend") == Some(&json!(true))
        {
            return None;
        }
        let chart = meta_str(&job, "labels", HELM_CHART_LABEL);
        let fail = match st.fail_helm.get_mut(chart) {
            Some(n) if *n > 0 && !chart.is_empty() => {
                *n -= 1;
                true
            }
            _ => false,
        } || (!chart.is_empty() && helm_install_cannot_fetch(&job).is_some())
            // Helm fails the install when the values do not parse or the chart's templates fail
            // on them (`crate::helm_charts`).
            || (!chart.is_empty() && (helm_render(st, &key.2, chart).is_err() || helm_pre_install(st, &key.2, chart).is_err()));
        st.fail_helm.retain(|_, n| *n > 0);
        let now = now_rfc3339();
        let mut status = status_of(&job);
        if status.get("startTime").is_none() {
            status["startTime"] = job.pointer("/metadata/creationTimestamp").cloned().unwrap_or_else(|| json!(now));
        }
        let (ty, reason, message) = if fail {
            status["failed"] = json!(1);
            ("Failed", "BackoffLimitExceeded", JOB_FAILED_MESSAGE)
        } else {
            status["completionTime"] = json!(now);
            status["succeeded"] = json!(1);
            ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
        };
        let c = json!({"type": ty, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message});
        set_conditions(&mut status, vec![c]);
        Some(self.write_status(st, key, status, KCM).into_iter().collect())
    }

    /// DaemonSet controller and the kubelets of its Nodes (`crate::daemonset`): one Pod on every
    /// Node that should run it, made again when its template changes, removed from a Node that
    /// no longer should; each Pod's status as its Node's kubelet reports it; the DaemonSet's
    /// counts from those Pods (kubernetes/kubernetes `pkg/controller/daemon/daemon_controller.go`
    /// `manage`, `updateDaemonSetStatus`). A template whose `runtimeClassName` names no
    /// RuntimeClass gets no Pod (the RuntimeClass admission plugin rejects it, as for
    /// Deployments).
    fn daemonset_controller(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        use crate::daemonset;
        let Some(d) = st.objects.get(key).map(|s| s.obj.clone()) else {
            // Gone (an upgrade no longer renders it, its chart deleted): so are its Pods (the
            // garbage collector, by owner reference).
            let orphans: Vec<Key> = st
                .objects
                .iter()
                .filter(|(k, p)| {
                    k.0.is_empty()
                        && k.1 == "Pod"
                        && k.2 == key.2
                        && crate::workloads::controller_of(&p.obj)
                            .is_some_and(|(kind, name, _)| kind == "DaemonSet" && name == key.3)
                })
                .map(|(k, _)| k.clone())
                .collect();
            return Some(orphans.iter().filter_map(|k| Shared::ctl_delete(st, k)).collect());
        };
        let (ns, uid) = (key.2.clone(), text_at(&d, "/metadata/uid").to_string());
        let spec = d.pointer("/spec/template/spec").cloned().unwrap_or_else(|| json!({}));
        let hash = template_hash(d.pointer("/spec/template"));
        let runtime = text_at(&spec, "/runtimeClassName");
        let admitted =
            runtime.is_empty() || st.objects.contains_key(&mk_key("node.k8s.io", "RuntimeClass", "", runtime));
        let nodes: Vec<Value> =
            st.objects.iter().filter(|(k, _)| k.0.is_empty() && k.1 == "Node").map(|(_, n)| n.obj.clone()).collect();
        let mine = |st: &State| -> Vec<(Key, Value)> {
            st.objects
                .iter()
                .filter(|(k, p)| {
                    k.0.is_empty()
                        && k.1 == "Pod"
                        && k.2 == ns
                        && text_at(&p.obj, "/metadata/ownerReferences/0/uid") == uid
                })
                .map(|(k, p)| (k.clone(), p.obj.clone()))
                .collect()
        };
        let mut written = Vec::new();
        let mut desired = 0;
        for node in &nodes {
            let name = text_at(node, "/metadata/name");
            let should = admitted && daemonset::should_run(&spec, node);
            desired += i64::from(should);
            let here: Vec<(Key, Value)> =
                mine(st).into_iter().filter(|(_, p)| text_at(p, "/spec/nodeName") == name).collect();
            for (k, p) in &here {
                // Not wanted here any more, or of an older template (the default RollingUpdate
                // replaces it; one at a time is not modelled).
                if !should || meta_str(p, "labels", "controller-revision-hash") != hash {
                    written.extend(Shared::ctl_delete(st, k));
                }
            }
            if !should {
                continue;
            }
            let pod_key = match here.iter().find(|(_, p)| meta_str(p, "labels", "controller-revision-hash") == hash) {
                Some((k, _)) => k.clone(),
                None => {
                    st.uids += 1;
                    let pod_name = format!("{}-{}", key.3, random_suffix(st.uids));
                    let Some(k) = self.ctl_put(st, daemonset::pod(&d, name, &pod_name, &hash), KCM) else { continue };
                    written.push(k.clone());
                    k
                }
            };
            let crashing: Vec<String> = st.crashing.iter().filter(|(n, _)| n == name).map(|(_, c)| c.clone()).collect();
            let Some(pod) = st.objects.get(&pod_key).map(|p| p.obj.clone()) else { continue };
            let mut status = daemonset::pod_status(&pod, condition_is_true(node, "Ready"), &crashing);
            with_pod_ip(&mut status, &pod_key);
            written.extend(self.write_status(st, &pod_key, status, "kubelet"));
        }
        // Pods on Nodes that are gone.
        for (k, p) in mine(st) {
            if !nodes.iter().any(|n| text_at(n, "/metadata/name") == text_at(&p, "/spec/nodeName")) {
                written.extend(Shared::ctl_delete(st, &k));
            }
        }
        let pods = mine(st);
        let updated =
            pods.iter().filter(|(_, p)| meta_str(p, "labels", "controller-revision-hash") == hash).count() as i64;
        let ready = pods.iter().filter(|(_, p)| daemonset::ready(p)).count() as i64;
        let mut status = status_of(&d);
        for (f, v) in [
            ("currentNumberScheduled", pods.len() as i64),
            ("desiredNumberScheduled", desired),
            ("numberAvailable", ready),
            ("numberMisscheduled", 0),
            ("numberReady", ready),
            ("observedGeneration", generation_of(&d)),
            ("updatedNumberScheduled", updated),
        ] {
            status[f] = json!(v);
        }
        if let Some(m) = status.as_object_mut() {
            m.remove("numberUnavailable");
        }
        if desired > ready {
            status["numberUnavailable"] = json!(desired - ready);
        }
        written.extend(self.write_status(st, key, status, KCM));
        Some(written)
    }

    /// Token controller: fills `token`, `ca.crt` and `namespace` of a ServiceAccount token Secret
    /// once its ServiceAccount exists.
    fn token_controller(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let secret = st.objects.get(key)?.obj.clone();
        let sa = meta_str(&secret, "annotations", SA_NAME_ANNOTATION);
        if text_at(&secret, "/type") != SA_TOKEN_TYPE || sa.is_empty() {
            return None;
        }
        let sa_obj = st.objects.get(&mk_key("", "ServiceAccount", &key.2, sa))?;
        let sa_uid = text_at(&sa_obj.obj, "/metadata/uid").to_string();
        let data = secret.get("data").filter(|d| d.is_object()).cloned().unwrap_or_else(|| json!({}));
        let mut new = data.clone();
        if secret_value(&secret, "token").is_none() {
            let token = self.sa_token(&key.2, &key.3, sa, &sa_uid, text_at(&secret, "/metadata/uid"));
            new["token"] = json!(base64_encode(token.as_bytes()));
        }
        new["ca.crt"] = json!(base64_encode(self.ca_pem().as_bytes()));
        new["namespace"] = json!(base64_encode(key.2.as_bytes()));
        if new == data {
            return None;
        }
        let mut obj = secret;
        obj["data"] = new;
        Some(self.ctl_put(st, obj, KCM).into_iter().collect())
    }

    /// EndpointSlice controller: `<service>-fabric` with one endpoint per Ready Pod of the
    /// namespace the Service's selector selects (its `status.podIP`, the kubelet's).
    fn endpointslice_controller(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let (ns, name) = (key.2.as_str(), key.3.as_str());
        let slice_key = mk_key(DISCOVERY_GROUP, "EndpointSlice", ns, &format!("{name}-fabric"));
        let svc = st.objects.get(key).map(|s| s.obj.clone());
        let selector = svc.as_ref().and_then(|s| s.pointer("/spec/selector")).and_then(Value::as_object).cloned();
        let (Some(svc), Some(selector)) = (svc, selector.filter(|s| !s.is_empty())) else {
            let ours = st
                .objects
                .get(&slice_key)
                .is_some_and(|s| meta_str(&s.obj, "labels", SLICE_MANAGED_BY_LABEL) == SLICE_MANAGED_BY);
            return Some(if ours { Shared::ctl_delete(st, &slice_key).into_iter().collect() } else { Vec::new() });
        };
        let selected = |p: &Value| {
            let labels = p.pointer("/metadata/labels");
            selector.iter().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        };
        let pods: Vec<Value> = st
            .objects
            .iter()
            .filter(|(k, p)| k.0.is_empty() && k.1 == "Pod" && k.2 == ns && selected(&p.obj))
            .map(|(_, p)| p.obj.clone())
            .collect();
        let mut endpoints = Vec::new();
        for p in pods.iter().filter(|p| crate::daemonset::ready(p)) {
            let Some(ip) = p.pointer("/status/podIP").and_then(Value::as_str) else { continue };
            let mut e = json!({
                "addresses": [ip],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "targetRef": {"kind": "Pod", "namespace": ns, "name": text_at(p, "/metadata/name"),
                    "uid": text_at(p, "/metadata/uid")},
            });
            if let Some(n) = p.pointer("/spec/nodeName") {
                e["nodeName"] = n.clone();
            }
            endpoints.push(e);
        }
        let mut ports = Vec::new();
        for p in svc.pointer("/spec/ports").and_then(Value::as_array).into_iter().flatten() {
            let port = match p.get("targetPort") {
                Some(Value::Number(n)) => Some(json!(n)),
                // A named target port is resolved in the selected pods' containers.
                Some(Value::String(named)) => pods.iter().find_map(|pod| {
                    let containers = pod.pointer("/spec/containers").and_then(Value::as_array)?;
                    containers
                        .iter()
                        .flat_map(|c| c.get("ports").and_then(Value::as_array).into_iter().flatten())
                        .find(|cp| text_at(cp, "/name") == named)
                        .and_then(|cp| cp.get("containerPort").cloned())
                }),
                _ => None,
            };
            let mut e = Map::new();
            if let Some(n) = p.get("name") {
                e.insert("name".into(), n.clone());
            }
            e.insert("port".into(), port.or_else(|| p.get("port").cloned()).unwrap_or(Value::Null));
            e.insert("protocol".into(), p.get("protocol").cloned().unwrap_or_else(|| json!("TCP")));
            if let Some(a) = p.get("appProtocol") {
                e.insert("appProtocol".into(), a.clone());
            }
            ports.push(Value::Object(e));
        }
        // Empty lists are `null`, as kube-apiserver serializes them.
        let list = |v: Vec<Value>| if v.is_empty() { Value::Null } else { Value::Array(v) };
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": slice_key.3,
                "namespace": ns,
                "labels": {SERVICE_NAME_LABEL: name, SLICE_MANAGED_BY_LABEL: SLICE_MANAGED_BY},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name,
                    "uid": text_at(&svc, "/metadata/uid"), "controller": true, "blockOwnerDeletion": true}],
            },
            "addressType": "IPv4",
            "endpoints": list(endpoints),
            "ports": list(ports),
        });
        Some(self.ctl_put(st, slice, ENDPOINTSLICE_MANAGER).into_iter().collect())
    }

    /// Karmada cluster-status controller: `Ready` from the credentials in `spec.secretRef`.
    fn karmada_cluster_controller(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let c = st.objects.get(key)?.obj.clone();
        let (sns, sname) = (text_at(&c, "/spec/secretRef/namespace"), text_at(&c, "/spec/secretRef/name"));
        let problem = if sns.is_empty() || sname.is_empty() {
            Some("spec.secretRef is not set, there are no credentials to reach the member cluster".to_string())
        } else {
            match st.objects.get(&mk_key("", "Secret", sns, sname)) {
                None => Some(format!("secret \"{sns}/{sname}\" (spec.secretRef) not found")),
                Some(s) if secret_value(&s.obj, "token").is_none() => {
                    Some(format!("secret \"{sns}/{sname}\" (spec.secretRef) has no token"))
                }
                Some(_) => None,
            }
        };
        let cond = match problem {
            None => condition("Ready", true, "ClusterReady", "cluster is healthy and ready to accept workloads", None),
            Some(why) => {
                condition("Ready", false, "ClusterNotReachable", &format!("cluster is not reachable: {why}"), None)
            }
        };
        let mut status = status_of(&c);
        set_conditions(&mut status, vec![cond]);
        Some(self.write_status(st, key, status, KARMADA_MANAGER).into_iter().collect())
    }

    fn kueue_active(&self, st: &mut State, key: &Key, obj: &Value, ok: bool, reason: &str, msg: &str) -> Vec<Key> {
        let mut status = status_of(obj);
        set_conditions(&mut status, vec![condition("Active", ok, reason, msg, Some(generation_of(obj)))]);
        self.write_status(st, key, status, KUEUE_MANAGER).into_iter().collect()
    }

    /// Kueue ClusterQueue: `Active` when its flavors and admission checks exist (and the checks
    /// are active) and it is not stopped.
    fn kueue_cluster_queue(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let cq = st.objects.get(key)?.obj.clone();
        let exists = |kind: &str, n: &str| st.objects.get(&mk_key(KUEUE, kind, "", n));
        let missing_flavors: Vec<String> =
            cq_flavors(&cq).into_iter().filter(|f| exists("ResourceFlavor", f).is_none()).collect();
        let checks = cq_checks(&cq);
        let missing_checks: Vec<&String> = checks.iter().filter(|c| exists("AdmissionCheck", c).is_none()).collect();
        let inactive_checks: Vec<&String> = checks
            .iter()
            .filter(|c| exists("AdmissionCheck", c).is_some_and(|ac| !condition_is_true(&ac.obj, "Active")))
            .collect();
        // MultiKueue's two extra constraints (Kueue's `pkg/cache` clusterQueue
        // `updateWithAdmissionChecks`): one MultiKueue check per ClusterQueue, and it runs for
        // every flavor (an `onFlavors` that is not all of the queue's flavors is refused).
        let multikueue: Vec<&String> = checks
            .iter()
            .filter(|c| {
                exists("AdmissionCheck", c)
                    .is_some_and(|ac| text_at(&ac.obj, "/spec/controllerName") == MULTIKUEUE_CONTROLLER)
            })
            .collect();
        let all_flavors: BTreeSet<String> = cq_flavors(&cq).into_iter().collect();
        let per_flavor: Vec<&String> = multikueue
            .iter()
            .copied()
            .filter(|c| {
                let on: BTreeSet<String> = cq_check_flavors(&cq, c).into_iter().collect();
                !on.is_empty() && on != all_flavors
            })
            .collect();
        let join = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
        let (ok, reason, msg) = if matches!(text_at(&cq, "/spec/stopPolicy"), "Hold" | "HoldAndDrain") {
            (false, "Stopped", "Can't admit new workloads: is stopped.".to_string())
        } else if !missing_flavors.is_empty() {
            let v: Vec<&String> = missing_flavors.iter().collect();
            (
                false,
                "FlavorNotFound",
                format!("Can't admit new workloads: references missing ResourceFlavor(s): {}.", join(&v)),
            )
        } else if !missing_checks.is_empty() {
            let m =
                format!("Can't admit new workloads: references missing AdmissionCheck(s): {}.", join(&missing_checks));
            (false, "AdmissionCheckNotFound", m)
        } else if !inactive_checks.is_empty() {
            let m = format!(
                "Can't admit new workloads: references inactive AdmissionCheck(s): {}.",
                join(&inactive_checks)
            );
            (false, "AdmissionCheckInactive", m)
        } else if multikueue.len() > 1 {
            let m = format!(
                "Can't admit new workloads: Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: {}.",
                multikueue.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")
            );
            (false, "MultipleMultiKueueAdmissionChecks", m)
        } else if !per_flavor.is_empty() {
            let m = format!(
                "Can't admit new workloads: Cannot specify MultiKueue AdmissionCheck per flavor, found: {}.",
                per_flavor.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")
            );
            (false, "MultiKueueAdmissionCheckAppliedPerFlavor", m)
        } else {
            (true, "Ready", "Can admit new workloads".to_string())
        };
        Some(self.kueue_active(st, key, &cq, ok, reason, &msg))
    }

    /// Kueue LocalQueue: `Active` when its ClusterQueue exists and is active.
    fn kueue_local_queue(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let lq = st.objects.get(key)?.obj.clone();
        let cq_name = text_at(&lq, "/spec/clusterQueue");
        let (ok, reason, msg) = match st.objects.get(&mk_key(KUEUE, "ClusterQueue", "", cq_name)) {
            None => (
                false,
                "ClusterQueueDoesNotExist",
                format!("Can't submit new workloads to clusterQueue: ClusterQueue \"{cq_name}\" does not exist"),
            ),
            Some(cq) if !condition_is_true(&cq.obj, "Active") => (
                false,
                "ClusterQueueIsInactive",
                format!("Can't submit new workloads to clusterQueue: ClusterQueue \"{cq_name}\" is inactive"),
            ),
            Some(_) => (true, "Ready", "Can submit new workloads to localQueue".to_string()),
        };
        Some(self.kueue_active(st, key, &lq, ok, reason, &msg))
    }

    /// Kueue AdmissionCheck (MultiKueue's controller): `Active` when `spec.parameters` names an
    /// existing MultiKueueConfig.
    fn kueue_admission_check(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let ac = st.objects.get(key)?.obj.clone();
        let controller = text_at(&ac, "/spec/controllerName");
        let (group, kind, name) = (
            text_at(&ac, "/spec/parameters/apiGroup"),
            text_at(&ac, "/spec/parameters/kind"),
            text_at(&ac, "/spec/parameters/name"),
        );
        let bad = |m: String| (false, "BadConfig", format!("Cannot load the AdmissionChecks parameters: {m}"));
        let (ok, reason, msg) = if controller != MULTIKUEUE_CONTROLLER {
            let m = format!(
                "no controller for {controller:?} runs in the test double (only {MULTIKUEUE_CONTROLLER} is simulated)"
            );
            (false, "Inactive", m)
        } else if name.is_empty() {
            bad("spec.parameters is not set".into())
        } else if group != KUEUE || kind != "MultiKueueConfig" {
            bad(format!("unsupported parameters {group}/{kind}, want {KUEUE}/MultiKueueConfig"))
        } else if !st.objects.contains_key(&mk_key(KUEUE, "MultiKueueConfig", "", name)) {
            bad(format!("MultiKueueConfig.{KUEUE} \"{name}\" not found"))
        } else {
            (true, "Active", "The admission check is active".to_string())
        };
        Some(self.kueue_active(st, key, &ac, ok, reason, &msg))
    }

    /// Kueue MultiKueueCluster: `Active` when its kubeconfig Secret (in `kueue-system`) holds a
    /// `kubeconfig` with clusters, users and contexts.
    fn kueue_multikueue_cluster(&self, st: &mut State, key: &Key) -> Option<Vec<Key>> {
        let mkc = st.objects.get(key)?.obj.clone();
        let problem = match mkc_kubeconfig(&mkc) {
            None if mkc.pointer("/spec/clusterSource/clusterProfileRef").is_some() => {
                Some("spec.clusterSource.clusterProfileRef is not supported by the test double".to_string())
            }
            None => Some("no kubeConfig is set".to_string()),
            Some((t, _)) if t != "Secret" => {
                Some(format!("kubeConfig locationType {t} is not supported by the test double (only Secret)"))
            }
            Some((_, loc)) => match st.objects.get(&mk_key("", "Secret", KUEUE_NAMESPACE, &loc)) {
                None => Some(format!("failed to load the kubeconfig: Secret \"{KUEUE_NAMESPACE}/{loc}\" not found")),
                Some(s) => match secret_value(&s.obj, "kubeconfig") {
                    None => Some(format!(
                        "failed to load the kubeconfig: Secret \"{KUEUE_NAMESPACE}/{loc}\" has no \"kubeconfig\" key"
                    )),
                    Some(bytes) => kubeconfig_problem(&bytes)
                        .map(|p| format!("invalid kubeconfig in Secret \"{KUEUE_NAMESPACE}/{loc}\": {p}")),
                },
            },
        };
        let (ok, reason, msg) = match problem {
            None => (true, "Active", "Connected".to_string()),
            Some(p) => (false, "BadConfig", p),
        };
        Some(self.kueue_active(st, key, &mkc, ok, reason, &msg))
    }

    // -- credentials ----------------------------------------------------------------------------

    /// SHA-256 of the server's seed and `parts`.
    fn digest(&self, parts: &[&str]) -> Vec<u8> {
        let mut h = Sha256::new();
        h.update(self.seed.to_le_bytes());
        for p in parts {
            h.update(p.as_bytes());
            h.update([0u8]);
        }
        h.finalize().iter().copied().collect()
    }

    /// A PEM-looking CA certificate, the same for every Secret of this server.
    fn ca_pem(&self) -> String {
        let mut der = vec![0x30, 0x82, 0x01, 0x7c];
        for i in 0..12 {
            der.extend(self.digest(&["cluster-ca", &i.to_string()]));
        }
        let b64 = base64_encode(&der);
        let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap_or("")).collect();
        format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", lines.join("\n"))
    }

    /// A JWT-looking ServiceAccount token, unique per Secret (its uid).
    fn sa_token(&self, ns: &str, secret: &str, sa: &str, sa_uid: &str, secret_uid: &str) -> String {
        let kid = base64_url(&self.digest(&["kid"])[..24]);
        let header = base64_url(json!({"alg": "RS256", "kid": kid}).to_string().as_bytes());
        let payload = json!({
            "iss": "kubernetes/serviceaccount",
            "kubernetes.io/serviceaccount/namespace": ns,
            "kubernetes.io/serviceaccount/secret.name": secret,
            "kubernetes.io/serviceaccount/service-account.name": sa,
            "kubernetes.io/serviceaccount/service-account.uid": sa_uid,
            "sub": format!("system:serviceaccount:{ns}:{sa}"),
        });
        let mut sig = Vec::new();
        for i in 0..8 {
            sig.extend(self.digest(&["token", secret_uid, ns, secret, &i.to_string()]));
        }
        format!("{header}.{}.{}", base64_url(payload.to_string().as_bytes()), base64_url(&sig))
    }

    // -- CustomResourceDefinition objects -------------------------------------------------------

    /// One CRD object per (group, kind) loaded from a CRD file (not Karmada's swagger) of a served
    /// group, sorted by name.
    fn crd_objects(&self, st: &State) -> Vec<Value> {
        let established = !(st.controllers.is_some() && st.held.contains("customresourcedefinition"));
        let mut kinds: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (g, v, k) in self.schemas.kinds() {
            let av = format!("{g}/{v}");
            let swagger = self
                .schemas
                .source(&av, &k)
                .and_then(|p| p.file_name())
                .is_some_and(|n| n.to_str() == Some("swagger.json"));
            if !swagger && !st.unserved.contains(&g) {
                kinds.entry((g, k)).or_default().push(v);
            }
        }
        let mut out: Vec<Value> = kinds
            .into_iter()
            .map(|((g, k), mut versions)| {
                versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
                let plural = plural_of(&k);
                let name = format!("{plural}.{g}");
                let mut storage = Vec::new();
                let vs: Vec<Value> = versions
                    .iter()
                    .map(|v| {
                        let s = self.schemas.version_status(&format!("{g}/{v}"), &k).expect("known version");
                        if s.storage {
                            storage.push(json!(v));
                        }
                        json!({"name": v, "served": s.served, "storage": s.storage})
                    })
                    .collect();
                let namespaced = self.schemas.namespaced(&format!("{g}/{}", versions[0]), &k).unwrap_or(true);
                let names = json!({"kind": k, "listKind": format!("{k}List"), "plural": plural,
                    "singular": k.to_ascii_lowercase()});
                let h = sha256(name.as_bytes());
                let uid = format!(
                    "{}-{}-{}-{}-{}",
                    hex_upper(&h[0..4]),
                    hex_upper(&h[4..6]),
                    hex_upper(&h[6..8]),
                    hex_upper(&h[8..10]),
                    hex_upper(&h[10..16])
                )
                .to_ascii_lowercase();
                let t = &self.started;
                let est = if established {
                    json!({"type": "Established", "status": "True", "lastTransitionTime": t,
                        "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"})
                } else {
                    json!({"type": "Established", "status": "False", "lastTransitionTime": t,
                        "reason": "Installing", "message": "the initial names have been accepted"})
                };
                json!({
                    "apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "metadata": {"name": name, "uid": uid, "resourceVersion": "1", "generation": 1,
                        "creationTimestamp": t},
                    "spec": {"group": g, "names": names, "scope": if namespaced { "Namespaced" } else { "Cluster" },
                        "versions": vs},
                    "status": {
                        "acceptedNames": names,
                        "conditions": [
                            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": t,
                                "reason": "NoConflicts", "message": "no conflicts found"},
                            est,
                        ],
                        "storedVersions": storage,
                    },
                })
            })
            .collect();
        out.sort_by(|a, b| text_at(a, "/metadata/name").cmp(text_at(b, "/metadata/name")));
        out
    }

    fn crd_get(&self, res: &Resource, name: &str) -> Out {
        let st = self.lock();
        match self.crd_objects(&st).into_iter().find(|o| text_at(o, "/metadata/name") == name) {
            Some(o) => out(200, o),
            None => not_found(res, name),
        }
    }
}

/// Why a kubeconfig is unusable (`None` when it is a YAML mapping with clusters, users and
/// contexts).
fn kubeconfig_problem(bytes: &[u8]) -> Option<String> {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(_) => return Some("it is not UTF-8".into()),
    };
    let doc: Value = match serde_saphyr::from_str(text) {
        Ok(d) => d,
        Err(e) => return Some(format!("it is not YAML: {e}")),
    };
    if !doc.is_object() {
        return Some("it is not a YAML mapping".into());
    }
    let missing: Vec<&str> =
        ["clusters", "users", "contexts"].into_iter().filter(|k| doc.get(*k).is_none_or(Value::is_null)).collect();
    if missing.is_empty() { None } else { Some(format!("missing {}", missing.join(", "))) }
}

/// What the install of HelmChart `ns/name` puts in the cluster: its release namespace and the
/// objects its chart renders from its values and its HelmChartConfig's (`crate::helm_charts`);
/// `Ok(None)` for a chart the double does not render, or no such HelmChart; `Err` when Helm
/// would fail on the values.
fn helm_render(st: &State, ns: &str, name: &str) -> Result<Option<(String, Vec<Value>)>, String> {
    let Some((chart, target, values)) = helm_inputs(st, ns, name)? else { return Ok(None) };
    Ok(crate::helm_charts::render(&chart, name, &target, &values)?.map(|objs| (target, objs)))
}

/// HelmChart `ns/name`'s chart, release namespace (`spec.targetNamespace`, else the chart's) and
/// values (its HelmChartConfig's layered over its own); None when there is no such HelmChart.
fn helm_inputs(st: &State, ns: &str, name: &str) -> Result<Option<(String, String, Value)>, String> {
    let Some(chart) = st.objects.get(&mk_key(HELM_GROUP, "HelmChart", ns, name)) else { return Ok(None) };
    let spec = chart.obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let config =
        st.objects.get(&mk_key(HELM_GROUP, "HelmChartConfig", ns, name)).and_then(|c| c.obj.get("spec").cloned());
    let target = match text_at(&spec, "/targetNamespace") {
        "" => ns.to_string(),
        t => t.to_string(),
    };
    let values = crate::helm_charts::values(&spec, config.as_ref())?;
    Ok(Some((text_at(&spec, "/chart").to_string(), target, values)))
}

/// What the chart of HelmChart `ns/name` makes in its `pre-install` hooks, from the same values
/// as [`helm_render`].
fn helm_pre_install(st: &State, ns: &str, name: &str) -> Result<Vec<Value>, String> {
    let Some((chart, target, values)) = helm_inputs(st, ns, name)? else { return Ok(Vec::new()) };
    crate::helm_charts::pre_install(&chart, name, &target, &values)
}

/// Whether release `release` exists in `target` (Helm's release record, stood for here by the
/// objects carrying its release annotations): klipper-helm then upgrades it.
fn release_exists(st: &State, release: &str, target: &str) -> bool {
    use crate::helm_charts::{RELEASE_NAME, RELEASE_NAMESPACE};
    st.objects.values().any(|o| {
        meta_str(&o.obj, "annotations", RELEASE_NAME) == release
            && meta_str(&o.obj, "annotations", RELEASE_NAMESPACE) == target
    })
}

/// Why klipper-helm's install (the Job's `entry`) cannot fetch the Job's chart, if it cannot.
/// k3s-io/klipper-helm `entry`, `helm_repo_init`: when `CHART` is no `http(s)://` URL and `REPO`
/// is set, it runs `helm repo add ${NAME%%/*} $REPO`; Helm's `repo add` downloads
/// `<REPO>/index.yaml` (helm/helm cmd/helm/repo_add.go, "looks like %q is not a valid chart
/// repository or cannot be reached"), which an OCI registry does not serve: the install fails.
/// An OCI chart works given whole in `CHART` (`oci://…`) with no `REPO`: no repository is added
/// and `helm install` pulls it.
pub fn helm_install_cannot_fetch(job: &Value) -> Option<String> {
    let env = job.pointer("/spec/template/spec/containers/0/env").and_then(Value::as_array)?;
    let var = |n: &str| env.iter().find(|e| e["name"] == n).and_then(|e| e["value"].as_str()).unwrap_or_default();
    let (repo, chart) = (var("REPO"), var("CHART"));
    let chart_is_url = chart.contains("http://") || chart.contains("https://");
    (!chart_is_url && repo.starts_with("oci://"))
        .then(|| format!("Error: looks like \"{repo}\" is not a valid chart repository or cannot be reached"))
}

/// The install Job helm-controller creates for a HelmChart (a trimmed version of the real one).
fn helm_install_job(chart: &Value, job_name: &str, hash: &str) -> Value {
    let name = text_at(chart, "/metadata/name");
    let ns = text_at(chart, "/metadata/namespace");
    let spec = chart.get("spec").cloned().unwrap_or_else(|| json!({}));
    let target = match text_at(&spec, "/targetNamespace") {
        "" => ns,
        t => t,
    };
    let mut args = vec![json!("install")];
    if !text_at(&spec, "/targetNamespace").is_empty() {
        args.extend([json!("--namespace"), json!(target)]);
    }
    if spec.get("createNamespace") == Some(&json!(true)) {
        args.push(json!("--create-namespace"));
    }
    if !text_at(&spec, "/version").is_empty() {
        args.extend([json!("--version"), json!(text_at(&spec, "/version"))]);
    }
    let image = match text_at(&spec, "/jobImage") {
        "" => HELM_JOB_IMAGE,
        i => i,
    };
    // With a repo, helm-controller names the chart `<HelmChart name>/<spec.chart>` (the repo is
    // added under the HelmChart's name): k3s-io/helm-controller pkg/controllers/chart/chart.go,
    // `job()`.
    let chart_ref = match text_at(&spec, "/repo") {
        "" => text_at(&spec, "/chart").to_string(),
        _ => format!("{name}/{}", text_at(&spec, "/chart")),
    };
    let env: Vec<Value> = [
        ("NAME", name),
        ("VERSION", text_at(&spec, "/version")),
        ("REPO", text_at(&spec, "/repo")),
        ("CHART", chart_ref.as_str()),
        ("CHART_NAMESPACE", ns),
        ("TARGET_NAMESPACE", target),
    ]
    .iter()
    .map(|(n, v)| json!({"name": n, "value": v}))
    .collect();
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name,
            "namespace": ns,
            "labels": {HELM_CHART_LABEL: name},
            "annotations": {HELM_CONFIG_HASH: hash},
            "ownerReferences": [{"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart", "name": name,
                "uid": text_at(chart, "/metadata/uid"), "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "backoffLimit": 1000,
            "template": {
                "metadata": {"labels": {HELM_CHART_LABEL: name}, "annotations": {HELM_CONFIG_HASH: hash}},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "serviceAccountName": format!("helm-{name}"),
                    "containers": [{"name": "helm", "image": image, "imagePullPolicy": "IfNotPresent",
                        "args": args, "env": env}],
                },
            },
        },
    })
}

/// `text` (a topology) with its kubeconfig paths pointed at the files [`fabric_apis`] wrote in
/// `dir`: the example's `~/.kube/<name>.yaml` (and Karmada's context) or the lab topologies'
/// `/nonexistent/<name>.yaml`; `karmada-vm.yaml` too, for a test that starts a server for
/// Karmada's dedicated VM.
pub fn with_test_kubeconfigs(text: &str, dir: &Path) -> String {
    let mut out = text.replace("context: karmada-apiserver", "context: karmada");
    for name in ["franca", "sp", "karmada", "karmada-vm"] {
        let path = dir.join(format!("{name}.yaml"));
        let path = path.to_str().expect("a UTF-8 temp dir");
        out = out.replace(&format!("~/.kube/{name}.yaml"), path).replace(&format!("/nonexistent/{name}.yaml"), path);
    }
    out
}

/// The example topology (`topology.example.yaml`) reaching the test API servers of `dir`.
pub fn example_topology(dir: &Path) -> String {
    with_test_kubeconfigs(include_str!("../../../topology.example.yaml"), dir)
}
