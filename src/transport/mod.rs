//! How fabric reaches its targets: SSH (routers, hosts) with pure command builders.

pub mod batch;
pub mod retry;
pub mod shell;
pub mod ssh;
pub mod ssh_config;
