//! Every decision changes the plan (issue "Every decision changes the plan"): for every decision of
//! the example and every value it takes, either the example's plan differs from the plan of every
//! other value (in its resources and what they hold, not only in a header), or the value is refused
//! with a diagnostic at the decision's own line (a refused step, or a topology error that points
//! there).

use std::collections::BTreeSet;

use fabric::catalog::{Catalog, StepGraph, refusal};
use fabric::topology::problem::{Diag, line_col};
use fabric::topology::{LoadError, load_str};

const EXAMPLE: &str = include_str!("../topology.example.yaml");

/// One decision: the text it has in the example (its value last), and every value it takes.
struct Decision {
    name: &'static str,
    text: &'static str,
    values: &'static [&'static str],
    /// Topology a value needs besides the decision itself (inserted after an anchor).
    extra: Option<(&'static str, &'static str, &'static str)>,
}

const DECISIONS: &[Decision] = &[
    Decision {
        name: "cluster_migration.franca",
        text: "  cluster_migration:\n    franca: in-place",
        values: &["in-place", "new-cluster", "undecided"],
        // A new cluster names the running one it replaces.
        extra: Some((
            "new-cluster",
            "      kubeconfig: { path: ~/.kube/franca.yaml, context: franca }\n",
            "      previous: { kubeconfig: { path: ~/.kube/franca-flannel.yaml } }\n",
        )),
    },
    Decision {
        name: "karmada_host",
        text: "karmada_host: host-cluster",
        values: &["host-cluster", "dedicated-vm", "undecided"],
        // A dedicated VM needs the VM named.
        extra: Some((
            "dedicated-vm",
            "    host_site: franca\n",
            "    vm: { name: karmada-vm, address: 192.168.0.60, ssh: { host: 192.168.0.60 }, kubeconfig: { path: ~/.kube/karmada-vm.yaml } }\n",
        )),
    },
    Decision { name: "argocd", text: "argocd: single", values: &["single", "per-cluster", "undecided"], extra: None },
    Decision {
        name: "public_address.franca",
        text: "  public_address:\n    franca: fixed",
        values: &["fixed", "dynamic", "undecided"],
        extra: None,
    },
    Decision {
        name: "public_address.sp",
        text: "    franca: fixed\n    sp: dynamic",
        values: &["dynamic", "fixed", "undecided"],
        extra: None,
    },
    Decision {
        name: "drbd_cross_site",
        text: "drbd_cross_site: cilium",
        values: &["cilium", "direct", "undecided"],
        extra: None,
    },
];

enum Outcome {
    /// Every resource of every step that plans, with what it holds.
    Plans(BTreeSet<String>),
    Refused,
}

/// The example with `d` set to `value`, and the line of the decision's value.
fn with_value(d: &Decision, value: &str) -> (String, usize) {
    let (head, old) = d.text.rsplit_once(' ').unwrap();
    let at = EXAMPLE.find(d.text).unwrap_or_else(|| panic!("{}: `{}` is not in the example", d.name, d.text));
    let mut text = format!("{}{head} {value}{}", &EXAMPLE[..at], &EXAMPLE[at + d.text.len()..]);
    assert!(d.text.ends_with(old));
    let line = line_col(&text, at + head.len() + 1).0;
    if let Some((when, anchor, add)) = d.extra
        && when == value
    {
        text = text.replacen(anchor, &format!("{anchor}{add}"), 1);
    }
    (text, line)
}

/// Whether the diagnostic points at `line`: its own span, one of its labels, or a place its help
/// names (miette cannot draw a label far above the primary one, so such a place is named there).
fn at_line(d: &Diag, text: &str, line: usize) -> bool {
    d.line == line
        || d.labels.iter().any(|l| line_col(text, l.offset()).0 == line)
        || d.problem.help.as_deref().is_some_and(|h| h.contains(&format!("{}:{line}:", d.file)))
}

fn outcome(d: &Decision, value: &str) -> Outcome {
    let (text, line) = with_value(d, value);
    let l = match load_str("t.yaml", text.clone()) {
        Ok(l) => l,
        Err(LoadError::Invalid { diags, .. }) => {
            assert!(
                diags.iter().any(|g| at_line(g, &text, line)),
                "{} = {value} is invalid, but no diagnostic points at its line {line}: {:?}",
                d.name,
                diags.iter().map(|g| format!("{}:{} {}", g.line, g.column, g.problem.message)).collect::<Vec<_>>()
            );
            return Outcome::Refused;
        }
        Err(e) => panic!("{} = {value}: {e}", d.name),
    };
    let g = StepGraph::build(&Catalog::embedded().unwrap(), &l.topology).unwrap();
    let refused = refusal::refusals(&g, &l.topology);
    let own: Vec<Diag> = refused
        .values()
        .map(|p| l.diag(p.clone()))
        .filter(|g| g.problem.path.to_string() == format!("decisions.{}", d.name))
        .collect();
    if !own.is_empty() {
        assert!(
            own.iter().all(|g| g.line == line),
            "{} = {value}: the refusal points at {:?}, not at line {line}",
            d.name,
            own.iter().map(|g| g.line).collect::<Vec<_>>()
        );
        return Outcome::Refused;
    }
    let mut resources = BTreeSet::new();
    for n in &g.order {
        if refused.contains_key(n) {
            continue;
        }
        for r in fabric::steps::for_instance(&g.graph[*n], &l.topology) {
            resources.insert(format!("{} {:?}", r.address, r.desired));
        }
    }
    Outcome::Plans(resources)
}

#[test]
fn every_value_of_every_decision_plans_differently_or_is_refused_at_its_line() {
    let mut report = Vec::new();
    for d in DECISIONS {
        let mut plans: Vec<(&str, BTreeSet<String>)> = Vec::new();
        for value in d.values {
            match outcome(d, value) {
                Outcome::Refused => report.push(format!("{} = {value}: refused at its line", d.name)),
                Outcome::Plans(p) => {
                    for (other, q) in &plans {
                        assert_ne!(&p, q, "{} = {value} plans exactly what {other} plans", d.name);
                    }
                    report.push(format!("{} = {value}: {} resources", d.name, p.len()));
                    plans.push((value, p));
                }
            }
        }
        // Undecided is always refused; a decision whose every value is refused decides nothing.
        assert!(!plans.is_empty(), "{}: no value plans at all", d.name);
    }
    // Which values plan and which are refused is itself the decisions' contract (docs/design.md).
    let refused: Vec<&String> = report.iter().filter(|r| r.ends_with("refused at its line")).collect();
    assert_eq!(refused.len(), 8, "{report:#?}");
    println!("{}", report.join("\n"));
}
