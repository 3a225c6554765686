//! The planfile: a plan written by `fabric plan --out` and read back whole by `fabric apply
//! PLANFILE` (terraform's `internal/plans/planfile`): the same type both ways, so apply works
//! on exactly the selection, topology digest and observation fingerprint the plan recorded.

use std::path::{Path, PathBuf};

use super::model::{FORMAT_VERSION, Plan};
use super::view;

/// Why a planfile cannot be used. Each message says all (the cause is not a `source`, so it is
/// printed once, not again as a chain).
#[derive(Debug, thiserror::Error)]
pub enum PlanfileError {
    #[error("cannot read {}: {cause}", path.display())]
    Read { path: PathBuf, cause: std::io::Error },
    #[error("{} is not a plan: {cause}", path.display())]
    Parse { path: PathBuf, cause: serde_json::Error },
    #[error("{} is a plan of format {found}; this fabric reads {FORMAT_VERSION}", path.display())]
    Version { path: PathBuf, found: String },
    #[error("cannot write {}: {cause}", path.display())]
    Write { path: PathBuf, cause: std::io::Error },
}

/// Writes `plan` as JSON (the same document `plan --format json` prints).
pub fn write(path: &Path, plan: &Plan) -> Result<(), PlanfileError> {
    std::fs::write(path, view::json(plan, view::Unchanged::Shown))
        .map_err(|cause| PlanfileError::Write { path: path.into(), cause })
}

/// Reads a planfile back into a [`Plan`].
pub fn read(path: &Path) -> Result<Plan, PlanfileError> {
    let text = std::fs::read_to_string(path).map_err(|cause| PlanfileError::Read { path: path.into(), cause })?;
    // The version first, so a future format is named as such rather than as a parse error.
    let version = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["format_version"].as_str().map(String::from));
    // The same major version reads: a minor one only adds fields.
    let major = |v: &str| v.split('.').next().unwrap_or_default().to_string();
    if let Some(found) = version.filter(|v| major(v) != major(FORMAT_VERSION)) {
        return Err(PlanfileError::Version { path: path.into(), found });
    }
    serde_json::from_str(&text).map_err(|cause| PlanfileError::Parse { path: path.into(), cause })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::model::{Action, Change, Mode, StepPlan, Unreachable};
    use crate::plan::select::Selection;

    fn plan() -> Plan {
        let mut p = Plan {
            format_version: FORMAT_VERSION.into(),
            fabric: "f".into(),
            topology_file: "t.yaml".into(),
            topology_digest: "abc".into(),
            fabric_version: crate::plan::model::FABRIC_VERSION.into(),
            topology_path: Some("/work/t.yaml".into()),
            selection: Selection { phases: vec!["B".into()], steps: vec![], sites: vec!["sp".into()], with_deps: true },
            mode: Mode::Live { fingerprint: "fp".into() },
            steps: vec![StepPlan::tunnel(vec![Change {
                address: "router.sp/wireguard:wg0".into(),
                action: Action::Update,
                provider: crate::desired::ProviderKind::Wireguard,
                target: "router.sp".into(),
                summary: "wg0".into(),
                sensitive: false,
                diff: Some("-a\n+b\n".into()),
                refused: None,
                left_to_controllers: vec![],
                upgrade: vec![],
            }])],
            unreachable: vec![Unreachable { target: "router.franca".into(), reason: "down".into() }],
            held: vec![],
            warnings: vec![],
            summary: Default::default(),
        };
        p.summarize();
        p
    }

    #[test]
    fn a_plan_reads_back_as_the_plan_written() {
        let dir = std::env::temp_dir().join(format!("fabric-planfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.plan");
        let p = plan();
        write(&path, &p).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(view::json(&back, view::Unchanged::Shown), view::json(&p, view::Unchanged::Shown));
        assert_eq!(back.selection, p.selection);
        assert_eq!(back.mode, p.mode);
        assert_eq!(back.summary, p.summary);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn another_format_or_no_plan_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("fabric-planfile-v-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.plan");
        let text = view::json(&plan(), view::Unchanged::Shown)
            .replace(&format!("\"format_version\": \"{FORMAT_VERSION}\""), "\"format_version\": \"9.0\"");
        std::fs::write(&path, text).unwrap();
        let e = read(&path).unwrap_err();
        assert!(e.to_string().contains("format 9.0"), "{e}");
        std::fs::write(&path, "{\"x\": 1}").unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("is not a plan"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
