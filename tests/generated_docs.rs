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
