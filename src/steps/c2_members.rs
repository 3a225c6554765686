//! C.2 — the sites' clusters registered in Karmada (seed: "Registrar clusters"), in push mode:
//! an identity for Karmada in each member, whose token becomes Karmada's credentials for it.

use futures::future::BoxFuture;

use super::verify::{conditions, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::karmada;
use crate::desired::{Out, identity, members};

pub struct C2;

impl Step for C2 {
    fn id(&self) -> &'static str {
        "C.2"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["C.1"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        out.kube(None, o::namespace(t, "karmada-cluster"), "namespace of the members' credentials", None);
        for s in members(t) {
            let site = Some(s.name.as_str());
            out.kube(site, o::namespace(t, "karmada-cluster"), "namespace of Karmada's identity", None);
            let who = "Karmada (push mode)";
            identity(out, site, "karmada-member", "karmada-cluster", "cluster-admin", who);
            // Karmada's credentials for the member: copied at apply time from the member's
            // token (never rendered, shown or journaled); the annotations say from where.
            let mut creds = o::secret_placeholder(t, &s.cluster.name, "karmada-cluster", "Opaque");
            creds["metadata"]["annotations"] = serde_json::json!({
                o::COPY_FROM: Target::cluster(&s.name).at("karmada-cluster/karmada-member-token").to_string(),
                o::COPY_KEYS: "token=token,ca.crt=caBundle",
            });
            out.kube(None, creds, "member credentials (from the token)", None);
            let summary =
                format!("member `{}` at https://{}:{}", s.cluster.name, s.cluster.api_address, s.cluster.api_port.0);
            out.kube(None, karmada::karmada_cluster(t, s), summary, Some(format!("apps/karmada/clusters/{}.yaml", s.name)));
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        let objs = members(cx.t)
            .iter()
            .map(|s| (Target::Karmada, id(karmada::CLUSTER_API, "Cluster", &s.cluster.name, None)))
            .collect();
        Box::pin(conditions(cx.targets, cx.key, "member Ready", objs, "Ready"))
    }
}
