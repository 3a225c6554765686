//! C.1 — the Karmada control plane (seed: "Karmada control plane"), installed by its chart in
//! the host site's cluster, with the Failover feature gate as the topology says.

use futures::future::BoxFuture;

use super::verify::{id, rolled_out};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::{Out, yaml};

pub struct C1;

impl Step for C1 {
    fn id(&self) -> &'static str {
        "C.1"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["B.2"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        let host = t.federation.karmada.host_site.as_str();
        out.kube(Some(host), o::namespace(t, "karmada-system"), "Karmada namespace", None);
        let gate = if t.federation.karmada.failover { "on" } else { "off" };
        let summary = format!("Karmada {} with the Failover feature gate {gate}", t.versions.karmada);
        out.kube(Some(host), o::karmada_helm_chart(t), summary, Some("apps/karmada/helmchart.yaml".into()));
        out.extra("apps/karmada/values.yaml".into(), yaml::to_string(&o::karmada_values(t)));
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(async move {
            // The chart's control plane, in the host cluster (release `karmada`).
            let target = Target::cluster(&cx.t.federation.karmada.host_site);
            let mut out = Vec::new();
            for d in ["karmada-apiserver", "karmada-controller-manager", "karmada-scheduler"] {
                let oid = id("apps/v1", "Deployment", d, Some("karmada-system"));
                out.push(rolled_out(cx.targets, cx.key, &target, &format!("{d} running"), oid).await);
            }
            out
        })
    }
}
