//! Issue 34, item 2 and "Bad input": every Kubernetes object fabric renders, for the example and
//! the test topologies, sent to a real kube-apiserver (v1.33.5, `fabric_testkit::realkube`) as a
//! server-side apply dry run with strict field validation, kubectl's default: the server's own
//! OpenAPI and CEL validation of built-in kinds and of the CRDs, defaulting and admission. The
//! CRDs are those of `../shared/specs/crds` (Kueue, Karmada's policies, K3s's HelmChart, KAI
//! Scheduler, Cilium) and ArgoCD's from the pinned argo-cd chart. A misspelled field, a wrong
//! type and a quota that is no quantity are refused with the server's message naming the object
//! and the field.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fabric::catalog::{Catalog, StepGraph};
use fabric::desired::Desired;
use fabric_testkit::realkube::{self, Karmada, KarmadaOptions, Site, SiteOptions};
use serde_json::{Value, json};

/// The CRD files of `../shared/specs/crds` (their folders, recursively), and ArgoCD's CRDs
/// unpacked from the pinned chart into `dir`.
fn crd_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(d).unwrap().flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    // Karmada's CRDs are served by Karmada's own API server (below), not a cluster's.
    let specs = fabric_testkit::repo_root().join("../shared/specs/crds");
    for d in std::fs::read_dir(&specs).unwrap().flatten().map(|e| e.path()).filter(|p| !p.ends_with("karmada")) {
        walk(&d, &mut out);
    }
    let chart = realkube::charts_dir().join("argo-cd-9.1.0.tgz");
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&chart)
        .arg("-C")
        .arg(dir)
        .arg("argo-cd/templates/crds")
        .status()
        .expect("tar");
    assert!(status.success(), "unpack ArgoCD's CRDs from {}", chart.display());
    // The chart's CRD templates are the plain CRDs inside `{{- if .Values.crds.install }}` and
    // optional annotation and label blocks: without those template lines, each is the CRD as
    // the chart installs it by default.
    let mut argo = Vec::new();
    walk(&dir.join("argo-cd/templates/crds"), &mut argo);
    for p in argo {
        let text = std::fs::read_to_string(&p).unwrap();
        let plain: String =
            text.lines().filter(|l| !l.trim_start().starts_with("{{")).map(|l| format!("{l}\n")).collect();
        std::fs::write(&p, plain).unwrap();
        out.push(p);
    }
    out
}

fn dir() -> PathBuf {
    std::env::temp_dir().join(format!("fabric-conformance-{}", std::process::id()))
}

/// One cluster's API server with the CRDs, started once for this binary.
fn site() -> &'static Site {
    static SITE: OnceLock<Site> = OnceLock::new();
    SITE.get_or_init(|| {
        let dir = dir().join("cluster");
        let _ = std::fs::remove_dir_all(&dir);
        let site = Site::start(&dir.join("site"), "conformance", &SiteOptions { no_kwok: true, ..Default::default() });
        for f in crd_files(&dir) {
            let f = f.display().to_string();
            site.kubectl_ok(&["apply", "--server-side", "--field-manager=test", "-f", &f]);
        }
        site.kubectl_ok(&["wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"]);
        site
    })
}

/// Karmada's control plane, started once for this binary.
fn karmada() -> &'static Karmada {
    static KARMADA: OnceLock<Karmada> = OnceLock::new();
    KARMADA.get_or_init(|| Karmada::start(&dir().join("karmada"), &KarmadaOptions::default()))
}

/// Every Kubernetes object fabric renders for `topology` (a path from the repository root).
fn rendered(topology: &str) -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(fabric_testkit::repo_root().join(topology)).unwrap();
    let l = fabric::topology::load_str(topology, text).unwrap_or_else(|e| panic!("{topology}: {e}"));
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &l.topology).unwrap();
    let mut objects = vec![];
    for inst in g.instances() {
        for r in fabric::steps::for_instance(inst, &l.topology) {
            if let Desired::Kube(v) = r.desired {
                objects.push((r.address.to_string(), v));
            }
        }
    }
    objects
}

/// Sends `objects` to `s` as a server-side apply dry run by fabric's field manager, each
/// namespace made first; the server's refusals (kubectl names the object and the field).
fn dry_run(s: &Site, objects: &[Value]) -> Result<String, String> {
    let namespaces: std::collections::BTreeSet<&str> =
        objects.iter().filter_map(|o| o["metadata"]["namespace"].as_str()).collect();
    // One kubectl for all of them (an apply of an empty list would be refused).
    let namespaces: Vec<Value> = namespaces
        .into_iter()
        .map(|ns| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .collect();
    if !namespaces.is_empty() {
        s.apply(&namespaces, "test");
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let out = s.kubectl_with_input(
        &["apply", "--server-side", "--dry-run=server", "--field-manager=fabric", "-f", "-"],
        Some(&list.to_string()),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() { Ok(stdout) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

/// Every object of `topology` passes its dry run, at Karmada's API or a cluster's as its address
/// says; returns how many, by kind.
fn conforms(topology: &str) -> std::collections::BTreeMap<String, usize> {
    let mut kinds = std::collections::BTreeMap::new();
    let (mut at_karmada, mut at_clusters) = (Vec::new(), Vec::new());
    for (address, o) in rendered(topology) {
        let kind =
            format!("{}/{}", o["apiVersion"].as_str().unwrap_or_default(), o["kind"].as_str().unwrap_or_default());
        *kinds.entry(kind).or_insert(0) += 1;
        if address.starts_with("karmada/") { at_karmada.push(o) } else { at_clusters.push(o) }
    }
    assert!(!at_karmada.is_empty() && !at_clusters.is_empty(), "{topology}: {kinds:?}");
    for (server, objects) in [(&karmada().0, at_karmada), (site(), at_clusters)] {
        let answer = dry_run(server, &objects)
            .unwrap_or_else(|e| panic!("{topology}: {} refuses what fabric renders:\n{e}", server.name));
        // kubectl says "serverside-applied (server dry run)" once per object.
        assert_eq!(answer.matches("(server dry run)").count(), objects.len(), "{topology}: {answer}");
    }
    kinds
}

#[test]
fn every_kubernetes_object_of_the_example_is_accepted_by_a_real_api_server() {
    let kinds = conforms("topology.example.yaml");
    for k in [
        "kueue.x-k8s.io/v1beta2/ClusterQueue",
        "kueue.x-k8s.io/v1beta2/LocalQueue",
        "kueue.x-k8s.io/v1beta2/MultiKueueCluster",
        "helm.cattle.io/v1/HelmChart",
        "policy.karmada.io/v1alpha1/PropagationPolicy",
        "policy.karmada.io/v1alpha1/ClusterTaintPolicy",
        "cluster.karmada.io/v1alpha1/Cluster",
        "argoproj.io/v1alpha1/Application",
        "batch/v1/Job",
        "v1/Secret",
    ] {
        assert!(kinds.contains_key(k), "the example renders {k}: {kinds:?}");
    }
}

#[test]
fn every_kubernetes_object_of_three_sites_is_accepted_by_a_real_api_server() {
    conforms("tests/data/three-sites.yaml");
}

#[test]
fn every_kubernetes_object_of_a_multikueue_manager_on_karmadas_vm_is_accepted_by_a_real_api_server() {
    conforms("tests/data/multikueue-vm.yaml");
}

fn first(kind: &str) -> Value {
    rendered("topology.example.yaml")
        .into_iter()
        .map(|(_, o)| o)
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

/// What the operator sees when the server refuses `obj`: fabric's own apply (server-side,
/// strict field validation) against the server, which must refuse it.
async fn refusal(obj: &Value) -> String {
    let s = if obj["apiVersion"].as_str().is_some_and(|a| a.contains("karmada.io")) { &karmada().0 } else { site() };
    let ns = obj["metadata"]["namespace"].as_str();
    if let Some(ns) = ns {
        s.apply(&[json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})], "test");
    }
    let access = fabric::providers::kube::KubeAccess::new(s.kubeconfig.to_str().unwrap(), None);
    let target = fabric::addr::Target::cluster("conformance");
    let client = fabric::providers::kube::client(&target, &access).await.expect("a client");
    let e = fabric::providers::kube::apply(&client, obj, false).await.expect_err("the server refuses it");
    e.to_string()
}

#[tokio::test]
async fn a_misspelled_field_a_wrong_type_and_a_bad_quantity_are_refused_with_the_object_and_field() {
    // Kueue: nominalQuota → nominalquota.
    let mut cq = first("ClusterQueue");
    let name = cq["metadata"]["name"].as_str().unwrap().to_string();
    let res = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].as_object_mut().unwrap();
    let q = res.remove("nominalQuota").unwrap();
    res.insert("nominalquota".into(), q);
    let err = refusal(&cq).await;
    // (kube-apiserver refuses it while building the typed patch of server-side apply, as a 500
    // that names the object and the field path.)
    assert!(
        err.contains("field not declared in schema") && err.contains("nominalquota") && err.contains(&name),
        "{err}"
    );
    // A quota that is no quantity.
    let mut cq = first("ClusterQueue");
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = json!("lots");
    let err = refusal(&cq).await;
    assert!(err.contains("nominalQuota") && err.contains(&name), "{err}");
    // Karmada: tolerationSeconds as a string.
    let mut pp = first("PropagationPolicy");
    let tolerations = pp["spec"]["placement"]["clusterTolerations"].as_array_mut().expect("tolerations");
    tolerations[0]["tolerationSeconds"] = json!("300");
    let err = refusal(&pp).await;
    assert!(err.contains("tolerationSeconds"), "{err}");
    // K3s: valuesContent misspelled.
    let mut hc = first("HelmChart");
    let spec = hc["spec"].as_object_mut().unwrap();
    let v = spec.remove("valuesContent").unwrap();
    spec.insert("valueContent".into(), v);
    assert!(refusal(&hc).await.contains("valueContent"));
    // Kueue v1beta1's `cohort` is gone in v1beta2.
    let mut cq = first("ClusterQueue");
    cq["spec"]["cohort"] = json!("x");
    assert!(refusal(&cq).await.contains("cohort"));
    // A name over 63 characters where Kubernetes wants a DNS label (a Service's).
    let mut svc = first("Service");
    svc["metadata"]["name"] = json!("s".repeat(64));
    let err = refusal(&svc).await;
    assert!(err.contains("metadata.name") && err.contains("63"), "{err}");
}

/// The files `fabric render` writes (what an operator reviews or commits) parse back into the
/// objects the server accepts, and their HelmCharts' values are YAML.
#[test]
fn the_rendered_files_parse_back_into_objects_the_server_accepts() {
    let text = std::fs::read_to_string(fabric_testkit::repo_root().join("topology.example.yaml")).unwrap();
    let l = fabric::topology::load_str("topology.example.yaml", text).unwrap();
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &l.topology).unwrap();
    let options = serde_saphyr::Options::default();
    let mut objects = Vec::new();
    for a in fabric::operation::render::render(&g, &l.topology).iter().filter(|a| a.path.ends_with(".yaml")) {
        let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(&a.content, options.clone())
            .unwrap_or_else(|e| panic!("{}: {e}", a.path));
        for d in docs.into_iter().filter(|d| d.get("apiVersion").is_some()) {
            if let Some(values) = d["spec"]["valuesContent"].as_str() {
                let _: Vec<Value> = serde_saphyr::from_multiple_with_options(values, options.clone())
                    .unwrap_or_else(|e| panic!("{} valuesContent: {e}", a.path));
            }
            objects.push(d);
        }
    }
    assert!(objects.len() >= 29, "{} objects in the rendered files", objects.len());
    // Karmada's kinds to Karmada's API, the rest to a cluster's (`render` writes Karmada's
    // objects, the Secrets it copies from the members included, under `karmada/`).
    let (at_karmada, at_clusters): (Vec<Value>, Vec<Value>) =
        objects.into_iter().partition(|o| o["apiVersion"].as_str().is_some_and(|a| a.contains("karmada.io")));
    for (server, objects) in [(&karmada().0, at_karmada), (site(), at_clusters)] {
        let answer = dry_run(server, &objects).unwrap_or_else(|e| panic!("the rendered files at {}: {e}", server.name));
        assert_eq!(answer.matches("(server dry run)").count(), objects.len(), "{answer}");
    }
}
