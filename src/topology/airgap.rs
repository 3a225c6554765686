//! Rules of `k3s_airgap` (K3s's air-gap bundle): what can be checked without reading or fetching
//! the files, and where each file comes from. The digests' own rules are `airgap_digests`; the
//! files are checked against them at apply, on the operator's machine and again on the host.

use super::k3s_release::{self, Part};
use super::model::{BundleFile, K3sAirgap, Topology};
use super::problem::Problem;
use super::userinfo::redact;
use crate::path;

/// The images tarballs K3s imports from `/var/lib/rancher/k3s/agent/images/` (K3s docs,
/// "Air-Gap Install": `.tar`, `.tar.gz`, `.tar.zst`, `.tar.lz4`, `.tar.bz2`).
pub const IMAGE_SUFFIXES: &[&str] = &[".tar", ".tar.gz", ".tar.zst", ".tar.lz4", ".tar.bz2"];

// The digests' own definitions live with their rules; re-exported for the bundle's users.
pub use super::airgap_digests::{PENDING, is_sha256};

/// Where a bundle file comes from: the topology's path or URL, or the release's own file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Path(String),
    Url(String),
}

impl Location {
    /// The key it is given under (`path` or `url`), and what it is, shown without credentials.
    pub fn shown(&self) -> (&'static str, String) {
        match self {
            Location::Path(p) => ("path", p.clone()),
            Location::Url(u) => ("url", redact(u)),
        }
    }
}

/// Where `part` comes from for K3s `release`: its `path` or `url`, or with neither the release's
/// own file; None when it has both (`check` refuses that).
pub fn location(a: &K3sAirgap, part: Part, release: &str) -> Option<Location> {
    let f = part.file(a);
    match (&f.path, &f.url) {
        (Some(p), None) => Some(Location::Path(p.clone())),
        (None, Some(u)) => Some(Location::Url(u.clone())),
        (None, None) => Some(Location::Url(part.release_url(release))),
        (Some(_), Some(_)) => None,
    }
}

/// The digest recorded for `part` of K3s `release`, or [`PENDING`] when there is none.
pub fn digest<'a>(a: &'a K3sAirgap, part: Part, release: &str) -> &'a str {
    a.digests.get(release).map_or(PENDING, |d| part.digest(d))
}

/// The file name a bundle file keeps on the host: its path's (or its URL's path's) last
/// component, when it is a plain name (letters, digits, `.`, `-`, `_`, `+`).
pub fn file_name(at: &Location) -> Option<&str> {
    let path = match at {
        Location::Path(p) => p.as_str(),
        // The query and fragment are no part of the name (`…/k3s?download=1`).
        Location::Url(u) => {
            let rest = u.split_once("://").map_or(u.as_str(), |(_, r)| r);
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
    let release = t.versions.k3s.as_str();
    for part in Part::ALL {
        let f = part.file(a);
        source(part.key(), f, out);
        moved_digest(part, f, release, out);
        // A file that follows versions.k3s names it by construction.
        if (f.path.is_some() || f.url.is_some())
            && let Some(at) = location(a, part, release)
        {
            names_release(part, &at, release, out);
        }
    }
    follows_a_tag(a, release, out);
    images_name(a, release, out);
    super::airgap_digests::check(a, release, out);
    mirrors(a, out);
}

/// A file given by URL or path that names another K3s release than `versions.k3s`: apply would
/// install that release's file under `versions.k3s`'s name (the binary's `--version` is checked
/// on the host, the images and the script are not).
fn names_release(part: Part, at: &Location, release: &str, out: &mut Vec<Problem>) {
    let (field, shown) = at.shown();
    let raw = match at {
        Location::Path(p) | Location::Url(p) => p,
    };
    let Some(other) = k3s_release::named_in(raw).into_iter().find(|r| r != release) else { return };
    let key = part.key();
    let help = match at {
        Location::Url(_) => format!(
            "remove `url:` to take {release}'s own file ({}), or point the URL at K3s {release}'s {}",
            part.release_url(release),
            part.asset()
        ),
        Location::Path(_) => format!("point the path at K3s {release}'s {}", part.asset()),
    };
    out.push(
        Problem::error(
            "topology::k3s-airgap",
            path!["k3s_airgap", key, field],
            format!(
                "`{shown}` is K3s {other}'s, but versions.k3s is {release}: apply would install {other}'s {} as {release}",
                part.asset()
            ),
        )
        .label(format!("{other}, not {release}"))
        .help(help)
        .related(path!["versions", "k3s"], "the release installed"),
    );
}

/// A file with neither `path` nor `url` is the release's own, found by `versions.k3s`'s tag.
fn follows_a_tag(a: &K3sAirgap, release: &str, out: &mut Vec<Problem>) {
    let following: Vec<&str> =
        Part::ALL.iter().filter(|p| p.file(a).path.is_none() && p.file(a).url.is_none()).map(|p| p.key()).collect();
    if following.is_empty() || k3s_release::is_release(release) {
        return;
    }
    out.push(
        Problem::error(
            "topology::k3s-airgap",
            path!["versions", "k3s"],
            format!(
                "`{release}` is not a K3s release tag, so the release files k3s_airgap takes by it ({}) have no URL",
                following.join(", ")
            ),
        )
        .label("not a release tag")
        .help(
            "write the tag as K3s's releases page names it, e.g. `v1.33.5+k3s1`, or give each file a `url:` or `path:`",
        ),
    );
}

/// A digest beside its file (the shape before digests were keyed by release): refused, with the
/// entry to write instead.
fn moved_digest(part: Part, f: &BundleFile, release: &str, out: &mut Vec<Problem>) {
    let Some(d) = &f.sha256 else { return };
    let key = part.key();
    let d: String = d.chars().take(72).collect();
    out.push(
        Problem::error(
            "topology::k3s-airgap",
            path!["k3s_airgap", key, "sha256"],
            format!("`k3s_airgap.{key}` takes no `sha256`: digests are recorded under `k3s_airgap.digests`, by release"),
        )
        .label("move it to digests")
        .help(format!(
            "remove this line's `sha256:` and, if it is {release}'s, write under k3s_airgap: `digests: {{ \"{release}\": {{ {key}: {d}, … }} }}`"
        )),
    );
}

/// The images tarball's name must be one K3s imports.
fn images_name(a: &K3sAirgap, release: &str, out: &mut Vec<Problem>) {
    // A file with no single source was reported by `source`; its name cannot be judged.
    let Some(at) = location(a, Part::Images, release) else { return };
    if file_name(&at).is_some_and(|n| IMAGE_SUFFIXES.iter().any(|s| n.ends_with(s))) {
        return;
    }
    let (field, shown) = at.shown();
    out.push(
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
    );
}

/// One bundle file's `path` or `url`: at most one, a path not empty, a URL fabric can fetch.
fn source(key: &str, f: &BundleFile, out: &mut Vec<Problem>) {
    let problem = |field: &str, message: String, label: &str, help: &str| {
        Problem::error("topology::k3s-airgap", path!["k3s_airgap", key, field], message).label(label).help(help)
    };
    match (&f.path, &f.url) {
        (Some(_), Some(_)) => out.push(problem(
            "url",
            format!("`k3s_airgap.{key}` has both `path` and `url`"),
            "one of path and url",
            "keep `path` for a file on this machine, or `url` for one fabric downloads at apply (neither: the release's own file)",
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
                    "give the http:// or https:// URL of the release's file (a mirror), or remove `url:` to take the release's own",
                ));
            }
        }
        (Some(_), None) | (None, None) => {}
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
    use crate::topology::model::ReleaseDigests;

    #[test]
    fn digests_and_names() {
        assert!(is_sha256(&"a".repeat(64)));
        assert!(!is_sha256(&"A".repeat(64)));
        assert!(!is_sha256(&"a".repeat(63)));
        let f = |p: &str| Location::Path(p.into());
        assert_eq!(file_name(&f("b/k3s-airgap-images-amd64.tar.zst")), Some("k3s-airgap-images-amd64.tar.zst"));
        assert_eq!(file_name(&f("b/")), None);
        assert_eq!(file_name(&f("b/x y.tar")), None);
        assert_eq!(file_name(&f("b/.hidden.tar")), None);
        let u = |u: &str| Location::Url(u.into());
        let release = "https://github.com/k3s-io/k3s/releases/download/v1.33.5%2Bk3s1/k3s-airgap-images-amd64.tar.zst";
        assert_eq!(file_name(&u(release)), Some("k3s-airgap-images-amd64.tar.zst"));
        assert_eq!(file_name(&u("https://m.example/b/install.sh?x=1#top")), Some("install.sh"));
        assert_eq!(file_name(&u("https://m.example")), None);
    }

    /// A file without `path` or `url` is the release's own; with both it has no single source.
    #[test]
    fn files_follow_the_release_unless_given() {
        let file = |path: Option<&str>, url: Option<&str>| BundleFile {
            path: path.map(Into::into),
            url: url.map(Into::into),
            sha256: None,
        };
        let mut a = K3sAirgap {
            binary: BundleFile::default(),
            images: file(Some("b/images.tar"), None),
            install_script: file(Some("b/install.sh"), Some("https://m/install.sh")),
            digests: Default::default(),
            registry_mirrors: vec![],
        };
        let r = "v1.33.6+k3s1";
        assert_eq!(
            location(&a, Part::Binary, r),
            Some(Location::Url("https://github.com/k3s-io/k3s/releases/download/v1.33.6%2Bk3s1/k3s".into()))
        );
        assert_eq!(location(&a, Part::Images, r), Some(Location::Path("b/images.tar".into())));
        assert_eq!(location(&a, Part::InstallScript, r), None);
        assert_eq!(digest(&a, Part::Binary, r), PENDING);
        let d = |c: char| c.to_string().repeat(64);
        a.digests.insert(r.into(), ReleaseDigests { binary: d('a'), images: d('b'), install_script: d('c') });
        assert_eq!(digest(&a, Part::Images, r), d('b'));
        assert_eq!(digest(&a, Part::Images, "v1.33.5+k3s1"), PENDING);
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
