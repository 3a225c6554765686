//! Conformance of the rendered artifacts with the upstream specifications in ../shared/specs:
//! every VyOS command against VyOS's interface definitions, Cilium's values against its chart's
//! schema, and what fabric renders for a MultiKueue manager on Karmada's VM. The negative tests
//! show that a misspelled command does fail. (The Kubernetes objects are judged by a real API
//! server: `tests/realkube_conformance.rs`.)

use fabric_testkit::vyos_spec;

use std::path::Path;
use std::sync::OnceLock;

use fabric::catalog::{Catalog, StepGraph};
use fabric::desired::Desired;
use fabric::operation::render::{self, Artifact};
use serde_json::Value;

fn vyos() -> &'static vyos_spec::VyosSpec {
    static S: OnceLock<vyos_spec::VyosSpec> = OnceLock::new();
    S.get_or_init(|| {
        vyos_spec::VyosSpec::from_shared()
            .unwrap_or_else(|e| panic!("the VyOS interface definitions are needed for this test (CI has them): {e}"))
    })
}

struct Rendered {
    objects: Vec<(String, Value)>,
    vyos: Vec<(String, String)>,
    artifacts: Vec<Artifact>,
}

fn read(topology: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(topology)).unwrap()
}

fn rendered(topology: &str) -> Rendered {
    rendered_text(topology, read(topology))
}

fn rendered_text(topology: &str, text: String) -> Rendered {
    let l = fabric::topology::load_str(topology, text).unwrap_or_else(|e| panic!("{topology}: {e}"));
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &l.topology).unwrap();
    let mut objects = vec![];
    let mut vyos = vec![];
    for inst in g.instances() {
        for r in fabric::steps::for_instance(inst, &l.topology) {
            match r.desired {
                Desired::Kube(v) => objects.push((r.address.to_string(), v)),
                Desired::Vyos(cmds) => vyos.extend(cmds.into_iter().map(|c| (r.address.to_string(), c))),
                _ => {}
            }
        }
    }
    Rendered { objects, vyos, artifacts: render::render(&g, &l.topology) }
}

/// MultiKueue's manager on Karmada's VM: Kueue's manager objects there and the workers' queues
/// at the sites.
#[test]
fn a_multikueue_manager_on_karmadas_vm_gets_the_managers_objects() {
    let r = rendered("tests/data/multikueue-vm.yaml");
    let at = |target: &str, kind: &str, name: &str| {
        r.objects.iter().find(|(a, o)| a.starts_with(target) && o["kind"] == kind && o["metadata"]["name"] == name)
    };
    let (_, config) = at("cluster.karmada-vm/", "MultiKueueConfig", "multikueue").expect("the config at the VM");
    assert_eq!(config["spec"]["clusters"], serde_json::json!(["franca", "sp"]), "the topology's order");
    let (_, cq) = at("cluster.karmada-vm/", "ClusterQueue", "gpu-batch").expect("the dispatching queue at the VM");
    // The workers' total: 2 + 2 GPUs, and the cpu and memory of those GPUs' shares (2 × 32
    // cores, 2 × 124 GiB).
    let quota = |i: usize| cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][i]["nominalQuota"].clone();
    assert_eq!(
        [quota(0), quota(1), quota(2)],
        [serde_json::json!("64"), serde_json::json!("248Gi"), serde_json::json!(4)],
        "{cq:#}"
    );
    assert_eq!(cq["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"], "multikueue");
    assert!(cq["spec"].get("cohortName").is_none(), "{cq:#}");
    for w in ["franca", "sp"] {
        assert!(at("cluster.karmada-vm/", "MultiKueueCluster", w).is_some(), "{w}");
        let (_, local) = at(&format!("cluster.{w}/"), "ClusterQueue", "gpu-batch").expect("the worker's own queue");
        assert!(local["spec"].get("admissionChecksStrategy").is_none(), "{w}: {local:#}");
        assert!(at(&format!("cluster.{w}/"), "LocalQueue", "batch").is_some(), "{w}");
    }
    let (_, job) = at("cluster.karmada-vm/", "Job", "fabric-multikueue-test").expect("D.4's Job at the VM");
    assert_eq!(job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "batch");
    let (_, chart) = at("cluster.karmada-vm/", "HelmChart", "kueue").expect("Kueue at the VM");
    assert!(chart["spec"]["valuesContent"].as_str().unwrap().contains("MultiKueue"), "{chart:#}");
    assert!(at("cluster.franca/", "AdmissionCheck", "multikueue").is_none(), "Franca is only a worker");
}

#[test]
fn every_vyos_command_matches_the_interface_definitions() {
    let placeholder = regex::Regex::new(r"'<public-key:router\.[a-z0-9-]+>'").unwrap();
    // The example as it is, with the direct storage path (its own routes, groups and rules), and
    // three sites.
    let direct = read("topology.example.yaml").replace("drbd_cross_site: cilium", "drbd_cross_site: direct");
    for (topology, text) in [
        ("topology.example.yaml", read("topology.example.yaml")),
        ("topology.example.yaml (drbd_cross_site: direct)", direct),
        ("tests/data/three-sites.yaml", read("tests/data/three-sites.yaml")),
    ] {
        let r = rendered_text(topology, text);
        assert!(r.vyos.len() >= 10, "{topology}: {} commands", r.vyos.len());
        let mut failures = vec![];
        for (address, cmd) in &r.vyos {
            // The peer's public key is read from the peer at plan time; a syntactically valid key
            // stands in for the placeholder.
            let cmd = placeholder.replace(cmd, "'Y2VydGFpbmx5IG5vdCBhIHJlYWwga2V5IDEyMzQ1Njc='");
            if let Err(e) = vyos().check(&cmd) {
                failures.push(format!("{address}: {cmd}\n  {e}"));
            }
        }
        assert!(failures.is_empty(), "{topology}: {} commands fail:\n{}", failures.len(), failures.join("\n"));
    }
}

#[test]
fn the_vyos_files_hold_exactly_the_checked_commands() {
    let r = rendered("topology.example.yaml");
    let file = r.artifacts.iter().find(|a| a.path == "config/vyos/wireguard/sp.conf").unwrap();
    // A peer's key the topology does not have yet: its command is there, commented out, after a
    // line that says how to fill it in.
    let commented: Vec<&str> = file.content.lines().filter_map(|l| l.strip_prefix("# set ")).collect();
    assert_eq!(commented, ["interfaces wireguard wg0 peer franca public-key '<public-key:router.franca>'"]);
    assert!(
        file.content.contains("run `fabric apply --step B.1`, which\n# prints it, put it under"),
        "{}",
        file.content
    );
    let in_file: Vec<String> = file
        .content
        .lines()
        .map(|l| l.strip_prefix("# ").filter(|c| c.starts_with("set ")).unwrap_or(l).to_string())
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let from_resources: Vec<&str> =
        r.vyos.iter().filter(|(a, _)| a.starts_with("router.sp/")).map(|(_, c)| c.as_str()).collect();
    let mut a: Vec<&str> = in_file.iter().map(String::as_str).collect();
    let mut b = from_resources.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b, "the file and the resources carry the same commands");
}

/// With the peer's public key in the topology, the file is whole: every line a valid command that
/// VyOS takes as it is, the key included.
#[test]
fn a_key_in_the_topology_makes_the_vyos_file_pasteable() {
    const KEY: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("topology.example.yaml")).unwrap();
    let text = text.replacen("address: 10.0.0.1/30", &format!("address: 10.0.0.1/30\n        public_key: {KEY}"), 1);
    assert!(text.contains(KEY), "the example's franca tunnel address moved");
    let l = fabric::topology::load_str("t.yaml", text).unwrap_or_else(|e| panic!("{e}"));
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &l.topology).unwrap();
    let files = render::render(&g, &l.topology);
    let file = files.iter().find(|a| a.path == "config/vyos/wireguard/sp.conf").unwrap();
    assert!(!file.content.contains("<public-key:"), "{}", file.content);
    assert!(file.content.contains(&format!("set interfaces wireguard wg0 peer franca public-key '{KEY}'\n")));
    for line in file.content.lines().filter(|l| !l.starts_with('#')) {
        vyos().check(line).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
}

/// Every top-level key of the rendered Cilium values is one the chart declares (Helm ignores an
/// unknown key, so a misspelled `mtu` would silently do nothing), and `MTU` is the tunnel's.
#[test]
fn cilium_values_use_keys_the_chart_declares() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/specs/helm/cilium/values.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let props = schema["properties"].as_object().unwrap();
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("topology.example.yaml")).unwrap();
    let t = fabric::topology::load_str("t.yaml", text).unwrap().topology;
    for s in &t.sites {
        let mut v = fabric::desired::cilium::cilium_values(&t, s);
        fabric::desired::objects::merge(&mut v, &fabric::desired::cilium::clustermesh_values(&t, s));
        for key in v.as_object().unwrap().keys() {
            assert!(props.contains_key(key), "{}: `{key}` is not a value of the Cilium chart", s.name);
        }
        assert_eq!(props["MTU"]["type"], "integer");
        assert_eq!(v["MTU"], 1420, "the tunnel's MTU (the example sets none: 1420)");
    }
    assert!(!props.contains_key("mtu"), "a misspelling would be caught");
}

#[test]
fn a_misspelled_vyos_command_fails() {
    let e = vyos()
        .check("set interfaces wireguard wg0 peer sp pubkey 'Y2VydGFpbmx5IG5vdCBhIHJlYWwga2V5IDEyMzQ1Njc='")
        .unwrap_err();
    assert!(e.contains("pubkey"), "{e}");
    let e = vyos().check("set interfaces wireguard wg0 port '70000'").unwrap_err();
    assert!(e.contains("70000"), "{e}");
}
