//! C.3 — ArgoCD deploys the GitOps repository to the Karmada API (seed: "ArgoCD → Karmada API"):
//! ArgoCD's identity in Karmada, its cluster secret shaped from that identity's token at apply
//! time, the services' namespaces in Karmada, and the Application.

use futures::future::BoxFuture;

use super::verify::{Verdict, get, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::{Out, identity, karmada_server, namespaces};
use crate::topology::model::{ArgoCdChoice, Site};

pub struct C3;

impl Step for C3 {
    fn id(&self) -> &'static str {
        "C.3"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["C.2"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        let a = &t.federation.argocd;
        let sites: Vec<&Site> = match t.decisions.argocd {
            ArgoCdChoice::PerCluster => t.sites.iter().collect(),
            _ => t.sites.iter().filter(|s| s.name == a.site).collect(),
        };
        // ArgoCD's identity in the Karmada API: a ServiceAccount whose token the Karmada API
        // fills, shaped into ArgoCD's cluster secret at apply time.
        identity(out, None, "argocd-manager", "kube-system", "cluster-admin", "ArgoCD");
        // The services' namespaces in Karmada: ArgoCD deploys into them, the policies of C.5/C.6
        // live in them, and Karmada propagates them to the members.
        for ns in namespaces(t.services.iter()) {
            out.kube(None, o::namespace(t, &ns), "namespace ArgoCD deploys services into", None);
        }
        let server = karmada_server(t);
        for s in sites {
            out.kube(Some(&s.name), o::namespace(t, &a.namespace), "ArgoCD's namespace", None);
            let mut secret = o::secret_placeholder(t, "karmada-api", &a.namespace, "Opaque");
            secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"] = serde_json::json!("cluster");
            secret["metadata"]["annotations"] = serde_json::json!({
                o::COPY_FROM: Target::Karmada.at("kube-system/argocd-manager-token").to_string(),
                o::COPY_AS: "argocd-cluster",
                o::SERVER: server,
                o::CLUSTER_NAME: "karmada",
            });
            out.kube(Some(&s.name), secret, format!("ArgoCD cluster `karmada` at {server}"), None);
            let summary = format!("{} @ {} path {} → Karmada API", a.repo, a.revision, a.path);
            let file = Some(format!("apps/argocd/application-{}.yaml", s.name));
            out.kube(Some(&s.name), o::argocd_application(t), summary, file);
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(argocd(cx))
    }
}

/// ArgoCD's Application that deploys the repository to Karmada is Synced and Healthy.
async fn argocd(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let a = &cx.t.federation.argocd;
    let target = Target::cluster(&a.site);
    let app = id("argoproj.io/v1alpha1", "Application", "fabric-apps", Some(&a.namespace));
    let (verdict, evidence) = match get(cx.targets, &target, app).await {
        Err(e) => (Verdict::Fail, format!("{target}: {e}")),
        Ok(None) => (Verdict::Fail, format!("{target}: Application {}/fabric-apps does not exist", a.namespace)),
        Ok(Some(app)) => {
            let sync = app["status"]["sync"]["status"].as_str().unwrap_or("unknown");
            let health = app["status"]["health"]["status"].as_str().unwrap_or("unknown");
            let v = if sync == "Synced" && health == "Healthy" { Verdict::Pass } else { Verdict::Fail };
            (v, format!("{target}: fabric-apps sync {sync}, health {health}"))
        }
    };
    vec![CheckResult { step: cx.key.into(), check: "ArgoCD deploys to Karmada".into(), verdict, evidence }]
}
