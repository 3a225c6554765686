//! A plan as Prometheus metrics, for a scheduled `fabric plan --metrics FILE` that
//! node-exporter's textfile collector serves (examples/drift-check/, docs/runbook.md).
//!
//! The format is the text exposition format (prometheus/docs,
//! `content/docs/instrumenting/exposition_formats.md`): `# HELP` and `# TYPE` once per metric
//! family, then one sample per line; a label value escapes `\`, `"` and line feed as `\\`, `\"`
//! and `\n`; HELP text escapes `\` and line feed. Names follow the naming conventions
//! (prometheus/docs `content/docs/practices/naming.md`): one `fabric_` prefix, base units
//! (seconds, not days), `_timestamp_seconds` for a point in time since the Unix epoch. Days to a
//! certificate's expiry are therefore `fabric_certificate_expiry_seconds / 86400` in a rule.
//! Every figure is a gauge. The file is checked with a real parser (the `prometheus-client`
//! Python package's `text_string_to_metric_families`) in tests/metrics_lab.rs.
//!
//! Pure: the caller gathers the facts (the plan, live state, the journal's last success) and
//! writes the text atomically ([`write_atomic`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::model::{Action, Plan};
use crate::addr::Target;

/// One certificate whose expiry is known: a name for its label and its `notAfter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertExpiry {
    /// What it is and where it is kept, e.g. `karmada/karmada-cert` (no secret material).
    pub name: String,
    /// `notAfter`, seconds since the Unix epoch.
    pub not_after: i64,
}

/// What the metrics say, besides the plan itself.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The sites of the topology (a tunnel figure each, when B.1 is planned).
    pub sites: Vec<String>,
    /// When the newest run that ended well ended (its run id's time), if any.
    pub last_successful_apply: Option<i64>,
    pub certificates: Vec<CertExpiry>,
    /// When the plan was made, seconds since the Unix epoch.
    pub now: i64,
}

/// The step that builds the tunnel: its changes at a site's router are the tunnel's drift.
const TUNNEL_STEP: &str = "B.1";

/// The metrics text of `plan` and `facts`.
pub fn render(plan: &Plan, facts: &Facts) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "fabric_plan_timestamp_seconds",
        "When this plan was made (Unix time).",
        &[(vec![], facts.now as f64)],
    );
    family(
        &mut out,
        "fabric_plan_resources_drifted",
        "Resources of a step whose live state differs from the topology's (to create, update or delete).",
        &drifted(plan),
    );
    family(
        &mut out,
        "fabric_plan_steps_refused",
        "Selected steps the plan refused (an open decision, a host not ready).",
        &[(vec![], plan.summary.refused_steps as f64)],
    );
    // A step with a target not read shows 0 drifted for what it could not see: this says so.
    family(
        &mut out,
        "fabric_plan_steps_unknown",
        "Selected steps with a target the plan could not read: their drift is unknown.",
        &[(vec![], plan.summary.unknown_steps as f64)],
    );
    let unreachable: Vec<Sample> =
        plan.unreachable.iter().map(|u| (vec![("target", u.target.to_string())], 1.0)).collect();
    family(&mut out, "fabric_target_unreachable", "A target the plan could not read (1).", &unreachable);
    family(
        &mut out,
        "fabric_tunnel_in_sync",
        "1 when the site's router was read and its WireGuard tunnel (step B.1) is as the topology says; 0 when it drifted or could not be read.",
        &tunnels(plan, &facts.sites),
    );
    if let Some(at) = facts.last_successful_apply {
        family(
            &mut out,
            "fabric_last_successful_apply_timestamp_seconds",
            "When the newest apply that ended well started (Unix time, from its run id).",
            &[(vec![], at as f64)],
        );
    }
    let certs: Vec<Sample> = facts
        .certificates
        .iter()
        .map(|c| (vec![("certificate", c.name.clone())], (c.not_after - facts.now) as f64))
        .collect();
    family(
        &mut out,
        "fabric_certificate_expiry_seconds",
        "Seconds until the certificate's notAfter (negative: expired); divide by 86400 for days.",
        &certs,
    );
    out
}

type Sample = (Vec<(&'static str, String)>, f64);

/// Changes to make per step (every step of the plan, 0 where nothing drifted).
fn drifted(plan: &Plan) -> Vec<Sample> {
    plan.steps
        .iter()
        .map(|s| {
            let n = s.changes.iter().filter(|c| c.action != Action::NoOp).count();
            (vec![("step", s.key.clone())], n as f64)
        })
        .collect()
}

/// Per site: whether B.1's resources at its router have no changes and the router was read.
/// Nothing when the plan does not hold B.1 (another selection: no figure rather than a guess).
fn tunnels(plan: &Plan, sites: &[String]) -> Vec<Sample> {
    let Some(b1) = plan.steps.iter().find(|s| s.id == TUNNEL_STEP) else { return vec![] };
    let unread: Vec<&Target> = plan.unreachable.iter().map(|u| &u.target).chain(b1.unreachable.iter()).collect();
    let mut by_site: BTreeMap<&str, bool> = sites.iter().map(|s| (s.as_str(), true)).collect();
    for (site, ok) in by_site.iter_mut() {
        let router = Target::router(site);
        let drifted = b1.changes.iter().any(|c| c.target == router && c.action != Action::NoOp);
        *ok = !drifted && !unread.contains(&&router);
    }
    by_site.into_iter().map(|(s, ok)| (vec![("site", s.to_string())], if ok { 1.0 } else { 0.0 })).collect()
}

/// One metric family: HELP, TYPE gauge, its samples (none is allowed: the family is declared).
fn family(out: &mut String, name: &str, help: &str, samples: &[Sample]) {
    let _ = writeln!(out, "# HELP {name} {}", help.replace('\\', "\\\\").replace('\n', "\\n"));
    let _ = writeln!(out, "# TYPE {name} gauge");
    for (labels, value) in samples {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", label_value(v))).collect();
        let labels = if labels.is_empty() { String::new() } else { format!("{{{}}}", labels.join(",")) };
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Writes `text` to `path` as node-exporter's textfile collector requires (node_exporter
/// README, "Textfile Collector": write to a temporary file in the same directory, then `mv` it,
/// so a scrape never reads half a file): a hidden temporary file beside it (the collector reads
/// only `*.prom`), flushed, then renamed over it.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::model::{Change, StepPlan, Unreachable};

    fn change(target: Target, action: Action) -> Change {
        Change {
            address: target.at("wireguard:wg0"),
            action,
            provider: crate::desired::ProviderKind::Wireguard,
            target,
            summary: String::new(),
            sensitive: false,
            diff: None,
            refused: None,
            left_to_controllers: vec![],
            upgrade: vec![],
        }
    }

    fn plan(changes: Vec<Change>, unreachable: Vec<Unreachable>) -> Plan {
        let mut p = Plan::of_steps(vec![StepPlan::tunnel(changes)]);
        p.unreachable = unreachable;
        p
    }

    fn facts() -> Facts {
        Facts {
            sites: vec!["franca".into(), "sp".into()],
            last_successful_apply: None,
            certificates: vec![],
            now: 1000,
        }
    }

    #[test]
    fn drift_at_one_router_counts_for_its_step_and_its_site() {
        let p = plan(
            vec![change(Target::router("sp"), Action::Update), change(Target::router("franca"), Action::NoOp)],
            vec![],
        );
        let text = render(&p, &facts());
        assert!(text.contains("fabric_plan_resources_drifted{step=\"B.1\"} 1\n"), "{text}");
        assert!(text.contains("fabric_tunnel_in_sync{site=\"franca\"} 1\n"), "{text}");
        assert!(text.contains("fabric_tunnel_in_sync{site=\"sp\"} 0\n"), "{text}");
    }

    #[test]
    fn an_unread_router_is_not_in_sync() {
        let p = plan(vec![], vec![Unreachable { target: Target::router("franca"), reason: "down".into() }]);
        let text = render(&p, &facts());
        assert!(text.contains("fabric_tunnel_in_sync{site=\"franca\"} 0\n"), "{text}");
        assert!(text.contains("fabric_target_unreachable{target=\"router.franca\"} 1\n"), "{text}");
    }

    #[test]
    fn expiry_is_in_seconds_from_now_and_labels_are_escaped() {
        let f = Facts {
            certificates: vec![CertExpiry { name: "a\"b\\c\nd".into(), not_after: 1000 + 86_400 }],
            last_successful_apply: Some(900),
            ..facts()
        };
        let text = render(&plan(vec![], vec![]), &f);
        assert!(text.contains("fabric_certificate_expiry_seconds{certificate=\"a\\\"b\\\\c\\nd\"} 86400\n"), "{text}");
        assert!(text.contains("fabric_last_successful_apply_timestamp_seconds 900\n"), "{text}");
    }

    #[test]
    fn without_b1_there_is_no_tunnel_figure() {
        let mut p = plan(vec![], vec![]);
        p.steps[0].id = "C.1".into();
        assert!(!render(&p, &facts()).contains("fabric_tunnel_in_sync{"));
    }

    #[test]
    fn the_file_is_replaced_whole_and_no_temporary_is_left() {
        let dir = std::env::temp_dir().join(format!("fabric-metrics-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fabric.prom");
        write_atomic(&path, "a 1\n").unwrap();
        write_atomic(&path, "a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 2\n");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
