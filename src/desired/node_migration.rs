//! One node of a running Flannel cluster moved to Cilium (A.2 with `cluster_migration:
//! in-place`): the seed's "migrar in-place com janela de manutencao", node by node.
//!
//! Why it works one node at a time on K3s: Flannel is built into K3s, and each node's K3s reads
//! the server's `flannel-backend` when it starts. While it runs with Flannel, its containerd
//! reads the CNI configuration from K3s's own directory
//! (`/var/lib/rancher/k3s/agent/etc/cni/net.d`); started with `flannel-backend: none`, from
//! `/etc/cni/net.d`, where the Cilium agent (installed by `A.2@<site>`) writes its own. So a node
//! changes network when its K3s restarts, and not before: the migration of one node is
//!
//! 1. cordon it and drain it (evict every pod but DaemonSets' and mirror pods, as `kubectl drain
//!    --ignore-daemonsets` does), so no workload is on it while its network changes;
//! 2. reconfigure: the control-plane node gets the server config without Flannel (and K3s
//!    restarts); an agent's K3s restarts and takes the server's setting;
//! 3. remove what Flannel leaves behind, as K3s's own `k3s-killall.sh` does (its interfaces
//!    `flannel.1`, `flannel-v6.1`, `flannel-wg`, `flannel-wg-v6`, the `cni0` bridge, the rules
//!    whose chains name it, `/run/flannel`), and the kube-proxy rules K3s no longer maintains
//!    once Cilium replaces kube-proxy (Cilium's kube-proxy-free guide: `iptables-save | grep -v
//!    KUBE | iptables-restore`);
//! 4. wait until the node is Ready and the Cilium agent on it is Ready (Cilium took over);
//! 5. uncordon it, and mark it migrated.
//!
//! The resource is `host.<node>/command:cni-migration`. Its live state is what is left of
//! Flannel on the host and whether the node finished (the mark, written only after step 5), so a
//! node that failed half-way is planned again, and a finished one is no change. The builders here
//! are pure; `apply::node` runs them with the node's cluster.

use serde::Serialize;

use crate::addr::Target;
use crate::sh;
use crate::transport::shell::Sh;

/// Where the mark of a finished migration lives on the node.
pub const MARK: &str = "/var/lib/rancher/k3s/fabric-cni-migrated";

/// The interfaces Flannel makes (`k3s-killall.sh` deletes the same ones).
pub const FLANNEL_LINKS: &[&str] = &["flannel.1", "flannel-v6.1", "flannel-wg", "flannel-wg-v6", "cni0"];

/// Files Flannel leaves: its subnet lease and the CNI configuration K3s wrote for it.
pub const FLANNEL_FILES: &[&str] =
    &["/run/flannel/subnet.env", "/var/lib/rancher/k3s/agent/etc/cni/net.d/10-flannel.conflist"];

/// The line of a node with nothing of Flannel left.
pub const CLEAN: &str = "flannel: nothing left";
/// The line of a node that finished (checked and uncordoned).
pub const FINISHED: &str = "node: migrated (Cilium agent ready, uncordoned)";
const UNFINISHED: &str = "node: not migrated";
/// The line of a node that left its previous cluster.
pub const LEFT: &str = "node: left the previous cluster (drained, removed there, agent stopped)";
const NOT_LEFT: &str = "node: still in the previous cluster";
/// The line of a node that joined the new cluster.
pub const JOINED: &str = "node: in the new cluster (Ready, Cilium agent ready, uncordoned)";
const NOT_JOINED: &str = "node: not in the new cluster yet";

/// Where the mark of a node that left its previous cluster lives (cutover, first half).
pub const MARK_LEFT: &str = "/var/lib/rancher/k3s/fabric-left-previous-cluster";
/// Where the mark of a node that joined the new cluster lives (cutover, second half).
pub const MARK_JOINED: &str = "/var/lib/rancher/k3s/fabric-joined-new-cluster";

/// Which part of a node's move this resource is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// In place (A.2): the whole move of a node of the running cluster.
    InPlace,
    /// Cutover (A.5), first half: the node leaves the previous cluster (cordoned and drained
    /// there, its Node removed, its K3s agent stopped, Flannel's leftovers removed). Its new
    /// agent config and token come next, as files (the agent restarts into the new cluster).
    Leave,
    /// Cutover, second half: the node Ready in the new cluster with its Cilium agent.
    Join,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeMigration {
    /// The Kubernetes Node (the topology's node name).
    pub node: String,
    /// The cluster whose API cordons, drains and watches it: its own (in place), the previous
    /// one (leave), the new one (join).
    pub cluster: Target,
    /// The control-plane node's K3s server config without Flannel (written, then K3s
    /// restarts); None on an agent.
    pub server_config: Option<String>,
    pub stage: Stage,
}

impl NodeMigration {
    /// The mark this stage writes once done.
    pub fn mark_path(&self) -> &'static str {
        match self.stage {
            Stage::InPlace => MARK,
            Stage::Leave => MARK_LEFT,
            Stage::Join => MARK_JOINED,
        }
    }

    /// The state fabric wants, as [`parse_read`] prints it.
    pub fn text(&self) -> String {
        match self.stage {
            Stage::InPlace => {}
            Stage::Leave => return format!("{CLEAN}\n{LEFT}\n"),
            Stage::Join => return format!("{JOINED}\n"),
        }
        let mut t = format!("{CLEAN}\n{FINISHED}\n");
        if let Some(c) = &self.server_config {
            t.push_str(&config_lines(Some(c)));
        }
        t
    }

    /// Prints what is left of Flannel (`link …`, `chain …`, `file …`), the mark, and on the
    /// control-plane node the server config after a `--- config` line. The lists are
    /// [`FLANNEL_LINKS`] and [`FLANNEL_FILES`] (a test keeps them the same).
    pub fn read(&self) -> Sh {
        let config = if self.server_config.is_some() { "/etc/rancher/k3s/config.yaml" } else { "" };
        sh!(
            "for l in flannel.1 flannel-v6.1 flannel-wg flannel-wg-v6 cni0; do ip link show dev \"$l\" >/dev/null 2>&1 && echo \"link $l\"; done; \
             if command -v iptables-save >/dev/null 2>&1; then iptables-save | sed -n 's/^:\\(FLANNEL[A-Za-z0-9-]*\\|KUBE-SERVICES\\) .*/chain \\1/p'; fi; \
             for f in /run/flannel/subnet.env /var/lib/rancher/k3s/agent/etc/cni/net.d/10-flannel.conflist; do [ -e \"$f\" ] && echo \"file $f\"; done; \
             [ -e {} ] && echo marked; \
             if [ -n {} ]; then echo '--- config'; [ -e {} ] && cat -- {}; fi; exit 0",
            self.mark_path(),
            config,
            config,
            config,
        )
    }

    /// Steps 2 and 3 on the host, as root: an agent's K3s restarted (the control-plane node's
    /// config is written before, by the caller, and that restarts K3s), then Flannel's leftovers
    /// and kube-proxy's rules removed. Every command tolerates what is already gone, so it can
    /// run again after a failure.
    pub fn switch(&self) -> Sh {
        let cleanup = sh!(
            "for l in flannel.1 flannel-v6.1 flannel-wg flannel-wg-v6 cni0; do ip link show dev \"$l\" >/dev/null 2>&1 && ip link delete \"$l\"; done; \
             if command -v iptables-save >/dev/null 2>&1; then \
             iptables-save | grep -iv flannel | grep -v -e KUBE-SERVICES -e KUBE-SVC -e KUBE-SEP -e KUBE-NODEPORTS \
             -e KUBE-POSTROUTING -e KUBE-MARK -e KUBE-EXT -e KUBE-FW -e KUBE-PROXY | iptables-restore || exit 1; fi; \
             rm -f /run/flannel/subnet.env /var/lib/rancher/k3s/agent/etc/cni/net.d/10-flannel.conflist; \
             rmdir /run/flannel 2>/dev/null; exit 0"
        );
        if self.server_config.is_some() {
            return cleanup;
        }
        if self.stage == Stage::Leave {
            // Stopped, not restarted: it starts again when its new config is written.
            return sh!(
                "if systemctl cat k3s-agent >/dev/null 2>&1; then systemctl stop k3s-agent || exit 1; fi; {}",
                cleanup
            );
        }
        sh!("if systemctl cat k3s-agent >/dev/null 2>&1; then systemctl restart k3s-agent || exit 1; fi; {}", cleanup)
    }

    /// Step 5's mark (or a cutover stage's).
    pub fn mark(&self) -> Sh {
        sh!("mkdir -p /var/lib/rancher/k3s && : > {}", self.mark_path())
    }
}

/// The server config as lines of the resource's text.
fn config_lines(config: Option<&str>) -> String {
    match config {
        None => "config: (none)\n".into(),
        Some(c) => c.lines().map(|l| format!("config: {l}\n")).collect(),
    }
}

/// The host's answer to [`NodeMigration::read`] as the resource's text: only the lines `read`
/// makes are taken (an interface or chain name of plain characters, a known file, the mark); the
/// config is file content, kept as such.
pub fn parse_read(answer: &str, with_config: bool) -> String {
    parse_read_at(answer, with_config, Stage::InPlace)
}

/// [`parse_read`] for a stage: a leave shows the leftovers and whether it left; a join only
/// whether it joined.
pub fn parse_read_at(answer: &str, with_config: bool, stage: Stage) -> String {
    let (state, config) = match answer.split_once("--- config\n") {
        Some((s, c)) => (s, Some(c)),
        None => (answer.strip_suffix("--- config").unwrap_or(answer), None),
    };
    let plain = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    let mut left = Vec::new();
    let mut marked = false;
    for l in state.lines() {
        match l.split_once(' ') {
            Some(("link", n)) if FLANNEL_LINKS.contains(&n) => left.push(format!("flannel: interface {n}")),
            Some(("chain", n)) if plain(n) => left.push(format!("flannel: iptables chain {n}")),
            Some(("file", f)) if FLANNEL_FILES.contains(&f) => left.push(format!("flannel: file {f}")),
            _ if l == "marked" => marked = true,
            _ => {}
        }
    }
    if stage == Stage::Join {
        return format!("{}\n", if marked { JOINED } else { NOT_JOINED });
    }
    let mut t = if left.is_empty() { format!("{CLEAN}\n") } else { left.join("\n") + "\n" };
    t.push_str(match (stage, marked) {
        (Stage::Leave, true) => LEFT,
        (Stage::Leave, false) => NOT_LEFT,
        (_, true) => FINISHED,
        (_, false) => UNFINISHED,
    });
    t.push('\n');
    if with_config {
        let c = config.filter(|c| !c.is_empty());
        t.push_str(&config_lines(c));
    }
    t
}

/// The server config of a resource text (its `config:` lines), for a revert to write back.
pub fn config_of(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("config: ")).collect();
    match lines.as_slice() {
        [] | ["(none)"] => None,
        ls => Some(ls.iter().map(|l| format!("{l}\n")).collect()),
    }
}

/// Whether a resource text says the switch (steps 2–3) never ran: Flannel's interface is still
/// there, so nothing changed on the host and uncordoning is safe.
pub fn untouched(text: &str) -> bool {
    text.lines().any(|l| l == "flannel: interface flannel.1" || l == "flannel: interface cni0")
}

/// Why a pod is left on the node by a drain, as `kubectl drain --ignore-daemonsets` leaves it:
/// a DaemonSet's pod (its controller would put it back at once) or a mirror pod (the kubelet's
/// static pod, not evictable). None: it is evicted.
pub fn kept_by_drain(pod: &serde_json::Value) -> Option<&'static str> {
    let owned_by_ds = pod["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|o| o.iter().any(|r| r["kind"] == "DaemonSet" && r["controller"] == true));
    if owned_by_ds {
        return Some("DaemonSet");
    }
    if pod["metadata"]["annotations"].get("kubernetes.io/config.mirror").is_some() {
        return Some("mirror pod");
    }
    // A pod that finished holds nothing; kubectl deletes it too, here it is simply left.
    let phase = pod["status"]["phase"].as_str().unwrap_or_default();
    (phase == "Succeeded" || phase == "Failed").then_some("finished")
}

/// Whether a pod (or Node) has condition `Ready` True.
pub fn ready(obj: &serde_json::Value) -> bool {
    obj["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn agent() -> NodeMigration {
        NodeMigration {
            node: "franca-gpu1".into(),
            cluster: Target::cluster("franca"),
            server_config: None,
            stage: Stage::InPlace,
        }
    }

    #[test]
    fn the_answer_of_a_flannel_node_lists_what_is_left_and_nothing_else() {
        let answer = "link flannel.1\nlink cni0\nlink eth0\nchain FLANNEL-FWD\nchain KUBE-SERVICES\nchain a;rm -rf /\n\
                      file /run/flannel/subnet.env\nfile /etc/shadow\n";
        let t = parse_read(answer, false);
        assert_eq!(
            t,
            "flannel: interface flannel.1\nflannel: interface cni0\nflannel: iptables chain FLANNEL-FWD\n\
             flannel: iptables chain KUBE-SERVICES\nflannel: file /run/flannel/subnet.env\nnode: not migrated\n"
        );
        assert!(untouched(&t));
        assert_ne!(t, agent().text());
    }

    #[test]
    fn a_finished_node_reads_as_desired_and_a_half_done_one_does_not() {
        assert_eq!(parse_read("marked\n", false), agent().text());
        let half = parse_read("", false);
        assert_ne!(half, agent().text());
        assert!(!untouched(&half), "the switch ran: Flannel's interfaces are gone");
    }

    #[test]
    fn the_control_plane_nodes_config_is_part_of_its_state_and_comes_back_for_a_revert() {
        let m = NodeMigration { server_config: Some("flannel-backend: none\n".into()), ..agent() };
        assert_eq!(parse_read("marked\n--- config\nflannel-backend: none\n", true), m.text());
        let before = parse_read("link flannel.1\n--- config\nwrite-kubeconfig-mode: \"0644\"\n", true);
        assert_eq!(config_of(&before).as_deref(), Some("write-kubeconfig-mode: \"0644\"\n"));
        assert_eq!(config_of(&parse_read("--- config\n", true)), None);
        assert!(m.read().as_str().contains("/etc/rancher/k3s/config.yaml"));
        assert!(!m.switch().as_str().contains("restart k3s-agent"), "the server restarts when its config is written");
        for l in FLANNEL_LINKS.iter().chain(FLANNEL_FILES) {
            assert!(m.read().contains(l) && m.switch().contains(l), "{l} is read and removed");
        }
        assert!(agent().switch().as_str().contains("systemctl restart k3s-agent"));
        let leave = NodeMigration { stage: Stage::Leave, ..agent() };
        assert!(leave.switch().contains("systemctl stop k3s-agent") && !leave.switch().contains("restart"));
        assert!(leave.read().contains(MARK_LEFT) && leave.mark().contains(MARK_LEFT));
        assert_eq!(parse_read_at("marked\n", false, Stage::Leave), leave.text());
        assert_ne!(parse_read_at("link flannel.1\n", false, Stage::Leave), leave.text());
        let join = NodeMigration { stage: Stage::Join, ..agent() };
        assert_eq!(parse_read_at("link flannel.1\nmarked\n", false, Stage::Join), join.text());
        assert_ne!(parse_read_at("", false, Stage::Join), join.text());
    }

    #[test]
    fn a_drain_keeps_daemonset_and_mirror_pods_and_evicts_the_rest() {
        let ds = json!({"metadata": {"ownerReferences": [{"kind": "DaemonSet", "controller": true}]}});
        let mirror = json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}});
        let rs = json!({"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "controller": true}]}, "status": {"phase": "Running"}});
        assert_eq!(kept_by_drain(&ds), Some("DaemonSet"));
        assert_eq!(kept_by_drain(&mirror), Some("mirror pod"));
        assert_eq!(kept_by_drain(&rs), None);
        assert!(ready(&json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})));
        assert!(!ready(&json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})));
    }
}
