//! K3s releases as the air-gap bundle names them: the tag (`v1.33.5+k3s1`), the three files a
//! release publishes and where, and the digests fabric itself knows. Pure; `airgap` and
//! `airgap_digests` check a topology with them, `desired::k3s_install` resolves the files.

use super::model::{BundleFile, K3sAirgap, ReleaseDigests};

/// Where K3s publishes a release's assets (github.com/k3s-io/k3s/releases).
pub const DOWNLOAD: &str = "https://github.com/k3s-io/k3s/releases/download";
/// Where `install.sh` at a tag is served from (what get.k3s.io serves for a pinned release).
pub const RAW: &str = "https://raw.githubusercontent.com/k3s-io/k3s";

/// One of the bundle's three files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Binary,
    Images,
    InstallScript,
}

impl Part {
    pub const ALL: [Part; 3] = [Part::Binary, Part::Images, Part::InstallScript];

    /// Its key under `k3s_airgap` and under each `digests` entry.
    pub fn key(self) -> &'static str {
        match self {
            Part::Binary => "binary",
            Part::Images => "images",
            Part::InstallScript => "install_script",
        }
    }

    /// The name the release gives it (and its line in `sha256sum-amd64.txt`, but install.sh's).
    pub fn asset(self) -> &'static str {
        match self {
            Part::Binary => "k3s",
            Part::Images => "k3s-airgap-images-amd64.tar.zst",
            Part::InstallScript => "install.sh",
        }
    }

    pub fn file(self, a: &K3sAirgap) -> &BundleFile {
        match self {
            Part::Binary => &a.binary,
            Part::Images => &a.images,
            Part::InstallScript => &a.install_script,
        }
    }

    pub fn digest(self, d: &ReleaseDigests) -> &str {
        match self {
            Part::Binary => &d.binary,
            Part::Images => &d.images,
            Part::InstallScript => &d.install_script,
        }
    }

    /// The release's own file for `release` (amd64): what a `k3s_airgap` file without `path`
    /// or `url` is.
    pub fn release_url(self, release: &str) -> String {
        let tag = release.replace('+', "%2B");
        match self {
            Part::InstallScript => format!("{RAW}/{tag}/install.sh"),
            _ => format!("{DOWNLOAD}/{tag}/{}", self.asset()),
        }
    }

    /// Whether two releases can share this file's digest: install.sh changes rarely (the same
    /// digest is recorded for v1.33.4+k3s1 to v1.33.13+k3s1 in public pins), a release's
    /// binary and images never.
    pub fn shared_across_releases(self) -> bool {
        self == Part::InstallScript
    }

    /// How to get its digest, for help lines.
    pub fn how_to_record(self, release: &str) -> String {
        match self {
            Part::InstallScript => format!("run `sha256sum install.sh` on the install.sh at the {release} tag"),
            _ => format!("copy the `{}` line of the sha256sum-amd64.txt of K3s {release}", self.asset()),
        }
    }
}

/// The digests fabric knows, each checked against a public source before it was recorded
/// (topology.example.yaml says how), so that a topology recording one of them under another
/// release is refused: the usual slip of a bump is a renamed key over the old digests.
/// install.sh is left out: releases share it.
pub const KNOWN: &[(&str, Part, &str)] = &[
    ("v1.33.5+k3s1", Part::Binary, "ba2bc6892347d5ddf7d9a1f50b4d6fe73c6c325eb16894aa95993ac143096725"),
    ("v1.33.5+k3s1", Part::Images, "c1d71ab864b6b7de087d0827a1810c5fd271134e317af8730ec9211eaf34b097"),
];

/// The release whose `part` fabric knows to have `digest`.
pub fn known_release(part: Part, digest: &str) -> Option<&'static str> {
    KNOWN.iter().find(|(_, p, d)| *p == part && *d == digest).map(|(r, _, _)| *r)
}

/// Whether `s` is exactly a K3s release tag, `v<major>.<minor>.<patch>+k3s<n>`.
pub fn is_release(s: &str) -> bool {
    matches!(tag_at(s, 0), Some((end, t)) if end == s.len() && t == s)
}

/// The K3s release tags named in a URL or path, normalised to `+`: a tag's `+` may be written
/// `%2B` (URL-escaped, as GitHub's download links have it) or `-` (as mirrors and file names
/// often rename it).
pub fn named_in(s: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut i = 0;
    while i < s.len() {
        // A tag starts at a `v` that does not end a longer word (`dev1.2.3` is no tag).
        let starts = s.as_bytes()[i] == b'v' && (i == 0 || !s.as_bytes()[i - 1].is_ascii_alphanumeric());
        match tag_at(s, i).filter(|_| starts) {
            Some((end, t)) => {
                if !found.contains(&t) {
                    found.push(t);
                }
                i = end;
            }
            None => i += 1,
        }
    }
    found
}

/// The tag starting at byte `at` of `s`: where it ends and the tag with a plain `+`.
fn tag_at(s: &str, at: usize) -> Option<(usize, String)> {
    let rest = s.get(at..)?.strip_prefix('v')?;
    let mut pos = at + 1;
    let mut numbers = Vec::new();
    let mut rest = rest;
    for i in 0..3 {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        numbers.push(&rest[..digits]);
        rest = &rest[digits..];
        pos += digits;
        if i < 2 {
            rest = rest.strip_prefix('.')?;
            pos += 1;
        }
    }
    let sep = ["+", "%2B", "%2b", "-"].into_iter().find(|p| rest.starts_with(p))?;
    rest = rest[sep.len()..].strip_prefix("k3s")?;
    pos += sep.len() + 3;
    let n = rest.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return None;
    }
    pos += n;
    Some((pos, format!("v{}+k3s{}", numbers.join("."), &rest[..n])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_exact() {
        assert!(is_release("v1.33.5+k3s1"));
        assert!(is_release("v1.33.10+k3s12"));
        for bad in
            ["1.33.5+k3s1", "v1.33.5", "v1.33+k3s1", "v1.33.5+k3s", "v1.33.5-k3s1", "v1.33.5+k3s1 ", "v1.33.5+rke2r1"]
        {
            assert!(!is_release(bad), "{bad}");
        }
    }

    #[test]
    fn tags_are_found_however_spelled() {
        assert_eq!(named_in("https://github.com/k3s-io/k3s/releases/download/v1.33.5%2Bk3s1/k3s"), ["v1.33.5+k3s1"]);
        assert_eq!(named_in("https://m.example/k3s/v1.33.6-k3s1/k3s"), ["v1.33.6+k3s1"]);
        assert_eq!(named_in("bundle/v1.33.5+k3s1/install.sh"), ["v1.33.5+k3s1"]);
        assert_eq!(
            named_in("https://m/v1.33.5%2bk3s1/a/v1.33.5+k3s1/b/v1.34.1+k3s1"),
            ["v1.33.5+k3s1", "v1.34.1+k3s1"]
        );
        assert!(named_in("https://m.example/dev1.33.5+k3s1/k3s").is_empty());
        assert!(named_in("https://m.example/k3s/v1.33.5/k3s").is_empty());
        assert!(named_in("v").is_empty());
        assert!(named_in("").is_empty());
        // Never a panic on text that is no ASCII.
        assert!(named_in("ünïcødé/vé1.2.3+k3s1").is_empty());
    }

    #[test]
    fn the_release_files_follow_the_tag() {
        let r = "v1.33.5+k3s1";
        assert_eq!(Part::Binary.release_url(r), "https://github.com/k3s-io/k3s/releases/download/v1.33.5%2Bk3s1/k3s");
        assert_eq!(
            Part::Images.release_url(r),
            "https://github.com/k3s-io/k3s/releases/download/v1.33.5%2Bk3s1/k3s-airgap-images-amd64.tar.zst"
        );
        assert_eq!(
            Part::InstallScript.release_url(r),
            "https://raw.githubusercontent.com/k3s-io/k3s/v1.33.5%2Bk3s1/install.sh"
        );
        for p in Part::ALL {
            assert_eq!(named_in(&p.release_url(r)), [r], "a default URL names its own release");
        }
    }

    #[test]
    fn known_digests_are_digests_of_their_release() {
        for (r, p, d) in KNOWN {
            assert!(is_release(r) && super::super::airgap::is_sha256(d), "{r} {d}");
            assert_eq!(known_release(*p, d), Some(*r));
            assert!(!p.shared_across_releases());
        }
        assert_eq!(known_release(Part::InstallScript, KNOWN[0].2), None);
    }
}
