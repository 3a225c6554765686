//! README's table "What is proven, and against what" against the suite: every test it names
//! exists (a test file, a test function, or a module with unit tests), every `not_covered_*`
//! ignored test is named in its "not proven here" column, and every ignored test is such a
//! `not_covered_*` test whose reason starts with `NOT COVERED:` (the project's rule for what
//! cannot be proven here). A claim that outlives its proof fails here.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The rows of the table, each as its cells.
fn table() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme.find("## What is proven, and against what").expect("the proof table's section");
    readme[start..]
        .lines()
        .skip_while(|l| !l.starts_with("| step / check"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect())
        .collect()
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path, out: &mut Vec<(std::path::PathBuf, String)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
        }
    }
}

fn all_sources() -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    for d in ["src", "tests", "benches", "crates/testkit/src"] {
        sources(&root().join(d), &mut out);
    }
    out
}

/// Whether `name` is a test target, a function, or a module of `src` with unit tests.
fn exists(name: &str, code: &[(std::path::PathBuf, String)]) -> bool {
    let r = root();
    if r.join(format!("tests/{name}.rs")).exists() || r.join(format!("benches/{name}.rs")).exists() {
        return true;
    }
    if name.contains("::") {
        let path = name.replace("::", "/");
        let file = [r.join(format!("src/{path}.rs")), r.join(format!("src/{path}/mod.rs"))];
        let dir = r.join(format!("src/{path}"));
        let tested = |t: &str| t.contains("#[test]") || t.contains("mod tests;");
        return file.iter().any(|f| std::fs::read_to_string(f).is_ok_and(|t| tested(&t)))
            || (dir.is_dir() && code.iter().any(|(p, t)| p.starts_with(&dir) && tested(t)));
    }
    code.iter().any(|(_, t)| t.contains(&format!("fn {name}(")))
}

#[test]
fn every_test_the_table_names_exists() {
    let code = all_sources();
    let rows = table();
    assert!(rows.len() > 10, "the table was not found: {rows:?}");
    let mut missing = Vec::new();
    for row in &rows {
        assert_eq!(row.len(), 5, "a row of five cells: {row:?}");
        for name in backticked(&row[3]) {
            if !exists(&name, &code) {
                missing.push(format!("{}: `{name}`", row[0]));
            }
        }
    }
    assert!(missing.is_empty(), "the proof table names tests that do not exist:\n{}", missing.join("\n"));
}

#[test]
fn every_ignored_test_is_a_named_not_covered_test() {
    let mut code = Vec::new();
    sources(&root().join("tests"), &mut code);
    let rows = table();
    let not_proven: String = rows.iter().map(|r| r[4].as_str()).collect::<Vec<_>>().join("\n");
    let mut problems = Vec::new();
    for (path, text) in &code {
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if !l.trim_start().starts_with("#[ignore") {
                continue;
            }
            let Some(f) = lines[i + 1..].iter().find(|l| l.trim_start().starts_with("fn ")) else { continue };
            let name = f.trim_start().trim_start_matches("fn ").split('(').next().unwrap_or_default();
            let at = format!("{}:{}", path.strip_prefix(root()).unwrap_or(path).display(), i + 1);
            if !l.contains("#[ignore = \"NOT COVERED: ") {
                problems.push(format!("{at}: the ignore reason of {name} does not start with `NOT COVERED:`"));
            }
            if !name.starts_with("not_covered_") {
                problems.push(format!("{at}: ignored test {name} is not named not_covered_*"));
            } else if !not_proven.contains(&format!("`{name}`")) {
                problems.push(format!("{at}: {name} is not named in the table's \"not proven here\" column"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
