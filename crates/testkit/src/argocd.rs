//! ArgoCD's application controller, as one reconcile a test calls ([`sync`]): every Application
//! of the API it runs in syncs a directory of a stand-in Git repository (a local folder; nothing
//! is fetched) into its destination and reports what it sees, so the `Synced`/`Healthy` that
//! `fabric verify` reads is made from the objects, not written by the test.
//!
//! What it follows (argoproj/argo-cd and argoproj/gitops-engine):
//!
//! * who runs it: ArgoCD as the argo-cd chart installs it (argoproj/argo-helm `charts/argo-cd`):
//!   an Application is reconciled only while a Ready Pod of the chart's application controller
//!   StatefulSet runs in its namespace, and its source rendered only while a Ready repo-server Pod
//!   does (else `ComparisonError`); those Pods are the API double's, made from the objects the
//!   helm-controller double rendered from fabric's HelmChart, so a missing, failed or unschedulable
//!   ArgoCD install leaves the Application without status;
//! * the source: `spec.source.path` of the repository, its `.yaml`, `.yml` and `.json` files,
//!   in subfolders too only with `directory.recurse: true` (ArgoCD's directory source); a
//!   `spec.source.repoURL` other than the one the test serves is `ComparisonError`;
//! * the destination: `spec.destination.name`, the cluster Secret of ArgoCD's namespace labelled
//!   `argocd.argoproj.io/secret-type: cluster` whose `name` is that (ArgoCD's declarative cluster
//!   setup; the label is argoproj/argo-cd `common/common.go` `LabelKeySecretType` =
//!   `LabelValueSecretTypeCluster`), or `server: https://kubernetes.default.svc`, ArgoCD's own cluster; a manifest
//!   without a namespace gets `spec.destination.namespace`;
//! * sync: with `syncPolicy.automated` every manifest is applied (manager `argocd-controller`);
//!   the Application is `Synced` when every manifest's fields have the live object's values, else
//!   `OutOfSync`;
//! * health: each resource's by gitops-engine `pkg/health` (`health_deployment.go`: paused is
//!   `Suspended`; `Progressing` until `status.observedGeneration` reaches `metadata.generation`
//!   and the updated, then available replicas reach `spec.replicas`; else `Healthy`; a missing
//!   resource `Missing`; kinds without a health check count nothing), the Application's the
//!   worst of them in `health.go`'s order Healthy < Suspended < Progressing < Missing < Degraded
//!   < Unknown.
//!
//! Not modelled: Helm or Kustomize sources, pruning, sync waves and hooks, other kinds' health
//! checks (StatefulSet, Service of type LoadBalancer, ...), revisions (the test's folder is the
//! revision).
//! The directory-source and sync rules above are from ArgoCD's user guide (directory apps,
//! automated sync), not from a source file read in the session that wrote this line: they are
//! the double's reading, and ArgoCD's repo server and sync are not covered beyond it (fabric
//! writes plain YAML folders without hooks, so it depends on no more).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::kube_api::TestApiServer;

/// A cluster ArgoCD may deploy to, by its cluster Secret's `name`, and its API.
pub type Destination<'a> = (&'a str, &'a TestApiServer);

/// One pass of the application controller in `argocd` (ArgoCD's own cluster) over its
/// Applications: `repo` is the repository `repo_url` names, checked out; `clusters` the APIs of
/// the cluster Secrets' servers. Returns one line per Application (`argocd/fabric-apps: Synced,
/// Healthy (4 resources)`).
pub fn sync(argocd: &TestApiServer, repo_url: &str, repo: &Path, clusters: &[Destination<'_>]) -> Vec<String> {
    let mut events = Vec::new();
    let objects = argocd.objects();
    for mut app in
        objects.iter().filter(|o| o["apiVersion"] == "argoproj.io/v1alpha1" && o["kind"] == "Application").cloned()
    {
        let id = format!("{}/{}", meta(&app, "namespace"), meta(&app, "name"));
        // Nobody reconciles an Application while ArgoCD's application controller is not running.
        let ns = meta(&app, "namespace").to_string();
        if !running(&objects, &ns, CONTROLLER) {
            events.push(format!("{id}: not reconciled: no Ready application controller in {ns}"));
            continue;
        }
        let status = if running(&objects, &ns, REPO_SERVER) {
            reconcile(argocd, &app, repo_url, repo, clusters)
        } else {
            Err(format!("the repo server is not reachable (no Ready {REPO_SERVER} pod in {ns})"))
        };
        let status = match status {
            Ok((sync, health, resources)) => {
                events.push(format!("{id}: {sync}, {health} ({} resources)", resources.len()));
                json!({"sync": {"status": sync}, "health": {"status": health}, "resources": resources})
            }
            Err(e) => {
                events.push(format!("{id}: ComparisonError: {e}"));
                json!({"sync": {"status": "Unknown"}, "health": {"status": "Unknown"},
                    "conditions": [{"type": "ComparisonError", "message": e}]})
            }
        };
        if app["status"] != status {
            app["status"] = status;
            argocd.put_raw_as(app, "argocd-application-controller");
        }
    }
    events
}

/// The argo-cd chart's components this double needs, by the suffix of their pods'
/// `app.kubernetes.io/name` label (`<name>-<component>`, argoproj/argo-helm `charts/argo-cd`
/// `templates/_helpers.tpl`): the application controller (`templates/argocd-application-controller/
/// statefulset.yaml`) reconciles Applications, the repo server (`templates/argocd-repo-server/
/// deployment.yaml`) renders their sources.
const CONTROLLER: &str = "application-controller";
const REPO_SERVER: &str = "repo-server";

/// Whether a Ready Pod of the argo-cd chart's `component` runs in `ns` (made by the API double's
/// StatefulSet or ReplicaSet controller from what the helm-controller double rendered).
fn running(objects: &[Value], ns: &str, component: &str) -> bool {
    objects.iter().any(|o| {
        o["kind"] == "Pod"
            && o["metadata"]["namespace"] == ns
            && o["metadata"]["labels"]["app.kubernetes.io/name"]
                .as_str()
                .is_some_and(|n| n.ends_with(&format!("-{component}")))
            && crate::daemonset::ready(o)
    })
}

fn meta<'a>(o: &'a Value, k: &str) -> &'a str {
    o["metadata"][k].as_str().unwrap_or_default()
}

type Outcome = (String, String, Vec<Value>);

fn reconcile(
    argocd: &TestApiServer,
    app: &Value,
    repo_url: &str,
    repo: &Path,
    clusters: &[Destination<'_>],
) -> Result<Outcome, String> {
    let source = &app["spec"]["source"];
    if source["repoURL"] != repo_url {
        return Err(format!("repository {} not found", source["repoURL"]));
    }
    let dir = repo.join(source["path"].as_str().unwrap_or_default());
    let recurse = source["directory"]["recurse"] == true;
    let dest = destination(argocd, app, clusters)?;
    let default_ns = app["spec"]["destination"]["namespace"].as_str().unwrap_or("default");
    let mut manifests = Vec::new();
    for file in files(&dir, recurse)? {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let docs: Vec<Value> = if file.extension().is_some_and(|e| e == "json") {
            vec![serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?]
        } else {
            serde_saphyr::from_multiple(&text).map_err(|e| format!("{}: {e}", file.display()))?
        };
        for mut d in docs.into_iter().filter(|d| d.is_object()) {
            if d["metadata"]["namespace"].is_null() && namespaced(&d) {
                d["metadata"]["namespace"] = json!(default_ns);
            }
            manifests.push(d);
        }
    }
    if !app["spec"]["syncPolicy"]["automated"].is_null() {
        for m in &manifests {
            dest.put_raw_as(m.clone(), "argocd-controller");
        }
    }
    let mut synced = true;
    let mut health = "Healthy";
    let mut resources = Vec::new();
    for m in &manifests {
        let (av, kind) = (m["apiVersion"].as_str().unwrap_or_default(), m["kind"].as_str().unwrap_or_default());
        let ns = m["metadata"]["namespace"].as_str();
        let live = dest.object(av, kind, ns, meta(m, "name"));
        let in_sync = live.as_ref().is_some_and(|l| contains(l, m));
        synced &= in_sync;
        let h = match &live {
            None => Some("Missing"),
            Some(l) => resource_health(l),
        };
        if let Some(h) = h
            && worse(health, h)
        {
            health = h;
        }
        let mut r =
            json!({"kind": kind, "name": meta(m, "name"), "status": if in_sync { "Synced" } else { "OutOfSync" }});
        if let Some(ns) = ns {
            r["namespace"] = json!(ns);
        }
        if let Some(h) = h {
            r["health"] = json!({"status": h});
        }
        resources.push(r);
    }
    Ok((if synced { "Synced" } else { "OutOfSync" }.into(), health.into(), resources))
}

fn destination<'a>(
    argocd: &'a TestApiServer,
    app: &Value,
    clusters: &[Destination<'a>],
) -> Result<&'a TestApiServer, String> {
    let d = &app["spec"]["destination"];
    if d["server"] == "https://kubernetes.default.svc" {
        return Ok(argocd);
    }
    let name = d["name"].as_str().ok_or("destination without name or in-cluster server")?;
    let b64 = |v: &Value| {
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
    };
    let secret = argocd
        .objects()
        .into_iter()
        .filter(|o| o["kind"] == "Secret" && o["metadata"]["namespace"] == app["metadata"]["namespace"])
        .filter(|o| o["metadata"]["labels"]["argocd.argoproj.io/secret-type"] == "cluster")
        .find(|o| b64(&o["data"]["name"]).as_deref() == Some(name))
        .ok_or(format!("there are no clusters with this name: {name}"))?;
    let server = b64(&secret["data"]["server"]).unwrap_or_default();
    clusters
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, api)| *api)
        .ok_or(format!("cluster {name} ({server}) is not reachable from the test"))
}

fn files(dir: &Path, recurse: bool) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: app path does not exist ({e})", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if recurse {
                out.extend(files(&p, true)?);
            }
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json") {
            out.push(p);
        }
    }
    Ok(out)
}

/// Cluster-scoped kinds the stand-in repository may hold.
fn namespaced(d: &Value) -> bool {
    !matches!(d["kind"].as_str(), Some("Namespace" | "ClusterRole" | "ClusterRoleBinding" | "CustomResourceDefinition"))
}

/// Whether every field of `want` has the same value in `live` (ArgoCD compares what the
/// manifest sets; the live object has more).
fn contains(live: &Value, want: &Value) -> bool {
    match (live, want) {
        (Value::Object(l), Value::Object(w)) => w.iter().all(|(k, v)| l.get(k).is_some_and(|lv| contains(lv, v))),
        (Value::Array(l), Value::Array(w)) => l.len() == w.len() && l.iter().zip(w).all(|(a, b)| contains(a, b)),
        (l, w) => l == w,
    }
}

/// gitops-engine's health of one live resource; `None` for a kind without a check.
fn resource_health(l: &Value) -> Option<&'static str> {
    let group = l["apiVersion"].as_str().unwrap_or_default().split('/').rev().nth(1).unwrap_or("");
    match (group, l["kind"].as_str().unwrap_or_default()) {
        ("apps" | "extensions", "Deployment") => Some(deployment_health(l)),
        _ => None,
    }
}

/// gitops-engine's `getAppsv1DeploymentHealth`.
pub fn deployment_health(d: &Value) -> &'static str {
    if d["spec"]["paused"] == true {
        return "Suspended";
    }
    let st = &d["status"];
    let n = |v: &Value| v.as_i64().unwrap_or(0);
    if n(&d["metadata"]["generation"]) > n(&st["observedGeneration"]) {
        return "Progressing";
    }
    let deadline = st["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Progressing" && c["reason"] == "ProgressDeadlineExceeded");
    if deadline {
        "Degraded"
    } else if d["spec"]["replicas"].as_i64().is_some_and(|r| n(&st["updatedReplicas"]) < r)
        || n(&st["replicas"]) > n(&st["updatedReplicas"])
        || n(&st["availableReplicas"]) < n(&st["updatedReplicas"])
    {
        "Progressing"
    } else {
        "Healthy"
    }
}

fn worse(current: &str, new: &str) -> bool {
    let order = ["Healthy", "Suspended", "Progressing", "Missing", "Degraded", "Unknown"];
    let i = |s: &str| order.iter().position(|o| *o == s).unwrap_or(order.len());
    i(new) > i(current)
}
