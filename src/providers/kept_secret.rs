//! The old data of a Secret fabric renews (`fabric rotate credentials`), kept in the cluster
//! beside it until the new data is in use: the journal never holds a secret's content, so this
//! Secret is the rotation's rollback point. It is named after the Secret and the run
//! (`<name>.prior-<run>`), carries no `app.kubernetes.io/managed-by` label (prune never lists
//! it) and is annotated with the Secret it keeps and the run that kept it. `fabric rollback` of
//! that run puts its data back and deletes it; the next rotation of the same Secret deletes it,
//! the data it renewed having been in use since.
//!
//! The builders are pure; the async functions read and write through `providers::kube`, and
//! their errors never carry the data.

use kube::Client;
use serde_json::{Value, json};

use crate::providers::kube::{self as k, KubeError};

/// The Secret (name) a kept Secret holds the old data of.
pub const PRIOR_OF: &str = "fabric.io/prior-of";
/// The run that kept it.
pub const PRIOR_RUN: &str = "fabric.io/prior-run";

/// The kept Secret's name: `<name>.prior-<run>` (a run id lowercased: a Secret's name is a DNS
/// subdomain, RFC 1123, lowercase).
pub fn kept_name(name: &str, run: &str) -> String {
    format!("{name}.prior-{}", run.to_ascii_lowercase())
}

/// The identity of the Secret `ns/name`.
pub fn secret_id(ns: &str, name: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": name, "namespace": ns } })
}

/// The kept copy of `live` (a Secret as read) for `run`: its type and data, under
/// [`kept_name`], annotated with what it keeps.
pub fn kept_object(live: &Value, run: &str) -> Value {
    let (ns, name) = (
        live["metadata"]["namespace"].as_str().unwrap_or("default"),
        live["metadata"]["name"].as_str().unwrap_or_default(),
    );
    let mut obj = secret_id(ns, &kept_name(name, run));
    obj["metadata"]["annotations"] = json!({ PRIOR_OF: name, PRIOR_RUN: run });
    obj["type"] = live.get("type").cloned().unwrap_or_else(|| json!("Opaque"));
    obj["data"] = live.get("data").cloned().unwrap_or_else(|| json!({}));
    obj
}

/// The Secret `ns/name` as the kept Secret `kept` holds it: its type and data, with the labels
/// and annotations the Secret has now (`live`): fabric's field manager applies them again, so
/// server-side apply keeps them (a field its manager stops sending is removed).
pub fn restored_object(kept: &Value, live: Option<&Value>, ns: &str, name: &str) -> Value {
    let mut obj = secret_id(ns, name);
    for m in ["labels", "annotations"] {
        if let Some(v) = live.and_then(|l| l["metadata"].get(m)).filter(|v| v.is_object()) {
            obj["metadata"][m] = v.clone();
        }
    }
    obj["type"] = kept.get("type").cloned().unwrap_or_else(|| json!("Opaque"));
    obj["data"] = kept.get("data").cloned().unwrap_or_else(|| json!({}));
    obj
}

/// Keeps the live Secret `ns/name` for `run`; None when it does not exist (nothing to keep).
/// Returns the kept Secret's name.
pub async fn keep(client: &Client, ns: &str, name: &str, run: &str) -> Result<Option<String>, KubeError> {
    let Some(live) = k::get(client, &secret_id(ns, name)).await? else { return Ok(None) };
    let kept = kept_object(&live, run);
    k::apply(client, &kept, true).await?;
    Ok(Some(kept_name(name, run)))
}

/// Puts back the data `run` kept of the Secret `ns/name` and deletes the kept Secret. False when
/// `run` kept nothing of it (an apply's Secret, or a rotation rolled back already).
pub async fn restore(client: &Client, ns: &str, name: &str, run: &str) -> Result<bool, KubeError> {
    let kept_id = secret_id(ns, &kept_name(name, run));
    let Some(kept) = k::get(client, &kept_id).await? else { return Ok(false) };
    if kept["metadata"]["annotations"][PRIOR_OF] != name || kept["metadata"]["annotations"][PRIOR_RUN] != run {
        return Ok(false);
    }
    let live = k::get(client, &secret_id(ns, name)).await?;
    k::apply(client, &restored_object(&kept, live.as_ref(), ns, name), true).await?;
    k::delete(client, &kept_id).await?;
    Ok(true)
}

/// Deletes what earlier runs kept of the Secret `ns/name` (all but `run`'s); their names.
pub async fn drop_older(client: &Client, ns: &str, name: &str, run: &str) -> Result<Vec<String>, KubeError> {
    let (api, _) = k::api_for(client, &secret_id(ns, name));
    let lp = kube::api::ListParams::default();
    let listed = k::call(&format!("list Secrets in {ns}"), || api.list(&lp)).await?;
    let mut dropped = Vec::new();
    for s in listed.items {
        let a = s.metadata.annotations.clone().unwrap_or_default();
        let kept_by = a.get(PRIOR_RUN).map(String::as_str);
        if a.get(PRIOR_OF).map(String::as_str) == Some(name) && kept_by.is_some() && kept_by != Some(run) {
            let n = s.metadata.name.clone().unwrap_or_default();
            k::delete(client, &secret_id(ns, &n)).await?;
            dropped.push(n);
        }
    }
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_secret_is_named_after_the_secret_and_run_and_holds_its_data() {
        let live = json!({ "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": { "name": "karmada-api", "namespace": "argocd", "resourceVersion": "7",
                "labels": { "app.kubernetes.io/managed-by": "fabric" } },
            "data": { "config": "b2xk" } });
        let kept = kept_object(&live, "20261202T1330Z-42");
        assert_eq!(kept["metadata"]["name"], "karmada-api.prior-20261202t1330z-42");
        assert_eq!(kept["metadata"]["namespace"], "argocd");
        assert_eq!(kept["metadata"]["annotations"][PRIOR_OF], "karmada-api");
        assert_eq!(kept["metadata"]["annotations"][PRIOR_RUN], "20261202T1330Z-42");
        assert!(kept["metadata"].get("labels").is_none(), "never prunable: no managed-by label");
        assert!(kept["metadata"].get("resourceVersion").is_none());
        assert_eq!((&kept["type"], &kept["data"]), (&live["type"], &live["data"]));
        let back = restored_object(&kept, None, "argocd", "karmada-api");
        assert_eq!(back["metadata"], json!({ "name": "karmada-api", "namespace": "argocd" }));
        let back = restored_object(&kept, Some(&live), "argocd", "karmada-api");
        assert_eq!(back["metadata"]["labels"], live["metadata"]["labels"], "fabric's labels stay");
        assert_eq!((&back["type"], &back["data"]), (&live["type"], &live["data"]));
    }
}
