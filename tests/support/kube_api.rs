#![allow(dead_code)]
#[path = "kube_schema.rs"]
mod kube_schema;
pub use kube_schema::Schemas;
use hyper as _;
