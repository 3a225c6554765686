//! Live state: where the targets are, what they hold now, and what fabric made that the
//! topology no longer has.

pub mod connect;
pub mod local_files;
pub mod locks;
pub mod observe;
pub mod pool;
pub mod prune;
pub mod served_cert;
pub mod snapshot;
pub mod versions;
