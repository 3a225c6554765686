//! `fabric graph` output: text, Graphviz dot, Mermaid.

use std::fmt::Write;

use super::graph::StepGraph;
use super::spec::Risk;

pub fn risk_word(r: Risk) -> &'static str {
    match r {
        Risk::Low => "low",
        Risk::Medium => "medium",
        Risk::High => "high",
    }
}

pub fn text(g: &StepGraph) -> String {
    let width = g.instances().map(|i| i.key().len()).max().unwrap_or(0);
    let title_w = g.instances().map(|i| i.spec.title.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    let mut phase = String::new();
    for &n in &g.order {
        let i = &g.graph[n];
        if i.phase != phase {
            phase.clone_from(&i.phase);
            if !out.is_empty() {
                out.push('\n');
            }
        }
        let deps: Vec<String> = g
            .dependencies(n)
            .iter()
            .map(|d| if g.derived_why(*d, n).is_some() { format!("{}*", g.graph[*d].key()) } else { g.graph[*d].key() })
            .collect();
        let deps = if deps.is_empty() { "—".to_string() } else { deps.join(", ") };
        let _ = writeln!(
            out,
            "{:width$}  {:title_w$}  risk {:6}  needs {deps}",
            i.key(),
            i.spec.title,
            risk_word(i.spec.risk),
        );
        for d in g.dependencies(n) {
            if let Some(why) = g.derived_why(d, n) {
                let _ = writeln!(out, "{:width$}  * {} makes {why}", "", g.graph[d].key());
            }
        }
    }
    if !g.derived.is_empty() {
        out.push_str("\n* derived: the step's resources name something only that step makes\n");
    }
    out
}

fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

pub fn dot(g: &StepGraph) -> String {
    let mut out = String::from("digraph fabric {\n  rankdir=LR;\n  node [shape=box, fontname=\"sans-serif\"];\n");
    let mut phases: Vec<&str> = g.instances().map(|i| i.phase.as_str()).collect();
    phases.dedup();
    for p in phases {
        let _ = writeln!(out, "  subgraph \"cluster_{p}\" {{\n    label=\"Phase {p}\";");
        for i in g.instances().filter(|i| i.phase == p) {
            let color = match i.spec.risk {
                Risk::Low => "",
                Risk::Medium => ", color=orange",
                Risk::High => ", color=red, penwidth=2",
            };
            let _ = writeln!(out, "    \"{}\" [label=\"{}\\n{}\"{color}];", i.key(), i.key(), quote(&i.spec.title));
        }
        out.push_str("  }\n");
    }
    for &n in &g.order {
        for d in g.dependencies(n) {
            let (from, to) = (g.graph[d].key(), g.graph[n].key());
            match g.derived_why(d, n) {
                Some(why) => {
                    let _ = writeln!(out, "  \"{from}\" -> \"{to}\" [style=dashed, tooltip=\"{}\"];", quote(why));
                }
                None => {
                    let _ = writeln!(out, "  \"{from}\" -> \"{to}\";");
                }
            }
        }
    }
    out.push_str("}\n");
    out
}

fn mermaid_id(key: &str) -> String {
    key.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

pub fn mermaid(g: &StepGraph) -> String {
    let mut out = String::from("flowchart LR\n");
    let mut phases: Vec<&str> = g.instances().map(|i| i.phase.as_str()).collect();
    phases.dedup();
    for p in phases {
        let _ = writeln!(out, "  subgraph phase_{p}[\"Phase {p}\"]");
        for i in g.instances().filter(|i| i.phase == p) {
            let title = i.spec.title.replace('"', "#quot;");
            let _ = writeln!(out, "    {}[\"{}: {}\"]", mermaid_id(&i.key()), i.key(), title);
        }
        out.push_str("  end\n");
    }
    for &n in &g.order {
        for d in g.dependencies(n) {
            let (from, to) = (mermaid_id(&g.graph[d].key()), mermaid_id(&g.graph[n].key()));
            let arrow = if g.derived_why(d, n).is_some() { "-.->" } else { "-->" };
            let _ = writeln!(out, "  {from} {arrow} {to}");
        }
    }
    out
}

/// The graph as data: steps in order with their site, phase, risk and needs.
pub fn json(g: &StepGraph) -> String {
    let steps: Vec<serde_json::Value> = g
        .order
        .iter()
        .map(|n| {
            let i = &g.graph[*n];
            serde_json::json!({
                "key": i.key(),
                "id": i.spec.id,
                "site": i.site,
                "phase": i.phase,
                "title": i.spec.title,
                "seed_title": i.spec.seed_title,
                "risk": risk_word(i.spec.risk),
                "needs": g.dependencies(*n).iter().map(|d| g.graph[*d].key()).collect::<Vec<_>>(),
                "derived": g
                    .dependencies(*n)
                    .iter()
                    .filter_map(|d| g.derived_why(*d, *n).map(|why| serde_json::json!({ "step": g.graph[*d].key(), "why": why })))
                    .collect::<Vec<_>>(),
                "decisions": i.spec.decisions,
                "check": i.spec.check,
            })
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({ "format_version": "1.0", "steps": steps }))
        .expect("graph serializes")
        + "\n"
}
