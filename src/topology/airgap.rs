//! Rules of `k3s_airgap` (K3s's air-gap bundle): what can be checked without reading the files.
//! The digests themselves are checked at apply, on the operator's machine and again on the host.

use super::model::{BundleFile, K3sAirgap, Topology};
use super::problem::Problem;
use crate::path;

/// The images tarballs K3s imports from `/var/lib/rancher/k3s/agent/images/` (K3s docs,
/// "Air-Gap Install": `.tar`, `.tar.gz`, `.tar.zst`, `.tar.lz4`, `.tar.bz2`).
pub const IMAGE_SUFFIXES: &[&str] = &[".tar", ".tar.gz", ".tar.zst", ".tar.lz4", ".tar.bz2"];

/// A SHA-256 as `sha256sum` prints it: 64 lowercase hex digits.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The file name a bundle file keeps on the host: its path's last component, when it is a plain
/// name (letters, digits, `.`, `-`, `_`, `+`).
pub fn file_name(f: &BundleFile) -> Option<&str> {
    let name = f.path.rsplit('/').next()?;
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b));
    plain.then_some(name)
}

pub fn check(t: &Topology, out: &mut Vec<Problem>) {
    let Some(a) = &t.k3s_airgap else { return };
    let files: [(&str, &BundleFile); 3] =
        [("binary", &a.binary), ("images", &a.images), ("install_script", &a.install_script)];
    for (key, f) in files {
        if f.path.trim().is_empty() {
            out.push(
                Problem::error("topology::k3s-airgap", path!["k3s_airgap", key, "path"], "the path is empty")
                    .label("empty")
                    .help("give the file's path on this machine"),
            );
        }
        if !is_sha256(&f.sha256) {
            out.push(
                Problem::error(
                    "topology::k3s-airgap",
                    path!["k3s_airgap", key, "sha256"],
                    format!("`{}` is not a SHA-256 (64 lowercase hex digits)", f.sha256),
                )
                .label("not a digest")
                .help("copy the file's line from the release's sha256sum-<arch>.txt, or run `sha256sum FILE`"),
            );
        }
    }
    match file_name(&a.images) {
        Some(n) if IMAGE_SUFFIXES.iter().any(|s| n.ends_with(s)) => {}
        _ => out.push(
            Problem::error(
                "topology::k3s-airgap",
                path!["k3s_airgap", "images", "path"],
                format!(
                    "K3s does not import `{}`: its name must be plain and end in one of {}",
                    a.images.path,
                    IMAGE_SUFFIXES.join(", ")
                ),
            )
            .label("not an images tarball")
            .help("use the release's k3s-airgap-images-<arch>.tar.zst under its own name"),
        ),
    }
    mirrors(a, out);
}

fn mirrors(a: &K3sAirgap, out: &mut Vec<Problem>) {
    for (i, m) in a.registry_mirrors.iter().enumerate() {
        let plain = |s: &str| !s.is_empty() && !s.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\');
        if !plain(&m.registry) {
            out.push(
                Problem::error(
                    "topology::k3s-airgap",
                    path!["k3s_airgap", "registry_mirrors", i, "registry"],
                    format!("`{}` is not a registry name", m.registry),
                )
                .label("not a registry")
                .help("a registry host such as `docker.io` or `registry.k8s.io`, or `*`"),
            );
        }
        if m.endpoints.is_empty() {
            out.push(
                Problem::error(
                    "topology::k3s-airgap",
                    path!["k3s_airgap", "registry_mirrors", i, "endpoints"],
                    "a mirror needs at least one endpoint",
                )
                .label("no endpoint")
                .help("add the mirror's URL, e.g. https://mirror.example:5000"),
            );
        }
        for (j, e) in m.endpoints.iter().enumerate() {
            let url = (e.starts_with("https://") || e.starts_with("http://")) && plain(e);
            if !url {
                out.push(
                    Problem::error(
                        "topology::k3s-airgap",
                        path!["k3s_airgap", "registry_mirrors", i, "endpoints", j],
                        format!("`{e}` is not an http(s) URL"),
                    )
                    .label("not a URL")
                    .help("K3s's registries.yaml takes URLs such as https://mirror.example:5000"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_and_names() {
        assert!(is_sha256(&"a".repeat(64)));
        assert!(!is_sha256(&"A".repeat(64)));
        assert!(!is_sha256(&"a".repeat(63)));
        let f = |p: &str| BundleFile { path: p.into(), sha256: String::new() };
        assert_eq!(file_name(&f("b/k3s-airgap-images-amd64.tar.zst")), Some("k3s-airgap-images-amd64.tar.zst"));
        assert_eq!(file_name(&f("b/")), None);
        assert_eq!(file_name(&f("b/x y.tar")), None);
        assert_eq!(file_name(&f("b/.hidden.tar")), None);
    }
}
