//! What an ArgoCD Application syncs is only manifests its destination serves
//! (`consistency::argocd-serves`), and nothing it syncs is also applied by fabric
//! (`consistency::argocd-owner`): every object has one owner.
//!
//! Read from the Application itself: its `spec.source.path` (with `directory.recurse`) over the
//! rendered files' folders, and its `spec.destination` (`in-cluster`, or a cluster secret of
//! the same target whose `fabric.io/cluster-name` is the destination's name and whose copy
//! source says which API it reaches). ArgoCD's directory source reads `*.yaml`, `*.yml` and
//! `*.json` files as manifests; a YAML file that is no object (a Helm values file) fails the sync.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Input, names::kind_name, origin};
use crate::addr::{Address, Target};
use crate::desired::objects::{CLUSTER_NAME, COPY_FROM};
use crate::desired::refs::{Fact, Thing, group_of};
use crate::desired::{Desired, ExtraFile, Resource};
use crate::topology::problem::Problem;

/// Whether fabric applies `r` itself (plan and apply diff and apply it). The lead's owner split
/// (issue 12, item 2) marks what only ArgoCD syncs: this is the one place that must read that mark.
pub fn applied_by_fabric(r: &Resource) -> bool {
    matches!(r.desired, Desired::Kube(_))
}

pub fn check(input: &Input, out: &mut Vec<Problem>) {
    let all: Vec<&Resource> = input.resources().map(|(_, r)| r).collect();
    for app in all.iter().filter(|r| r.kube_object().is_some_and(|o| o["kind"] == "Application")) {
        check_app(input, &all, app, out);
    }
}

fn check_app(input: &Input, all: &[&Resource], app: &Resource, out: &mut Vec<Problem>) {
    let Some(o) = app.kube_object() else { return };
    let src = &o["spec"]["source"];
    let Some(dir) = src["path"].as_str() else { return };
    let recurse = src["directory"]["recurse"].as_bool().unwrap_or(false);
    let synced = |file: &str| is_synced(file, dir, recurse);
    let (at, name) = (origin(input.t, app, None), kind_name(app));
    let objects: Vec<&Resource> = all.iter().copied().filter(|r| r.file.as_deref().is_some_and(synced)).collect();
    let object_files: BTreeSet<&str> = objects.iter().filter_map(|r| r.file.as_deref()).collect();
    // Files that are no resource of fabric's: values files, or manifests only ArgoCD applies.
    let others: Vec<&ExtraFile> = input
        .desired
        .values()
        .flat_map(|p| &p.files)
        .filter(|f| synced(&f.path) && !object_files.contains(f.path.as_str()))
        .collect();
    let dest = destination(all, app, o);
    let is_served = |group: &str| dest.as_ref().is_none_or(|d| served(input, d, group));
    let mut not_manifests = Vec::new();
    let mut unserved = Vec::new();
    for f in &others {
        match manifest_groups(&f.content) {
            None => not_manifests.push(f.path.clone()),
            Some(groups) => {
                unserved.extend(groups.iter().filter(|g| !is_served(g)).map(|g| format!("{g} ({})", f.path)))
            }
        }
    }
    for r in &objects {
        let group = r.kube_object().map(|o| group_of(o["apiVersion"].as_str().unwrap_or_default()).to_string());
        if group.is_some_and(|g| !is_served(&g)) {
            unserved.push(format!("{} ({})", kind_name(r), r.file.as_deref().unwrap_or_default()));
        }
    }
    not_manifests.sort();
    let owned: Vec<String> = objects
        .iter()
        .filter(|r| applied_by_fabric(r))
        .map(|r| format!("{} ({})", kind_name(r), r.file.as_deref().unwrap_or_default()))
        .collect();
    let dest_text = dest.map(|d| d.to_string()).unwrap_or_else(|| "its destination".into());
    if !not_manifests.is_empty() {
        let message = format!(
            "{name} syncs {} file(s) of `{dir}` that are no manifests: {}",
            not_manifests.len(),
            few(&not_manifests)
        );
        out.push(problem("consistency::argocd-serves", &at, message, "point the Application at a folder of manifests only (values files belong beside the charts fabric applies)"));
    }
    if !unserved.is_empty() {
        let message =
            format!("{name} syncs {} object(s) that {dest_text} does not serve: {}", unserved.len(), few(&unserved));
        out.push(problem("consistency::argocd-serves", &at, message, "sync only kinds the destination serves (Karmada serves its own and the core kinds it propagates, not helm.cattle.io)"));
    }
    if !owned.is_empty() {
        let message = format!("{name} syncs {} object(s) that fabric also applies: {}", owned.len(), few(&owned));
        out.push(problem(
            "consistency::argocd-owner",
            &at,
            message,
            "give each object one owner: render ArgoCD's objects into the folder it syncs and fabric's elsewhere",
        ));
    }
}

/// The API groups of a YAML file's documents, or None when a document is no Kubernetes object
/// (no top-level `apiVersion` and `kind`: a Helm values file). Comment-only documents are skipped.
fn manifest_groups(content: &str) -> Option<Vec<String>> {
    let mut groups = Vec::new();
    for doc in content.split("\n---").map(str::trim) {
        let lines: Vec<&str> = doc.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).collect();
        if lines.is_empty() {
            continue;
        }
        let top =
            |key: &str| lines.iter().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().trim_matches('"').to_string());
        let (api, _kind) = (top("apiVersion:")?, top("kind:")?);
        groups.push(group_of(&api).to_string());
    }
    Some(groups)
}

fn problem(code: &'static str, at: &crate::topology::tree::Path, message: String, help: &str) -> Problem {
    Problem::error(code, at.clone(), message).label("synced from here").help(help)
}

/// The first few of a list, and how many more.
fn few<S: AsRef<str>>(items: &[S]) -> String {
    let shown: Vec<&str> = items.iter().take(4).map(AsRef::as_ref).collect();
    match items.len() {
        n if n > 4 => format!("{} and {} more", shown.join(", "), n - 4),
        _ => shown.join(", "),
    }
}

/// Whether ArgoCD's directory source at `dir` reads `file` as a manifest.
fn is_synced(file: &str, dir: &str, recurse: bool) -> bool {
    let dir = dir.trim_matches('/');
    let rest = if dir.is_empty() || dir == "." {
        Some(file)
    } else {
        file.strip_prefix(dir).and_then(|r| r.strip_prefix('/'))
    };
    let manifest = [".yaml", ".yml", ".json"].iter().any(|e| file.ends_with(e));
    rest.is_some_and(|r| manifest && (recurse || !r.contains('/')))
}

/// The API the Application deploys to.
fn destination(all: &[&Resource], app: &Resource, o: &Value) -> Option<Target> {
    let d = &o["spec"]["destination"];
    if d["name"] == "in-cluster" || d["server"] == "https://kubernetes.default.svc" {
        return Some(app.target().clone());
    }
    let name = d["name"].as_str()?;
    all.iter().filter(|r| r.target() == app.target()).filter_map(|r| r.kube_object()).find_map(|s| {
        let a = &s["metadata"]["annotations"];
        (a[CLUSTER_NAME] == name).then(|| a[COPY_FROM].as_str()?.parse::<Address>().ok().map(|x| x.target)).flatten()
    })
}

/// Whether `dest` serves API group `group`.
fn served(input: &Input, dest: &Target, group: &str) -> bool {
    input.exists(&Fact { at: dest.clone(), thing: Thing::Group(group.to_string()) })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::Level;
    use super::super::fixture::Fix;
    use super::*;

    fn app(path: &str) -> Value {
        json!({ "apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": { "name": "a", "namespace": "argocd" },
            "spec": { "source": { "path": path, "directory": { "recurse": true } }, "destination": { "name": "in-cluster" } } })
    }

    fn cm(name: &str) -> Value {
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name, "namespace": "default" } })
    }

    fn chart() -> Value {
        json!({ "apiVersion": "helm.cattle.io/v1", "kind": "HelmChart", "metadata": { "name": "x", "namespace": "kube-system" }, "spec": {} })
    }

    fn argocd_findings(f: &Fix) -> Vec<(&'static str, String)> {
        f.found(Level::Objects).into_iter().filter(|(c, _)| c.contains("::argocd-")).collect()
    }

    #[test]
    fn syncing_what_fabric_applies_is_reported_and_a_separate_folder_is_not() {
        let mut f = Fix::new();
        f.put_file("C.3", Some("franca"), app("apps"), Some("apps/argocd/app.yaml"));
        f.put_file("C.5", Some("franca"), cm("x"), Some("fabric/x.yaml"));
        assert!(
            argocd_findings(&f)
                .iter()
                .any(|(c, m)| *c == "consistency::argocd-owner" && m.contains("Application argocd/a"))
        );
        let mut f = Fix::new();
        f.put_file("C.3", Some("franca"), app("gitops"), Some("fabric/app.yaml"));
        f.put_file("C.5", Some("franca"), cm("x"), Some("fabric/x.yaml"));
        assert_eq!(argocd_findings(&f), vec![]);
    }

    #[test]
    fn unserved_kinds_and_values_files_under_the_path_are_reported() {
        let mut f = Fix::new();
        f.put_file("C.3", Some("sp"), app("apps"), Some("argocd/app.yaml"));
        f.put_file("C.5", Some("sp"), chart(), Some("apps/chart.yaml"));
        let n = f.g.find("C.5").unwrap();
        f.d.get_mut(&n)
            .unwrap()
            .files
            .push(crate::desired::ExtraFile { path: "apps/values.yaml".into(), content: "replicas: 1\n".into() });
        let found = argocd_findings(&f);
        assert!(found.iter().any(|(_, m)| m.contains("that are no manifests: apps/values.yaml")), "{found:?}");
        // helm.cattle.io is served in a K3s cluster (in-cluster here): only the owner finding.
        assert!(!found.iter().any(|(_, m)| m.contains("does not serve")), "{found:?}");
        assert!(is_synced("apps/a/b.yaml", "apps", true) && !is_synced("apps/a/b.yaml", "apps", false));
        assert!(!is_synced("apps/tensorzero.toml", "apps", true) && !is_synced("appsx/a.yaml", "apps", true));
    }

    #[test]
    fn manifests_only_argocd_applies_are_read_from_their_files() {
        assert_eq!(
            manifest_groups("# x\napiVersion: apps/v1\nkind: Deployment\n---\napiVersion: v1\nkind: Service\n"),
            Some(vec!["apps".into(), "".into()])
        );
        assert_eq!(manifest_groups("# Rendered\ncontrollerManager:\n  replicas: 1\n"), None);
        // A manifest only ArgoCD applies (a file, no resource of fabric's): no owner finding,
        // but its kind must be served.
        let mut f = Fix::new();
        f.put_file("C.3", Some("sp"), app("argo"), Some("fabric/app.yaml"));
        let n = f.g.find("C.5").unwrap();
        let file = |c: &str| crate::desired::ExtraFile { path: "argo/x.yaml".into(), content: c.into() };
        f.d.get_mut(&n).unwrap().files.push(file("apiVersion: apps/v1\nkind: Deployment\n"));
        assert_eq!(argocd_findings(&f), vec![]);
        f.d.get_mut(&n).unwrap().files[0] = file("apiVersion: example.io/v1\nkind: Thing\n");
        let found = argocd_findings(&f);
        assert!(found.iter().any(|(_, m)| m.contains("does not serve: example.io (argo/x.yaml)")), "{found:?}");
    }

    #[test]
    fn the_destination_is_read_from_the_cluster_secret_the_application_names() {
        let mut to_karmada = app("apps");
        to_karmada["spec"]["destination"] = json!({ "name": "karmada" });
        let secret = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "k", "namespace": "argocd",
            "annotations": { CLUSTER_NAME: "karmada", COPY_FROM: "karmada/kube-system/argocd-manager-token" } } });
        let mut f = Fix::new();
        f.put_file("C.3", Some("franca"), to_karmada.clone(), Some("argocd/app.yaml")).put(
            "C.3",
            Some("franca"),
            secret,
        );
        f.put_file("C.5", Some("sp"), chart(), Some("apps/chart.yaml"));
        let found = argocd_findings(&f);
        assert!(
            found.iter().any(|(_, m)| m.contains("1 object(s) that karmada does not serve: HelmChart kube-system/x")),
            "{found:?}"
        );
        // A core kind is served by Karmada once its chart runs.
        let mut f = Fix::new();
        let karmada = json!({ "apiVersion": "helm.cattle.io/v1", "kind": "HelmChart", "metadata": { "name": "karmada", "namespace": "kube-system" },
            "spec": { "chart": "karmada", "targetNamespace": "karmada-system" } });
        f.put("C.1", Some("franca"), karmada).put_file("C.3", Some("franca"), to_karmada, Some("argocd/app.yaml"));
        f.put_file("C.5", None, cm("x"), Some("apps/cm.yaml"));
        assert!(!argocd_findings(&f).iter().any(|(_, m)| m.contains("does not serve")), "{:?}", argocd_findings(&f));
    }
}
