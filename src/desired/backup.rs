//! The backup taken before anything that can lose state (a K3s server's upgrade, Karmada's), and
//! its restore: pure builders of the host commands, run by `apply::upgrade`.
//!
//! As K3s documents it (docs.k3s.io, "Backup and Restore"): besides the datastore, "you must also
//! back up the server token file at /var/lib/rancher/k3s/server/token ... If you do not use the
//! same token value when restoring, the snapshot will be unusable". SQLite (a single server
//! without `cluster-init`): "take a copy of /var/lib/rancher/k3s/server/db/", restored by putting
//! its contents back; fabric stops K3s around the copy so the database is not written while it
//! is copied. Embedded etcd (`/var/lib/rancher/k3s/server/db/etcd` exists): `k3s etcd-snapshot
//! save`, restored with `k3s server --cluster-reset --cluster-reset-restore-path=<snapshot>`
//! (docs.k3s.io, "etcd-snapshot").
//!
//! The token is a secret: it is copied on the host into the backup directory (mode 0600, the
//! directory 0700) and never read back, printed or journaled; the journal holds only the
//! directory's path.
//!
//! Karmada's etcd runs as a pod (the chart's `etcd` StatefulSet, karmada-io/karmada
//! `charts/karmada/templates/etcd.yaml`): [`karmada_etcd_save`] is the `etcdctl snapshot save`
//! run inside it (etcd-io/etcd `etcdctl/README.md`, "SNAPSHOT SAVE").

use crate::sh;
use crate::transport::shell::{ABSENT, Sh};

/// Where K3s keeps its datastore and token.
pub const DB_DIR: &str = "/var/lib/rancher/k3s/server/db";
pub const TOKEN: &str = "/var/lib/rancher/k3s/server/token";
/// Where fabric keeps its backups on the server (root's only).
pub const BACKUP_ROOT: &str = "/var/lib/fabric/backup";

/// The backup directory of `run` on a host: one per run, so a second upgrade never overwrites
/// the backup a rollback may still need.
pub fn dir_of(run: &str) -> String {
    format!("{BACKUP_ROOT}/{run}")
}

/// Backs up the server's datastore and token into `dir`, and prints which datastore it was
/// (`sqlite` or `etcd`): the only output, so nothing secret can reach the journal or the screen.
pub fn k3s_save(dir: &str) -> Sh {
    sh!(
        "set -e; umask 077; mkdir -p {}; chmod 700 {} {}; \
         if [ -d {} ]; then mkdir {}; k3s etcd-snapshot save --name fabric --dir {} >/dev/null; kind=etcd; \
         else systemctl stop k3s; cp -a {} {} || { systemctl start k3s; exit 1; }; systemctl start k3s; kind=sqlite; fi; \
         install -m 600 {} {}; echo \"$kind\"",
        dir,
        BACKUP_ROOT,
        dir,
        format!("{DB_DIR}/etcd"),
        format!("{dir}/snapshots"),
        format!("{dir}/snapshots"),
        DB_DIR,
        format!("{dir}/db"),
        TOKEN,
        format!("{dir}/token")
    )
}

/// Puts the backup in `dir` back: the token, then the datastore (etcd reset from the snapshot
/// where the backup made `snapshots/`, SQLite's files otherwise), then K3s started again. What the cluster did since the backup is lost.
/// Exits [`ABSENT`] when no complete backup is there (the token is copied last: the upgrade
/// stopped at its backup, before anything changed).
pub fn k3s_restore(dir: &str) -> Sh {
    sh!(
        "set -e; [ -s {} ] || exit {}; systemctl stop k3s; install -m 600 {} {}; \
         if [ -d {} ]; then snap=$(ls -t {}/fabric* | head -n1); k3s server --cluster-reset --cluster-reset-restore-path=\"$snap\" >/dev/null; \
         else rm -rf {}; cp -a {} {}; fi; systemctl start k3s",
        format!("{dir}/token"),
        ABSENT.to_string(),
        format!("{dir}/token"),
        TOKEN,
        format!("{dir}/snapshots"),
        format!("{dir}/snapshots"),
        DB_DIR,
        format!("{dir}/db"),
        DB_DIR
    )
}

/// `etcdctl snapshot save` inside Karmada's etcd pod, to `path` on the pod's data volume; the
/// chart's etcd listens on loopback with client TLS from its `etcd-cert` mount.
pub fn karmada_etcd_save(path: &str) -> Vec<String> {
    [
        "etcdctl",
        "--endpoints=https://127.0.0.1:2379",
        "--cacert=/etc/kubernetes/pki/etcd/ca.crt",
        "--cert=/etc/kubernetes/pki/etcd/server.crt",
        "--key=/etc/kubernetes/pki/etcd/server.key",
        "snapshot",
        "save",
        path,
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backup_keeps_the_token_and_prints_only_the_datastore_kind() {
        let c = k3s_save(&dir_of("20261202T100000Z-1")).to_string();
        assert!(
            c.contains(
                "install -m 600 /var/lib/rancher/k3s/server/token /var/lib/fabric/backup/20261202T100000Z-1/token"
            ),
            "{c}"
        );
        assert!(c.contains("k3s etcd-snapshot save") && c.contains("systemctl stop k3s"), "{c}");
        // The only echo is the datastore's kind; the token is never `cat`.
        assert!(!c.contains("cat ") && c.matches("echo").count() == 1, "{c}");
        let stop = c.find("systemctl stop k3s").unwrap();
        let copy = c.find("cp -a /var/lib/rancher/k3s/server/db").unwrap();
        let start = c.find("systemctl start k3s").unwrap();
        assert!(stop < copy && copy < start, "SQLite is copied with K3s stopped: {c}");
    }

    #[test]
    fn the_restore_puts_the_token_back_before_the_datastore() {
        let c = k3s_restore(&dir_of("r1")).to_string();
        let token = c.find("install -m 600 /var/lib/fabric/backup/r1/token").unwrap();
        let db = c.find("cp -a /var/lib/fabric/backup/r1/db").unwrap();
        assert!(token < db && c.contains("--cluster-reset-restore-path"), "{c}");
    }

    #[test]
    fn builders_run_in_sh() {
        for c in [k3s_save("/var/lib/fabric/backup/r1"), k3s_restore("/var/lib/fabric/backup/r1")] {
            let o = std::process::Command::new("sh").args(["-n", "-c", c.as_str()]).output().unwrap();
            assert!(o.status.success(), "{c}: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
}
