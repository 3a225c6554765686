//! Loading a topology: YAML tree, schema pass, typed model, rules.

use std::path::Path as FsPath;
use std::sync::{Arc, OnceLock};

use super::model::Topology;
use super::problem::{Diag, Problem, Severity};
use super::tree::{Node, Path, Span, Value};
use super::{rules, schema_check};

/// A topology that passed every check (it may still carry warnings).
#[derive(Debug)]
pub struct Loaded {
    pub topology: Topology,
    pub tree: Node,
    pub file: String,
    pub text: Arc<String>,
    pub warnings: Vec<Diag>,
}

impl Loaded {
    /// Ties a problem found later (by the catalog, a plan) to this file's positions.
    pub fn diag(&self, p: Problem) -> Diag {
        Diag::new(p, Some(&self.tree), &self.file, &self.text)
    }
}

/// Why a topology could not be used: its diagnostics (errors and warnings), or an I/O failure.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read topology file {file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{} in {file}", count(.diags))]
    Invalid { file: String, diags: Vec<Diag> },
    /// A device, pipe or directory: reading it could block or never end.
    #[error("{file} is not a regular file")]
    NotRegular { file: String },
    #[error("{file} is {size} bytes; a topology is at most {max} bytes")]
    TooLarge { file: String, size: u64, max: u64 },
}

fn count(diags: &[Diag]) -> String {
    let e = diags.iter().filter(|d| d.problem.severity == Severity::Error).count();
    let w = diags.len() - e;
    let plural = |n: usize, s: &str| format!("{n} {s}{}", if n == 1 { "" } else { "s" });
    match w {
        0 => plural(e, "error"),
        _ => format!("{}, {}", plural(e, "error"), plural(w, "warning")),
    }
}

/// The JSON Schema of the topology file, generated from the model types.
pub fn schema() -> &'static serde_json::Value {
    static SCHEMA: OnceLock<serde_json::Value> = OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::to_value(schemars::schema_for!(Topology)).expect("schema serializes"))
}

/// The largest topology file read: the whole seed is under 8 KiB, so this leaves room for
/// hundreds of sites while `/dev/zero` or a runaway generator is refused at once.
pub const MAX_TOPOLOGY_BYTES: u64 = 1 << 20;

/// Reads a topology file: a regular file of at most [`MAX_TOPOLOGY_BYTES`], read with that
/// bound (a file that grows while read is refused too), then [`load_str`].
pub fn load_file(path: &FsPath) -> Result<Loaded, LoadError> {
    load_str(&path.display().to_string(), read_file(path)?)
}

/// The text of a topology file, read as [`load_file`] reads it (`fabric fmt` reads it so).
pub fn read_file(path: &FsPath) -> Result<String, LoadError> {
    use std::io::Read;
    let file = path.display().to_string();
    let io = |source| LoadError::Io { file: file.clone(), source };
    let f = std::fs::File::open(path).map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(LoadError::NotRegular { file });
    }
    let too_large = |size| LoadError::TooLarge { file: file.clone(), size, max: MAX_TOPOLOGY_BYTES };
    if meta.len() > MAX_TOPOLOGY_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_TOPOLOGY_BYTES + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > MAX_TOPOLOGY_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error())))
}

/// Parses and checks a topology. Never panics, whatever the input.
pub fn load_str(file: &str, text: String) -> Result<Loaded, LoadError> {
    let text = Arc::new(text);
    let invalid = |problems: Vec<Problem>, tree: Option<&Node>| LoadError::Invalid {
        file: file.to_string(),
        diags: problems.into_iter().map(|p| Diag::new(p, tree, file, &text)).collect(),
    };

    let tree = match parse_tree(&text) {
        Ok(t) => t,
        Err(p) => return Err(invalid(vec![*p], None)),
    };
    let hidden = control_characters(&tree);
    if !hidden.is_empty() {
        return Err(invalid(hidden, Some(&tree)));
    }
    let structural = schema_check::check(&tree, schema());
    if !structural.is_empty() {
        return Err(invalid(structural, Some(&tree)));
    }
    let topology: Topology = match serde_json::from_value(tree.to_json()) {
        Ok(t) => t,
        // The schema pass should have caught this; report rather than panic if it did not.
        Err(e) => {
            let p = Problem::error("topology::type", Path::root(), format!("the topology does not fit the model: {e}"))
                .help("please report this: the schema pass accepted a file the model rejects");
            return Err(invalid(vec![p], Some(&tree)));
        }
    };
    let problems = rules::check(&topology);
    if problems.iter().any(|p| p.severity == Severity::Error) {
        return Err(invalid(problems, Some(&tree)));
    }
    let warnings = problems.into_iter().map(|p| Diag::new(p, Some(&tree), file, &text)).collect();
    Ok(Loaded { topology, tree, file: file.to_string(), text, warnings })
}

/// Characters no value of a topology may hold: C0 and C1 controls (a newline in a name would
/// start a new line in a config file or a command) and the bidirectional overrides that make a
/// terminal show text other than what it is. Tabs are no exception: nothing needs them.
pub fn is_hidden(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Every key and string value holding a hidden character, each a problem at its place.
fn control_characters(tree: &Node) -> Vec<Problem> {
    let mut out = Vec::new();
    walk_strings(tree, Path::root(), &mut |path, s| {
        if let Some(c) = s.chars().find(|c| is_hidden(*c)) {
            out.push(
                Problem::error(
                    "topology::control-character",
                    path,
                    format!("{:?} holds the control character U+{:04X}", s.chars().take(40).collect::<String>(), c as u32),
                )
                .label("control character")
                .help("names and values are printable text: remove it (a newline here would become a new line in a router's configuration)"),
            );
        }
    });
    out
}

fn walk_strings(node: &Node, path: Path, f: &mut dyn FnMut(Path, &str)) {
    match &node.value {
        Value::Str(s) => f(path, s),
        Value::Seq(items) => {
            for (i, n) in items.iter().enumerate() {
                walk_strings(n, path.index(i), f);
            }
        }
        Value::Map(entries) => {
            for e in entries {
                f(path.key(&e.key), &e.key);
                walk_strings(&e.value, path.key(&e.key), f);
            }
        }
        _ => {}
    }
}

/// Deepest nesting accepted in a topology file.
pub const MAX_DEPTH: usize = 32;

pub(crate) fn parse_tree(text: &str) -> Result<Node, Box<Problem>> {
    if text.trim().is_empty() || text.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) {
        return Err(Box::new(
            Problem::error("topology::syntax", Path::root(), "the topology file is empty")
                .label("nothing here")
                .help("start from topology.example.yaml (`fabric schema` describes every key)")
                .at(Span::default()),
        ));
    }
    // A topology nests about eight levels deep. A tight depth budget keeps every recursive walk
    // (the parser's, the schema pass's, dropping the tree) far from the stack's end, whatever
    // the input: serde-saphyr refuses deeper input with an error instead.
    let mut budget = serde_saphyr::budget::Budget::default();
    budget.max_depth = MAX_DEPTH;
    let opts = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::PassThrough,
        with_snippet: false,
        budget: Some(budget),
    };
    serde_saphyr::from_str_with_options::<Node>(text, opts).map_err(|e| {
        let span = e
            .location()
            .map(|l| {
                let s = l.span();
                match s.byte_offset() {
                    Some(o) => Span { offset: o as usize, len: s.byte_len().unwrap_or(0) as usize },
                    None => offset_of(text, l.line() as usize, l.column() as usize),
                }
            })
            .unwrap_or_default();
        let msg = e.to_string();
        let msg = msg.lines().next().unwrap_or("invalid YAML").to_string();
        if msg.contains("budget breached") {
            let what = if msg.contains("Depth") { format!("nesting deeper than {MAX_DEPTH} levels") } else { msg };
            return Box::new(
                Problem::error(
                    "topology::syntax",
                    Path::root(),
                    format!("the file is too large or deep to be a topology: {what}"),
                )
                .label("here")
                .help("a topology nests about eight levels deep; look for runaway brackets or a file that is not a topology")
                .at(span),
            );
        }
        Box::new(
            Problem::error("topology::syntax", Path::root(), format!("invalid YAML: {msg}"))
                .label("here")
                .help("fix the YAML syntax; indentation must be spaces, and `key: value` needs a space after the colon")
                .at(span),
        )
    })
}

/// Byte offset of a 1-based line and column.
fn offset_of(text: &str, line: usize, column: usize) -> Span {
    let mut off = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            let col: usize = l.chars().take(column.saturating_sub(1)).map(char::len_utf8).sum();
            return Span { offset: off + col, len: 0 };
        }
        off += l.len();
    }
    Span { offset: text.len(), len: 0 }
}
