//! C.3 — ArgoCD deploys the GitOps repository's services (seed: "ArgoCD → Karmada API"): ArgoCD
//! itself (the argo-cd chart), and with option A its identity in Karmada, its cluster secret
//! shaped from that identity's token at apply time, the services' namespaces in Karmada and the
//! Application syncing to Karmada; with option B an Application per cluster syncing the site's
//! folder into that cluster. ArgoCD syncs only `federation.argocd.path`: what fabric applies is
//! never in it (docs/design.md, "Who owns what").

use futures::future::BoxFuture;

use super::verify::{Verdict, get, id};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::argocd;
use crate::desired::karmada::karmada_server;
use crate::desired::{Out, identity, namespaces};
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
        let per_cluster = t.decisions.argocd == ArgoCdChoice::PerCluster;
        let sites: Vec<&Site> =
            if per_cluster { t.sites.iter().collect() } else { t.sites.iter().filter(|s| s.name == a.site).collect() };
        if !per_cluster {
            // ArgoCD's identity in the Karmada API: a ServiceAccount whose token the Karmada API
            // fills, shaped into ArgoCD's cluster secret at apply time.
            identity(out, None, "argocd-manager", "kube-system", "cluster-admin", "ArgoCD");
            // The services' namespaces in Karmada: ArgoCD deploys into them, the policies of
            // C.5/C.6 live in them, and Karmada propagates them to the members.
            for ns in namespaces(t.services.iter()) {
                out.kube(None, o::namespace(t, &ns), "namespace ArgoCD deploys services into", None);
            }
        }
        for s in sites {
            let site = Some(s.name.as_str());
            out.kube(site, o::namespace(t, &a.namespace), "ArgoCD's namespace", None);
            if a.install {
                let version = t.versions.argocd.as_deref().unwrap_or("(unpinned)");
                let file = Some(format!("apps/argocd/helmchart-{}.yaml", s.name));
                out.kube(site, argocd::argocd_helm_chart(t), format!("ArgoCD (argo-cd {version})"), file);
            }
            let file = Some(format!("apps/argocd/application-{}.yaml", s.name));
            if per_cluster {
                // Option B: this cluster's ArgoCD syncs the site's folder into the cluster itself,
                // so a partition leaves each site able to deploy.
                let app = argocd::argocd_application(t, argocd::ArgoDestination::InCluster { site: &s.name });
                let summary = format!("{} @ {} path {}/{} → this cluster", a.repo, a.revision, a.path, s.name);
                out.kube(site, app, summary, file);
                continue;
            }
            let server = karmada_server(t);
            let from = Target::Karmada.at("kube-system/argocd-manager-token").to_string();
            let secret = argocd::karmada_cluster_secret(t, &a.namespace, from, &server);
            out.kube(site, secret, format!("ArgoCD cluster `karmada` at {server}"), None);
            let summary = format!("{} @ {} path {} → Karmada API", a.repo, a.revision, a.path);
            out.kube(site, argocd::argocd_application(t, argocd::ArgoDestination::Karmada), summary, file);
        }
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(argocd(cx))
    }
}

/// Each ArgoCD Application C.3 made (Karmada's, or each cluster's with option B) is Synced and
/// Healthy.
async fn argocd(cx: &VerifyCx<'_>) -> Vec<CheckResult> {
    let a = &cx.t.federation.argocd;
    let per_cluster = cx.t.decisions.argocd == ArgoCdChoice::PerCluster;
    let sites: Vec<&str> = if per_cluster { cx.t.sites.iter().map(|s| s.name.as_str()).collect() } else { vec![&a.site] };
    let check = if per_cluster { "ArgoCD deploys to its cluster" } else { "ArgoCD deploys to Karmada" };
    let mut out = Vec::new();
    for site in sites {
        let target = Target::cluster(site);
        let app = id(argocd::APPLICATION_API, "Application", "fabric-apps", Some(&a.namespace));
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
        out.push(CheckResult { step: cx.key.into(), check: check.into(), verdict, evidence });
    }
    out
}
