//! Generated files in the repository match what the binary generates.
//! `FABRIC_BLESS=1 cargo test --test generated_docs` rewrites them after an intended change.

fn check(path: &str, generated: &str) {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    if std::env::var_os("FABRIC_BLESS").is_some() {
        std::fs::write(&full, generated).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&full).unwrap_or_default();
    assert!(
        on_disk == generated,
        "{path} is out of date: run `FABRIC_BLESS=1 cargo test --test generated_docs` and commit the result"
    );
}

#[test]
fn topology_schema_json_is_current() {
    check("docs/topology.schema.json", &fabric::command::schema::json());
}

#[test]
fn topology_reference_is_current() {
    let md = fabric::command::schema::markdown();
    // Every field of every section is documented (no empty description cell).
    for line in md.lines().filter(|l| l.starts_with("| `")) {
        assert!(!line.trim_end().ends_with("|  |"), "undocumented field: {line}");
    }
    check("docs/topology.md", &md);
}

/// The schema file editors use accepts the example and rejects a misspelled key.
#[test]
fn the_example_validates_against_the_schema_file() {
    use fabric::topology::schema_check;
    use fabric::topology::tree::Node;
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/topology.schema.json")).unwrap(),
    )
    .unwrap();
    let example = include_str!("../topology.example.yaml");
    let tree: Node = serde_saphyr::from_str(example).unwrap();
    assert_eq!(schema_check::check(&tree, &schema), vec![], "the example fits the schema");
    let bad: Node =
        serde_saphyr::from_str(&example.replace("  karmada_host: host-cluster", "  karmada_hots: host-cluster"))
            .unwrap();
    let problems = schema_check::check(&bad, &schema);
    assert!(
        problems.iter().any(|p| p.code == "topology::unknown-key" && p.message.contains("karmada_hots")),
        "{problems:?}"
    );
    // The editor hint points at the schema file.
    assert!(example.starts_with("# yaml-language-server: $schema=./docs/topology.schema.json"));
}
