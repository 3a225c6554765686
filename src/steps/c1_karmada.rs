//! C.1 — the Karmada control plane (seed: "Karmada control plane"), installed by its chart in
//! the host site's cluster, with the Failover feature gate as the topology says.

use futures::future::BoxFuture;

use super::verify::{Verdict, id, rolled_out};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::karmada;
use crate::desired::k3s_install::Role;
use crate::desired::{Desired, Out, karmada_host, text, yaml};
use crate::live::served_cert::{ServedCert, read_karmada_cert};

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
            let served = read_karmada_cert(&target, cx.targets.kube.get(&target)).await;
            let (verdict, evidence) = cert_expiry(&served, now());
            out.push(CheckResult { step: cx.key.into(), check: "Karmada's API certificate".into(), verdict, evidence });
            out
        })
    }
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The certificate's expiry as verify reports it (at time `now`): a pass with its date, a
/// warning under [`crate::providers::cert::EXPIRY_WARNING_DAYS`] days, a failure once expired or
/// when it cannot be read. The chart issues it for 43800 h (karmada-io/karmada
/// `charts/karmada/values.yaml`, `certs.auto.expiry`); docs/runbook.md, "Karmada's API
/// certificate", says how to issue it again.
pub fn cert_expiry(served: &ServedCert, now: i64) -> (Verdict, String) {
    let at = format!("Secret {}/{}", karmada::KARMADA_NAMESPACE, karmada::KARMADA_CERT_SECRET);
    let runbook = "docs/runbook.md, \"Karmada's API certificate\"";
    super::verify::cert_expiry(&at, runbook, "the chart's install issues it", served, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::cert::CertNames;

    fn read(not_after: i64) -> ServedCert {
        ServedCert::Read(CertNames { dns: vec![], ips: vec![], not_after })
    }

    #[test]
    fn the_expiry_passes_warns_under_thirty_days_and_fails_once_expired() {
        let (day, now) = (86_400, 1_800_000_000);
        let (v, e) = cert_expiry(&read(now + 1825 * day), now);
        assert_eq!(v, Verdict::Pass, "{e}");
        assert!(e.contains("(1825 days)") && e.contains("karmada-system/karmada-cert"), "{e}");
        assert_eq!(cert_expiry(&read(now + 30 * day), now).0, Verdict::Pass);
        let (v, e) = cert_expiry(&read(now + 30 * day - 1), now);
        assert_eq!(v, Verdict::Warn, "{e}");
        assert!(e.contains("expires in 29 day(s)"), "{e}");
        assert_eq!(cert_expiry(&read(now - 1), now).0, Verdict::Fail);
        assert_eq!(cert_expiry(&ServedCert::Absent, now).0, Verdict::Fail);
    }
}
