//! `fabric verify`: the seed's validation checks against live state, pass/fail with evidence.

use clap::{Args, ValueEnum};
use miette::Report;

use super::{Done, usage};
use crate::command::args::Global;
use crate::steps::Verdict;
use crate::style::{Style, terminal_safe};

/// Run the seed's validation checks against live state (changes nothing)
///
/// Every step has checks, each PASS or FAIL with its evidence: A.1/A.2 Cilium agents and
/// operator; A.3/A.4 each VM and host a Ready, tainted node; B.1 each site's LAN reaches the
/// others through the tunnel; B.2 clustermesh-apiserver, peers and one CA; B.3 global service
/// backends; C.1 Karmada's control plane; C.2 members Ready; C.3 ArgoCD synced; C.4 estimators;
/// C.5 Deployments propagated; C.6 GPU selectors; C.7 failover configured; D.1–D.3 queues and
/// workers Active; D.4 the test Job dispatched; G.1 the gateway running. A check that does not
/// apply to the topology (an estimator that is off) says SKIP. Exit 1 when any check fails.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  fabric verify --step B.1\n  fabric verify --phase C --format json")]
pub struct Opts {
    #[command(flatten)]
    pub selection: crate::command::args::SelectionArgs,
    /// Output format
    #[arg(long, value_enum, default_value_t = VerifyFormat::Human)]
    pub format: VerifyFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VerifyFormat {
    Human,
    Json,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let ws = super::workspace(g)?;
    let targets = super::targets(g, &ws)?;
    let rt = crate::operation::runtime()?;
    let results = crate::operation::verify::run(&ws, &o.selection.into(), &targets, &rt)?;
    let failed = results.iter().filter(|r| r.verdict == Verdict::Fail).count();
    match o.format {
        VerifyFormat::Json => crate::outln!("{}", serde_json::to_string_pretty(&results).expect("results serialize")),
        VerifyFormat::Human => {
            let st = Style::stdout(g.no_color);
            for r in &results {
                let v = match r.verdict {
                    Verdict::Pass => st.green("PASS"),
                    Verdict::Fail => st.red("FAIL"),
                    Verdict::Warn => st.yellow("WARN"),
                    Verdict::Skip => st.dim("SKIP"),
                };
                crate::outln!("{v}  {:<12} {}: {}", r.step, r.check, terminal_safe(&r.evidence, false));
            }
            let passed = results.iter().filter(|r| r.verdict == Verdict::Pass).count();
            let warned = results.iter().filter(|r| r.verdict == Verdict::Warn).count();
            let warned = if warned > 0 { format!(", {warned} passed with a warning") } else { String::new() };
            crate::outln!(
                "Verify: {passed} passed{warned}, {failed} failed, {} without an automatic check.",
                results.len() - passed - failed - results.iter().filter(|r| r.verdict == Verdict::Warn).count()
            );
        }
    }
    if failed > 0 {
        return Err(usage(
            "verify::failed",
            format!("{failed} check(s) failed"),
            "the evidence above says what is missing; `fabric plan` shows what apply would change",
        ));
    }
    Ok(Done::Ok)
}
