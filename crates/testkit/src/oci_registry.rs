//! An OCI registry's tag lists on loopback, behind the anonymous token exchange ghcr.io and
//! registry.k8s.io ask for: what plan reads to check a pinned OCI chart version.
//!
//! As the OCI distribution spec ("Listing Tags": `GET /v2/<name>/tags/list`, `n`/`last` and a
//! `Link: <…>; rel="next"` header for the next page) and the registry token spec
//! (distribution/distribution `docs/content/spec/auth/token.md`) say:
//! - a tag list asked for without `Authorization: Bearer <token>` answers `401` with
//!   `WWW-Authenticate: Bearer realm="<base>/token",service="<service>",scope="repository:<name>:pull"`;
//! - `GET /token?service=<service>&scope=repository:<name>:pull` answers `{"token": "…"}` (the
//!   token is good for that repository only; a wrong service or scope is `401`);
//! - with the token, `{"name": <name>, "tags": [...]}`, at most `page` tags a page when set,
//!   the next page named by a `Link` header;
//! - an unknown repository is `404` (`NAME_UNKNOWN`).
//!
//! Not modelled: manifests and blobs, token expiry, `n` sent by the client, HEAD requests. Plain
//! std: one thread, one request per connection; it records every request line.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

pub const SERVICE: &str = "fabric-test-registry";

pub struct OciRegistry {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl OciRegistry {
    /// A registry holding `repos` (repository name → tags), `page` tags a page at the most.
    pub fn start(repos: &[(&str, Vec<String>)], page: Option<usize>) -> OciRegistry {
        let repos: BTreeMap<String, Vec<String>> = repos.iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("its address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let realm = format!("{base}/token");
        std::thread::spawn(move || {
            for conn in listener.incoming().take(256) {
                let Ok(mut conn) = conn else { continue };
                let Ok(read) = conn.try_clone() else { continue };
                let mut lines = BufReader::new(read).lines();
                let first = lines.next().and_then(Result::ok).unwrap_or_default();
                let mut auth = None;
                while let Some(l) = lines.next().and_then(Result::ok).filter(|l| !l.is_empty()) {
                    if let Some((_, v)) = l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("authorization")) {
                        auth = Some(v.trim().to_string());
                    }
                }
                let target = first.split(' ').nth(1).unwrap_or_default().to_string();
                seen.lock().expect("not poisoned").push(target.clone());
                let (status, headers, body) = answer(&repos, page, &realm, &target, auth.as_deref());
                let mut head = format!("HTTP/1.1 {status}\r\nContent-Type: application/json\r\n");
                for (k, v) in headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                let _ = write!(conn, "{head}Content-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = conn.write_all(body.as_bytes());
            }
        });
        OciRegistry { base, requests }
    }

    /// The request targets (path and query) so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("not poisoned").clone()
    }
}

fn token_of(repo: &str) -> String {
    format!("anonymous-pull-{}", repo.replace('/', "."))
}

fn query(q: &str) -> BTreeMap<String, String> {
    q.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), decode(v))).collect()
}

fn decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(x) = std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(x);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

type Answer = (&'static str, Vec<(String, String)>, String);

fn answer(
    repos: &BTreeMap<String, Vec<String>>,
    page: Option<usize>,
    realm: &str,
    target: &str,
    auth: Option<&str>,
) -> Answer {
    let (path, q) = target.split_once('?').unwrap_or((target, ""));
    let q = query(q);
    let unauthorized = |body: &str| -> Answer { ("401 Unauthorized", Vec::new(), body.to_string()) };
    if path == "/token" {
        let scope = q.get("scope").cloned().unwrap_or_default();
        let repo = scope.strip_prefix("repository:").and_then(|s| s.strip_suffix(":pull"));
        return match (q.get("service").map(String::as_str), repo) {
            (Some(SERVICE), Some(r)) => ("200 OK", Vec::new(), serde_json::json!({ "token": token_of(r) }).to_string()),
            _ => unauthorized(r#"{"errors":[{"code":"UNAUTHORIZED","message":"bad service or scope"}]}"#),
        };
    }
    let Some(repo) = path.strip_prefix("/v2/").and_then(|p| p.strip_suffix("/tags/list")) else {
        return ("404 Not Found", Vec::new(), r#"{"errors":[{"code":"NOT_FOUND"}]}"#.into());
    };
    if auth != Some(format!("Bearer {}", token_of(repo)).as_str()) {
        let challenge = format!(r#"Bearer realm="{realm}",service="{SERVICE}",scope="repository:{repo}:pull""#);
        return (
            "401 Unauthorized",
            vec![("WWW-Authenticate".into(), challenge)],
            r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#.into(),
        );
    }
    let Some(tags) = repos.get(repo) else {
        return ("404 Not Found", Vec::new(), r#"{"errors":[{"code":"NAME_UNKNOWN"}]}"#.into());
    };
    let start = q.get("last").and_then(|l| tags.iter().position(|t| t == l)).map_or(0, |i| i + 1);
    let end = page.map_or(tags.len(), |n| (start + n).min(tags.len()));
    let mut headers = Vec::new();
    if end < tags.len() {
        let last = &tags[end - 1];
        headers.push(("Link".into(), format!(r#"</v2/{repo}/tags/list?last={last}&n={}>; rel="next""#, end - start)));
    }
    ("200 OK", headers, serde_json::json!({ "name": repo, "tags": tags[start..end] }).to_string())
}
