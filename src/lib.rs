//! fabric as a library: the binary is a thin shell over these modules (see docs/architecture.md).

// Every function fits on a screen or two: clippy.toml sets the limit (100 lines).
#![deny(clippy::too_many_lines)]

pub mod addr;
pub mod apply;
pub mod catalog;
pub mod command;
pub mod desired;
pub mod live;
pub mod operation;
pub mod plan;
pub mod providers;
pub mod steps;
pub mod style;
pub mod topology;
pub mod transport;
