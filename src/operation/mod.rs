//! Operations: plan, apply, rollback, verify and render as whole units of work over a
//! workspace (the topology, catalog, graph and targets resolved once from the arguments).

pub mod render;
pub mod workspace;
