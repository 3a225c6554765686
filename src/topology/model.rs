//! The topology file as Rust types.
//!
//! These types are the single definition of the file format: the loader deserializes into them,
//! the JSON Schema (`fabric schema`, editor completion) is generated from them, and
//! `docs/topology.md` is generated from that schema. Every doc comment here is user-facing.
//!
//! Values that need cross-field checks (overlaps, references, quotas) are plain data here;
//! `rules.rs` checks them and reports positions through the source tree.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::net::{Cidr, IfaceAddr};
use super::wgkey::WgKey;

/// One fabric: every site, what runs where, and how the sites are joined.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Version of this file format. Only `1` exists.
    pub version: u32,
    /// Name of the fabric; used in plan headers and as a label value on created objects.
    pub name: String,
    /// Pinned versions of everything fabric installs.
    pub versions: Versions,
    /// The seed's open decisions. A step that needs an `undecided` one is refused by plan and apply.
    pub decisions: Decisions,
    /// The sites. Each has a router, a K3s cluster and optionally external workloads and queues.
    pub sites: Vec<Site>,
    /// How the network mesh is built (Cilium, Cluster Mesh, how VMs and bare metal join).
    #[serde(default)]
    pub mesh: Mesh,
    /// Placement classes: how Karmada distributes the services of each class.
    #[serde(default)]
    pub placement: Vec<PlacementClass>,
    /// Workloads federated through Karmada, each in one placement class.
    #[serde(default)]
    pub services: Vec<Service>,
    /// Karmada and ArgoCD.
    pub federation: Federation,
    /// MultiKueue: cross-site dispatch of batch jobs.
    #[serde(default)]
    pub multikueue: Option<MultiKueue>,
    /// The AI gateway that routes requests between the sites' model servers.
    #[serde(default)]
    pub gateway: Option<Gateway>,
    /// How K3s gets onto the hosts: K3s's air-gap bundle, copied by fabric over SSH (hosts
    /// download nothing). Without it fabric installs no K3s: the hosts of A.1, A.3 and A.4 must
    /// have it already.
    #[serde(default)]
    pub k3s_airgap: Option<K3sAirgap>,
}

/// K3s's air-gap install (docs.k3s.io, "Air-Gap Install", manually deploy images): the release's
/// `k3s` binary, its images tarball and the install script, each pinned by its SHA-256 under
/// `digests`, keyed by the release. Where each file comes from follows `versions.k3s` unless
/// given: the K3s release's own assets (amd64), as `fabric render` writes them out in
/// `config/k3s/airgap-bundle.yaml`. A version bump is then `versions.k3s` and that release's
/// three digests, and a file or digest of another release is refused at its line. fabric reads
/// the files on the operator's machine (fetching those given by URL there first), refuses a file
/// whose digest differs before anything runs on a host, copies them over SSH into a private
/// directory on the host, checks the digests again there, and runs the script with
/// `INSTALL_K3S_SKIP_DOWNLOAD=true`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct K3sAirgap {
    /// The `k3s` binary of `versions.k3s` (its `--version` is checked on the host). Absent: the
    /// release's `k3s` (`https://github.com/k3s-io/k3s/releases/download/<versions.k3s>/k3s`).
    #[serde(default)]
    pub binary: BundleFile,
    /// The images tarball (`.tar`, `.tar.gz`, `.tar.zst`, `.tar.lz4` and `.tar.bz2` are what
    /// K3s imports), placed in `/var/lib/rancher/k3s/agent/images/` under its own file name.
    /// Absent: the release's `k3s-airgap-images-amd64.tar.zst`.
    #[serde(default)]
    pub images: BundleFile,
    /// K3s's `install.sh` (the one `get.k3s.io` serves, saved with the bundle). Absent: the one
    /// at the release's tag (`https://raw.githubusercontent.com/k3s-io/k3s/<versions.k3s>/install.sh`).
    #[serde(default)]
    pub install_script: BundleFile,
    /// The three files' SHA-256 digests per K3s release, keyed by its tag as `versions.k3s`
    /// writes it (`v1.33.5+k3s1`). The entry of `versions.k3s` is the one installed; keeping the
    /// previous release's entry lets a revert change `versions.k3s` alone. No entry for
    /// `versions.k3s`: a warning while nothing is recorded, an error once another release's
    /// are (a bump without its digests).
    #[serde(default)]
    pub digests: BTreeMap<String, ReleaseDigests>,
    /// Registry mirrors the hosts pull the cluster's own images through (K3s
    /// `/etc/rancher/k3s/registries.yaml`, written on every K3s host fabric installs).
    #[serde(default)]
    pub registry_mirrors: Vec<RegistryMirror>,
}

/// Where one file of the air-gap bundle comes from: a file on the operator's machine (`path`)
/// or one fabric fetches onto it at apply (`url`), at most one of the two; neither is the K3s
/// release's own file for `versions.k3s`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BundleFile {
    /// Its path on the operator's machine (`~` is the home directory; a relative path is taken
    /// from the current directory, as kubeconfig paths are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// An http(s) URL fabric downloads the file from at apply, on the operator's machine only
    /// (never on a host), once per run into `<state dir>/bundle/<sha256>`; a cached file with
    /// the right digest is not downloaded again. `plan` downloads nothing. A URL that names a
    /// K3s release names `versions.k3s`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Not taken here: the digest goes under `k3s_airgap.digests.<release>`, so that `validate`
    /// knows which release it belongs to (refused at its line, with the entry to write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// One K3s release's digests: each 64 lowercase hex digits as `sha256sum` prints them, or
/// `TODO` while not recorded yet (`validate` warns, `plan` shows the install, `apply` refuses it
/// before fetching or copying anything).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseDigests {
    /// `k3s`'s line of the release's `sha256sum-amd64.txt`.
    pub binary: String,
    /// The images tarball's line of the same file (`k3s-airgap-images-amd64.tar.zst`).
    pub images: String,
    /// `sha256sum install.sh` of the script at the release's tag.
    pub install_script: String,
}

/// A registry mirror for K3s (`registries.yaml`, `mirrors:`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryMirror {
    /// The registry it stands in for, e.g. `docker.io`, or `*` for every registry.
    pub registry: String,
    /// The mirror's endpoints, tried in order (`https://mirror.example:5000`).
    pub endpoints: Vec<String>,
}

/// Versions of what gets installed. Each is pinned; `validate` checks the combinations.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Versions {
    /// K3s release, e.g. `v1.33.5+k3s1`.
    pub k3s: String,
    /// Cilium chart version, e.g. `1.18.4`. External Workloads need `< 1.18`.
    pub cilium: String,
    /// Karmada chart version, e.g. `1.15.0`. Failover taints need `>= 1.14` (ClusterTaintPolicy).
    pub karmada: String,
    /// Kueue chart version, e.g. `0.15.2`. fabric writes `kueue.x-k8s.io/v1beta2`, served from 0.15.
    pub kueue: String,
    /// ArgoCD chart version (argo-cd Helm chart), e.g. `9.1.0`. Required when fabric installs
    /// ArgoCD (`federation.argocd.install`, the default): every version fabric writes is pinned.
    #[serde(default)]
    pub argocd: Option<String>,
    /// TensorZero gateway image tag, e.g. `2026.4.1`. Required when there is a `gateway`.
    #[serde(default)]
    pub tensorzero: Option<String>,
    /// NVIDIA device plugin chart version, e.g. `0.18.0`: makes `nvidia.com/gpu` exist on the
    /// GPU nodes (D.1). Unset: the GPUs are exposed otherwise (the GPU Operator).
    #[serde(default)]
    pub nvidia_device_plugin: Option<String>,
    /// KAI Scheduler chart version, e.g. `v0.10.2`: GPU sharing inside a node (D.5). Unset: no
    /// KAI Scheduler.
    #[serde(default)]
    pub kai_scheduler: Option<String>,
}

/// A decision that may still be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MigrationChoice {
    /// Migrate the running cluster from Flannel to Cilium during a maintenance window (fast, downtime).
    InPlace,
    /// Build a new cluster with Cilium and let ArgoCD redeploy everything (safe, more work).
    NewCluster,
    /// Not decided yet: the cluster step of this site is refused.
    Undecided,
}

/// Where the Karmada control plane runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum KarmadaHostChoice {
    /// Inside the K3s cluster of `federation.karmada.host_site` (less infrastructure).
    HostCluster,
    /// On a dedicated VM (isolation): C.1 installs a single-node K3s there from `k3s_airgap`, then
    /// Karmada's chart into it; needs `federation.karmada.vm`.
    DedicatedVm,
    /// Not decided yet: C.1 is refused.
    Undecided,
}

/// How many ArgoCD instances there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ArgoCdChoice {
    /// Option A: one ArgoCD that deploys to the Karmada API (simple).
    Single,
    /// Option B: one ArgoCD per cluster (each site keeps deploying while partitioned).
    PerCluster,
    /// Not decided yet: C.3 is refused.
    Undecided,
}

/// Whether a site's public address is stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PublicAddressChoice {
    /// Fixed: `router.public_address` is used as the WireGuard endpoint by the other sites.
    Fixed,
    /// Dynamic: this site dials out and keeps the tunnel alive; others do not dial it.
    Dynamic,
    /// Not decided yet: B.1 is refused.
    Undecided,
}

/// How DRBD replicates between sites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DrbdChoice {
    /// Through the Cilium mesh: Cilium's WireGuard encryption with node-to-node encryption at
    /// every site. Cost: it encrypts all traffic between nodes, a site's own DRBD replication and
    /// Proxmox corosync included, not only the cross-site path (Cilium has no selector by
    /// destination; `node-encryption-opt-out-labels` only takes whole nodes out).
    Cilium,
    /// Routed through the sites' WireGuard tunnel (B.1), which already encrypts between the sites:
    /// the narrower form, with same-site DRBD left off Cilium and unencrypted, as the seed wanted.
    Direct,
    /// Not decided yet: A.4 is refused.
    Undecided,
}

/// The seed's "Decisoes em aberto". Per-site decisions are maps from site name to choice; a site
/// missing from such a map is `undecided`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Decisions {
    /// Before A.1/A.2: per site whose cluster already exists (`cluster.existing: true`), migrate in place or build a new cluster.
    #[serde(default)]
    pub cluster_migration: BTreeMap<String, MigrationChoice>,
    /// Before C.1: where the Karmada control plane runs.
    pub karmada_host: KarmadaHostChoice,
    /// Before C.3: ArgoCD option A (single) or B (per cluster).
    pub argocd: ArgoCdChoice,
    /// Before B.1: per site, whether its public address is fixed or dynamic.
    #[serde(default)]
    pub public_address: BTreeMap<String, PublicAddressChoice>,
    /// Before A.4: DRBD across sites through Cilium or directly. `cilium` encrypts every
    /// node-to-node packet, same-site DRBD and corosync included (the plan's risk line of A.1, A.2
    /// and A.4 says so); `direct` encrypts only between the sites, in the routers' tunnel.
    pub drbd_cross_site: DrbdChoice,
}

/// A site: one router, one K3s cluster, and what else joins the mesh there.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// Site name, a DNS label (`franca`, `sp`). Used in resource addresses and Kubernetes names.
    pub name: String,
    /// The site's LAN prefix, routed to the other sites through the tunnel.
    pub lan: Cidr,
    /// The site's edge router, which terminates the WireGuard tunnel.
    pub router: Router,
    /// The site's K3s cluster.
    pub cluster: Cluster,
    /// VMs and bare-metal hosts that join the mesh (A.3, A.4).
    #[serde(default)]
    pub external_workloads: Vec<ExternalWorkload>,
    /// Kueue ClusterQueues of this site's cluster (D.1).
    #[serde(default)]
    pub queues: Vec<ClusterQueue>,
}

/// Kind of router; selects the provider that configures it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RouterKind {
    /// VyOS 1.4 or later, configured with `set` commands and commit-confirm.
    Vyos,
    /// A Debian router with WireGuard (kernel or wireguard-go), configured with files.
    Linux,
}

/// A site's edge router.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Router {
    /// Host name of the router, a DNS label.
    pub name: String,
    /// Which provider configures it.
    pub kind: RouterKind,
    /// Public IPv4 address the other sites dial. Required when the site's public address is `fixed`.
    #[serde(default)]
    pub public_address: Option<Ipv4Addr>,
    /// How fabric reaches the router over SSH.
    pub ssh: SshAccess,
    /// The site-to-site WireGuard interface.
    pub wireguard: WireGuard,
}

/// SSH access to a host. Unset fields fall back to `~/.ssh/config`, then to OpenSSH defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SshAccess {
    /// Address or host name to connect to (may be a `Host` alias of `~/.ssh/config`).
    pub host: String,
    /// TCP port of sshd.
    #[serde(default)]
    pub port: Option<Port>,
    /// Login user. Non-root users need passwordless sudo.
    #[serde(default)]
    pub user: Option<String>,
    /// Private key file; otherwise ssh-agent and the default keys are tried.
    #[serde(default)]
    pub identity_file: Option<String>,
    /// Jump hosts, `[user@]host[:port]` each, comma-separated from the first hop, as OpenSSH's
    /// ProxyJump (each hop is resolved with its own ssh config entry).
    #[serde(default)]
    pub proxy_jump: Option<String>,
}

/// A TCP or UDP port, 1–65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Port(#[schemars(range(min = 1, max = 65535))] pub u16);

/// The WireGuard interface of a router.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WireGuard {
    /// Interface name on the router.
    #[serde(default = "default_wg_interface")]
    pub interface: String,
    /// Tunnel address with prefix (`10.0.0.1/30`). All routers' tunnel addresses share one prefix.
    pub address: IfaceAddr,
    /// UDP port WireGuard listens on.
    #[serde(default = "default_wg_port")]
    pub listen_port: Port,
    /// Persistent keepalive in seconds (0: none). Default 25: needed behind a dynamic address, and
    /// on fixed ones it lets the tunnel recover from a peer's restart or port change by itself.
    #[serde(default)]
    pub keepalive: Option<u16>,
    /// MTU of the tunnel interface, set on both ends. Default 1420: a 1500-byte underlay less
    /// WireGuard's 80 bytes over IPv6 (60 over IPv4), so it fits whichever the path uses. Lower it
    /// when the underlay is smaller (PPPoE: 1492 − 80 = 1412).
    #[serde(default)]
    #[schemars(range(min = 1280, max = 9000))]
    pub mtu: Option<u16>,
    /// This router's WireGuard public key (44 characters of base64), once it exists: `fabric apply
    /// --step B.1` prints it. Only `fabric render` uses it, to write the peers' VyOS commands in
    /// full; apply always reads the live key, and plan warns when the two differ.
    #[serde(default)]
    pub public_key: Option<WgKey>,
}

/// Tunnel MTU when the topology sets none (see [`WireGuard::mtu`]).
pub const DEFAULT_TUNNEL_MTU: u16 = 1420;

impl WireGuard {
    /// The tunnel's MTU: the topology's, or [`DEFAULT_TUNNEL_MTU`].
    pub fn tunnel_mtu(&self) -> u16 {
        self.mtu.unwrap_or(DEFAULT_TUNNEL_MTU)
    }
}

fn default_wg_interface() -> String {
    "wg0".into()
}
fn default_wg_port() -> Port {
    Port(51820)
}

/// A K3s cluster with Cilium as its CNI.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// Cluster name: Cilium `cluster.name`, Karmada member name. A DNS label, unique.
    pub name: String,
    /// Cilium `cluster.id`, 1–255, unique across the mesh.
    pub id: u32,
    /// True when the cluster runs today with Flannel (step A.2 migrates it); false for a new cluster (A.1).
    #[serde(default)]
    pub existing: bool,
    /// Pod CIDR. Must not overlap any other prefix of the fabric (Cluster Mesh routes pods).
    pub pod_cidr: Cidr,
    /// Service CIDR.
    pub service_cidr: Cidr,
    /// Address of the Kubernetes API as the other sites reach it through the tunnel.
    pub api_address: Ipv4Addr,
    /// Port of the Kubernetes API.
    #[serde(default = "default_api_port")]
    pub api_port: Port,
    /// kubeconfig file and context fabric uses for this cluster (credentials stay in that file).
    pub kubeconfig: KubeAccess,
    /// Keep kube-proxy. False: Cilium replaces it (`kubeProxyReplacement: true`).
    #[serde(default)]
    pub kube_proxy: bool,
    /// Keep K3s's ServiceLB (klipper). The seed disables it.
    #[serde(default)]
    pub servicelb: bool,
    /// Keep the GPU nodes for GPU work: D.1 taints them `nvidia.com/gpu=present:NoSchedule`,
    /// and what should run there tolerates it: the GPU services (C.6's overriders), the batch
    /// Jobs Kueue admits on the site's GPU flavor (the flavor's tolerations), the NVIDIA device
    /// plugin (its chart tolerates `nvidia.com/gpu`). Other pods stay off the GPU nodes.
    #[serde(default)]
    pub gpu_taint: bool,
    /// The cluster's nodes. With `cluster_migration: new-cluster`, those of the new cluster: its
    /// control-plane nodes are the new server hosts (A.2 builds the cluster there), and its other
    /// nodes run in the `previous` cluster until the cutover (A.5) moves them, one at a time.
    pub nodes: Vec<Node>,
    /// The running Flannel cluster that `cluster_migration: new-cluster` replaces: fabric never
    /// changes it except at the cutover (A.5), which drains each moving node there and removes it.
    #[serde(default)]
    pub previous: Option<PreviousCluster>,
}

/// The cluster a new one replaces (`cluster_migration: new-cluster`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviousCluster {
    /// kubeconfig of the running cluster's API (the cutover cordons, drains and removes its nodes).
    pub kubeconfig: KubeAccess,
}

fn default_api_port() -> Port {
    Port(6443)
}

/// Where fabric finds credentials for a Kubernetes API.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeAccess {
    /// Path to a kubeconfig file (`~` expands to the home directory).
    pub path: String,
    /// Context inside that file; the file's current context when unset.
    #[serde(default)]
    pub context: Option<String>,
    /// The API server's URL as this machine reaches it, written into the kubeconfig fabric fetches
    /// from a cluster it has just installed (A.1); `https://<api_address>:<api_port>` when unset.
    #[serde(default)]
    pub server: Option<String>,
}

/// Role of a cluster node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NodeRole {
    /// K3s server.
    ControlPlane,
    /// K3s agent with GPUs.
    Gpu,
    /// K3s agent without GPUs.
    Worker,
}

/// A node of a K3s cluster.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Node name, a DNS label, unique in the fabric.
    pub name: String,
    /// Server or agent, with or without GPUs.
    pub role: NodeRole,
    /// LAN address of the node; must be inside the site's LAN.
    pub address: Ipv4Addr,
    /// SSH access: needed on control-plane nodes (fabric writes the K3s config there) and on
    /// every node of a new cluster (`existing: false`: A.1 installs K3s there and joins the
    /// node; without it the node never joins, and `validate` says so).
    #[serde(default)]
    pub ssh: Option<SshAccess>,
    /// GPUs on this node (required for role `gpu`).
    #[serde(default)]
    pub gpu: Option<Gpu>,
    /// What else runs on the host, e.g. `proxmox`, `linstor-satellite` (a Proxmox hypervisor
    /// that is also a GPU node is listed once, here, not also under `external_workloads`). A
    /// node running `linstor-satellite` or `drbd` is a storage host (`decisions.drbd_cross_site`).
    /// Cost: such a hypervisor runs the kubelet and Cilium's agent, whose eBPF programs sit on
    /// its host interfaces (see docs/design.md, "Hypervisors as kubelets").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
    /// What the node offers pods besides GPUs, as Kubernetes reports it (`kubectl get node
    /// <name> -o jsonpath='{.status.allocatable}'`). Needed on the GPU nodes of a site with
    /// queues whose `cpu_quota` or `memory_gib_quota` is unset: Kueue admits a Job only when its
    /// ClusterQueue covers every resource the Job requests (every pod asks cpu and memory), and
    /// fabric derives those quotas from these numbers (docs/design.md, "Kueue covers cpu and
    /// memory").
    #[serde(default)]
    pub allocatable: Option<Allocatable>,
}

/// A node's allocatable CPU and memory (its capacity less what K3s reserves).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Allocatable {
    /// Whole CPU cores (`status.allocatable.cpu`, rounded down).
    pub cpus: u32,
    /// Memory in GiB (`status.allocatable.memory`, rounded down).
    pub memory_gib: u32,
}

/// GPUs of one model on a host.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// GPU model as used in the `gpu.model` node label, e.g. `a5500`.
    pub model: String,
    /// Number of GPUs.
    pub count: u32,
    /// Memory of one GPU in GiB.
    pub memory_gib: u32,
}

/// Kind of an external workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// A virtual machine (joins in step A.3).
    Vm,
    /// A bare-metal host such as a Proxmox node (joins in step A.4).
    BareMetal,
}

/// A VM or bare-metal host that joins the mesh.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalWorkload {
    /// Host name, a DNS label, unique in the fabric.
    pub name: String,
    /// VM (A.3) or bare metal (A.4).
    pub kind: WorkloadKind,
    /// LAN address; must be inside the site's LAN.
    pub address: Ipv4Addr,
    /// What runs there, for documentation and labels (e.g. `traefik`, `linstor-satellite`).
    #[serde(default)]
    pub runs: Vec<String>,
    /// GPUs on this host, if any.
    #[serde(default)]
    pub gpu: Option<Gpu>,
    /// SSH access to the host (fabric installs the join there).
    pub ssh: SshAccess,
}

/// How VMs and bare-metal hosts join the mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum JoinMethod {
    /// As K3s agents with a `NoSchedule` taint: Cilium runs on them as on any node (works with every Cilium).
    /// Cost on a Proxmox host: the kubelet and Cilium's agent run on the hypervisor, with eBPF
    /// programs on its network devices (the plan's risk line of A.4 says so).
    #[default]
    K3sAgent,
    /// Cilium External Workloads, as the seed says: removed in Cilium 1.18, needs `versions.cilium < 1.18`.
    CiliumExternalWorkloads,
}

/// Cilium and Cluster Mesh settings shared by all clusters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mesh {
    /// How VMs and bare metal join (see docs/topology.md on External Workloads).
    #[serde(default)]
    pub join: JoinMethod,
    /// Enable Hubble (flow observability).
    #[serde(default = "yes")]
    pub hubble: bool,
    /// NodePort on which each cluster exposes its clustermesh-apiserver through the tunnel.
    #[serde(default = "default_clustermesh_port")]
    pub clustermesh_port: Port,
}

impl Default for Mesh {
    fn default() -> Self {
        Mesh { join: JoinMethod::default(), hubble: true, clustermesh_port: default_clustermesh_port() }
    }
}

fn yes() -> bool {
    true
}
fn default_clustermesh_port() -> Port {
    Port(32379)
}

/// How a placement class spreads its services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementStrategy {
    /// Divide replicas between sites by static weights (GPU services).
    Spread,
    /// Run at one preferred site, reachable from all as a Cilium global service (data services).
    Affinity,
    /// Run the full replica count at every listed site (web services).
    Replicas,
}

/// A placement class: one Karmada PropagationPolicy.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlacementClass {
    /// Class name, a DNS label; the policy file is `propagation-policies/<name>.yaml`.
    pub name: String,
    /// How replicas are distributed.
    pub strategy: PlacementStrategy,
    /// Sites the class may run at (all sites when empty).
    #[serde(default)]
    pub sites: Vec<String>,
    /// For `spread`: weight per site; every weight must be positive.
    #[serde(default)]
    pub weights: BTreeMap<String, i64>,
    /// For `affinity`: the preferred site.
    #[serde(default)]
    pub prefer: Option<String>,
    /// Mark the services Cilium global services (`service.cilium.io/global: "true"`).
    #[serde(default)]
    pub global: bool,
    /// Seconds a workload tolerates its cluster being `NoExecute`-tainted before Karmada moves it.
    #[serde(default)]
    pub failover_after_seconds: Option<u32>,
}

/// A service federated through Karmada.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// Service (and workload: Deployment or StatefulSet) name, a DNS label.
    pub name: String,
    /// Namespace, a DNS label.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// Placement class name (`placement[].name`).
    pub class: String,
    /// Port the service listens on.
    pub port: Port,
    /// Whole GPUs per replica (`nvidia.com/gpu` limit). Leave it 0 when the service shares a
    /// GPU (`gpu_fraction` or `gpu_memory_mib`).
    #[serde(default)]
    pub gpus: u32,
    /// A share of one GPU per replica, more than 0 and at most 1: KAI Scheduler's `gpu-fraction`
    /// pod annotation (the pod may use that share of one device's memory; other pods share the
    /// rest of the device). Needs KAI Scheduler (`versions.kai_scheduler`) and a `queue`.
    #[serde(default)]
    pub gpu_fraction: Option<f64>,
    /// GPU memory per replica in MiB (mebibytes, 1 GiB = 1024 MiB): KAI Scheduler's `gpu-memory`
    /// pod annotation. At most one GPU's memory (`memory_gib` × 1024) at every site the service
    /// runs at. The other form of `gpu_fraction` (set one of them, not both).
    #[serde(default)]
    pub gpu_memory_mib: Option<u32>,
    /// The site queue (`sites[].queues[].name`, at every site the service runs at) whose GPUs
    /// the service uses: its pods are scheduled by KAI Scheduler in the KAI queue of that name
    /// (`schedulerName: kai-scheduler`, label `kai.scheduler/queue`), and `validate` counts
    /// them against that queue's `gpu_quota`. Required to share a GPU. Unset: whole-GPU pods
    /// that the default scheduler places on the GPUs no queue's quota holds.
    #[serde(default)]
    pub queue: Option<String>,
    /// The pods tolerate the external hosts' `NoSchedule` taint (`fabric.io/external-workload`):
    /// the overriders add the toleration, and the GPUs of the site's external hosts of the same
    /// model count for this service's capacity. Off: external hosts' GPUs are not counted.
    #[serde(default)]
    pub tolerate_external: bool,
    /// Total replicas across sites.
    #[serde(default = "one")]
    pub replicas: u32,
    /// The kind of the service's workload in the GitOps repository: `deployment` (default) or
    /// `statefulset` (Qdrant, Neo4j and PostgreSQL usually are). C.5's PropagationPolicy selects
    /// that kind. A StatefulSet's data stays where it runs: Karmada propagates the PVCs a pod's
    /// volumes name, not those of `volumeClaimTemplates`, which each member's StatefulSet
    /// controller makes empty; so a `statefulset` belongs to a class that places it at one site.
    #[serde(default)]
    pub workload: ServiceWorkload,
    /// ConfigMaps the service is made of that its pod template does not name (C.5 selects them
    /// beside the workload). Those its pod template names (volumes, `env`, `envFrom`) go along
    /// without being listed: the policy propagates a workload's dependencies (`propagateDeps`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configmaps: Vec<String>,
    /// Secrets the service is made of that its pod template does not name (as `configmaps`).
    /// Their content never passes through fabric: Karmada copies them from its API.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

/// The kind of a service's workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ServiceWorkload {
    /// An `apps/v1` Deployment.
    #[default]
    Deployment,
    /// An `apps/v1` StatefulSet (its `volumeClaimTemplates` stay in the cluster it runs in).
    Statefulset,
}

impl ServiceWorkload {
    /// The workload's `kind`.
    pub fn kind(self) -> &'static str {
        match self {
            ServiceWorkload::Deployment => "Deployment",
            ServiceWorkload::Statefulset => "StatefulSet",
        }
    }
}

impl Service {
    /// Whether the service shares a GPU (KAI Scheduler's fraction or memory form).
    pub fn shares_gpu(&self) -> bool {
        self.gpu_fraction.is_some() || self.gpu_memory_mib.is_some()
    }

    /// Whether the service needs GPUs at all, whole or shared.
    pub fn uses_gpu(&self) -> bool {
        self.gpus > 0 || self.shares_gpu()
    }
}

fn default_namespace() -> String {
    "default".into()
}
fn one() -> u32 {
    1
}

/// Karmada and ArgoCD.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Federation {
    /// The Karmada control plane.
    pub karmada: Karmada,
    /// ArgoCD, which deploys the Git repository to Karmada.
    pub argocd: ArgoCd,
}

/// The Karmada control plane.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Karmada {
    /// Site whose cluster hosts Karmada (or where the dedicated VM lives).
    pub host_site: String,
    /// The dedicated VM, when `decisions.karmada_host` is `dedicated-vm`.
    #[serde(default)]
    pub vm: Option<KarmadaVm>,
    /// kubeconfig of the Karmada API server.
    pub kubeconfig: KubeAccess,
    /// Member clusters by site name (all sites when empty).
    #[serde(default)]
    pub members: Vec<String>,
    /// Install the scheduler estimator so Karmada sees GPU capacity (C.4).
    #[serde(default = "yes")]
    pub estimator: bool,
    /// Turn on the Failover feature gate and taint unhealthy clusters `NoExecute` (C.7).
    #[serde(default = "yes")]
    pub failover: bool,
}

/// A dedicated VM for Karmada.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KarmadaVm {
    /// VM host name, a DNS label.
    pub name: String,
    /// LAN address of the VM.
    pub address: Ipv4Addr,
    /// SSH access to the VM.
    pub ssh: SshAccess,
    /// Where fabric finds (or, once C.1 has installed K3s on the VM, writes) the kubeconfig of
    /// the VM's single-node K3s, which hosts Karmada's control plane.
    pub kubeconfig: KubeAccess,
}

/// ArgoCD.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArgoCd {
    /// Site whose cluster runs ArgoCD (option A), or the first one (option B runs one per cluster).
    pub site: String,
    /// Git repository ArgoCD syncs (never contacted by fabric).
    pub repo: String,
    /// Branch or tag to sync.
    #[serde(default = "default_revision")]
    pub revision: String,
    /// Directory in the repository with the services' manifests: what ArgoCD syncs, and only
    /// that. With option B each cluster syncs `<path>/<site>`. It must not be (or hold, or lie
    /// in) a folder fabric renders (`apps`, `config`): what fabric applies, ArgoCD must not own.
    #[serde(default = "default_apps_path")]
    pub path: String,
    /// Namespace ArgoCD runs in.
    #[serde(default = "default_argocd_ns")]
    pub namespace: String,
    /// Install ArgoCD (the argo-cd chart at `versions.argocd`, through the K3s HelmChart) in
    /// the cluster(s) that run it. `false` when an ArgoCD installed otherwise runs there.
    #[serde(default = "default_true")]
    pub install: bool,
}

fn default_revision() -> String {
    "main".into()
}
fn default_apps_path() -> String {
    "services".into()
}
fn default_true() -> bool {
    true
}
fn default_argocd_ns() -> String {
    "argocd".into()
}

/// A Kueue ClusterQueue with a GPU quota.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterQueue {
    /// Queue name, a DNS label (`gpu-interactive`, `gpu-batch`).
    pub name: String,
    /// Nominal quota of `nvidia.com/gpu`; the site's queues together may not exceed its GPUs.
    pub gpu_quota: u32,
    /// Nominal CPU quota in cores. Unset: the queue's share of the allocatable CPU of the site's
    /// GPU nodes its flavor selects, `gpu_quota` GPUs' worth (their cores × `gpu_quota` / their
    /// GPUs); at the MultiKueue manager the dispatching queue's is its workers' total.
    #[serde(default)]
    pub cpu_quota: Option<u32>,
    /// Nominal memory quota in GiB. Unset: derived like `cpu_quota`, from the nodes'
    /// `allocatable.memory_gib`.
    #[serde(default)]
    pub memory_gib_quota: Option<u32>,
    /// LocalQueues that submit to this queue.
    #[serde(default)]
    pub local_queues: Vec<LocalQueue>,
}

/// A Kueue LocalQueue.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LocalQueue {
    /// LocalQueue name, a DNS label.
    pub name: String,
    /// Namespace, a DNS label.
    pub namespace: String,
}

/// MultiKueue: the manager dispatches one queue's jobs to worker clusters with free GPUs. Every
/// job of that queue goes to a worker, and waits at the manager while no worker has room: Kueue
/// does not try the manager's own GPUs first (docs/design.md, "Local first, then the other site?").
/// A manager site's own batch Jobs need a queue of their own beside it (the example's
/// `gpu-batch-local`; `validate` warns without one).
/// With Karmada's dedicated VM as the manager and every GPU site a worker, a job runs at
/// whichever site admits it first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MultiKueue {
    /// Cluster that is the MultiKueue manager, where the queue's jobs are submitted: a site, or
    /// Karmada's dedicated VM by its name (`federation.karmada.vm.name`, with `karmada_host:
    /// dedicated-vm`), whose single-node K3s then runs only Kueue's manager for this queue.
    pub manager: String,
    /// Sites whose clusters run the dispatched jobs, the most preferred first (MultiKueueConfig's
    /// `clusters`; Kueue 0.15 does not promise to honour the order: docs/design.md).
    pub workers: Vec<String>,
    /// ClusterQueue (by name) that dispatches; it must exist at every worker, and at the manager
    /// when it is a site (at the VM fabric makes it from the workers' queues of that name).
    pub queue: String,
}

impl Topology {
    /// Karmada's VM when it is the MultiKueue manager (`multikueue.manager` names it).
    pub fn multikueue_vm(&self) -> Option<&KarmadaVm> {
        let mk = self.multikueue.as_ref()?;
        self.federation
            .karmada
            .vm
            .as_ref()
            .filter(|vm| vm.name == mk.manager && !self.sites.iter().any(|s| s.name == vm.name))
    }
}

/// Kind of AI gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GatewayKind {
    /// TensorZero (config in `tensorzero.toml`).
    Tensorzero,
}

/// The AI gateway.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gateway {
    /// Which gateway.
    pub kind: GatewayKind,
    /// Site whose cluster runs the gateway.
    pub site: String,
    /// Models the gateway serves.
    pub models: Vec<GatewayModel>,
    /// The seed's per-user rate limit ("rate limit do usuario?"), enforced by TensorZero's
    /// `[[rate_limiting.rules]]` against a Postgres or Valkey backend.
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
}

/// A key of a Secret the operator creates in the gateway's namespace (`tensorzero`) at the
/// gateway's site. fabric never creates, reads into a plan, or prints its value: the gateway
/// gets it as an environment variable (`valueFrom.secretKeyRef`), and plan checks that the
/// Secret has the key.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SecretKeyRef {
    /// Name of the Secret, e.g. `tensorzero-cloud`.
    pub secret: String,
    /// Key in the Secret, e.g. `api_key`.
    pub key: String,
}

/// TensorZero provider type of a cloud fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CloudProvider {
    /// OpenAI's API (TensorZero provider `type = "openai"`).
    Openai,
    /// Anthropic's API (TensorZero provider `type = "anthropic"`).
    Anthropic,
}

impl CloudProvider {
    /// TensorZero's provider `type`.
    pub fn tensorzero_type(self) -> &'static str {
        match self {
            CloudProvider::Openai => "openai",
            CloudProvider::Anthropic => "anthropic",
        }
    }
}

/// The seed's cloud fallback ("fallback para cloud se ambos os sites estao lotados"): a cloud
/// model the gateway uses when every site's backend failed.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloudModel {
    /// Cloud provider.
    pub provider: CloudProvider,
    /// The provider's model name, e.g. `gpt-4o-mini`.
    pub model: String,
    /// Where the API key is: a Secret the operator creates (fabric never does).
    pub api_key: SecretKeyRef,
    /// The API's base URL when it is not the provider's own, e.g. an OpenAI-compatible
    /// endpoint `https://llm.example/v1` (TensorZero appends `/chat/completions`, or
    /// `/messages` for Anthropic). The provider's public API when unset.
    #[serde(default)]
    pub api_base: Option<String>,
}

/// Rate-limit backend TensorZero keeps its buckets in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RateLimitBackend {
    /// PostgreSQL (`TENSORZERO_POSTGRES_URL`; the gateway's migrations run before it starts).
    Postgres,
    /// Valkey or Redis (`TENSORZERO_VALKEY_URL`).
    Valkey,
}

/// A rate limit per value of a request tag (the seed: per user, tag `user_id`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Request tag whose every value gets its own limit (TensorZero's `tensorzero::each`).
    #[serde(default = "default_rate_limit_tag")]
    pub tag: String,
    /// Limits as TensorZero names them, `<model_inferences|tokens>_per_<second|minute|hour|day|week|month>`,
    /// each a positive count, e.g. `{ model_inferences_per_minute: 30 }`.
    pub limits: BTreeMap<String, u64>,
    /// The most tokens a reply may have when the request does not say (written as every
    /// variant's `max_tokens`). Needed with a `tokens_*` limit: TensorZero counts a request's
    /// tokens before it runs and refuses one without `max_tokens`.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Where the buckets are kept.
    pub backend: RateLimitBackend,
    /// The backend's URL (with its password): a Secret the operator creates.
    pub url: SecretKeyRef,
}

fn default_rate_limit_tag() -> String {
    "user_id".into()
}

/// A model served by the gateway, with a backend per site.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GatewayModel {
    /// Model name clients ask for, e.g. `llama-3.1-70b`.
    pub name: String,
    /// Service (by name) that serves the model at each site, e.g. `vllm`.
    pub service: String,
    /// Backends: one route per site with its A/B weight.
    pub routes: Vec<Route>,
    /// Sites that are no route, tried in order once every route has failed (the routes already
    /// stand in for one another: TensorZero retries the remaining routes first).
    #[serde(default)]
    pub fallback: Vec<String>,
    /// A cloud model, tried after the fallback sites.
    #[serde(default)]
    pub cloud: Option<CloudModel>,
}

/// One backend of a gateway model.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Site of the backend.
    pub site: String,
    /// Relative A/B weight, positive.
    pub weight: f64,
}
