//! C.4 — Karmada's scheduler estimators (seed: "Policies + failover", the estimator part): one
//! per member, when `federation.karmada.estimator` is on.
//!
//! The chart renders estimators only for members whose client certificates are in its values
//! (`schedulerEstimator.memberClusters`); fabric's members authenticate with ServiceAccount
//! tokens, so fabric runs one estimator per member itself, with a kubeconfig made from that
//! token, named as the scheduler looks them up (`karmada-scheduler-estimator-<cluster>` in
//! karmada-system), and turns the scheduler's use of them on (a HelmChartConfig over C.1's chart).

use futures::future::BoxFuture;

use super::verify::{id, rolled_out, skip};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::karmada;
use crate::desired::{Out, members};

pub struct C4;

impl Step for C4 {
    fn id(&self) -> &'static str {
        "C.4"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["C.3"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        if !t.federation.karmada.estimator {
            return;
        }
        let (host, site) = crate::desired::karmada_host(t);
        let site = Some(site);
        let file = Some("apps/karmada/estimator.yaml".to_string());
        for s in members(t) {
            let c = &s.cluster.name;
            let mut kc = o::secret_placeholder(t, &format!("{c}-kubeconfig"), karmada::KARMADA_NAMESPACE, "Opaque");
            let server = format!("https://{}:{}", s.cluster.api_address, s.cluster.api_port.0);
            kc["metadata"]["annotations"] = serde_json::json!({
                o::COPY_FROM: Target::cluster(&s.name).at("karmada-cluster/karmada-member-token").to_string(),
                o::COPY_AS: "kubeconfig",
                o::SERVER: server,
            });
            out.kube_at(host.clone(), site, kc, format!("the estimator's kubeconfig for {server}"), None);
            let (deploy, svc) = karmada::scheduler_estimator(t, c);
            out.kube_at(host.clone(), site, deploy, format!("estimates free capacity in `{c}`"), file.clone());
            out.kube_at(host.clone(), site, svc, "where the scheduler reaches it (port 10352)", file.clone());
        }
        let values = serde_json::json!({ "scheduler": { "enableSchedulerEstimator": true } });
        out.kube_at(host, site, o::helm_chart_config(t, "karmada", &values), "the scheduler asks the estimators", file);
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(async move {
            if !cx.t.federation.karmada.estimator {
                return skip(cx.key);
            }
            let (target, _) = crate::desired::karmada_host(cx.t);
            let mut out = Vec::new();
            for m in members(cx.t) {
                let name = format!("karmada-scheduler-estimator-{}", m.cluster.name);
                let oid = id("apps/v1", "Deployment", &name, Some(karmada::KARMADA_NAMESPACE));
                let check = format!("estimator for {}", m.cluster.name);
                out.push(rolled_out(cx.targets, cx.key, &target, &check, oid).await);
            }
            out
        })
    }
}
