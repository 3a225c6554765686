//! Every diagnostic code used in the source is documented in docs/errors.md.

use std::path::Path;

fn codes_in(dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            codes_in(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            for prefix in [
                "\"topology::",
                "\"plan::",
                "\"catalog::",
                "\"graph::",
                "\"fabric::",
                "\"render::",
                "\"apply::",
                "\"rollback::",
                "\"rotate::",
                "\"consistency::",
                "\"state::",
                "\"lock::",
                "\"runs::",
                "\"verify::",
                "\"fmt::",
            ] {
                for (i, _) in text.match_indices(prefix) {
                    let rest = &text[i + 1..];
                    let end = rest.find('"').unwrap();
                    out.push(rest[..end].to_string());
                }
            }
        }
    }
}

#[test]
fn every_code_is_in_errors_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut codes = Vec::new();
    codes_in(&root.join("src"), &mut codes);
    codes.sort();
    codes.dedup();
    assert!(codes.len() > 20, "found the codes: {codes:?}");
    let doc = std::fs::read_to_string(root.join("docs/errors.md")).unwrap();
    let missing: Vec<&String> = codes.iter().filter(|c| !doc.contains(&format!("`{c}`"))).collect();
    assert!(missing.is_empty(), "codes not in docs/errors.md: {missing:?}");
}
