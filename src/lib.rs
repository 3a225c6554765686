//! fabric as a library: the binary is a thin shell over these modules (see docs/architecture.md).

pub mod catalog;
pub mod cli;
pub mod command;
pub mod engine;
pub mod plan;
pub mod render;
pub mod resources;
pub mod style;
pub mod topology;
pub mod transport;
