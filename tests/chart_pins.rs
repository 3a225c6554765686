//! Issue 22, items 2 and 4: every chart fabric installs is referenced in a form K3s's
//! helm-controller can fetch and pinned at a version its publisher lists; the Karmada API's
//! certificate names every address its clients use.
//!
//! The published versions are the trimmed copies in `tests/data/chart-indexes/` (see its
//! README for where each comes from); plan's online check is run against them served from
//! loopback (an HTTP file server for the chart repositories, an OCI registry double with the
//! anonymous token exchange for the OCI charts).

use std::collections::BTreeSet;
use std::path::Path;

use fabric::desired::charts::{ChartPin, pins};
use fabric::providers::charts::{Indexes, index_versions, listed, published, versions_url};
use fabric_testkit::file_server::FileServer;
use fabric_testkit::oci_registry::OciRegistry;
use fabric_testkit::{kube_api, run};
use serde_json::Value;

#[path = "support/topologies.rs"]
mod topologies;
use topologies::TOPOLOGIES;

fn data(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/chart-indexes").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The stored copy of where `pin`'s chart is published: an index file, or an OCI tag list.
fn stored_versions(pin: &ChartPin) -> Vec<String> {
    let chart = pin.source.name();
    let file = match chart {
        "karmada" => "karmada.yaml",
        "cilium" => "cilium.yaml",
        "argo-cd" => "argo-helm.yaml",
        "nvidia-device-plugin" => "nvidia-device-plugin.yaml",
        "kueue" => "kueue-tags.json",
        "kai-scheduler" => "kai-scheduler-tags.json",
        other => panic!("no stored index for chart `{other}`: add a trimmed copy to tests/data/chart-indexes"),
    };
    if file.ends_with(".json") {
        let doc: Value = serde_json::from_str(&data(file)).unwrap();
        doc["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect()
    } else {
        index_versions(&data(file), chart).unwrap()
    }
}

fn load(text: &str) -> fabric::topology::Loaded {
    fabric::topology::load_str("t.yaml", text.to_string()).unwrap()
}

fn objects(t: &fabric::topology::Topology) -> Vec<Value> {
    let g = fabric::catalog::StepGraph::build(&fabric::catalog::Catalog::embedded().unwrap(), t).unwrap();
    g.instances().flat_map(|i| fabric::steps::for_instance(i, t)).filter_map(|r| r.kube_object().cloned()).collect()
}

#[test]
fn every_pin_of_the_topologies_is_published() {
    let mut checked = BTreeSet::new();
    for (name, text) in TOPOLOGIES {
        let l = load(text);
        for pin in pins(&l.topology) {
            let have = stored_versions(&pin);
            assert!(
                listed(&have, &pin.version),
                "{name}: versions.{} = {} is not published ({}); it has: {have:?}",
                pin.key,
                pin.version,
                versions_url(&pin.source, &Indexes::Public)
            );
            checked.insert(pin.source.name());
        }
    }
    // Every chart fabric installs was checked at least once.
    let all: BTreeSet<&str> =
        ["cilium", "karmada", "kueue", "argo-cd", "nvidia-device-plugin", "kai-scheduler"].into_iter().collect();
    assert_eq!(checked, all);
}

#[test]
fn a_version_the_index_does_not_list_is_found() {
    let l = load(include_str!("../topology.example.yaml"));
    let karmada = pins(&l.topology).into_iter().find(|p| p.key == "karmada").unwrap();
    let have = stored_versions(&karmada);
    // The example's pin before issue 22: Karmada publishes no chart 1.15.2.
    assert!(!listed(&have, "1.15.2"), "{have:?}");
    assert!(listed(&have, "1.15.0") && listed(&have, "v1.15.0"));
    let kueue = pins(&l.topology).into_iter().find(|p| p.key == "kueue").unwrap();
    assert!(!listed(&stored_versions(&kueue), "0.15.99"));
}

/// Every HelmChart fabric renders is one of the pins (same chart, source and version), and an
/// OCI chart is never given as `repo` (helm-controller would `helm repo add` it and fail).
#[test]
fn every_helm_chart_has_its_pin_and_the_form_helm_controller_fetches() {
    for (name, text) in TOPOLOGIES {
        let l = load(text);
        let pins = pins(&l.topology);
        let charts: Vec<Value> = objects(&l.topology).into_iter().filter(|o| o["kind"] == "HelmChart").collect();
        assert!(!charts.is_empty(), "{name}");
        for c in &charts {
            let spec = &c["spec"];
            let hc = c["metadata"]["name"].as_str().unwrap();
            let Some(pin) = pins.iter().find(|p| p.helm_chart == hc) else {
                // Only ArgoCD may be left unpinned (`versions.argocd` is optional): Helm then
                // installs the newest, which is published by definition.
                assert!(hc == "argocd" && spec["version"] == "", "{name}: HelmChart {hc} has no pin: {c}");
                continue;
            };
            assert_eq!(spec["chart"], pin.source.chart(), "{name}: {c}");
            assert_eq!(spec.get("repo").and_then(Value::as_str), pin.source.repo_url(), "{name}: {c}");
            assert_eq!(spec["version"], pin.version.as_str(), "{name}: {c}");
            let repo = spec["repo"].as_str().unwrap_or_default();
            assert!(!repo.starts_with("oci://"), "{name}: an OCI registry as repo: {c}");
            if repo.is_empty() {
                assert!(spec["chart"].as_str().unwrap().starts_with("oci://"), "{name}: {c}");
            }
        }
    }
}

/// The Karmada values' `certs.auto.hosts`.
fn cert_hosts(t: &fabric::topology::Topology) -> Vec<String> {
    let karmada =
        objects(t).into_iter().find(|o| o["kind"] == "HelmChart" && o["metadata"]["name"] == "karmada").unwrap();
    let values: Value = serde_saphyr::from_str(karmada["spec"]["valuesContent"].as_str().unwrap()).unwrap();
    values["certs"]["auto"]["hosts"].as_array().unwrap().iter().map(|h| h.as_str().unwrap().to_string()).collect()
}

/// The host of a URL (what the certificate must name).
fn host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', ':']).next().unwrap().to_string()
}

#[test]
fn karmadas_certificate_names_every_address_its_clients_use() {
    let with_server = include_str!("../topology.example.yaml").replace(
        "kubeconfig: { path: ~/.kube/karmada.yaml, context: karmada-apiserver }",
        "kubeconfig: { path: ~/.kube/karmada.yaml, context: karmada-apiserver, server: \"https://karmada.lab.example:32443\" }",
    );
    assert_ne!(with_server, include_str!("../topology.example.yaml"), "the example's Karmada kubeconfig line moved");
    let cases = [
        ("example", include_str!("../topology.example.yaml").to_string()),
        ("example, kubeconfig server", with_server),
        ("multikueue-vm (dedicated VM)", include_str!("data/multikueue-vm.yaml").to_string()),
        ("three-sites", include_str!("data/three-sites.yaml").to_string()),
    ];
    for (name, text) in cases {
        let l = load(&text);
        let t = &l.topology;
        let hosts = cert_hosts(t);
        // The chart's own names stay (karmada-io/karmada charts/karmada/values.yaml).
        for d in ["kubernetes.default.svc", "*.{{ .Release.Namespace }}.svc", "localhost", "127.0.0.1"] {
            assert!(hosts.iter().any(|h| h == d), "{name}: {d} dropped: {hosts:?}");
        }
        // Clients: every Secret fabric fills from Karmada's API names its server
        // (`fabric.io/server`: ArgoCD's cluster, MultiKueue's and the estimators' kubeconfigs).
        let mut clients: Vec<String> = objects(t)
            .iter()
            .filter(|o| o["kind"] == "Secret")
            .filter(|o| {
                o["metadata"]["annotations"]["fabric.io/copy-from"].as_str().is_some_and(|s| s.starts_with("karmada/"))
            })
            .filter_map(|o| o["metadata"]["annotations"]["fabric.io/server"].as_str().map(host))
            .collect();
        // The kubeconfig fabric uses for Karmada, when it names the server.
        clients.extend(t.federation.karmada.kubeconfig.server.as_deref().map(host));
        // The NodePort answers on every node of the cluster that hosts Karmada.
        let (target, site) = fabric::desired::karmada_host(t);
        match t.federation.karmada.vm.as_ref().filter(|vm| target.to_string() == format!("cluster.{}", vm.name)) {
            Some(vm) => clients.push(vm.address.to_string()),
            None => {
                let s = t.sites.iter().find(|s| s.name == site).unwrap();
                clients.extend(s.cluster.nodes.iter().map(|n| n.address.to_string()));
            }
        }
        assert!(!clients.is_empty(), "{name}");
        if name != "example" && name != "three-sites" && !name.contains("server") {
            // The dedicated VM's ArgoCD secret points at the VM.
            assert!(clients.iter().any(|c| c == &t.federation.karmada.vm.as_ref().unwrap().address.to_string()));
        }
        for c in &clients {
            assert!(hosts.contains(c), "{name}: Karmada's certificate lacks {c}: {hosts:?}");
        }
    }
}

/// The stored copies, served as the registries serve them: chart repositories' `index.yaml` by
/// host and path, and the OCI tag lists behind the token exchange, a few tags a page.
fn registries() -> (FileServer, OciRegistry) {
    let karmada = data("karmada.yaml");
    let cilium = data("cilium.yaml");
    let argo = data("argo-helm.yaml");
    let nvidia = data("nvidia-device-plugin.yaml");
    let files = FileServer::start(&[
        ("/raw.githubusercontent.com/karmada-io/karmada/master/charts/index.yaml", karmada.as_bytes()),
        ("/helm.cilium.io/index.yaml", cilium.as_bytes()),
        ("/argoproj.github.io/argo-helm/index.yaml", argo.as_bytes()),
        ("/nvidia.github.io/k8s-device-plugin/index.yaml", nvidia.as_bytes()),
    ]);
    let tags = |f: &str| -> Vec<String> {
        let doc: Value = serde_json::from_str(&data(f)).unwrap();
        doc["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect()
    };
    let oci = OciRegistry::start(
        &[
            ("kueue/charts/kueue", tags("kueue-tags.json")),
            ("nvidia/kai-scheduler/kai-scheduler", tags("kai-scheduler-tags.json")),
        ],
        Some(5),
    );
    (files, oci)
}

#[test]
fn plans_reader_finds_the_published_versions() {
    let (files, oci) = registries();
    let l = load(include_str!("../topology.example.yaml"));
    for pin in pins(&l.topology) {
        let at = if pin.source.repo_url().is_some() { &files.base } else { &oci.base };
        let got = published(&pin.source, &Indexes::Mirror(at.clone())).unwrap_or_else(|e| panic!("{}: {e}", pin.key));
        assert_eq!(got, stored_versions(&pin), "{}", pin.key);
        assert!(listed(&got, &pin.version), "{}", pin.key);
    }
    // The OCI reads asked for a token once per repository, and followed the pages.
    let reqs = oci.requests();
    assert_eq!(reqs.iter().filter(|r| r.starts_with("/token?")).count(), 2, "{reqs:#?}");
    assert!(reqs.iter().any(|r| r.contains("scope=repository%3Akueue%2Fcharts%2Fkueue%3Apull")), "{reqs:#?}");
    assert!(reqs.iter().any(|r| r.contains("tags/list?last=")), "{reqs:#?}");
    // A repository the registry does not have is an error, not an empty list.
    let missing = fabric::desired::charts::ChartSource::oci("oci://ghcr.io/nvidia/none");
    assert!(published(&missing, &Indexes::Mirror(oci.base.clone())).unwrap_err().to_string().contains("404"));
}

/// `fabric plan` (live) refuses a pin its chart's index does not list, at the pin's line, and
/// names nothing when the pins are published.
#[test]
fn plan_refuses_an_unpublished_pin_at_its_line() {
    let (files, _oci) = registries();
    let dir = std::env::temp_dir().join(format!("fabric-chart-pins-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (_franca, _sp, _karmada) = kube_api::fabric_apis(&dir);
    let good = kube_api::example_topology(&dir);
    let bad = good.replace("karmada: 1.15.0", "karmada: 1.15.2");
    assert_ne!(good, bad);
    std::fs::write(dir.join("ssh_config"), "Host *\n    HostName 127.0.0.1\n    Port 9\n    ConnectTimeout 2\n")
        .unwrap();
    let plan = |text: &str| {
        std::fs::write(dir.join("topology.yaml"), text).unwrap();
        let env = [("FABRIC_CHART_INDEXES", files.base.as_str())];
        let args = ["plan", "--step", "C.1", "--with-deps"];
        run::out(&run::fabric_in_env(&dir, &dir.join("topology.yaml"), &dir.join("ssh_config"), &args, &env))
    };
    let text = plan(&bad);
    let line = bad.lines().position(|l| l.contains("karmada: 1.15.2")).unwrap() + 1;
    assert!(text.contains("plan::chart-version"), "{text}");
    assert!(text.contains("karmada 1.15.2 is not published at"), "{text}");
    assert!(text.contains(&format!("topology.yaml:{line}:")), "the pin's line: {text}");
    assert!(text.contains("v1.15.0"), "the help names published versions: {text}");
    let text = plan(&good);
    assert!(!text.contains("plan::chart-version") && !text.contains("not published"), "{text}");
    // Both HelmCharts of C.1 and its dependencies had their index read.
    let reqs = files.requests();
    assert!(reqs.iter().any(|r| r.contains("karmada")) && reqs.iter().any(|r| r.contains("cilium")), "{reqs:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
