//! The K3s skew check against every Node of a cluster, not only the topology's (issue #26):
//! `live::versions::read_kubelets` lists the Nodes of the API double (their kubelets'
//! `status.nodeInfo.kubeletVersion`, as a kubelet reports it), and `fabric validate --observed`
//! refuses a server change that would leave one of them out of the version-skew policy, naming
//! the node, at the `versions.k3s` line.

use fabric::addr::Target;
use fabric::providers::Observed;
use fabric_testkit::{kube_api, run};
use serde_json::json;

/// A Node as its kubelet registers it, with the version it reports.
fn node(name: &str, kubelet: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"nodeInfo": {"kubeletVersion": kubelet, "machineID": "", "systemUUID": "", "bootID": "",
            "kernelVersion": "6.1.0", "osImage": "Debian GNU/Linux 12", "containerRuntimeVersion": "containerd://2.0.5-k3s1",
            "kubeProxyVersion": kubelet, "operatingSystem": "linux", "architecture": "amd64"}}})
}

#[test]
fn a_server_change_is_refused_for_a_node_the_topology_does_not_hold() {
    let dir = std::env::temp_dir().join(format!("fabric-kubelet-skew-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, _sp, _karmada) = kube_api::fabric_apis(&dir);
    franca.put_raw(node("franca-cp1", "v1.32.9+k3s1"));
    franca.put_raw(node("legacy-box", "v1.29.3+k3s1"));
    franca.put_raw(node("lab-laptop", "v1.31.0"));
    let text = kube_api::example_topology(&dir);
    std::fs::write(dir.join("topology.yaml"), &text).unwrap();
    std::fs::write(dir.join("ssh_config"), "").unwrap();
    let t = fabric::topology::load_str("t.yaml", text).unwrap_or_else(|e| panic!("{e}")).topology;
    let config = fabric::transport::ssh_config::SshConfig::load(&dir.join("ssh_config")).unwrap();
    let targets = fabric::live::observe::Targets::from_topology(&t, &config).unwrap();

    // Every Node the cluster lists, with its kubelet's version.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let kubelets = rt.block_on(fabric::live::versions::read_kubelets(&[Target::cluster("franca")], &targets));
    let franca_nodes = &kubelets[&Target::cluster("franca")];
    assert_eq!(franca_nodes.get("legacy-box").map(String::as_str), Some("v1.29.3+k3s1"), "{kubelets:?}");
    assert_eq!(franca_nodes.get("lab-laptop").map(String::as_str), Some("v1.31.0"));

    // The server runs v1.32 (its install read it); the topology pins v1.33.5.
    let mut live = fabric::live::observe::Live { kubelets, ..Default::default() };
    live.observed.insert(
        "host.franca-cp1/command:k3s-install".parse().unwrap(),
        Observed::Present(format!("k3s {} v1.32.9+k3s1\n", "a".repeat(64))),
    );
    let snap = fabric::live::snapshot::Snapshot::new("test", "", live, vec![]);
    std::fs::write(dir.join("state.json"), serde_json::to_string(&snap).unwrap()).unwrap();
    let o = run::fabric_in(
        &dir,
        &dir.join("topology.yaml"),
        &dir.join("ssh_config"),
        &["validate", "--observed", dir.join("state.json").to_str().unwrap()],
    );
    let err = run::out(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("franca: node legacy-box (kubelet v1.29.3+k3s1): more than three minor versions older than the API servers would run (v1.33.5+k3s1)"),
        "{err}"
    );
    assert!(err.contains("may be up to three minor versions older than `kube-apiserver`"), "the rule: {err}");
    let k3s = t.versions.k3s.clone();
    assert!(err.contains("topology.yaml:") && err.contains(&k3s), "at the versions line: {err}");
    assert!(!err.contains("lab-laptop"), "v1.31 is within three minors: {err}");
    assert!(!err.contains("node franca-cp1"), "the install's read speaks for the topology's node: {err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
