//! A.2 — Cilium replaces Flannel on a running cluster (seed: "K3s Franca com Cilium", the
//! high-risk step): the same K3s config and Cilium chart as A.1, on a cluster that exists.

use futures::future::BoxFuture;

use super::a1_new_cluster::{Install, cilium_healthy, k3s_with_cilium};
use super::{CheckResult, Step, VerifyCx};
use crate::catalog::Instance;
use crate::desired::Out;

pub struct A2;

impl Step for A2 {
    fn id(&self) -> &'static str {
        "A.2"
    }

    fn desired(&self, inst: &Instance, out: &mut Out<'_>) {
        k3s_with_cilium(inst, out, Install::Nothing);
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(cilium_healthy(cx))
    }
}
