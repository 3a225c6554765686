//! K3s installed from its air-gap bundle (`k3s_airgap`), the way K3s documents air-gapped
//! installs (docs.k3s.io, "Air-Gap Install", "Manually Deploy Images Method"): the images tarball
//! in `/var/lib/rancher/k3s/agent/images/`, the binary in `/usr/local/bin/k3s`, then the install
//! script with `INSTALL_K3S_SKIP_DOWNLOAD=true`, which sets up the service and downloads nothing.
//!
//! One resource per host, `host.<name>/command:k3s-install`. Its live state is the service the
//! install script made (`/etc/systemd/system/k3s.service` for a server, `k3s-agent.service` for
//! an agent) and the digest of the installed binary, so an installed, matching version is no
//! change and another bundle's binary is an update with the two digests in the diff. The
//! builders here are pure; `providers::airgap` runs them.
//!
//! Rollback does not uninstall K3s: "absent" can also mean "installed by hand, another version",
//! and `k3s-uninstall.sh` deletes the node's data. The runbook says how to remove it by hand.

use serde::Serialize;

use crate::sh;
use crate::topology::Topology;
use crate::topology::airgap::{Location, digest, file_name, location};
use crate::topology::k3s_release::Part;
use crate::topology::model::K3sAirgap;
use crate::topology::userinfo::redact;
use crate::transport::shell::{ABSENT, Sh};

/// What K3s runs as on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Server,
    Agent,
}

impl Role {
    /// The systemd service the install script makes, and `INSTALL_K3S_EXEC`'s command.
    pub fn service(self) -> &'static str {
        match self {
            Role::Server => "k3s",
            Role::Agent => "k3s-agent",
        }
    }
    fn exec(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Agent => "agent",
        }
    }
}

/// One file to copy: where fabric takes it from on the operator's machine, its digest, its name
/// on the host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Upload {
    pub from: Source,
    pub sha256: String,
    pub name: String,
}

/// Where a bundle file comes from on the operator's machine.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A path as the topology gives it (`~` not yet expanded).
    Path(String),
    /// A URL fetched at apply into the state directory's cache (`providers::bundle`); the
    /// credentials it may carry are never serialized.
    Url(#[serde(serialize_with = "redacted")] String),
}

fn redacted<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact(url))
}

impl Upload {
    /// `part` of the bundle for K3s `release`: where from (the topology's path or URL, or the
    /// release's own file), the digest recorded for that release, the name it keeps on the host.
    fn of(a: &K3sAirgap, part: Part, release: &str, fallback: &str) -> Upload {
        // `validate` refuses a file with both; the path is what stays unusable then.
        let at =
            location(a, part, release).unwrap_or_else(|| Location::Path(part.file(a).path.clone().unwrap_or_default()));
        let name = file_name(&at).unwrap_or(fallback).to_string();
        let from = match at {
            Location::Url(u) => Source::Url(u),
            Location::Path(p) => Source::Path(p),
        };
        Upload { from, sha256: digest(a, part, release).to_string(), name }
    }

    /// Where it comes from, for messages: the path, or the URL without its credentials.
    pub fn shown(&self) -> String {
        match &self.from {
            Source::Path(p) => p.clone(),
            Source::Url(u) => redact(u),
        }
    }
}

/// K3s on one host, from the topology's bundle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct K3sInstall {
    pub role: Role,
    /// The cluster a server install brings up (`cluster.<site>`, or Karmada's VM's): while it
    /// does not run, its objects are planned as new (`live::observe::mark_bootstrap`).
    pub brings_up: Option<crate::addr::Target>,
    /// `versions.k3s`: the binary's `--version` must name it.
    pub version: String,
    pub binary: Upload,
    pub images: Upload,
    pub script: Upload,
}

/// Where the staging directories live: root's only (0700).
pub const STAGE_ROOT: &str = "/var/lib/fabric";
/// The installed binary.
pub const BINARY: &str = "/usr/local/bin/k3s";
/// Where K3s imports image tarballs from at start.
pub const IMAGES_DIR: &str = "/var/lib/rancher/k3s/agent/images";

impl K3sInstall {
    /// The install of `role`, when the topology names a bundle.
    pub fn from_topology(t: &Topology, role: Role) -> Option<K3sInstall> {
        let a = t.k3s_airgap.as_ref()?;
        let v = t.versions.k3s.as_str();
        Some(K3sInstall {
            role,
            brings_up: None,
            version: v.to_string(),
            // The binary and the script get fixed names on the host: the script is run by name
            // and the binary installed under /usr/local/bin/k3s whatever it was called here.
            binary: Upload { name: "k3s".into(), ..Upload::of(a, Part::Binary, v, "k3s") },
            images: Upload::of(a, Part::Images, v, "k3s-airgap-images.tar.zst"),
            script: Upload { name: "install.sh".into(), ..Upload::of(a, Part::InstallScript, v, "install.sh") },
        })
    }

    pub fn uploads(&self) -> [&Upload; 3] {
        [&self.binary, &self.images, &self.script]
    }

    /// The bundle as `fabric render` writes it out (`config/k3s/airgap-bundle.yaml`): the
    /// release, and each file's source and digest, so the GitOps repository shows what a
    /// defaulted URL resolved to and a reviewer of a bump sees every URL and digest change.
    /// The same for every host; a URL's credentials are left out.
    pub fn bundle(&self) -> serde_json::Value {
        let files: Vec<serde_json::Value> = self
            .uploads()
            .into_iter()
            .map(|u| {
                let (key, at) = match &u.from {
                    Source::Path(p) => ("path", p.clone()),
                    Source::Url(_) => ("url", u.shown()),
                };
                serde_json::json!({ "name": u.name, key: at, "sha256": u.sha256 })
            })
            .collect();
        serde_json::json!({ "k3s": self.version, "files": files })
    }

    /// The state fabric wants, as `read` prints it: the service, the binary's digest and its
    /// version (the running version an upgrade plans from: `desired::upgrade`).
    pub fn text(&self) -> String {
        format!("{} {} {}\n", self.role.service(), self.binary.sha256, self.version)
    }

    /// One line per installed K3s service with the installed binary's digest and version
    /// (`k3s <sha256> v1.33.5+k3s1`: the third word of `k3s --version`'s first line, "k3s version
    /// v1.33.5+k3s1 (<commit>)", k3s-io/k3s `pkg/cli/cmds/root.go` `versionPrinter`), or exit
    /// [`ABSENT`] when the install script never ran here.
    pub fn read() -> Sh {
        sh!(
            "found=; for u in k3s k3s-agent; do if [ -f /etc/systemd/system/$u.service ] && [ -f {} ]; then \
             found=1; printf '%s %s %s\\n' \"$u\" \"$(sha256sum < {} | cut -d' ' -f1)\" \"$({} --version 2>/dev/null | head -n1 | cut -d' ' -f3)\"; fi; done; [ -n \"$found\" ] || exit {}",
            BINARY,
            BINARY,
            BINARY,
            ABSENT.to_string()
        )
    }

    /// Makes this run's private staging directory and prints its path.
    pub fn stage() -> Sh {
        sh!(
            "umask 077 && mkdir -p {} && chmod 700 {} && mktemp -d {}",
            STAGE_ROOT,
            STAGE_ROOT,
            format!("{STAGE_ROOT}/stage.XXXXXXXX")
        )
    }

    /// Writes stdin to `name` in the staging directory.
    pub fn upload(stage: &Stage, name: &str) -> Sh {
        sh!("cat > {}", format!("{}/{name}", stage.0))
    }

    /// Checks every digest on the host, the binary's version, then installs: the images where K3s
    /// imports them, the binary, and the script with `INSTALL_K3S_SKIP_DOWNLOAD=true`.
    pub fn install(&self, stage: &Stage) -> Sh {
        let mut out = sh!("cd {}", stage.0.clone());
        for u in self.uploads() {
            out = and(
                out,
                sh!(
                    "{ [ \"$(sha256sum < {} | cut -d' ' -f1)\" = {} ] || { echo {} >&2; exit 1; }; }",
                    u.name.clone(),
                    u.sha256.clone(),
                    format!("{}: its SHA-256 on the host is not the topology's (the copy was damaged)", u.shown())
                ),
            );
        }
        let out = and(
            out,
            sh!(
                "chmod 755 k3s && { ./k3s --version | grep -qF -- {} || { echo {} >&2; ./k3s --version >&2; exit 1; }; }",
                self.version.clone(),
                format!("the bundle's k3s is not versions.k3s ({}):", self.version)
            ),
        );
        let out = and(
            out,
            sh!(
                "mkdir -p {} && install -m 644 {} {} && install -m 755 k3s {}",
                IMAGES_DIR,
                self.images.name.clone(),
                format!("{IMAGES_DIR}/{}", self.images.name),
                BINARY
            ),
        );
        and(out, sh!("INSTALL_K3S_SKIP_DOWNLOAD=true INSTALL_K3S_EXEC={} sh install.sh", self.role.exec()))
    }

    /// Removes the staging directory, whatever happened.
    pub fn cleanup(stage: &Stage) -> Sh {
        sh!("rm -rf -- {}", stage.0.clone())
    }
}

fn and(a: Sh, b: Sh) -> Sh {
    sh!("{} && {}", a, b)
}

/// A staging directory the host named: accepted only as `mktemp -d` makes it under
/// [`STAGE_ROOT`] (the host's answer is input, and it is joined into paths and commands).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage(String);

impl Stage {
    pub fn parse(answer: &str) -> Option<Stage> {
        let p = answer.trim_end_matches('\n');
        let rest = p.strip_prefix(STAGE_ROOT)?.strip_prefix("/stage.")?;
        (rest.len() == 8 && rest.bytes().all(|b| b.is_ascii_alphanumeric())).then(|| Stage(p.to_string()))
    }
    pub fn path(&self) -> &str {
        &self.0
    }
}

/// What a host's `read` answer says, kept only when it is lines of `<service> <sha256> <version>`.
pub fn parse_read(answer: &str) -> Option<String> {
    let ok = |l: &str| {
        let w: Vec<&str> = l.split(' ').collect();
        let version = |v: &str| {
            crate::topology::rules::parse_version(v).is_some()
                && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
        };
        w.len() == 3
            && (w[0] == "k3s" || w[0] == "k3s-agent")
            && crate::topology::airgap::is_sha256(w[1])
            && version(w[2])
    };
    let lines: Vec<&str> = answer.lines().collect();
    (!lines.is_empty() && lines.iter().all(|l| ok(l))).then(|| lines.join("\n") + "\n")
}

/// A kubeconfig as K3s writes it, parsed (the text is a secret: nothing here keeps or shows it).
pub fn parse_kubeconfig(text: &str) -> Option<serde_json::Value> {
    let v = serde_saphyr::from_str::<crate::topology::tree::Node>(text).ok()?.to_json();
    (v["clusters"].is_array() && v["users"].is_array()).then_some(v)
}

/// K3s's `registries.yaml` for the topology's mirrors (K3s docs, "Private Registry
/// Configuration": `mirrors: <registry>: endpoint: [...]`), when there are any.
pub fn registries_yaml(t: &Topology) -> Option<serde_json::Value> {
    let a = t.k3s_airgap.as_ref().filter(|a| !a.registry_mirrors.is_empty())?;
    let mut mirrors = serde_json::Map::new();
    for m in &a.registry_mirrors {
        mirrors.insert(m.registry.clone(), serde_json::json!({ "endpoint": m.endpoints }));
    }
    Some(serde_json::json!({ "mirrors": mirrors }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install() -> K3sInstall {
        let u = |name: &str, c: char| Upload {
            from: Source::Path(format!("b/{name}")),
            sha256: c.to_string().repeat(64),
            name: name.into(),
        };
        K3sInstall {
            role: Role::Agent,
            brings_up: None,
            version: "v1.33.5+k3s1".into(),
            binary: u("k3s", 'a'),
            images: u("k3s-airgap-images-amd64.tar.zst", 'b'),
            script: u("install.sh", 'c'),
        }
    }

    #[test]
    fn a_stage_is_only_what_mktemp_makes() {
        assert_eq!(Stage::parse("/var/lib/fabric/stage.AbC123xy\n").unwrap().path(), "/var/lib/fabric/stage.AbC123xy");
        for bad in [
            "/tmp/stage.AbC123xy",
            "/var/lib/fabric/stage.AbC1",
            "/var/lib/fabric/stage.AbC123x;",
            "/var/lib/fabric/stage.../x",
        ] {
            assert!(Stage::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_read_answer_is_only_services_and_digests() {
        let d = "e".repeat(64);
        let line = format!("k3s-agent {d} v1.33.5+k3s1\n");
        assert_eq!(parse_read(&line), Some(line.clone()));
        assert!(parse_read(&format!("{line}[Interface]\n")).is_none());
        assert!(parse_read(&format!("k3s-agent {d} $(reboot)\n")).is_none(), "a version is only a version");
        assert!(parse_read("").is_none());
    }

    #[test]
    fn the_install_checks_digests_and_version_before_it_installs() {
        let k = install();
        let stage = Stage::parse("/var/lib/fabric/stage.AbC123xy").unwrap();
        let cmd = k.install(&stage).to_string();
        let check = cmd.find(&"a".repeat(64)).unwrap();
        let version = cmd.find("./k3s --version").unwrap();
        let run = cmd.find("INSTALL_K3S_SKIP_DOWNLOAD=true INSTALL_K3S_EXEC=agent sh install.sh").unwrap();
        assert!(check < version && version < run, "{cmd}");
        assert!(cmd.starts_with("cd /var/lib/fabric/stage.AbC123xy"), "{cmd}");
        assert_eq!(k.text(), format!("k3s-agent {} v1.33.5+k3s1\n", "a".repeat(64)));
    }

    #[test]
    fn a_url_upload_never_shows_its_credentials() {
        let mut k = install();
        k.images.from = Source::Url("https://fabric:s3cret@m.example/k3s-airgap-images-amd64.tar.zst".into());
        assert_eq!(k.images.shown(), "https://m.example/k3s-airgap-images-amd64.tar.zst");
        let stage = Stage::parse("/var/lib/fabric/stage.AbC123xy").unwrap();
        let cmd = k.install(&stage).to_string();
        assert!(cmd.contains("https://m.example/k3s-airgap-images-amd64.tar.zst") && !cmd.contains("s3cret"), "{cmd}");
        let json = serde_json::to_string(&k).unwrap();
        assert!(json.contains(r#""url":"https://m.example/"#) && !json.contains("s3cret"), "{json}");
    }

    #[test]
    fn builders_run_in_sh() {
        // Syntax only (`sh -n`): every builder is a valid script.
        let stage = Stage::parse("/var/lib/fabric/stage.AbC123xy").unwrap();
        for c in [
            K3sInstall::read(),
            K3sInstall::stage(),
            K3sInstall::upload(&stage, "k3s"),
            install().install(&stage),
            K3sInstall::cleanup(&stage),
        ] {
            let o = std::process::Command::new("sh").args(["-n", "-c", c.as_str()]).output().unwrap();
            assert!(o.status.success(), "{c}: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
}
