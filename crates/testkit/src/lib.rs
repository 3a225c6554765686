//! `fabric-testkit`: the test doubles and harnesses of fabric's integration tests, benches and the
//! example `vyos_double`, compiled once as a dev-only crate of the workspace (it does not depend on
//! `fabric`).
//!
//! * [`kube_api`]: an in-process kube-apiserver test double (`kube_api.md` beside it), and
//!   [`kube_api_faults`]: the faults it can be told to meet (throttling, unavailable, dropped
//!   connections, stalls);
//! * [`kube_schema`]: Kubernetes objects validated against the upstream CRD schemas;
//! * [`kube_builtin`]: what kube-apiserver does to built-in kinds (canonical quantities, defaults,
//!   list types), from the v1.33 definitions;
//! * [`daemonset`]: the DaemonSet controller's Pods and their kubelets' status;
//! * [`workloads`]: the Deployment, ReplicaSet and StatefulSet controllers' rules and the
//!   scheduler's filters (their glue on the API double's state: `kube_api_workloads.rs`);
//! * [`helm_charts`], [`helm_workloads`]: what the charts fabric installs create, for the helm-controller;
//! * [`karmada`]: Karmada's propagation of templates to its members, overriders, status back;
//! * [`argocd`]: ArgoCD's application controller over a stand-in repository folder;
//! * [`vyos_spec`]: VyOS commands checked against VyOS's interface definitions (the VyOS test
//!   double itself is the example `vyos_double`, described in `vyos_double.md` beside it);
//! * [`file_server`]: files over HTTP on loopback (the K3s bundle fetched by URL, chart indexes);
//! * [`oci_registry`]: an OCI registry's tag lists behind the anonymous token exchange;
//! * [`lab`]: the network-namespace lab (`tests/lab/lab.sh`);
//! * [`k3s_node`]: a Flannel K3s node as it is before fabric moves it, on a lab host;
//! * [`realkube`]: real control planes per site (kube-apiserver, controller manager, scheduler,
//!   kine, kwok, helm-controller), built from Go modules by `scripts/realkube.sh build`;
//! * [`run`]: running the `fabric` binary;
//! * [`wan_proxy`]: the benches' userspace WAN delay in front of lab hosts' sshd.

use std::path::Path;

pub mod argocd;
pub mod cilium_mesh;
pub mod daemonset;
pub mod file_server;
pub mod helm_charts;
pub mod helm_workloads;
pub mod k3s_node;
pub mod kai;
pub mod karmada;
pub mod kube_api;
pub mod kube_api_faults;
pub mod kube_builtin;
pub mod kube_schema;
pub mod lab;
pub mod oci_registry;
pub mod realkube;
pub mod run;
pub mod tmpfs;
pub mod vyos_spec;
pub mod wan_proxy;
pub mod workloads;

/// The repository root (the root package `fabric`, two levels above this crate): where
/// `tests/lab/` is, and what `../shared/specs` is relative to.
pub fn repo_root() -> &'static Path {
    let testkit = Path::new(env!("CARGO_MANIFEST_DIR"));
    testkit.parent().and_then(Path::parent).expect("crates/testkit lies two levels below the repository root")
}
