//! Karmada's etcd snapshot before its chart's version changes (issue #26, item 2). Karmada's
//! API server keeps the federation's objects in the chart's etcd pod, and a Karmada upgrade
//! has no supported way down (karmada-io/karmada `docs/upgrading/README.md`: a chain of
//! minors, each "might introduce minor breaking changes"): the snapshot is what a rollback has.
//!
//! In a step that changes the `karmada` HelmChart's `spec.version` over a running one: the
//! node that runs the etcd pod is read from the API first (the journal names where the
//! snapshot will be before anything runs), the HelmChart's rollback point carries that place
//! ([`BACKUP_LINE`], a YAML comment, so the journaled object still reads as itself); then,
//! before any change of the step, `etcdctl snapshot save` runs inside the pod through `k3s
//! kubectl exec` on a server of the cluster, and the file is moved off etcd's hostPath volume
//! into the run's backup directory on the pod's node (`desired::backup`, which says why not
//! `kubectl cp`). Both hosts are locked for the run first, as a step's hosts are. A backup that
//! fails stops the step before the HelmChart changes.
//!
//! `fabric rollback` does not put the older chart back over etcd the newer Karmada wrote, nor
//! restore the snapshot by itself (that means stopping the chart's etcd and rewriting its data
//! directory): it leaves the step applied, names the snapshot and the runbook's manual
//! procedure ("Restoring Karmada's etcd"), which loses what Karmada recorded since.

use crate::apply::Failed;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::Value;

use crate::apply::journal::is_run_id;
use crate::desired::backup::{self, KARMADA_ETCD_POD, KARMADA_SNAPSHOT};
use crate::desired::karmada::KARMADA_NAMESPACE;
use crate::desired::upgrade::version_change;
use crate::desired::{Target, karmada_host};
use crate::live::observe::Targets;
use crate::live::pool::Pool;
use crate::providers::kube as k;
use crate::providers::{Observed, PendingChange};
use crate::topology::Topology;
use crate::topology::model::NodeRole;
use crate::transport::shell;

/// The first line of a Karmada HelmChart's rollback point that names its snapshot.
pub const BACKUP_LINE: &str = "# fabric backup: karmada-etcd ";

/// Where a Karmada upgrade's snapshot is taken and kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    /// The server whose `k3s kubectl` runs the snapshot inside the pod.
    pub server: String,
    /// The node that runs the etcd pod, where the snapshot is kept.
    pub node: String,
    /// The snapshot's path on `node`.
    pub path: String,
}

/// Whether `obj` is Karmada's HelmChart (C.1's, `desired::karmada::karmada_helm_chart`).
pub fn is_karmada_chart(obj: &Value) -> bool {
    obj["kind"] == "HelmChart" && obj["metadata"]["name"] == "karmada" && obj["metadata"]["namespace"] == "kube-system"
}

/// The rollback point of Karmada's HelmChart with the place of its snapshot.
pub fn with_backup(prior: &Observed, node: &str, path: &str) -> Observed {
    match prior {
        Observed::Present(t) => Observed::Present(format!("{BACKUP_LINE}{node}:{path}\n{t}")),
        other => other.clone(),
    }
}

/// `(node, path)` of the snapshot a rollback point names, when in fabric's form (the journal is
/// input: a node name of name characters only, a path `<backup root>/<run id>/karmada-etcd.db`).
pub fn backup_of(prior: &Observed) -> Option<(String, String)> {
    let Observed::Present(t) = prior else { return None };
    let (node, path) = t.lines().next()?.strip_prefix(BACKUP_LINE)?.split_once(':')?;
    let name_ok = !node.is_empty() && node.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b));
    let run =
        path.strip_prefix(backup::BACKUP_ROOT)?.strip_prefix('/')?.strip_suffix(&format!("/{KARMADA_SNAPSHOT}"))?;
    (name_ok && is_run_id(run)).then(|| (node.to_string(), path.to_string()))
}

/// The servers of the cluster that hosts Karmada, in the topology's order: the dedicated VM,
/// or the host site's control-plane nodes.
pub fn servers(t: &Topology) -> Vec<String> {
    let (target, site) = karmada_host(t);
    if let Some(vm) = t.federation.karmada.vm.as_ref().filter(|vm| target == Target::cluster(&vm.name)) {
        return vec![vm.name.clone()];
    }
    let Some(s) = t.sites.iter().find(|s| s.name == site) else { return vec![] };
    s.cluster.nodes.iter().filter(|n| n.role == NodeRole::ControlPlane).map(|n| n.name.clone()).collect()
}

/// The backup a step's changes need: for a change of Karmada's HelmChart version, where the
/// snapshot will be (its rollback point is given the place). Reads the etcd pod's node from
/// the cluster. Errors say why no snapshot can be taken, and what to do.
pub async fn prepare(
    t: &Topology,
    targets: &Targets,
    changes: &mut [PendingChange],
    run: &str,
) -> Result<Option<Backup>, Failed> {
    let Some(c) = changes.iter_mut().find(|c| {
        c.resource.kube_object().is_some_and(|o| is_karmada_chart(o) && version_change(&c.prior, o).is_some())
    }) else {
        return Ok(None);
    };
    let cluster = c.resource.target().clone();
    let server = servers(t)
        .into_iter()
        .find(|s| targets.ssh.contains_key(&Target::host(s)))
        .ok_or_else(|| format!("no server of {cluster} is reachable over SSH to take Karmada's etcd snapshot"))?;
    let access = targets.kube.get(&cluster).ok_or_else(|| format!("{cluster} has no kubeconfig"))?;
    let client = k::client(&cluster, access).await.map_err(|e| e.to_string())?;
    let pods: Api<Pod> = Api::namespaced(client, KARMADA_NAMESPACE);
    let pod = pods
        .get_opt(KARMADA_ETCD_POD)
        .await
        .map_err(|e| format!("{cluster}: reading {KARMADA_NAMESPACE}/{KARMADA_ETCD_POD}: {}", k::describe(&e)))?
        .ok_or_else(|| {
            format!("{cluster}: Karmada's etcd pod {KARMADA_NAMESPACE}/{KARMADA_ETCD_POD} is not there: no snapshot can be taken before the upgrade (is the chart's etcd running?)")
        })?;
    let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
    if !targets.ssh.contains_key(&Target::host(&node)) {
        return Err(Failed::from(format!(
            "Karmada's etcd pod runs on node `{node}`, which fabric does not reach over SSH: its snapshot stays on that node's etcd volume; take it by hand (docs/runbook.md \"Karmada's etcd snapshot\") or make the node a host of the topology"
        )));
    }
    let path = format!("{}/{KARMADA_SNAPSHOT}", backup::dir_of(run));
    c.prior = with_backup(&c.prior, &node, &path);
    Ok(Some(Backup { server, node, path }))
}

/// Takes the snapshot: inside the pod (from the server), then onto the run's backup directory
/// (on the pod's node). Nothing of the snapshot is read back or shown.
pub async fn take(pool: &Pool, targets: &Targets, b: &Backup, run: &str) -> Result<(), Failed> {
    let dir = backup::dir_of(run);
    let steps = [
        (&b.server, "`etcdctl snapshot save` in Karmada's etcd pod", backup::karmada_snapshot(KARMADA_NAMESPACE, run)),
        (&b.node, "moving the snapshot off etcd's volume", backup::karmada_keep(&dir, run)),
    ];
    for (host, what, cmd) in steps {
        let target = Target::host(host);
        let s = pool.get(targets, &target).await.map_err(|e| format!("{target}: {e}"))?;
        let o = s
            .run(&shell::as_root(&s.endpoint.user, &cmd), None, std::time::Duration::from_secs(600))
            .await
            .map_err(|e| format!("{target}: {what}: {e}"))?;
        if o.status != 0 {
            return Err(Failed::from(format!(
                "{target}: {what} failed (exit {}): {}",
                o.status,
                o.stderr_str().trim()
            )));
        }
    }
    Ok(())
}

/// What a rollback says instead of putting an upgraded Karmada's older chart back.
pub fn rollback_refusal(address: &str, node: &str, path: &str, running: &str, prior: &str) -> String {
    format!(
        "{address}: Karmada {running} is not put back to {prior}: Karmada has no supported downgrade, and the older \
         chart would run over etcd the newer one wrote. Its etcd snapshot from before the upgrade is {node}:{path}; \
         restore it and the {prior} chart by hand (docs/runbook.md \"Restoring Karmada's etcd\"), which loses what \
         Karmada recorded since it was taken; the step stays applied until then"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::upgrade::chart_version;
    use serde_json::json;

    const CHART: &str = "apiVersion: helm.cattle.io/v1\nkind: HelmChart\nmetadata:\n  name: karmada\n  namespace: kube-system\nspec:\n  version: 1.15.0\n";

    #[test]
    fn a_version_change_of_karmadas_chart_is_seen() {
        let desired = json!({"kind": "HelmChart", "metadata": {"name": "karmada", "namespace": "kube-system"},
            "spec": {"version": "1.16.0"}});
        assert!(is_karmada_chart(&desired));
        let prior = Observed::Present(CHART.into());
        assert_eq!(version_change(&prior, &desired), Some(("1.15.0".into(), "1.16.0".into())));
        assert_eq!(version_change(&Observed::Absent, &desired), None, "an install is no upgrade");
        let same = json!({"spec": {"version": "1.15.0"}});
        assert_eq!(version_change(&prior, &same), None);
    }

    #[test]
    fn the_rollback_point_names_the_snapshot_and_still_reads_as_the_object() {
        let path = "/var/lib/fabric/backup/20261202T100000Z-1/karmada-etcd.db";
        let p = with_backup(&Observed::Present(CHART.into()), "franca-lan", path);
        assert_eq!(backup_of(&p), Some(("franca-lan".into(), path.into())));
        let Observed::Present(text) = &p else { panic!() };
        assert_eq!(chart_version(text).as_deref(), Some("1.15.0"), "the comment keeps the YAML readable");
    }

    #[test]
    fn only_fabrics_form_of_a_snapshot_is_taken_from_a_journal() {
        let p = |t: &str| Observed::Present(format!("{t}\n{CHART}"));
        assert_eq!(backup_of(&p("# fabric backup: karmada-etcd n1:/etc/shadow")), None);
        assert_eq!(
            backup_of(&p("# fabric backup: karmada-etcd n1:/var/lib/fabric/backup/../../etc/karmada-etcd.db")),
            None
        );
        assert_eq!(
            backup_of(&p(
                "# fabric backup: karmada-etcd n1;rm:/var/lib/fabric/backup/20261202T100000Z-1/karmada-etcd.db"
            )),
            None
        );
        assert_eq!(backup_of(&Observed::Present(CHART.into())), None);
    }

    #[test]
    fn the_servers_are_the_host_sites_control_plane() {
        let t = crate::topology::load_str("t.yaml", include_str!("../../topology.example.yaml").to_string())
            .unwrap_or_else(|e| panic!("{e}"))
            .topology;
        let s = servers(&t);
        let site = t.sites.iter().find(|s| s.name == t.federation.karmada.host_site).unwrap();
        let cp: Vec<&str> =
            site.cluster.nodes.iter().filter(|n| n.role == NodeRole::ControlPlane).map(|n| n.name.as_str()).collect();
        assert_eq!(s, cp);
        assert!(!s.is_empty());
    }
}
