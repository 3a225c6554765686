//! Issue 22, item 5: plan reads, over SSH, whether each GPU node has the NVIDIA driver loaded and
//! the container toolkit where K3s looks for it (k3s-io/k3s pkg/agent/containerd/nvidia.go), and
//! D.1 is refused, naming the node, when one lacks them (or its running K3s started without the
//! runtime); apply then changes nothing. Real sshd
//! hosts in the lab: sp's GPU node has both (a driver version file and the runtime, made in its
//! own mount namespace only), franca's has neither. Needs root (network namespaces).

use fabric_testkit::{kube_api, lab, run};

use run::out;

const TOPOLOGY: &str = include_str!("data/lab-full.yaml");

#[test]
fn d1_is_refused_for_a_gpu_node_without_the_nvidia_runtime() {
    let lab = lab::Lab::up("gr", "10.222", &[], &[]);
    let dir = std::env::temp_dir().join(format!("fabric-gpu-runtime-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, sp, _karmada) = kube_api::fabric_apis(&dir);
    // lab-full's SP GPU node has joined too (`fabric_apis` registers the example's nodes).
    sp.register_nodes(&["sp-gpu1"]);
    // The GPU nodes are reached over SSH at the lab's LAN hosts.
    let text = TOPOLOGY
        .replace(
            "{ name: franca-gpu1, role: gpu, address: 172.30.1.21,",
            "{ name: franca-gpu1, role: gpu, address: 172.30.1.21, ssh: { host: franca-lan },",
        )
        .replace(
            "{ name: sp-gpu1, role: gpu, address: 172.30.2.21,",
            "{ name: sp-gpu1, role: gpu, address: 172.30.2.21, ssh: { host: sp-lan },",
        );
    assert_eq!(text.matches("ssh: { host: franca-lan }").count(), 2, "the lab topology's GPU node lines moved");
    assert_eq!(text.matches("ssh: { host: sp-lan }").count(), 2, "the lab topology's GPU node lines moved");
    std::fs::write(dir.join("topology.yaml"), kube_api::with_test_kubeconfigs(&text, &dir)).unwrap();

    // sp-lan: the driver's version file and the toolkit's runtime, in sp-lan's mount namespace
    // only (a tmpfs over /proc/driver, an overlay over /usr/bin; the machine's stay as they are).
    let state = lab.dir.join("hosts/sp-lan");
    let setup = format!(
        "set -e; mount -t tmpfs gpu-proc /proc/driver; mkdir -p /proc/driver/nvidia; \
         echo 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.0' > /proc/driver/nvidia/version; \
         mkdir -p {s}/usr-bin-up {s}/usr-bin-work; \
         mount -t overlay gpu-usr-bin -o lowerdir=/usr/bin,upperdir={s}/usr-bin-up,workdir={s}/usr-bin-work /usr/bin; \
         printf '#!/bin/sh\\n' > /usr/bin/nvidia-container-runtime; chmod 0755 /usr/bin/nvidia-container-runtime",
        s = state.display()
    );
    let o = lab.exec("sp-lan", &setup);
    assert!(o.status.success(), "{}", out(&o));
    // Only there: the machine (and so franca-lan) has no NVIDIA runtime.
    assert!(!std::path::Path::new("/usr/bin/nvidia-container-runtime").exists(), "this machine has an NVIDIA runtime");
    let o = lab.exec("franca-lan", "test -e /usr/bin/nvidia-container-runtime && echo present || echo absent");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "absent");

    let fabric = |args: &[&str]| run::fabric_in(&dir, &dir.join("topology.yaml"), &lab.ssh_config(), args);
    let args = ["--step", "D.1", "--with-deps"];
    let o = fabric(&[&["plan"][..], &args].concat());
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("GPU node franca-gpu1: no NVIDIA driver loaded"), "{text}");
    assert!(text.contains("no NVIDIA container toolkit where K3s looks"), "{text}");
    assert!(!text.contains("GPU node sp-gpu1"), "sp's GPU node has both: {text}");
    assert!(text.contains("1 selected step(s) refused"), "{text}");

    // Apply refuses the same way before changing anything.
    let before = (franca.objects().len(), sp.objects().len());
    let o = fabric(&[&["apply"][..], &args, &["--auto-approve"]].concat());
    let text = out(&o);
    assert!(!o.status.success(), "{text}");
    assert!(text.contains("GPU node franca-gpu1"), "{text}");
    assert_eq!((franca.objects().len(), sp.objects().len()), before, "apply changed something: {text}");

    // With franca's node ready too, D.1 is no longer refused.
    let o = lab.exec(
        "franca-lan",
        &setup.replace(&state.display().to_string(), &lab.dir.join("hosts/franca-lan").display().to_string()),
    );
    assert!(o.status.success(), "{}", out(&o));
    // ...unless K3s already runs there and started before the runtime was installed: its
    // containerd config has no `nvidia` runtime (k3s pkg/agent/templates), so K3s must restart.
    let config = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml";
    let write_config = |runtime: &str| {
        let cmd = format!(
            "mkdir -p $(dirname {config}) && printf '%s\\n' 'version = 3' \
             \"[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.'{runtime}']\" > {config}"
        );
        let o = lab.exec("franca-lan", &cmd);
        assert!(o.status.success(), "{}", out(&o));
    };
    write_config("runc");
    let o = fabric(&[&["plan"][..], &args].concat());
    let text = out(&o);
    assert!(text.contains("GPU node franca-gpu1: K3s started before the NVIDIA runtime was there"), "{text}");
    assert!(text.contains("restart K3s on the node"), "{text}");
    write_config("nvidia");
    let o = fabric(&[&["plan"][..], &args].concat());
    let text = out(&o);
    assert!(!text.contains("GPU node franca-gpu1"), "{text}");
    assert!(!text.contains("step(s) refused"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
