//! Whether a pinned chart version is published where its HelmChart points (plan, online).
//!
//! - An HTTP chart repository publishes `index.yaml` (`entries.<chart>[].version`); Helm's install
//!   resolves `--version` by helm/helm `pkg/repo/index.go` `IndexFile.Get`: an exact match of the
//!   string first, else the first entry whose semver satisfies the version as a constraint (so
//!   `1.15.0` finds Karmada's `v1.15.0`).
//! - An OCI registry publishes the chart's tags (`GET /v2/<repository>/tags/list`, the OCI
//!   distribution spec's "Listing Tags"); Helm resolves `--version` against them the same way
//!   (helm/helm `pkg/registry/util.go` `GetTagMatchingVersionOrConstraint`). ghcr.io and
//!   registry.k8s.io answer an anonymous request `401` with a `WWW-Authenticate: Bearer
//!   realm=…,service=…,scope=…` challenge; the client gets a token from the realm and asks again
//!   with it (distribution/distribution `docs/content/spec/auth/token.md`: the answer's `token`,
//!   or `access_token`).
//!
//! fabric pins exact versions, so "satisfies the constraint" is semver equality, read here as the
//! same string up to a leading `v`.

use std::time::Duration;

use serde_json::Value;

use crate::desired::charts::ChartSource;

const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest index read (argo-helm's is several MB).
const MAX_BYTES: u64 = 64 << 20;
/// Tag list pages followed at the most (`Link: <…>; rel="next"`).
const MAX_PAGES: usize = 50;

/// Why the published versions could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("{url}: {why}")]
    Fetch { url: String, why: String },
    #[error("{url}: HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url}: not a {what}: {why}")]
    NotAnIndex { url: String, what: &'static str, why: String },
    #[error("the index has no chart `{chart}`")]
    NoChart { chart: String },
    /// A `401` with a Bearer challenge (its `WWW-Authenticate` value).
    #[error("the registry wants a token ({challenge})")]
    Challenge { challenge: String },
    #[error("{url}: more than {MAX_PAGES} pages of tags")]
    TooManyPages { url: String },
}

/// Where the published versions are read from: the real registries, or one loopback base that
/// stands for all of them (tests): `<base>/<host><path>/index.yaml` for a chart repository, and
/// `<base>/v2/<repository>/tags/list` for an OCI chart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Indexes {
    Public,
    Mirror(String),
}

/// Whether `versions` (as published) has `pin`, by Helm's rule for an exact version.
pub fn listed(versions: &[String], pin: &str) -> bool {
    let bare = |v: &str| v.strip_prefix('v').unwrap_or(v).to_string();
    versions.iter().any(|v| v == pin) || versions.iter().any(|v| bare(v) == bare(pin) && semver_like(&bare(pin)))
}

/// `MAJOR.MINOR.PATCH` with an optional `-pre`/`+build`, as semver parses a version.
fn semver_like(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The versions of `chart` an `index.yaml` lists.
pub fn index_versions(index: &str, chart: &str) -> Result<Vec<String>, IndexError> {
    let bad = |why: String| IndexError::NotAnIndex { url: String::new(), what: "chart index", why };
    let doc: Value = serde_saphyr::from_str(index).map_err(|e| bad(e.to_string()))?;
    let Some(entries) = doc.get("entries").and_then(Value::as_object) else {
        return Err(bad("no `entries`".into()));
    };
    let Some(list) = entries.get(chart).and_then(Value::as_array) else {
        return Err(IndexError::NoChart { chart: chart.into() });
    };
    Ok(list
        .iter()
        .filter_map(|e| e.get("version"))
        .map(|v| v.as_str().map_or_else(|| v.to_string(), String::from))
        .collect())
}

/// Where `source`'s versions are published, as a URL: the repository's `index.yaml`, or the OCI
/// repository's tag list.
pub fn versions_url(source: &ChartSource, at: &Indexes) -> String {
    match (source.repo_url(), at) {
        (Some(repo), Indexes::Public) => format!("{}/index.yaml", repo.trim_end_matches('/')),
        (Some(repo), Indexes::Mirror(base)) => {
            let rest = repo.split_once("://").map_or(repo, |(_, r)| r);
            format!("{}/{}/index.yaml", base.trim_end_matches('/'), rest.trim_end_matches('/'))
        }
        (None, at) => {
            let reference = source.chart().trim_start_matches("oci://");
            let (registry, repository) = reference.split_once('/').unwrap_or((reference, ""));
            let base = match at {
                Indexes::Public => format!("https://{registry}"),
                Indexes::Mirror(base) => base.trim_end_matches('/').to_string(),
            };
            format!("{base}/v2/{repository}/tags/list")
        }
    }
}

/// The versions published of `source`'s chart.
pub fn published(source: &ChartSource, at: &Indexes) -> Result<Vec<String>, IndexError> {
    let agent = super::bundle::agent(None);
    let url = versions_url(source, at);
    match source.repo_url() {
        Some(_) => index_versions(&get(&agent, &url, None)?.1, source.name()).map_err(|e| match e {
            IndexError::NotAnIndex { what, why, .. } => IndexError::NotAnIndex { url: url.clone(), what, why },
            e => e,
        }),
        None => oci_tags(&agent, &url),
    }
}

/// The tags of an OCI repository, every page, with an anonymous token when the registry asks.
fn oci_tags(agent: &ureq::Agent, url: &str) -> Result<Vec<String>, IndexError> {
    let mut tags = Vec::new();
    let mut next = Some(url.to_string());
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let Some(page) = next.take() else { return Ok(tags) };
        let (link, body) = match get(agent, &page, token.as_deref()) {
            Err(IndexError::Challenge { challenge }) if token.is_none() => {
                token = Some(anonymous_token(agent, &challenge)?);
                get(agent, &page, token.as_deref())?
            }
            other => other?,
        };
        let bad = |why: String| IndexError::NotAnIndex { url: page.clone(), what: "tag list", why };
        let doc: Value = serde_json::from_str(&body).map_err(|e| bad(e.to_string()))?;
        let Some(list) = doc.get("tags").and_then(Value::as_array) else {
            return Err(bad("no `tags`".into()));
        };
        tags.extend(list.iter().filter_map(Value::as_str).map(String::from));
        next = link.and_then(|l| next_link(&page, &l));
    }
    Err(IndexError::TooManyPages { url: url.into() })
}

/// GET `url`: the `Link` header and the body of a `200`; a `401` Bearer challenge; else why not.
fn get(agent: &ureq::Agent, url: &str, token: Option<&str>) -> Result<(Option<String>, String), IndexError> {
    let mut req = agent.get(url).config().timeout_global(Some(TIMEOUT)).build();
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    let fetch = |why: String| IndexError::Fetch { url: url.into(), why };
    let response = req.call().map_err(|e| fetch(e.to_string()))?;
    let status = response.status().as_u16();
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(String::from);
    if status == 401
        && let Some(c) = header("www-authenticate").filter(|c| c.to_ascii_lowercase().starts_with("bearer "))
    {
        return Err(IndexError::Challenge { challenge: c });
    }
    if status != 200 {
        return Err(IndexError::Status { url: url.into(), status });
    }
    let link = header("link");
    let body =
        response.into_body().into_with_config().limit(MAX_BYTES).read_to_string().map_err(|e| fetch(e.to_string()))?;
    Ok((link, body))
}

/// The token an anonymous client gets for a Bearer challenge: GET `realm?service=…&scope=…`.
fn anonymous_token(agent: &ureq::Agent, challenge: &str) -> Result<String, IndexError> {
    let params = challenge_params(challenge);
    let no_realm = || IndexError::Challenge { challenge: format!("{challenge}, without a realm") };
    let realm = params.iter().find(|(k, _)| k == "realm").map(|(_, v)| v.clone()).ok_or_else(no_realm)?;
    let query: Vec<String> = params
        .iter()
        .filter(|(k, _)| k == "service" || k == "scope")
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    let sep = if realm.contains('?') { '&' } else { '?' };
    let url = if query.is_empty() { realm } else { format!("{realm}{sep}{}", query.join("&")) };
    let (_, body) = get(agent, &url, None)?;
    let bad = |why: String| IndexError::NotAnIndex { url: url.clone(), what: "token", why };
    let doc: Value = serde_json::from_str(&body).map_err(|e| bad(e.to_string()))?;
    doc.get("token")
        .or_else(|| doc.get("access_token"))
        .and_then(Value::as_str)
        .map(String::from)
        .ok_or_else(|| bad("no `token` in the answer".into()))
}

/// `Bearer realm="…",service="…",scope="…"` as (key, value) pairs.
fn challenge_params(challenge: &str) -> Vec<(String, String)> {
    let rest = challenge.get(7..).unwrap_or_default();
    let mut out = Vec::new();
    let mut s = rest.trim();
    while let Some((key, after)) = s.split_once('=') {
        let key = key.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let (value, tail) = match after.strip_prefix('"') {
            Some(q) => q.split_once('"').unwrap_or((q, "")),
            None => after.split_once(',').unwrap_or((after, "")),
        };
        out.push((key, value.to_string()));
        s = tail.trim_start_matches(',').trim();
    }
    out
}

/// Percent-encoding of a query value.
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The next page of a `Link: </v2/…?last=x>; rel="next"` header, resolved against `page`.
fn next_link(page: &str, link: &str) -> Option<String> {
    let target = link.split(';').next()?.trim().trim_start_matches('<').trim_end_matches('>');
    if target.contains("://") {
        return Some(target.to_string());
    }
    let origin_end = page.find("://").map(|i| i + 3).and_then(|i| page[i..].find('/').map(|j| i + j))?;
    Some(format!("{}{target}", &page[..origin_end]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::charts::{CILIUM_CHART, KAI_CHART, KUEUE_CHART};

    #[test]
    fn helms_rule_for_an_exact_version() {
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(listed(&v(&["v1.15.0", "v1.14.0"]), "1.15.0"));
        assert!(listed(&v(&["v1.15.0"]), "v1.15.0"));
        assert!(!listed(&v(&["v1.15.0"]), "1.15.2"));
        assert!(listed(&v(&["0.15.2"]), "v0.15.2"));
        assert!(!listed(&v(&["0.15.2"]), "0.15"));
        assert!(!listed(&v(&[]), "1.0.0"));
    }

    #[test]
    fn where_versions_are_published() {
        assert_eq!(versions_url(&CILIUM_CHART, &Indexes::Public), "https://helm.cilium.io/index.yaml");
        assert_eq!(
            versions_url(&KUEUE_CHART, &Indexes::Public),
            "https://registry.k8s.io/v2/kueue/charts/kueue/tags/list"
        );
        assert_eq!(
            versions_url(&KAI_CHART, &Indexes::Public),
            "https://ghcr.io/v2/nvidia/kai-scheduler/kai-scheduler/tags/list"
        );
        let m = Indexes::Mirror("http://127.0.0.1:1".into());
        assert_eq!(versions_url(&CILIUM_CHART, &m), "http://127.0.0.1:1/helm.cilium.io/index.yaml");
        assert_eq!(versions_url(&KAI_CHART, &m), "http://127.0.0.1:1/v2/nvidia/kai-scheduler/kai-scheduler/tags/list");
    }

    #[test]
    fn a_challenge_and_a_link_are_read() {
        let p =
            challenge_params(r#"Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull""#);
        let get = |k: &str| p.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str());
        assert_eq!(get("realm"), Some("https://ghcr.io/token"));
        assert_eq!(get("service"), Some("ghcr.io"));
        assert_eq!(get("scope"), Some("repository:a/b:pull"));
        assert_eq!(encode("repository:a/b:pull"), "repository%3Aa%2Fb%3Apull");
        assert_eq!(
            next_link("http://h:1/v2/a/tags/list", r#"</v2/a/tags/list?last=x&n=2>; rel="next""#).as_deref(),
            Some("http://h:1/v2/a/tags/list?last=x&n=2")
        );
    }

    #[test]
    fn an_index_lists_its_charts_versions() {
        let idx = "apiVersion: v1\nentries:\n  karmada:\n  - name: karmada\n    version: v1.15.0\n";
        assert_eq!(index_versions(idx, "karmada").unwrap(), ["v1.15.0"]);
        assert!(index_versions(idx, "kueue").unwrap_err().to_string().contains("no chart `kueue`"));
        assert!(index_versions("<html>", "x").is_err());
    }
}
