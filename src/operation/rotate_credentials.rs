//! `fabric rotate credentials`: renews the credentials fabric copied or generated, planned and
//! shown first (what is renewed, never a value), then applied like a step: journaled (without
//! secrets), the old data of each Secret kept beside it in the cluster as the rollback point
//! (`providers::kept_secret`), reverted on failure, rolled back by `fabric rollback RUN-ID`.
//!
//! What is renewed:
//! - **Copied Secrets** (Karmada's member credentials, ArgoCD's cluster secret, the
//!   estimators' and MultiKueue's worker kubeconfigs, the mesh CA's copies): copied again from
//!   their source as it is now (a source token renewed since is taken up).
//! - **The Cluster Mesh CA** (`kube-system/cilium-ca` of the first site, which fabric
//!   generated), with an overlap, one stage per run (`providers::ca_bundle` says which keys
//!   decide what, from cilium's sources): 1. a new CA is generated (`cilium-ca-next`) and added
//!   beside the old in the trust bundle (`ca.crt`) of the certificates cilium-certgen issued in
//!   every cluster; 2. once the agents have the new bundle, `cilium-ca` becomes the new CA
//!   (its copies follow) and those certificates are issued again by it; 3. the old CA is
//!   removed from the bundles and `cilium-ca-next` deleted.
//!
//! - **The K3s join token** of each cluster fabric installed (its servers have a K3s install
//!   from the air-gap bundle), only with `--k3s-token` (it restarts the other servers): a new
//!   token generated on the first server and `k3s token rotate` run there, the other servers
//!   restarted one at a time (Ready between), the agents' token files written again so that
//!   their next restart joins with it (`apply::k3s_token` cites K3s for each of these). Each
//!   host keeps the old token beside the file (0600), the rollback point.
//!
//! What is refused, with why (docs/runbook.md, "Rotating credentials"): the join token of a
//! cluster fabric did not install (its servers are not fabric's to restart).

use crate::apply::Failed;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};

use super::{OpError, Workspace};
use crate::addr::Target;
use crate::apply::journal::{self, Entry, Journal, Prior};
use crate::apply::{Progress, k3s_token, lease};
use crate::desired::{Desired, ProviderKind, Resource};
use crate::live::observe::Targets;
use crate::live::served_cert::{MESH_CA_NAMESPACE, MESH_CA_SECRET};
use crate::providers::ca_bundle::{self, ISSUED_SECRETS};
use crate::providers::kept_secret::{self, secret_id};
use crate::providers::kube::{self as k, KubeError};
use crate::providers::secrets::{self, CopySource};
use crate::providers::{Observed, SENSITIVE};

/// The new mesh CA while a rotation is under way (in the CA's cluster, beside `cilium-ca`).
pub const NEXT_CA_SECRET: &str = "cilium-ca-next";
/// The step the mesh CA belongs to (its journal entries and Lease).
const MESH_STEP: &str = "B.2";
/// The step that installs K3s and copies the join token to the agents.
const K3S_STEP: &str = "A.1";

/// How a copied Secret stands against its source now.
#[derive(Debug, Clone, PartialEq)]
pub enum CopyState {
    /// The copy differs from what its source gives now: it is renewed.
    Differs,
    /// It holds what its source gives now: nothing to renew.
    Same,
    /// The copy does not exist: `fabric apply` makes it first.
    DestAbsent,
    /// Its source does not exist (or lacks a key): nothing to copy from.
    SourceAbsent(String),
}

/// Where the mesh CA's rotation stands, and so what this run does.
#[derive(Debug, Clone, PartialEq)]
pub enum MeshStage {
    /// Stage 1: the new CA (generated now when `generate`) added beside the old in every trust
    /// bundle.
    Add { generate: bool },
    /// Stage 2: `cilium-ca` becomes the new CA; the issued certificates are issued again by it.
    Switch,
    /// Stage 3: the old CA removed from the trust bundles; `cilium-ca-next` deleted.
    Finish,
    /// No `cilium-ca` yet: B.2 generates it.
    NotMade,
}

/// One piece of the rotation.
#[derive(Debug, Clone)]
pub enum Item {
    /// A Secret fabric copies, copied again from its source.
    Recopy { step: String, resource: Box<Resource>, from: CopySource, state: CopyState },
    /// The mesh CA: this run's stage, the CA's cluster and its `cilium-ca` as fabric applies it
    /// (labels, annotations), the certificates cilium-certgen issued (cluster, Secret) and the
    /// other clusters' copies of `cilium-ca`.
    MeshCa { stage: MeshStage, ca: Target, ca_obj: Value, issued: Vec<(Target, String)>, copies: Vec<Resource> },
    /// The K3s join token of `site`'s cluster: rotated on `first` (a server), the other
    /// `servers` restarted, the `agents`' token files written again; only when `renew`
    /// (`--k3s-token`).
    K3sToken { site: String, first: Target, servers: Vec<Target>, agents: Vec<Target>, renew: bool },
    /// What is not renewed, and why.
    Refused { what: String, why: String },
}

impl Item {
    /// Whether applying the item changes something.
    pub fn changes(&self) -> bool {
        match self {
            Item::Recopy { state, .. } => *state == CopyState::Differs,
            Item::MeshCa { stage, .. } => *stage != MeshStage::NotMade,
            Item::K3sToken { renew, .. } => *renew,
            Item::Refused { .. } => false,
        }
    }

    /// The step whose Lease and journal entry the item's changes belong to.
    fn step(&self) -> &str {
        match self {
            Item::Recopy { step, .. } => step,
            Item::MeshCa { .. } => MESH_STEP,
            Item::K3sToken { .. } => K3S_STEP,
            Item::Refused { .. } => "",
        }
    }
}

/// What `fabric rotate credentials` would renew.
#[derive(Debug, Clone, Default)]
pub struct Rotation {
    pub items: Vec<Item>,
}

impl Rotation {
    pub fn has_changes(&self) -> bool {
        self.items.iter().any(Item::changes)
    }
}

/// The plan's lines: what is renewed, what is not and why. Names and states only.
pub fn lines(r: &Rotation) -> Vec<String> {
    let mut out = Vec::new();
    for item in &r.items {
        match item {
            Item::Recopy { step, resource, from, state } => {
                let (mark, what) = match state {
                    CopyState::Differs => ("~", "copied again: it differs from its source now".to_string()),
                    CopyState::Same => ("=", "holds what its source gives now: nothing to renew".to_string()),
                    CopyState::DestAbsent => ("!", "does not exist yet: `fabric apply` makes it".to_string()),
                    CopyState::SourceAbsent(why) => ("!", format!("not renewed: {why}")),
                };
                out.push(format!("  {mark} {} ({step}), from {}: {what}", resource.address, from.address()));
            }
            Item::MeshCa { stage, issued, copies, .. } => {
                let ca = format!("{MESH_CA_NAMESPACE}/{MESH_CA_SECRET}");
                let n = issued.len();
                let line = match stage {
                    MeshStage::Add { generate: true } => format!(
                        "~ the Cluster Mesh CA ({MESH_STEP}), stage 1 of 3: a new CA is generated ({MESH_CA_NAMESPACE}/{NEXT_CA_SECRET}) and added beside the old in the trust bundle (ca.crt) of {n} certificate Secret(s) cilium-certgen issued"
                    ),
                    MeshStage::Add { generate: false } => format!(
                        "~ the Cluster Mesh CA ({MESH_STEP}), stage 1 of 3 again: the new CA ({MESH_CA_NAMESPACE}/{NEXT_CA_SECRET}) is added back beside the old in the trust bundle of {n} certificate Secret(s) (cilium-certgen issued some again since)"
                    ),
                    MeshStage::Switch => format!(
                        "~ the Cluster Mesh CA ({MESH_STEP}), stage 2 of 3: {ca} becomes the new CA ({} copie(s) follow) and {n} certificate Secret(s) are issued again by it, their bundle trusting old and new",
                        copies.len()
                    ),
                    MeshStage::Finish => format!(
                        "~ the Cluster Mesh CA ({MESH_STEP}), stage 3 of 3: the old CA is removed from the trust bundle of {n} certificate Secret(s); {MESH_CA_NAMESPACE}/{NEXT_CA_SECRET} is deleted"
                    ),
                    MeshStage::NotMade => format!("= the Cluster Mesh CA ({MESH_STEP}): no {ca} yet: B.2 generates it"),
                };
                out.push(format!("  {line}"));
                for (target, name) in issued {
                    out.push(format!("      {target}/{MESH_CA_NAMESPACE}/Secret/{name}"));
                }
            }
            Item::K3sToken { site, first, servers, agents, renew: true } => {
                out.push(format!(
                    "  ~ the K3s join token of `{site}` ({K3S_STEP}): a new one generated on {first} and `k3s token rotate` run there; {} other server(s) restarted one at a time, Ready between; {} agent token file(s) written again (the agents join with it when they restart); the old token kept on each host",
                    servers.len(),
                    agents.len()
                ));
                for t in servers.iter().chain(agents) {
                    out.push(format!("      {t}"));
                }
            }
            Item::K3sToken { site, .. } => out.push(format!(
                "  = the K3s join token of `{site}` ({K3S_STEP}): not renewed without --k3s-token (it restarts the other servers)"
            )),
            Item::Refused { what, why } => out.push(format!("  ! {what}: refused: {why}")),
        }
    }
    out
}

/// The site `--site` names keeps a copy made at that site, or copied from its cluster.
fn at_site(r: &Resource, from: &CopySource, site: Option<&str>) -> bool {
    site.is_none_or(|s| r.site.as_deref() == Some(s) || from.target == Target::cluster(s))
}

/// Whether `from` is the mesh CA (whose copies are renewed with it).
fn is_mesh_ca(from: &CopySource) -> bool {
    from.namespace == MESH_CA_NAMESPACE && from.name == MESH_CA_SECRET
}

/// The Secret `(namespace, name)` of a Kubernetes resource.
fn ns_name(r: &Resource) -> (String, String) {
    let o = r.kube_object().cloned().unwrap_or(Value::Null);
    let m = &o["metadata"];
    (m["namespace"].as_str().unwrap_or("default").to_string(), m["name"].as_str().unwrap_or_default().to_string())
}

/// What the rotation reads, from every instance's desired state.
#[derive(Default)]
struct Inventory {
    /// Copied Secrets at the selected site, with their step and source.
    copies: Vec<(String, Resource, CopySource)>,
    /// The mesh CA's copies (every site but the first).
    mesh_copies: Vec<Resource>,
    /// The mesh CA as fabric applies it (in the first site's cluster).
    mesh_ca: Option<Value>,
    /// The sites whose agents copy a K3s join token: the server they copy it from, the agents.
    token_sites: BTreeMap<String, (Option<Target>, Vec<Target>)>,
    /// The hosts where fabric installs a K3s server.
    installed_servers: BTreeSet<Target>,
}

fn inventory(ws: &Workspace, site: Option<&str>) -> Inventory {
    let mut inv = Inventory::default();
    for &n in &ws.graph.order {
        let key = ws.instance(n).key();
        for r in ws.desired.get(&n).map(|p| p.resources.as_slice()).unwrap_or_default() {
            if let (Desired::Secret(Some(from)), Some(s)) = (&r.desired, &r.site)
                && site.is_none_or(|want| want == s)
            {
                let entry = inv.token_sites.entry(s.clone()).or_default();
                entry.0 = Some(from.target.clone());
                entry.1.push(r.target().clone());
            }
            if let Desired::K3sInstall(k) = &r.desired
                && k.role == crate::desired::k3s_install::Role::Server
            {
                inv.installed_servers.insert(r.target().clone());
                // A cluster without agents has a join token too (for servers joining later).
                if let Some(s) = r.site.as_ref().filter(|s| site.is_none_or(|want| want == *s)) {
                    inv.token_sites.entry(s.clone()).or_default();
                }
            }
            let Some(obj) = r.kube_object().filter(|_| r.sensitive) else { continue };
            if secrets::generated(obj).is_some() && ns_name(r) == (MESH_CA_NAMESPACE.into(), MESH_CA_SECRET.into()) {
                inv.mesh_ca = Some(obj.clone());
            }
            let Some(from) = secrets::copy_source(obj) else { continue };
            if is_mesh_ca(&from) {
                inv.mesh_copies.push(r.clone());
            } else if at_site(r, &from, site) {
                inv.copies.push((key.clone(), r.clone(), from));
            }
        }
    }
    inv
}

/// Clients of the Kubernetes targets, made once.
#[derive(Default)]
struct Clients(BTreeMap<Target, kube::Client>);

impl Clients {
    async fn get(&mut self, targets: &Targets, target: &Target) -> Result<kube::Client, KubeError> {
        if let Some(c) = self.0.get(target) {
            return Ok(c.clone());
        }
        let access = targets.kube.get(target).ok_or_else(|| KubeError::NoAccess { target: target.to_string() })?;
        let c = k::client(target, access).await?;
        self.0.insert(target.clone(), c.clone());
        Ok(c)
    }
}

/// Reads what the rotation needs (in memory; nothing of it is kept) and plans it. A target
/// that cannot be read stops it, naming the target and why.
pub fn read(
    ws: &Workspace,
    site: Option<&str>,
    k3s_token: bool,
    targets: &Targets,
    rt: &tokio::runtime::Runtime,
) -> Result<Rotation, OpError> {
    ws.live_allowed("it holds production addresses: rotate the credentials of a topology of your own")?;
    if let Some(s) = site.filter(|s| !ws.topology().sites.iter().any(|x| x.name == *s)) {
        return Err(OpError::Selection(crate::plan::select::SelectError::Unknown {
            what: "site",
            name: s.to_string(),
            hint: String::new(),
        }));
    }
    rt.block_on(read_async(ws, site, k3s_token, targets))
}

async fn read_async(
    ws: &Workspace,
    site: Option<&str>,
    k3s_token: bool,
    targets: &Targets,
) -> Result<Rotation, OpError> {
    let inv = inventory(ws, site);
    let mut clients = Clients::default();
    let mut unread = Vec::new();
    let mut items = Vec::new();
    match site {
        None => match mesh_item(ws, targets, &mut clients, inv.mesh_ca, inv.mesh_copies).await {
            Ok(item) => items.extend(item),
            Err(e) => unread.push(e.0),
        },
        Some(_) => items.push(Item::Refused {
            what: format!("the Cluster Mesh CA ({MESH_STEP})"),
            why: "it is shared by every site: run `fabric rotate credentials` without --site".into(),
        }),
    }
    for (step, resource, from) in inv.copies {
        match copy_state(targets, &mut clients, &resource, &from).await {
            Ok(state) => items.push(Item::Recopy { step, resource: Box::new(resource), from, state }),
            Err(e) => unread.push(e.0),
        }
    }
    for (s, (first, agents)) in inv.token_sites {
        items.push(token_item(ws, &inv.installed_servers, s, first, agents, k3s_token));
    }
    if !unread.is_empty() {
        return Err(OpError::Unreachable(unread));
    }
    Ok(Rotation { items })
}

/// The join token of site `s`: rotated when fabric installed its servers (the one the agents
/// copy from first), refused otherwise.
fn token_item(
    ws: &Workspace,
    installed: &BTreeSet<Target>,
    s: String,
    first: Option<Target>,
    agents: Vec<Target>,
    renew: bool,
) -> Item {
    // The server the agents copy from (the site's first control-plane node with SSH).
    let nodes: Vec<&crate::topology::model::Node> = ws
        .topology()
        .sites
        .iter()
        .filter(|x| x.name == s)
        .flat_map(|x| &x.cluster.nodes)
        .filter(|n| n.role == crate::topology::model::NodeRole::ControlPlane && n.ssh.is_some())
        .collect();
    let first = first.or_else(|| nodes.first().map(|n| Target::host(&n.name)));
    let Some(first) = first.filter(|f| installed.contains(f)) else {
        return Item::Refused {
            what: format!("the K3s join token of `{s}`'s agents"),
            why: "fabric did not install this cluster's K3s servers (no k3s_airgap, or an existing cluster): `k3s token rotate` on a server and every other server restarted (k3s-io/k3s docs/adrs/server-token-rotation.md) are its operator's; then replace each agent's /etc/rancher/k3s/token (docs/runbook.md, \"Rotating credentials\")".into(),
        };
    };
    let servers =
        nodes.iter().map(|n| Target::host(&n.name)).filter(|t| *t != first && installed.contains(t)).collect();
    Item::K3sToken { site: s, first, servers, agents, renew }
}

/// How the copy `r` stands against its source now (both read in memory, compared, dropped).
async fn copy_state(
    targets: &Targets,
    clients: &mut Clients,
    r: &Resource,
    from: &CopySource,
) -> Result<CopyState, Failed> {
    let (ns, name) = ns_name(r);
    let dest = clients.get(targets, r.target()).await.map_err(|e| format!("{}: {e}", r.target()))?;
    let source = clients.get(targets, &from.target).await.map_err(|e| format!("{}: {e}", from.target))?;
    let have = k::secret_data(&dest, &ns, &name).await.map_err(|e| format!("{}: {e}", r.address))?;
    let src =
        k::secret_data(&source, &from.namespace, &from.name).await.map_err(|e| format!("{}: {e}", from.address()))?;
    Ok(match (have, src) {
        (None, _) => CopyState::DestAbsent,
        (_, None) => CopyState::SourceAbsent(format!("the source Secret {} does not exist", from.address())),
        (Some(have), Some(src)) => match secrets::copied_data(&src, from) {
            Err(e) => CopyState::SourceAbsent(e.to_string()),
            Ok(want) if want.iter().all(|(k, v)| have.get(k) == Some(v)) => CopyState::Same,
            Ok(_) => CopyState::Differs,
        },
    })
}

/// A Secret value as text (PEM), or "" when missing or not base64 text.
fn text_of(data: &Map<String, Value>, key: &str) -> String {
    let compact: String = data.get(key).and_then(Value::as_str).unwrap_or_default().split_whitespace().collect();
    B64.decode(compact).ok().and_then(|b| String::from_utf8(b).ok()).unwrap_or_default()
}

/// The mesh CA's stage, from the CA's cluster (`cilium-ca`, `cilium-ca-next`) and the issued
/// certificates' trust bundles in every cluster.
async fn mesh_item(
    ws: &Workspace,
    targets: &Targets,
    clients: &mut Clients,
    ca_obj: Option<Value>,
    copies: Vec<Resource>,
) -> Result<Option<Item>, Failed> {
    let Some(ca_target) = super::mesh_ca::ca_cluster(ws.topology()) else { return Ok(None) };
    let at = |t: &Target, e: KubeError| format!("{t}: {e}");
    let ca_client = clients.get(targets, &ca_target).await.map_err(|e| at(&ca_target, e))?;
    let current = k::secret_data(&ca_client, MESH_CA_NAMESPACE, MESH_CA_SECRET).await.map_err(|e| at(&ca_target, e))?;
    let next = k::secret_data(&ca_client, MESH_CA_NAMESPACE, NEXT_CA_SECRET).await.map_err(|e| at(&ca_target, e))?;
    let mut issued = Vec::new();
    let mut bundles_hold_next = true;
    let next_crt = next.as_ref().map(|d| text_of(d, "ca.crt"));
    for s in &ws.topology().sites {
        let target = Target::cluster(&s.name);
        let client = clients.get(targets, &target).await.map_err(|e| at(&target, e))?;
        for name in ISSUED_SECRETS {
            let Some(data) = k::secret_data(&client, MESH_CA_NAMESPACE, name).await.map_err(|e| at(&target, e))? else {
                continue;
            };
            if let Some(next) = &next_crt {
                bundles_hold_next &= ca_bundle::holds(&text_of(&data, "ca.crt"), next);
            }
            issued.push((target.clone(), name.to_string()));
        }
    }
    let stage = match (current, next_crt) {
        (None, _) => MeshStage::NotMade,
        (Some(_), None) => MeshStage::Add { generate: true },
        (Some(cur), Some(next)) if ca_bundle::holds(&text_of(&cur, "ca.crt"), &next) => MeshStage::Finish,
        (Some(_), Some(_)) if !bundles_hold_next => MeshStage::Add { generate: false },
        (Some(_), Some(_)) => MeshStage::Switch,
    };
    let ca_obj = ca_obj.unwrap_or_else(|| bare(MESH_CA_NAMESPACE, MESH_CA_SECRET, "Opaque"));
    Ok(Some(Item::MeshCa { stage, ca: ca_target, ca_obj, issued, copies }))
}

/// How to rotate.
#[derive(Debug, Clone)]
pub struct Options {
    pub state_dir: PathBuf,
}

/// A finished rotation.
pub struct Rotated {
    pub run: String,
    /// The steps whose credentials were renewed.
    pub renewed: Vec<String>,
    pub journal: PathBuf,
}

/// A change made by this run, to put back on failure: the Secret at `target` and its prior.
struct Made {
    target: Target,
    ns: String,
    name: String,
    prior: Observed,
}

impl Made {
    fn prior(&self) -> Prior {
        let id = secret_id(&self.ns, &self.name);
        Prior {
            address: self.target.at(format!("{}/Secret/{}", self.ns, self.name)),
            target: self.target.clone(),
            provider: ProviderKind::Kube,
            sensitive: true,
            prior: self.prior.clone(),
            object: Some(id),
        }
    }
}

/// What one step of the rotation changes, in order: each Secret's prior is journaled before
/// anything is written (a prior Secret is kept in the cluster first).
struct Work<'a> {
    run: &'a str,
    targets: &'a Targets,
    clients: Clients,
    progress: Progress<'a>,
    /// SSH sessions to the hosts of the K3s join token's rotation.
    pool: crate::live::pool::Pool,
    /// The hosts this step changed for the join token, in order: (host, what `k3s_token::undo`
    /// puts back).
    hosts_done: Vec<(Target, &'static str)>,
}

/// Journals the rotation and applies it, step by step; a failed step is put back (its Secrets
/// restored from what the run kept) and stops the run.
pub fn run(
    ws: &Workspace,
    rotation: Rotation,
    opts: &Options,
    targets: &Targets,
    progress: Progress<'_>,
    rt: &tokio::runtime::Runtime,
) -> Result<Rotated, OpError> {
    let run = journal::new_run_id();
    let mut j = Journal::create(&opts.state_dir, &run)
        .map_err(|source| OpError::JournalCreate { dir: opts.state_dir.display().to_string(), source })?;
    j.record(&Entry::Start {
        run: run.clone(),
        fabric: ws.topology().name.clone(),
        topology_digest: ws.digest.clone(),
        user: std::env::var("USER").unwrap_or_default(),
    })?;
    // One journal step per step of the catalog, in the rotation's order (the mesh CA first).
    let mut steps: Vec<(String, Vec<Item>)> = Vec::new();
    for item in rotation.items.into_iter().filter(Item::changes) {
        match steps.iter_mut().find(|(s, _)| s == item.step()) {
            Some((_, items)) => items.push(item),
            None => steps.push((item.step().to_string(), vec![item])),
        }
    }
    let guards: BTreeSet<Target> = steps.iter().map(|(s, _)| lease::guard_of(ws.topology(), s)).collect();
    let result: Result<Vec<String>, OpError> = rt.block_on(async {
        let mut held = lease::take(targets, &guards, &crate::apply::holder(&run), lease::Times::default(), progress)
            .await
            .map_err(|error| OpError::Apply { run: run.clone(), error: Box::new(error) })?;
        let mut work = Work {
            run: &run,
            targets,
            clients: Clients::default(),
            progress,
            pool: crate::live::pool::Pool::default(),
            hosts_done: Vec::new(),
        };
        let mut renewed = Vec::new();
        let mut outcome = Ok(());
        for (step, items) in &steps {
            match rotate_step(&mut work, &mut j, step, items).await {
                Ok(()) => renewed.push(step.clone()),
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        work.pool.close().await;
        let ok = outcome.is_ok();
        let ended = j.record(&Entry::End { run: run.clone(), ok });
        if let Ok(text) = std::fs::read_to_string(&j.path) {
            for f in held.share_journal(&run, &text).await {
                progress(&format!("warning: the run's journal is not shared in {f}"));
            }
        }
        held.release().await;
        outcome?;
        ended?;
        Ok(renewed)
    });
    let renewed = result?;
    Ok(Rotated { run, renewed, journal: j.path.clone() })
}

/// One step: its Secrets' priors journaled (by presence), then each item renewed; on failure
/// what was changed is put back and the step journaled as reverted.
async fn rotate_step(work: &mut Work<'_>, j: &mut Journal, step: &str, items: &[Item]) -> Result<(), OpError> {
    let run = work.run.to_string();
    let mut made: Vec<Made> = Vec::new();
    let mut failure = None;
    // The journal's rollback point comes first: the Secrets this step will write, by presence.
    let planned = match planned_secrets(work, items).await {
        Ok(p) => p,
        Err(e) => return Err(OpError::Rotate { run, reason: format!("{step}: {e}") }),
    };
    let mut priors: Vec<Prior> = planned.iter().map(Made::prior).collect();
    priors.extend(items.iter().flat_map(token_priors));
    j.record(&Entry::Begin { run: run.clone(), step: step.into(), priors })?;
    work.hosts_done.clear();
    for item in items {
        if let Err(e) = renew(work, item, &mut made).await {
            failure = Some(e);
            break;
        }
    }
    let Some(why) = failure else {
        j.record(&Entry::Done { run: run.clone(), step: step.into() })?;
        (work.progress)(&format!("{step}: renewed"));
        drop_older(work, &made).await;
        return Ok(());
    };
    let mut left = undo_hosts(work).await;
    left.extend(put_back(work, &made).await);
    let reason =
        if left.is_empty() { why.clone() } else { Failed::from(format!("{why}; not put back: {}", left.join("; "))) };
    let entry = if left.is_empty() {
        Entry::Reverted { run: run.clone(), step: step.into(), reason: reason.0.clone() }
    } else {
        Entry::Failed { run: run.clone(), step: step.into(), reason: reason.0.clone() }
    };
    j.record(&entry)?;
    let state = if left.is_empty() { "was reverted" } else { "could not be put back completely" };
    Err(OpError::Rotate { run, reason: format!("{step}: {reason} ({step} {state})") })
}

/// Every Secret the items write, with its state now (present or absent).
async fn planned_secrets(work: &mut Work<'_>, items: &[Item]) -> Result<Vec<Made>, Failed> {
    let mut out = Vec::new();
    for (target, ns, name) in items.iter().flat_map(writes) {
        let client = work.clients.get(work.targets, &target).await.map_err(|e| format!("{target}: {e}"))?;
        let present = k::get(&client, &secret_id(&ns, &name)).await.map_err(|e| format!("{target}: {e}"))?.is_some();
        let prior = if present { Observed::Present(SENSITIVE.into()) } else { Observed::Absent };
        out.push(Made { target, ns, name, prior });
    }
    Ok(out)
}

/// The Secrets an item writes: (cluster, namespace, name).
fn writes(item: &Item) -> Vec<(Target, String, String)> {
    let kube_system = || MESH_CA_NAMESPACE.to_string();
    match item {
        Item::Recopy { resource, .. } => {
            let (ns, name) = ns_name(resource);
            vec![(resource.target().clone(), ns, name)]
        }
        Item::MeshCa { stage, ca, issued, copies, .. } => {
            let ca = |name: &str| (ca.clone(), kube_system(), name.to_string());
            let mut out: Vec<(Target, String, String)> = Vec::new();
            match stage {
                MeshStage::Add { .. } | MeshStage::Finish => out.push(ca(NEXT_CA_SECRET)),
                MeshStage::Switch => {
                    out.push(ca(MESH_CA_SECRET));
                    out.extend(copies.iter().map(|r| (r.target().clone(), kube_system(), MESH_CA_SECRET.to_string())));
                }
                MeshStage::NotMade => return vec![],
            }
            out.extend(issued.iter().map(|(t, n)| (t.clone(), kube_system(), n.clone())));
            out
        }
        Item::K3sToken { .. } | Item::Refused { .. } => vec![],
    }
}

/// The journal's rollback point of the join token's rotation: the other servers (restarted
/// again), the first server (rotated back to the token it kept), the agents (their files moved
/// back), in the order they change; a rollback goes newest first. No value: the old tokens
/// stay on the hosts.
fn token_priors(item: &Item) -> Vec<Prior> {
    let Item::K3sToken { first, servers, agents, renew: true, .. } = item else { return vec![] };
    let prior = |t: &Target, command: &str| Prior {
        address: t.at(format!("command:{command}")),
        target: t.clone(),
        provider: ProviderKind::Command,
        sensitive: true,
        prior: Observed::Present(SENSITIVE.into()),
        object: None,
    };
    let mut out: Vec<Prior> = servers.iter().map(|t| prior(t, k3s_token::RESTARTED)).collect();
    out.push(prior(first, k3s_token::ROTATED));
    out.extend(agents.iter().map(|t| prior(t, k3s_token::AGENT_FILE)));
    out
}

/// Puts back the hosts the join token's rotation changed, newest first; what could not be.
async fn undo_hosts(work: &mut Work<'_>) -> Vec<String> {
    let mut left = Vec::new();
    // Newest first, but the other servers restart only once the first is rotated back.
    let (restarted, rest): (Vec<_>, Vec<_>) =
        std::mem::take(&mut work.hosts_done).into_iter().partition(|(_, c)| *c == k3s_token::RESTARTED);
    for (target, command) in rest.into_iter().rev().chain(restarted) {
        let Some(cmd) = k3s_token::undo(command, work.run) else { continue };
        let r = match work.pool.get(work.targets, &target).await {
            Ok(s) => k3s_token::run_root(&s, &cmd, None).await.map(drop),
            Err(e) => (Err(format!("{target}: {e}"))).map_err(Failed::from),
        };
        match r {
            Ok(()) => (work.progress)(&format!("{target}: K3s join token put back")),
            Err(e) => left.push(e.0),
        }
    }
    left
}

/// Once a step is done: deletes what earlier rotations kept of its Secrets (the data they renewed
/// has been in use since). Not before: a step put back needs them for those runs' rollback. A
/// deletion that fails is a warning (the kept Secret stays; the next rotation deletes it).
async fn drop_older(work: &mut Work<'_>, made: &[Made]) {
    for m in made {
        let dropped = match work.clients.get(work.targets, &m.target).await {
            Ok(client) => kept_secret::drop_older(&client, &m.ns, &m.name, work.run).await,
            Err(e) => Err(e),
        };
        match dropped {
            Ok(names) => {
                for older in names {
                    (work.progress)(&format!(
                        "{}/{}/Secret/{older}: deleted (kept by an earlier rotation)",
                        m.target, m.ns
                    ));
                }
            }
            Err(e) => (work.progress)(&format!(
                "warning: {}/{}/Secret/{}: what earlier rotations kept of it is not deleted: {e}",
                m.target, m.ns, m.name
            )),
        }
    }
}

/// Puts the Secrets `made` back (newest first) from what the run kept; what could not be.
async fn put_back(work: &mut Work<'_>, made: &[Made]) -> Vec<String> {
    let mut left = Vec::new();
    for m in made.iter().rev() {
        let r = async {
            let client = work.clients.get(work.targets, &m.target).await?;
            match m.prior {
                Observed::Absent => k::delete(&client, &secret_id(&m.ns, &m.name)).await,
                Observed::Present(_) => kept_secret::restore(&client, &m.ns, &m.name, work.run).await.map(drop),
            }
        };
        if let Err(e) = r.await {
            left.push(format!("{}/{}/Secret/{}: {e}", m.target, m.ns, m.name));
        }
    }
    left
}

/// Writes `data` into the Secret `ns/name` at `target` (as `obj` when given: a desired object
/// with fabric's labels and annotations), keeping what was there first. Records it in `made`.
async fn write_secret(
    work: &mut Work<'_>,
    made: &mut Vec<Made>,
    target: &Target,
    obj: Value,
    data: Map<String, Value>,
) -> Result<(), Failed> {
    let (ns, name) = (
        obj["metadata"]["namespace"].as_str().unwrap_or("default").to_string(),
        obj["metadata"]["name"].as_str().unwrap_or_default().to_string(),
    );
    let client = work.clients.get(work.targets, target).await.map_err(|e| format!("{target}: {e}"))?;
    let kept = kept_secret::keep(&client, &ns, &name, work.run).await.map_err(|e| format!("{target}: {e}"))?;
    made.push(Made {
        target: target.clone(),
        ns: ns.clone(),
        name: name.clone(),
        prior: if kept.is_some() { Observed::Present(SENSITIVE.into()) } else { Observed::Absent },
    });
    let mut obj = obj;
    obj["data"] = Value::Object(data);
    k::apply(&client, &obj, true).await.map_err(|e| format!("{target}/{ns}/Secret/{name}: {e}"))?;
    match kept {
        Some(kept) => (work.progress)(&format!(
            "{target}/{ns}/Secret/{name}: renewed; the old data kept in Secret {ns}/{kept} until the next rotation"
        )),
        None => (work.progress)(&format!("{target}/{ns}/Secret/{name}: created")),
    }
    Ok(())
}

/// The live `data` of the Secret `ns/name` at `target` (empty when absent).
async fn data_of(work: &mut Work<'_>, target: &Target, ns: &str, name: &str) -> Result<Map<String, Value>, Failed> {
    let client = work.clients.get(work.targets, target).await.map_err(|e| format!("{target}: {e}"))?;
    Ok(k::secret_data(&client, ns, name).await.map_err(|e| format!("{target}: {e}"))?.unwrap_or_default())
}

/// A Secret's object without data: its identity and type.
fn bare(ns: &str, name: &str, ty: &str) -> Value {
    let mut o = secret_id(ns, name);
    o["type"] = json!(ty);
    o
}

fn b64(text: &str) -> Value {
    Value::from(B64.encode(text))
}

/// Renews one item.
async fn renew(work: &mut Work<'_>, item: &Item, made: &mut Vec<Made>) -> Result<(), Failed> {
    match item {
        Item::Recopy { resource, from, .. } => recopy(work, made, resource, from).await,
        Item::MeshCa { stage, ca, ca_obj, issued, copies } => {
            mesh(work, made, stage, (ca, ca_obj), issued, copies).await
        }
        Item::K3sToken { site, first, servers, agents, renew: true } => {
            join_token(work, site, first, servers, agents).await
        }
        Item::K3sToken { .. } | Item::Refused { .. } => Ok(()),
    }
}

/// The join token of `site`: rotated on `first`, the other servers restarted one at a time
/// (each Ready before the next), the agents' files written from the first server's token file
/// (held in memory only, never shown). Each host is recorded in `hosts_done` before it changes.
async fn join_token(
    work: &mut Work<'_>,
    site: &str,
    first: &Target,
    servers: &[Target],
    agents: &[Target],
) -> Result<(), Failed> {
    let s = session(work, first).await?;
    work.hosts_done.push((first.clone(), k3s_token::ROTATED));
    k3s_token::run_root(&s, &k3s_token::rotate(work.run), None).await?;
    (work.progress)(&format!("{first}: K3s join token rotated (the old one kept beside it)"));
    let token = k3s_token::read_server_token(&s).await?;
    for server in servers {
        let s = session(work, server).await?;
        work.hosts_done.push((server.clone(), k3s_token::RESTARTED));
        k3s_token::run_root(&s, &k3s_token::restart_server(), None).await?;
        server_ready(work, site, server).await?;
    }
    for agent in agents {
        let s = session(work, agent).await?;
        work.hosts_done.push((agent.clone(), k3s_token::AGENT_FILE));
        k3s_token::run_root(&s, &k3s_token::write_agent(work.run), Some(&token)).await?;
        (work.progress)(&format!(
            "{agent}: {} holds the new join token (the agent joins with it when it restarts)",
            k3s_token::AGENT_TOKEN
        ));
    }
    Ok(())
}

/// A session to the host `t`.
async fn session(w: &Work<'_>, t: &Target) -> Result<std::sync::Arc<crate::transport::ssh::Session>, Failed> {
    (w.pool.get(w.targets, t).await.map_err(|e| format!("{t}: {e}"))).map_err(Failed::from)
}

/// Waits until the restarted `server` is a Ready Node of `site`'s cluster again (a cluster
/// fabric cannot reach, or that does not list it, is not waited for: said so).
async fn server_ready(work: &mut Work<'_>, site: &str, server: &Target) -> Result<(), Failed> {
    let node = match server {
        Target::Host(n) => n.clone(),
        t => t.to_string(),
    };
    let cluster = Target::cluster(site);
    let client = match work.clients.get(work.targets, &cluster).await {
        Ok(c) => c,
        Err(e) => {
            (work.progress)(&format!("{server}: K3s restarted; its Node is not waited for ({cluster}: {e})"));
            return Ok(());
        }
    };
    let id = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}});
    if k::get(&client, &id).await.map_err(|e| format!("{cluster}: {e}"))?.is_none() {
        (work.progress)(&format!("{server}: K3s restarted; {cluster} lists no Node {node} to wait for"));
        return Ok(());
    }
    let budget = crate::apply::wait::Budget {
        timeout: std::time::Duration::from_secs(300),
        interval: std::time::Duration::from_secs(2),
        stop: Default::default(),
    };
    let progress = work.progress;
    let report = move |line: String| progress(&format!("{server}: {line}"));
    let evidence = crate::apply::wait::poll(&format!("{node} Ready"), &budget, &report, || async {
        let n = k::get(&client, &id).await?.unwrap_or_default();
        Ok::<_, KubeError>(if crate::desired::node_migration::ready(&n) {
            crate::apply::wait::Readiness::Ready(format!("{node} Ready"))
        } else {
            crate::apply::wait::Readiness::Pending("the node is not Ready".into())
        })
    })
    .await
    .map_err(|e| format!("{server}: {e}"))?;
    (work.progress)(&format!("{server}: K3s restarted with the new token; {evidence}"));
    Ok(())
}

/// Copies `r` again from its source as it is now.
async fn recopy(work: &mut Work<'_>, made: &mut Vec<Made>, r: &Resource, from: &CopySource) -> Result<(), Failed> {
    let obj = r.kube_object().cloned().ok_or_else(|| format!("{} is no Kubernetes object", r.address))?;
    let source = work.clients.get(work.targets, &from.target).await.map_err(|e| format!("{}: {e}", from.target))?;
    let copied = k::with_copied_data(&obj, &source, from).await.map_err(|e| format!("{}: {e}", r.address))?;
    let data = copied["data"].as_object().cloned().unwrap_or_default();
    write_secret(work, made, r.target(), obj, data).await
}

/// The mesh CA's stage.
async fn mesh(
    work: &mut Work<'_>,
    made: &mut Vec<Made>,
    stage: &MeshStage,
    (ca_target, ca_obj): (&Target, &Value),
    issued: &[(Target, String)],
    copies: &[Resource],
) -> Result<(), Failed> {
    let ns = MESH_CA_NAMESPACE;
    let next = match stage {
        MeshStage::Add { generate: true } => {
            let data = secrets::generate(secrets::Generated::Ca).map_err(|e| e.to_string())?;
            let mut obj = bare(ns, NEXT_CA_SECRET, "Opaque");
            obj["metadata"]["annotations"] = json!({ "fabric.io/next-of": MESH_CA_SECRET });
            write_secret(work, made, ca_target, obj, data.clone()).await?;
            data
        }
        MeshStage::NotMade => return Ok(()),
        _ => data_of(work, ca_target, ns, NEXT_CA_SECRET).await?,
    };
    let (next_crt, next_key) = (text_of(&next, "ca.crt"), text_of(&next, "ca.key"));
    if next_crt.is_empty() || next_key.is_empty() {
        return Err(Failed::from(format!("{ca_target}/{ns}/Secret/{NEXT_CA_SECRET} has no ca.crt or ca.key")));
    }
    if *stage == MeshStage::Switch {
        // The CA certgen signs with: the new one alone (never both: see providers::ca_bundle).
        let mut ca = Map::new();
        ca.insert("ca.crt".into(), b64(&next_crt));
        ca.insert("ca.key".into(), b64(&next_key));
        write_secret(work, made, ca_target, ca_obj.clone(), ca.clone()).await?;
        for r in copies {
            let obj = r.kube_object().cloned().unwrap_or_else(|| bare(ns, MESH_CA_SECRET, "Opaque"));
            write_secret(work, made, r.target(), obj, ca.clone()).await?;
        }
    }
    for (target, name) in issued {
        let mut data = data_of(work, target, ns, name).await?;
        let bundle = text_of(&data, "ca.crt");
        let new_bundle = match stage {
            MeshStage::Finish => ca_bundle::certificates(&next_crt).concat(),
            _ => ca_bundle::with(&bundle, &next_crt),
        };
        data.insert("ca.crt".into(), b64(&new_bundle));
        if *stage == MeshStage::Switch {
            let (crt, key) = ca_bundle::reissue(&text_of(&data, "tls.crt"), &next_crt, &next_key)
                .map_err(|e| format!("{target}/{ns}/Secret/{name}: {e}"))?;
            data.insert("tls.crt".into(), b64(&crt));
            data.insert("tls.key".into(), b64(&key));
        }
        write_secret(work, made, target, bare(ns, name, "kubernetes.io/tls"), data).await?;
    }
    if *stage == MeshStage::Finish {
        let client = work.clients.get(work.targets, ca_target).await.map_err(|e| format!("{ca_target}: {e}"))?;
        let kept =
            kept_secret::keep(&client, ns, NEXT_CA_SECRET, work.run).await.map_err(|e| format!("{ca_target}: {e}"))?;
        made.push(Made {
            target: ca_target.clone(),
            ns: ns.into(),
            name: NEXT_CA_SECRET.into(),
            prior: Observed::Present(SENSITIVE.into()),
        });
        k::delete(&client, &secret_id(ns, NEXT_CA_SECRET)).await.map_err(|e| format!("{ca_target}: {e}"))?;
        if let Some(kept) = kept {
            (work.progress)(&format!(
                "{ca_target}/{ns}/Secret/{NEXT_CA_SECRET}: deleted (kept as {kept} until the next rotation)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(site: Option<&str>, target: &str, from: &str) -> (Resource, CopySource) {
        let r = Resource {
            address: crate::addr::Address { target: target.into(), path: "karmada-cluster/Secret/sp".into() },
            site: site.map(String::from),
            provider: ProviderKind::Kube,
            summary: String::new(),
            sensitive: true,
            desired: Desired::Kube(secret_id("karmada-cluster", "sp")),
            file: None,
        };
        let from = CopySource {
            target: from.into(),
            namespace: "karmada-cluster".into(),
            name: "karmada-member-token".into(),
            shape: secrets::Shape::Keys(vec![("token".into(), "token".into())]),
        };
        (r, from)
    }

    #[test]
    fn a_site_keeps_the_copies_made_there_or_copied_from_its_cluster() {
        let (r, from) = copy(None, "karmada", "cluster.sp");
        assert!(at_site(&r, &from, None));
        assert!(at_site(&r, &from, Some("sp")), "Karmada's credentials for sp come from sp");
        assert!(!at_site(&r, &from, Some("franca")));
        let (r, from) = copy(Some("franca"), "cluster.franca", "karmada");
        assert!(at_site(&r, &from, Some("franca")) && !at_site(&r, &from, Some("sp")));
    }

    #[test]
    fn the_lines_name_what_is_renewed_and_the_stage_never_a_value() {
        let (resource, from) = copy(None, "karmada", "cluster.sp");
        let r = Rotation {
            items: vec![
                Item::MeshCa {
                    stage: MeshStage::Switch,
                    ca: Target::cluster("franca"),
                    ca_obj: Value::Null,
                    issued: vec![(Target::cluster("sp"), "clustermesh-apiserver-remote-cert".into())],
                    copies: vec![],
                },
                Item::Recopy {
                    step: "C.2".into(),
                    resource: Box::new(resource.clone()),
                    from: from.clone(),
                    state: CopyState::Differs,
                },
                Item::Recopy { step: "C.2".into(), resource: Box::new(resource), from, state: CopyState::Same },
                Item::Refused { what: "the K3s join token of `sp`'s agents".into(), why: "K3s generated it".into() },
            ],
        };
        let text = lines(&r).join("\n");
        assert!(text.contains("stage 2 of 3: kube-system/cilium-ca becomes the new CA (0 copie(s) follow) and 1 certificate Secret(s) are issued again"), "{text}");
        assert!(text.contains("      cluster.sp/kube-system/Secret/clustermesh-apiserver-remote-cert"), "{text}");
        assert!(text.contains("  ~ karmada/karmada-cluster/Secret/sp (C.2), from cluster.sp/karmada-cluster/karmada-member-token: copied again"), "{text}");
        assert!(text.contains("  = karmada/karmada-cluster/Secret/sp (C.2)"), "{text}");
        assert!(text.contains("  ! the K3s join token of `sp`'s agents: refused: K3s generated it"), "{text}");
        assert!(r.has_changes());
        // Only the changing items are applied, the mesh CA's Secrets in their order.
        let w = writes(&r.items[0]);
        assert_eq!(w[0], (Target::cluster("franca"), "kube-system".into(), "cilium-ca".into()));
        assert_eq!(w[1].2, "clustermesh-apiserver-remote-cert");
        assert!(!r.items[2].changes() && !r.items[3].changes());
    }

    #[test]
    fn the_join_token_is_renewed_only_when_asked_and_its_lines_name_hosts_only() {
        let item = |renew| Item::K3sToken {
            site: "sp".into(),
            first: Target::host("sp-lan"),
            servers: vec![Target::host("sp-cp2")],
            agents: vec![Target::host("sp-vm")],
            renew,
        };
        let r = Rotation { items: vec![item(false)] };
        assert!(!r.has_changes(), "not without --k3s-token");
        assert_eq!(
            lines(&r),
            ["  = the K3s join token of `sp` (A.1): not renewed without --k3s-token (it restarts the other servers)"]
        );
        let r = Rotation { items: vec![item(true)] };
        assert!(r.has_changes() && writes(&r.items[0]).is_empty());
        let text = lines(&r).join("\n");
        assert!(
            text.contains("a new one generated on host.sp-lan and `k3s token rotate` run there; 1 other server(s)"),
            "{text}"
        );
        assert!(text.contains("      host.sp-cp2\n      host.sp-vm"), "{text}");
        // The journal's order: other servers, the first, the agents (a rollback goes newest first).
        let p: Vec<String> = token_priors(&r.items[0]).iter().map(|p| p.address.to_string()).collect();
        assert_eq!(
            p,
            [
                "host.sp-cp2/command:k3s-token-restart",
                "host.sp-lan/command:k3s-token-rotate",
                "host.sp-vm/command:k3s-token-file"
            ]
        );
        assert!(token_priors(&item(false)).is_empty());
    }
}
