//! Live state: where the targets are, what they hold now, and what fabric made that the
//! topology no longer has.

pub mod observe;
pub mod prune;
