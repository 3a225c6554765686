//! D.2 — MultiKueue between the sites (seed: "MultiKueue cross-site"): the admission check and
//! its config in the manager (a site's cluster or Karmada's VM's), and for each worker an
//! identity for MultiKueue whose token becomes the manager's kubeconfig Secret for it.

use futures::future::BoxFuture;

use super::verify::{conditions, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::kueue;
use crate::desired::{Out, identity, multikueue_manager};

pub struct D2;

impl Step for D2 {
    fn id(&self) -> &'static str {
        "D.2"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["C.1", "D.1"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        let (Some(mk), Some((m, msite))) = (&t.multikueue, multikueue_manager(t)) else { return };
        let file = Some("apps/karmada/multikueue/multikueue-config.yaml".to_string());
        let ms = Some(msite);
        out.kube_at(m.clone(), ms, kueue::admission_check(t), "MultiKueue admission check", file.clone());
        let summary = format!("workers: {}", mk.workers.join(", "));
        out.kube_at(m.clone(), ms, kueue::multikueue_config(t, mk), summary, file.clone());
        for w in &mk.workers {
            let Some(ws) = t.sites.iter().find(|s| s.name == *w) else { continue };
            // MultiKueue's identity in the worker, with what it needs to run the dispatched jobs
            // there; its token becomes the manager's kubeconfig Secret.
            let site = Some(w.as_str());
            out.kube(site, kueue::multikueue_worker_role(t), "what MultiKueue may do in the worker", None);
            identity(out, site, "multikueue-worker", "kueue-system", "multikueue-worker", "MultiKueue");
            let server = format!("https://{}:{}", ws.cluster.api_address, ws.cluster.api_port.0);
            let mut secret = o::secret_placeholder(t, &format!("multikueue-{w}"), "kueue-system", "Opaque");
            secret["metadata"]["annotations"] = serde_json::json!({
                o::COPY_FROM: Target::cluster(w).at("kueue-system/multikueue-worker-token").to_string(),
                o::COPY_AS: "kubeconfig",
                o::SERVER: server,
            });
            out.kube_at(m.clone(), ms, secret, format!("worker kubeconfig for {server}"), None);
            out.kube_at(m.clone(), ms, kueue::multikueue_cluster(t, w), format!("worker `{w}`"), file.clone());
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        let objs = match &cx.t.multikueue {
            None => vec![],
            Some(mk) => mk
                .workers
                .iter()
                .map(|w| (Target::cluster(&mk.manager), id(kueue::KUEUE_API, "MultiKueueCluster", w, None)))
                .collect(),
        };
        Box::pin(conditions(cx.targets, cx.key, "MultiKueue worker Active", objs, "Active"))
    }
}
