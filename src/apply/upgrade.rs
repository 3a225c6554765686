//! A K3s upgrade on one node (a host whose K3s runs and whose bundle changes): docs.k3s.io
//! "Manual Upgrades" upgrades servers first, one at a time, then agents (A.1's servers come
//! before A.3/A.4's agents; `desired::upgrade` refuses the skews). On the node: a server's
//! datastore and token backed up first (`desired::backup`, into the run's directory, which the
//! journal's rollback point names), then cordon, drain, the new binary from the air-gap bundle,
//! the node Ready again, uncordon. The node is its step's rollback point; the first node that
//! fails stops the run.
//!
//! Rollback cannot downgrade (Kubernetes supports no control-plane downgrade): `fabric rollback`
//! of a server's upgrade restores the backup, and what the cluster did since it was taken is
//! lost; an agent keeps the new binary (it holds no cluster state).

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::apply::node::{Context, NodeError};
use crate::apply::wait::{self, Readiness};
use crate::desired::backup;
use crate::desired::k3s_install::{K3sInstall, Role};
use crate::desired::{Resource, Target};
use crate::providers::kube::{self as k, KubeError};
use crate::providers::{Observed, airgap};
use crate::transport::shell;
use crate::transport::ssh::Session;

const BACKUP_TIMEOUT: Duration = Duration::from_secs(600);
/// The line a server's rollback point carries: where its backup is.
pub const BACKUP_LINE: &str = "backup ";

/// Whether applying `k` over `prior` upgrades a running K3s (rather than installing one).
pub fn is_upgrade(prior: &Observed) -> bool {
    matches!(prior, Observed::Present(t) if t.lines().any(|l| l.starts_with("k3s")))
}

/// The rollback point of a server's upgrade in `run`: what ran, and where its backup will be.
pub fn with_backup(prior: &Observed, k: &K3sInstall, run: &str) -> Observed {
    match prior {
        Observed::Present(t) if k.role == Role::Server && is_upgrade(prior) => {
            Observed::Present(format!("{t}{BACKUP_LINE}{}\n", backup::dir_of(run)))
        }
        other => other.clone(),
    }
}

/// The backup directory a rollback point names, when it is one fabric makes (the journal is
/// input: only `dir_of`'s form is taken).
pub fn backup_of(prior: &Observed) -> Option<String> {
    let Observed::Present(t) = prior else { return None };
    let dir = t.lines().find_map(|l| l.strip_prefix(BACKUP_LINE))?;
    let run = dir.strip_prefix(backup::BACKUP_ROOT)?.strip_prefix('/')?;
    crate::apply::journal::is_run_id(run).then(|| dir.to_string())
}

/// The node's name: K3s installs are addressed by the host, which is the node.
fn host_name(r: &Resource) -> String {
    match r.target() {
        Target::Host(n) => n.clone(),
        t => t.to_string(),
    }
}

async fn run_root(s: &Session, node: &str, what: &'static str, cmd: &shell::Sh) -> Result<String, NodeError> {
    let o = s
        .run(&shell::as_root(&s.endpoint.user, cmd), None, BACKUP_TIMEOUT)
        .await
        .map_err(|source| NodeError::Ssh { node: node.into(), source })?;
    if o.status != 0 {
        return Err(NodeError::Host { node: node.into(), what, status: o.status, stderr: o.stderr_str() });
    }
    Ok(o.stdout_str())
}

async fn set_unschedulable(client: &Client, node: &str, on: bool) -> Result<(), KubeError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let value = if on { json!(true) } else { Value::Null };
    nodes.patch(node, &PatchParams::default(), &Patch::Merge(json!({"spec": {"unschedulable": value}}))).await?;
    Ok(())
}

/// Upgrades the node behind `s`: backup (a server), cordon, drain, install, Ready, uncordon.
pub async fn upgrade(
    cx: &Context<'_>,
    s: &Session,
    r: &Resource,
    k: &K3sInstall,
    prior: &Observed,
    state_dir: &std::path::Path,
) -> Result<(), NodeError> {
    let node = host_name(r);
    let report = |line: String| {
        let _ = cx.progress.send(format!("{}: {node}: {line}", cx.step));
    };
    if let Some(dir) = backup_of(prior) {
        let kind = run_root(s, &node, "the backup before the upgrade", &backup::k3s_save(&dir)).await?;
        report(format!("K3s datastore ({}) and server token backed up in {dir}", kind.trim()));
    }
    let cluster = Target::cluster(r.site.as_deref().unwrap_or_default());
    let kube = |source| NodeError::Kube { node: node.clone(), source };
    let client = match cx.accesses.get(&cluster) {
        Some(access) => Some(k::client(&cluster, access).await.map_err(kube)?),
        None => None,
    };
    let nodes = client.as_ref().map(|c| Api::<Node>::all(c.clone()));
    // A host its cluster does not list as a Node has nothing to drain.
    let listed = match &nodes {
        Some(n) => n.get_opt(&node).await.map_err(|e| kube(KubeError::from(e)))?.is_some(),
        None => false,
    };
    if listed && let Some(c) = &client {
        crate::apply::node::cordon_and_drain(cx, c, &node).await?;
    }
    if let Err(e) = airgap::apply(s, r, k, state_dir).await {
        // The install refused (a digest, another version) or failed: the node is made
        // schedulable again before the step reverts (its previous K3s still runs when the
        // install refused before it replaced the binary).
        if listed && let Some(c) = &client {
            let _ = set_unschedulable(c, &node, false).await;
        }
        return Err(NodeError::Host { node: node.clone(), what: "the upgrade", status: 1, stderr: e.to_string() });
    }
    report(format!("K3s {} installed from the air-gap bundle", k.version));
    if let (true, Some(c), Some(api)) = (listed, &client, &nodes) {
        let ready = wait::poll(&format!("{node} Ready after the upgrade"), &cx.budget, &report, || async {
            let n = serde_json::to_value(api.get(&node).await.map_err(KubeError::from)?)?;
            Ok::<_, KubeError>(if crate::desired::node_migration::ready(&n) {
                Readiness::Ready(format!("{node} Ready"))
            } else {
                Readiness::Pending("the node is not Ready".into())
            })
        })
        .await
        .map_err(|source| NodeError::Wait { node: node.clone(), source })?;
        report(ready);
        set_unschedulable(c, &node, false).await.map_err(kube)?;
        report("uncordoned".into());
    }
    Ok(())
}

/// Puts a server back as its backup was (the datastore and token restored, K3s restarted);
/// an agent, or an upgrade without a backup, is left as it is (no downgrade exists).
pub async fn restore(s: &Session, r: &Resource, prior: &Observed) -> Result<Option<String>, NodeError> {
    let Some(dir) = backup_of(prior) else { return Ok(None) };
    let node = host_name(r);
    let cmd = shell::as_root(&s.endpoint.user, &backup::k3s_restore(&dir));
    let o = s.run(&cmd, None, BACKUP_TIMEOUT).await.map_err(|source| NodeError::Ssh { node: node.clone(), source })?;
    match o.status {
        0 => Ok(Some(dir)),
        // The upgrade stopped before its backup began: the node was not changed.
        shell::ABSENT => Ok(None),
        status => Err(NodeError::Host { node, what: "restoring the backup", status, stderr: o.stderr_str() }),
    }
}

/// Why a step must not change a HelmChart's version yet: a chart whose new CRDs Helm would not
/// upgrade (`desired::upgrade::chart_crds`), until they are applied by hand.
pub fn crds_by_hand(changes: &[crate::providers::PendingChange]) -> Option<String> {
    changes.iter().find_map(|c| {
        let obj = c.resource.kube_object().filter(|o| o["kind"] == "HelmChart")?;
        let (_, wanted) = crate::desired::upgrade::version_change(&c.prior, obj)?;
        match crate::desired::upgrade::chart_crds(obj["metadata"]["name"].as_str()?, &wanted)? {
            crate::desired::upgrade::Crds::ByHand(why) => Some(format!("{}: {why}", c.resource.address)),
            crate::desired::upgrade::Crds::ByChart(_) => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_argocd_chart_whose_crds_helm_would_leave_old_is_not_upgraded() {
        use crate::desired::{Desired, ProviderKind, Resource};
        let change = |from: &str, to: &str| crate::providers::PendingChange {
            resource: Resource {
                address: "cluster.franca/kube-system/HelmChart/argocd".into(),
                site: Some("franca".into()),
                provider: ProviderKind::Kube,
                summary: String::new(),
                sensitive: false,
                desired: Desired::Kube(json!({"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
                    "metadata": {"name": "argocd", "namespace": "kube-system"}, "spec": {"version": to}})),
                file: None,
            },
            prior: Observed::Present(format!("kind: HelmChart\nspec:\n  version: {from}\n")),
            text: String::new(),
        };
        let why = crds_by_hand(&[change("5.1.0", "5.1.9")]).expect("argo-cd 5.1 keeps its CRDs in crds/");
        assert!(why.starts_with("cluster.franca/kube-system/HelmChart/argocd: argo-cd chart 5.1.9"), "{why}");
        assert_eq!(crds_by_hand(&[change("5.1.9", "5.2.0")]), None, "5.2.0 templates them");
        assert_eq!(crds_by_hand(&[change("5.1.9", "5.1.9")]), None, "no version change");
    }

    #[test]
    fn a_backup_path_is_taken_only_in_fabrics_form() {
        let p = |t: &str| Observed::Present(t.into());
        assert_eq!(
            backup_of(&p("k3s x v1\nbackup /var/lib/fabric/backup/20261202T100000Z-1\n")),
            Some("/var/lib/fabric/backup/20261202T100000Z-1".into())
        );
        assert_eq!(backup_of(&p("k3s x v1\nbackup /etc\n")), None);
        assert_eq!(backup_of(&p("k3s x v1\nbackup /var/lib/fabric/backup/../../etc\n")), None);
        assert!(!is_upgrade(&Observed::Absent) && is_upgrade(&p("k3s-agent x v1\n")));
    }
}
