//! TensorZero's objects (G.1): the gateway's Deployment, its environment and its Service.
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
//!
//! The Service is a Cilium global service (`desired::cilium`'s annotation keys).

use serde_json::{Value, json};

use super::cilium::{AFFINITY_ANNOTATION, GLOBAL_ANNOTATION, SHARED_ANNOTATION};
use super::objects::*;
use crate::topology::Topology;
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
