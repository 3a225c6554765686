//! The files on the operator's machine a read needs: each target's kubeconfig and the SSH keys
//! the topology names. One that is missing is the operator's to fix here, not a site that is
//! down: it is found before any connection and named with its path, never reported as an
//! unreachable target (with advice about the link).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::addr::Target;
use crate::desired::k3s_install::Role;
use crate::desired::{Desired, Resource};
use crate::live::observe::{Live, Targets};

/// The clusters `resources` may bring up, each with the host whose K3s server install names
/// it. Their kubeconfig may not exist yet: apply fetches it from that host once K3s runs
/// (`apply::bootstrap`), and `observe::mark_bootstrap` decides once the host is read.
pub fn bootstrapping(resources: &[Resource]) -> BTreeMap<Target, Target> {
    resources
        .iter()
        .filter_map(|r| match &r.desired {
            Desired::K3sInstall(k) if k.role == Role::Server => Some((k.brings_up.clone()?, r.target().clone())),
            _ => None,
        })
        .collect()
}

/// After the read: a cluster of `wanted` still unreachable whose kubeconfig is missing, where the read
/// could tell (its K3s server, if this plan installs one, was read and runs K3s: it is not
/// brought up here), is this machine's missing file too.
pub fn missing_after_read(
    targets: &Targets,
    wanted: &BTreeSet<Target>,
    live: &Live,
    bootstrapping: &BTreeMap<Target, Target>,
) -> Vec<String> {
    let undecided: BTreeSet<Target> = bootstrapping
        .iter()
        .filter(|(_, host)| live.unreachable.contains_key(*host))
        .map(|(cluster, _)| cluster.clone())
        .collect();
    missing(targets, live.unreachable.keys().filter(|t| wanted.contains(*t)), &undecided)
}

/// The local files a read of `wanted` needs that cannot be used, one message each, naming the
/// file, the target and why: `kubeconfig /home/o/.kube/sp.yaml for cluster.sp does not exist`.
pub fn missing<'a>(
    targets: &Targets,
    wanted: impl IntoIterator<Item = &'a Target>,
    bootstrapping: &BTreeSet<Target>,
) -> Vec<String> {
    let mut out = Vec::new();
    for t in wanted.into_iter().collect::<BTreeSet<_>>() {
        if let Some(access) = targets.kube.get(t).filter(|_| !bootstrapping.contains(t)) {
            out.extend(problem("kubeconfig", &access.path, t));
        }
        if let Some(key) = targets.named_keys.get(t) {
            out.extend(problem("SSH key (identity_file)", key, t));
        }
    }
    out
}

/// Why `path` cannot be read as a file, if it cannot.
fn problem(what: &str, path: &Path, target: &Target) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => None,
        Ok(_) => Some(format!("{what} {} for {target} is not a file", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some(format!("{what} {} for {target} does not exist: {e}", path.display()))
        }
        Err(e) => Some(format!("{what} {} for {target} cannot be read: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::kube::KubeAccess;

    fn targets(dir: &Path) -> Targets {
        let mut t = Targets::default();
        t.kube.insert(Target::cluster("sp"), KubeAccess::new(&dir.join("sp.yaml").display().to_string(), None));
        t.kube.insert(Target::cluster("franca"), KubeAccess::new(&dir.join("franca.yaml").display().to_string(), None));
        t.named_keys.insert(Target::router("sp"), dir.join("id_sp"));
        t
    }

    #[test]
    fn a_missing_kubeconfig_or_key_is_named_with_its_path() {
        let dir = std::env::temp_dir().join(format!("fabric-local-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("franca.yaml"), "").unwrap();
        let t = targets(&dir);
        let wanted = [Target::cluster("sp"), Target::cluster("franca"), Target::router("sp"), Target::router("franca")];
        let found = missing(&t, &wanted, &BTreeSet::new());
        assert_eq!(found.len(), 2, "{found:?}");
        let sp = dir.join("sp.yaml").display().to_string();
        assert!(found[0].starts_with(&format!("kubeconfig {sp} for cluster.sp does not exist: ")), "{found:?}");
        assert!(found[1].starts_with("SSH key (identity_file) "), "{found:?}");
        assert!(found[1].contains("id_sp for router.sp does not exist"), "{found:?}");
        // A cluster this read may bring up has no kubeconfig yet; a target not read needs none.
        let up = BTreeSet::from([Target::cluster("sp")]);
        assert_eq!(missing(&t, &wanted[..2], &up), Vec::<String>::new());
        // After the read: still unreachable, its server read (it runs K3s), the file is missing;
        // its server not read, nothing tells.
        let servers = BTreeMap::from([(Target::cluster("sp"), Target::host("sp-cp1"))]);
        let mut live = Live::default();
        live.unreachable.insert(Target::cluster("sp"), "cannot read kubeconfig".into());
        let sp = BTreeSet::from([Target::cluster("sp")]);
        assert_eq!(missing_after_read(&t, &sp, &live, &servers).len(), 1);
        assert_eq!(missing_after_read(&t, &BTreeSet::new(), &live, &servers), Vec::<String>::new(), "not wanted");
        live.unreachable.insert(Target::host("sp-cp1"), "timeout".into());
        assert_eq!(missing_after_read(&t, &sp, &live, &servers), Vec::<String>::new());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
