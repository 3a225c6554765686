//! A.4 — the site's bare-metal hosts (Proxmox nodes) join the mesh (seed: "Nodes Proxmox na
//! malha"), as `mesh.join` says.

use futures::future::BoxFuture;

use super::join::{join_all, joined};
use super::{CheckResult, Step, VerifyCx};
use crate::catalog::Instance;
use crate::desired::Out;
use crate::topology::model::WorkloadKind;

pub struct A4;

impl Step for A4 {
    fn id(&self) -> &'static str {
        "A.4"
    }

    fn needs_any(&self) -> &'static [&'static str] {
        &["A.1", "A.2"]
    }

    fn desired(&self, inst: &Instance, out: &mut Out<'_>) {
        join_all(inst, out, WorkloadKind::BareMetal);
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(joined(cx, WorkloadKind::BareMetal))
    }
}
