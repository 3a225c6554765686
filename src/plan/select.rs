//! Which steps a command works on: `--phase`, `--step`, `--site`, `--with-deps`.

use std::collections::BTreeSet;

use petgraph::graph::NodeIndex;

use crate::catalog::{Catalog, StepGraph};
use crate::topology::Topology;
use crate::topology::schema_check::did_you_mean;

/// What the flags select; also recorded in a plan, so `apply PLANFILE` works on the same steps.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Selection {
    pub phases: Vec<String>,
    pub steps: Vec<String>,
    pub sites: Vec<String>,
    pub with_deps: bool,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SelectError {
    #[error("there is no {what} `{name}`{hint}")]
    Unknown { what: &'static str, name: String, hint: String },
    #[error("nothing matches the selection ({0})")]
    Empty(String),
    #[error("step {step} needs {dep}, which is not selected and has pending changes")]
    PendingUpstream { step: String, dep: String },
}

impl SelectError {
    pub fn help(&self) -> String {
        match self {
            SelectError::Unknown { .. } => "`fabric graph` lists every phase, step and site".into(),
            SelectError::Empty(_) => "widen the selection; `fabric graph` shows which steps exist at which site".into(),
            SelectError::PendingUpstream { dep, .. } => {
                format!("add --with-deps to include {dep} and everything it needs, or select it with --step")
            }
        }
    }
}

fn unknown(what: &'static str, name: &str, known: &[String]) -> SelectError {
    let hint = match did_you_mean(name, known.iter().map(String::as_str)) {
        Some(s) => format!(" (did you mean `{s}`?)"),
        None => format!(" (known: {})", known.join(", ")),
    };
    SelectError::Unknown { what, name: name.to_string(), hint }
}

/// Whether `--step s` selects instance `i`: its step (`A.2`), its key (`A.2@franca`, also every
/// node of a step rolled out node by node), or one node's part (`A.2@franca/franca-gpu1`).
fn selects(s: &str, i: &crate::catalog::Instance) -> bool {
    let key = i.key();
    *s == i.spec.id || *s == key || key.strip_prefix(s).is_some_and(|rest| rest.starts_with('/'))
}

impl Selection {
    /// Whether a resource is at a selected site (resources of no site, the Karmada API's, always
    /// are): the one site filter of plan, apply and snapshot.
    pub fn keeps(&self, r: &crate::desired::Resource) -> bool {
        self.sites.is_empty() || r.site.as_ref().is_none_or(|s| self.sites.contains(s))
    }

    /// Phases are matched case-insensitively (`b` or `B`).
    fn check_names(&self, catalog: &Catalog, g: &StepGraph, t: &Topology) -> Result<(), SelectError> {
        let phases: Vec<String> = catalog.phases.iter().map(|p| p.phase.clone()).collect();
        for p in &self.phases {
            if !phases.iter().any(|k| k.eq_ignore_ascii_case(p)) {
                return Err(unknown("phase", p, &phases));
            }
        }
        let mut steps: Vec<String> = catalog.steps().map(|s| s.id.clone()).collect();
        steps.extend(g.instances().filter(|i| i.site.is_some()).map(|i| i.key()));
        for s in &self.steps {
            if !steps.contains(s) {
                return Err(unknown("step", s, &steps));
            }
        }
        let sites: Vec<String> = t.sites.iter().map(|s| s.name.clone()).collect();
        for s in &self.sites {
            if !sites.contains(s) {
                return Err(unknown("site", s, &sites));
            }
        }
        Ok(())
    }

    /// The selected instances. `pending` says whether an instance has changes to make; a selected
    /// step whose dependency is not selected but pending is refused unless `with_deps`.
    pub fn resolve(
        &self,
        catalog: &Catalog,
        g: &StepGraph,
        t: &Topology,
        pending: impl Fn(NodeIndex) -> bool,
    ) -> Result<BTreeSet<NodeIndex>, SelectError> {
        self.check_names(catalog, g, t)?;
        let matches = |n: NodeIndex| {
            let i = &g.graph[n];
            // An explicit step (the cutover) only when `--step` names it.
            (!i.spec.explicit || self.steps.iter().any(|s| selects(s, i)))
                && (self.phases.is_empty() || self.phases.iter().any(|p| p.eq_ignore_ascii_case(&i.phase)))
                && (self.steps.is_empty() || self.steps.iter().any(|s| selects(s, i)))
                && (self.sites.is_empty() || i.site.as_ref().is_none_or(|s| self.sites.contains(s)))
        };
        let mut selected: BTreeSet<NodeIndex> = g.order.iter().copied().filter(|n| matches(*n)).collect();
        if selected.is_empty() {
            return Err(SelectError::Empty(self.describe()));
        }
        if self.with_deps {
            selected = g.with_ancestors(&selected);
            // --site still limits per-site steps to the chosen sites.
            selected
                .retain(|n| self.sites.is_empty() || g.graph[*n].site.as_ref().is_none_or(|s| self.sites.contains(s)));
            return Ok(selected);
        }
        for &n in &g.order {
            if !selected.contains(&n) {
                continue;
            }
            for d in g.dependencies(n) {
                let other_site =
                    g.graph[d].site.as_ref().is_some_and(|s| !self.sites.is_empty() && !self.sites.contains(s));
                if !selected.contains(&d) && !other_site && pending(d) {
                    return Err(SelectError::PendingUpstream { step: g.graph[n].key(), dep: g.graph[d].key() });
                }
            }
        }
        Ok(selected)
    }

    fn describe(&self) -> String {
        let mut parts = vec![];
        let mut add = |flag: &str, v: &[String]| {
            for x in v {
                parts.push(format!("{flag} {x}"));
            }
        };
        add("--phase", &self.phases);
        add("--step", &self.steps);
        add("--site", &self.sites);
        parts.join(" ")
    }
}
