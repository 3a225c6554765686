//! C.1 — the Karmada control plane (seed: "Karmada control plane"), installed by its chart in
//! the host site's cluster, with the Failover feature gate as the topology says.

use futures::future::BoxFuture;

use super::verify::{id, rolled_out};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::karmada;
use crate::desired::k3s_install::Role;
use crate::desired::{Desired, Out, karmada_host, text, yaml};

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
        let (target, site) = karmada_host(t);
        if let Some(vm) = t.federation.karmada.vm.as_ref().filter(|vm| target == Target::cluster(&vm.name)) {
            // A dedicated VM: a single-node K3s first (from the air-gap bundle), then the chart in it.
            out.file(
                &vm.name,
                site,
                "/etc/rancher/k3s/config.yaml",
                Desired::File(yaml::to_string(&text::k3s_vm_config(vm))),
                "K3s server config of Karmada's VM (single node; K3s restarts when it changes)",
                Some(format!("config/k3s/karmada/{}.yaml", vm.name)),
            );
            super::k3s::install(out, &vm.name, site, Role::Server, Some(target.clone()));
        }
        out.kube_at(target.clone(), Some(site), o::namespace(t, karmada::KARMADA_NAMESPACE), "Karmada namespace", None);
        let gate = if t.federation.karmada.failover { "on" } else { "off" };
        let summary = format!("Karmada {} with the Failover feature gate {gate}", t.versions.karmada);
        let file = Some("apps/karmada/helmchart.yaml".into());
        out.kube_at(target, Some(site), karmada::karmada_helm_chart(t), summary, file);
        out.extra("apps/karmada/values.yaml".into(), yaml::to_string(&karmada::karmada_values(t)));
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(async move {
            // The chart's control plane, in the host cluster (release `karmada`).
            let (target, _) = karmada_host(cx.t);
            let mut out = Vec::new();
            for d in ["karmada-apiserver", "karmada-controller-manager", "karmada-scheduler"] {
                let oid = id("apps/v1", "Deployment", d, Some(karmada::KARMADA_NAMESPACE));
                out.push(rolled_out(cx.targets, cx.key, &target, &format!("{d} running"), oid).await);
            }
            out
        })
    }
}
