//! Plan's check of the topology's chart pins against where each chart is published (online
//! plans and apply only): a version that is not there is refused at its `versions:` line, before
//! anything is changed; an index that cannot be read is a warning that names it (the pin is then
//! not checked).

use std::collections::{BTreeMap, BTreeSet};

use super::Workspace;
use crate::desired::charts::pins;
use crate::plan::model::{Action, Plan};
use crate::providers::charts::{IndexError, Indexes, listed, published, versions_url};
use crate::topology::problem::{Diag, Problem};
use crate::topology::tree::Path;

/// The environment variable that says where the indexes are read: unset, the public registries;
/// `off`, nowhere (the pins are not checked, and plan says so); else a loopback base standing
/// for every registry (tests).
pub const INDEXES_ENV: &str = "FABRIC_CHART_INDEXES";

/// Where the indexes are read from, as [`INDEXES_ENV`] says (None: not checked).
pub fn indexes_from_env() -> Option<Indexes> {
    match std::env::var(INDEXES_ENV).ok().as_deref() {
        None | Some("") => Some(Indexes::Public),
        Some("off") => None,
        Some(base) => Some(Indexes::Mirror(base.to_string())),
    }
}

/// The names of the HelmCharts a plan creates or changes: the charts whose pins apply would
/// install (one already installed as pinned is not fetched again).
pub fn planned_helm_charts(plan: &Plan) -> BTreeSet<String> {
    let changes = plan.steps.iter().flat_map(|s| &s.changes).filter(|c| c.action != Action::NoOp);
    changes.filter_map(|c| c.address.path.rsplit_once("/HelmChart/").map(|(_, name)| name.to_string())).collect()
}

/// The pins of the HelmCharts named in `helm_charts` checked against their charts' published
/// versions.
pub fn check_pins(ws: &Workspace, at: &Indexes, helm_charts: &BTreeSet<String>) -> Vec<Diag> {
    let t = ws.topology();
    let mut read: BTreeMap<String, Result<Vec<String>, IndexError>> = BTreeMap::new();
    let mut out = Vec::new();
    for pin in pins(t).into_iter().filter(|p| helm_charts.contains(p.helm_chart)) {
        let url = versions_url(&pin.source, at);
        let versions = read.entry(url.clone()).or_insert_with(|| published(&pin.source, at));
        let path = Path::root().key("versions").key(pin.key);
        let problem = match versions {
            Ok(v) if listed(v, &pin.version) => continue,
            Ok(v) => {
                let mut near: Vec<&String> = v.iter().filter(|x| same_minor(x, &pin.version)).collect();
                near.truncate(8);
                let near = near.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
                Problem::error(
                    "plan::chart-version",
                    path,
                    format!("{} {} is not published at {url}", pin.source.name(), pin.version),
                )
                .label("not in the chart's index")
                .help(if near.is_empty() {
                    "pin a version the index lists (K3s's install Job would fail on this one)".to_string()
                } else {
                    format!("pin a version the index lists, such as: {near}")
                })
            }
            Err(why) => Problem::warning(
                "plan::chart-index",
                path,
                format!("{} {} was not checked: {why}", pin.source.name(), pin.version),
            )
            .label("not checked"),
        };
        out.push(ws.loaded.diag(problem));
    }
    out
}

/// Same `MAJOR.MINOR` (a leading `v` aside).
fn same_minor(a: &str, b: &str) -> bool {
    let mm = |v: &str| v.trim_start_matches('v').splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
    mm(a) == mm(b)
}
