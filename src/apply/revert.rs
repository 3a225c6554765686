//! Putting a step back at its rollback point: after a failed change or check in the run, and
//! from the journal in `fabric rollback`. The journal keeps only what finds a resource again
//! (never a secret's content), so this module also turns a journaled prior back into a resource.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::apply::Pool;
use crate::apply::confirm::disarm_linux_revert;
use crate::apply::journal::Prior;
use crate::desired::{ProviderKind, Resource, Target};
use crate::live::observe::Targets;
use crate::providers::{self, Observed};
use crate::transport::shell::{self, Sh};

/// A session to `target` that answers: the step's connection may be what failed, so the first
/// use of each host in a revert checks it and connects anew when it is dead (`Pool::answering`).
async fn session(
    pool: &Pool,
    targets: &Targets,
    target: &Target,
    checked: &mut std::collections::BTreeSet<Target>,
) -> Result<std::sync::Arc<crate::transport::ssh::Session>, crate::transport::ssh::SshError> {
    if checked.insert(target.clone()) {
        Ok(pool.answering(targets, target).await?.session)
    } else {
        pool.get(targets, target).await
    }
}

/// Puts applied resources back, newest first; returns what could not be put back.
pub async fn revert_all(applied: &[(Resource, Observed)], run: &str, pool: &Pool, targets: &Targets) -> Vec<String> {
    let mut left = Vec::new();
    let mut checked = std::collections::BTreeSet::new();
    // VyOS routers: all of a router's resources in one commit.
    let mut vyos: BTreeMap<Target, Vec<(Resource, Observed)>> = BTreeMap::new();
    for (r, p) in applied.iter().filter(|(r, _)| r.provider == ProviderKind::Vyos) {
        vyos.entry(r.target().clone()).or_default().push((r.clone(), p.clone()));
    }
    for (target, items) in vyos {
        match session(pool, targets, &target, &mut checked).await {
            Ok(s) => {
                if let Err(e) = providers::revert_vyos(&s, &items).await {
                    left.push(e.to_string());
                }
            }
            Err(e) => left.push(format!("{target}: {e}")),
        }
    }
    for (r, prior) in applied.iter().rev().filter(|(r, _)| r.provider == ProviderKind::Kube) {
        let (Some(access), crate::desired::Desired::Kube(obj) | crate::desired::Desired::Prune(obj)) =
            (targets.kube.get(r.target()), &r.desired)
        else {
            continue;
        };
        let result = match crate::providers::kube::client(r.target(), access).await {
            Ok(c) => {
                // An upgraded Karmada is not put back to its older chart (no downgrade exists):
                // the rollback names its snapshot instead (`karmada_backup`).
                if let Some(refusal) = karmada_refusal(&c, r, obj, prior).await {
                    left.push(refusal);
                    continue;
                }
                crate::providers::kube::for_cluster(r.target(), revert_kube(&c, r, obj, prior, run)).await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            left.push(format!("{}: {e}", r.address));
        }
    }
    // Hosts' resources newest first: a cutover's agent config goes back before the node's leave
    // is undone (which waits for the node to be back in its previous cluster).
    for (r, prior) in
        applied.iter().rev().filter(|(r, _)| r.provider != ProviderKind::Vyos && r.provider != ProviderKind::Kube)
    {
        if let crate::desired::Desired::NodeMigration(m) = &r.desired {
            let result = match session(pool, targets, r.target(), &mut checked).await {
                Ok(s) => crate::apply::node::revert(&targets.kube, &s, r, m, prior).await.map_err(|e| e.to_string()),
                Err(e) => Err(format!("{}: {e}", r.address)),
            };
            if let Err(e) = result {
                left.push(e);
            }
            continue;
        }
        // A server's K3s upgrade goes back by restoring its backup (no downgrade exists).
        // (By address: a rollback's resources come from the journal, without their desired state.)
        if r.address.command() == Some("k3s-install") && crate::apply::upgrade::backup_of(prior).is_some() {
            let result = match pool.get(targets, r.target()).await {
                Ok(s) => crate::apply::upgrade::restore(&s, r, prior).await.map_err(|e| e.to_string()),
                Err(e) => Err(format!("{}: {e}", r.address)),
            };
            if let Err(e) = result {
                left.push(e);
            }
            continue;
        }
        // A K3s join token's rotation goes back from what the host kept of the old token
        // (`fabric rotate credentials --k3s-token`; the journal holds no token).
        if let Some(undo) = r.address.command().and_then(|c| crate::apply::k3s_token::undo(c, run)) {
            let result = match session(pool, targets, r.target(), &mut checked).await {
                Ok(s) => crate::apply::k3s_token::run_root(&s, &undo, None).await.map(drop).map_err(|e| e.0),
                Err(e) => Err(format!("{}: {e}", r.address)),
            };
            if let Err(e) = result {
                left.push(e);
            }
            continue;
        }
        if r.sensitive {
            continue; // secrets are never restored from a journal
        }
        let s = match session(pool, targets, r.target(), &mut checked).await {
            Ok(s) => s,
            Err(e) => {
                left.push(format!("{}: {e}", r.address));
                continue;
            }
        };
        if r.provider == ProviderKind::Wireguard {
            let cmd = shell::as_root(&s.endpoint.user, &disarm_linux_revert(providers::wg_interface(r), run));
            let _ = s.run(&cmd, None, Duration::from_secs(20)).await;
        }
        if let Err(e) = providers::revert(&s, r, prior).await {
            left.push(e.to_string());
        }
    }
    left
}

/// Puts a Kubernetes object back. A Secret whose content the journal does not hold is put back
/// from what the run kept of it in the cluster (`fabric rotate credentials` keeps the old data
/// beside it: `providers::kept_secret`); one the run kept nothing of stays as it is.
async fn revert_kube(
    client: &kube::Client,
    r: &Resource,
    obj: &serde_json::Value,
    prior: &Observed,
    run: &str,
) -> Result<(), crate::providers::kube::KubeError> {
    let secret = obj["apiVersion"] == "v1" && obj["kind"] == "Secret";
    if r.sensitive && secret && matches!(prior, Observed::Present(_)) {
        let (ns, name) = (
            obj["metadata"]["namespace"].as_str().unwrap_or("default"),
            obj["metadata"]["name"].as_str().unwrap_or_default(),
        );
        return crate::providers::kept_secret::restore(client, ns, name, run).await.map(drop);
    }
    crate::providers::kube::revert(client, obj, prior).await
}

/// Why Karmada's HelmChart is not put back, when its rollback point names an etcd snapshot and
/// the chart that runs is no longer the one before the upgrade (a step stopped before its
/// HelmChart changed is put back as any other).
async fn karmada_refusal(c: &kube::Client, r: &Resource, obj: &serde_json::Value, prior: &Observed) -> Option<String> {
    use crate::apply::karmada_backup as kb;
    let (node, path) = kb::backup_of(prior)?;
    let Observed::Present(text) = prior else { return None };
    let before = crate::desired::upgrade::chart_version(text)?;
    let live = crate::providers::kube::get(c, obj).await;
    let running = match &live {
        Ok(Some(v)) => v["spec"]["version"].as_str().unwrap_or_default().to_string(),
        Ok(None) => return None,
        Err(e) => return Some(format!("{}: cannot read the running Karmada chart: {e}", r.address)),
    };
    (running != before).then(|| kb::rollback_refusal(&r.address.to_string(), &node, &path, &running, &before))
}

/// The identity of a Kubernetes object (enough to find it again), for the journal.
pub(super) fn kube_identity(r: &Resource) -> Option<serde_json::Value> {
    let (crate::desired::Desired::Kube(o) | crate::desired::Desired::Prune(o)) = &r.desired else { return None };
    let mut meta = serde_json::Map::new();
    meta.insert("name".into(), o["metadata"]["name"].clone());
    if let Some(ns) = o["metadata"].get("namespace") {
        meta.insert("namespace".into(), ns.clone());
    }
    Some(serde_json::json!({ "apiVersion": o["apiVersion"], "kind": o["kind"], "metadata": meta }))
}

/// A resource as the journal knows it, enough for its provider to put it back.
pub fn resource_from_prior(p: &Prior) -> Resource {
    use crate::desired::Desired;
    let desired = match p.provider {
        ProviderKind::File if p.sensitive => Desired::Secret(None),
        ProviderKind::File => Desired::File(String::new()),
        ProviderKind::Wireguard => Desired::Wireguard(String::new()),
        ProviderKind::Vyos => Desired::Vyos(vec![]),
        ProviderKind::Command => Desired::Command { probe: Sh::lit("true"), apply: Sh::lit("true") },
        ProviderKind::Kube => Desired::Kube(p.object.clone().unwrap_or(serde_json::Value::Null)),
    };
    Resource {
        address: p.address.clone(),
        site: None,
        provider: p.provider,
        summary: String::new(),
        sensitive: p.sensitive,
        desired,
        file: None,
    }
}
