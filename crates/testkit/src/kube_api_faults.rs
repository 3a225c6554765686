//! Faults the kube-apiserver double ([`crate::kube_api`]) can be told to meet, shaped as the
//! answers of a real API server under load or restarting, and of a network that drops
//! connections:
//!
//! * a throttled request: kube-apiserver's max-in-flight filter and its priority-and-fairness
//!   filter both answer `tooManyRequests` (kubernetes `staging/src/k8s.io/apiserver/pkg/server/
//!   filters/maxinflight.go` and `priority-and-fairness.go`): `Retry-After: N` and Go's
//!   `http.Error(w, "Too many requests, please try again later.", 429)`, a plain-text body
//!   (`Content-Type: text/plain; charset=utf-8`), **not** a `Status`; the request never reaches
//!   its handler, so nothing changes;
//! * a 429 `Status` with reason `TooManyRequests` and `details.retryAfterSeconds`, as apimachinery
//!   `pkg/api/errors` `NewTooManyRequests` builds it (storage and admission answer this way);
//! * a 503 `Status` with reason `ServiceUnavailable` (`errors.NewServiceUnavailable`, what the
//!   server answers while it is not ready), nothing changed;
//! * a connection closed without an answer, before the request is handled (an API server
//!   restarting, a reset on the way) or after it (the change is made and the answer lost);
//! * an answer that comes late (a stalled server or link).
//!
//! Each fault fires once, on the first request it matches, in the order they were given.

use std::time::Duration;

use serde_json::json;

/// What the next matching request meets.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// 429 from the max-in-flight / priority-and-fairness filters: plain text, `Retry-After`.
    Throttled { retry_after_secs: u32 },
    /// 429 `Status` (`TooManyRequests`) with `details.retryAfterSeconds`.
    TooManyRequestsStatus { retry_after_secs: u32 },
    /// 503 `Status` (`ServiceUnavailable`).
    Unavailable,
    /// The connection is closed without an answer; the request is not handled.
    DropBefore,
    /// The request is handled (a write is made), then the connection is closed without an answer.
    DropAfter,
    /// The answer is held back this long, then sent.
    Stall(Duration),
}

/// A fault waiting for its request.
#[derive(Debug, Clone)]
pub(crate) struct Armed {
    /// `get`, `list`, `patch` (any), `apply` (server-side apply, not a dry run),
    /// `dryrun-apply`, `create`, `update`, `delete` or `*`.
    verb: String,
    /// The resource's plural (`clusterqueues`), lowercase, or `*`.
    resource: String,
    pub(crate) fault: Fault,
}

impl Armed {
    pub(crate) fn new(verb: &str, resource: &str, fault: Fault) -> Armed {
        Armed { verb: verb.to_ascii_lowercase(), resource: resource.to_ascii_lowercase(), fault }
    }

    /// Whether this fault is for a request with `method`, `path` and `query`
    /// (`content_type` tells server-side apply from other patches).
    pub(crate) fn matches(&self, method: &str, path: &str, query: &str, content_type: Option<&str>) -> bool {
        let apply = method == "PATCH" && content_type.is_some_and(|c| c.starts_with("application/apply-patch+yaml"));
        let dry = query.split('&').any(|kv| kv.starts_with("dryRun="));
        let verb_ok = match self.verb.as_str() {
            "*" => true,
            "apply" => apply && !dry,
            "dryrun-apply" => apply && dry,
            "get" | "list" => method == "GET",
            "patch" => method == "PATCH",
            "create" => method == "POST",
            "update" => method == "PUT",
            "delete" => method == "DELETE",
            _ => false,
        };
        let resource_ok = self.resource == "*" || path.split('/').any(|seg| seg.eq_ignore_ascii_case(&self.resource));
        verb_ok && resource_ok
    }
}

/// An answer's status, headers and body.
pub(crate) type Answer = (u16, Vec<(&'static str, String)>, Vec<u8>);

/// The answer of a fault that is one (None for the others).
pub(crate) fn answer(fault: &Fault) -> Option<Answer> {
    match fault {
        Fault::Throttled { retry_after_secs } => Some((
            429,
            vec![
                ("Retry-After", retry_after_secs.to_string()),
                // Go's http.Error.
                ("Content-Type", "text/plain; charset=utf-8".into()),
                ("X-Content-Type-Options", "nosniff".into()),
            ],
            b"Too many requests, please try again later.\n".to_vec(),
        )),
        Fault::TooManyRequestsStatus { retry_after_secs } => Some((
            429,
            vec![("Retry-After", retry_after_secs.to_string()), ("Content-Type", "application/json".into())],
            status(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
                Some(*retry_after_secs),
            ),
        )),
        Fault::Unavailable => Some((
            503,
            vec![("Content-Type", "application/json".into())],
            status(503, "ServiceUnavailable", "the server is currently unable to handle the request", None),
        )),
        Fault::DropBefore | Fault::DropAfter | Fault::Stall(_) => None,
    }
}

fn status(code: u16, reason: &str, message: &str, retry_after: Option<u32>) -> Vec<u8> {
    let mut s = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    if let Some(n) = retry_after {
        s["details"] = json!({ "retryAfterSeconds": n });
    }
    serde_json::to_vec(&s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_matches_its_verb_and_resource_only() {
        let apply = Armed::new("apply", "ClusterQueues", Fault::DropAfter);
        let ct = Some("application/apply-patch+yaml");
        let path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/default";
        assert!(apply.matches("PATCH", path, "fieldManager=fabric", ct));
        assert!(!apply.matches("PATCH", path, "fieldManager=fabric&dryRun=All", ct), "a dry run is not an apply");
        assert!(!apply.matches("GET", path, "", None));
        assert!(!apply.matches("PATCH", "/api/v1/namespaces/ai", "", ct));
        let any = Armed::new("*", "*", Fault::Unavailable);
        assert!(any.matches("DELETE", "/api/v1/namespaces/ai", "", None));
    }

    #[test]
    fn the_filters_429_is_plain_text_with_retry_after() {
        let (code, headers, body) = answer(&Fault::Throttled { retry_after_secs: 1 }).unwrap();
        assert_eq!(code, 429);
        assert!(headers.contains(&("Retry-After", "1".into())));
        assert_eq!(body, b"Too many requests, please try again later.\n");
        let (_, _, body) = answer(&Fault::TooManyRequestsStatus { retry_after_secs: 2 }).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (v["reason"].as_str(), v["details"]["retryAfterSeconds"].as_u64()),
            (Some("TooManyRequests"), Some(2))
        );
    }
}
