//! K3s from its air-gap bundle on one host (`desired::k3s_install` has the commands).
//!
//! Order matters for "nothing half-applied": every file is read (a URL's from the cache the
//! apply's preflight fetched it into, `providers::bundle`) and its digest checked on this machine
//! before the host is touched; then a private staging directory is made on the host
//! (`mktemp -d` under a root-only directory), the files go over the run's SSH session into it, the
//! install command checks each digest again and the binary's version before it installs
//! anything, and the staging directory is removed whatever happened.

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

/// Reads a bundle file and checks it against the topology's digest.
pub fn read_checked(r: &Resource, u: &Upload, state_dir: &Path) -> Result<Vec<u8>, ProviderError> {
    let path = local_path(u, state_dir);
    let shown = match &u.from {
        Source::Path(_) => path.display().to_string(),
        Source::Url(_) => format!("fetched from {} ({})", u.shown(), path.display()),
    };
    let bytes = std::fs::read(&path).map_err(|e| ProviderError::Unsupported {
        address: r.address.clone(),
        message: format!("cannot read the K3s bundle file {shown}: {e}"),
    })?;
    let got = super::bundle::sha256_hex(&bytes);
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
    Ok(bytes)
}

/// Installs `k`; bundle files given by URL are read from `state_dir`'s cache, where the apply's
/// preflight fetched them.
pub async fn apply(s: &Session, r: &Resource, k: &K3sInstall, state_dir: &Path) -> Result<(), ProviderError> {
    let files = k.uploads().map(|u| read_checked(r, u, state_dir).map(|b| (u, b)));
    let files: Vec<(&Upload, Vec<u8>)> = files.into_iter().collect::<Result<_, _>>()?;
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
    files: &[(&Upload, Vec<u8>)],
) -> Result<(), ProviderError> {
    for (u, bytes) in files {
        let o = s.run(&root(s, &K3sInstall::upload(stage, &u.name)), Some(bytes), UPLOAD_TIMEOUT).await?;
        if o.status != 0 {
            return Err(failed(r, &format!("copy {}", u.name), &o));
        }
    }
    let o = s.run(&root(s, &k.install(stage)), None, INSTALL_TIMEOUT).await?;
    if o.status != 0 { Err(failed(r, "install K3s", &o)) } else { Ok(()) }
}
