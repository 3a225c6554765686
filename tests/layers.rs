//! The house rules of `src/`, enforced: each layer imports only from the layers below it, no two
//! modules import each other (other than a parent and its children), and no `Result<_, String>`.
//!
//! The layers, top to bottom (docs/architecture.md draws them):
//! `command` → `operation` → `steps` / `plan` / `apply` → `desired` / `live` / `providers` →
//! `catalog` / `transport` → `topology` (with `style`, which imports nothing of fabric's).
//!
//! References are read from the source text: every `crate::a::b` path (in `use` lines and in
//! code) and every `super::` path, resolved to the deepest module that exists. Comments and
//! string literals are skipped, so a doc comment naming a module is not an import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layer of each top-level module; higher may import lower or equal, never higher.
const LAYERS: &[(&str, u8)] = &[
    ("cli", 6),
    ("command", 6),
    ("operation", 5),
    ("steps", 4),
    ("plan", 4),
    ("apply", 4),
    ("desired", 3),
    ("live", 3),
    ("providers", 3),
    ("catalog", 2),
    ("transport", 2),
    ("topology", 1),
    ("style", 1),
    ("addr", 1),
];

fn layer(module: &str) -> u8 {
    let top = module.split("::").next().unwrap_or_default();
    match LAYERS.iter().find(|(m, _)| *m == top) {
        Some((_, l)) => *l,
        None => panic!("module `{top}` has no layer: add it to LAYERS here and to docs/architecture.md"),
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/apply/kube.rs` → `apply::kube`; `src/apply/mod.rs` → `apply`. None for the crate roots.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let parts: Vec<String> = match parts.last().map(String::as_str) {
        Some("mod") => parts[..parts.len() - 1].to_vec(),
        _ => parts,
    };
    match parts.as_slice() {
        [] => None,
        [one] if one == "lib" || one == "main" => None,
        _ => Some(parts.join("::")),
    }
}

/// The source without comments, string and char literals (so their text is no import).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                // Raw string: r"..." or r#"..."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                j += 1;
                let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                i = j + close.len();
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') || (b.get(i + 1) == Some(&b'\\')) => {
                // A char literal ('x' or '\n'); lifetimes ('a) have no closing quote nearby.
                let mut j = i + 1;
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// Paths a file refers to: `crate::…` and `super::…`, as module paths (not yet resolved).
fn references(module: &str, is_mod_rs: bool, code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let path = regex::Regex::new(r"\b(crate|super)((?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))+)").unwrap();
    for c in path.captures_iter(code) {
        let rest: Vec<&str> = c[2].trim_start_matches("::").split("::").collect();
        let mut base: Vec<&str> = if &c[1] == "crate" { vec![] } else { module.split("::").collect() };
        if &c[1] == "super" {
            // `super` of `a::b` (a file b.rs) is `a`; of `a` (a/mod.rs) it is the crate root.
            if !is_mod_rs || !base.is_empty() {
                base.pop();
            }
        }
        let mut parts = base;
        for p in rest {
            if p == "super" {
                parts.pop();
            } else {
                parts.push(p);
            }
        }
        out.insert(parts.join("::"));
    }
    out
}

/// The deepest module of `known` that `path` starts with.
fn resolve(path: &str, known: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find(|m| known.contains(m))
}

fn related(a: &str, b: &str) -> bool {
    a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
}

struct House {
    /// module → modules it refers to (resolved, itself excluded).
    edges: BTreeMap<String, BTreeSet<String>>,
    /// module → its file's code (comments and strings removed).
    code: BTreeMap<String, (PathBuf, String)>,
}

fn house() -> House {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut code = BTreeMap::new();
    for f in &all {
        if let Some(m) = module_of(&src, f) {
            code.insert(m, (f.clone(), code_only(&std::fs::read_to_string(f).unwrap())));
        }
    }
    let known: BTreeSet<String> = code.keys().cloned().collect();
    let mut edges = BTreeMap::new();
    for (m, (f, text)) in &code {
        let is_mod = f.file_name().is_some_and(|n| n == "mod.rs");
        let refs: BTreeSet<String> =
            references(m, is_mod, text).iter().filter_map(|p| resolve(p, &known)).filter(|r| r != m).collect();
        edges.insert(m.clone(), refs);
    }
    House { edges, code }
}

#[test]
fn no_layer_imports_from_a_layer_above_it() {
    let h = house();
    let mut bad = Vec::new();
    for (m, refs) in &h.edges {
        for r in refs {
            if layer(r) > layer(m) {
                bad.push(format!("{m} (layer {}) uses {r} (layer {})", layer(m), layer(r)));
            }
        }
    }
    assert!(bad.is_empty(), "imports from a layer above:\n  {}", bad.join("\n  "));
}

#[test]
fn no_import_circle_other_than_a_parent_and_its_children() {
    let h = house();
    let mut g = petgraph_free::Graph::default();
    for (m, refs) in &h.edges {
        for r in refs.iter().filter(|r| !related(m, r)) {
            g.edge(m, r);
        }
    }
    let cycles = g.cycles();
    assert!(cycles.is_empty(), "import circles:\n  {}", cycles.join("\n  "));
}

#[test]
fn no_result_with_a_string_error() {
    let h = house();
    let mut bad = Vec::new();
    for (m, (f, text)) in &h.code {
        for (i, line) in text.lines().enumerate() {
            if string_errors(line) > 0 {
                bad.push(format!("{}:{} ({m}): {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(bad.is_empty(), "errors are types, not strings:\n  {}", bad.join("\n  "));
}

/// How many `Result<T, String>` a line holds: the generic arguments are split at their top-level
/// comma, so `Result<BTreeMap<String, String>, E>` is not one.
fn string_errors(line: &str) -> usize {
    let mut n = 0;
    for (at, _) in line.match_indices("Result<") {
        let args = &line[at + "Result<".len()..];
        let (mut depth, mut comma, mut end) = (0i32, None, None);
        for (i, c) in args.char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => comma = Some(i),
                _ => {}
            }
        }
        if let (Some(c), Some(e)) = (comma, end)
            && args[c + 1..e].trim() == "String"
        {
            n += 1;
        }
    }
    n
}

#[test]
fn the_reader_sees_imports_and_skips_comments_and_strings() {
    let code = code_only("use crate::a::b; // crate::c\nlet s = \"crate::d\"; /* crate::e */ super::f::g();");
    let refs = references("x::y", false, &code);
    assert_eq!(refs, BTreeSet::from(["a::b".to_string(), "x::f::g".to_string()]));
    let refs = references("x", true, "super::z::w");
    assert_eq!(refs, BTreeSet::from(["z::w".to_string()]));
    assert!(related("apply", "apply::kube") && !related("apply", "applyx"));
    assert_eq!(string_errors("fn f() -> Result<(bool, BTreeMap<String, String>), ApplyError> {"), 0);
    assert_eq!(string_errors("fn f() -> Result<Option<Vec<u8>>, String> {"), 1);
    assert_eq!(string_errors("F: Fn() -> Fut<Output = Result<Readiness, String>>,"), 1);
}

/// A tiny directed graph with strongly connected components (Tarjan), to keep this test free of
/// fabric's own dependencies.
mod petgraph_free {
    use std::collections::{BTreeMap, BTreeSet};

    #[derive(Default)]
    pub struct Graph {
        out: BTreeMap<String, BTreeSet<String>>,
    }

    impl Graph {
        pub fn edge(&mut self, a: &str, b: &str) {
            self.out.entry(a.into()).or_default().insert(b.into());
            self.out.entry(b.into()).or_default();
        }

        /// Each strongly connected component of more than one module, as `a → b → … `.
        pub fn cycles(&self) -> Vec<String> {
            let mut st = Tarjan::default();
            for n in self.out.keys() {
                if !st.index.contains_key(n) {
                    st.visit(n, &self.out);
                }
            }
            st.sccs.into_iter().filter(|c| c.len() > 1).map(|c| c.join(" ↔ ")).collect()
        }
    }

    #[derive(Default)]
    struct Tarjan {
        next: usize,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        sccs: Vec<Vec<String>>,
    }

    impl Tarjan {
        fn visit(&mut self, n: &str, out: &BTreeMap<String, BTreeSet<String>>) {
            self.index.insert(n.into(), self.next);
            self.low.insert(n.into(), self.next);
            self.next += 1;
            self.stack.push(n.into());
            self.on.insert(n.into());
            for m in &out[n] {
                if !self.index.contains_key(m) {
                    self.visit(m, out);
                    let l = self.low[n].min(self.low[m]);
                    self.low.insert(n.into(), l);
                } else if self.on.contains(m) {
                    let l = self.low[n].min(self.index[m]);
                    self.low.insert(n.into(), l);
                }
            }
            if self.low[n] == self.index[n] {
                let mut c = Vec::new();
                while let Some(m) = self.stack.pop() {
                    self.on.remove(&m);
                    let done = m == n;
                    c.push(m);
                    if done {
                        break;
                    }
                }
                c.sort();
                self.sccs.push(c);
            }
        }
    }
}
