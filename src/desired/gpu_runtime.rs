//! What a GPU node needs before K3s starts on it, so that pods with the `nvidia` RuntimeClass get
//! the GPUs: the NVIDIA driver loaded and the NVIDIA container toolkit's runtime where K3s looks.
//!
//! K3s adds containerd's `nvidia` runtime only when, at its start, it finds a regular file
//! `nvidia-container-runtime` in `/usr/local/nvidia/toolkit/` (the GPU Operator's) or `/usr/bin/`
//! (the package's), in that order (k3s-io/k3s `pkg/agent/containerd/nvidia.go`,
//! `findNvidiaContainerRuntimes`); without it the `nvidia` RuntimeClass's handler does not exist
//! on the node. The toolkit's runtime needs the driver: its kernel module, loaded, publishes
//! `/proc/driver/nvidia/version`. And since K3s looks only when it starts, a K3s that already
//! runs there must have found it: K3s renders each runtime it found into the containerd config it
//! writes, `/var/lib/rancher/k3s/agent/etc/containerd/config.toml`, as a
//! `containerd.runtimes."<name>"` table (`'<name>'` in containerd's version 3 config) (k3s-io/k3s
//! `pkg/agent/templates/templates_linux.go`, the `ExtraRuntimes` range). Plan reads all three
//! over SSH (read only, as root: the config is K3s's) on each GPU node of a site whose D.1 it
//! plans, and D.1 is refused, naming the node, when one is missing. A node where K3s has not
//! written its config yet (not installed) is judged on the first two.

use crate::transport::shell::Sh;

/// Where K3s looks for the runtime, in its order.
pub const TOOLKIT_RUNTIMES: &[&str] =
    &["/usr/local/nvidia/toolkit/nvidia-container-runtime", "/usr/bin/nvidia-container-runtime"];
/// The NVIDIA kernel module's version file: present while the driver is loaded.
pub const DRIVER_FILE: &str = "/proc/driver/nvidia/version";
/// The containerd config K3s writes at its start.
pub const K3S_CONTAINERD_CONFIG: &str = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml";

/// The read-only probe: one line per file, `yes <path>` or `no <path>`; for K3s's containerd
/// config, `yes`/`no` (has the `nvidia` runtime or not), `none` (K3s wrote none) or `unread`.
pub fn probe() -> Sh {
    Sh::lit(
        "for f in /proc/driver/nvidia/version; do if [ -r \"$f\" ]; then echo \"yes $f\"; else echo \"no $f\"; fi; done; \
         for f in /usr/local/nvidia/toolkit/nvidia-container-runtime /usr/bin/nvidia-container-runtime; do \
         if [ -f \"$f\" ]; then echo \"yes $f\"; else echo \"no $f\"; fi; done; \
         f=/var/lib/rancher/k3s/agent/etc/containerd/config.toml; \
         if [ ! -e \"$f\" ]; then echo \"none $f\"; \
         else grep -Eq \"containerd\\.runtimes\\.[\\\"']nvidia[\\\"']\" \"$f\"; r=$?; \
         if [ $r -eq 0 ]; then echo \"yes $f\"; elif [ $r -eq 1 ]; then echo \"no $f\"; else echo \"unread $f\"; fi; fi",
    )
}

/// What the probe found on one node: None when it is ready, else what is missing.
pub fn missing(probe_output: &str) -> Option<String> {
    let has = |path: &str| probe_output.lines().any(|l| l.trim() == format!("yes {path}"));
    let answered = |path: &str| probe_output.lines().any(|l| l.trim().ends_with(&format!(" {path}")));
    if !answered(DRIVER_FILE) || TOOLKIT_RUNTIMES.iter().any(|p| !answered(p)) {
        return Some(format!("the probe's answer is incomplete: {:?}", probe_output.trim()));
    }
    let mut out = Vec::new();
    if !has(DRIVER_FILE) {
        out.push(format!("no NVIDIA driver loaded ({DRIVER_FILE} is absent)"));
    }
    let toolkit = TOOLKIT_RUNTIMES.iter().any(|p| has(p));
    if !toolkit {
        out.push(format!("no NVIDIA container toolkit where K3s looks ({})", TOOLKIT_RUNTIMES.join(" or ")));
    }
    // K3s runs there but started without the runtime (only worth saying once the runtime is
    // there: restarting K3s is then what is left).
    if toolkit && probe_output.lines().any(|l| l.trim() == format!("no {K3S_CONTAINERD_CONFIG}")) {
        out.push(format!(
            "K3s started before the NVIDIA runtime was there ({K3S_CONTAINERD_CONFIG} has no `nvidia` runtime): restart K3s on the node"
        ));
    }
    (!out.is_empty()).then(|| out.join("; "))
}

/// The GPU nodes of a site: its cluster's nodes with GPUs, and (name, SSH access or None).
pub fn gpu_nodes(s: &crate::topology::model::Site) -> Vec<(&str, bool)> {
    s.cluster.nodes.iter().filter(|n| n.gpu.is_some()).map(|n| (n.name.as_str(), n.ssh.is_some())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_ready_with_the_driver_and_a_runtime_where_k3s_looks() {
        let ready = "yes /proc/driver/nvidia/version\nno /usr/local/nvidia/toolkit/nvidia-container-runtime\nyes /usr/bin/nvidia-container-runtime\n";
        assert_eq!(missing(ready), None);
        let operator = "yes /proc/driver/nvidia/version\nyes /usr/local/nvidia/toolkit/nvidia-container-runtime\nno /usr/bin/nvidia-container-runtime\n";
        assert_eq!(missing(operator), None);
        let no_toolkit = "yes /proc/driver/nvidia/version\nno /usr/local/nvidia/toolkit/nvidia-container-runtime\nno /usr/bin/nvidia-container-runtime\n";
        assert!(missing(no_toolkit).unwrap().contains("no NVIDIA container toolkit"));
        let no_driver = "no /proc/driver/nvidia/version\nno /usr/local/nvidia/toolkit/nvidia-container-runtime\nyes /usr/bin/nvidia-container-runtime\n";
        let m = missing(no_driver).unwrap();
        assert!(m.contains("no NVIDIA driver") && !m.contains("toolkit"), "{m}");
        assert!(missing("").unwrap().contains("incomplete"));
        // K3s already runs there: its containerd config must have the runtime.
        let cfg = K3S_CONTAINERD_CONFIG;
        assert_eq!(missing(&format!("{ready}yes {cfg}\n")), None);
        assert_eq!(missing(&format!("{ready}none {cfg}\n")), None);
        assert_eq!(missing(&format!("{ready}unread {cfg}\n")), None);
        assert!(missing(&format!("{ready}no {cfg}\n")).unwrap().contains("restart K3s"));
    }

    #[test]
    fn the_probe_asks_for_every_file() {
        let p = probe();
        for f in [DRIVER_FILE, K3S_CONTAINERD_CONFIG].into_iter().chain(TOOLKIT_RUNTIMES.iter().copied()) {
            assert!(p.as_str().contains(f), "{f}");
        }
    }
}
