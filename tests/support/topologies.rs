//! The topologies the tests check as a set: the example and every topology of tests/data.
//! Shared by the tests that include it with `#[path = "support/topologies.rs"] mod topologies;`.

pub const TOPOLOGIES: &[(&str, &str)] = &[
    ("example", include_str!("../../topology.example.yaml")),
    ("three-sites", include_str!("../data/three-sites.yaml")),
    ("multikueue-vm", include_str!("../data/multikueue-vm.yaml")),
    ("lab-full", include_str!("../data/lab-full.yaml")),
    ("lab-linux", include_str!("../data/lab-linux.yaml")),
    ("lab-vyos", include_str!("../data/lab-vyos.yaml")),
];
