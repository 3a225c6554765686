//! Reading live state: one SSH connection per host per run, every host at the same time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::addr::{Address, Target};
use crate::desired::{ProviderKind, Resource};
use crate::live::locks::{self, Hold};
use crate::providers::kube::KubeError;
use crate::providers::{self, Observed, WgKey};
use crate::topology::Topology;
use crate::transport::batch;
use crate::transport::shell::{self, Sh};
use crate::transport::ssh::{Endpoint, Session};
use crate::transport::ssh_config::{ConfigError, SshConfig};

/// Every SSH target of a topology, resolved.
#[derive(Debug, Clone, Default)]
pub struct Targets {
    pub ssh: BTreeMap<Target, Endpoint>,
    /// Kubernetes targets (`cluster.<site>`, `karmada`) and their kubeconfig.
    pub kube: BTreeMap<Target, crate::providers::kube::KubeAccess>,
    /// Provider and WireGuard interface of each router target (for reading its public key).
    pub router_kind: BTreeMap<Target, (ProviderKind, String)>,
    /// What the ssh config asks that fabric does not do, each naming its file and line.
    pub warnings: Vec<String>,
    /// The private key the topology names for a host (`ssh.identity_file`), as the endpoint
    /// resolved it: a file on this machine that must exist (`live::local_files`).
    pub named_keys: BTreeMap<Target, std::path::PathBuf>,
}

impl Targets {
    /// Whether `target` is a VyOS router (its lock read also asks for its commit-confirm:
    /// `live::locks::read_locks_vyos`).
    pub fn is_vyos(&self, target: &Target) -> bool {
        self.router_kind.get(target).is_some_and(|(k, _)| *k == ProviderKind::Vyos)
    }

    /// Every target of `t`, its SSH endpoints resolved with `config`; an ssh config fabric
    /// cannot apply as written is an error naming its file and line.
    pub fn from_topology(t: &Topology, config: &SshConfig) -> Result<Targets, ConfigError> {
        let mut warnings = config.warnings.clone();
        let mut ssh = BTreeMap::new();
        let mut named_keys = BTreeMap::new();
        // A host's endpoint, and the key its topology entry names (the endpoint's first identity
        // file: the topology's value comes before the ssh config's, as `ssh -i` does).
        let mut add = |target: Target, access: &crate::topology::model::SshAccess| -> Result<(), ConfigError> {
            let ep = Endpoint::resolve(&target.to_string(), access, config, &mut warnings)?;
            if let (Some(_), Some(key)) = (&access.identity_file, ep.identity_files.first()) {
                named_keys.insert(target.clone(), key.clone());
            }
            ssh.insert(target, ep);
            Ok(())
        };
        let mut router_kind = BTreeMap::new();
        let mut kube = BTreeMap::new();
        let k = &t.federation.karmada.kubeconfig;
        kube.insert(Target::Karmada, crate::providers::kube::KubeAccess::new(&k.path, k.context.as_deref()));
        for s in &t.sites {
            let k = &s.cluster.kubeconfig;
            kube.insert(
                Target::cluster(&s.name),
                crate::providers::kube::KubeAccess::new(&k.path, k.context.as_deref()),
            );
            // The running cluster a new one replaces (cutover, A.5).
            if let Some(p) = &s.cluster.previous {
                let k = &p.kubeconfig;
                kube.insert(
                    Target::previous_cluster(&s.name),
                    crate::providers::kube::KubeAccess::new(&k.path, k.context.as_deref()),
                );
            }
            let target = Target::router(&s.name);
            add(target.clone(), &s.router.ssh)?;
            let kind = match s.router.kind {
                crate::topology::model::RouterKind::Vyos => ProviderKind::Vyos,
                crate::topology::model::RouterKind::Linux => ProviderKind::Wireguard,
            };
            router_kind.insert(target, (kind, s.router.wireguard.interface.clone()));
            for n in &s.cluster.nodes {
                if let Some(a) = &n.ssh {
                    add(Target::host(&n.name), a)?;
                }
            }
            for w in &s.external_workloads {
                add(Target::host(&w.name), &w.ssh)?;
            }
        }
        if let Some(vm) = &t.federation.karmada.vm {
            add(Target::host(&vm.name), &vm.ssh)?;
            let k = &vm.kubeconfig;
            kube.insert(
                Target::cluster(&vm.name),
                crate::providers::kube::KubeAccess::new(&k.path, k.context.as_deref()),
            );
        }
        Ok(Targets { ssh, kube, router_kind, warnings, named_keys })
    }
}

/// What plan and apply know of the live state.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Live {
    /// Resource address → state.
    pub observed: BTreeMap<Address, Observed>,
    /// Router target → WireGuard public key (public: safe to show and store), as parsed.
    pub keys: BTreeMap<Target, WgKey>,
    /// Target → why it could not be read.
    pub unreachable: BTreeMap<Target, String>,
    /// Resource address → why the API server would refuse to apply it (dry run: a conflict with
    /// another field manager, an invalid field).
    #[serde(default)]
    pub refusals: BTreeMap<Address, String>,
    /// Resource address → the fields fabric sets that it leaves to the controller that took them
    /// over (`spec.suspend: left to kueue`, `providers::kube::left_to_controllers`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub left_to_controllers: BTreeMap<Address, Vec<String>>,
    /// Hosts' locks and pending self-reverts, as read: shown by plan, never part of what a
    /// plan's fingerprint compares (a lock is not state fabric manages).
    #[serde(skip)]
    pub held: BTreeMap<Target, Hold>,
    /// Clusters that cannot be read because they do not run yet, and the server host whose K3s
    /// install (planned in the same run) brings each up: their objects are planned as absent,
    /// and apply fetches the kubeconfig from that host once K3s runs (see `apply::bootstrap`).
    #[serde(default)]
    pub bootstrap: BTreeMap<Target, Target>,
    /// GPU nodes (`host.<name>`) whose D.1 is planned, and what their NVIDIA runtime read found
    /// (see `desired::gpu_runtime`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu_runtime: BTreeMap<Target, GpuRuntime>,
    /// The certificate Karmada's API server serves, when C.1 is planned (its names and expiry:
    /// public; see `live::served_cert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub karmada_cert: Option<super::served_cert::ServedCert>,
    /// The Cluster Mesh CA (`kube-system/cilium-ca` of the first site), when B.2 is planned
    /// (its expiry: public; see `live::served_cert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh_ca: Option<super::served_cert::ServedCert>,
    /// Each Node's kubelet version (`status.nodeInfo.kubeletVersion`) in the clusters whose K3s
    /// a selected step installs or upgrades, all of them, the topology's or not (see
    /// `live::versions`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kubelets: BTreeMap<Target, BTreeMap<String, String>>,
}

/// A GPU node's NVIDIA driver and container toolkit, as read over SSH.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuRuntime {
    /// Both where K3s needs them.
    Ready,
    /// What is missing.
    Missing(String),
    /// Why it could not be read (no SSH access, unreachable): not checked.
    Unread(String),
}

/// Reads the NVIDIA runtime of each GPU node (`host.<name>`) over SSH, all at once.
pub async fn read_gpu_runtimes(nodes: &[Target], targets: &Targets) -> BTreeMap<Target, GpuRuntime> {
    let mut set = tokio::task::JoinSet::new();
    let mut out = BTreeMap::new();
    for node in nodes {
        let Some(ep) = targets.ssh.get(node).cloned() else {
            out.insert(node.clone(), GpuRuntime::Unread(format!("no SSH access is configured for {node}")));
            continue;
        };
        let node = node.clone();
        set.spawn(async move {
            let read = async {
                let s = super::connect::connect(&ep).await.map_err(|e| e.to_string())?;
                // As root: K3s's containerd config is root's to read.
                let probe = crate::transport::shell::as_root(&s.endpoint.user, &crate::desired::gpu_runtime::probe());
                let o = s.run(&probe, None, std::time::Duration::from_secs(15)).await.map_err(|e| e.to_string())?;
                s.close().await;
                Ok::<_, String>(o.stdout_str())
            };
            let state = match read.await {
                Ok(text) => match crate::desired::gpu_runtime::missing(&text) {
                    None => GpuRuntime::Ready,
                    Some(why) => GpuRuntime::Missing(why),
                },
                Err(why) => GpuRuntime::Unread(why),
            };
            (node, state)
        });
    }
    while let Some(j) = set.join_next().await {
        if let Ok((node, state)) = j {
            out.insert(node, state);
        }
    }
    out
}

impl Live {
    /// A digest of everything observed: apply refuses a plan whose digest no longer matches.
    pub fn fingerprint(&self) -> String {
        let text = serde_json::to_string(self).expect("live state serializes");
        let digest = Sha256::digest(text.as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn key(&self, target: &Target) -> Option<String> {
        self.keys.get(target).map(WgKey::to_string)
    }
}

/// A cluster that could not be read is one that does not run yet when the same resources install
/// K3s as its server on a host that has none: it is taken off `unreachable` and its objects are
/// planned as absent. Anything else unreadable stays unreachable.
pub fn mark_bootstrap(resources: &[Resource], live: &mut Live) {
    use crate::desired::Desired;
    use crate::desired::k3s_install::Role;
    for r in resources {
        let Desired::K3sInstall(k) = &r.desired else { continue };
        // Read and found not installed: a host that could not be read says nothing.
        if k.role != Role::Server || live.observed.get(&r.address) != Some(&Observed::Absent) {
            continue;
        }
        let Some(cluster) = k.brings_up.clone() else { continue };
        if live.unreachable.remove(&cluster).is_some() {
            live.bootstrap.insert(cluster, r.target().clone());
        }
    }
}

/// Router targets whose public keys the resources' desired texts refer to.
pub fn key_targets(resources: &[Resource]) -> BTreeSet<Target> {
    let mut out = BTreeSet::new();
    for r in resources {
        let text = providers::desired_text(r, &|_| None);
        let mut rest = text.as_str();
        while let Some(i) = rest.find("<public-key:") {
            let after = &rest[i + "<public-key:".len()..];
            if let Some(j) = after.find('>') {
                if let Ok(t) = after[..j].parse() {
                    out.insert(t);
                }
                rest = &after[j..];
            } else {
                break;
            }
        }
        // A router's own key is part of its state too (it is created with the interface).
        if r.is_wireguard_interface() {
            out.insert(r.target().clone());
        }
    }
    out
}

/// Reads `resources` and the public keys of `keys`, one connection per target, all targets at
/// once. A target that cannot be reached is recorded with its reason; the others are read.
pub async fn observe(resources: &[Resource], keys: &BTreeSet<Target>, targets: &Targets) -> Live {
    observe_over(resources, keys, targets, BTreeMap::new()).await
}

/// The SSH connections a read opened and kept for what comes next (apply's pool, `live::pool`):
/// one connection per host per run, not one for the plan and another for the changes.
pub type Kept = BTreeMap<Target, Arc<Session>>;

/// [`observe`], keeping each host's connection open when its read succeeded (apply reads, then
/// locks and changes the same hosts over the same connections).
pub async fn observe_keeping(resources: &[Resource], keys: &BTreeSet<Target>, targets: &Targets) -> (Live, Kept) {
    read_all(resources, keys, targets, BTreeMap::new(), true).await
}

/// [`observe`], reading each host in `open` over that connection (apply's own, already open and
/// locked: no second connect) and connecting to the others.
pub async fn observe_over(
    resources: &[Resource],
    keys: &BTreeSet<Target>,
    targets: &Targets,
    open: BTreeMap<Target, Arc<Session>>,
) -> Live {
    read_all(resources, keys, targets, open, false).await.0
}

/// [`observe_over`], keeping the connections it opened when `keep` ([`observe_keeping`]).
async fn read_all(
    resources: &[Resource],
    keys: &BTreeSet<Target>,
    targets: &Targets,
    mut open: BTreeMap<Target, Arc<Session>>,
    keep: bool,
) -> (Live, Kept) {
    let mut by_target: BTreeMap<Target, Vec<Resource>> = BTreeMap::new();
    for r in resources {
        by_target.entry(r.target().clone()).or_default().push(r.clone());
    }
    for k in keys {
        by_target.entry(k.clone()).or_default();
    }
    let mut set = tokio::task::JoinSet::new();
    let mut kube_reads = tokio::task::JoinSet::new();
    for (target, rs) in by_target {
        if let Some(access) = targets.kube.get(&target).cloned() {
            kube_reads.spawn(async move {
                let t = target.clone();
                crate::providers::kube::for_cluster(&t, read_kube(target, access, rs)).await
            });
            continue;
        }
        let Some(ep) = targets.ssh.get(&target).cloned() else {
            let reason = Unread(format!("no SSH access is configured for {target}"));
            set.spawn(async move { HostRead { target, outcome: Err(reason), kept: None } });
            continue;
        };
        let want_key = keys
            .contains(&target)
            .then(|| targets.router_kind.get(&target).cloned().unwrap_or((ProviderKind::Wireguard, "wg0".into())));
        let session = open.remove(&target);
        let vyos = targets.is_vyos(&target);
        set.spawn(read_host(target, ep, session, rs, want_key, vyos, keep));
    }
    let mut live = Live::default();
    let mut kept = Kept::new();
    let mut refusals = BTreeMap::new();
    while let Some(joined) = kube_reads.join_next().await {
        let Ok((target, result)) = joined else { continue };
        match result {
            Ok(states) => {
                for (address, read) in states {
                    live.observed.insert(address.clone(), read.observed);
                    if !read.left.is_empty() {
                        live.left_to_controllers.insert(address.clone(), read.left);
                    }
                    if let Some(r) = read.refusal {
                        refusals.insert(address, r);
                    }
                }
            }
            Err(reason) => {
                live.unreachable.insert(target, reason.to_string());
            }
        }
    }
    forgive_missing_namespaces(resources, &mut refusals);
    live.refusals = refusals.into_iter().map(|(address, e)| (address, e.to_string())).collect();
    copies_against_sources(resources, targets, &mut live).await;
    while let Some(joined) = set.join_next().await {
        let Ok(HostRead { target, outcome, kept: session }) = joined else { continue };
        if let Some(s) = session {
            kept.insert(target.clone(), s);
        }
        match outcome {
            Ok((states, key, hold)) => {
                live.observed.extend(states);
                if !hold.is_empty() {
                    live.held.insert(target.clone(), hold);
                }
                if let Some(k) = key {
                    live.keys.insert(target, k);
                }
            }
            Err(reason) => {
                live.unreachable.insert(target, reason.0);
            }
        }
    }
    mark_bootstrap(resources, &mut live);
    (live, kept)
}

/// Why a host could not be read (what `Live::unreachable` records).
#[derive(Debug)]
struct Unread(String);

/// What one host holds: each resource's state by address, and its public key.
type HostState = (Vec<(Address, Observed)>, Option<WgKey>, Hold);

/// What one host's read gave, or why it was not read.
struct HostRead {
    target: Target,
    outcome: Result<HostState, Unread>,
    /// The connection the read opened, kept for apply (`keep`).
    kept: Option<Arc<Session>>,
}

/// Reads one host (see [`read_host_once`]); a read whose connection dropped under it (sshd
/// restarted: the session is closed, `Session::is_closed`) is read again over a new connection,
/// within the connect retry's policy: a read changes nothing, so it is safe to repeat. A session
/// apply lent (`open`) is used for the first try only; once it dropped, the pool replaces it for
/// its owner (`live::pool`) and the read connects anew through [`super::connect::connect`].
async fn read_host(
    target: Target,
    ep: Endpoint,
    open: Option<Arc<Session>>,
    rs: Vec<Resource>,
    want_key: Option<(ProviderKind, String)>,
    vyos: bool,
    keep: bool,
) -> HostRead {
    let policy = crate::transport::retry::SSH_CONNECT;
    let start = std::time::Instant::now();
    let mut open = open;
    let mut done = 0;
    loop {
        let (read, dropped) =
            read_host_once(target.clone(), &ep, open.take(), rs.clone(), want_key.clone(), vyos, keep).await;
        done += 1;
        let again = match (&read.outcome, dropped) {
            (Err(Unread(why)), true) => policy.next(done, start.elapsed(), None, 0.5).map(|w| (w, why.clone())),
            _ => None,
        };
        let Some((wait, why)) = again else { return read };
        crate::transport::retry::notice(&crate::transport::retry::retry_line(
            &target.to_string(),
            "read",
            done,
            &policy,
            &format!("the connection dropped: {why}"),
            wait,
        ));
        tokio::time::sleep(wait).await;
    }
}

/// Reads one host over one connection (`open`, lent by apply, or a new one through the retried
/// connect): every read, the lock and pending-revert check (on a VyOS router, `vyos`, also its
/// commit-confirm's systemd units: `locks::read_locks_for`) and the key read in one framed
/// script in one channel ([`batch_of`]), so about one round trip after the connect, VyOS routers
/// included. Also says whether the connection was lost under the read (the session closed),
/// which is what [`read_host`] reads again.
async fn read_host_once(
    target: Target,
    ep: &Endpoint,
    open: Option<Arc<Session>>,
    rs: Vec<Resource>,
    want_key: Option<(ProviderKind, String)>,
    vyos: bool,
    keep: bool,
) -> (HostRead, bool) {
    let connected = match open {
        Some(s) => Ok(s),
        None => super::connect::connect(ep).await.map(Arc::new),
    };
    let session = match connected {
        Ok(s) => s,
        Err(e) => {
            let text = e.to_string();
            let reason = text.strip_prefix(&format!("{target}: ")).unwrap_or(&text).to_string();
            return (HostRead { outcome: Err(Unread(format!("{reason} ({})", e.help()))), target, kept: None }, false);
        }
    };
    let lock_read = shell::as_root(&session.endpoint.user, &locks::read_locks_for(vyos));
    let batch = batch_of(&session.endpoint.user, &rs, want_key.as_ref(), &lock_read);
    let Answers { states, key, hold } = match read_batched(&session, &rs, batch).await {
        Ok(a) => a,
        // The session closed under the read (sshd restarted, the link reset): read again.
        Err(e) => return (HostRead { target, outcome: Err(e), kept: None }, session.is_closed()),
    };
    let mut out = Vec::new();
    let mut failure = None;
    for (address, state) in states {
        match state {
            Ok(o) => out.push((address, o)),
            Err(e) => failure = failure.or(Some(e.to_string())),
        }
    }
    // A key that cannot be read is unknown (plan shows it as known after apply); an answer that
    // is not a key makes the router unreadable: it is never trusted.
    let key = match key {
        Some(Ok(k)) => k,
        Some(Err(e @ providers::ProviderError::NotAKey { .. })) => {
            failure = failure.or(Some(e.to_string()));
            None
        }
        Some(Err(_)) | None => None,
    };
    if let Some(e) = failure {
        return (HostRead { target, outcome: Err(Unread(e)), kept: None }, session.is_closed());
    }
    // A connection of this read's own is closed unless kept for apply; one it was lent stays
    // open for its owner.
    let kept = match Arc::try_unwrap(session) {
        Ok(s) if keep => Some(Arc::new(s)),
        Ok(s) => {
            s.close().await;
            None
        }
        Err(_) => None,
    };
    (HostRead { target, outcome: Ok((out, key, hold)), kept }, false)
}

/// What a host's reads answered: each resource's state (or why not), its key read, its hold.
struct Answers {
    states: Vec<(Address, Result<Observed, providers::ProviderError>)>,
    key: Option<Result<Option<WgKey>, providers::ProviderError>>,
    hold: Hold,
}

/// Longest a host's whole batch of reads may take (each read alone had 20 s; a batch runs them
/// one after another).
const BATCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(40);

/// One host's reads as one batch (pure: [`read_batched`] runs it).
#[derive(Debug)]
struct HostBatch {
    /// The framed reads, in order.
    reads: Vec<Sh>,
    /// Per resource, in order: the index of the read that answers it (the VyOS resources of a
    /// router share one `show configuration commands`), or why it has no read.
    answered_by: Vec<Result<usize, providers::ProviderError>>,
    /// The lock and pending-revert check.
    hold: usize,
    key: Option<usize>,
    /// A VyOS router's: the reads go to `vbash -s` as one script after the script-template
    /// (`providers::vyos_read_script`); else they are the channel's command (`$SHELL -c`).
    vbash: bool,
}

/// The reads of one host as one batch: every resource, the lock and pending-revert check
/// (`lock_read`: `live::locks::read_locks_for`, on a VyOS router also its commit-confirm's
/// systemd units), then the key read. On a VyOS router (a VyOS resource or key to read) the configuration is read
/// once for all its VyOS resources, the key with `run show interfaces wireguard`, and the plain
/// reads through `/bin/sh` (`providers::vyos_plain_read`: the template's aliases stay out).
fn batch_of(user: &str, rs: &[Resource], want_key: Option<&(ProviderKind, String)>, lock_read: &Sh) -> HostBatch {
    let vbash =
        rs.iter().any(|r| r.provider == ProviderKind::Vyos) || matches!(want_key, Some((ProviderKind::Vyos, _)));
    let plain = |c: Sh| if vbash { providers::vyos_plain_read(&c) } else { c };
    let mut reads = Vec::with_capacity(rs.len() + 2);
    let mut config = None;
    let mut answered_by = Vec::with_capacity(rs.len());
    for r in rs {
        answered_by.push(if r.provider == ProviderKind::Vyos {
            Ok(*config.get_or_insert_with(|| {
                reads.push(providers::vyos_show_read());
                reads.len() - 1
            }))
        } else {
            providers::read_command(user, r).map(|c| {
                reads.push(plain(c.command));
                reads.len() - 1
            })
        });
    }
    reads.push(plain(lock_read.clone()));
    let hold = reads.len() - 1;
    let key = want_key.map(|(kind, iface)| {
        reads.push(match kind {
            ProviderKind::Vyos => providers::vyos_key_read(iface),
            _ => plain(shell::as_root(user, &providers::wg_public_key(iface))),
        });
        reads.len() - 1
    });
    HostBatch { reads, answered_by, hold, key, vbash }
}

/// Runs [`batch_of`]'s reads in one channel and gives each its own answer.
async fn read_batched(session: &Session, rs: &[Resource], batch: HostBatch) -> Result<Answers, Unread> {
    let tag = batch::new_tag();
    let o = if batch.vbash {
        let script = providers::vyos_read_script(&batch.reads, &tag);
        session.run(&providers::vbash(), Some(script.as_bytes()), BATCH_TIMEOUT).await
    } else {
        session.run(&batch::script(&batch.reads, &tag), None, BATCH_TIMEOUT).await
    }
    .map_err(|e| Unread(e.to_string()))?;
    let parts = batch::split(&o, &tag, batch.reads.len())
        .map_err(|e| Unread(format!("{}: {e}{}", session.endpoint.target, last_words(&o, &tag))))?;
    let states = rs
        .iter()
        .zip(batch.answered_by)
        .map(|(r, at)| (r.address.clone(), at.and_then(|i| providers::read_answer(r, &parts[i]))))
        .collect();
    let hold = locks::parse_hold(&parts[batch.hold].stdout_str());
    let key = batch.key.map(|i| providers::public_key_answer(&session.endpoint.target, &parts[i]));
    Ok(Answers { states, key, hold })
}

/// The last line a batch cut short printed on stderr (a frame line aside), to say why it
/// stopped. Never stdout: a VyOS router's configuration there holds its private key.
fn last_words(o: &crate::transport::ssh::Output, tag: &str) -> String {
    let text = o.stderr_str();
    let last = text.lines().rev().map(str::trim).find(|l| !l.is_empty() && !l.starts_with(tag));
    match last {
        Some(l) => format!(" (it said: {})", l.chars().take(160).collect::<String>()),
        None => String::new(),
    }
}

/// A dry run cannot place an object in a namespace that does not exist yet; when the same plan
/// creates that namespace (earlier, in order), the refusal is only a matter of order and is
/// dropped. A namespace nothing creates stays a refusal.
fn forgive_missing_namespaces(resources: &[Resource], refusals: &mut BTreeMap<Address, KubeError>) {
    let created: BTreeSet<(Target, String)> = resources
        .iter()
        .filter_map(|r| match &r.desired {
            crate::desired::Desired::Kube(o) if o["kind"] == "Namespace" && o["apiVersion"] == "v1" => {
                Some((r.target().clone(), o["metadata"]["name"].as_str()?.to_string()))
            }
            _ => None,
        })
        .collect();
    for r in resources {
        let Some(why) = refusals.get(&r.address) else { continue };
        if why.missing_namespace().is_some_and(|ns| created.contains(&(r.target().clone(), ns.to_string()))) {
            refusals.remove(&r.address);
        }
    }
}

/// What a live copied Secret is when it no longer matches its source.
pub const STALE_COPY: &str = "(sensitive; differs from its source)";

/// Secrets fabric copies are compared with their source (in memory, never shown): a copy that
/// no longer matches (a rotated token, a CA another tool made) is planned as an update.
async fn copies_against_sources(resources: &[Resource], targets: &Targets, live: &mut Live) {
    let mut copies = Vec::new();
    for r in resources.iter().filter(|r| r.sensitive && r.provider == ProviderKind::Kube) {
        let crate::desired::Desired::Kube(obj) = &r.desired else { continue };
        let Some(from) = crate::providers::secrets::copy_source(obj) else { continue };
        if matches!(live.observed.get(&r.address), Some(Observed::Present(_))) {
            copies.push((r, obj, from));
        }
    }
    // One client per target involved, shared by its copies.
    let mut clients = BTreeMap::new();
    for target in copies.iter().flat_map(|(r, _, from)| [r.target(), &from.target]) {
        if let (false, Some(access)) = (clients.contains_key(target), targets.kube.get(target))
            && let Ok(c) = crate::providers::kube::client(target, access).await
        {
            clients.insert(target.clone(), c);
        }
    }
    // All at once: each is two reads, possibly across a WAN.
    let checks = copies.iter().filter_map(|(r, obj, from)| {
        let (d, s) = (clients.get(r.target())?, clients.get(&from.target)?);
        Some(async move { (r.address.clone(), crate::providers::kube::copy_differs(d, obj, s, from).await) })
    });
    for (address, differs) in futures::future::join_all(checks).await {
        // A source that cannot be read leaves the copy as it is: presence is all plan knows.
        if let Ok(true) = differs {
            live.observed.insert(address, Observed::Present(STALE_COPY.into()));
        }
    }
}

type KubeStates = Vec<(Address, crate::providers::kube::KubeRead)>;

/// Why a Kubernetes target could not be read (it is then recorded as unreachable).
#[derive(Debug, thiserror::Error)]
pub enum ReadKubeError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// A resource of a Kubernetes target that is no Kubernetes object (a bug in the desired
    /// state, never a live condition).
    #[error("{address} is not a Kubernetes object")]
    NotKube { address: Address },
    /// A read task panicked or was cancelled.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

/// Reads every object of one Kubernetes target at once (and asks for their dry runs).
async fn read_kube(
    target: Target,
    access: crate::providers::kube::KubeAccess,
    rs: Vec<Resource>,
) -> (Target, Result<KubeStates, ReadKubeError>) {
    let client = match crate::providers::kube::client(&target, &access).await {
        Ok(c) => c,
        Err(e) => return (target, Err(e.into())),
    };
    // The Secrets fabric makes at this target: a workload reading keys of any other Secret
    // needs the operator to have made it (checked with the dry run, as a refusal).
    let made: std::sync::Arc<BTreeSet<(String, String)>> = std::sync::Arc::new(
        rs.iter()
            .filter_map(|r| r.kube_object())
            .filter(|o| o["kind"] == "Secret" && o["apiVersion"] == "v1")
            .map(|o| {
                let m = &o["metadata"];
                (
                    m["namespace"].as_str().unwrap_or("default").to_string(),
                    m["name"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect(),
    );
    let mut reads = tokio::task::JoinSet::new();
    for r in rs {
        let c = client.clone();
        let made = made.clone();
        reads.spawn(async move {
            match &r.desired {
                crate::desired::Desired::Kube(obj) => {
                    let mut read = crate::providers::kube::read(&c, obj, r.sensitive).await?;
                    if read.refusal.is_none() {
                        read.refusal =
                            crate::providers::kube::missing_secret_keys(&c, obj, &made).await.unwrap_or_else(Some);
                    }
                    Ok((r.address.clone(), read))
                }
                crate::desired::Desired::Prune(id) => crate::providers::kube::read_pruned(&c, id)
                    .await
                    .map(|observed| {
                        (
                            r.address.clone(),
                            crate::providers::kube::KubeRead { observed, refusal: None, left: Vec::new() },
                        )
                    })
                    .map_err(ReadKubeError::from),
                _ => Err(ReadKubeError::NotKube { address: r.address.clone() }),
            }
        });
    }
    let mut out = Vec::new();
    while let Some(j) = reads.join_next().await {
        match j {
            Ok(Ok(state)) => out.push(state),
            Ok(Err(e)) => return (target, Err(e)),
            Err(e) => return (target, Err(e.into())),
        }
    }
    (target, Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::Desired;
    use serde_json::json;

    fn kube(address: &str, obj: serde_json::Value) -> Resource {
        Resource {
            address: address.into(),
            site: None,
            provider: ProviderKind::Kube,
            summary: String::new(),
            sensitive: false,
            desired: Desired::Kube(obj),
            file: None,
        }
    }

    #[test]
    fn a_namespace_the_plan_creates_is_not_a_refusal() {
        let rs = [
            kube("karmada/Namespace/ai", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ai"}})),
            kube("karmada/ai/PropagationPolicy/p", json!({})),
            kube("karmada/data/PropagationPolicy/q", json!({})),
            kube("cluster.sp/ai/LocalQueue/l", json!({})),
            kube("karmada/ai/PropagationPolicy/o", json!({})),
        ];
        let mut refusals = BTreeMap::new();
        for (a, ns) in [
            ("karmada/ai/PropagationPolicy/p", "ai"),
            ("karmada/data/PropagationPolicy/q", "data"),
            ("cluster.sp/ai/LocalQueue/l", "ai"),
        ] {
            let message = format!("namespaces \"{ns}\" not found");
            refusals.insert(a.into(), KubeError::Api { status: 404, reason: "NotFound".into(), message });
        }
        // Another 404 is no missing namespace.
        let other = KubeError::Api { status: 404, reason: "NotFound".into(), message: "x \"ai\" not found".into() };
        refusals.insert("karmada/ai/PropagationPolicy/o".into(), other);
        forgive_missing_namespaces(&rs, &mut refusals);
        let left: Vec<String> = refusals.keys().map(|a| a.to_string()).collect();
        // Only the one whose namespace this plan creates, on the same target, is dropped.
        assert_eq!(
            left,
            ["cluster.sp/ai/LocalQueue/l", "karmada/ai/PropagationPolicy/o", "karmada/data/PropagationPolicy/q"]
        );
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;
    use crate::desired::Desired;

    fn resource(address: &str, provider: ProviderKind, desired: Desired) -> Resource {
        Resource {
            address: address.parse().unwrap(),
            site: None,
            provider,
            summary: String::new(),
            sensitive: false,
            desired,
            file: None,
        }
    }

    /// A VyOS router: one `show configuration commands` for all its VyOS resources, the lock
    /// check through `/bin/sh`, the key through `run show interfaces wireguard`, all in one
    /// `vbash -s` script; a resource with no read keeps its error without costing a read.
    #[test]
    fn a_vyos_router_is_read_by_one_script() {
        let rs = [
            resource("router.franca/vyos:interfaces wireguard wg0", ProviderKind::Vyos, Desired::Vyos(vec![])),
            resource(
                "router.franca/vyos:protocols static route 10.2.0.0/16",
                ProviderKind::Vyos,
                Desired::Vyos(vec![]),
            ),
            resource("router.franca/command:none", ProviderKind::Command, Desired::Prune(Default::default())),
        ];
        let lock = shell::as_root("vyos", &locks::read_locks_for(true));
        let b = batch_of("vyos", &rs, Some(&(ProviderKind::Vyos, "wg0".into())), &lock);
        assert!(b.vbash);
        let reads: Vec<&str> = b.reads.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            reads,
            [
                "run show configuration commands",
                providers::vyos_plain_read(&lock).as_str(),
                "run show interfaces wireguard wg0 public-key"
            ]
        );
        assert!(reads[1].starts_with("/bin/sh -c 'sudo -n sh -c "), "{}", reads[1]);
        assert!(reads[1].contains("systemctl show --value -p ActiveState"), "commit-confirm's units: {}", reads[1]);
        assert_eq!(b.answered_by[0].as_ref().ok(), Some(&0));
        assert_eq!(b.answered_by[1].as_ref().ok(), Some(&0));
        assert!(b.answered_by[2].is_err(), "a command without a probe has no read");
        assert_eq!((b.hold, b.key), (1, Some(2)));
        // The key alone makes a router's batch a VyOS script too.
        let b = batch_of("vyos", &[], Some(&(ProviderKind::Vyos, "wg0".into())), &lock);
        assert!(b.vbash && b.reads.len() == 2);
    }

    /// A Linux router or host: its plain reads as they are, the channel's own command.
    #[test]
    fn a_linux_host_is_read_by_one_plain_script() {
        let rs = [resource("router.sp/wireguard:wg0", ProviderKind::Wireguard, Desired::Wireguard(String::new()))];
        let lock = shell::as_root("root", &locks::read_locks_for(false));
        let b = batch_of("root", &rs, Some(&(ProviderKind::Wireguard, "wg0".into())), &lock);
        assert!(!b.vbash);
        let reads: Vec<String> = b.reads.iter().map(|r| r.to_string()).collect();
        assert_eq!(
            reads,
            [
                providers::wg_read("wg0").to_string(),
                locks::read_locks().to_string(),
                providers::wg_public_key("wg0").to_string()
            ]
        );
        assert_eq!((b.answered_by[0].as_ref().ok(), b.hold, b.key), (Some(&0), 1, Some(2)));
    }
}

#[cfg(test)]
mod bootstrap_tests {
    use super::*;

    fn install(site: &str) -> Resource {
        let t = crate::topology::load_str("t.yaml", include_str!("../../tests/data/lab-linux.yaml").to_string())
            .unwrap()
            .topology;
        let k = crate::desired::k3s_install::K3sInstall {
            role: crate::desired::k3s_install::Role::Server,
            brings_up: Some(Target::cluster(site)),
            version: t.versions.k3s.clone(),
            binary: crate::desired::k3s_install::Upload {
                from: crate::desired::k3s_install::Source::Path("k3s".into()),
                sha256: "a".repeat(64),
                name: "k3s".into(),
            },
            images: crate::desired::k3s_install::Upload {
                from: crate::desired::k3s_install::Source::Path("i.tar".into()),
                sha256: "b".repeat(64),
                name: "i.tar".into(),
            },
            script: crate::desired::k3s_install::Upload {
                from: crate::desired::k3s_install::Source::Path("s".into()),
                sha256: "c".repeat(64),
                name: "install.sh".into(),
            },
        };
        Resource {
            address: "host.sp-lan/command:k3s-install".parse().unwrap(),
            site: Some(site.into()),
            provider: ProviderKind::Command,
            summary: String::new(),
            sensitive: false,
            desired: crate::desired::Desired::K3sInstall(Box::new(k)),
            file: None,
        }
    }

    #[test]
    fn only_a_server_read_as_not_installed_brings_its_cluster_up() {
        let r = install("sp");
        let cluster = Target::cluster("sp");
        let unreadable = || {
            let mut l = Live::default();
            l.unreachable.insert(cluster.clone(), "no kubeconfig".into());
            l
        };
        // Read, not installed: the cluster is being brought up.
        let mut l = unreadable();
        l.observed.insert(r.address.clone(), Observed::Absent);
        mark_bootstrap(std::slice::from_ref(&r), &mut l);
        assert!(l.unreachable.is_empty() && l.bootstrap.contains_key(&cluster));
        // The host could not be read: nothing is known, the cluster stays unreachable.
        let mut l = unreadable();
        mark_bootstrap(std::slice::from_ref(&r), &mut l);
        assert!(l.unreachable.contains_key(&cluster) && l.bootstrap.is_empty());
        // Installed already: an unreadable cluster is unreachable, not new.
        let mut l = unreadable();
        l.observed.insert(r.address.clone(), Observed::Present(format!("k3s {}\n", "a".repeat(64))));
        mark_bootstrap(std::slice::from_ref(&r), &mut l);
        assert!(l.unreachable.contains_key(&cluster) && l.bootstrap.is_empty());
    }
}
