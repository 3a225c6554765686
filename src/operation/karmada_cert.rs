//! C.1 refused when the certificate Karmada's API server serves (as `live::served_cert` read it)
//! does not name an address a client uses (`desired::karmada::karmada_client_hosts`).
//!
//! Why refuse rather than repair (docs/design.md, "Karmada's API certificate"): the Karmada
//! chart issues the certificate only in its `pre-install` hook (karmada-io/karmada
//! `charts/karmada/templates/pre-install-job.yaml`: the `<release>-config` ConfigMap and the
//! `<release>-pre-install` Job are `helm.sh/hook: pre-install` only), and its `pre-upgrade` hook
//! reuses the Secret (`pre-upgrade-job.yaml` reads `server-ca.crt` from `<release>-cert`), so a
//! changed `certs.auto.hosts` is never issued by an upgrade; the chart's only way to issue it
//! again is an uninstall (`post-delete-job.yaml` deletes the Secrets, the CRDs and the static
//! resources) and a new install, with a new CA that every kubeconfig made from the old one
//! (ArgoCD's, MultiKueue's, the estimators') no longer trusts.

use std::collections::BTreeSet;

use petgraph::graph::NodeIndex;

use super::Workspace;
use crate::desired::karmada::{KARMADA_CERT_KEY, KARMADA_CERT_SECRET, KARMADA_NAMESPACE, karmada_client_hosts};
use crate::live::observe::{Live, Targets};
use crate::live::served_cert::{ServedCert, read_karmada_cert};
use crate::providers::cert::{CertNames, EXPIRY_WARNING_DAYS};
use crate::topology::Topology;

/// The step that installs Karmada's chart.
const KARMADA_STEP: &str = "C.1";

/// Where docs/runbook.md says how to issue the certificate again.
const RUNBOOK: &str = "docs/runbook.md, \"Karmada's API certificate\"";

impl Workspace {
    /// Reads the served certificate when C.1 is among `selected` and its cluster runs.
    pub(super) async fn read_karmada_cert(
        &self,
        selected: &BTreeSet<NodeIndex>,
        targets: &Targets,
        live: &Live,
    ) -> Option<ServedCert> {
        selected.iter().any(|n| self.instance(*n).spec.id == KARMADA_STEP).then_some(())?;
        let (target, _) = crate::desired::karmada_host(self.topology());
        // A cluster that does not run yet installs the chart, which issues the certificate; one
        // that cannot be read is reported unreachable already.
        if live.bootstrap.contains_key(&target) || live.unreachable.contains_key(&target) {
            return None;
        }
        Some(read_karmada_cert(&target, targets.kube.get(&target)).await)
    }

    /// Refuses C.1 as [`refusal`] says; a certificate that could not be read is a warning.
    pub(super) fn refuse_karmada_cert(
        &self,
        inputs: &mut [crate::plan::StepInput<'_>],
        live: &Live,
        warnings: &mut Vec<String>,
    ) {
        let Some(cert) = &live.karmada_cert else { return };
        for input in inputs.iter_mut().filter(|i| i.inst.spec.id == KARMADA_STEP && i.refused.is_none()) {
            match cert {
                ServedCert::Read(names) => {
                    warnings.extend(expiry_warning(names, now()));
                    if let Some(why) = refusal(self.topology(), names, now()) {
                        input.refused = Some(why);
                        input.resources.clear();
                    }
                }
                ServedCert::Unread(why) => warnings.push(format!(
                    "{KARMADA_STEP}: the certificate Karmada's API server serves was not checked: {why}"
                )),
                ServedCert::Absent => {}
            }
        }
    }
}

/// The warning for Karmada's served certificate when it expires in under
/// [`EXPIRY_WARNING_DAYS`] days (the chart issues it for 43800 h, five years: karmada-io/karmada
/// `charts/karmada/values.yaml`, `certs.auto.expiry`), naming where it is and when it ends.
pub fn expiry_warning(names: &CertNames, now: i64) -> Option<String> {
    let left = names.not_after - now;
    (left < EXPIRY_WARNING_DAYS * 86_400).then(|| {
        let state = if left < 0 { "expired".to_string() } else { format!("expires in {} day(s)", left / 86_400) };
        format!(
            "{KARMADA_STEP}: the certificate Karmada's API server serves (Secret {KARMADA_NAMESPACE}/{KARMADA_CERT_SECRET}, key {KARMADA_CERT_KEY}) {state}, at {}: see {RUNBOOK}",
            utc(names.not_after)
        )
    })
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Why C.1 cannot run with the served certificate `names` (at time `now`): the client addresses
/// it does not name, the Secret and key it is in, its expiry, and what to do.
pub fn refusal(t: &Topology, names: &CertNames, now: i64) -> Option<String> {
    let missing: Vec<String> = karmada_client_hosts(t).into_iter().filter(|h| !names.covers(h)).collect();
    if missing.is_empty() {
        return None;
    }
    let when = utc(names.not_after);
    let validity = if names.not_after < now { format!("expired {when}") } else { format!("valid until {when}") };
    Some(format!(
        "the certificate Karmada's API server serves (Secret {KARMADA_NAMESPACE}/{KARMADA_CERT_SECRET}, key \
         {KARMADA_CERT_KEY}, {validity}) does not name {}, which its clients use: they would get x509 errors. \
         Karmada's chart issues it only when it is installed and an upgrade keeps it, so applying the new \
         `certs.auto.hosts` would not change it. Issue it again with the chart's CA for these hosts ({RUNBOOK}), \
         then plan again",
        missing.join(", ")
    ))
}

/// `YYYY-MM-DD HH:MM UTC` of a Unix time.
use crate::apply::journal::utc;

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Topology {
        crate::topology::load_str("t.yaml", include_str!("../../topology.example.yaml").to_string()).unwrap().topology
    }

    fn names(hosts: &[String], not_after: i64) -> CertNames {
        let (ips, dns): (Vec<&String>, Vec<&String>) =
            hosts.iter().partition(|h| h.parse::<std::net::IpAddr>().is_ok());
        CertNames {
            dns: dns.into_iter().cloned().collect(),
            ips: ips.into_iter().map(|h| h.parse().unwrap()).collect(),
            not_after,
        }
    }

    #[test]
    fn a_certificate_with_every_client_address_is_not_refused() {
        let t = example();
        let hosts = karmada_client_hosts(&t);
        assert!(hosts.iter().any(|h| h == "192.168.0.10"), "{hosts:?}");
        assert_eq!(refusal(&t, &names(&hosts, 2_000_000_000), 1_800_000_000), None);
    }

    #[test]
    fn a_missing_address_is_named_with_the_secret_and_expiry() {
        let t = example();
        let old: Vec<String> = ["kubernetes.default.svc", "localhost", "127.0.0.1"].map(String::from).to_vec();
        let why = refusal(&t, &names(&old, 1_830_000_000), 1_800_000_000).unwrap();
        assert!(why.contains("does not name 192.168.0.10"), "{why}");
        assert!(why.contains("Secret karmada-system/karmada-cert, key karmada.crt"), "{why}");
        assert!(why.contains("valid until 2027-12-28 "), "{why}");
        assert!(why.contains("docs/runbook.md"), "{why}");
        let why = refusal(&t, &names(&old, 1_700_000_000), 1_800_000_000).unwrap();
        assert!(why.contains("expired 2023-11-14 22:13 UTC"), "{why}");
    }

    #[test]
    fn under_thirty_days_plan_warns_with_the_date() {
        let day = 86_400;
        let now = 1_800_000_000;
        assert_eq!(expiry_warning(&names(&[], now + 30 * day), now), None);
        let w = expiry_warning(&names(&[], now + 29 * day + 5), now).unwrap();
        assert!(w.contains("expires in 29 day(s)") && w.contains("karmada-system/karmada-cert"), "{w}");
        let w = expiry_warning(&names(&[], now - 1), now).unwrap();
        assert!(w.contains(" expired, at "), "{w}");
    }
}
