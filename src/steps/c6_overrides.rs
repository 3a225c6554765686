//! C.6 — override policies (seed: "Policies + failover"): in each member, the GPU services run
//! on that site's GPU model (a node selector Karmada adds per member).

use futures::future::BoxFuture;

use super::verify::{Verdict, get, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::kai;
use crate::desired::karmada;
use crate::desired::{Out, gpu_model, members};
use crate::topology::model::Service;

pub struct C6;

impl Step for C6 {
    fn id(&self) -> &'static str {
        "C.6"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["C.3"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        for s in members(t) {
            let Some(model) = gpu_model(s) else { continue };
            let file = Some(format!("apps/karmada/override-policies/{}.yaml", s.name));
            for svc in t.services.iter().filter(|x| x.uses_gpu()) {
                let policy = karmada::override_policy(t, s, svc, model);
                out.kube(None, policy, summary(svc, model, &s.name), file.clone());
            }
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(gpu_selectors(cx))
    }
}

/// What a service's policy does at a member, for the plan.
fn summary(svc: &Service, model: &str, site: &str) -> String {
    let mut s = format!("{} on gpu.model={model} at {site}", svc.name);
    if let Some(q) = &svc.queue {
        s.push_str(&format!(", KAI queue {q}"));
    }
    match (svc.gpu_fraction, svc.gpu_memory_mib) {
        (Some(f), _) => s.push_str(&format!(", {f} of a GPU")),
        (None, Some(m)) => s.push_str(&format!(", {m} MiB of a GPU")),
        (None, None) => {}
    }
    s
}

/// In each member, the GPU services Karmada propagated carry that member's GPU model as their
/// node selector (what the override policies add), and those in a queue KAI Scheduler's fields.
async fn gpu_selectors(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let t = cx.t;
    let label = o::GPU_MODEL_LABEL;
    let mut out = Vec::new();
    for m in members(t) {
        let Some(model) = gpu_model(m) else { continue };
        let target = Target::cluster(&m.name);
        for svc in t.services.iter().filter(|s| s.uses_gpu()) {
            let placed = t
                .placement
                .iter()
                .find(|c| c.name == svc.class)
                .is_some_and(|c| c.sites.is_empty() || c.sites.contains(&m.name));
            if !placed {
                continue;
            }
            let oid = id("apps/v1", svc.workload.kind(), &svc.name, Some(&svc.namespace));
            let (verdict, evidence) = match get(cx.targets, &target, oid).await {
                Err(e) => (Verdict::Fail, format!("{target}: {e}")),
                Ok(None) => {
                    (Verdict::Fail, format!("{target}: Deployment {}/{} not propagated", svc.namespace, svc.name))
                }
                Ok(Some(d)) => match d["spec"]["template"]["spec"]["nodeSelector"][label].as_str() {
                    Some(v) if v == model => match kai_mismatch(svc, &d) {
                        None => (Verdict::Pass, format!("{target}: {} runs on {label}={model}{}", svc.name, kai_note(svc))),
                        Some(m) => (Verdict::Fail, format!("{target}: {} {m}", svc.name)),
                    },
                    other => (
                        Verdict::Fail,
                        format!("{target}: {} has {label}={}, expected {model}", svc.name, other.unwrap_or("(none)")),
                    ),
                },
            };
            let check = format!("{} on the site's GPUs", svc.name);
            out.push(CheckResult { step: cx.key.into(), check, verdict, evidence });
        }
    }
    out
}

/// What KAI Scheduler needs on a propagated Deployment's pod template (scheduler, queue label,
/// sharing annotation) and it lacks, for a service in a queue; None when all is there.
fn kai_mismatch(svc: &Service, d: &serde_json::Value) -> Option<String> {
    let q = svc.queue.as_ref()?;
    let tpl = &d["spec"]["template"];
    let mut want = vec![
        ("schedulerName".to_string(), tpl["spec"]["schedulerName"].clone(), serde_json::json!(kai::KAI_SCHEDULER)),
        (format!("label {}", kai::KAI_QUEUE_LABEL), tpl["metadata"]["labels"][kai::KAI_QUEUE_LABEL].clone(), serde_json::json!(q)),
    ];
    for (k, v) in kai::sharing_annotations(svc).as_ref().and_then(|a| a.as_object()).into_iter().flatten() {
        want.push((format!("annotation {k}"), tpl["metadata"]["annotations"][k].clone(), v.clone()));
    }
    let wrong: Vec<String> = want
        .into_iter()
        .filter(|(_, have, expected)| have != expected)
        .map(|(what, have, expected)| format!("{what} {} (expected {expected})", if have.is_null() { "missing".into() } else { have.to_string() }))
        .collect();
    (!wrong.is_empty()).then(|| format!("is not KAI Scheduler's as C.6 says: {}", wrong.join(", ")))
}

/// The KAI part of a passing check's evidence.
fn kai_note(svc: &Service) -> String {
    match &svc.queue {
        Some(q) => format!(", KAI queue {q}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_propagated_deployment_without_kais_fields_fails() {
        let t = crate::topology::load_str("t.yaml", include_str!("../../topology.example.yaml").to_string())
            .unwrap()
            .topology;
        let vllm = t.services.iter().find(|s| s.name == "vllm").unwrap();
        let mut d = json!({"spec": {"template": {"metadata": {"labels": {"app": "vllm", kai::KAI_QUEUE_LABEL: "gpu-interactive"},
            "annotations": {"gpu-fraction": "0.5"}}, "spec": {"schedulerName": "kai-scheduler"}}}});
        assert_eq!(kai_mismatch(vllm, &d), None);
        d["spec"]["template"]["metadata"]["annotations"] = json!({});
        d["spec"]["template"]["spec"]["schedulerName"] = json!("default-scheduler");
        let m = kai_mismatch(vllm, &d).unwrap();
        assert!(m.contains(r#"schedulerName "default-scheduler" (expected "kai-scheduler")"#), "{m}");
        assert!(m.contains(r#"annotation gpu-fraction missing (expected "0.5")"#), "{m}");
        let whole = Service { queue: None, gpu_fraction: None, gpus: 1, ..vllm.clone() };
        assert_eq!(kai_mismatch(&whole, &json!({})), None, "not KAI's: nothing to check");
    }
}
