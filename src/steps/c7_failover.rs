//! C.7 — failover (seed: "Policies + failover"): a ClusterTaintPolicy that taints members that
//! are not Ready, when `federation.karmada.failover` is on (Karmada's Failover feature gate and
//! its NoExecute eviction are off by default upstream; C.1's chart values turn both on, see
//! `desired::karmada::controller_manager_values`).

use futures::future::BoxFuture;
use serde_json::json;

use super::verify::{Verdict, get, id, skip};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::Out;
use crate::desired::karmada;

pub struct C7;

impl Step for C7 {
    fn id(&self) -> &'static str {
        "C.7"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["C.3"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        if !out.t.federation.karmada.failover {
            return;
        }
        let file = Some("apps/karmada/failover/cluster-taint-policy.yaml".to_string());
        out.kube(None, karmada::cluster_taint_policy(out.t), "NoExecute taint on members that are not Ready", file);
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(async move {
            if !cx.t.federation.karmada.failover {
                return skip(cx.key);
            }
            vec![gate(cx).await, taint_policy(cx).await]
        })
    }
}

/// The Failover feature gate and `--enable-no-execute-taint-eviction` in the Karmada chart's
/// values (without the flag a NoExecute taint evicts nothing: karmada-io/karmada
/// `cmd/controller-manager/app/options/failover.go`). Whether workloads move is the runbook's
/// drill (it takes a member down), not something a read can show.
async fn gate(cx: &VerifyCx<'_>) -> CheckResult {
    let (host, _) = crate::desired::karmada_host(cx.t);
    let chart = id("helm.cattle.io/v1", "HelmChart", "karmada", Some("kube-system"));
    let (verdict, evidence) = match get(cx.targets, &host, chart).await {
        Err(e) => (Verdict::Fail, format!("{host}: {e}")),
        Ok(None) => (Verdict::Fail, format!("{host}: HelmChart kube-system/karmada does not exist")),
        Ok(Some(c)) => {
            let values = c["spec"]["valuesContent"].as_str().unwrap_or_default();
            let on = serde_saphyr::from_str::<crate::topology::tree::Node>(values)
                .map(|n| {
                    let cm = &n.to_json()["controllerManager"];
                    cm["featureGates"]["Failover"] == json!(true)
                        && cm["extraCommandArgs"]["enable-no-execute-taint-eviction"] == json!(true)
                })
                .unwrap_or(false);
            if on {
                (Verdict::Pass, format!("{host}: the Karmada chart turns the Failover gate and NoExecute eviction on"))
            } else {
                (
                    Verdict::Fail,
                    format!("{host}: the Karmada chart does not turn the Failover gate and NoExecute eviction on"),
                )
            }
        }
    };
    CheckResult { step: cx.key.into(), check: "Failover feature gate".into(), verdict, evidence }
}

/// The taint policy for members that are not Ready, in Karmada.
async fn taint_policy(cx: &VerifyCx<'_>) -> CheckResult {
    let policy = id(karmada::POLICY_API, "ClusterTaintPolicy", "fabric-not-ready", None);
    let (verdict, evidence) = match get(cx.targets, &Target::Karmada, policy).await {
        Err(e) => (Verdict::Fail, format!("karmada: {e}")),
        Ok(None) => (Verdict::Fail, "karmada: ClusterTaintPolicy fabric-not-ready does not exist".to_string()),
        Ok(Some(p)) => {
            let n = p["spec"]["targetClusters"]["clusterNames"].as_array().map_or(0, Vec::len);
            (Verdict::Pass, format!("karmada: ClusterTaintPolicy fabric-not-ready covers {n} member(s)"))
        }
    };
    CheckResult { step: cx.key.into(), check: "NoExecute taint on members not Ready".into(), verdict, evidence }
}
