//! G.1 — the TensorZero gateway (no step in the seed, which describes it in its own section):
//! its config, its Deployment, its global Service in every cluster, and per-site global
//! services for the vLLM backends it routes to.

use futures::future::BoxFuture;
use serde_json::Value;

use super::verify::{Verdict, id, rolled_out};
use super::{CheckResult, Step, VerifyCx};
use crate::addr::Target;
use crate::catalog::Instance;
use crate::desired::objects as o;
use crate::desired::tensorzero;
use crate::desired::{Out, cilium};
use crate::topology::model::Gateway;

pub struct G1;

impl Step for G1 {
    fn id(&self) -> &'static str {
        "G.1"
    }

    fn needs(&self) -> &'static [&'static str] {
        &["B.3", "C.5"]
    }

    fn desired(&self, _inst: &Instance, out: &mut Out<'_>) {
        let t = out.t;
        let Some(g) = &t.gateway else { return };
        let toml = tensorzero::tensorzero_toml(t, g);
        out.extra("apps/tensorzero/tensorzero.toml".into(), toml.clone());
        let site = Some(g.site.as_str());
        let file = Some("apps/tensorzero/gateway.yaml".to_string());
        out.kube(site, o::namespace(t, "tensorzero"), "gateway namespace", file.clone());
        let models: Vec<&str> = g.models.iter().map(|m| m.name.as_str()).collect();
        let cm = o::config_map(t, "tensorzero-config", "tensorzero", "tensorzero.toml", &toml);
        out.kube(site, cm, format!("{} model(s): {}", models.len(), models.join(", ")), file.clone());
        let summary = format!("TensorZero {}", t.versions.tensorzero.as_deref().unwrap_or("(unpinned)"));
        out.kube(site, tensorzero::gateway_deployment(t, g), summary, file.clone());
        // Callers at every site reach the gateway by one name: a global Service in each cluster
        // (with its namespace where the gateway does not run).
        for s in &t.sites {
            if s.name != g.site {
                out.kube(Some(&s.name), o::namespace(t, "tensorzero"), "gateway namespace", file.clone());
            }
            let summary = format!("tensorzero-gateway:{} (global), for callers at {}", tensorzero::GATEWAY_PORT, s.name);
            out.kube(Some(&s.name), tensorzero::gateway_service(t), summary, file.clone());
        }
        gateway_site_services(out, g);
    }

    fn verify<'a>(&'a self, cx: &'a VerifyCx<'a>) -> BoxFuture<'a, Vec<CheckResult>> {
        Box::pin(async move {
            let Some(g) = &cx.t.gateway else { return vec![] };
            let target = Target::cluster(&g.site);
            let oid = id("apps/v1", "Deployment", "tensorzero-gateway", Some(tensorzero::GATEWAY_NAMESPACE));
            let mut out = vec![rolled_out(cx.targets, cx.key, &target, "gateway running", oid).await];
            // Each site's backend through the gateway: one inference per (model, site), pinned to
            // the site's variant. The cloud fallback is never called: verify reaches nothing but
            // the topology's clusters.
            for m in &g.models {
                for site in tensorzero::gateway_sites(m) {
                    out.push(route_answers(cx, &target, &m.name, site).await);
                }
                if let Some(c) = &m.cloud {
                    out.push(CheckResult {
                        step: cx.key.into(),
                        check: format!("route {}/{}", m.name, crate::topology::gateway::CLOUD_VARIANT),
                        verdict: Verdict::Skip,
                        evidence: format!(
                            "not called: the cloud fallback ({} {}) is outside the fabric, and a call would spend its API key",
                            c.provider.tensorzero_type(),
                            c.model
                        ),
                    });
                }
            }
            out
        })
    }
}

/// Per-site global services the gateway addresses (`<service>-<site>`), in every cluster that
/// runs a backend and in the gateway's.
fn gateway_site_services(o: &mut Out<'_>, g: &Gateway) {
    let t = o.t;
    let mut done: Vec<(String, String)> = vec![];
    for m in &g.models {
        let Some(svc) = t.services.iter().find(|s| s.name == m.service) else { continue };
        let sites: Vec<&str> =
            m.routes.iter().map(|r| r.site.as_str()).chain(m.fallback.iter().map(String::as_str)).collect();
        for site in sites {
            let name = tensorzero::site_service(&svc.name, site);
            for cluster_site in [site, g.site.as_str()] {
                if done.contains(&(cluster_site.to_string(), name.clone())) {
                    continue;
                }
                done.push((cluster_site.to_string(), name.clone()));
                let mut obj = o::object(t, "v1", "Service", &name, Some(&svc.namespace));
                obj["metadata"] = serde_json::json!({
                    "name": name, "namespace": svc.namespace,
                    "labels": obj["metadata"]["labels"].clone(),
                    "annotations": { cilium::GLOBAL_ANNOTATION: "true", cilium::SHARED_ANNOTATION: (cluster_site == site).to_string() },
                });
                obj.insert(
                    "spec".into(),
                    serde_json::json!({ "selector": { "app": svc.name, "fabric.io/site": site }, "ports": [{ "port": svc.port.0 }] }),
                );
                let summary = format!("{} backends at {site}, for the gateway", svc.name);
                o.kube(
                    Some(cluster_site),
                    Value::Object(obj),
                    summary,
                    Some("apps/tensorzero/site-services.yaml".into()),
                );
            }
        }
    }
}

/// The inference verify sends for `function`'s `variant` (TensorZero's `POST /inference`:
/// `variant_name` pins the variant, bypassing the A/B sampling; `dryrun` stores nothing;
/// `max_tokens` keeps the reply to a word).
pub fn route_probe(function: &str, variant: &str) -> Value {
    serde_json::json!({
        "function_name": function,
        "variant_name": variant,
        "input": { "messages": [{ "role": "user", "content": "fabric verify: answer with one word" }] },
        "params": { "chat_completion": { "max_tokens": 8 } },
        "dryrun": true,
    })
}

/// The path of the gateway's `/inference` through the API server's service proxy (the
/// `services/proxy` subresource, `POST` among its methods: kubernetes/kubernetes
/// pkg/registry/core/service/proxy.go), so verify reaches only the cluster's API server.
pub fn inference_path() -> String {
    format!("/api/v1/namespaces/{}/services/tensorzero-gateway:{}/proxy/inference", tensorzero::GATEWAY_NAMESPACE, tensorzero::GATEWAY_PORT)
}

/// One route answers: an inference pinned to `variant` comes back from that variant.
async fn route_answers(cx: &VerifyCx<'_>, target: &Target, function: &str, variant: &str) -> CheckResult {
    let check = format!("route {function}/{variant}");
    let result = |verdict, evidence| CheckResult { step: cx.key.into(), check: check.clone(), verdict, evidence };
    let Some(access) = cx.targets.kube.get(target) else {
        return result(Verdict::Fail, format!("no kubeconfig for {target}"));
    };
    // No retries: a 503 (no gateway pod ready) is this check's answer, not something to wait out.
    let c = match crate::providers::kube::client_once(target, access).await {
        Ok(c) => c,
        Err(e) => return result(Verdict::Fail, format!("{target}: {e}")),
    };
    let body = serde_json::to_vec(&route_probe(function, variant)).expect("json");
    let req = match http::Request::post(inference_path()).header("Content-Type", "application/json").body(body) {
        Ok(r) => r,
        Err(e) => return result(Verdict::Fail, e.to_string()),
    };
    // The raw answer: an error from the gateway is its own JSON, not a Kubernetes Status.
    let answered = match c.send(req.map(kube::client::Body::from)).await {
        Ok(res) => {
            let status = res.status();
            http_body_util::BodyExt::collect(res.into_body())
                .await
                .map(|b| (status, String::from_utf8_lossy(&b.to_bytes()).into_owned()))
                .map_err(|e| e.to_string())
        }
        Err(e) => Err(crate::providers::kube::describe(&e)),
    };
    let text = match answered {
        Ok((status, text)) if status.is_success() => text,
        Ok((status, text)) => {
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let why = v["message"].as_str().or(v["error"].as_str()).map(str::to_string).unwrap_or(text);
            let why: String = why.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(200).collect();
            return result(Verdict::Fail, format!("{target}: the gateway did not answer for `{variant}`: {status}: {why}"));
        }
        Err(why) => return result(Verdict::Fail, format!("{target}: the gateway did not answer for `{variant}`: {why}")),
    };
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let served_by = answer["variant_name"].as_str().unwrap_or_default();
    if served_by != variant {
        let shown: String = text.chars().take(200).collect();
        return result(Verdict::Fail, format!("{target}: asked for variant `{variant}`, got: {shown}"));
    }
    let tokens = answer["usage"]["output_tokens"].as_u64().map(|n| format!(", {n} output token(s)")).unwrap_or_default();
    result(Verdict::Pass, format!("{target}: `{variant}` answered through tensorzero-gateway{tokens}"))
}
