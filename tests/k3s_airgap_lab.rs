//! K3s installed from an air-gap bundle on the lab (issue "Every decision changes the plan": K3s
//! install without downloading at apply time). The real k3s binary and images are not available
//! offline here, so the bundle is a stand-in: a `k3s` that answers `--version` like the real one,
//! an images tarball of random bytes, and an `install.sh` that records what it was asked to do
//! and makes what the real script makes (the systemd service; a server's node token). Needs root.
//!
//! Shown: plan lists `host.<name>/command:k3s-install` for the servers of the new clusters (A.1)
//! and the agent (A.3); a file whose digest is not the topology's, on disk or by URL, stops the
//! apply before anything runs on a host; the right bundle (its images by URL from a loopback
//! server, fetched once into the state directory's cache) installs (digests checked,
//! `INSTALL_K3S_SKIP_DOWNLOAD=true`, the images where K3s imports them, no staging directory
//! left); an installed, matching version is no change, and its plan downloads nothing; another
//! binary is an update with both digests; a binary of another version is refused on the host,
//! and the installed one stays.

use std::path::Path;
use std::process::Output;

use fabric_testkit::file_server::FileServer;
use fabric_testkit::{kube_api, lab, run};
use run::out;
use sha2::{Digest, Sha256};

const TOPOLOGY: &str = include_str!("data/lab-linux.yaml");
const IMAGES: &str = "k3s-airgap-images-amd64.tar.zst";
/// The key of a bundle section's digests until its topology is written with [`for_release`]:
/// the stand-in bundle is recorded as the release `versions.k3s` names, whatever its binary
/// says (a binary of another version is what one test shows refused on the host).
const RELEASE: &str = "@RELEASE@";

/// A bundle `section` recorded for K3s `release`.
fn for_release(section: &str, release: &str) -> String {
    section.replace(RELEASE, release)
}

const INSTALL_SH: &str = r#"#!/bin/sh
# Stand-in for K3s's install.sh: records what it was asked to do, and makes what the real one makes.
set -e
log=/var/lib/rancher/install-standin.log
{
	echo "INSTALL_K3S_SKIP_DOWNLOAD=$INSTALL_K3S_SKIP_DOWNLOAD INSTALL_K3S_EXEC=$INSTALL_K3S_EXEC"
	echo "binary $(sha256sum < /usr/local/bin/k3s | cut -d' ' -f1)"
	echo "images $(ls /var/lib/rancher/k3s/agent/images)"
} >>"$log"
[ "$INSTALL_K3S_SKIP_DOWNLOAD" = true ] || { echo "stand-in: would download" >&2; exit 1; }
case "$INSTALL_K3S_EXEC" in
agent*) svc=k3s-agent ;;
*)
	svc=k3s
	mkdir -p /var/lib/rancher/k3s/server
	[ -s /var/lib/rancher/k3s/server/node-token ] || echo "K10standin::server:$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" >/var/lib/rancher/k3s/server/node-token
	;;
esac
printf '[Service]\nExecStart=/usr/local/bin/k3s %s\n' "$INSTALL_K3S_EXEC" >"/etc/systemd/system/$svc.service"
# A server writes its admin kubeconfig as K3s does (names `default`, server 127.0.0.1:6443).
if [ "$svc" = k3s ] && [ "$(hostname)" = @KUBE_HOST@ ]; then
	umask 077
	cat >/etc/rancher/k3s/k3s.yaml <<'KUBECONFIG'
@KUBECONFIG@
KUBECONFIG
fi
"#;

fn k3s(version: &str, build: &str) -> String {
    format!("#!/bin/sh\n# stand-in k3s\n[ \"$1\" = --version ] && echo 'k3s version {version} ({build})'\nexit 0\n")
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The kubeconfig a K3s server writes, with the test API server's credentials.
fn k3s_yaml() -> String {
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    server: https://127.0.0.1:6443\n  name: default\ncontexts:\n\
         - context:\n    cluster: default\n    user: default\n  name: default\ncurrent-context: default\nkind: Config\n\
         users:\n- name: default\n  user:\n    token: {}\n",
        kube_api::TEST_TOKEN
    )
}

/// Writes the bundle's files under `dir` and returns the topology section naming them; the
/// install script writes a server's kubeconfig on `kube_host`.
fn bundle_for(dir: &Path, binary: &str, images_sha: Option<&str>, kube_host: &str) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let images: Vec<u8> = (0..200_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let script = INSTALL_SH.replace("@KUBECONFIG@", k3s_yaml().trim_end()).replace("@KUBE_HOST@", kube_host);
    std::fs::write(dir.join("k3s"), binary).unwrap();
    std::fs::write(dir.join(IMAGES), &images).unwrap();
    std::fs::write(dir.join("install.sh"), &script).unwrap();
    let d = dir.display();
    format!(
        "k3s_airgap:\n  binary: {{ path: {d}/k3s }}\n  images: {{ path: {d}/{IMAGES} }}\n  \
         install_script: {{ path: {d}/install.sh }}\n  digests:\n    \"{RELEASE}\": {{ binary: {}, images: {}, install_script: {} }}\n  \
         registry_mirrors:\n    - {{ registry: docker.io, endpoints: [\"https://mirror.lab.invalid:5000\"] }}\n",
        sha(binary.as_bytes()),
        images_sha.map(String::from).unwrap_or_else(|| sha(&images)),
        sha(script.as_bytes()),
    )
}

fn bundle(dir: &Path, binary: &str, images_sha: Option<&str>) -> String {
    bundle_for(dir, binary, images_sha, "sp-lan")
}

#[test]
fn k3s_from_the_air_gap_bundle() {
    let lab = lab::Lab::up("ka", "10.232", &["--hosts", "1"], &[]);
    let dir = std::env::temp_dir().join(format!("fabric-k3s-airgap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, sp, _karmada) = kube_api::fabric_apis(&dir);
    for s in [&franca, &sp] {
        s.simulate_controllers(std::time::Duration::from_millis(100));
    }
    // sp gets a VM that joins as a K3s agent (lab host `host1`).
    let base = TOPOLOGY.replace(
        "ssh: { host: sp-lan } }\n",
        "ssh: { host: sp-lan } }\n    external_workloads:\n      \
         - { name: sp-vm, kind: vm, address: 172.30.2.30, runs: [web], ssh: { host: host1 } }\n",
    );
    // sp's cluster does not run yet: no kubeconfig here. fabric fetches the one K3s writes and
    // points it at the API as this machine reaches it (`server`), under the topology's context.
    let base = base.replace(
        "kubeconfig: { path: /nonexistent/sp.yaml }",
        &format!("kubeconfig: {{ path: /nonexistent/sp.yaml, context: sp, server: \"{}\" }}", sp.url),
    );
    std::fs::remove_file(dir.join("sp.yaml")).unwrap();
    let write = |section: &str| {
        let section = for_release(section, "v1.33.5+k3s1");
        let text = kube_api::with_test_kubeconfigs(&format!("{base}{section}"), &dir);
        std::fs::write(dir.join("topology.yaml"), text).unwrap();
    };
    let fabric =
        |args: &[&str]| -> Output { run::fabric_in(&dir, &dir.join("topology.yaml"), &lab.ssh_config(), args) };
    let on = |host: &str, cmd: &str| String::from_utf8_lossy(&lab.exec(host, cmd).stdout).to_string();
    let binary = k3s("v1.33.5+k3s1", "standin-1");

    // 1. The plan names each install.
    write(&bundle(&dir.join("bundle"), &binary, None));
    let o = fabric(&["plan", "--phase", "A"]);
    let text = out(&o);
    for host in ["franca-lan", "sp-lan", "sp-vm"] {
        assert!(text.contains(&format!("+ host.{host}/command:k3s-install")), "{host}: {text}");
    }
    assert!(text.contains("+ host.sp-lan/file:/etc/rancher/k3s/registries.yaml"), "{text}");
    assert!(!text.contains("command:k3s-agent"), "{text}");
    assert!(text.contains("cluster.sp does not run yet: apply installs K3s on host.sp-lan first"), "{text}");
    assert!(text.contains("+ cluster.sp/kube-system/HelmChart/cilium") && !text.contains("unreachable"), "{text}");

    // 2. A file that is not the topology's: nothing runs on any host, nothing stays.
    write(&bundle(&dir.join("bundle"), &binary, Some(&"ab".repeat(32))));
    let o = fabric(&["apply", "--phase", "A", "--auto-approve"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains(&format!("{IMAGES} has SHA-256")) && text.contains("nothing was copied or run"), "{text}");
    let nothing_left = || {
        for host in ["franca-lan", "sp-lan", "host1"] {
            let left = on(
                host,
                "ls /usr/local/bin/k3s /var/lib/rancher/install-standin.log /etc/rancher/k3s/config.yaml 2>/dev/null; ls /var/lib/fabric 2>/dev/null",
            );
            assert_eq!(left.trim(), "", "{host} kept {left}");
        }
    };
    nothing_left();
    assert!(
        !Path::new("/usr/local/bin/k3s").exists() || std::fs::read("/usr/local/bin/k3s").unwrap() != binary.as_bytes()
    );

    // 2b. The images by URL, from a server on this machine's loopback (no host could reach it):
    // one that answers another file stops the apply the same way.
    let images = std::fs::read(dir.join("bundle").join(IMAGES)).unwrap();
    let by_url = |section: String, base: &str| {
        section.replace(
            &format!("images: {{ path: {}/{IMAGES}", dir.join("bundle").display()),
            &format!("images: {{ url: \"{base}/{IMAGES}\""),
        )
    };
    let wrong = FileServer::start(&[(&format!("/{IMAGES}"), b"not the images")]);
    write(&by_url(bundle(&dir.join("bundle"), &binary, None), &wrong.base));
    let o = fabric(&["apply", "--phase", "A", "--auto-approve"]);
    // The diagnostic is wrapped to the terminal's width: joined again before it is searched.
    let text = out(&o).replace("\n  │ ", " ");
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("downloaded from {}/{IMAGES} has SHA-256 {}", wrong.base, sha(b"not the images")))
            && text.contains(&format!("but the topology says {}", sha(&images)))
            && text.contains("nothing was copied or run"),
        "{text}"
    );
    assert_eq!(wrong.requests().len(), 1, "one download, refused");
    nothing_left();

    // 3. The bundle as recorded, the images by URL: fetched once here (for all three installs)
    // into the state directory's cache, servers and the agent installed, nothing downloaded on a
    // host.
    let server = FileServer::start(&[(&format!("/{IMAGES}"), &images)]);
    write(&by_url(bundle(&dir.join("bundle"), &binary, None), &server.base));
    let o = fabric(&["apply", "--phase", "A", "--auto-approve"]);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(server.requests(), [format!("/{IMAGES}")], "one download for every install");
    assert_eq!(std::fs::read(dir.join(".fabric/bundle").join(sha(&images))).unwrap(), images);
    for (host, exec) in [("franca-lan", "server"), ("sp-lan", "server"), ("host1", "agent")] {
        let log = on(host, "cat /var/lib/rancher/install-standin.log");
        assert!(log.contains(&format!("INSTALL_K3S_SKIP_DOWNLOAD=true INSTALL_K3S_EXEC={exec}")), "{host}: {log}");
        assert!(
            log.contains(&format!("binary {}", sha(binary.as_bytes()))) && log.contains(&format!("images {IMAGES}")),
            "{host}: {log}"
        );
        assert_eq!(on(host, "ls -A /var/lib/fabric").trim(), "", "{host}: a staging directory is left");
        assert!(on(host, "cat /etc/rancher/k3s/registries.yaml").contains("https://mirror.lab.invalid:5000"), "{host}");
    }
    assert!(on("host1", "stat -c %a /etc/rancher/k3s/token").trim() == "600", "the agent's join token");
    // sp's cluster came up: its kubeconfig fetched, pointed at the API, never shown.
    let text = out(&o);
    assert!(text.contains("cluster.sp: kubeconfig written to") && text.contains("cluster.sp: API up"), "{text}");
    assert!(!text.contains(kube_api::TEST_TOKEN), "the kubeconfig's credentials were shown: {text}");
    let kc = std::fs::read_to_string(dir.join("sp.yaml")).unwrap();
    assert!(kc.contains(&sp.url) && kc.contains("current-context: sp") && !kc.contains("127.0.0.1:6443"), "{kc}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(dir.join("sp.yaml")).unwrap().permissions().mode() & 0o777, 0o600);
    let mut objs = sp.objects();
    objs.retain(|o| o["kind"] == "HelmChart" && o["metadata"]["name"] == "cilium");
    assert_eq!(objs.len(), 1, "Cilium's chart in sp's new cluster");
    let journals = std::fs::read_dir(dir.join(".fabric/runs")).unwrap();
    for j in journals {
        let j = std::fs::read_to_string(j.unwrap().path()).unwrap_or_default();
        assert!(!j.contains(kube_api::TEST_TOKEN), "a journal holds the kubeconfig's credentials");
    }
    assert!(!Path::new("/usr/local/bin/k3s").exists(), "the lab wrote into the machine's /usr/local/bin");

    // 4. Installed and matching: no change, and plan downloads nothing.
    let o = fabric(&["plan", "--phase", "A", "--detailed-exitcode"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(server.requests().len(), 1, "plan fetched the bundle");

    // 5. Another build of the binary: an update, with both digests.
    let newer = k3s("v1.33.5+k3s1", "standin-2");
    write(&bundle(&dir.join("bundle2"), &newer, None));
    let o = fabric(&["plan", "--phase", "A", "--detailed-exitcode"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains("~ host.sp-lan/command:k3s-install"), "{text}");
    assert!(
        text.contains(&format!("-k3s {}", sha(binary.as_bytes())))
            && text.contains(&format!("+k3s {}", sha(newer.as_bytes()))),
        "{text}"
    );

    // 6. A binary of another version, with its right digest: refused on the host before it is
    // installed; the installed one stays. (An upgrade of a running server backs it up first: the
    // host gets what the backup needs, a stand-in systemctl and the server token.)
    let o = lab.exec(
        "sp-lan",
        &format!(
            "set -e; cat > /usr/local/bin/systemctl <<'EOF'\n{}EOF\nchmod 755 /usr/local/bin/systemctl; \
             mkdir -p /var/lib/rancher/k3s/server/db; echo t > /var/lib/rancher/k3s/server/token",
            fabric_testkit::k3s_node::SYSTEMCTL
        ),
    );
    assert!(o.status.success(), "{}", out(&o));
    let other = k3s("v1.32.9+k3s1", "standin-3");
    write(&bundle(&dir.join("bundle3"), &other, None));
    let o = fabric(&["apply", "--phase", "A", "--site", "sp", "--auto-approve"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("the bundle's k3s is not versions.k3s (v1.33.5+k3s1)"), "{text}");
    assert_eq!(on("sp-lan", "sha256sum < /usr/local/bin/k3s | cut -d' ' -f1").trim(), sha(binary.as_bytes()));
    // No staging directory left; the backup taken before the refused upgrade is kept.
    assert_eq!(on("sp-lan", "ls -A /var/lib/fabric").trim(), "backup");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `karmada_host: dedicated-vm`: C.1 installs a single-node K3s on the VM (lab host `host1`) from
/// the bundle, brings its API up (the kubeconfig fetched, pointed at it), and installs Karmada's
/// chart there; the host site's cluster gets none of it.
#[test]
fn karmada_on_a_dedicated_vm() {
    let lab = lab::Lab::up("kv", "10.230", &["--hosts", "1"], &[]);
    let dir = std::env::temp_dir().join(format!("fabric-karmada-vm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, sp, _karmada) = kube_api::fabric_apis(&dir);
    let vm = kube_api::TestApiServer::start_blocking(kube_api::shared_schemas());
    for s in [&franca, &sp, &vm] {
        s.simulate_controllers(std::time::Duration::from_millis(100));
    }
    let section =
        for_release(&bundle_for(&dir.join("bundle"), &k3s("v1.33.5+k3s1", "standin-1"), None, "host1"), "v1.33.5+k3s1");
    let text = TOPOLOGY.replace("karmada_host: host-cluster", "karmada_host: dedicated-vm").replace(
        "kubeconfig: { path: /nonexistent/karmada.yaml } }",
        &format!(
            "kubeconfig: {{ path: /nonexistent/karmada.yaml }}, vm: {{ name: karmada-vm, address: 172.30.1.50, \
             ssh: {{ host: host1 }}, kubeconfig: {{ path: {}, context: karmada-vm, server: \"{}\" }} }} }}",
            dir.join("karmada-vm.yaml").display(),
            vm.url
        ),
    );
    let text = kube_api::with_test_kubeconfigs(&format!("{text}{section}"), &dir);
    let l = fabric::topology::load_str("t.yaml", text).unwrap_or_else(|e| panic!("{e}"));
    let t = &l.topology;
    let g = fabric::catalog::StepGraph::build(&fabric::catalog::Catalog::embedded().unwrap(), t).unwrap();
    let step = fabric::apply::StepWork::alone(&g, t, "C.1").unwrap();
    let addresses: Vec<String> = step.resources.iter().map(|r| r.address.to_string()).collect();
    assert!(addresses.contains(&"host.karmada-vm/command:k3s-install".to_string()), "{addresses:?}");
    let targets = fabric::live::observe::Targets::from_topology(
        t,
        &fabric::transport::ssh_config::SshConfig::load(&lab.ssh_config()).unwrap(),
    )
    .unwrap();
    let opts = fabric::apply::Options {
        run: "20261201T210000Z-1".into(),
        state_dir: dir.clone(),
        confirm_timeout: std::time::Duration::from_secs(30),
        force_conflicts: false,
        wait_timeout: std::time::Duration::from_secs(60),
        lease: Default::default(),
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let lines = std::sync::Mutex::new(Vec::new());
    let result = rt.block_on(async {
        let keys = fabric::live::observe::key_targets(&step.resources);
        let live = fabric::live::observe::observe(&step.resources, &keys, &targets).await;
        assert!(live.bootstrap.contains_key(&fabric::addr::Target::cluster("karmada-vm")), "{:?}", live.unreachable);
        let mut j = fabric::apply::journal::Journal::create(&dir, &opts.run).unwrap();
        let progress = |l: &str| lines.lock().unwrap().push(l.to_string());
        fabric::apply::run(t, std::slice::from_ref(&step), &targets, live, &opts, &mut j, &progress).await
    });
    let lines = lines.into_inner().unwrap().join("\n");
    result.unwrap_or_else(|e| panic!("{e}\n{lines}"));
    let log =
        String::from_utf8_lossy(&lab.exec("host1", "cat /var/lib/rancher/install-standin.log").stdout).to_string();
    assert!(log.contains("INSTALL_K3S_EXEC=server"), "{log}");
    let kc = std::fs::read_to_string(dir.join("karmada-vm.yaml")).unwrap();
    assert!(kc.contains(&vm.url) && kc.contains("current-context: karmada-vm"), "{kc}");
    let chart = vm.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "karmada");
    assert!(chart.is_some(), "Karmada's chart in the VM's K3s\n{lines}");
    assert!(vm.object("v1", "Namespace", None, "karmada-system").is_some());
    assert!(franca.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "karmada").is_none());
    assert!(!lines.contains(kube_api::TEST_TOKEN));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Site `sp` on the lab for an upgrade test: its cluster's API double (controllers simulated,
/// `nodes` registered), the lab topology with `extra` lines after sp-lan's node, and the
/// `fabric` binary run against it.
struct UpgradeLab {
    lab: lab::Lab,
    dir: std::path::PathBuf,
    sp: kube_api::TestApiServer,
    base: String,
    _others: (kube_api::TestApiServer, kube_api::TestApiServer),
}

impl UpgradeLab {
    fn up(prefix: &str, mgmt_net: &str, name: &str, extra: &str, nodes: &[&str]) -> UpgradeLab {
        UpgradeLab::with_hosts(prefix, mgmt_net, name, extra, nodes, "1")
    }

    fn with_hosts(prefix: &str, mgmt_net: &str, name: &str, extra: &str, nodes: &[&str], hosts: &str) -> UpgradeLab {
        let lab = lab::Lab::up(prefix, mgmt_net, &["--hosts", hosts], &[]);
        let dir = std::env::temp_dir().join(format!("fabric-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (franca, sp, karmada) = kube_api::fabric_apis(&dir);
        sp.simulate_controllers(std::time::Duration::from_millis(100));
        sp.register_nodes(nodes);
        let base = TOPOLOGY.replace("ssh: { host: sp-lan } }\n", &format!("ssh: {{ host: sp-lan }} }}\n{extra}"));
        UpgradeLab { lab, dir, sp, base, _others: (franca, karmada) }
    }

    /// The topology with `versions.k3s` at `version` and the bundle `section`.
    fn write(&self, version: &str, section: &str) {
        let text = self.base.replace("k3s: v1.33.5+k3s1", &format!("k3s: {version}"));
        let section = for_release(section, version);
        let text = kube_api::with_test_kubeconfigs(&format!("{text}{section}"), &self.dir);
        std::fs::write(self.dir.join("topology.yaml"), text).unwrap();
    }

    fn fabric(&self, args: &[&str]) -> Output {
        run::fabric_in(&self.dir, &self.dir.join("topology.yaml"), &self.lab.ssh_config(), args)
    }

    /// [`Self::fabric`] at a terminal (`run::fabric_at_terminal`), `answer` typed at its prompt.
    fn fabric_at_terminal(&self, args: &[&str], answer: &str) -> Output {
        run::fabric_at_terminal(&self.dir, &self.dir.join("topology.yaml"), &self.lab.ssh_config(), args, answer)
    }

    fn on(&self, host: &str, cmd: &str) -> String {
        String::from_utf8_lossy(&self.lab.exec(host, cmd).stdout).to_string()
    }

    /// A running server's datastore and token as K3s keeps them, and a `systemctl` (the lab
    /// has no systemd).
    fn server_state(&self, host: &str, systemctl: &str) {
        let o = self.lab.exec(
            host,
            &format!(
                "set -e; cat > /usr/local/bin/systemctl <<'EOF'\n{systemctl}EOF\nchmod 755 /usr/local/bin/systemctl; \
                 mkdir -p /var/lib/rancher/k3s/server/db; echo before > /var/lib/rancher/k3s/server/db/state.db; \
                 echo K10secret-token-value > /var/lib/rancher/k3s/server/token"
            ),
        );
        assert!(o.status.success(), "{}", out(&o));
    }
}

/// A K3s upgrade between two stand-in bundle versions (issue #26): the server first, its
/// datastore and token backed up before anything changes (the journal names the backup, never
/// the token), then the agent; each node cordoned, drained, upgraded, Ready, uncordoned. A skew
/// upstream forbids is refused at its line by plan; `fabric rollback` restores the backup.
#[test]
fn k3s_upgrade_node_by_node_with_the_backup_first() {
    let u = UpgradeLab::up(
        "ku",
        "10.249",
        "k3s-upgrade",
        "    external_workloads:\n      - { name: sp-vm, kind: vm, address: 172.30.2.30, runs: [web], ssh: { host: host1 } }\n",
        &["sp-lan", "sp-vm"],
    );
    let (dir, sp) = (&u.dir, &u.sp);
    let write = |version: &str, section: &str| u.write(version, section);
    let fabric = |args: &[&str]| u.fabric(args);
    let on = |host: &str, cmd: &str| u.on(host, cmd);
    let old = k3s("v1.32.9+k3s1", "standin-old");
    let new = k3s("v1.33.5+k3s1", "standin-new");

    // 1. K3s v1.32 installed; the server's datastore and token as K3s keeps them, and a
    // systemctl that records what it is asked (the lab has no systemd).
    write("v1.32.9+k3s1", &bundle(&dir.join("old"), &old, None));
    let o = fabric(&["apply", "--phase", "A", "--site", "sp", "--auto-approve"]);
    assert!(o.status.success(), "{}", out(&o));
    let systemctl = fabric_testkit::k3s_node::SYSTEMCTL
        .replace("*) exit 0 ;;", "*) echo \"$1 $2\" >>/var/lib/rancher/systemctl.log ;;");
    u.server_state("sp-lan", &systemctl);

    // 2. Two minors up: refused at the versions line, from what runs (read live).
    write("v1.34.1+k3s1", &bundle(&dir.join("skip"), &k3s("v1.34.1+k3s1", "standin-skip"), None));
    let o = fabric(&["plan", "--phase", "A", "--site", "sp"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("v1.32.9+k3s1 runs, and v1.34.1+k3s1 skips minor 1.33") && text.contains("Manual Upgrades"),
        "{text}"
    );
    assert!(text.contains("topology.yaml:"), "at the line: {text}");

    // 3. One minor up: planned as an update of each install, from the running version.
    write("v1.33.5+k3s1", &bundle(&dir.join("new"), &new, None));
    let o = fabric(&["plan", "--phase", "A", "--site", "sp"]);
    let text = out(&o);
    assert!(
        text.contains("~ host.sp-lan/command:k3s-install") && text.contains("-k3s ") && text.contains(" v1.32.9+k3s1"),
        "{text}"
    );
    assert!(text.contains("over a running K3s: datastore and token backed up first"), "plan shows the backup: {text}");

    // 4. Applied: the server's backup first, then the server, then the agent, node by node.
    let o = fabric(&["apply", "--phase", "A", "--site", "sp", "--auto-approve"]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("no `{needle}` in {text}"));
    let backup = at("sp-lan: K3s datastore (sqlite) and server token backed up in /var/lib/fabric/backup/");
    let server = at("sp-lan: K3s v1.33.5+k3s1 installed");
    let agent_cordon = at("sp-vm: cordoned");
    let agent = at("sp-vm: K3s v1.33.5+k3s1 installed");
    assert!(backup < at("sp-lan: cordoned") && at("sp-lan: cordoned") < server, "{text}");
    assert!(server < agent_cordon && agent_cordon < agent, "servers before agents: {text}");
    assert!(!text.contains("K10secret-token-value"), "the token was shown: {text}");
    let dir_on_host = on("sp-lan", "ls -d /var/lib/fabric/backup/*").trim().to_string();
    assert_eq!(on("sp-lan", &format!("cat {dir_on_host}/db/state.db")).trim(), "before");
    assert_eq!(on("sp-lan", &format!("stat -c %a {dir_on_host}/token")).trim(), "600");
    let log = on("sp-lan", "cat /var/lib/rancher/systemctl.log");
    assert!(log.contains("stop k3s") && log.contains("start k3s"), "SQLite copied with K3s stopped: {log}");
    for n in ["sp-lan", "sp-vm"] {
        assert_ne!(sp.object("v1", "Node", None, n).unwrap()["spec"]["unschedulable"], true, "{n} left cordoned");
    }
    let journals: String = std::fs::read_dir(dir.join(".fabric/runs"))
        .unwrap()
        .map(|j| std::fs::read_to_string(j.unwrap().path()).unwrap_or_default())
        .collect();
    assert!(journals.contains(&format!("backup {dir_on_host}")), "the journal names the backup: {journals}");
    assert!(!journals.contains("K10secret-token-value"), "a journal holds the token");

    // 5. The cluster moves on; rollback restores the backup (what happened since is lost).
    on(
        "sp-lan",
        "echo after > /var/lib/rancher/k3s/server/db/state.db; echo other > /var/lib/rancher/k3s/server/token",
    );
    let o = fabric(&["rollback"]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains("K3s cannot be downgraded: the backup taken before the upgrade") && text.contains("is lost"),
        "{text}"
    );
    let journals: String = std::fs::read_dir(dir.join(".fabric/runs"))
        .unwrap()
        .map(|j| std::fs::read_to_string(j.unwrap().path()).unwrap_or_default())
        .collect();
    assert_eq!(
        on("sp-lan", "cat /var/lib/rancher/k3s/server/db/state.db").trim(),
        "before",
        "{text}\n{journals}\n{}",
        on("sp-lan", "cat /var/lib/rancher/systemctl.log; ls -laR /var/lib/fabric/backup")
    );
    assert_eq!(on("sp-lan", "cat /var/lib/rancher/k3s/server/token").trim(), "K10secret-token-value");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A stand-in for `k3s kubectl exec` into the Karmada chart's etcd pod (issue #26): it records
/// each call, refuses anything but the chart's pod, container and certificate paths (as the real
/// etcdctl would fail to open a file the `etcd-cert` mount does not hold), and writes the snapshot
/// where the pod's `/var/lib/etcd` is on the node (the chart's hostPath volume).
const KUBECTL_EXEC: &str = r#"#!/bin/sh
# stand-in k3s: `k3s kubectl exec` into Karmada's etcd pod
echo "$*" >>/var/lib/rancher/k3s-standin.log
[ "$1" = kubectl ] || exit 0
shift
case "$*" in
"-n karmada-system exec etcd-0 -c etcd -- etcdctl "*) ;;
*) echo "stand-in: not the chart's etcd pod: $*" >&2; exit 1 ;;
esac
[ ! -e /var/lib/rancher/etcd-fails ] || { echo "Error: context deadline exceeded" >&2; exit 1; }
shift 8
path=
for a; do
	case "$a" in
	--endpoints=https://127.0.0.1:2379 | snapshot | save) ;;
	--cacert=/etc/kubernetes/pki/etcd/server-ca.crt | --cert=/etc/kubernetes/pki/etcd/karmada.crt | --key=/etc/kubernetes/pki/etcd/karmada.key) ;;
	/var/lib/etcd/*) path="$a" ;;
	*) echo "Error: open ${a#*=}: no such file or directory" >&2; exit 1 ;;
	esac
done
[ -n "$path" ] || { echo "Error: snapshot save expects one argument" >&2; exit 1; }
mkdir -p /var/lib/karmada-system/karmada-etcd
echo "etcd snapshot" >"/var/lib/karmada-system/karmada-etcd/${path#/var/lib/etcd/}"
echo "Snapshot saved at $path"
"#;

/// Karmada's upgrade (issue #26): plan shows the chart's upgrade with its CRD line and the etcd
/// snapshot; apply takes the snapshot inside the chart's etcd pod (through `k3s kubectl exec` on
/// the host site's server) and moves it into the run's backup directory before the HelmChart
/// changes, the journal naming where; a snapshot that fails leaves the HelmChart untouched; a
/// rollback does not downgrade Karmada but names the snapshot and the runbook's procedure.
#[test]
fn karmada_upgrade_takes_the_etcd_snapshot_first() {
    let lab = lab::Lab::up("kg", "10.214", &[], &[]);
    let dir = std::env::temp_dir().join(format!("fabric-karmada-upgrade-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (franca, _sp, _karmada) = kube_api::fabric_apis(&dir);
    franca.simulate_controllers(std::time::Duration::from_millis(100));
    let on = |host: &str, cmd: &str| String::from_utf8_lossy(&lab.exec(host, cmd).stdout).to_string();
    let topology = |version: &str| {
        let text = TOPOLOGY.replace("karmada: 1.15.0", &format!("karmada: {version}"));
        fabric::topology::load_str("t.yaml", kube_api::with_test_kubeconfigs(&text, &dir))
            .unwrap_or_else(|e| panic!("{e}"))
            .topology
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Applies C.1 of `t` as run `run`: the outcome and the progress lines.
    let apply = |t: &fabric::topology::Topology, run: &str| {
        let g = fabric::catalog::StepGraph::build(&fabric::catalog::Catalog::embedded().unwrap(), t).unwrap();
        let step = fabric::apply::StepWork::alone(&g, t, "C.1").unwrap();
        let targets = fabric::live::observe::Targets::from_topology(
            t,
            &fabric::transport::ssh_config::SshConfig::load(&lab.ssh_config()).unwrap(),
        )
        .unwrap();
        let opts = fabric::apply::Options {
            run: run.into(),
            state_dir: dir.clone(),
            confirm_timeout: std::time::Duration::from_secs(30),
            force_conflicts: false,
            wait_timeout: std::time::Duration::from_secs(60),
            lease: Default::default(),
        };
        let lines = std::sync::Mutex::new(Vec::new());
        let result = rt.block_on(async {
            let keys = fabric::live::observe::key_targets(&step.resources);
            let live = fabric::live::observe::observe(&step.resources, &keys, &targets).await;
            let mut j = fabric::apply::journal::Journal::create(&dir, &opts.run).unwrap();
            let progress = |l: &str| lines.lock().unwrap().push(l.to_string());
            fabric::apply::run(t, std::slice::from_ref(&step), &targets, live, &opts, &mut j, &progress).await
        });
        (result, lines.into_inner().unwrap().join("\n"), step, targets)
    };
    let chart = || franca.object("helm.cattle.io/v1", "HelmChart", Some("kube-system"), "karmada").unwrap();

    // 1. Karmada 1.15 runs; the chart's etcd pod runs on the host site's server.
    let (r, lines, _, _) = apply(&topology("1.15.0"), "20261202T100000Z-1");
    r.unwrap_or_else(|e| panic!("{e}\n{lines}"));
    franca.put_raw(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "etcd-0", "namespace": "karmada-system", "labels": {"app": "etcd"}},
        "spec": {"nodeName": "franca-lan", "containers": [{"name": "etcd", "image": "registry.k8s.io/etcd:3.6.8-0"}]}}));
    let o = lab.exec(
        "franca-lan",
        &format!("set -e; cat > /usr/local/bin/k3s <<'EOF'\n{KUBECTL_EXEC}EOF\nchmod 755 /usr/local/bin/k3s"),
    );
    assert!(o.status.success(), "{}", run::out(&o));

    // 2. Plan of 1.16: the upgrade, its CRDs, the snapshot first.
    let t = topology("1.16.0");
    let g = fabric::catalog::StepGraph::build(&fabric::catalog::Catalog::embedded().unwrap(), &t).unwrap();
    let step = fabric::apply::StepWork::alone(&g, &t, "C.1").unwrap();
    let targets = fabric::live::observe::Targets::from_topology(
        &t,
        &fabric::transport::ssh_config::SshConfig::load(&lab.ssh_config()).unwrap(),
    )
    .unwrap();
    let live = rt.block_on(fabric::live::observe::observe(&step.resources, &Default::default(), &targets));
    let r = step.resources.iter().find(|r| r.address.to_string().ends_with("HelmChart/karmada")).unwrap();
    let c = fabric::plan::diff::change(r, &live).unwrap();
    assert_eq!(c.upgrade[0], "upgrade: karmada chart 1.15.0 → 1.16.0", "{:?}", c.upgrade);
    assert!(c.upgrade[1].starts_with("CRDs: Karmada's CRDs live in its own API server"), "{:?}", c.upgrade);
    assert!(c.upgrade[2].starts_with("backup: Karmada etcd snapshot → "), "{:?}", c.upgrade);

    // 3. Applied: the snapshot in the pod, moved into the run's backup directory, then the chart.
    let run = "20261202T110000Z-1";
    let kept = format!("/var/lib/fabric/backup/{run}/karmada-etcd.db");
    let (r, lines, _, _) = apply(&t, run);
    r.unwrap_or_else(|e| panic!("{e}\n{lines}"));
    let at = |needle: &str| lines.find(needle).unwrap_or_else(|| panic!("no `{needle}` in {lines}"));
    let backup = at(&format!("C.1: backup: Karmada etcd snapshot → franca-lan:{kept}"));
    assert!(backup < at("C.1: applying cluster.franca/kube-system/HelmChart/karmada"), "snapshot first: {lines}");
    let log = on("franca-lan", "cat /var/lib/rancher/k3s-standin.log");
    assert!(
        log.contains(&format!(
            "kubectl -n karmada-system exec etcd-0 -c etcd -- etcdctl --endpoints=https://127.0.0.1:2379 \
             --cacert=/etc/kubernetes/pki/etcd/server-ca.crt --cert=/etc/kubernetes/pki/etcd/karmada.crt \
             --key=/etc/kubernetes/pki/etcd/karmada.key snapshot save /var/lib/etcd/fabric-{run}.db"
        )),
        "{log}"
    );
    assert_eq!(on("franca-lan", &format!("cat {kept}")).trim(), "etcd snapshot");
    assert_eq!(on("franca-lan", &format!("stat -c %a {kept}")).trim(), "600");
    assert_eq!(on("franca-lan", "ls -A /var/lib/karmada-system/karmada-etcd").trim(), "", "moved off etcd's volume");
    assert_eq!(chart()["spec"]["version"], "1.16.0");
    let journal = std::fs::read_to_string(dir.join(format!("runs/{run}.jsonl"))).unwrap();
    assert!(journal.contains(&format!("# fabric backup: karmada-etcd franca-lan:{kept}")), "{journal}");

    // 4. A snapshot that fails stops the step before its HelmChart changes.
    lab.exec("franca-lan", "touch /var/lib/rancher/etcd-fails");
    let before = chart()["metadata"]["resourceVersion"].clone();
    let (r, lines, _, _) = apply(&topology("1.17.0"), "20261202T120000Z-1");
    let e = r.expect_err("the snapshot failed").to_string();
    assert!(e.contains("Karmada's etcd snapshot before the upgrade failed, nothing changed"), "{e}\n{lines}");
    assert!(e.contains("context deadline exceeded"), "{e}");
    assert_eq!(chart()["spec"]["version"], "1.16.0");
    assert_eq!(chart()["metadata"]["resourceVersion"], before, "the HelmChart was not touched");
    lab.exec("franca-lan", "rm /var/lib/rancher/etcd-fails");

    // 5. Rolling the upgrade back: Karmada is not downgraded; the snapshot and the procedure are named.
    let entries = fabric::apply::journal::Journal::read(&dir.join(format!("runs/{run}.jsonl"))).unwrap();
    let steps = fabric::apply::journal::steps_to_roll_back(&entries);
    let (_, priors) = steps.iter().find(|(s, _)| s == "C.1").unwrap();
    let applied: Vec<_> =
        priors.iter().map(|p| (fabric::apply::revert::resource_from_prior(p), p.prior.clone())).collect();
    let left = rt.block_on(async {
        let pool = fabric::apply::Pool::default();
        let left = fabric::apply::revert::revert_all(&applied, run, &pool, &targets).await;
        pool.close().await;
        left
    });
    let said = left.join("\n");
    assert!(said.contains("Karmada 1.16.0 is not put back to 1.15.0"), "{said}");
    assert!(said.contains(&format!("franca-lan:{kept}")) && said.contains("Restoring Karmada's etcd"), "{said}");
    assert!(said.contains("loses what Karmada recorded since"), "{said}");
    assert_eq!(chart()["spec"]["version"], "1.16.0", "no downgrade");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two servers of one cluster (issue #26): upgraded one at a time in the topology's order, the
/// second cordoned only once the first is Ready and uncordoned again, each with its backup.
#[test]
fn two_servers_upgrade_one_at_a_time() {
    let u = UpgradeLab::up(
        "k2",
        "10.216",
        "k3s-two-servers",
        "        - { name: sp-cp2, role: control-plane, address: 172.30.2.11, ssh: { host: host1 } }\n",
        &["sp-lan", "sp-cp2"],
    );
    let dir = &u.dir;
    let write = |version: &str, section: &str| u.write(version, section);
    let fabric = |args: &[&str]| u.fabric(args);
    write("v1.32.9+k3s1", &bundle(&dir.join("old"), &k3s("v1.32.9+k3s1", "standin-old"), None));
    let o = fabric(&["apply", "--phase", "A", "--site", "sp", "--auto-approve"]);
    assert!(o.status.success(), "{}", out(&o));
    for host in ["sp-lan", "host1"] {
        u.server_state(host, fabric_testkit::k3s_node::SYSTEMCTL);
    }

    write("v1.33.5+k3s1", &bundle(&dir.join("new"), &k3s("v1.33.5+k3s1", "standin-new"), None));
    let o = fabric(&["apply", "--phase", "A", "--site", "sp", "--auto-approve"]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("no `{needle}` in {text}"));
    let first = [
        at("sp-lan: K3s datastore (sqlite) and server token backed up"),
        at("sp-lan: cordoned"),
        at("sp-lan: K3s v1.33.5+k3s1 installed"),
        at("sp-lan: uncordoned"),
    ];
    let second = [
        at("sp-cp2: K3s datastore (sqlite) and server token backed up"),
        at("sp-cp2: cordoned"),
        at("sp-cp2: K3s v1.33.5+k3s1 installed"),
        at("sp-cp2: uncordoned"),
    ];
    assert!(first.windows(2).all(|w| w[0] < w[1]) && second.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(first[3] < second[0], "the second server starts once the first is Ready and uncordoned: {text}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A stand-in `k3s` that also answers `k3s token rotate` as the real CLI parses it (k3s-io/k3s
/// `pkg/cli/cmds/token.go`: `--token/-t`, `--server/-s`, `--data-dir/-d`, `--new-token`; any
/// other flag is "flag provided but not defined") and does what the server does with it: the old
/// token read from `server/token` (`pkg/cli/token/token.go`, `serverAccess`), the file holding
/// the new one after (docs/adrs/server-token-rotation.md). It records the new token's shape
/// (each hex digit an `x`), never its value.
fn k3s_with_token_rotate(version: &str, build: &str) -> String {
    format!(
        r#"#!/bin/sh
# stand-in k3s
[ "$1" = --version ] && {{ echo 'k3s version {version} ({build})'; exit 0; }}
[ "$1 $2" = "token rotate" ] || exit 0
shift 2
new=
while [ $# -gt 0 ]; do
	case "$1" in
	--new-token) new="$2"; shift 2 ;;
	--new-token=*) new="${{1#*=}}"; shift ;;
	-t | --token | -s | --server | -d | --data-dir) shift 2 ;;
	--token=* | --server=* | --data-dir=*) shift ;;
	*) echo "Incorrect Usage: flag provided but not defined: $1" >&2; exit 1 ;;
	esac
done
f=/var/lib/rancher/k3s/server/token
old=$(cat "$f") || exit 1
echo "token rotate --new-token $(printf %s "$new" | sed 's/[0-9a-f]/x/g')" >>/var/lib/rancher/k3s-standin.log
[ -n "$new" ] && printf '%s::server:%s\n' "${{old%%::*}}" "${{new##*:}}" >"$f"
echo 'Token rotated, restart k3s nodes with new token'
"#
    )
}

/// Issue #26 item 3: `fabric rotate credentials --k3s-token` on a cluster fabric installed (two
/// servers, sp-lan and sp-cp2, and an agent VM): shown first (hosts, no value), then a new token
/// generated on sp-lan and `k3s token rotate --new-token` run there, sp-cp2 restarted (its Node
/// Ready), the agent's token file holding the new token; the old one kept on each host (0600);
/// no token in the output or the journal; `fabric rollback` rotates sp-lan back, restarts sp-cp2
/// and puts the agent's file back.
#[test]
fn k3s_join_token_rotated_on_the_first_server() {
    let extra = "        - { name: sp-cp2, role: control-plane, address: 172.30.2.11, ssh: { host: host1 } }\n    \
                 external_workloads:\n      - { name: sp-vm, kind: vm, address: 172.30.2.30, runs: [web], ssh: { host: host2 } }\n";
    let u = UpgradeLab::with_hosts("kt", "10.212", "k3s-token", extra, &["sp-lan", "sp-cp2"], "2");
    let dir = &u.dir;
    u.write("v1.33.5+k3s1", &bundle(&dir.join("b"), &k3s_with_token_rotate("v1.33.5+k3s1", "standin-t"), None));
    let o = u.fabric(&["apply", "--phase", "A", "--site", "sp", "--auto-approve"]);
    assert!(o.status.success(), "{}", out(&o));
    // The servers run: their token as K3s keeps it (`K10<CA hash>::server:<password>`), and a
    // stand-in systemctl recording restarts.
    for host in ["sp-lan", "host1"] {
        u.server_state(host, fabric_testkit::k3s_node::SYSTEMCTL);
        u.on(host, "echo K10cafe::server:0ld5ecret0ld5ecret > /var/lib/rancher/k3s/server/token");
    }
    let server_token = || u.on("sp-lan", "cat /var/lib/rancher/k3s/server/token").trim().to_string();
    let agent_token = || u.on("host2", "cat /etc/rancher/k3s/token").trim().to_string();
    let (old_server, old_agent) = (server_token(), agent_token());
    assert!(old_agent.starts_with("K10standin::server:"), "copied at install: {old_agent}");

    // Shown first: what is renewed, where; nothing changes before approval.
    let o = u.fabric_at_terminal(&["rotate", "credentials", "--site", "sp", "--k3s-token"], "no");
    let plan = out(&o);
    assert!(!o.status.success(), "approval is asked and refused at the terminal:\n{plan}");
    assert!(
        plan.contains("~ the K3s join token of `sp` (A.1): a new one generated on host.sp-lan and `k3s token rotate` run there; 1 other server(s) restarted one at a time, Ready between; 1 agent token file(s) written again"),
        "{plan}"
    );
    assert!(plan.contains("      host.sp-cp2\n") && plan.contains("      host.sp-vm\n"), "{plan}");
    // Without --site, every cluster fabric installed, one without agents too.
    let all = out(&u.fabric_at_terminal(&["rotate", "credentials", "--k3s-token"], "no"));
    assert!(all.contains("~ the K3s join token of `franca` (A.1): a new one generated on host.franca-lan and `k3s token rotate` run there; 0 other server(s)"), "{all}");
    assert_eq!((server_token(), agent_token()), (old_server.clone(), old_agent.clone()), "nothing before approval");

    // The agent's file cannot be written (a directory where its next version goes): the run
    // stops and puts back what it changed, sp-lan rotated back to its old token first.
    u.on("host2", "mkdir /etc/rancher/k3s/token.next");
    let o = u.fabric(&["rotate", "credentials", "--site", "sp", "--k3s-token", "--auto-approve"]);
    let failed = out(&o);
    assert_eq!(o.status.code(), Some(1), "{failed}");
    assert!(failed.contains("A.1 was reverted"), "{failed}");
    assert_eq!((server_token(), agent_token()), (old_server.clone(), old_agent.clone()), "{failed}");
    assert_eq!(u.on("sp-lan", "grep -c 'token rotate' /var/lib/rancher/k3s-standin.log").trim(), "2", "rotated back");
    assert_eq!(u.on("host1", "grep -c 'restart k3s' /var/lib/rancher/systemctl.log").trim(), "2", "restarted again");
    assert_eq!(u.on("sp-lan", "ls /var/lib/rancher/k3s/server | grep -c prior").trim(), "0", "nothing kept is left");
    assert_eq!(u.on("host2", "ls /etc/rancher/k3s | grep -c prior").trim(), "0", "the agent's file moved back");
    assert!(!failed.contains("0ld5ecret") && !failed.contains(old_agent.rsplit(':').next().unwrap()), "{failed}");
    u.on("host2", "rmdir /etc/rancher/k3s/token.next");
    u.on("sp-lan", "rm /var/lib/rancher/k3s-standin.log");
    u.on("host1", "rm /var/lib/rancher/systemctl.log");

    let o = u.fabric(&["rotate", "credentials", "--site", "sp", "--k3s-token", "--auto-approve"]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    let run = text[text.find("Run ").unwrap() + 4..].split(';').next().unwrap().to_string();
    let kept = |f: &str| format!("{f}.prior-{}", run.to_ascii_lowercase());
    // The rotation ran on sp-lan with a new token made there (32 hex digits), as the CLI takes it.
    assert_eq!(
        u.on("sp-lan", "cat /var/lib/rancher/k3s-standin.log").trim(),
        format!("token rotate --new-token {}", "x".repeat(32))
    );
    let new_server = server_token();
    assert!(new_server.starts_with("K10cafe::server:") && new_server != old_server, "{new_server}");
    assert_eq!(agent_token(), new_server, "the agent joins with the new token when it restarts");
    assert!(u.on("host1", "cat /var/lib/rancher/systemctl.log").contains("restart k3s"), "sp-cp2 restarted");
    assert!(text.contains("host.sp-cp2: K3s restarted with the new token; sp-cp2 Ready"), "{text}");
    assert!(u.on("host2", "cat /var/lib/rancher/systemctl.log 2>/dev/null").is_empty(), "the agent is not restarted");
    // The old token kept on each host, owner-only.
    let server_kept = kept("/var/lib/rancher/k3s/server/token");
    let agent_kept = kept("/etc/rancher/k3s/token");
    assert_eq!(u.on("sp-lan", &format!("cat {server_kept}")).trim(), old_server);
    assert_eq!(u.on("host2", &format!("cat {agent_kept}")).trim(), old_agent);
    assert_eq!(u.on("sp-lan", &format!("stat -c %a {server_kept}")).trim(), "600");
    for f in ["/etc/rancher/k3s/token", agent_kept.as_str()] {
        assert_eq!(u.on("host2", &format!("stat -c %a {f}")).trim(), "600", "{f}");
    }
    // No token anywhere fabric writes.
    let journals: String = std::fs::read_dir(dir.join(".fabric/runs"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    for shown in [&plan, &text, &journals] {
        for secret in [&old_server, &new_server, &old_agent] {
            let password = secret.rsplit(':').next().unwrap();
            assert!(!shown.contains(password), "a token shown:\n{shown}");
        }
    }
    assert!(journals.contains("host.sp-lan/command:k3s-token-rotate"), "{journals}");

    // Rollback: sp-lan rotated back to the token it kept, sp-cp2 restarted again, the agent's
    // file back; nothing kept is left.
    let o = u.fabric(&["rollback", &run]);
    let back = out(&o);
    assert!(o.status.success(), "{back}");
    assert_eq!(server_token(), old_server, "{back}");
    assert_eq!(agent_token(), old_agent, "{back}");
    assert_eq!(u.on("host1", "grep -c 'restart k3s' /var/lib/rancher/systemctl.log").trim(), "2");
    assert_eq!(u.on("sp-lan", &format!("ls {server_kept} 2>/dev/null")).trim(), "");
    assert_eq!(u.on("host2", &format!("ls {agent_kept} 2>/dev/null")).trim(), "");
    for secret in [&old_server, &new_server, &old_agent] {
        assert!(!back.contains(secret.rsplit(':').next().unwrap()), "a token shown:\n{back}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
