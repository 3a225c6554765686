//! `fabric verify`: the seed's validation of each step, against live state, with evidence.
//!
//! A check passes, fails, or says plainly that it cannot be checked automatically. Kubernetes
//! checks read the status the cluster's controllers write (a Cluster Ready, a ClusterQueue
//! Active, a DaemonSet fully ready); they never change anything.

use serde_json::{Value, json};

use crate::live::observe::Targets;
use crate::providers::kube as k;
use crate::topology::Topology;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Skip,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckResult {
    pub step: String,
    pub check: String,
    pub verdict: Verdict,
    pub evidence: String,
}

/// The status condition `type` of an object, as (status, reason/message).
pub fn condition(obj: &Value, kind: &str) -> Option<(String, String)> {
    obj["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind).map(|c| {
        let detail = c["message"].as_str().or(c["reason"].as_str()).unwrap_or_default().to_string();
        (c["status"].as_str().unwrap_or_default().to_string(), detail)
    })
}

/// A client for a Kubernetes target of the topology.
async fn client(t: &Targets, target: &str) -> Result<kube::Client, String> {
    let access = t.kube.get(target).ok_or_else(|| format!("no kubeconfig for {target}"))?;
    k::client(target, access).await.map_err(|e| e.to_string())
}

async fn get(t: &Targets, target: &str, id: Value) -> Result<Option<Value>, String> {
    k::get(&client(t, target).await?, &id).await.map_err(|e| e.to_string())
}

fn id(api_version: &str, kind: &str, name: &str, ns: Option<&str>) -> Value {
    let mut meta = json!({ "name": name });
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    json!({ "apiVersion": api_version, "kind": kind, "metadata": meta })
}

/// One status condition that must be True on each listed object.
async fn conditions(
    targets: &Targets,
    step: &str,
    what: &str,
    objs: Vec<(String, Value)>,
    cond: &str,
) -> Vec<CheckResult> {
    let mut out = Vec::new();
    for (target, oid) in objs {
        let name = format!(
            "{}/{}",
            oid["kind"].as_str().unwrap_or_default(),
            oid["metadata"]["name"].as_str().unwrap_or_default()
        );
        let (verdict, evidence) = match get(targets, &target, oid).await {
            Err(e) => (Verdict::Fail, format!("{target}: {e}")),
            Ok(None) => (Verdict::Fail, format!("{target}: {name} does not exist")),
            Ok(Some(o)) => match condition(&o, cond) {
                Some((s, _)) if s == "True" => (Verdict::Pass, format!("{target}: {name} {cond}=True")),
                Some((s, d2)) => (Verdict::Fail, format!("{target}: {name} {cond}={s} ({d2})")),
                None => (
                    Verdict::Fail,
                    format!("{target}: {name} has no {cond} condition yet (is its controller running?)"),
                ),
            },
        };
        out.push(CheckResult { step: step.into(), check: format!("{what}: {name}"), verdict, evidence });
    }
    out
}

/// Runs the checks of one step instance.
pub async fn step(t: &Topology, targets: &Targets, id_: &str, key: &str, site: Option<&str>) -> Vec<CheckResult> {
    let sites: Vec<&crate::topology::model::Site> =
        t.sites.iter().filter(|s| site.is_none_or(|n| n == s.name)).collect();
    let members = crate::desired::members(t);
    match id_ {
        "B.1" => {
            let work = crate::apply::StepWork {
                key: key.into(),
                id: id_.into(),
                needs: vec![],
                resources: t
                    .sites
                    .iter()
                    .map(|s| crate::desired::Resource {
                        address: format!("router.{}/verify", s.name),
                        target: format!("router.{}", s.name),
                        site: Some(s.name.clone()),
                        provider: crate::desired::ProviderKind::Command,
                        summary: String::new(),
                        sensitive: false,
                        desired: crate::desired::Desired::Command { probe: "true".into(), apply: "true".into() },
                        file: None,
                    })
                    .collect(),
            };
            let (verdict, evidence) = match crate::apply::check::check_step(&work, t, targets).await {
                Ok(Some(e)) => (Verdict::Pass, e),
                Ok(None) => (Verdict::Skip, "no check".into()),
                Err(e) => (Verdict::Fail, e),
            };
            vec![CheckResult { step: key.into(), check: "LAN to LAN through the tunnel".into(), verdict, evidence }]
        }
        "A.1" | "A.2" => {
            let mut out = Vec::new();
            for s in sites {
                let target = format!("cluster.{}", s.name);
                let (verdict, evidence) =
                    match get(targets, &target, id("apps/v1", "DaemonSet", "cilium", Some("kube-system"))).await {
                        Err(e) => (Verdict::Fail, format!("{target}: {e}")),
                        Ok(None) => (Verdict::Fail, format!("{target}: DaemonSet kube-system/cilium does not exist")),
                        Ok(Some(ds)) => {
                            let want = ds["status"]["desiredNumberScheduled"].as_i64().unwrap_or(0);
                            let ready = ds["status"]["numberReady"].as_i64().unwrap_or(0);
                            let v = if want > 0 && ready == want { Verdict::Pass } else { Verdict::Fail };
                            (v, format!("{target}: cilium agents ready {ready}/{want}"))
                        }
                    };
                out.push(CheckResult { step: key.into(), check: "Cilium agents healthy".into(), verdict, evidence });
                let op = id("apps/v1", "Deployment", "cilium-operator", Some("kube-system"));
                out.push(rolled_out(targets, key, &target, "Cilium operator healthy", op).await);
            }
            out
        }
        "A.3" | "A.4" if t.mesh.join == crate::topology::model::JoinMethod::K3sAgent => {
            let kind = if id_ == "A.3" {
                crate::topology::model::WorkloadKind::Vm
            } else {
                crate::topology::model::WorkloadKind::BareMetal
            };
            joined(&sites, kind, targets, key).await
        }
        "B.2" => clustermesh(t, targets, key).await,
        "B.3" => global_service(t, targets, key).await,
        "C.1" => {
            // The chart's control plane, in the host cluster (release `karmada`).
            let target = format!("cluster.{}", t.federation.karmada.host_site);
            let mut out = Vec::new();
            for d in ["karmada-apiserver", "karmada-controller-manager", "karmada-scheduler"] {
                let oid = id("apps/v1", "Deployment", d, Some("karmada-system"));
                out.push(rolled_out(targets, key, &target, &format!("{d} running"), oid).await);
            }
            out
        }
        "C.3" => argocd(t, targets, key).await,
        "C.4" if t.federation.karmada.estimator => {
            let target = format!("cluster.{}", t.federation.karmada.host_site);
            let mut out = Vec::new();
            for m in &members {
                let name = format!("karmada-scheduler-estimator-{}", m.cluster.name);
                let oid = id("apps/v1", "Deployment", &name, Some("karmada-system"));
                out.push(rolled_out(targets, key, &target, &format!("estimator for {}", m.cluster.name), oid).await);
            }
            out
        }
        "C.6" => gpu_selectors(t, targets, key).await,
        "C.2" => {
            let objs = members
                .iter()
                .map(|s| ("karmada".to_string(), id("cluster.karmada.io/v1alpha1", "Cluster", &s.cluster.name, None)))
                .collect();
            conditions(targets, key, "member Ready", objs, "Ready").await
        }
        "D.1" => {
            let mut objs = Vec::new();
            for s in sites {
                for q in &s.queues {
                    objs.push((
                        format!("cluster.{}", s.name),
                        id("kueue.x-k8s.io/v1beta2", "ClusterQueue", &q.name, None),
                    ));
                }
            }
            conditions(targets, key, "ClusterQueue Active", objs, "Active").await
        }
        "D.2" => {
            let Some(mk) = &t.multikueue else { return vec![] };
            let objs = mk
                .workers
                .iter()
                .map(|w| {
                    (format!("cluster.{}", mk.manager), id("kueue.x-k8s.io/v1beta2", "MultiKueueCluster", w, None))
                })
                .collect();
            conditions(targets, key, "MultiKueue worker Active", objs, "Active").await
        }
        "C.7" if t.federation.karmada.failover => failover(t, targets, key).await,
        "D.3" => {
            let Some(mk) = &t.multikueue else { return vec![] };
            let objs = vec![(
                format!("cluster.{}", mk.manager),
                id("kueue.x-k8s.io/v1beta2", "ClusterQueue", &mk.queue, None),
            )];
            conditions(targets, key, "dispatching ClusterQueue Active", objs, "Active").await
        }
        "D.4" => dispatched(t, targets, key).await,
        "G.1" => match &t.gateway {
            Some(g) => {
                let target = format!("cluster.{}", g.site);
                let oid = id("apps/v1", "Deployment", "tensorzero-gateway", Some("tensorzero"));
                vec![rolled_out(targets, key, &target, "gateway running", oid).await]
            }
            None => vec![],
        },
        "C.5" => {
            // A propagated Deployment is present in every member its class places it at.
            let mut out = Vec::new();
            for svc in &t.services {
                let Some(class) = t.placement.iter().find(|c| c.name == svc.class) else { continue };
                for m in members.iter().filter(|m| class.sites.is_empty() || class.sites.contains(&m.name)) {
                    let target = format!("cluster.{}", m.name);
                    let (verdict, evidence) =
                        match get(targets, &target, id("apps/v1", "Deployment", &svc.name, Some(&svc.namespace))).await
                        {
                            Err(e) => (Verdict::Fail, format!("{target}: {e}")),
                            Ok(None) => (
                                Verdict::Fail,
                                format!("{target}: Deployment {}/{} not propagated", svc.namespace, svc.name),
                            ),
                            Ok(Some(_)) => {
                                (Verdict::Pass, format!("{target}: Deployment {}/{} present", svc.namespace, svc.name))
                            }
                        };
                    out.push(CheckResult {
                        step: key.into(),
                        check: format!("{} propagated", svc.name),
                        verdict,
                        evidence,
                    });
                }
            }
            out
        }
        _ => vec![CheckResult {
            step: key.into(),
            check: "-".into(),
            verdict: Verdict::Skip,
            evidence: "no automatic check for this step in this build; see docs/runbook.md".into(),
        }],
    }
}

/// A Deployment rolled out and available, as one result.
async fn rolled_out(targets: &Targets, step: &str, target: &str, check: &str, oid: Value) -> CheckResult {
    let name = format!(
        "Deployment {}/{}",
        oid["metadata"]["namespace"].as_str().unwrap_or_default(),
        oid["metadata"]["name"].as_str().unwrap_or_default()
    );
    let (verdict, evidence) = match get(targets, target, oid).await {
        Err(e) => (Verdict::Fail, format!("{target}: {e}")),
        Ok(None) => (Verdict::Fail, format!("{target}: {name} does not exist")),
        Ok(Some(d)) => match crate::apply::wait::readiness(&d) {
            crate::apply::wait::Readiness::Ready(e) => (Verdict::Pass, format!("{target}: {name} {e}")),
            crate::apply::wait::Readiness::Pending(e) | crate::apply::wait::Readiness::Failed(e) => {
                (Verdict::Fail, format!("{target}: {name}: {e}"))
            }
        },
    };
    CheckResult { step: step.into(), check: check.into(), verdict, evidence }
}

/// B.2: in every cluster the clustermesh-apiserver runs and is exposed on the topology's port,
/// the cluster knows every other cluster (a key per peer in `cilium-clustermesh`), and the CA is
/// the same everywhere. Secret contents are compared in memory and never shown.
async fn clustermesh(t: &Topology, targets: &Targets, key: &str) -> Vec<CheckResult> {
    let mut out = Vec::new();
    let mut cas: Vec<(String, Option<serde_json::Map<String, Value>>)> = Vec::new();
    for s in &t.sites {
        let target = format!("cluster.{}", s.name);
        let dep = id("apps/v1", "Deployment", "clustermesh-apiserver", Some("kube-system"));
        out.push(rolled_out(targets, key, &target, "clustermesh-apiserver running", dep).await);
        let port = t.mesh.clustermesh_port.0;
        let svc = id("v1", "Service", "clustermesh-apiserver", Some("kube-system"));
        let (verdict, evidence) = match get(targets, &target, svc).await {
            Err(e) => (Verdict::Fail, format!("{target}: {e}")),
            Ok(None) => (Verdict::Fail, format!("{target}: Service kube-system/clustermesh-apiserver does not exist")),
            Ok(Some(svc)) => {
                let ports: Vec<i64> = svc["spec"]["ports"]
                    .as_array()
                    .map(|ps| ps.iter().filter_map(|p| p["nodePort"].as_i64()).collect())
                    .unwrap_or_default();
                if ports.contains(&i64::from(port)) {
                    (Verdict::Pass, format!("{target}: clustermesh-apiserver on NodePort {port}"))
                } else {
                    (Verdict::Fail, format!("{target}: clustermesh-apiserver NodePorts {ports:?}, expected {port}"))
                }
            }
        };
        out.push(CheckResult { step: key.into(), check: "clustermesh-apiserver exposed".into(), verdict, evidence });
        // Which clusters this one connects to: the keys of `cilium-clustermesh` (names only).
        let peers: Vec<&str> = t.sites.iter().filter(|p| p.name != s.name).map(|p| p.cluster.name.as_str()).collect();
        let (verdict, evidence) = match secret(targets, &target, "kube-system", "cilium-clustermesh").await {
            Err(e) => (Verdict::Fail, format!("{target}: {e}")),
            Ok(None) => (Verdict::Fail, format!("{target}: Secret kube-system/cilium-clustermesh does not exist")),
            Ok(Some(data)) => {
                let missing: Vec<&str> = peers.iter().copied().filter(|p| !data.contains_key(*p)).collect();
                if missing.is_empty() {
                    (Verdict::Pass, format!("{target}: connects to {}", peers.join(", ")))
                } else {
                    (Verdict::Fail, format!("{target}: no connection configured to {}", missing.join(", ")))
                }
            }
        };
        out.push(CheckResult { step: key.into(), check: "knows every other cluster".into(), verdict, evidence });
        cas.push((target.clone(), secret(targets, &target, "kube-system", "cilium-ca").await.ok().flatten()));
    }
    let first = cas.first().and_then(|(_, d)| d.as_ref()).and_then(|d| d.get("ca.crt").cloned());
    let (verdict, evidence) = match cas.iter().find(|(_, d)| d.as_ref().and_then(|d| d.get("ca.crt")) != first.as_ref())
    {
        _ if first.is_none() => (Verdict::Fail, "no cilium-ca in the first cluster".to_string()),
        Some((t, _)) => (Verdict::Fail, format!("{t}: cilium-ca differs from the first cluster's (or is missing)")),
        None => (Verdict::Pass, format!("the same cilium-ca in {} clusters", cas.len())),
    };
    out.push(CheckResult { step: key.into(), check: "one CA for the mesh".into(), verdict, evidence });
    out
}

/// A Secret's data (in memory only), None when it does not exist.
async fn secret(
    targets: &Targets,
    target: &str,
    ns: &str,
    name: &str,
) -> Result<Option<serde_json::Map<String, Value>>, String> {
    k::secret_data(&client(targets, target).await?, ns, name).await.map_err(|e| e.to_string())
}

/// B.3: the test global service has ready backends in every cluster (its EndpointSlices), so
/// Cilium can balance it across the mesh.
async fn global_service(t: &Topology, targets: &Targets, key: &str) -> Vec<CheckResult> {
    let (_, svc) = crate::desired::objects::global_test_service(t);
    let (name, ns) = (
        svc["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        svc["metadata"]["namespace"].as_str().unwrap_or("default").to_string(),
    );
    let mut out = Vec::new();
    for s in &t.sites {
        let target = format!("cluster.{}", s.name);
        let result = async {
            let live = get(targets, &target, id("v1", "Service", &name, Some(&ns)))
                .await?
                .ok_or_else(|| format!("Service {ns}/{name} does not exist"))?;
            if live["metadata"]["annotations"]["service.cilium.io/global"] != "true" {
                return Err(format!("Service {ns}/{name} is not annotated service.cilium.io/global: \"true\""));
            }
            let client = client(targets, &target).await?;
            let probe = id("discovery.k8s.io/v1", "EndpointSlice", "", Some(&ns));
            let (api, _) = k::api_for(&client, &probe);
            let lp = kube::api::ListParams::default().labels(&format!("kubernetes.io/service-name={name}"));
            let slices = api.list(&lp).await.map_err(|e| k::describe(&e))?;
            let ready = slices
                .items
                .iter()
                .filter_map(|s| serde_json::to_value(s).ok())
                .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
                .filter(|e| e["conditions"]["ready"] != false)
                .count();
            Ok(ready)
        };
        let (verdict, evidence) = match result.await {
            Ok(0) => (Verdict::Fail, format!("{target}: {ns}/{name} has no ready backend here")),
            Ok(n) => (Verdict::Pass, format!("{target}: {ns}/{name} has {n} ready backend(s)")),
            Err(e) => (Verdict::Fail, format!("{target}: {e}")),
        };
        out.push(CheckResult { step: key.into(), check: "global service has backends".into(), verdict, evidence });
    }
    out
}

/// C.3: ArgoCD's Application that deploys the repository to Karmada is Synced and Healthy.
async fn argocd(t: &Topology, targets: &Targets, key: &str) -> Vec<CheckResult> {
    let a = &t.federation.argocd;
    let target = format!("cluster.{}", a.site);
    let app = id("argoproj.io/v1alpha1", "Application", "fabric-apps", Some(&a.namespace));
    let (verdict, evidence) = match get(targets, &target, app).await {
        Err(e) => (Verdict::Fail, format!("{target}: {e}")),
        Ok(None) => (Verdict::Fail, format!("{target}: Application {}/fabric-apps does not exist", a.namespace)),
        Ok(Some(app)) => {
            let sync = app["status"]["sync"]["status"].as_str().unwrap_or("unknown");
            let health = app["status"]["health"]["status"].as_str().unwrap_or("unknown");
            let v = if sync == "Synced" && health == "Healthy" { Verdict::Pass } else { Verdict::Fail };
            (v, format!("{target}: fabric-apps sync {sync}, health {health}"))
        }
    };
    vec![CheckResult { step: key.into(), check: "ArgoCD deploys to Karmada".into(), verdict, evidence }]
}

/// C.6: in each member, the GPU services Karmada propagated carry that member's GPU model as
/// their node selector (what the override policies add).
async fn gpu_selectors(t: &Topology, targets: &Targets, key: &str) -> Vec<CheckResult> {
    let mut out = Vec::new();
    for m in crate::desired::members(t) {
        let Some(model) = crate::desired::gpu_model(m) else { continue };
        let target = format!("cluster.{}", m.name);
        for svc in t.services.iter().filter(|s| s.gpus > 0) {
            let placed = t
                .placement
                .iter()
                .find(|c| c.name == svc.class)
                .is_some_and(|c| c.sites.is_empty() || c.sites.contains(&m.name));
            if !placed {
                continue;
            }
            let oid = id("apps/v1", "Deployment", &svc.name, Some(&svc.namespace));
            let label = crate::desired::objects::GPU_MODEL_LABEL;
            let (verdict, evidence) = match get(targets, &target, oid).await {
                Err(e) => (Verdict::Fail, format!("{target}: {e}")),
                Ok(None) => {
                    (Verdict::Fail, format!("{target}: Deployment {}/{} not propagated", svc.namespace, svc.name))
                }
                Ok(Some(d)) => match d["spec"]["template"]["spec"]["nodeSelector"][label].as_str() {
                    Some(v) if v == model => (Verdict::Pass, format!("{target}: {} runs on {label}={model}", svc.name)),
                    other => (
                        Verdict::Fail,
                        format!("{target}: {} has {label}={}, expected {model}", svc.name, other.unwrap_or("(none)")),
                    ),
                },
            };
            out.push(CheckResult {
                step: key.into(),
                check: format!("{} on the site's GPUs", svc.name),
                verdict,
                evidence,
            });
        }
    }
    out
}

/// A.3/A.4 (`join: k3s-agent`): each VM or bare-metal host is a Ready node of its site's cluster,
/// tainted so that only what tolerates it runs there.
async fn joined(
    sites: &[&crate::topology::model::Site],
    kind: crate::topology::model::WorkloadKind,
    targets: &Targets,
    key: &str,
) -> Vec<CheckResult> {
    let (taint_key, _) = crate::desired::objects::EXTERNAL_TAINT.split_once('=').unwrap_or_default();
    let mut out = Vec::new();
    for s in sites {
        let target = format!("cluster.{}", s.name);
        for w in s.external_workloads.iter().filter(|w| w.kind == kind) {
            let (verdict, evidence) = match get(targets, &target, id("v1", "Node", &w.name, None)).await {
                Err(e) => (Verdict::Fail, format!("{target}: {e}")),
                Ok(None) => (Verdict::Fail, format!("{target}: no node `{}` (has its k3s-agent joined?)", w.name)),
                Ok(Some(node)) => {
                    let tainted = node["spec"]["taints"]
                        .as_array()
                        .is_some_and(|ts| ts.iter().any(|t| t["key"] == taint_key && t["effect"] == "NoSchedule"));
                    match condition(&node, "Ready") {
                        Some((r, _)) if r == "True" && tainted => {
                            (Verdict::Pass, format!("{target}: node {} Ready, tainted {taint_key}", w.name))
                        }
                        Some((r, _)) if r == "True" => {
                            (Verdict::Fail, format!("{target}: node {} is Ready but not tainted {taint_key}", w.name))
                        }
                        Some((r, d)) => (Verdict::Fail, format!("{target}: node {} Ready={r} ({d})", w.name)),
                        None => (Verdict::Fail, format!("{target}: node {} reports no Ready condition", w.name)),
                    }
                }
            };
            out.push(CheckResult { step: key.into(), check: format!("{} joined", w.name), verdict, evidence });
        }
    }
    out
}

/// D.4: MultiKueue dispatched the test Job to a worker (its copy exists there, with the name
/// and namespace of the manager's).
async fn dispatched(t: &Topology, targets: &Targets, key: &str) -> Vec<CheckResult> {
    let Some(mk) = &t.multikueue else { return vec![] };
    let Some(ns) = t
        .sites
        .iter()
        .find(|s| s.name == mk.manager)
        .and_then(|s| s.queues.iter().find(|q| q.name == mk.queue))
        .and_then(|q| q.local_queues.first())
        .map(|l| l.namespace.clone())
    else {
        return vec![];
    };
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for w in &mk.workers {
        let target = format!("cluster.{w}");
        match get(targets, &target, id("batch/v1", "Job", "fabric-multikueue-test", Some(&ns))).await {
            Ok(Some(_)) => found.push(w.clone()),
            Ok(None) => {}
            Err(e) => errors.push(format!("{target}: {e}")),
        }
    }
    let (verdict, evidence) = match (found.is_empty(), errors.is_empty()) {
        (false, _) => (Verdict::Pass, format!("{ns}/fabric-multikueue-test dispatched to {}", found.join(", "))),
        (true, true) => (
            Verdict::Fail,
            format!("{ns}/fabric-multikueue-test is in no worker ({}): not dispatched yet", mk.workers.join(", ")),
        ),
        (true, false) => (Verdict::Fail, errors.join("; ")),
    };
    vec![CheckResult { step: key.into(), check: "test Job dispatched to a worker".into(), verdict, evidence }]
}

/// C.7: failover is configured where Karmada reads it: the Failover feature gate in the chart's
/// values and the taint policy for members that are not Ready. Whether workloads move is the
/// runbook's drill (it takes a member down), not something a read can show.
async fn failover(t: &Topology, targets: &Targets, key: &str) -> Vec<CheckResult> {
    let host = format!("cluster.{}", t.federation.karmada.host_site);
    let chart = id("helm.cattle.io/v1", "HelmChart", "karmada", Some("kube-system"));
    let (verdict, evidence) = match get(targets, &host, chart).await {
        Err(e) => (Verdict::Fail, format!("{host}: {e}")),
        Ok(None) => (Verdict::Fail, format!("{host}: HelmChart kube-system/karmada does not exist")),
        Ok(Some(c)) => {
            let values = c["spec"]["valuesContent"].as_str().unwrap_or_default();
            let on = serde_saphyr::from_str::<crate::topology::tree::Node>(values)
                .map(|n| n.to_json()["controllerManager"]["featureGates"]["Failover"] == json!(true))
                .unwrap_or(false);
            if on {
                (Verdict::Pass, format!("{host}: the Karmada chart turns the Failover feature gate on"))
            } else {
                (Verdict::Fail, format!("{host}: the Karmada chart does not turn the Failover feature gate on"))
            }
        }
    };
    let mut out = vec![CheckResult { step: key.into(), check: "Failover feature gate".into(), verdict, evidence }];
    let policy = id("policy.karmada.io/v1alpha1", "ClusterTaintPolicy", "fabric-not-ready", None);
    let (verdict, evidence) = match get(targets, "karmada", policy).await {
        Err(e) => (Verdict::Fail, format!("karmada: {e}")),
        Ok(None) => (Verdict::Fail, "karmada: ClusterTaintPolicy fabric-not-ready does not exist".to_string()),
        Ok(Some(p)) => {
            let n = p["spec"]["targetClusters"]["clusterNames"].as_array().map_or(0, Vec::len);
            (Verdict::Pass, format!("karmada: ClusterTaintPolicy fabric-not-ready covers {n} member(s)"))
        }
    };
    out.push(CheckResult { step: key.into(), check: "NoExecute taint on members not Ready".into(), verdict, evidence });
    out
}
