//! K3s bundle files given by URL (`k3s_airgap.*.url`): fetched on the operator's machine, never
//! on a host, into a private cache under the state directory (`<state dir>/bundle/<sha256>`),
//! then used from there exactly as a file given by path. Only apply fetches, in its preflight,
//! before anything runs on a host; plan contacts nothing but the live state it reads.
//!
//! The cache is keyed by the digest the topology pins, and a file lands there only once its
//! SHA-256 matched (it is written beside, then renamed): a re-run, or another URL of the same
//! file, finds it and downloads nothing. A cached file that no longer matches is fetched again.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::topology::airgap::is_sha256;
use crate::topology::userinfo::redact;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// A server silent for this long has stalled. There is no limit on the whole download: an
/// images tarball of hundreds of MB over a slow link takes as long as it takes.
const STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// More than any K3s release file (the images tarballs are under 1 GiB): a server that sends
/// more is not sending the release's file, and would only fill the disk before the digest says so.
const MAX_BYTES: u64 = 4 << 30;

/// Why a bundle file could not be had from its URL. Every URL shown is without its credentials.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot download the K3s bundle file {url}: {reason}")]
    Download { url: String, reason: String },
    #[error(
        "the K3s bundle file downloaded from {url} has SHA-256 {got}, but the topology says {want}: \
         nothing was copied or run (the server sent another file, or it was damaged on the way; \
         check the URL, or record the file's digest under k3s_airgap)"
    )]
    Digest { url: String, got: String, want: String },
    #[error("cannot write the K3s bundle cache {path}: {source}")]
    Cache { path: String, source: std::io::Error },
}

/// Where fetched bundle files are kept (private to the operator: 0700).
pub fn cache_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("bundle")
}

/// The cached file of the bundle file whose SHA-256 is `sha256`.
pub fn cached(state_dir: &Path, sha256: &str) -> PathBuf {
    cache_dir(state_dir).join(sha256)
}

/// How a fetch got its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    Downloaded,
    /// Already in the cache with the right digest: nothing was asked of the server.
    Cached,
}

/// Fetches into one state directory's cache.
pub struct Fetcher {
    agent: ureq::Agent,
    state_dir: PathBuf,
}

impl Fetcher {
    /// Through the proxies the standard variables name (`HTTPS_PROXY`, `HTTP_PROXY`,
    /// `ALL_PROXY`, `NO_PROXY`), and no other.
    pub fn new(state_dir: &Path) -> Fetcher {
        Fetcher { agent: agent(ureq::Proxy::try_from_env()), state_dir: state_dir.to_path_buf() }
    }

    /// Without any proxy: tests talk to loopback only, whatever the environment says.
    #[cfg(test)]
    pub fn direct(state_dir: &Path) -> Fetcher {
        Fetcher { agent: agent(None), state_dir: state_dir.to_path_buf() }
    }

    /// The state directory whose cache this fills.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The cached file of `url`, downloaded unless the cache has it, its digest checked.
    pub fn fetch(&self, url: &str, sha256: &str) -> Result<(PathBuf, Fetched), FetchError> {
        // The digest names the cache file: only a validated one may (no `/`, no `..`).
        if !is_sha256(sha256) {
            return Err(FetchError::Download { url: redact(url), reason: format!("`{sha256}` is not a SHA-256") });
        }
        let path = cached(&self.state_dir, sha256);
        if digest_of(&path).is_some_and(|d| d == sha256) {
            return Ok((path, Fetched::Cached));
        }
        let dir = cache_dir(&self.state_dir);
        private_dir(&dir).map_err(|source| FetchError::Cache { path: dir.display().to_string(), source })?;
        let part = dir.join(format!("{sha256}.part-{}", std::process::id()));
        let result = self.download(url, &part).and_then(|got| {
            if got != sha256 {
                return Err(FetchError::Digest { url: redact(url), got, want: sha256.to_string() });
            }
            std::fs::rename(&part, &path)
                .map_err(|source| FetchError::Cache { path: path.display().to_string(), source })
        });
        if result.is_err() {
            // A wrong or partial file is never left where a later run could take it.
            let _ = std::fs::remove_file(&part);
        }
        result.map(|()| (path, Fetched::Downloaded))
    }

    /// Streams `url` into `part` (0600), returning the SHA-256 of what came.
    fn download(&self, url: &str, part: &Path) -> Result<String, FetchError> {
        let shown = redact(url);
        // The client's errors are shown with the URL as the topology has it, credentials removed.
        let fail = |reason: String| FetchError::Download { url: shown.clone(), reason: reason.replace(url, &shown) };
        let response = self.agent.get(url).call().map_err(|e| fail(e.to_string()))?;
        if !response.status().is_success() {
            return Err(fail(format!("the server answered {}", response.status())));
        }
        let cache = |source| FetchError::Cache { path: part.display().to_string(), source };
        let mut file = private_file(part).map_err(cache)?;
        let mut body = response.into_body().into_with_config().limit(MAX_BYTES).reader();
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = body.read(&mut buf).map_err(|e| fail(e.to_string()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            file.write_all(&buf[..n]).map_err(cache)?;
        }
        file.sync_all().map_err(cache)?;
        Ok(hex(&hasher.finalize()))
    }
}

pub(super) fn agent(proxy: Option<ureq::Proxy>) -> ureq::Agent {
    use ureq::tls::{RootCerts, TlsConfig, TlsProvider};
    // The system's trust store (as kube's client uses), so a mirror with the site's own CA works;
    // ring, the crypto the rest of fabric is built with.
    let tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .root_certs(RootCerts::PlatformVerifier)
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .build();
    ureq::Agent::config_builder()
        .tls_config(tls)
        .proxy(proxy)
        .http_status_as_error(false)
        .max_redirects(10)
        .timeout_resolve(Some(CONNECT_TIMEOUT))
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_recv_response(Some(STALL_TIMEOUT))
        .timeout_per_read(Some(STALL_TIMEOUT))
        .user_agent(concat!("fabric/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

/// The SHA-256 of the file at `path`, read in pieces (an images tarball is large); None when
/// there is no such file.
pub fn digest_of(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            return Some(hex(&hasher.finalize()));
        }
        hasher.update(&buf[..n]);
    }
}

/// A digest as `sha256sum` prints it.
fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The SHA-256 of `bytes`, as `sha256sum` prints it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use fabric_testkit::file_server::FileServer as Server;
    use std::net::TcpListener;

    pub fn sha(bytes: &[u8]) -> String {
        sha256_hex(bytes)
    }

    /// A state directory of its own for one test.
    pub fn state_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fabric-bundle-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_url_is_fetched_once_into_the_cache() {
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let server = Server::start(&[("/file", &bytes)]);
        let state = state_dir("once");
        let f = Fetcher::direct(&state);
        let (path, how) = f.fetch(&format!("{}/moved/file", server.base), &sha(&bytes)).unwrap();
        assert_eq!(how, Fetched::Downloaded);
        assert_eq!(path, state.join("bundle").join(sha(&bytes)));
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "the bytes the server sent, redirect followed");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(state.join("bundle")).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(server.requests(), ["/moved/file", "/file"]);
        // A second run finds it: the server is asked nothing.
        let (again, how) = Fetcher::direct(&state).fetch(&format!("{}/file", server.base), &sha(&bytes)).unwrap();
        assert_eq!((again, how), (path.clone(), Fetched::Cached));
        assert_eq!(server.requests(), ["/moved/file", "/file"]);
        // A damaged cache file is fetched again.
        std::fs::write(&path, b"damaged").unwrap();
        assert_eq!(f.fetch(&format!("{}/file", server.base), &sha(&bytes)).unwrap().1, Fetched::Downloaded);
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        let _ = std::fs::remove_dir_all(&state);
    }

    #[test]
    fn another_file_or_no_file_is_refused_and_nothing_is_kept() {
        let server = Server::start(&[("/file", b"not the release's file")]);
        let state = state_dir("refused");
        let f = Fetcher::direct(&state);
        let want = "ab".repeat(32);
        let e = f.fetch(&format!("{}/file", server.base), &want).unwrap_err().to_string();
        let got = sha(b"not the release's file");
        assert!(
            e.contains(&format!("{}/file has SHA-256 {got}, but the topology says {want}", server.base))
                && e.contains("nothing was copied or run"),
            "{e}"
        );
        let e = f.fetch(&format!("{}/missing", server.base), &want).unwrap_err().to_string();
        assert!(e.contains("the server answered 404 Not Found") && e.contains("/missing"), "{e}");
        let left: Vec<_> = std::fs::read_dir(state.join("bundle")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        let _ = std::fs::remove_dir_all(&state);
    }

    /// https through the system's trust store: a loopback server with a certificate no CA signed
    /// is refused (and building the TLS client with fabric's ring provider does not panic).
    #[test]
    fn an_untrusted_certificate_is_refused() {
        let key = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let cert = rustls::pki_types::CertificateDer::from(key.cert.der().to_vec());
        let pkcs8 = rustls::pki_types::PrivateKeyDer::Pkcs8(key.signing_key.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], pkcs8)
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            // One connection: the handshake the client gives up on.
            if let Some(Ok(mut tcp)) = listener.incoming().next() {
                let mut tls = rustls::ServerConnection::new(config).unwrap();
                let _ = tls.complete_io(&mut tcp);
            }
        });
        let state = state_dir("tls");
        let e = Fetcher::direct(&state).fetch(&format!("https://{at}/k3s"), &"ab".repeat(32)).unwrap_err();
        let e = e.to_string();
        assert!(e.contains(&format!("cannot download the K3s bundle file https://{at}/k3s")), "{e}");
        assert!(e.to_lowercase().contains("certificate") || e.contains("UnknownIssuer"), "{e}");
        assert!(!state.join("bundle").join("ab".repeat(32)).exists());
        let _ = std::fs::remove_dir_all(&state);
    }

    #[test]
    fn credentials_in_a_url_are_never_shown() {
        let server = Server::start(&[]);
        let state = state_dir("secret");
        let url = server.base.replace("http://", "http://fabric:s3cret@") + "/missing";
        let e = Fetcher::direct(&state).fetch(&url, &"ab".repeat(32)).unwrap_err().to_string();
        assert!(!e.contains("s3cret") && !e.contains("fabric:") && e.contains(&server.base), "{e}");
        // Nothing listens on port 9 of loopback: a failed connection, shown without credentials.
        let e = Fetcher::direct(&state).fetch("http://u:s3cret@127.0.0.1:9/k3s", &"ab".repeat(32)).unwrap_err();
        let e = e.to_string();
        assert!(
            !e.contains("s3cret") && e.contains("cannot download the K3s bundle file http://127.0.0.1:9/k3s"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&state);
    }
}
