//! The topology: the operator's declaration of the whole fabric, loaded with source positions.

pub mod airgap;
pub mod airgap_digests;
pub mod gateway;
pub mod gpus;
pub mod k3s_release;
pub mod model;
pub mod net;
pub mod problem;
pub mod queues;
pub mod rules;
pub mod schema_check;
pub mod tree;
pub mod userinfo;
pub mod wgkey;

mod load;

pub use load::{LoadError, Loaded, MAX_TOPOLOGY_BYTES, is_hidden, load_file, load_str, read_file, schema};
pub use model::Topology;
pub mod fmt;
pub mod schema_doc;
