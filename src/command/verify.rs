//! `fabric verify`: the seed's validation checks against live state, pass/fail with evidence.

use clap::{Args, ValueEnum};
use miette::Report;

use super::{Done, load, usage};
use crate::command::cli::Global;
use crate::live::observe::Targets;
use crate::plan::select::Selection;
use crate::steps::verify::{self, Verdict};
use crate::style::Style;

/// Run the seed's validation checks against live state (changes nothing)
///
/// B.1: each site's LAN host reaches the other sites' through the tunnel. A.x: Cilium agents
/// ready. C.2: every Karmada member Ready. C.5: the services' Deployments propagated. D.1:
/// ClusterQueues Active. D.2: MultiKueue workers Active. Other steps say they have no automatic
/// check. Exit 1 when any check fails.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  fabric verify --step B.1\n  fabric verify --phase C --format json")]
pub struct Opts {
    #[command(flatten)]
    pub selection: crate::command::cli::SelectionArgs,
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
    if g.example {
        return Err(usage(
            "plan::needs-offline",
            "the example topology is never read live",
            "it holds production addresses: verify a topology of your own",
        ));
    }
    let loaded = load(g)?;
    let t = &loaded.topology;
    let (catalog, graph) = super::graph::build(t)?;
    let selection: Selection = o.selection.into();
    let selected = selection
        .resolve(&catalog, &graph, t, |_| false)
        .map_err(|e| usage("plan::selection", e.to_string(), e.help()))?;
    let targets = Targets::from_topology(t, &crate::operation::workspace::ssh_config(g)?);
    let rt = crate::operation::workspace::runtime()?;
    let mut results = Vec::new();
    for n in graph.order.iter().filter(|n| selected.contains(n)) {
        let inst = &graph.graph[*n];
        results.extend(rt.block_on(verify::step(t, &targets, &inst.spec.id, &inst.key(), inst.site.as_deref())));
    }
    let failed = results.iter().filter(|r| r.verdict == Verdict::Fail).count();
    match o.format {
        VerifyFormat::Json => println!("{}", serde_json::to_string_pretty(&results).expect("results serialize")),
        VerifyFormat::Human => {
            let st = Style::stdout(g.no_color);
            for r in &results {
                let v = match r.verdict {
                    Verdict::Pass => st.green("PASS"),
                    Verdict::Fail => st.red("FAIL"),
                    Verdict::Skip => st.dim("SKIP"),
                };
                println!("{v}  {:<12} {}: {}", r.step, r.check, r.evidence);
            }
            let passed = results.iter().filter(|r| r.verdict == Verdict::Pass).count();
            println!(
                "Verify: {passed} passed, {failed} failed, {} without an automatic check.",
                results.len() - passed - failed
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
