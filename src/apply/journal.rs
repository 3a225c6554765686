//! The write-ahead journal of an apply: `.fabric/runs/<run-id>.jsonl`, one JSON line per event,
//! synced to disk before the change it announces. A step's `begin` line holds its rollback
//! point: the prior state of every resource it changes (secrets by presence only, never their
//! content). `fabric rollback RUN-ID` reads it back.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::addr::{Address, Target};
use crate::desired::ProviderKind;
use crate::providers::Observed;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prior {
    pub address: Address,
    pub target: Target,
    pub provider: ProviderKind,
    pub sensitive: bool,
    pub prior: Observed,
    /// A Kubernetes object's identity (apiVersion, kind, name, namespace), to find it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Entry {
    /// The run starts: what it was asked to do.
    Start { run: String, fabric: String, topology_digest: String, user: String },
    /// A step is about to change these resources; `priors` is its rollback point.
    Begin { run: String, step: String, priors: Vec<Prior> },
    /// The step's changes are applied, checked and confirmed.
    Done { run: String, step: String },
    /// The step failed and was put back to its rollback point (`reason` says why).
    Reverted { run: String, step: String, reason: String },
    /// The step failed and could not be put back completely (`reason` lists what is left).
    Failed { run: String, step: String, reason: String },
    /// `fabric rollback` put the step back.
    RolledBack { run: String, step: String },
    /// The run ended.
    End { run: String, ok: bool },
    /// `fabric rotate wireguard` is about to switch `router` from one key to the next: public
    /// keys only (the private ones never leave the routers). Nothing a rollback puts back: a
    /// rotation is confirmed or reverted before the run ends, and the old private key is gone
    /// once confirmed.
    KeyRotation { run: String, router: String, old_public_key: String, new_public_key: String },
}

/// A journal entry that could not be written: nothing may change without its rollback point.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the journal {}: {source}", path.display())]
pub struct JournalError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

pub struct Journal {
    pub path: PathBuf,
    file: std::fs::File,
}

/// The directory runs are journaled in.
pub fn runs_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("runs")
}

impl Journal {
    pub fn create(state_dir: &Path, run: &str) -> std::io::Result<Journal> {
        let dir = runs_dir(state_dir);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{run}.jsonl"));
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(Journal { path, file })
    }

    /// Appends and syncs: the entry is on disk before the caller goes on. A write that fails
    /// part-way (a full disk) is cut back off, so the journal never ends in half a line; should
    /// even that fail, [`Journal::read`] ignores a torn last line.
    pub fn write(&mut self, e: &Entry) -> std::io::Result<()> {
        let mut line = serde_json::to_string(e).expect("journal entries serialize");
        line.push('\n');
        let before = self.file.metadata()?.len();
        let written = self.file.write_all(line.as_bytes()).and_then(|()| self.file.sync_data());
        if written.is_err() {
            let _ = self.file.set_len(before);
        }
        written
    }

    /// [`Journal::write`], with the journal's path in the error.
    pub fn record(&mut self, e: &Entry) -> Result<(), JournalError> {
        self.write(e).map_err(|source| JournalError { path: self.path.clone(), source })
    }

    /// Reads a journal back. A journal is input like any other (a file anyone with access to
    /// the state directory can edit): every address must be one fabric writes ([`sound`]), or
    /// the journal is refused before anything of it reaches a host.
    pub fn read(path: &Path) -> std::io::Result<Vec<Entry>> {
        Journal::parse(&std::fs::read_to_string(path)?)
    }

    /// [`Journal::read`] of a journal's text (a shared copy, `fabric runs`).
    pub fn parse(text: &str) -> std::io::Result<Vec<Entry>> {
        let bad =
            |line: usize, e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("line {line}: {e}"));
        // A last line without its newline is a write that did not finish (the machine stopped
        // or the disk filled mid-line): its entry never happened, as in any write-ahead log.
        let whole = match text.rfind('\n') {
            Some(end) => &text[..=end],
            None => "",
        };
        let mut out = Vec::new();
        for (i, l) in whole.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let e: Entry = serde_json::from_str(l).map_err(|e| bad(i + 1, e.to_string()))?;
            if let Entry::Begin { priors, .. } = &e
                && let Some(p) = priors.iter().find(|p| !sound(p))
            {
                return Err(bad(i + 1, format!("`{}` is not an address fabric writes", p.address)));
            }
            out.push(e);
        }
        Ok(out)
    }

    /// The newest run in `state_dir`, if any.
    pub fn latest(state_dir: &Path) -> Option<String> {
        run_ids(state_dir).pop()
    }
}

/// The runs journaled in `state_dir`, oldest first (run ids sort by time).
fn run_ids(state_dir: &Path) -> Vec<String> {
    let mut runs: Vec<String> = std::fs::read_dir(runs_dir(state_dir))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".jsonl").map(String::from))
        .filter(|r| is_run_id(r))
        .collect();
    runs.sort();
    runs
}

/// When the newest run in `state_dir` that ended well started (seconds since the Unix epoch,
/// from its run id), for the drift check's metrics. A journal that cannot be read is skipped.
pub fn last_success(state_dir: &Path) -> Option<i64> {
    run_ids(state_dir).into_iter().rev().find_map(|run| {
        let entries = Journal::read(&runs_dir(state_dir).join(format!("{run}.jsonl"))).ok()?;
        entries.iter().any(|e| matches!(e, Entry::End { ok: true, .. })).then(|| run_started(&run))?
    })
}

/// The time a run id names (`20261130T061502Z-4242`: UTC), seconds since the Unix epoch.
pub fn run_started(run: &str) -> Option<i64> {
    if !is_run_id(run) {
        return None;
    }
    let n = |a: usize, b: usize| run[a..b].parse::<i64>().ok();
    let (y, m, d) = (n(0, 4)?, n(4, 6)?, n(6, 8)?);
    let secs = n(9, 11)? * 3600 + n(11, 13)? * 60 + n(13, 15)?;
    Some(days_from_civil(y, m, d) * 86_400 + secs)
}

/// Days from 1970-01-01 to (year, month, day): the inverse of [`civil_from_days`] (Howard
/// Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Steps of a run to put back, newest first: those that completed and were not rolled back
/// already, and those that began without an end (an interrupted run).
pub fn steps_to_roll_back(entries: &[Entry]) -> Vec<(String, Vec<Prior>)> {
    let mut out: Vec<(String, Vec<Prior>)> = Vec::new();
    for e in entries {
        match e {
            Entry::Begin { step, priors, .. } => out.push((step.clone(), priors.clone())),
            Entry::Reverted { step, .. } | Entry::RolledBack { step, .. } => out.retain(|(s, _)| s != step),
            _ => {}
        }
    }
    out.reverse();
    out
}

/// A time (seconds since the Unix epoch) to the minute, in UTC: `2027-12-28 09:20 UTC`.
pub fn utc(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", s / 3600, s % 3600 / 60)
}

/// (year, month, day) of a day counted from 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A run id that sorts by time: `20261130T061502Z-4242`.
/// Whether a journaled prior names what fabric itself would: its target is the address's, and
/// the path is one of its provider's (a file by absolute path, a WireGuard interface by a
/// kernel name, a VyOS subtree or a command by plain words, an object by its identity).
pub fn sound(p: &Prior) -> bool {
    let a = &p.address;
    let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b" ./_:-".contains(&b));
    a.target == p.target
        && match p.provider {
            ProviderKind::File => a.file().is_some_and(|f| f.starts_with('/') && plain(f) && !f.contains("..")),
            ProviderKind::Wireguard => a.wireguard().is_some_and(crate::topology::rules::is_interface_name),
            ProviderKind::Vyos => a.vyos().is_some_and(plain),
            ProviderKind::Command => a.command().is_some_and(plain),
            ProviderKind::Kube => a.target.is_api() && plain(&a.path),
        }
}

/// Whether `id` is a run id as [`new_run_id`] makes them (`20261130T061502Z-4242`): only such
/// an id is ever joined into a path.
pub fn is_run_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() > 17
        && b.len() <= 30
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'Z'
        && b[16] == b'-'
        && b[17..].iter().all(u8::is_ascii_digit)
}

pub fn new_run_id() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    let (days, secs) = (now / 86_400, now % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z-{}", secs / 3600, secs / 60 % 60, secs % 60, std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_names_its_start() {
        assert_eq!(run_started("19700101T000000Z-1"), Some(0));
        assert_eq!(run_started("20261130T061502Z-4242"), Some(1796019302));
        assert_eq!(run_started("../x"), None);
        for days in [-1, 0, 59, 60, 10_957, 20_787] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn the_last_success_skips_failed_and_unfinished_runs() {
        let dir = std::env::temp_dir().join(format!("fabric-last-success-{}", std::process::id()));
        let runs = runs_dir(&dir);
        std::fs::create_dir_all(&runs).unwrap();
        let end = |run: &str, ok: bool| serde_json::to_string(&Entry::End { run: run.into(), ok }).unwrap() + "\n";
        std::fs::write(runs.join("20261130T000000Z-1.jsonl"), end("20261130T000000Z-1", true)).unwrap();
        std::fs::write(runs.join("20261201T000000Z-2.jsonl"), end("20261201T000000Z-2", false)).unwrap();
        std::fs::write(runs.join("20261202T000000Z-3.jsonl"), "").unwrap();
        assert_eq!(last_success(&dir), run_started("20261130T000000Z-1"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(last_success(&dir), None);
    }

    #[test]
    fn only_run_ids_are_run_ids() {
        assert!(is_run_id(&new_run_id()));
        assert!(is_run_id("20261130T061502Z-4242"));
        for bad in ["", "../../x", "20261130T061502Z-", "20261130T061502Z-42/../x", "R", "20261130T061502Z-4a"] {
            assert!(!is_run_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_journal_naming_what_fabric_does_not_write_is_refused() {
        let p = |provider: ProviderKind, address: &str| Prior {
            address: address.into(),
            target: address.split('/').next().unwrap().into(),
            provider,
            sensitive: false,
            prior: Observed::Absent,
            object: None,
        };
        assert!(sound(&p(ProviderKind::Wireguard, "router.sp/wireguard:wg0")));
        assert!(sound(&p(ProviderKind::File, "host.h/file:/etc/rancher/k3s/config.yaml")));
        assert!(sound(&p(ProviderKind::Kube, "cluster.sp/kube-system/HelmChart/cilium")));
        for (provider, address) in [
            (ProviderKind::Wireguard, "router.sp/wireguard:wg0; touch /tmp/p"),
            (ProviderKind::Wireguard, "router.sp/file:/etc/x"),
            (ProviderKind::File, "host.h/file:relative"),
            (ProviderKind::File, "host.h/file:/etc/../root/x"),
            (ProviderKind::File, "host.h/file:/etc/$(reboot)"),
            (ProviderKind::Kube, "router.sp/ns/Secret/x"),
        ] {
            assert!(!sound(&p(provider, address)), "{address}");
        }
        let dir = std::env::temp_dir().join(format!("fabric-journal-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x.jsonl");
        let e = Entry::Begin {
            run: "r".into(),
            step: "B.1".into(),
            priors: vec![p(ProviderKind::Wireguard, "router.sp/wireguard:wg0;reboot")],
        };
        std::fs::write(&f, serde_json::to_string(&e).unwrap() + "\n").unwrap();
        let err = Journal::read(&f).unwrap_err().to_string();
        assert!(err.contains("line 1") && err.contains("not an address fabric writes"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn run_ids_sort_by_time() {
        let id = new_run_id();
        assert_eq!(id.len(), "20261130T061502Z".len() + 1 + std::process::id().to_string().len());
        assert!(id.starts_with("20"), "{id}");
    }

    #[test]
    fn roll_back_order_and_reverted_steps() {
        let p = |a: &str| Prior {
            address: format!("host.h/file:/{a}").as_str().into(),
            target: "host.h".into(),
            provider: ProviderKind::File,
            sensitive: false,
            prior: Observed::Absent,
            object: None,
        };
        let run = "r".to_string();
        let entries = vec![
            Entry::Begin { run: run.clone(), step: "A".into(), priors: vec![p("a")] },
            Entry::Done { run: run.clone(), step: "A".into() },
            Entry::Begin { run: run.clone(), step: "B".into(), priors: vec![p("b")] },
            Entry::Reverted { run: run.clone(), step: "B".into(), reason: "check failed".into() },
            Entry::Begin { run: run.clone(), step: "C".into(), priors: vec![p("c")] },
        ];
        let steps: Vec<String> = steps_to_roll_back(&entries).into_iter().map(|(s, _)| s).collect();
        assert_eq!(steps, ["C", "A"]);
    }

    #[test]
    fn journal_round_trip() {
        let dir = std::env::temp_dir().join(format!("fabric-journal-{}", std::process::id()));
        let mut j = Journal::create(&dir, "20261201T000000Z-1").unwrap();
        let e = Entry::Begin {
            run: "run1".into(),
            step: "B.1".into(),
            priors: vec![Prior {
                address: "router.sp/wireguard:wg0".into(),
                target: "router.sp".into(),
                provider: ProviderKind::Wireguard,
                sensitive: false,
                prior: Observed::Present("conf\n".into()),
                object: None,
            }],
        };
        j.write(&e).unwrap();
        assert_eq!(Journal::read(&j.path).unwrap(), vec![e.clone()]);
        // A torn last line (the write that did not finish) is not an entry.
        let mut f = std::fs::OpenOptions::new().append(true).open(&j.path).unwrap();
        f.write_all(br#"{"event":"done","run":"run1","st"#).unwrap();
        assert_eq!(Journal::read(&j.path).unwrap(), vec![e]);
        assert_eq!(Journal::latest(&dir).as_deref(), Some("20261201T000000Z-1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
