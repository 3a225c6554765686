//! Rules of `k3s_airgap.digests`: each K3s release's three SHA-256 digests, keyed by the
//! release, so that a version bump is reviewed as a pair (`versions.k3s` and its entry) and a
//! digest recorded for another release is refused where it is written.

use super::k3s_release::{Part, is_release, known_release};
use super::model::K3sAirgap;
use super::problem::Problem;
use crate::path;

/// What a bundle file's `sha256` says while its digest is not recorded yet: `validate` warns,
/// `plan` shows the install, `apply` refuses it (never a made-up digest).
pub const PENDING: &str = "TODO";

/// A SHA-256 as `sha256sum` prints it: 64 lowercase hex digits.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

const CODE: &str = "topology::k3s-airgap";

pub fn check(a: &K3sAirgap, release: &str, out: &mut Vec<Problem>) {
    for (tag, d) in &a.digests {
        if !is_release(tag) {
            out.push(
                Problem::error(CODE, path!["k3s_airgap", "digests", tag], format!("`{tag}` is not a K3s release tag"))
                    .label("not a release")
                    .help(format!(
                        "key each entry by the release's tag as versions.k3s writes it, e.g. `\"{release}\":`"
                    )),
            );
        }
        for part in Part::ALL {
            let value = part.digest(d);
            let at = path!["k3s_airgap", "digests", tag, part.key()];
            if value == PENDING {
                // Another release's missing digest stops nothing: only versions.k3s's is installed.
                if tag == release {
                    out.push(
                        Problem::warning(
                            CODE,
                            at,
                            format!(
                                "the {} digest of K3s {release} is not recorded yet: `apply` refuses to install K3s until it is",
                                part.key()
                            ),
                        )
                        .label("digest to record")
                        .help(part.how_to_record(release)),
                    );
                }
            } else if let Some((why, fix)) = not_a_digest(value) {
                let shown: String = value.chars().take(80).collect();
                out.push(
                    Problem::error(CODE, at, format!("`{shown}` is not a SHA-256: {why}"))
                        .label("not a digest")
                        .help(format!("{fix} ({})", part.how_to_record(tag))),
                );
            } else if let Some(known) = known_release(part, value).filter(|k| k != tag) {
                out.push(
                    Problem::error(
                        CODE,
                        at,
                        format!("this is the digest of K3s {known}'s {}, recorded here for {tag}", part.asset()),
                    )
                    .label(format!("{known}'s, not {tag}'s"))
                    .help(format!(
                        "{} (a bump records the new release's digests under its own tag)",
                        part.how_to_record(tag)
                    )),
                );
            }
        }
    }
    repeated(a, out);
    entry_of_the_release(a, release, out);
}

/// Why `value` is no SHA-256 as `sha256sum` prints it, and what to write instead.
fn not_a_digest(value: &str) -> Option<(String, &'static str)> {
    if is_sha256(value) {
        return None;
    }
    let hex = |s: &str| s.chars().all(|c| c.is_ascii_hexdigit());
    if value.strip_prefix("sha256:").is_some_and(is_sha256) {
        return Some(("it has a `sha256:` prefix".into(), "write the 64 hex digits alone"));
    }
    let n = value.chars().count();
    if n != 64 {
        return Some((format!("{n} characters, where a SHA-256 has 64 hex digits"), "copy the whole digest"));
    }
    if hex(value) {
        return Some(("it has uppercase digits".into(), "write it in lowercase, as sha256sum prints it"));
    }
    let c = value.chars().find(|c| !c.is_ascii_hexdigit()).unwrap_or(' ');
    Some((format!("`{c}` is no hex digit"), "copy the digest itself (0-9, a-f)"))
}

/// A digest written twice: two releases never share a binary or an images tarball, and a
/// release's three files differ from each other. Only install.sh is often the same from one
/// release to the next. Each repeat is refused at its second place.
fn repeated(a: &K3sAirgap, out: &mut Vec<Problem>) {
    let mut seen: Vec<(&str, Part, &str)> = Vec::new();
    for (tag, d) in &a.digests {
        for part in Part::ALL {
            let value = part.digest(d);
            if !is_sha256(value) {
                continue;
            }
            let first =
                seen.iter().find(|(t, p, v)| *v == value && !(*p == part && part.shared_across_releases() && t != tag));
            if let Some((t, p, _)) = first {
                out.push(
                    Problem::error(
                        CODE,
                        path!["k3s_airgap", "digests", tag, part.key()],
                        format!("{tag}'s {} has the digest already recorded for {t}'s {}", part.key(), p.key()),
                    )
                    .label("a repeated digest")
                    .related(path!["k3s_airgap", "digests", *t, p.key()], "first here")
                    .help(part.how_to_record(tag)),
                );
            }
            seen.push((tag, part, value));
        }
    }
}

/// `versions.k3s` needs its own entry: none while nothing is recorded is a warning (plan shows
/// the installs, apply refuses them); none beside another release's is a bump without its
/// digests, an error.
fn entry_of_the_release(a: &K3sAirgap, release: &str, out: &mut Vec<Problem>) {
    if a.digests.contains_key(release) {
        return;
    }
    let how = format!(
        "add under k3s_airgap.digests: `\"{release}\": {{ binary: …, images: …, install_script: … }}`: the k3s and \
         k3s-airgap-images-amd64.tar.zst lines of its sha256sum-amd64.txt, and `sha256sum install.sh` at its tag"
    );
    let at = path!["k3s_airgap", "digests"];
    let p = if a.digests.is_empty() {
        Problem::warning(
            CODE,
            at,
            format!("no digests are recorded for K3s {release}: `apply` refuses to install K3s until they are"),
        )
    } else {
        let others: Vec<&str> = a.digests.keys().map(String::as_str).collect();
        Problem::error(
            CODE,
            at,
            format!(
                "no digests are recorded for K3s {release} (versions.k3s), only for {}: its files would have nothing to be checked against",
                others.join(", ")
            ),
        )
        .related(path!["versions", "k3s"], "the release installed")
    };
    out.push(p.label(format!("no `{release}` entry")).help(how));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::model::{BundleFile, ReleaseDigests};

    fn bundle(entries: &[(&str, [&str; 3])]) -> K3sAirgap {
        K3sAirgap {
            binary: BundleFile::default(),
            images: BundleFile::default(),
            install_script: BundleFile::default(),
            digests: entries
                .iter()
                .map(|(t, [b, i, s])| {
                    (
                        t.to_string(),
                        ReleaseDigests { binary: b.to_string(), images: i.to_string(), install_script: s.to_string() },
                    )
                })
                .collect(),
            registry_mirrors: vec![],
        }
    }

    fn run(a: &K3sAirgap, release: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        check(a, release, &mut out);
        out.into_iter().map(|p| (p.path.to_string(), p.message)).collect()
    }

    #[test]
    fn a_digest_is_what_sha256sum_prints() {
        let d = "ab".repeat(32);
        assert_eq!(not_a_digest(&d), None);
        assert_eq!(not_a_digest(&format!("sha256:{d}")).unwrap().1, "write the 64 hex digits alone");
        assert_eq!(not_a_digest("ABC").unwrap().0, "3 characters, where a SHA-256 has 64 hex digits");
        assert_eq!(not_a_digest(&d.to_uppercase()).unwrap().0, "it has uppercase digits");
        assert_eq!(not_a_digest(&format!("{}g", &d[1..])).unwrap().0, "`g` is no hex digit");
        assert_eq!(not_a_digest(&"é".repeat(64)).unwrap().0, "`é` is no hex digit");
    }

    #[test]
    fn only_install_sh_repeats_across_releases() {
        let (a, b, c, s) = ("a".repeat(64), "b".repeat(64), "c".repeat(64), "5".repeat(64));
        let ok = bundle(&[("v1.33.5+k3s1", [&a, &b, &s]), ("v1.33.6+k3s1", [&c, &"d".repeat(64), &s])]);
        assert_eq!(run(&ok, "v1.33.6+k3s1"), []);
        let renamed = bundle(&[("v1.33.5+k3s1", [&a, &b, &s]), ("v1.33.6+k3s1", [&a, &c, &s])]);
        assert_eq!(
            run(&renamed, "v1.33.6+k3s1"),
            [(
                "k3s_airgap.digests.v1.33.6+k3s1.binary".to_string(),
                "v1.33.6+k3s1's binary has the digest already recorded for v1.33.5+k3s1's binary".to_string()
            )]
        );
        let pasted = bundle(&[("v1.33.6+k3s1", [&a, &a, &a])]);
        assert_eq!(run(&pasted, "v1.33.6+k3s1").len(), 2, "images and install_script repeat the binary's");
    }

    #[test]
    fn a_known_digest_under_another_release_is_refused() {
        let k3s = "ba2bc6892347d5ddf7d9a1f50b4d6fe73c6c325eb16894aa95993ac143096725";
        let a = bundle(&[("v1.33.6+k3s1", [k3s, &"b".repeat(64), &"c".repeat(64)])]);
        let got = run(&a, "v1.33.6+k3s1");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].1, "this is the digest of K3s v1.33.5+k3s1's k3s, recorded here for v1.33.6+k3s1");
        let a = bundle(&[("v1.33.5+k3s1", [k3s, &"b".repeat(64), &"c".repeat(64)])]);
        assert_eq!(run(&a, "v1.33.5+k3s1"), []);
    }

    #[test]
    fn the_installed_release_needs_its_entry() {
        let none = bundle(&[]);
        let got = run(&none, "v1.33.5+k3s1");
        assert_eq!(got.len(), 1);
        assert!(got[0].1.starts_with("no digests are recorded for K3s v1.33.5+k3s1: `apply` refuses"), "{got:?}");
        let todo = bundle(&[("v1.33.5+k3s1", ["TODO", "TODO", "TODO"]), ("v1.33.4+k3s1", ["TODO", "TODO", "TODO"])]);
        assert_eq!(run(&todo, "v1.33.5+k3s1").len(), 3, "one warning per digest of versions.k3s only");
        let bumped = bundle(&[("v1.33.5+k3s1", [&"a".repeat(64), &"b".repeat(64), &"c".repeat(64)])]);
        let got = run(&bumped, "v1.33.6+k3s1");
        assert_eq!(got.len(), 1);
        assert!(
            got[0].1.contains("no digests are recorded for K3s v1.33.6+k3s1 (versions.k3s), only for v1.33.5+k3s1")
        );
        let badkey = bundle(&[("1.33.5", [&"a".repeat(64), &"b".repeat(64), &"c".repeat(64)])]);
        assert!(run(&badkey, "1.33.5").iter().any(|(_, m)| m == "`1.33.5` is not a K3s release tag"));
    }
}
