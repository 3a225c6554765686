//! Rules of `k3s_airgap` (K3s's air-gap bundle): what can be checked without reading or fetching
//! the files. The digests themselves are checked at apply, on the operator's machine and again on
//! the host.

use super::model::{BundleFile, K3sAirgap, Topology};
use super::problem::Problem;
use super::userinfo::redact;
use crate::path;

/// The images tarballs K3s imports from `/var/lib/rancher/k3s/agent/images/` (K3s docs,
/// "Air-Gap Install": `.tar`, `.tar.gz`, `.tar.zst`, `.tar.lz4`, `.tar.bz2`).
pub const IMAGE_SUFFIXES: &[&str] = &[".tar", ".tar.gz", ".tar.zst", ".tar.lz4", ".tar.bz2"];

/// What a bundle file's `sha256` says while its digest is not recorded yet: `validate` warns,
/// `plan` shows the install, `apply` refuses it (never a made-up digest).
pub const PENDING: &str = "TODO";

/// A SHA-256 as `sha256sum` prints it: 64 lowercase hex digits.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Where a bundle file comes from, as the topology gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location<'a> {
    Path(&'a str),
    Url(&'a str),
}

/// The one of `path` and `url` the file has; None when it has both or neither (`check` refuses
/// those).
pub fn location(f: &BundleFile) -> Option<Location<'_>> {
    match (&f.path, &f.url) {
        (Some(p), None) => Some(Location::Path(p)),
        (None, Some(u)) => Some(Location::Url(u)),
        _ => None,
    }
}

/// The file name a bundle file keeps on the host: its path's (or its URL's path's) last
/// component, when it is a plain name (letters, digits, `.`, `-`, `_`, `+`).
pub fn file_name(f: &BundleFile) -> Option<&str> {
    let path = match location(f)? {
        Location::Path(p) => p,
        // The query and fragment are no part of the name (`…/k3s?download=1`).
        Location::Url(u) => {
            let rest = u.split_once("://").map_or(u, |(_, r)| r);
            let rest = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
            rest.split_once('/').map_or("", |(_, p)| p)
        }
    };
    let name = path.rsplit('/').next()?;
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b));
    plain.then_some(name)
}

/// Why fabric cannot fetch from `url`, if it cannot: it must parse, be http(s) and name a host.
pub fn url_problem(url: &str) -> Option<&'static str> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    if !matches!(scheme.as_deref(), Some("http" | "https")) {
        return Some("is not an http:// or https:// URL");
    }
    let Ok(uri) = url.parse::<http::Uri>() else { return Some("does not parse as a URL") };
    if uri.host().is_none_or(str::is_empty) {
        return Some("names no host");
    }
    None
}

pub fn check(t: &Topology, out: &mut Vec<Problem>) {
    let Some(a) = &t.k3s_airgap else { return };
    let files: [(&str, &BundleFile); 3] =
        [("binary", &a.binary), ("images", &a.images), ("install_script", &a.install_script)];
    for (key, f) in files {
        source(key, f, out);
        if f.sha256 == PENDING {
            out.push(
                Problem::warning(
                    "topology::k3s-airgap",
                    path!["k3s_airgap", key, "sha256"],
                    format!(
                        "the digest of `k3s_airgap.{key}` is not recorded yet: `apply` refuses to install K3s until it is"
                    ),
                )
                .label("digest to record")
                .help(format!(
                    "copy the file's line from the sha256sum-amd64.txt of K3s {} (or run `sha256sum FILE` on the file you checked)",
                    t.versions.k3s
                )),
            );
        } else if !is_sha256(&f.sha256) {
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
    // A file with no single source was reported above; its name cannot be judged.
    if let Some(at) = location(&a.images) {
        let (field, shown) = match at {
            Location::Path(p) => ("path", p.to_string()),
            Location::Url(u) => ("url", redact(u)),
        };
        match file_name(&a.images) {
            Some(n) if IMAGE_SUFFIXES.iter().any(|s| n.ends_with(s)) => {}
            _ => out.push(
                Problem::error(
                    "topology::k3s-airgap",
                    path!["k3s_airgap", "images", field],
                    format!(
                        "K3s does not import `{shown}`: its name must be plain and end in one of {}",
                        IMAGE_SUFFIXES.join(", ")
                    ),
                )
                .label("not an images tarball")
                .help("use the release's k3s-airgap-images-<arch>.tar.zst under its own name"),
            ),
        }
    }
    mirrors(a, out);
}

/// One bundle file's `path` or `url`: exactly one, a path not empty, a URL fabric can fetch.
fn source(key: &str, f: &BundleFile, out: &mut Vec<Problem>) {
    let problem = |field: &str, message: String, label: &str, help: &str| {
        let at = if field.is_empty() { path!["k3s_airgap", key] } else { path!["k3s_airgap", key, field] };
        Problem::error("topology::k3s-airgap", at, message).label(label).help(help)
    };
    match (&f.path, &f.url) {
        (Some(_), Some(_)) => out.push(problem(
            "url",
            format!("`k3s_airgap.{key}` has both `path` and `url`"),
            "one of path and url",
            "keep `path` for a file on this machine, or `url` for one fabric downloads at apply",
        )),
        (None, None) => out.push(problem(
            "",
            format!("`k3s_airgap.{key}` has neither `path` nor `url`"),
            "no path or url",
            "give `path:` (a file on this machine) or `url:` (an http(s) URL fabric downloads at apply)",
        )),
        (Some(p), None) if p.trim().is_empty() => {
            out.push(problem("path", "the path is empty".into(), "empty", "give the file's path on this machine"))
        }
        (None, Some(u)) => {
            if let Some(why) = url_problem(u) {
                out.push(problem(
                    "url",
                    format!("`{}` {why}", redact(u)),
                    "not a URL fabric can fetch",
                    "give the http:// or https:// URL of the release's file (the K3s releases page, or a mirror)",
                ));
            }
        }
        (Some(_), None) => {}
    }
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
        let f = |p: &str| BundleFile { path: Some(p.into()), url: None, sha256: String::new() };
        assert_eq!(file_name(&f("b/k3s-airgap-images-amd64.tar.zst")), Some("k3s-airgap-images-amd64.tar.zst"));
        assert_eq!(file_name(&f("b/")), None);
        assert_eq!(file_name(&f("b/x y.tar")), None);
        assert_eq!(file_name(&f("b/.hidden.tar")), None);
        let u = |u: &str| BundleFile { path: None, url: Some(u.into()), sha256: String::new() };
        let release = "https://github.com/k3s-io/k3s/releases/download/v1.33.5%2Bk3s1/k3s-airgap-images-amd64.tar.zst";
        assert_eq!(file_name(&u(release)), Some("k3s-airgap-images-amd64.tar.zst"));
        assert_eq!(file_name(&u("https://m.example/b/install.sh?x=1#top")), Some("install.sh"));
        assert_eq!(file_name(&u("https://m.example")), None);
        let both = BundleFile { path: Some("k3s".into()), url: Some("https://m/k3s".into()), sha256: String::new() };
        assert_eq!(location(&both), None);
        assert_eq!(file_name(&both), None);
    }

    #[test]
    fn urls_are_fetchable_and_shown_without_credentials() {
        assert_eq!(url_problem("https://m.example:8443/k3s"), None);
        assert_eq!(url_problem("HTTP://127.0.0.1/k3s"), None);
        assert_eq!(url_problem("https://user:pw@m.example/k3s"), None);
        assert_eq!(url_problem("ftp://m.example/k3s"), Some("is not an http:// or https:// URL"));
        assert_eq!(url_problem("m.example/k3s"), Some("is not an http:// or https:// URL"));
        assert_eq!(url_problem("https://m example/k3s"), Some("does not parse as a URL"));
        assert_eq!(url_problem(""), Some("is not an http:// or https:// URL"));
        assert_eq!(url_problem("https://"), Some("does not parse as a URL"));
    }
}
