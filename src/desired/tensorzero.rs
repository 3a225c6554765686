//! TensorZero's objects (G.1): the gateway's `tensorzero.toml`, Deployment, environment and
//! Service, and the per-site Services it addresses backends by.
//!
//! The upstream facts they rely on, and where upstream decides them (tensorzero/tensorzero):
//! - The gateway listens on port [`GATEWAY_PORT`], the default port of `gateway.bind_address`.
//! - An `api_key_location = "env::…"` key is read when the config loads, and the gateway refuses
//!   to start without it ([`cloud_key_env`]).
//! - A rate-limit backend's URL is read from `TENSORZERO_POSTGRES_URL` or
//!   `TENSORZERO_VALKEY_URL` (configuration reference, `[postgres]` and `[rate_limiting]`;
//!   `docs/deployment/valkey-redis.mdx`).
//! - With Postgres the gateway refuses to start until its migrations are applied
//!   (`tensorzero-core/src/db/postgres/mod.rs`, `check_migrations`); `--run-postgres-migrations`
//!   applies them and exits (`crates/gateway/src/cli.rs`, `main.rs`).
//! - A failed variant is dropped and the rest sampled again: by weight among the remaining
//!   `candidate_variants`, then `fallback_variants` in order (`tensorzero-core/src/endpoints/
//!   inference.rs` `inference`; `experimentation/static_experimentation.rs` `sample_weighted`).
//!   So the cloud model, last of the fallbacks, is called only once every site failed
//!   (`tests/tensorzero_loader.rs` shows it with the real gateway).
//! - The `openai` and `anthropic` providers take an optional `api_base`, to which they append
//!   `chat/completions` or `/messages` (`tensorzero-core/src/model.rs`
//!   `UninitializedProviderConfig`; `providers/openai/mod.rs` `get_chat_url`).
//! - In `tensorzero.toml`, a variant in both `candidate_variants` and `fallback_variants` is
//!   refused (`tensorzero-core/src/experimentation/mod.rs`, `check_duplicates_across`); rate
//!   limits are `<resource>_per_<interval>` keys (`tensorzero-core/src/config/rate_limiting.rs`).
//!   The example's rendered config is loaded by TensorZero's own gateway in
//!   `tests/tensorzero_loader.rs`.
//!
//! The Service is a Cilium global service (`desired::cilium`'s annotation keys).

use std::fmt::Write;

use serde_json::{Value, json};

use super::cilium::{AFFINITY_ANNOTATION, GLOBAL_ANNOTATION, SHARED_ANNOTATION};
use super::objects::*;
use crate::topology::Topology;
use crate::topology::gateway::CLOUD_VARIANT;
use crate::topology::model::*;

/// The gateway's namespace (at its site; where the operator creates its Secrets).
pub const GATEWAY_NAMESPACE: &str = "tensorzero";

/// The gateway's port (TensorZero's default `gateway.bind_address` port).
pub const GATEWAY_PORT: u16 = 3000;

fn gateway_labels() -> Value {
    json!({ "app": "tensorzero-gateway" })
}

/// The gateway's Service, the same in every cluster: a Cilium global service, so workloads at
/// every site call `tensorzero-gateway.tensorzero` and reach the gateway wherever it runs
/// (`affinity: local` prefers a gateway in the caller's own cluster when there is one).
pub fn gateway_service(t: &Topology) -> Value {
    let mut svc = object(t, "v1", "Service", "tensorzero-gateway", Some("tensorzero"));
    svc["metadata"]["annotations"] = json!({
        GLOBAL_ANNOTATION: "true",
        SHARED_ANNOTATION: "true",
        AFFINITY_ANNOTATION: "local",
    });
    with(svc, "spec", json!({ "selector": gateway_labels(), "ports": [{ "name": "http", "port": GATEWAY_PORT }] }))
}

/// The environment variable the gateway reads model `index`'s cloud API key from
/// (`api_key_location = "env::…"`; TensorZero reads it when it loads the config and refuses to
/// start without it).
pub fn cloud_key_env(index: usize) -> String {
    format!("FABRIC_CLOUD_API_KEY_{index}")
}

/// The environment variable TensorZero reads a rate-limit backend's URL from
/// (configuration reference, `[postgres]` and `[rate_limiting]`; docs/deployment/valkey-redis.mdx).
pub fn rate_limit_url_env(b: RateLimitBackend) -> &'static str {
    match b {
        RateLimitBackend::Postgres => "TENSORZERO_POSTGRES_URL",
        RateLimitBackend::Valkey => "TENSORZERO_VALKEY_URL",
    }
}

/// The gateway's environment: each cloud model's API key and the rate-limit backend's URL, from
/// the operator's Secrets (`valueFrom.secretKeyRef`: never in the rendered objects).
pub fn gateway_env(g: &Gateway) -> Vec<Value> {
    let from = |name: String, r: &SecretKeyRef| json!({ "name": name, "valueFrom": { "secretKeyRef": { "name": r.secret, "key": r.key } } });
    let mut env: Vec<Value> = g
        .models
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.cloud.as_ref().map(|c| from(cloud_key_env(i), &c.api_key)))
        .collect();
    if let Some(rl) = &g.rate_limit {
        env.push(from(rate_limit_url_env(rl.backend).into(), &rl.url));
    }
    env
}

pub fn gateway_deployment(t: &Topology, g: &Gateway) -> Value {
    let tag = t.versions.tensorzero.as_deref().unwrap_or("latest");
    let image = format!("tensorzero/gateway:{tag}");
    let labels = gateway_labels();
    let env = gateway_env(g);
    let mut container = json!({
        "name": "gateway",
        "image": image,
        "args": ["--config-file", "/app/config/tensorzero.toml"],
        "ports": [{ "containerPort": GATEWAY_PORT }],
        "volumeMounts": [{ "name": "config", "mountPath": "/app/config", "readOnly": true }],
    });
    if !env.is_empty() {
        container["env"] = json!(env);
    }
    let mut spec = json!({
        "containers": [container],
        "volumes": [{ "name": "config", "configMap": { "name": "tensorzero-config" } }],
    });
    // With Postgres the gateway refuses to start until its migrations are applied
    // (tensorzero-core/src/db/postgres/mod.rs `check_migrations`); the gateway's own
    // `--run-postgres-migrations` applies them and exits (crates/gateway/src/cli.rs, main.rs).
    if let Some(rl) = g.rate_limit.as_ref().filter(|rl| rl.backend == RateLimitBackend::Postgres) {
        let url = rate_limit_url_env(rl.backend);
        spec["initContainers"] = json!([{
            "name": "postgres-migrations",
            "image": image,
            "args": ["--run-postgres-migrations"],
            "env": [{ "name": url, "valueFrom": { "secretKeyRef": { "name": rl.url.secret, "key": rl.url.key } } }],
        }]);
    }
    with(
        object(t, "apps/v1", "Deployment", "tensorzero-gateway", Some("tensorzero")),
        "spec",
        json!({
            "replicas": 1,
            "selector": { "matchLabels": labels },
            "template": {
                "metadata": { "labels": labels, "annotations": { "fabric.io/site": g.site } },
                "spec": spec,
            },
        }),
    )
}

fn toml_str(s: &str) -> String {
    // TOML basic strings share JSON's escapes for everything fabric writes.
    serde_json::to_string(s).expect("strings serialize")
}

/// Name of the per-site service the gateway addresses (a Cilium global service).
pub fn site_service(service: &str, site: &str) -> String {
    format!("{service}-{site}")
}

/// The sites a gateway model's function has a variant for: its routes, then the fallback-only
/// sites, each once.
pub fn gateway_sites(m: &GatewayModel) -> Vec<&str> {
    let mut sites: Vec<&str> = vec![];
    for s in m.routes.iter().map(|r| r.site.as_str()).chain(m.fallback.iter().map(String::as_str)) {
        if !sites.contains(&s) {
            sites.push(s);
        }
    }
    sites
}

/// `tensorzero.toml`: a model per (gateway model, site), and a function per gateway model whose
/// variants are the sites, sampled by the A/B weights (`candidate_variants`). TensorZero moves
/// on to the remaining candidates when one fails, then to `fallback_variants` in order: the
/// fallback-only sites, then the cloud model. A variant in both lists is refused
/// (tensorzero-core/src/experimentation/mod.rs `check_duplicates_across`), so routes are never
/// written as fallbacks (validate refuses them at the topology's line too). The rate limit is
/// one rule per value of the tag (`tensorzero::each`).
pub fn tensorzero_toml(t: &Topology, g: &Gateway) -> String {
    let mut out = format!(
        "# TensorZero gateway configuration of fabric `{}`.\n\
         # Each site's backend is reached through the Cilium global service <service>-<site>.\n\n\
         [gateway]\nbind_address = \"0.0.0.0:3000\"\n",
        t.name
    );
    for (index, m) in g.models.iter().enumerate() {
        let Some(svc) = t.services.iter().find(|s| s.name == m.service) else { continue };
        let sites = gateway_sites(m);
        // Fallback-only sites, in order, once each.
        let fallback: Vec<&str> = sites.iter().copied().filter(|s| !m.routes.iter().any(|r| r.site == *s)).collect();
        for site in &sites {
            let model = toml_str(&format!("{}-{}", m.name, site));
            let _ = write!(
                out,
                "\n[models.{model}]\nrouting = [{site}]\n\n[models.{model}.providers.{site}]\ntype = \"vllm\"\n\
                 api_base = {base}\nmodel_name = {name}\napi_key_location = \"none\"\n",
                site = toml_str(site),
                base = toml_str(&format!(
                    "http://{}.{}.svc.cluster.local:{}/v1/",
                    site_service(&svc.name, site),
                    svc.namespace,
                    svc.port.0
                )),
                name = toml_str(&m.name),
            );
        }
        let cloud = CLOUD_VARIANT;
        if let Some(c) = &m.cloud {
            let model = toml_str(&format!("{}-{cloud}", m.name));
            let _ = write!(
                out,
                "\n[models.{model}]\nrouting = [{v}]\n\n[models.{model}.providers.{v}]\ntype = {ty}\n\
                 model_name = {name}\napi_key_location = {key}\n",
                v = toml_str(cloud),
                ty = toml_str(c.provider.tensorzero_type()),
                name = toml_str(&c.model),
                key = toml_str(&format!("env::{}", cloud_key_env(index))),
            );
            // Optional in TensorZero's `openai` and `anthropic` providers (`api_base` of
            // `UninitializedProviderConfig` in tensorzero-core/src/model.rs); validate checked it.
            if let Some(base) = &c.api_base {
                let _ = writeln!(out, "api_base = {}", toml_str(base));
            }
        }
        let f = toml_str(&m.name);
        let _ = write!(out, "\n[functions.{f}]\ntype = \"chat\"\n");
        let variants = sites.iter().copied().chain(m.cloud.as_ref().map(|_| cloud));
        let max_tokens = g.rate_limit.as_ref().and_then(|r| r.max_tokens);
        for v in variants {
            let _ = write!(
                out,
                "\n[functions.{f}.variants.{name}]\ntype = \"chat_completion\"\nmodel = {model}\n",
                name = toml_str(v),
                model = toml_str(&format!("{}-{}", m.name, v)),
            );
            if let Some(n) = max_tokens {
                let _ = writeln!(out, "max_tokens = {n}");
            }
        }
        let weights: Vec<String> = m.routes.iter().map(|r| format!("{} = {:?}", toml_str(&r.site), r.weight)).collect();
        let _ = write!(
            out,
            "\n[functions.{f}.experimentation]\ntype = \"static\"\ncandidate_variants = {{ {} }}\n",
            weights.join(", ")
        );
        let fb: Vec<String> = fallback.iter().copied().chain(m.cloud.as_ref().map(|_| cloud)).map(toml_str).collect();
        if !fb.is_empty() {
            let _ = writeln!(out, "fallback_variants = [{}]", fb.join(", "));
        }
    }
    if let Some(rl) = &g.rate_limit {
        // tensorzero-core/src/config/rate_limiting.rs: `<resource>_per_<interval>` keys, a
        // `priority` (or `always`), and scopes `{ tag_key, tag_value = "tensorzero::each" }`.
        let _ = write!(
            out,
            "\n# One bucket per value of the `{tag}` tag; kept in {backend:?} (URL from the environment).\n\
             [rate_limiting]\nenabled = true\n\n[[rate_limiting.rules]]\npriority = 0\n",
            tag = rl.tag,
            backend = rl.backend,
        );
        // Only names of the grammar validate accepts (anything else was refused there).
        for (name, n) in rl.limits.iter().filter(|(k, _)| crate::topology::gateway::is_rate_limit(k)) {
            let _ = writeln!(out, "{name} = {n}");
        }
        let _ = writeln!(out, "scope = [{{ tag_key = {}, tag_value = \"tensorzero::each\" }}]", toml_str(&rl.tag));
    }
    out
}
