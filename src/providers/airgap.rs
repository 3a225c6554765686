//! K3s from its air-gap bundle on one host (`desired::k3s_install` has the commands).
//!
//! Order matters for "nothing half-applied": every file is read (a URL's from the cache the
//! apply's preflight fetched it into, `providers::bundle`) and its digest checked on this machine
//! before the host is touched; then a private staging directory is made on the host
//! (`mktemp -d` under a root-only directory), the files go over the run's SSH session into it, the
//! install command checks each digest again and the binary's version before it installs
//! anything, and the staging directory is removed whatever happened.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{ProviderError, failed, root};
use crate::desired::Resource;
use crate::desired::k3s_install::{K3sInstall, Source, Stage, Upload};
use crate::transport::ssh::Session;

/// Copying the images tarball (hundreds of MB) over a slow link takes a while.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(1800);
/// The install script starts K3s, which imports the images.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
const STAGE_TIMEOUT: Duration = Duration::from_secs(20);

/// Where the bundle file is on this machine: its path (`~/` is the home directory), or, for a
/// URL, the cache file the apply's preflight fetched it into (`providers::bundle`).
pub fn local_path(u: &Upload, state_dir: &Path) -> PathBuf {
    match &u.from {
        Source::Path(p) => super::kube::expand_home(p),
        Source::Url(_) => super::bundle::cached(state_dir, &u.sha256),
    }
}

/// Files whose digest this process has checked, by identity: hashing an images tarball of
/// hundreds of MB once per host would read it once per host, so each file is hashed once per run
/// (a run is one process) and again only when it changed (another inode, size or modification
/// time). Should it change between the check and the copy, the install checks each digest again
/// on the host before it installs anything (`desired::k3s_install`).
static CHECKED: std::sync::Mutex<Checked> =
    std::sync::Mutex::new(Checked { files: BTreeSet::new(), hashed: BTreeMap::new() });

struct Checked {
    files: BTreeSet<(Identity, String)>,
    /// How many times each path was hashed (the tests count them).
    hashed: BTreeMap<PathBuf, usize>,
}

/// What tells one file from another, or from itself changed.
type Identity = (PathBuf, u64, u64, u64, i64, i64);

fn identity(path: &Path) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((path.to_path_buf(), m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

/// Records that `path` was found to have digest `sha256` by another reader (the preflight's
/// download, `providers::bundle`, hashes what it writes).
pub fn mark_checked(path: &Path, sha256: &str) {
    if let Some(id) = identity(path) {
        CHECKED.lock().unwrap_or_else(|p| p.into_inner()).files.insert((id, sha256.to_string()));
    }
}

/// How many times this process hashed the file at `path`.
pub fn times_hashed(path: &Path) -> usize {
    CHECKED.lock().unwrap_or_else(|p| p.into_inner()).hashed.get(path).copied().unwrap_or(0)
}

/// Checks a bundle file against the topology's digest, reading it as a stream (never whole),
/// once per run; returns its path.
pub fn check(r: &Resource, u: &Upload, state_dir: &Path) -> Result<PathBuf, ProviderError> {
    let path = local_path(u, state_dir);
    let shown = match &u.from {
        Source::Path(_) => path.display().to_string(),
        Source::Url(_) => format!("fetched from {} ({})", u.shown(), path.display()),
    };
    let unreadable = |e: String| ProviderError::Unsupported {
        address: r.address.clone(),
        message: format!("cannot read the K3s bundle file {shown}: {e}"),
    };
    let id = identity(&path).ok_or_else(|| unreadable("no such file".into()))?;
    let known = (id, u.sha256.clone());
    if CHECKED.lock().unwrap_or_else(|p| p.into_inner()).files.contains(&known) {
        return Ok(path);
    }
    let got = super::bundle::digest_of(&path).ok_or_else(|| unreadable("it could not be read".into()))?;
    {
        let mut c = CHECKED.lock().unwrap_or_else(|p| p.into_inner());
        *c.hashed.entry(path.clone()).or_default() += 1;
        if got == u.sha256 {
            c.files.insert(known);
        }
    }
    if got != u.sha256 {
        return Err(ProviderError::Unsupported {
            address: r.address.clone(),
            message: format!(
                "the K3s bundle file {shown} has SHA-256 {got}, but the topology records {}: nothing was copied or run \
                 (a different or damaged file; fetch it again, or record its digest under k3s_airgap)",
                u.sha256
            ),
        });
    }
    Ok(path)
}

/// Installs `k`; bundle files given by URL are read from `state_dir`'s cache, where the apply's
/// preflight fetched them.
pub async fn apply(s: &Session, r: &Resource, k: &K3sInstall, state_dir: &Path) -> Result<(), ProviderError> {
    let files = k.uploads().map(|u| check(r, u, state_dir).map(|p| (u, p)));
    let files: Vec<(&Upload, PathBuf)> = files.into_iter().collect::<Result<_, _>>()?;
    let o = s.run(&root(s, &K3sInstall::stage()), None, STAGE_TIMEOUT).await?;
    if o.status != 0 {
        return Err(failed(r, "make a staging directory", &o));
    }
    let stage = Stage::parse(&o.stdout_str()).ok_or_else(|| ProviderError::Unsupported {
        address: r.address.clone(),
        message: "the host answered the staging directory's path with something mktemp does not make".into(),
    })?;
    let result = install(s, r, k, &stage, &files).await;
    let _ = s.run(&root(s, &K3sInstall::cleanup(&stage)), None, STAGE_TIMEOUT).await;
    result
}

async fn install(
    s: &Session,
    r: &Resource,
    k: &K3sInstall,
    stage: &Stage,
    files: &[(&Upload, PathBuf)],
) -> Result<(), ProviderError> {
    for (u, path) in files {
        // Streamed from the file: an images tarball goes in pieces, never whole in memory.
        let file = tokio::fs::File::open(path).await.map_err(|e| ProviderError::Unsupported {
            address: r.address.clone(),
            message: format!("cannot read the K3s bundle file {}: {e}", path.display()),
        })?;
        let o = s.run_input(&root(s, &K3sInstall::upload(stage, &u.name)), Some(file), UPLOAD_TIMEOUT).await?;
        if o.status != 0 {
            return Err(failed(r, &format!("copy {}", u.name), &o));
        }
    }
    let o = s.run(&root(s, &k.install(stage)), None, INSTALL_TIMEOUT).await?;
    if o.status != 0 { Err(failed(r, "install K3s", &o)) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::bundle::tests::{sha, state_dir};

    fn upload(path: &Path, sha256: &str) -> Upload {
        Upload { name: "k3s".into(), from: Source::Path(path.display().to_string()), sha256: sha256.into() }
    }

    /// Hashed once however many hosts install it; hashed again once it changed, and refused.
    #[test]
    fn each_file_is_hashed_once_per_run_and_again_when_it_changes() {
        let dir = state_dir("airgap-once");
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("k3s");
        std::fs::write(&f, b"binary").unwrap();
        let r = Resource {
            address: "host.a/command:k3s-install".into(),
            site: Some("s".into()),
            provider: crate::desired::ProviderKind::Command,
            summary: "k3s".into(),
            sensitive: false,
            desired: crate::desired::Desired::File(String::new()),
            file: None,
        };
        let u = upload(&f, &sha(b"binary"));
        for _ in 0..3 {
            assert_eq!(check(&r, &u, &dir).unwrap(), f);
        }
        assert_eq!(times_hashed(&f), 1);
        std::fs::write(&f, b"another binary").unwrap();
        let e = check(&r, &u, &dir).unwrap_err().to_string();
        assert!(e.contains("has SHA-256") && e.contains("nothing was copied or run"), "{e}");
        assert_eq!(times_hashed(&f), 2);
        let e = check(&r, &upload(&dir.join("absent"), &u.sha256), &dir).unwrap_err().to_string();
        assert!(e.contains("cannot read the K3s bundle file") && e.contains("no such file"), "{e}");
    }
}
