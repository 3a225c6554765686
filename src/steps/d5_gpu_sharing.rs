//! D.5 — GPU sharing inside a node (the seed's execution plane: K3s, Kueue and KAI Scheduler,
//! "Como 2 pods compartilham a mesma A5000?"): KAI Scheduler through the K3s HelmChart with GPU
//! sharing on, and its queues: one per site (the parent, guaranteed the site's GPUs) and one per
//! topology queue under it, guaranteed that queue's GPUs, as Kueue's ClusterQueues are (D.1).
//!
//! How the two split the work (docs/design.md, "GPUs: Kueue and KAI Scheduler"): Kueue admits
//! batch Jobs that ask for whole GPUs; KAI Scheduler places the pods that ask for a fraction or
//! an amount of GPU memory, which request no `nvidia.com/gpu` and so are not Kueue's to count.

use futures::future::BoxFuture;

use super::verify::{ReadError, Verdict, client, get, id};
use super::{CheckResult, Step, VerifyCx, sites_of};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::kai;
use crate::desired::{Out, is_dispatch_queue, yaml};
use crate::topology::gpus::site_gpus;

pub struct D5;

impl Step for D5 {
    fn id(&self) -> &'static str {
        "D.5"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["D.1"]
    }

    fn desired(&self, inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        let Some(version) = &t.versions.kai_scheduler else { return };
        for s in sites_of(t, inst) {
            let site = Some(s.name.as_str());
            let file = Some(format!("apps/kai-scheduler/{}.yaml", s.name));
            out.kube(site, o::namespace(t, kai::KAI_NAMESPACE), "KAI Scheduler's namespace", None);
            out.kube(site, kai::kai_helm_chart(t, version), format!("KAI Scheduler {version}, GPU sharing on"), file.clone());
            out.extra(format!("apps/kai-scheduler/values-{}.yaml", s.name), yaml::to_string(&kai::kai_values()));
            let gpus = site_gpus(s);
            out.kube(site, kai::kai_queue(t, &s.name, None, gpus), format!("{gpus} GPUs of site {}", s.name), file.clone());
            // The MultiKueue manager's dispatching queue holds none of the site's GPUs (its Jobs
            // run in the workers): as a KAI queue it would guarantee GPUs the site's own queues
            // already have.
            for q in s.queues.iter().filter(|q| !is_dispatch_queue(t, s, q)) {
                let summary = format!("{} GPUs, under {}", q.gpu_quota, s.name);
                out.kube(site, kai::kai_queue(t, &q.name, Some(&s.name), q.gpu_quota), summary, file.clone());
            }
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(kai_running(cx))
    }
}

/// In each site: KAI Scheduler's Deployments (whatever the chart and its operator name them)
/// are all available, and the site's queues exist.
async fn kai_running(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let mut out = Vec::new();
    for s in cx.sites() {
        let target = Target::cluster(&s.name);
        let (verdict, evidence) = match running(cx, &target).await {
            Ok(e) => (Verdict::Pass, format!("{target}: {e}")),
            Err(e) => (Verdict::Fail, format!("{target}: {e}")),
        };
        out.push(CheckResult { step: cx.key.into(), check: "KAI Scheduler running".into(), verdict, evidence });
        let mut missing = Vec::new();
        let own = s.queues.iter().filter(|q| !is_dispatch_queue(cx.t, s, q)).map(|q| q.name.as_str());
        let names: Vec<&str> = std::iter::once(s.name.as_str()).chain(own).collect();
        for q in &names {
            match get(cx.targets, &target, id(kai::QUEUE_API, "Queue", q, None)).await {
                Ok(Some(_)) => {}
                Ok(None) => missing.push(q.to_string()),
                Err(e) => missing.push(format!("{q} ({e})")),
            }
        }
        let (verdict, evidence) = if missing.is_empty() {
            (Verdict::Pass, format!("{target}: queues {} exist", names.join(", ")))
        } else {
            (Verdict::Fail, format!("{target}: missing queues {}", missing.join(", ")))
        };
        out.push(CheckResult { step: cx.key.into(), check: "KAI queues".into(), verdict, evidence });
    }
    out
}

/// The Deployments in KAI Scheduler's namespace, all available, or what is not.
async fn running(cx: &VerifyCx<'_>, target: &Target) -> Result<String, ReadError> {
    let client = client(cx.targets, target).await?;
    let probe = id("apps/v1", "Deployment", "", Some(kai::KAI_NAMESPACE));
    let (api, _) = crate::providers::kube::api_for(&client, &probe);
    let list = api.list(&Default::default()).await.map_err(|e| ReadError(crate::providers::kube::describe(&e)))?;
    let deployments: Vec<serde_json::Value> = list.items.iter().filter_map(|d| serde_json::to_value(d).ok()).collect();
    if deployments.is_empty() {
        return Err(ReadError(format!("no Deployment in `{}` (has the chart installed?)", kai::KAI_NAMESPACE)));
    }
    let down: Vec<String> = deployments
        .iter()
        .filter(|d| d["status"]["availableReplicas"].as_i64().unwrap_or(0) < d["spec"]["replicas"].as_i64().unwrap_or(1))
        .map(|d| d["metadata"]["name"].as_str().unwrap_or_default().to_string())
        .collect();
    if down.is_empty() {
        Ok(format!("{} Deployment(s) available in `{}`", deployments.len(), kai::KAI_NAMESPACE))
    } else {
        Err(ReadError(format!("not available: {}", down.join(", "))))
    }
}
