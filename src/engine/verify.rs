//! `fabric verify`: the seed's validation of each step, against live state, with evidence.
//!
//! A check passes, fails, or says plainly that it cannot be checked automatically. Kubernetes
//! checks read the status the cluster's controllers write (a Cluster Ready, a ClusterQueue
//! Active, a DaemonSet fully ready); they never change anything.

use serde_json::{Value, json};

use super::kube as k;
use super::observe::Targets;
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

async fn get(t: &Targets, target: &str, id: Value) -> Result<Option<Value>, String> {
    let access = t.kube.get(target).ok_or_else(|| format!("no kubeconfig for {target}"))?;
    let client = k::client(target, access).await?;
    let (api, name) = k::api_for(&client, &id);
    match api.get_opt(&name).await {
        Ok(o) => Ok(o.map(|o| serde_json::to_value(o).unwrap_or(Value::Null))),
        Err(e) => Err(k::describe(&e)),
    }
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
    let members = crate::resources::members(t);
    match id_ {
        "B.1" => {
            let work = super::apply::StepWork {
                key: key.into(),
                id: id_.into(),
                needs: vec![],
                resources: t
                    .sites
                    .iter()
                    .map(|s| crate::resources::Resource {
                        address: format!("router.{}/verify", s.name),
                        target: format!("router.{}", s.name),
                        site: Some(s.name.clone()),
                        provider: crate::resources::ProviderKind::Command,
                        summary: String::new(),
                        sensitive: false,
                        desired: crate::resources::Desired::Command { probe: "true".into(), apply: "true".into() },
                        file: None,
                    })
                    .collect(),
            };
            let (verdict, evidence) = match super::apply::check_step(&work, t, targets).await {
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
            }
            out
        }
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
