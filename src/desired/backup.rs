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
//! `charts/karmada/templates/etcd.yaml`): [`karmada_snapshot`] is the `etcdctl snapshot save`
//! run inside it (etcd-io/etcd `etcdctl/README.md`, "SNAPSHOT SAVE"), through `k3s kubectl exec`
//! on a server of the cluster that hosts Karmada. The snapshot is taken
//! off the pod through its data volume, not `kubectl cp`: `kubectl cp` runs `tar` in the
//! container (kubernetes/kubernetes `staging/src/k8s.io/kubectl/pkg/cmd/cp/cp.go`,
//! `copyFromPod`), and the chart's image (`registry.k8s.io/etcd`, built by
//! kubernetes/kubernetes `cluster/images/etcd/Dockerfile`: distroless with etcd, etcdctl, a static
//! `sh` and a Go `cp`) has no `tar`. The chart's data volume is a hostPath on the pod's node
//! (`etcd.internal.storageType: hostPath` by default, which fabric's values keep;
//! `/var/lib/<namespace>/karmada-etcd` mounted at `/var/lib/etcd`), so the snapshot saved there
//! is a file on that node, which [`karmada_keep`] moves into the run's backup directory.
//! Restoring it is by hand (docs/runbook.md, "Restoring Karmada's etcd"): fabric does not stop
//! the chart's etcd and rewrite its data directory by itself.

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

/// Karmada's etcd as the chart makes it (karmada-io/karmada `charts/karmada/templates/etcd.yaml`):
/// the StatefulSet `etcd` (one replica by default, `etcd.internal.replicaCount`: its pod is
/// `etcd-0`), the container `etcd`, the data directory `--data-dir=/var/lib/etcd` (the volume
/// `etcd-data`, a hostPath at `/var/lib/{{ namespace }}/karmada-etcd`), and client TLS from the
/// `etcd-cert` mount: `--trusted-ca-file=/etc/kubernetes/pki/etcd/server-ca.crt`,
/// `--cert-file=.../karmada.crt`, `--key-file=.../karmada.key` (the pair Karmada's API server
/// also uses as etcd's client, `karmada-apiserver.yaml`'s `--etcd-certfile`).
pub const KARMADA_ETCD_POD: &str = "etcd-0";
pub const KARMADA_ETCD_CONTAINER: &str = "etcd";
const KARMADA_ETCD_DATA: &str = "/var/lib/etcd";
pub const KARMADA_ETCD_HOST_PATH: &str = "/var/lib/karmada-system/karmada-etcd";
/// The snapshot's name in the run's backup directory.
pub const KARMADA_SNAPSHOT: &str = "karmada-etcd.db";

/// etcd's client endpoint and TLS inside the pod: the chart's etcd listens on every address
/// (`--listen-client-urls https://0.0.0.0:2379`) with a certificate whose hosts include
/// `127.0.0.1` (the chart's default `certs.auto.hosts`), and asks clients for a certificate of
/// its CA (`--client-cert-auth=true`).
const KARMADA_ETCD_ENDPOINT: &str = "--endpoints=https://127.0.0.1:2379";
const KARMADA_ETCD_CA: &str = "/etc/kubernetes/pki/etcd/server-ca.crt";
const KARMADA_ETCD_CERT: &str = "/etc/kubernetes/pki/etcd/karmada.crt";
const KARMADA_ETCD_KEY: &str = "/etc/kubernetes/pki/etcd/karmada.key";

/// The snapshot's file name on etcd's data volume while it is taken: the run's, so a snapshot
/// of another run is never the one moved.
fn karmada_snapshot_file(run: &str) -> String {
    format!("fabric-{run}.db")
}

/// Run on a server of the cluster that hosts Karmada (`k3s kubectl` has its admin kubeconfig):
/// `etcdctl snapshot save` inside the etcd pod (etcd-io/etcd `etcdctl/README.md`, "SNAPSHOT
/// SAVE"), onto the pod's data volume. etcdctl's report is kept off the output.
pub fn karmada_snapshot(namespace: &str, run: &str) -> Sh {
    sh!(
        "set -e; k3s kubectl -n {} exec {} -c {} -- etcdctl {} --cacert={} --cert={} --key={} snapshot save {} >/dev/null",
        namespace,
        KARMADA_ETCD_POD,
        KARMADA_ETCD_CONTAINER,
        KARMADA_ETCD_ENDPOINT,
        KARMADA_ETCD_CA,
        KARMADA_ETCD_CERT,
        KARMADA_ETCD_KEY,
        format!("{KARMADA_ETCD_DATA}/{}", karmada_snapshot_file(run))
    )
}

/// Run on the node of the etcd pod: the snapshot moved off etcd's data volume (the hostPath
/// [`KARMADA_ETCD_HOST_PATH`]) into the run's backup directory `dir`, root's only (etcd holds
/// Karmada's Secrets). Exits [`ABSENT`] when the snapshot is not there.
pub fn karmada_keep(dir: &str, run: &str) -> Sh {
    let snapshot = format!("{KARMADA_ETCD_HOST_PATH}/{}", karmada_snapshot_file(run));
    let kept = format!("{dir}/{KARMADA_SNAPSHOT}");
    sh!(
        "set -e; [ -s {} ] || exit {}; umask 077; mkdir -p {}; chmod 700 {} {}; mv -f {} {}; chmod 600 {}",
        snapshot.clone(),
        ABSENT.to_string(),
        dir,
        BACKUP_ROOT,
        dir,
        snapshot,
        kept.clone(),
        kept
    )
}

/// What the plan says of Karmada's snapshot, before it knows the run or the etcd pod's node.
pub fn karmada_plan_line() -> String {
    format!(
        "backup: Karmada etcd snapshot → <node of karmada-system/{KARMADA_ETCD_POD}>:{BACKUP_ROOT}/<run>/{KARMADA_SNAPSHOT}, \
         taken before the HelmChart changes; `fabric rollback` cannot downgrade Karmada: it names the snapshot and \
         docs/runbook.md \"Restoring Karmada's etcd\" (what Karmada recorded since is lost)"
    )
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
    fn karmadas_snapshot_is_taken_in_its_etcd_pod_with_the_charts_certificates() {
        let c = karmada_snapshot("karmada-system", "20261202T100000Z-1").to_string();
        assert_eq!(
            c,
            "set -e; k3s kubectl -n karmada-system exec etcd-0 -c etcd -- etcdctl --endpoints=https://127.0.0.1:2379 \
             --cacert=/etc/kubernetes/pki/etcd/server-ca.crt --cert=/etc/kubernetes/pki/etcd/karmada.crt \
             --key=/etc/kubernetes/pki/etcd/karmada.key snapshot save /var/lib/etcd/fabric-20261202T100000Z-1.db >/dev/null"
        );
    }

    #[test]
    fn karmadas_snapshot_is_moved_off_etcds_volume_into_the_runs_directory() {
        let c = karmada_keep(&dir_of("r1"), "r1").to_string();
        let from = "/var/lib/karmada-system/karmada-etcd/fabric-r1.db";
        assert!(c.starts_with(&format!("set -e; [ -s {from} ] || exit 3;")), "{c}");
        assert!(c.contains(&format!("mv -f {from} /var/lib/fabric/backup/r1/karmada-etcd.db")), "{c}");
        assert!(c.ends_with("chmod 600 /var/lib/fabric/backup/r1/karmada-etcd.db"), "{c}");
    }

    #[test]
    fn builders_run_in_sh() {
        for c in [
            k3s_save("/var/lib/fabric/backup/r1"),
            k3s_restore("/var/lib/fabric/backup/r1"),
            karmada_snapshot("karmada-system", "r1"),
            karmada_keep("/var/lib/fabric/backup/r1", "r1"),
        ] {
            let o = std::process::Command::new("sh").args(["-n", "-c", c.as_str()]).output().unwrap();
            assert!(o.status.success(), "{c}: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
}
