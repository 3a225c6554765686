//! ArgoCD's objects (C.3): its chart, the Application syncing the repository's services, and
//! the cluster secret naming the Karmada API.
//!
//! The upstream facts they rely on:
//! - Applications are [`APPLICATION_API`] (`argoproj.io/v1alpha1`). `../shared/specs` has no
//!   ArgoCD CRD: the conformance test lists Application among the kinds it cannot validate
//!   (not covered there). An Application's
//!   `destination.name` names a cluster secret's cluster, and [`IN_CLUSTER_SERVER`] is the
//!   cluster ArgoCD runs in.
//! - ArgoCD takes a Secret labelled [`SECRET_TYPE_LABEL`]` = cluster` as a cluster it deploys to;
//!   fabric fills its `name`, `server` and `config` at apply time from the copy annotations
//!   (`providers::secrets`, `argocd-cluster`), never rendered.
//! - The argo-cd chart installs its CRDs with its defaults (`charts::ARGOCD_CHART`).

use serde_json::{Value, json};

use super::objects::*;
use crate::topology::Topology;

/// ArgoCD's Application API version.
pub const APPLICATION_API: &str = "argoproj.io/v1alpha1";
/// The label that makes a Secret an ArgoCD cluster (value `cluster`).
pub const SECRET_TYPE_LABEL: &str = "argocd.argoproj.io/secret-type";
/// The API server of the cluster ArgoCD runs in, as an Application's destination names it.
pub const IN_CLUSTER_SERVER: &str = "https://kubernetes.default.svc";

/// ArgoCD's cluster secret `karmada-api` in `ns` (option A): rendered without data; fabric makes
/// it at apply time from the token of `copy_from` (`<target>/<namespace>/<name>`) for `server`.
pub fn karmada_cluster_secret(t: &Topology, ns: &str, copy_from: String, server: &str) -> Value {
    let mut secret = secret_placeholder(t, "karmada-api", ns, "Opaque");
    secret["metadata"]["labels"][SECRET_TYPE_LABEL] = json!("cluster");
    secret["metadata"]["annotations"] = json!({
        COPY_FROM: copy_from,
        COPY_AS: "argocd-cluster",
        SERVER: server,
        CLUSTER_NAME: "karmada",
    });
    secret
}

/// Where an ArgoCD Application sends what it syncs (C.3): the Karmada API (option A, through
/// the cluster secret fabric makes) or the cluster ArgoCD runs in (option B).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgoDestination<'a> {
    Karmada,
    InCluster { site: &'a str },
}

/// The ArgoCD Application syncing the repository's services (C.3). Only `federation.argocd.path`
/// is synced (with option B, its folder for the site): the manifests of the services, never what
/// fabric renders and applies. Pruning and self-heal are safe because of that split.
pub fn argocd_application(t: &Topology, to: ArgoDestination<'_>) -> Value {
    let a = &t.federation.argocd;
    let base = a.path.trim_matches('/');
    let (path, destination) = match to {
        ArgoDestination::Karmada => (base.to_string(), json!({ "name": "karmada", "namespace": "default" })),
        ArgoDestination::InCluster { site } => {
            (format!("{base}/{site}"), json!({ "server": IN_CLUSTER_SERVER, "namespace": "default" }))
        }
    };
    with(
        object(t, APPLICATION_API, "Application", "fabric-apps", Some(&a.namespace)),
        "spec",
        json!({
            "project": "default",
            "source": { "repoURL": a.repo, "targetRevision": a.revision, "path": path, "directory": { "recurse": true } },
            "destination": destination,
            "syncPolicy": { "automated": { "prune": true, "selfHeal": true } },
        }),
    )
}

/// ArgoCD itself (C.3): the argo-cd chart, pinned, installed through the K3s HelmChart with the
/// chart's defaults (its CRDs included).
pub fn argocd_helm_chart(t: &Topology) -> Value {
    let version = t.versions.argocd.as_deref().unwrap_or_default();
    helm_chart(t, "argocd", &ARGOCD_CHART, version, &t.federation.argocd.namespace, &json!({}))
}
