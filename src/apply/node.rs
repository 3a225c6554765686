//! Moving one node of a running cluster from Flannel to Cilium (`desired::node_migration` says
//! why it works node by node, and what each stage does): the node's cluster cordons, drains,
//! watches and uncordons it; its SSH session reconfigures it. Each node is an instance of its own
//! (`A.2@<site>/<node>`), so it is one rollback point, and a node that fails stops the run
//! before the next one is touched.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use crate::apply::wait::{self, Budget, Readiness, WaitError};
use crate::desired::node_migration::{self as nm, NodeMigration, Stage};
use crate::desired::{Resource, Target};
use crate::providers::kube::{self as k, KubeAccess, KubeError};
use crate::providers::{self, Observed};
use crate::transport::shell;
use crate::transport::ssh::{Session, SshError};

const HOST_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{node}: {source}")]
    Kube { node: String, source: KubeError },
    #[error("{node}: {source}")]
    Ssh { node: String, source: SshError },
    #[error("{node}: {source}")]
    Wait { node: String, source: WaitError },
    #[error("{node}: {source}")]
    Read { node: String, source: crate::providers::ProviderError },
    #[error("{node}: {what} failed (exit {status}): {stderr}")]
    Host { node: String, what: &'static str, status: u32, stderr: String },
    #[error(
        "{node} is left cordoned and drained: its K3s runs without Flannel since the switch, and Flannel \
         cannot come back for one node (the server runs with flannel-backend: none). Fix what its \
         check found, then apply again to finish it (or `kubectl uncordon {node}` by hand)"
    )]
    LeftCordoned { node: String },
}

/// What a node's migration needs besides its SSH session.
pub struct Context<'a> {
    pub step: &'a str,
    pub accesses: &'a BTreeMap<Target, KubeAccess>,
    pub budget: Budget,
    pub progress: &'a UnboundedSender<String>,
}

impl Context<'_> {
    fn report(&self, node: &str, line: String) {
        let _ = self.progress.send(format!("{}: {node}: {line}", self.step));
    }
}

async fn cluster(accesses: &BTreeMap<Target, KubeAccess>, m: &NodeMigration) -> Result<Client, NodeError> {
    let kube = |source| NodeError::Kube { node: m.node.clone(), source };
    let access = accesses.get(&m.cluster).ok_or_else(|| kube(KubeError::NoAccess { target: m.cluster.to_string() }))?;
    k::client(&m.cluster, access).await.map_err(kube)
}

/// Cordons (`true`) or uncordons the node, as `kubectl cordon`/`uncordon` do (a merge patch of
/// `spec.unschedulable`; uncordon removes the field).
async fn cordon(client: &Client, node: &str, on: bool) -> Result<(), KubeError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let value = if on { json!(true) } else { Value::Null };
    let patch = Patch::Merge(json!({"spec": {"unschedulable": value}}));
    match nodes.patch(node, &PatchParams::default(), &patch).await.map_err(KubeError::from) {
        Err(e) if e.is_not_found() => Err(KubeError::NodeMissing { node: node.into() }),
        r => r.map(|_| ()),
    }
}

async fn pods_on(client: &Client, node: &str, labels: Option<&str>, ns: Option<&str>) -> Result<Vec<Value>, KubeError> {
    let api: Api<Pod> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    if let Some(l) = labels {
        lp = lp.labels(l);
    }
    let list = api.list(&lp).await?;
    Ok(list.items.iter().filter_map(|p| serde_json::to_value(p).ok()).collect())
}

/// One look of the drain: evicts what is evictable, Ready once nothing is left. An eviction the
/// API refuses for a disruption budget (429) is tried again on the next look, as kubectl does.
async fn drain_once(client: &Client, node: &str) -> Result<Readiness, KubeError> {
    let left: Vec<Value> =
        pods_on(client, node, None, None).await?.into_iter().filter(|p| nm::kept_by_drain(p).is_none()).collect();
    if left.is_empty() {
        return Ok(Readiness::Ready("drained".into()));
    }
    let mut waiting = Vec::new();
    for p in &left {
        let (ns, name) = (p["metadata"]["namespace"].as_str().unwrap_or("default"), p["metadata"]["name"].as_str());
        let Some(name) = name else { continue };
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        match api.evict(name, &EvictParams::default()).await.map_err(KubeError::from) {
            Ok(_) => waiting.push(format!("{ns}/{name} evicted")),
            Err(e) if e.is_not_found() => {}
            Err(e) if e.status() == Some(429) => waiting.push(format!("{ns}/{name}: {e}")),
            Err(e) => return Err(e),
        }
    }
    Ok(Readiness::Pending(format!("{} pod(s) on the node: {}", left.len(), waiting.join(", "))))
}

/// One look at the node after the switch: Ready, and a Cilium agent on it Ready.
async fn cilium_on_once(client: &Client, node: &str) -> Result<Readiness, KubeError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let n = serde_json::to_value(nodes.get(node).await?)?;
    if !nm::ready(&n) {
        return Ok(Readiness::Pending("the node is not Ready".into()));
    }
    let agents = pods_on(client, node, Some("k8s-app=cilium"), Some("kube-system")).await?;
    Ok(match agents.iter().find(|p| nm::ready(p)) {
        Some(p) => Readiness::Ready(format!("Cilium agent {} ready", p["metadata"]["name"].as_str().unwrap_or("?"))),
        None if agents.is_empty() => Readiness::Pending("no Cilium agent pod on the node".into()),
        None => Readiness::Pending(format!("the Cilium agent on the node is not Ready ({})", phase_of(&agents[0]))),
    })
}

fn phase_of(pod: &Value) -> String {
    let waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"].as_str();
    waiting.or(pod["status"]["phase"].as_str()).unwrap_or("no status").to_string()
}

async fn on_host(
    s: &Session,
    node: &str,
    what: &'static str,
    cmd: &shell::Sh,
    stdin: Option<&[u8]>,
) -> Result<(), NodeError> {
    let o = s
        .run(&shell::as_root(&s.endpoint.user, cmd), stdin, HOST_TIMEOUT)
        .await
        .map_err(|source| NodeError::Ssh { node: node.into(), source })?;
    if o.status != 0 {
        return Err(NodeError::Host { node: node.into(), what, status: o.status, stderr: o.stderr_str() });
    }
    Ok(())
}

/// The control-plane node's server config, written and K3s restarted.
async fn write_server_config(s: &Session, node: &str, config: &str) -> Result<(), NodeError> {
    let path = "/etc/rancher/k3s/config.yaml";
    on_host(s, node, "writing the K3s server config", &shell::write_file(path, 0o644), Some(config.as_bytes())).await?;
    match providers::restart_after(path) {
        Some(restart) => on_host(s, node, "restarting K3s", &restart, None).await,
        None => Ok(()),
    }
}

/// The whole migration of one node, in the order `desired::node_migration` gives; or one half
/// of a cutover.
pub async fn migrate(cx: &Context<'_>, s: &Session, m: &NodeMigration) -> Result<(), NodeError> {
    match m.stage {
        Stage::InPlace => in_place(cx, s, m).await,
        Stage::Leave => leave(cx, s, m).await,
        Stage::Join => join(cx, s, m).await,
    }
}

/// Cordon and drain in `m.cluster`.
pub(crate) async fn cordon_and_drain(cx: &Context<'_>, client: &Client, node: &str) -> Result<(), NodeError> {
    cordon(client, node, true).await.map_err(|source| NodeError::Kube { node: node.into(), source })?;
    cx.report(node, "cordoned".into());
    let report = |line: String| cx.report(node, line);
    let what = format!("the drain of {node}");
    let evidence = wait::poll(&what, &cx.budget, &report, || drain_once(client, node))
        .await
        .map_err(|source| NodeError::Wait { node: node.into(), source })?;
    cx.report(node, evidence);
    Ok(())
}

/// Ready with a Cilium agent, then uncordoned, then marked.
async fn ready_and_uncordon(
    cx: &Context<'_>,
    s: &Session,
    client: &Client,
    m: &NodeMigration,
) -> Result<(), NodeError> {
    let node = m.node.as_str();
    let report = |line: String| cx.report(node, line);
    let what = format!("Cilium on {node}");
    let evidence = wait::poll(&what, &cx.budget, &report, || cilium_on_once(client, node))
        .await
        .map_err(|source| NodeError::Wait { node: node.into(), source })?;
    cx.report(node, evidence);
    cordon(client, node, false).await.map_err(|source| NodeError::Kube { node: node.into(), source })?;
    on_host(s, node, "marking the node", &m.mark(), None).await?;
    cx.report(node, "uncordoned".into());
    Ok(())
}

async fn in_place(cx: &Context<'_>, s: &Session, m: &NodeMigration) -> Result<(), NodeError> {
    let node = m.node.as_str();
    let client = cluster(cx.accesses, m).await?;
    cordon_and_drain(cx, &client, node).await?;
    if let Some(config) = &m.server_config {
        write_server_config(s, node, config).await?;
    }
    on_host(s, node, "the switch from Flannel", &m.switch(), None).await?;
    cx.report(node, "K3s runs without Flannel; Flannel's interfaces and rules removed".into());
    ready_and_uncordon(cx, s, &client, m).await
}

/// The cutover's first half: out of the previous cluster (drained, its Node removed as `kubectl
/// delete node` does after a drain), the agent stopped, Flannel's leftovers removed.
async fn leave(cx: &Context<'_>, s: &Session, m: &NodeMigration) -> Result<(), NodeError> {
    let node = m.node.as_str();
    let kube = |source| NodeError::Kube { node: node.into(), source };
    let client = cluster(cx.accesses, m).await?;
    cordon_and_drain(cx, &client, node).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes.delete(node, &Default::default()).await.map_err(KubeError::from) {
        Err(e) if !e.is_not_found() => return Err(kube(e)),
        _ => {}
    }
    on_host(s, node, "leaving the previous cluster", &m.switch(), None).await?;
    on_host(s, node, "marking the node", &m.mark(), None).await?;
    cx.report(node, format!("removed from {}; K3s agent stopped; Flannel's leftovers removed", m.cluster));
    Ok(())
}

/// The cutover's second half, once the agent's new config has restarted it into the new cluster.
async fn join(cx: &Context<'_>, s: &Session, m: &NodeMigration) -> Result<(), NodeError> {
    let client = cluster(cx.accesses, m).await?;
    ready_and_uncordon(cx, s, &client, m).await
}

/// Puts a node back where its rollback point was, as far as that can be: the control-plane
/// node's previous server config (with Flannel) and K3s restarted, and the node uncordoned; an
/// agent uncordoned only while its switch never ran (after it, its old network cannot come back
/// alone: [`NodeError::LeftCordoned`]). A cutover's leave is undone by the files after it (the
/// old agent config, written back, restarts the agent into the previous cluster, where the
/// kubelet registers its Node again): here it is uncordoned there once back.
pub async fn revert(
    accesses: &BTreeMap<Target, KubeAccess>,
    s: &Session,
    r: &Resource,
    m: &NodeMigration,
    prior: &Observed,
) -> Result<(), NodeError> {
    let node = m.node.as_str();
    let prior_text = match prior {
        Observed::Present(t) => t.as_str(),
        Observed::Absent => "",
    };
    match m.stage {
        // The files before it are put back after it (the agent restarts into the previous
        // cluster); its Node in the new cluster would stay NotReady there: removed.
        Stage::Join => {
            let client = cluster(accesses, m).await?;
            let nodes: Api<Node> = Api::all(client);
            return match nodes.delete(node, &Default::default()).await.map_err(KubeError::from) {
                Err(e) if !e.is_not_found() => Err(NodeError::Kube { node: node.into(), source: e }),
                _ => Ok(()),
            };
        }
        Stage::Leave => {
            let _ = on_host(s, node, "unmarking the node", &shell::remove_file(m.mark_path()), None).await;
            return back_in_previous(accesses, m).await;
        }
        Stage::InPlace => {}
    }
    if m.server_config.is_some() {
        if let Some(config) = nm::config_of(prior_text) {
            write_server_config(s, node, &config).await?;
        }
    } else {
        let now = providers::read(s, r).await.map_err(|source| NodeError::Read { node: node.into(), source })?;
        let untouched = matches!(&now, Observed::Present(t) if nm::untouched(t));
        if !untouched {
            return Err(NodeError::LeftCordoned { node: node.into() });
        }
    }
    let client = cluster(accesses, m).await?;
    cordon(&client, node, false).await.map_err(|source| NodeError::Kube { node: node.into(), source })
}

/// After a cutover's leave is undone: the node registered again in the previous cluster (its
/// agent restarted with the old config), and schedulable there.
async fn back_in_previous(accesses: &BTreeMap<Target, KubeAccess>, m: &NodeMigration) -> Result<(), NodeError> {
    let node = m.node.as_str();
    let client = cluster(accesses, m).await?;
    let budget =
        &Budget { timeout: Duration::from_secs(120), interval: Duration::from_millis(500), stop: Default::default() };
    let nodes: Api<Node> = Api::all(client.clone());
    let back = wait::poll(&format!("{node} back in {}", m.cluster), budget, &|_| {}, || async {
        Ok::<_, KubeError>(match nodes.get_opt(node).await? {
            Some(_) => Readiness::Ready("registered".into()),
            None => Readiness::Pending("not registered again yet".into()),
        })
    })
    .await;
    if let Err(source) = back {
        return Err(NodeError::Wait { node: node.into(), source });
    }
    cordon(&client, node, false).await.map_err(|source| NodeError::Kube { node: node.into(), source })
}
