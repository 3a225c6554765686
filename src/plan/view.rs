//! Views of a plan: human (terminal), JSON (machines), Markdown (pull-request comments).
//! Views only read the model.

use std::fmt::Write;

use super::model::{Action, Mode, Plan, StepPlan, StepStatus};
use crate::catalog::view::risk_word;
use crate::style::Style;

fn mode_line(p: &Plan) -> String {
    match &p.mode {
        Mode::Offline => "offline: nothing was read, every resource is planned as absent".into(),
        Mode::Live { fingerprint } => {
            format!("live state read (observed {})", &fingerprint[..12.min(fingerprint.len())])
        }
        Mode::Observed { file, fingerprint } => {
            format!(
                "state from the snapshot {file} (observed {}); nothing was read",
                &fingerprint[..12.min(fingerprint.len())]
            )
        }
        Mode::Base { file } => {
            format!("the change from {file}: what fabric would write then and now; nothing was read")
        }
    }
}

/// Whether a view shows what does not change: hidden by default, so that a two-object change
/// reads as two objects (`--show-unchanged` shows the rest; a planfile keeps everything).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unchanged {
    Hidden,
    Shown,
}

/// The line that says what was hidden: `12 unchanged resource(s) in 3 step(s) not shown`.
fn hidden_line(p: &Plan) -> Option<String> {
    let steps = p.steps.iter().filter(|s| s.status_of() == StepStatus::NoChanges).count();
    let resources = p.summary.no_op;
    (steps + resources > 0).then(|| {
        format!(
            "{resources} unchanged resource(s) and {steps} step(s) without changes not shown (--show-unchanged shows them)"
        )
    })
}

/// The summary line every view ends with (`-q` prints only it).
pub fn summary_line(p: &Plan) -> String {
    let s = &p.summary;
    let mut line = format!("Plan: {} to create, {} to update, {} to delete.", s.create, s.update, s.delete);
    if s.refused_steps > 0 {
        let _ = write!(line, " {} step{} refused.", s.refused_steps, if s.refused_steps == 1 { "" } else { "s" });
    }
    if s.unknown_steps > 0 || !p.unreachable.is_empty() {
        let _ = write!(
            line,
            " {} step{} unknown: {} target(s) unreachable.",
            s.unknown_steps,
            if s.unknown_steps == 1 { "" } else { "s" },
            p.unreachable.len()
        );
    }
    line
}

/// The lines of a step whose targets were not read, one per target: `? unknown: <target>
/// unreachable (<reason>)`. Never "no changes": what would change there is not known.
fn unknown_lines(p: &Plan, step: &StepPlan) -> Vec<String> {
    step.unreachable
        .iter()
        .map(|t| {
            let reason = p.unreachable.iter().find(|u| &u.target == t).map_or("not read", |u| u.reason.as_str());
            format!("? unknown: {t} unreachable ({reason})")
        })
        .collect()
}

pub fn human(p: &Plan, st: &Style, unchanged: Unchanged) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} {} ({})", st.bold("fabric plan:"), p.fabric, p.topology_file);
    let _ = writeln!(out, "{}\n", st.dim(&mode_line(p)));
    let width = p.steps.iter().flat_map(|s| &s.changes).map(|c| c.address.to_string().len()).max().unwrap_or(0).min(72);
    let hidden = |s: &StepPlan| unchanged == Unchanged::Hidden && s.status_of() == StepStatus::NoChanges;
    for step in p.steps.iter().filter(|s| !hidden(s)) {
        let risk = format!("risk {}", risk_word(step.risk));
        let risk = match step.risk {
            crate::catalog::spec::Risk::High => st.red(&risk),
            crate::catalog::spec::Risk::Medium => st.yellow(&risk),
            crate::catalog::spec::Risk::Low => st.dim(&risk),
        };
        let cost = if step.costs.is_empty() { String::new() } else { format!("; cost: {}", step.costs.join("; ")) };
        let _ = writeln!(out, "{}  {}  {}{}", st.bold(&step.key), step.title, risk, st.yellow(&cost));
        match step.status_of() {
            StepStatus::Refused => {
                let _ = writeln!(out, "  {} {}", st.red("refused:"), step.refused.as_deref().unwrap_or_default());
            }
            StepStatus::NoChanges if step.changes.is_empty() => {
                let _ = writeln!(out, "  {}", st.dim("no changes"));
            }
            _ => {}
        }
        for l in unknown_lines(p, step) {
            let _ = writeln!(out, "  {}", st.red(&l));
        }
        for c in step.changes.iter().filter(|c| unchanged == Unchanged::Shown || c.action != Action::NoOp) {
            let sym = match c.action {
                Action::Create => st.green("+"),
                Action::Update => st.yellow("~"),
                Action::Delete => st.red("-"),
                Action::NoOp => " ".into(),
            };
            let sensitive = if c.sensitive { " (sensitive)" } else { "" };
            let _ = writeln!(out, "  {sym} {:width$}  {}{}", c.address, st.dim(&c.summary), sensitive);
            if let Some(r) = &c.refused {
                let _ = writeln!(out, "      {} {r}", st.red("the API server refuses this (dry run):"));
            }
            // What plan does not compare because a controller owns it now (terraform shows
            // attributes it cannot know the same way, one short line each).
            for l in &c.left_to_controllers {
                let _ = writeln!(out, "      {}", st.dim(l));
            }
            for l in &c.upgrade {
                let _ = writeln!(out, "      {}", st.yellow(l));
            }
            // A new object's whole content too: a reviewer sees what will be written.
            if let Some(d) = &c.diff {
                for line in d.lines() {
                    let line = match line.chars().next() {
                        Some('+') if !line.starts_with("+++") => st.green(line),
                        Some('-') if !line.starts_with("---") => st.red(line),
                        _ => st.dim(line),
                    };
                    let _ = writeln!(out, "      {line}");
                }
            }
        }
        out.push('\n');
    }
    if let Some(l) = hidden_line(p).filter(|_| unchanged == Unchanged::Hidden) {
        let _ = writeln!(out, "{}\n", st.dim(&l));
    }
    for u in &p.unreachable {
        let _ = writeln!(out, "{} {}: {}", st.red("unreachable:"), u.target, u.reason);
    }
    for w in &p.warnings {
        let _ = writeln!(out, "{} {w}", st.yellow("warning:"));
    }
    for h in &p.held {
        if let Some(l) = &h.lock {
            let stale = h
                .stale
                .as_ref()
                .map(|s| format!(" (stale: {s}; `fabric lock release` removes it)"))
                .unwrap_or_default();
            let _ = writeln!(out, "{} {}: {l}{stale}", st.yellow("locked:"), h.target);
        }
        for r in &h.pending_reverts {
            let _ = writeln!(
                out,
                "{} {}: {r} (a run's change not yet confirmed: it may revert by itself)",
                st.yellow("pending self-revert:"),
                h.target
            );
        }
    }
    let _ = writeln!(out, "{}", st.bold(&summary_line(p)));
    out
}

/// The plan as JSON (docs/plan-format.md). Hidden unchanged resources leave `changes` (each
/// step stays, its `status` saying `no-changes`; `summary.no_op` still counts them). Sensitive
/// resources carry only addresses and summaries, never content: nothing to mask.
pub fn json(p: &Plan, unchanged: Unchanged) -> String {
    let text = match unchanged {
        Unchanged::Shown => serde_json::to_string_pretty(p),
        Unchanged::Hidden => {
            let mut shown = p.clone();
            for s in &mut shown.steps {
                s.changes.retain(|c| c.action != Action::NoOp);
            }
            serde_json::to_string_pretty(&shown)
        }
    };
    text.expect("plan serializes") + "\n"
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;")
}

/// GitHub's limit for a comment is 65536 characters; the folded diffs stop well before it.
const MARKDOWN_DIFF_BUDGET: usize = 50_000;

/// The plan as a pull-request comment, as reviewers read one (Atlantis is the model): the
/// summary, then what needs their attention (refused steps, high-risk steps that change),
/// a line per step that changes, and every change's diff folded.
pub fn markdown(p: &Plan, unchanged: Unchanged) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### fabric plan: `{}`\n", p.fabric);
    let _ = writeln!(out, "_{}_ · topology `{}`\n", mode_line(p), p.topology_file);
    let _ = writeln!(out, "**{}**\n", summary_line(p));
    let changes = |s: &StepPlan| s.changes.iter().any(|c| c.action != Action::NoOp);
    for s in p.steps.iter().filter(|s| s.refused.is_some()) {
        let _ = writeln!(
            out,
            "> :no_entry: **`{}` refused:** {}\n",
            s.key,
            md_escape(s.refused.as_deref().unwrap_or_default())
        );
    }
    for s in p.steps.iter().filter(|s| s.status_of() == StepStatus::Unknown) {
        for l in unknown_lines(p, s) {
            let _ = writeln!(out, "> :question: **`{}`** {}\n", s.key, md_escape(&l));
        }
    }
    // One warning per step and site: a step rolled out node by node (`A.2@franca/franca-gpu1`)
    // names its nodes in its site's line.
    let mut risky: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for s in p.steps.iter().filter(|s| s.risk == crate::catalog::spec::Risk::High && changes(s)) {
        let (base, node) = match s.key.split_once('/') {
            Some((b, n)) => (b, Some(n)),
            None => (s.key.as_str(), None),
        };
        match risky.iter_mut().find(|(b, _, _)| *b == base) {
            Some((_, _, nodes)) => nodes.extend(node),
            None => risky.push((base, &s.title, node.into_iter().collect())),
        }
    }
    for (base, title, nodes) in risky {
        let nodes = if nodes.is_empty() { String::new() } else { format!(", node by node: {}", nodes.join(", ")) };
        let _ = writeln!(
            out,
            "> :warning: **`{base}` is high-risk** ({}) and changes here{nodes}: review it closely.\n",
            md_escape(title)
        );
    }
    let shown: Vec<_> = p
        .steps
        .iter()
        .filter(|s| unchanged == Unchanged::Shown || changes(s) || s.status_of() != StepStatus::NoChanges)
        .collect();
    if !shown.is_empty() {
        let _ = writeln!(out, "| step | title | risk | create | update | delete | status |");
        let _ = writeln!(out, "|---|---|---|---:|---:|---:|---|");
    }
    for s in &shown {
        let count = |a: Action| s.changes.iter().filter(|c| c.action == a).count();
        let status = match s.status_of() {
            StepStatus::Refused => "refused",
            StepStatus::Unknown => "unknown",
            StepStatus::Changes => "changes",
            StepStatus::NoChanges => "no changes",
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} | {} |",
            s.key,
            md_escape(&s.title),
            risk_word(s.risk),
            count(Action::Create),
            count(Action::Update),
            count(Action::Delete),
            status
        );
    }
    let without = p.steps.len() - shown.len();
    if without > 0 {
        let _ = writeln!(out, "\n_{without} step(s) without changes._");
    }
    out.push('\n');
    // Chart upgrades, with how their CRDs follow and the backup taken first: what a reviewer
    // must see without unfolding the diffs.
    for c in p.steps.iter().flat_map(|s| &s.changes).filter(|c| !c.upgrade.is_empty()) {
        let _ = writeln!(out, "> :arrow_up: `{}`", c.address);
        for l in &c.upgrade {
            let _ = writeln!(out, "> - {}", md_escape(l));
        }
        out.push('\n');
    }
    if shown.iter().any(|s| changes(s)) || (unchanged == Unchanged::Shown && p.summary.no_op > 0) {
        markdown_diffs(p, unchanged, &mut out);
    }
    for u in &p.unreachable {
        let _ = writeln!(out, "\n:warning: `{}` unreachable: {}", u.target, md_escape(&u.reason));
    }
    for w in &p.warnings {
        let _ = writeln!(out, "\n:warning: {}", md_escape(w));
    }
    out
}

/// Every change with its diff, folded; past [`MARKDOWN_DIFF_BUDGET`] only the addresses.
fn markdown_diffs(p: &Plan, unchanged: Unchanged, out: &mut String) {
    let _ = writeln!(out, "<details><summary>Changes by resource</summary>\n\n```diff");
    let mut budget = MARKDOWN_DIFF_BUDGET;
    let mut cut = 0;
    for s in &p.steps {
        let changed: Vec<_> =
            s.changes.iter().filter(|c| unchanged == Unchanged::Shown || c.action != Action::NoOp).collect();
        if changed.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# {} {}", s.key, s.title);
        for c in changed {
            let sensitive = if c.sensitive { " (sensitive: not shown)" } else { "" };
            let _ = writeln!(out, "{} {}  # {}{}", c.action.symbol(), c.address, c.summary, sensitive);
            let diff = c.diff.as_deref().unwrap_or_default();
            // The diff's own header lines say nothing the line above does not.
            let body: String = diff
                .lines()
                .filter(|l| !l.starts_with("--- ") && !l.starts_with("+++ "))
                .map(|l| format!("{l}\n"))
                .collect();
            if body.len() <= budget {
                budget -= body.len();
                out.push_str(&body.replace("```", "` ` `"));
            } else if !body.is_empty() {
                cut += 1;
            }
        }
    }
    let _ = writeln!(out, "```\n\n</details>");
    if cut > 0 {
        let _ =
            writeln!(out, "\n_{cut} diff(s) left out to keep the comment short: run `fabric plan` for all of them._");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::model::{Change, StepPlan};

    /// A chart's upgrade lines under its change, in the terminal and in a pull request's comment.
    #[test]
    fn a_chart_upgrade_shows_its_lines() {
        let mut c = Change::create(&crate::desired::Resource {
            address: "cluster.franca/kube-system/HelmChart/karmada".into(),
            site: Some("franca".into()),
            provider: crate::desired::ProviderKind::Kube,
            summary: "Karmada".into(),
            sensitive: false,
            desired: crate::desired::Desired::Kube(serde_json::json!({})),
            file: None,
        });
        c.action = Action::Update;
        c.upgrade = crate::desired::upgrade::chart_upgrade_lines("karmada", "1.15.0", "1.16.0");
        let step = StepPlan {
            key: "C.1".into(),
            id: "C.1".into(),
            site: None,
            phase: "C".into(),
            title: "Karmada".into(),
            risk: crate::catalog::spec::Risk::Medium,
            costs: vec![],
            needs: vec![],
            changes: vec![c],
            refused: None,
            unreachable: vec![],
            status: Default::default(),
        };
        let p = Plan::of_steps(vec![step]);
        let human = human(&p, &Style::detect(true, false), Unchanged::Hidden);
        assert!(human.contains("      upgrade: karmada chart 1.15.0 → 1.16.0\n"), "{human}");
        assert!(human.contains("      backup: Karmada etcd snapshot → "), "{human}");
        let md = markdown(&p, Unchanged::Hidden);
        assert!(md.contains("> :arrow_up: `cluster.franca/kube-system/HelmChart/karmada`"), "{md}");
        assert!(md.contains("> - CRDs: Karmada"), "{md}");
    }

    /// A step whose target was not read says so on its line in every view, never "no changes".
    #[test]
    fn a_step_not_read_is_unknown_in_every_view() {
        let mut step = StepPlan::tunnel(vec![]);
        step.unreachable = vec!["router.sp".into()];
        let mut p = Plan::of_steps(vec![step, StepPlan::tunnel(vec![])]);
        p.steps[1].key = "B.1@other".into();
        p.unreachable =
            vec![crate::plan::model::Unreachable { target: "router.sp".into(), reason: "no answer within 8 s".into() }];
        p.summarize();
        let human = human(&p, &Style::detect(true, false), Unchanged::Hidden);
        assert!(
            human.contains("B.1  tunnel  risk low\n  ? unknown: router.sp unreachable (no answer within 8 s)\n\n"),
            "{human}"
        );
        assert!(!human.contains("no changes"), "the step read without changes is hidden: {human}");
        assert!(human.contains("0 unchanged resource(s) and 1 step(s) without changes not shown"), "{human}");
        assert!(human.ends_with("0 to delete. 1 step unknown: 1 target(s) unreachable.\n"), "{human}");
        let all = super::human(&p, &Style::detect(true, false), Unchanged::Shown);
        assert_eq!(all.matches("no changes").count(), 1, "only the step that was read: {all}");
        let md = markdown(&p, Unchanged::Hidden);
        assert!(md.contains("> :question: **`B.1`** ? unknown: router.sp unreachable (no answer within 8 s)"), "{md}");
        assert!(md.contains("| `B.1` | tunnel | low | 0 | 0 | 0 | unknown |"), "{md}");
        assert!(md.contains("_1 step(s) without changes._"), "{md}");
        let v: serde_json::Value = serde_json::from_str(&json(&p, Unchanged::Hidden)).unwrap();
        assert_eq!(v["steps"][0]["status"], "unknown");
        assert_eq!(v["steps"][1]["status"], "no-changes");
        assert_eq!(v["summary"]["unknown_steps"], 1);
    }
}
