//! The Cluster Mesh CA's expiry in plan (B.2): fabric generates the CA in the first site's
//! cluster (`kube-system/cilium-ca`, `steps::b2_cluster_mesh`) for 3 years, and nothing renews
//! it by itself (cilium-certgen reuses it: `--ca-reuse-secret`, cilium/cilium
//! `install/kubernetes/cilium/templates/clustermesh-apiserver/tls-cronjob/_job-spec.tpl`). Under
//! [`EXPIRY_WARNING_DAYS`] days plan warns, as it does for Karmada's certificate
//! (`operation::karmada_cert`); `fabric rotate credentials` renews it.

use std::collections::BTreeSet;

use petgraph::graph::NodeIndex;

use super::Workspace;
use crate::addr::Target;
use crate::live::observe::{Live, Targets};
use crate::live::served_cert::{MESH_CA_KEY, MESH_CA_NAMESPACE, MESH_CA_SECRET, ServedCert, read_mesh_ca};
use crate::providers::cert::{EXPIRY_WARNING_DAYS, Expiry, expiry};

/// The step that makes the mesh CA.
const MESH_STEP: &str = "B.2";

/// Where docs/runbook.md says how to renew it.
const RUNBOOK: &str = "docs/runbook.md, \"Rotating credentials\"";

/// The cluster whose `cilium-ca` is the mesh's CA (the others hold copies of it).
pub fn ca_cluster(t: &crate::topology::Topology) -> Option<Target> {
    t.sites.first().map(|s| Target::cluster(&s.name))
}

impl Workspace {
    /// Reads the mesh CA when B.2 is among `selected` and the CA's cluster runs and was read.
    pub(super) async fn read_mesh_ca(
        &self,
        selected: &BTreeSet<NodeIndex>,
        targets: &Targets,
        live: &Live,
    ) -> Option<ServedCert> {
        selected.iter().any(|n| self.instance(*n).spec.id == MESH_STEP).then_some(())?;
        let target = ca_cluster(self.topology())?;
        // A cluster that does not run yet gets the CA from B.2; one that cannot be read is
        // reported unreachable already.
        if live.bootstrap.contains_key(&target) || live.unreachable.contains_key(&target) {
            return None;
        }
        Some(read_mesh_ca(&target, targets.kube.get(&target)).await)
    }
}

/// Plan's warning about the mesh CA `live` read: under [`EXPIRY_WARNING_DAYS`] days or expired,
/// or not readable.
pub fn warning(live: &Live) -> Option<String> {
    match live.mesh_ca.as_ref()? {
        ServedCert::Read(names) => expiry_warning(names.not_after, now()),
        ServedCert::Unread(why) => Some(format!("{MESH_STEP}: the mesh CA's expiry was not checked: {why}")),
        ServedCert::Absent => None,
    }
}

/// The warning for a mesh CA ending at `not_after` (Unix seconds), at time `now`.
pub fn expiry_warning(not_after: i64, now: i64) -> Option<String> {
    let state = match expiry(not_after, now) {
        Expiry::Valid { .. } => return None,
        Expiry::Soon { days } => format!("expires in {days} day(s)"),
        Expiry::Expired => "expired".to_string(),
    };
    Some(format!(
        "{MESH_STEP}: the Cluster Mesh CA (Secret {MESH_CA_NAMESPACE}/{MESH_CA_SECRET}, key {MESH_CA_KEY}) {state}, at {}: \
         renew it with `fabric rotate credentials` (under {EXPIRY_WARNING_DAYS} days plan warns; {RUNBOOK})",
        crate::apply::journal::utc(not_after)
    ))
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_thirty_days_plan_warns_with_the_date() {
        let (day, now) = (86_400, 1_800_000_000);
        assert_eq!(expiry_warning(now + 30 * day, now), None);
        let w = expiry_warning(now + 30 * day - 1, now).unwrap();
        assert!(w.contains("expires in 29 day(s)") && w.contains("kube-system/cilium-ca"), "{w}");
        assert!(w.contains("fabric rotate credentials"), "{w}");
        let w = expiry_warning(now - 1, now).unwrap();
        assert!(w.contains(") expired, at 2027-01-15 07:59 UTC"), "{w}");
    }

    #[test]
    fn an_unread_ca_is_a_warning_an_absent_one_is_not() {
        let mut live = Live::default();
        assert_eq!(warning(&live), None, "B.2 not planned: nothing read");
        live.mesh_ca = Some(ServedCert::Absent);
        assert_eq!(warning(&live), None, "B.2 makes it");
        live.mesh_ca = Some(ServedCert::Unread("403 Forbidden".into()));
        assert!(warning(&live).unwrap().contains("not checked: 403 Forbidden"));
    }
}
