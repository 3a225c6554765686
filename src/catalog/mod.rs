//! The step catalog (phases A–D of the seed, plus the gateway) and its per-topology graph.

pub mod graph;
pub mod refusal;
pub mod spec;
pub mod view;

pub use graph::{Instance, StepGraph, Want};
pub use spec::Catalog;
