//! A.3 — the site's VMs join the Cilium mesh (seed: "VMs na malha Cilium"), as `mesh.join` says.

use futures::future::BoxFuture;

use super::join::{join_all, joined};
use super::{CheckResult, Step, VerifyCx};
use crate::catalog::Instance;
use crate::desired::Out;
use crate::topology::model::WorkloadKind;

pub struct A3;

impl Step for A3 {
    fn id(&self) -> &'static str {
        "A.3"
    }

    fn needs_any(&self) -> &'static [&'static str] {
        &["A.1", "A.2"]
    }

    fn desired(&self, inst: &Instance, out: &mut Out<'_>) {
        join_all(inst, out, WorkloadKind::Vm);
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(joined(cx, WorkloadKind::Vm))
    }
}
