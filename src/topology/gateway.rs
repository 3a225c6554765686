//! Rules of `gateway` that come from TensorZero's own config loader (tensorzero/tensorzero at
//! the version `versions.tensorzero` pins, 2026.4.1): what the rendered `tensorzero.toml` must
//! satisfy for the gateway to start, checked here at the topology's lines.

use super::airgap::url_problem;
use super::model::{CloudProvider, RateLimit, SecretKeyRef, Topology};
use super::problem::Problem;
use super::tree::Path;
use super::userinfo::redact;
use crate::path;

/// The variant (and model) name of a model's cloud fallback in `tensorzero.toml`; the other
/// variants are named after sites.
pub const CLOUD_VARIANT: &str = "cloud";

/// The resources a TensorZero rate limit counts that fabric writes (integer counts):
/// `parse_resource` in tensorzero-core/src/config/rate_limiting.rs (`model_inferences`,
/// `tokens`; `cost` takes dollars and is not offered).
pub const RATE_LIMIT_RESOURCES: &[&str] = &["model_inferences", "tokens"];

/// The windows of a TensorZero rate limit: `RateLimitInterval` in
/// tensorzero-core/src/rate_limiting/mod.rs (snake_case: second … month).
pub const RATE_LIMIT_INTERVALS: &[&str] = &["second", "minute", "hour", "day", "week", "month"];

/// A Secret's key as Kubernetes accepts it (`IsConfigMapKey` in
/// kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go:
/// letters, digits, `-`, `_`, `.`, at most 253 characters, not `.` or `..`).
pub fn is_secret_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s != "."
        && s != ".."
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// A Secret's name: an RFC 1123 subdomain (`IsDNS1123Subdomain`, same file).
pub fn is_secret_name(s: &str) -> bool {
    let label = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    s.len() <= 253 && !s.is_empty() && s.split('.').all(label)
}

/// The path TensorZero appends to a provider's `api_base`: `get_chat_url` in
/// tensorzero-core/src/providers/openai/mod.rs (`chat/completions`, after a `/`), `/messages` in
/// providers/anthropic.rs.
pub fn api_path(p: CloudProvider) -> &'static str {
    match p {
        CloudProvider::Openai => "/chat/completions",
        CloudProvider::Anthropic => "/messages",
    }
}

/// Why `url` cannot be a cloud model's `api_base`, if it cannot. TensorZero parses it as a URL
/// (`parse_optional_url` in tensorzero-core/src/model.rs) and appends [`api_path`]: a base that
/// already ends with it would be called at `…/chat/completions/chat/completions`
/// (`check_api_base_suffix` in providers/openai/mod.rs only warns). Credentials in the URL would
/// sit in the rendered ConfigMap in the clear: the key belongs in the Secret.
pub fn api_base_problem(p: CloudProvider, url: &str) -> Option<String> {
    if let Some(why) = url_problem(url) {
        return Some(why.into());
    }
    if redact(url) != url {
        return Some(
            "carries credentials (`user:password@`), which would be written into the gateway's ConfigMap".into(),
        );
    }
    let path = url.split_once("://").map_or(url, |(_, r)| r);
    let path = &path[..path.find(['?', '#']).unwrap_or(path.len())];
    let path = path.trim_end_matches('/');
    let suffix = api_path(p);
    path.ends_with(suffix).then(|| format!("already ends with `{suffix}`, which TensorZero appends"))
}

/// `<resource>_per_<interval>` of [`RATE_LIMIT_RESOURCES`] and [`RATE_LIMIT_INTERVALS`].
pub fn is_rate_limit(name: &str) -> bool {
    name.split_once("_per_")
        .is_some_and(|(r, w)| RATE_LIMIT_RESOURCES.contains(&r) && RATE_LIMIT_INTERVALS.contains(&w))
}

pub fn check(t: &Topology, out: &mut Vec<Problem>) {
    let Some(g) = &t.gateway else { return };
    for (i, m) in g.models.iter().enumerate() {
        let mp = path!["gateway", "models", i];
        let routes: Vec<&str> = m.routes.iter().map(|r| r.site.as_str()).collect();
        for (j, f) in m.fallback.iter().enumerate() {
            if routes.contains(&f.as_str()) {
                // tensorzero-core/src/experimentation/mod.rs `check_duplicates_across` refuses a
                // variant in both lists; static_experimentation.rs `sample` already moves on to
                // the remaining candidates when one fails, so a route needs no fallback entry.
                out.push(
                    Problem::error(
                        "topology::gateway",
                        mp.key("fallback").index(j),
                        format!("`{f}` is a route of `{}` and a fallback too", m.name),
                    )
                    .label("already a route")
                    .help(
                        "remove it from `fallback`: TensorZero retries the remaining routes before any \
                         fallback, and refuses a variant in both `candidate_variants` and `fallback_variants`",
                    ),
                );
            } else if m.fallback[..j].contains(f) {
                out.push(
                    Problem::error("topology::gateway", mp.key("fallback").index(j), format!("`{f}` is listed twice"))
                        .label("duplicate")
                        .help("list each fallback site once"),
                );
            }
        }
        if let Some(c) = &m.cloud {
            let cp = mp.key("cloud");
            if routes.contains(&CLOUD_VARIANT) || m.fallback.iter().any(|f| f == CLOUD_VARIANT) {
                out.push(
                    Problem::error(
                        "topology::gateway",
                        cp.clone(),
                        format!(
                            "a site named `{CLOUD_VARIANT}` and the cloud fallback would be the same TensorZero variant"
                        ),
                    )
                    .label("name clash")
                    .help("rename the site, or drop the cloud fallback"),
                );
            }
            if c.model.trim().is_empty() {
                out.push(
                    Problem::error("topology::gateway", cp.key("model"), "the cloud model's name is empty")
                        .label("empty")
                        .help("give the provider's model name, e.g. `gpt-4o-mini`"),
                );
            }
            secret_ref(&c.api_key, cp.key("api_key"), out);
            if let Some(base) = &c.api_base
                && let Some(why) = api_base_problem(c.provider, base)
            {
                out.push(
                    Problem::error(
                        "topology::gateway",
                        cp.key("api_base"),
                        format!("`{}` {why}", redact(base)),
                    )
                    .label("not an API base")
                    .help(format!(
                        "give the API's base URL without credentials or the endpoint's path, e.g. `https://llm.example/v1` \
                         (TensorZero appends `{}`; the key goes in the `api_key` Secret)",
                        api_path(c.provider)
                    )),
                );
            }
        }
    }
    if let Some(rl) = &g.rate_limit {
        rate_limit(rl, out);
    }
}

/// `gateway.rate_limit`: names TensorZero knows, positive counts, `max_tokens` with a token limit.
fn rate_limit(rl: &RateLimit, out: &mut Vec<Problem>) {
    let rp = path!["gateway", "rate_limit"];
    if rl.tag.is_empty() || rl.tag.starts_with("tensorzero::") {
        out.push(
            Problem::error("topology::gateway", rp.key("tag"), format!("`{}` is no tag a client can set", rl.tag))
                .label("bad tag")
                .help("name the request tag clients send per user, e.g. `user_id` (names starting with `tensorzero::` are TensorZero's)"),
        );
    }
    if rl.limits.is_empty() {
        out.push(
            Problem::error("topology::gateway", rp.key("limits"), "a rate limit without limits")
                .label("empty")
                .help("give at least one, e.g. `{ model_inferences_per_minute: 30 }`"),
        );
    }
    for (name, n) in &rl.limits {
        if !is_rate_limit(name) {
            out.push(
                Problem::error(
                    "topology::gateway",
                    rp.key("limits").key(name),
                    format!("`{name}` is no TensorZero rate limit"),
                )
                .label("unknown limit")
                .help(format!(
                    "write `<resource>_per_<window>` with resource {} and window {}",
                    RATE_LIMIT_RESOURCES.join(" or "),
                    RATE_LIMIT_INTERVALS.join(", ")
                )),
            );
        } else if *n == 0 {
            out.push(
                Problem::error(
                    "topology::gateway",
                    rp.key("limits").key(name),
                    format!("`{name}: 0` refuses every request"),
                )
                .label("must be > 0")
                .help("give a positive count, or remove the limit"),
            );
        }
    }
    // tensorzero-core/src/inference/types/mod.rs: with a token limit, a request's tokens are
    // estimated up front from its `max_tokens`, and one without is refused
    // (`RateLimitMissingMaxTokens`, crates/tensorzero-error/src/lib.rs).
    let token_limit = rl.limits.keys().find(|k| k.starts_with("tokens_per_"));
    if let (Some(k), None) = (token_limit, rl.max_tokens) {
        out.push(
            Problem::error("topology::gateway", rp.key("limits").key(k), format!("`{k}` without `max_tokens`"))
                .label("needs max_tokens")
                .help(
                    "add `max_tokens:` to the rate limit (the longest reply a request gets when it sets none): \
                     TensorZero refuses a request without `max_tokens` under a token limit",
                ),
        );
    }
    if rl.max_tokens == Some(0) {
        out.push(
            Problem::error("topology::gateway", rp.key("max_tokens"), "`max_tokens: 0` allows no reply")
                .label("must be > 0")
                .help("give the longest reply a request may get, e.g. 2048"),
        );
    }
    secret_ref(&rl.url, rp.key("url"), out);
}

fn secret_ref(r: &SecretKeyRef, p: Path, out: &mut Vec<Problem>) {
    if !is_secret_name(&r.secret) {
        out.push(
            Problem::error("topology::gateway", p.key("secret"), format!("`{}` is no Secret name", r.secret))
                .label("bad Secret name")
                .help("a Secret's name is lowercase letters, digits, '-' and '.', e.g. `tensorzero-cloud`"),
        );
    }
    if !is_secret_key(&r.key) {
        out.push(
            Problem::error("topology::gateway", p.key("key"), format!("`{}` is no Secret key", r.key))
                .label("bad key")
                .help("a Secret's key is letters, digits, '-', '_' and '.', e.g. `api_key`"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_bases_tensorzero_can_call() {
        let ok = |p, u| assert_eq!(api_base_problem(p, u), None, "{u}");
        ok(CloudProvider::Openai, "https://llm.example/v1");
        ok(CloudProvider::Openai, "http://10.0.0.5:8000/v1/");
        ok(CloudProvider::Anthropic, "https://proxy.example/anthropic/v1/");
        let bad = |p, u: &str, want: &str| {
            let why = api_base_problem(p, u).unwrap_or_else(|| panic!("{u} accepted"));
            assert!(why.contains(want), "{u}: {why}");
        };
        bad(CloudProvider::Openai, "llm.example/v1", "http:// or https://");
        bad(CloudProvider::Openai, "https://", "does not parse");
        bad(CloudProvider::Openai, "https://llm.example/v1/chat/completions", "`/chat/completions`");
        bad(CloudProvider::Openai, "https://llm.example/v1/chat/completions/", "`/chat/completions`");
        bad(CloudProvider::Anthropic, "https://proxy.example/v1/messages", "`/messages`");
        // The other provider's path is just a path.
        ok(CloudProvider::Anthropic, "https://llm.example/v1/chat/completions");
        // Credentials are refused, and the reason never repeats them.
        let why = api_base_problem(CloudProvider::Openai, "https://u:s3cret@llm.example/v1").unwrap();
        assert!(why.contains("credentials") && !why.contains("s3cret"), "{why}");
    }
}
