#[path = "support/kube_api.rs"]
mod kube_api;
