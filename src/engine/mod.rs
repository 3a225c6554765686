//! The engine: read live state over SSH, diff it against the desired state, apply it step by
//! step with rollback points, and roll back.

pub mod apply;
pub mod check;
pub mod confirm;
pub mod diff;
pub mod host_apply;
pub mod journal;
pub mod kube;
pub mod kube_apply;
pub mod observe;
pub mod providers;
pub mod prune;
pub mod revert;
pub mod secrets;
pub mod verify;
pub mod wait;
