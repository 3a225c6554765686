//! A cluster that this run brings up (A.1 installs K3s on its server; see
//! `live::observe::mark_bootstrap`): once the step's host resources are applied, the kubeconfig
//! K3s wrote on the server is fetched over the run's SSH session, pointed at the API as this
//! machine reaches it, written to the topology's kubeconfig path (mode 0600, only when no file is
//! there: an operator's file is never replaced), and the API is waited for. Then the step's
//! objects for that cluster are applied. The kubeconfig holds the cluster's admin credentials:
//! it is never shown, logged or journaled.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::Shared;
use crate::addr::Target;
use crate::topology::model::Site;

/// Where K3s writes the admin kubeconfig on a server.
pub const K3S_KUBECONFIG: &str = "/etc/rancher/k3s/k3s.yaml";

/// The kubeconfig for this machine: every cluster's `server` set to `server` (K3s writes
/// `https://127.0.0.1:6443`, right only on the server itself), and the current context renamed
/// to `context` when the topology names one. Pure.
pub fn for_operator(mut kc: Value, server: &str, context: Option<&str>) -> Value {
    if let Some(clusters) = kc["clusters"].as_array_mut() {
        for c in clusters {
            c["cluster"]["server"] = Value::String(server.into());
        }
    }
    if let Some(want) = context {
        let current = kc["current-context"].as_str().unwrap_or("default").to_string();
        if let Some(contexts) = kc["contexts"].as_array_mut() {
            for c in contexts.iter_mut().filter(|c| c["name"] == current.as_str()) {
                c["name"] = Value::String(want.into());
            }
        }
        kc["current-context"] = Value::String(want.into());
    }
    kc
}

/// The API's URL from this machine: the topology's `kubeconfig.server`, else the cluster's
/// address and port.
pub fn server_url(s: &Site) -> String {
    s.cluster
        .kubeconfig
        .server
        .clone()
        .unwrap_or_else(|| format!("https://{}:{}", s.cluster.api_address, s.cluster.api_port.0))
}

/// Why a cluster did not come up.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("{0} is not a site's cluster")]
    NotACluster(Target),
    #[error("{host}: {what}")]
    Fetch { host: Target, what: String },
    #[error("{host}: {K3S_KUBECONFIG} is not a kubeconfig")]
    NotAKubeconfig { host: Target },
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("{cluster} did not come up within --wait-timeout: {last}")]
    NotUp { cluster: Target, last: String },
}

/// Fetches the kubeconfig (when the operator has none at the path) and waits until the API
/// answers; the error says what did not come up.
pub(super) async fn bring_up(
    sh: &Shared<'_>,
    step: &str,
    cluster: &Target,
    host: &Target,
) -> Result<(), BootstrapError> {
    let site = sh.t.sites.iter().find(|s| Target::cluster(&s.name) == *cluster);
    let (Some(site), Some(access)) = (site, sh.targets.kube.get(cluster)) else {
        return Err(BootstrapError::NotACluster(cluster.clone()));
    };
    let deadline = Instant::now() + sh.opts.wait_timeout;
    if !access.path.exists() {
        (sh.progress)(&format!("{step}: {cluster}: fetching its kubeconfig from {host}"));
        let text = fetch(sh, host, deadline).await?;
        let kc = crate::desired::k3s_install::parse_kubeconfig(&text)
            .ok_or_else(|| BootstrapError::NotAKubeconfig { host: host.clone() })?;
        let kc = for_operator(kc, &server_url(site), site.cluster.kubeconfig.context.as_deref());
        write_private(&access.path, &crate::desired::yaml::to_string(&kc))
            .map_err(|source| BootstrapError::Write { path: access.path.display().to_string(), source })?;
        (sh.progress)(&format!("{step}: {cluster}: kubeconfig written to {} (mode 0600)", access.path.display()));
    }
    loop {
        let up = match crate::providers::kube::client(cluster, access).await {
            Ok(c) => c.apiserver_version().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match up {
            Ok(_) => {
                (sh.progress)(&format!("{step}: {cluster}: API up"));
                return Ok(());
            }
            Err(last) if Instant::now() >= deadline => {
                return Err(BootstrapError::NotUp { cluster: cluster.clone(), last });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// The server's kubeconfig, once K3s has written it.
async fn fetch(sh: &Shared<'_>, host: &Target, deadline: Instant) -> Result<String, BootstrapError> {
    let fail = |what: String| BootstrapError::Fetch { host: host.clone(), what };
    let s = sh.pool.get(sh.targets, host).await.map_err(|e| fail(e.to_string()))?;
    let address = host.at(format!("file:{K3S_KUBECONFIG}"));
    loop {
        match crate::providers::read_secret_file(&s, &address).await {
            Ok(t) => return Ok(t),
            Err(e) if Instant::now() >= deadline => {
                return Err(fail(format!("K3s wrote no kubeconfig within --wait-timeout: {e}")));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Writes a file only its owner can read, refusing to replace one (create_new).
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubeconfig_points_at_the_api_and_takes_the_topology_context() {
        let k3s = serde_json::json!({
            "apiVersion": "v1",
            "clusters": [{ "name": "default", "cluster": { "server": "https://127.0.0.1:6443", "certificate-authority-data": "Q0E=" } }],
            "contexts": [{ "name": "default", "context": { "cluster": "default", "user": "default" } }],
            "current-context": "default",
            "users": [{ "name": "default", "user": { "client-key-data": "S0VZ" } }],
        });
        let kc = for_operator(k3s.clone(), "https://192.168.2.10:6443", Some("sp"));
        assert_eq!(kc["clusters"][0]["cluster"]["server"], "https://192.168.2.10:6443");
        assert_eq!(kc["clusters"][0]["cluster"]["certificate-authority-data"], "Q0E=");
        assert_eq!(kc["contexts"][0]["name"], "sp");
        assert_eq!(kc["current-context"], "sp");
        assert_eq!(kc["users"], k3s["users"]);
        let kc = for_operator(k3s, "https://x:1", None);
        assert_eq!(kc["current-context"], "default");
    }

    #[test]
    fn an_existing_file_is_never_replaced() {
        let dir = std::env::temp_dir().join(format!("fabric-bootstrap-{}", std::process::id()));
        let p = dir.join("kube/sp.yaml");
        let _ = std::fs::remove_dir_all(&dir);
        write_private(&p, "one").unwrap();
        assert!(write_private(&p, "two").is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "one");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
