//! The step catalog as data: the phase files under `phases/`, embedded at build time.
//!
//! A catalog names steps, their dependencies on other steps, the topology condition under which a
//! step exists at a site (`when`) and the seed's open decisions it needs. What a step makes, its
//! check and its verify are code, one module per step (`steps/`). Checking a catalog (every reference resolves, no cycle) happens
//! here, before any topology is involved, so a broken catalog is reported by step name.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use serde::Deserialize;

/// The phase files compiled into the binary, in phase order.
pub const EMBEDDED: &[(&str, &str)] = &[
    ("phases/a-cilium.yaml", include_str!("../../phases/a-cilium.yaml")),
    ("phases/b-connectivity.yaml", include_str!("../../phases/b-connectivity.yaml")),
    ("phases/c-karmada.yaml", include_str!("../../phases/c-karmada.yaml")),
    ("phases/d-multikueue.yaml", include_str!("../../phases/d-multikueue.yaml")),
    ("phases/g-gateway.yaml", include_str!("../../phases/g-gateway.yaml")),
];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseFile {
    pub phase: String,
    pub title: String,
    pub seed_title: String,
    pub steps: Vec<StepSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    Low,
    Medium,
    High,
}

/// Whether a step runs once for the fabric or once per site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Fabric,
    Site,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    pub id: String,
    pub title: String,
    pub seed_title: String,
    pub risk: Risk,
    pub scope: Scope,
    /// Condition (see [`SELECTORS`]) under which the step exists (at a site, or at all).
    #[serde(default)]
    pub when: Option<String>,
    /// Something outside fabric that must hold first (from the seed's "Pre-requisito").
    #[serde(default)]
    pub prerequisite: Option<String>,
    /// Steps that must be applied first: every instance, or the same site's when both are per site.
    #[serde(default)]
    pub needs: Vec<String>,
    /// At least one of these, at the same site (the seed's "A.1 ou A.2").
    #[serde(default)]
    pub needs_any: Vec<String>,
    /// Open decisions (keys of `decisions:` in the topology) the step cannot run without.
    #[serde(default)]
    pub decisions: Vec<String>,
    /// The seed's validation for this step, run by `fabric verify`.
    #[serde(default)]
    pub check: Option<String>,
    /// One instance per node after the site's, each needing the one before, when the site's
    /// `cluster_migration` is this choice (`in-place`: every node, control plane first;
    /// `new-cluster`: the nodes that move, not the new servers).
    #[serde(default)]
    pub per_node: Option<String>,
    /// Runs only when `--step` names it (a cutover the operator chooses the moment of); plan and
    /// apply leave it out of a phase or a whole run.
    #[serde(default)]
    pub explicit: bool,
}

/// Conditions a step's `when` may name; `instantiate.rs` evaluates them.
pub const SELECTORS: &[&str] = &[
    "new-cluster",
    "existing-cluster",
    "replaced-cluster",
    "has-vms",
    "has-bare-metal",
    "multikueue",
    "gateway",
    "gpu-sharing",
    "multi-site",
];

/// Decision keys a step may need; they are the field names of the topology's `decisions`.
pub const DECISIONS: &[&str] = &["cluster_migration", "karmada_host", "argocd", "public_address", "drbd_cross_site"];

/// A checked catalog.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub phases: Vec<PhaseFile>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CatalogError {
    #[error("catalog file {file}: {message}")]
    Parse { file: String, message: String },
    #[error("step {step} appears twice in the catalog")]
    DuplicateStep { step: String },
    #[error("step {step} depends on {missing}, which is not in the catalog")]
    Dangling { step: String, missing: String },
    #[error("the catalog has a dependency cycle: {}", .steps.join(" → "))]
    Cycle { steps: Vec<String> },
    #[error("step {step}: unknown {what} `{name}` (known: {known})")]
    Unknown { step: String, what: &'static str, name: String, known: String },
}

impl Catalog {
    /// The catalog compiled into this binary.
    pub fn embedded() -> Result<Catalog, CatalogError> {
        Catalog::from_sources(EMBEDDED)
    }

    pub fn from_sources(sources: &[(&str, &str)]) -> Result<Catalog, CatalogError> {
        let mut phases = Vec::new();
        for (file, text) in sources {
            let p: PhaseFile = serde_saphyr::from_str(text)
                .map_err(|e| CatalogError::Parse { file: file.to_string(), message: e.to_string() })?;
            phases.push(p);
        }
        let c = Catalog { phases };
        c.check()?;
        Ok(c)
    }

    pub fn steps(&self) -> impl Iterator<Item = &StepSpec> {
        self.phases.iter().flat_map(|p| p.steps.iter())
    }

    pub fn step(&self, id: &str) -> Option<&StepSpec> {
        self.steps().find(|s| s.id == id)
    }

    pub fn phase_of(&self, id: &str) -> Option<&PhaseFile> {
        self.phases.iter().find(|p| p.steps.iter().any(|s| s.id == id))
    }

    pub fn check(&self) -> Result<(), CatalogError> {
        let mut ids = BTreeSet::new();
        for s in self.steps() {
            if !ids.insert(s.id.as_str()) {
                return Err(CatalogError::DuplicateStep { step: s.id.clone() });
            }
        }
        for s in self.steps() {
            for d in s.needs.iter().chain(&s.needs_any) {
                if !ids.contains(d.as_str()) {
                    return Err(CatalogError::Dangling { step: s.id.clone(), missing: d.clone() });
                }
            }
            let unknown = |what, name: &str, known: &[&str]| CatalogError::Unknown {
                step: s.id.clone(),
                what,
                name: name.to_string(),
                known: known.join(", "),
            };
            if let Some(w) = &s.when
                && !SELECTORS.contains(&w.as_str())
            {
                return Err(unknown("condition", w, SELECTORS));
            }
            for d in &s.decisions {
                if !DECISIONS.contains(&d.as_str()) {
                    return Err(unknown("decision", d, DECISIONS));
                }
            }
        }
        // Cycles: strongly connected components of more than one step, or a step needing itself.
        let mut g = DiGraph::<&str, ()>::new();
        let index: BTreeMap<&str, _> = self.steps().map(|s| (s.id.as_str(), g.add_node(s.id.as_str()))).collect();
        for s in self.steps() {
            for d in s.needs.iter().chain(&s.needs_any) {
                g.add_edge(index[d.as_str()], index[s.id.as_str()], ());
            }
        }
        for scc in tarjan_scc(&g) {
            let self_loop = scc.len() == 1 && g.contains_edge(scc[0], scc[0]);
            if scc.len() > 1 || self_loop {
                let mut steps: Vec<String> = scc.iter().map(|n| g[*n].to_string()).collect();
                steps.sort();
                return Err(CatalogError::Cycle { steps });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINI: &str = "phase: X\ntitle: t\nseed_title: t\nsteps:\n";

    fn step(id: &str, needs: &str) -> String {
        format!("  - {{id: {id}, title: t, seed_title: t, risk: low, scope: fabric, needs: [{needs}]}}\n")
    }

    #[test]
    fn embedded_catalog_is_valid_and_complete() {
        let c = Catalog::embedded().unwrap();
        let ids: Vec<&str> = c.steps().map(|s| s.id.as_str()).collect();
        for want in [
            "A.1", "A.2", "A.3", "A.4", "B.1", "B.2", "B.3", "C.1", "C.2", "C.3", "C.4", "C.5", "C.6", "C.7", "D.1",
            "D.2", "D.3", "D.4",
        ] {
            assert!(ids.contains(&want), "{want} missing from {ids:?}");
        }
    }

    #[test]
    fn seed_table_dependencies_and_risks() {
        let c = Catalog::embedded().unwrap();
        let s = |id: &str| c.step(id).unwrap();
        assert_eq!(s("A.2").risk, Risk::High);
        assert_eq!(s("A.1").risk, Risk::Low);
        assert_eq!(s("B.2").risk, Risk::Medium);
        assert_eq!(s("A.3").needs_any, ["A.1", "A.2"]);
        assert_eq!(s("B.2").needs, ["A.1", "A.2", "B.1"]);
        assert_eq!(s("C.1").needs, ["B.2"]);
        for c4 in ["C.4", "C.5", "C.6", "C.7"] {
            assert_eq!(s(c4).needs, ["C.3"], "{c4}");
        }
        for d in ["D.2", "D.3", "D.4"] {
            assert_eq!(s(d).needs, ["C.1", "D.1"], "{d}");
        }
    }

    #[test]
    fn dangling_dependency_is_named() {
        let text = format!("{MINI}{}", step("X.1", "X.9"));
        let err = Catalog::from_sources(&[("x.yaml", &text)]).unwrap_err();
        assert_eq!(err, CatalogError::Dangling { step: "X.1".into(), missing: "X.9".into() });
        assert_eq!(err.to_string(), "step X.1 depends on X.9, which is not in the catalog");
    }

    #[test]
    fn cycle_is_named() {
        let text = format!("{MINI}{}{}{}", step("X.1", "X.3"), step("X.2", "X.1"), step("X.3", "X.2"));
        let err = Catalog::from_sources(&[("x.yaml", &text)]).unwrap_err();
        assert_eq!(err.to_string(), "the catalog has a dependency cycle: X.1 → X.2 → X.3");
        let text = format!("{MINI}{}", step("X.1", "X.1"));
        assert!(matches!(Catalog::from_sources(&[("x.yaml", &text)]), Err(CatalogError::Cycle { .. })));
    }

    #[test]
    fn unknown_names_are_refused() {
        let text = format!("{MINI}  - {{id: X.1, title: t, seed_title: t, risk: low, scope: site, when: has-gpus}}\n");
        let err = Catalog::from_sources(&[("x.yaml", &text)]).unwrap_err();
        assert!(err.to_string().contains("unknown condition `has-gpus`"), "{err}");
    }
}
