//! Checks VyOS configuration commands (`set ...` / `delete ...`) against VyOS's own interface
//! definitions: the upstream `interface-definitions/*.xml.in` files copied to
//! `shared/specs/vyos/interface-definitions/` (see `shared/specs/SOURCES.md`).
//!
//! Self-contained test-support module: use it with `use fabric_testkit::vyos_spec;`. It needs the
//! `regex` and `roxmltree` crates and nothing from fabric.
//!
//! Loading: every `*.xml.in` file is preprocessed like VyOS's build does with cpp: each
//! `#include <include/...>` line is replaced, recursively, by the text of that file (paths are
//! relative to the interface-definitions directory). The resulting XML is parsed and the trees of
//! all files are merged (several files define e.g. `protocols static`). A file that fails to load is
//! skipped with a recorded warning (see [`VyosSpec::warnings`]).
//!
//! Checking follows VyOS semantics:
//! * `node`: the next word must be one of its children;
//! * `tagNode`: the next word is the tag value, checked against the tagNode's constraint, then
//!   children follow;
//! * `leafNode`: exactly one value follows (none for `<valueless/>` leaves);
//! * a constraint with several entries (`<regex>`s and `<validator>`s) accepts a value when ANY
//!   entry accepts it (VyOS's `validate-value` OR semantics);
//! * regexes must match the whole value. VyOS wraps them textually as `^re$`; this module uses
//!   `^(?:re)$`, which is stricter only for regexes with a top-level `|` (never accepts a value VyOS
//!   rejects);
//! * a validator this module does not implement is never skipped: unless another entry of the same
//!   constraint accepts the value, the check fails with `validator NAME not implemented`.
//!
//! `set` may stop after a plain node or after a tag value (VyOS creates the empty node), but not
//! at a tagNode without its tag or at a leaf without its value. `delete` may stop anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};

/// Validator names (the first word of `<validator name=...>`) this module implements.
pub const IMPLEMENTED_VALIDATORS: &[&str] = &[
    "numeric",
    "ipv4",
    "ipv4-address",
    "ipv4-prefix",
    "ipv4-host",
    "ipv6",
    "ipv6-address",
    "ipv6-prefix",
    "ipv6-link-local",
    "ip-address",
    "ip-prefix",
    "ip-host",
    "ip-cidr",
    "base64",
    "fqdn",
    "mac-address",
    "ipv6-eui64-prefix",
    "port-multi",
    "ip-protocol",
];

/// Old (VyOS 1.2 `crux` / 1.3 `equuleus`) keywords that were renamed, with the 1.4+ replacement,
/// keyed by the schema path (node names, tag values left out) of the parent. Source:
/// `shared/specs/SOURCES.md` ("Older syntax").
const LEGACY_KEYWORDS: &[(&[&str], &str, &str)] = &[
    (&["interfaces", "wireguard", "peer"], "pubkey", "public-key"),
    (&["interfaces", "wireguard", "peer"], "endpoint", "address' and 'port"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Node,
    TagNode,
    LeafNode,
}

impl NodeKind {
    fn xml_name(self) -> &'static str {
        match self {
            NodeKind::Node => "node",
            NodeKind::TagNode => "tagNode",
            NodeKind::LeafNode => "leafNode",
        }
    }
}

/// One entry of a `<constraint>`.
#[derive(Debug, Clone)]
pub enum ConstraintEntry {
    /// `<regex>`; `compiled` is `Err` when the Rust regex engine cannot compile it (the check then
    /// reports it instead of skipping it).
    Regex { source: String, compiled: Result<regex::Regex, String> },
    /// `<validator name="NAME [args]" argument="args"/>`, name split from its arguments.
    Validator { name: String, args: Vec<String> },
    /// Any other element inside `<constraint>`: never silently accepted.
    Unknown { element: String },
}

#[derive(Debug, Clone, Default)]
pub struct Properties {
    pub help: Option<String>,
    pub constraints: Vec<ConstraintEntry>,
    pub constraint_error_message: Option<String>,
    pub valueless: bool,
    pub multi: bool,
}

#[derive(Debug, Clone)]
pub struct SpecNode {
    pub name: String,
    pub kind: NodeKind,
    pub properties: Properties,
    pub children: BTreeMap<String, SpecNode>,
    /// The `*.xml.in` files that defined (part of) this node.
    pub files: BTreeSet<String>,
}

#[derive(Debug, Clone)]
pub struct VyosSpec {
    dir: PathBuf,
    root: BTreeMap<String, SpecNode>,
    files_loaded: Vec<String>,
    warnings: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Set,
    Delete,
}

impl VyosSpec {
    /// Loads every definition under `dir`; Err says what is missing.
    pub fn load(dir: &Path) -> Result<VyosSpec, String> {
        if !dir.is_dir() {
            return Err(format!("VyOS interface-definitions directory {} does not exist", dir.display()));
        }
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".xml.in"))
            .collect();
        names.sort();
        if names.is_empty() {
            return Err(format!("no *.xml.in interface definitions in {}", dir.display()));
        }
        let mut spec =
            VyosSpec { dir: dir.to_path_buf(), root: BTreeMap::new(), files_loaded: vec![], warnings: vec![] };
        for name in &names {
            match load_file(dir, name) {
                Ok((nodes, warnings)) => {
                    spec.warnings.extend(warnings);
                    for node in nodes {
                        merge_into(&mut spec.root, node, &mut spec.warnings, name);
                    }
                    spec.files_loaded.push(name.clone());
                }
                Err(e) => spec.warnings.push(format!("{name}: skipped: {e}")),
            }
        }
        let required: &[(&[&str], &str)] = &[
            (&["interfaces", "wireguard"], "interfaces_wireguard.xml.in"),
            (&["protocols", "static", "route"], "protocols_static.xml.in"),
        ];
        let mut missing = vec![];
        for (path, file) in required {
            if spec.schema_node(path).is_none() {
                missing.push(format!("`{}` (from {file})", path.join(" ")));
            }
        }
        if !missing.is_empty() {
            return Err(format!(
                "VyOS definitions in {} lack {}; warnings: [{}]",
                dir.display(),
                missing.join(", "),
                spec.warnings.join("; ")
            ));
        }
        Ok(spec)
    }

    /// The definitions from ../shared/specs, located from the repository root; Err (with a clear
    /// message naming the path) when absent.
    pub fn from_shared() -> Result<VyosSpec, String> {
        let dir = Self::shared_dir();
        if !dir.is_dir() {
            return Err(format!(
                "VyOS interface definitions not found at {} (expected shared/specs/vyos/interface-definitions \
                 next to the repository, see shared/specs/SOURCES.md)",
                dir.display()
            ));
        }
        Self::load(&dir)
    }

    /// `<repository root>/../shared/specs/vyos/interface-definitions` (see [`crate::repo_root`]).
    pub fn shared_dir() -> PathBuf {
        crate::repo_root().join("../shared/specs/vyos/interface-definitions")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `*.xml.in` files that were loaded and merged.
    pub fn files_loaded(&self) -> &[String] {
        &self.files_loaded
    }

    /// Files skipped (with the reason) and merge conflicts.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The top-level nodes (`interfaces`, `protocols`, `system`, ...).
    pub fn top_level(&self) -> Vec<&str> {
        self.root.keys().map(String::as_str).collect()
    }

    /// A node by its schema path: node names only, tag values left out
    /// (e.g. `["interfaces", "wireguard", "peer", "public-key"]`).
    pub fn schema_node(&self, path: &[&str]) -> Option<&SpecNode> {
        let (first, rest) = path.split_first()?;
        let mut node = self.root.get(*first)?;
        for name in rest {
            node = node.children.get(*name)?;
        }
        Some(node)
    }

    /// Whether a schema path (tag values left out) exists.
    pub fn has_path(&self, path: &[&str]) -> bool {
        self.schema_node(path).is_some()
    }

    /// Validator names used in the subtree at `path` (the whole spec for an empty path).
    pub fn validator_names_under(&self, path: &[&str]) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        if path.is_empty() {
            for node in self.root.values() {
                collect_validators(node, &mut out);
            }
        } else if let Some(node) = self.schema_node(path) {
            collect_validators(node, &mut out);
        }
        out
    }

    /// `<regex>` constraints the Rust regex engine could not compile, as `path: regex: error`
    /// (they make `check` fail for values no other entry accepts, never pass silently).
    pub fn regex_compile_failures(&self) -> Vec<String> {
        fn walk(node: &SpecNode, path: &mut Vec<String>, out: &mut Vec<String>) {
            path.push(node.name.clone());
            for c in &node.properties.constraints {
                if let ConstraintEntry::Regex { source, compiled: Err(e) } = c {
                    out.push(format!("{}: {source}: {e}", path.join(" ")));
                }
            }
            for child in node.children.values() {
                walk(child, path, out);
            }
            path.pop();
        }
        let mut out = vec![];
        for node in self.root.values() {
            walk(node, &mut vec![], &mut out);
        }
        out
    }

    /// Checks every non-empty line that does not start with `#`; returns all failures.
    pub fn check_lines(&self, text: &str) -> Result<(), Vec<String>> {
        let errors: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .filter_map(|line| self.check(line).err().map(|e| format!("{line}: {e}")))
            .collect();
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    /// Checks one configuration command: `set <path...> [value]` or `delete <path...>`. Values may
    /// be single-quoted as VyOS prints them in `show configuration commands`. Anything else is
    /// `Err("not a configuration command ...")`.
    pub fn check(&self, command: &str) -> Result<(), String> {
        let words = tokenize(command)?;
        let op = match words.first().map(String::as_str) {
            Some("set") => Op::Set,
            Some("delete") => Op::Delete,
            Some(other) => {
                return Err(format!(
                    "not a configuration command: `{command}` starts with '{other}' (only `set` and `delete` \
                     are checked)"
                ));
            }
            None => return Err("not a configuration command: empty command".to_string()),
        };
        let verb = &words[0];
        if words.len() == 1 {
            return Err(format!("missing path after '{verb}'"));
        }
        let mut level = &self.root;
        // The words walked so far (including tag values) and the schema path (without them).
        let mut walked: Vec<&str> = vec![];
        let mut schema: Vec<&str> = vec![];
        let mut i = 1;
        loop {
            let word = words[i].as_str();
            let Some(node) = level.get(word) else {
                return Err(unknown_component(word, i + 1, &walked, &schema, level));
            };
            walked.push(word);
            schema.push(&node.name);
            i += 1;
            let here = walked.join(" ");
            match node.kind {
                NodeKind::Node => {
                    if i == words.len() {
                        return Ok(());
                    }
                    level = &node.children;
                }
                NodeKind::TagNode => {
                    if i == words.len() {
                        if op == Op::Delete {
                            return Ok(());
                        }
                        return Err(format!(
                            "missing tag value after '{here}': '{word}' is a tagNode, write `{here} <{}>` \
                             followed by its settings",
                            node.name
                        ));
                    }
                    let tag = words[i].as_str();
                    check_constraints(node, tag).map_err(|why| {
                        format!("tag value '{tag}' (word {}) for '{here}' is not allowed: {why}", i + 1)
                    })?;
                    walked.push(tag);
                    i += 1;
                    if i == words.len() {
                        return Ok(());
                    }
                    level = &node.children;
                }
                NodeKind::LeafNode => {
                    let values = &words[i..];
                    if node.properties.valueless {
                        return match values.first() {
                            None => Ok(()),
                            Some(v) => Err(format!(
                                "'{here}' is a valueless leaf and takes no value, but got '{v}' (word {})",
                                i + 1
                            )),
                        };
                    }
                    match values {
                        [] if op == Op::Delete => return Ok(()),
                        [] => {
                            return Err(format!("missing value for leaf '{here}': write `{verb} {here} <value>`"));
                        }
                        [value] => {
                            return check_constraints(node, value).map_err(|why| {
                                format!("value '{value}' (word {}) for '{here}' is not allowed: {why}", i + 1)
                            });
                        }
                        [first, rest @ ..] => {
                            return Err(format!(
                                "leaf '{here}' takes exactly one value, got '{first}' followed by unexpected \
                                 '{}' (word {}); quote values that contain spaces",
                                rest.join(" "),
                                i + 2
                            ));
                        }
                    }
                }
            }
        }
    }
}

fn collect_validators(node: &SpecNode, out: &mut BTreeSet<String>) {
    for c in &node.properties.constraints {
        if let ConstraintEntry::Validator { name, .. } = c {
            out.insert(name.clone());
        }
    }
    for child in node.children.values() {
        collect_validators(child, out);
    }
}

// ---------------------------------------------------------------------------------------------
// Loading

/// Replaces `#include <...>` lines with the (recursively preprocessed) included file.
fn preprocess(dir: &Path, rel: &str, stack: &mut Vec<String>, out: &mut String) -> Result<(), String> {
    if stack.iter().any(|s| s == rel) {
        return Err(format!("include cycle: {} -> {rel}", stack.join(" -> ")));
    }
    let path = dir.join(rel);
    let text = std::fs::read_to_string(&path).map_err(|e| match stack.last() {
        Some(parent) => format!("{parent} includes {rel}, which cannot be read ({}): {e}", path.display()),
        None => format!("cannot read {}: {e}", path.display()),
    })?;
    stack.push(rel.to_string());
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("#include") {
            let target = rest.trim();
            let target = target
                .strip_prefix('<')
                .and_then(|t| t.strip_suffix('>'))
                .or_else(|| target.strip_prefix('"').and_then(|t| t.strip_suffix('"')))
                .ok_or_else(|| format!("{rel}: malformed include line `{trimmed}`"))?;
            preprocess(dir, target, stack, out)?;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    stack.pop();
    Ok(())
}

fn load_file(dir: &Path, name: &str) -> Result<(Vec<SpecNode>, Vec<String>), String> {
    let mut text = String::new();
    preprocess(dir, name, &mut vec![], &mut text)?;
    let doc = roxmltree::Document::parse(&text).map_err(|e| format!("XML parse error after includes: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "interfaceDefinition" {
        return Err(format!("root element is <{}>, expected <interfaceDefinition>", root.tag_name().name()));
    }
    let (mut nodes, mut warnings) = (vec![], vec![]);
    for child in root.children().filter(|c| c.is_element()) {
        match child.tag_name().name() {
            "node" | "tagNode" | "leafNode" => nodes.push(build_node(child, name, &mut warnings)?),
            // xml-component-version.xml.in: config syntax versions, not configuration paths.
            "syntaxVersion" => {}
            other => return Err(format!("unexpected top-level element <{other}>")),
        }
    }
    Ok((nodes, warnings))
}

fn element_text(e: roxmltree::Node) -> String {
    e.descendants().filter(|d| d.is_text()).filter_map(|d| d.text()).collect()
}

fn build_node(e: roxmltree::Node, file: &str, warnings: &mut Vec<String>) -> Result<SpecNode, String> {
    let kind = match e.tag_name().name() {
        "node" => NodeKind::Node,
        "tagNode" => NodeKind::TagNode,
        "leafNode" => NodeKind::LeafNode,
        other => return Err(format!("unexpected element <{other}>")),
    };
    let name = e.attribute("name").ok_or_else(|| format!("<{}> without a name attribute", kind.xml_name()))?;
    let mut node = SpecNode {
        name: name.to_string(),
        kind,
        properties: Properties::default(),
        children: BTreeMap::new(),
        files: BTreeSet::from([file.to_string()]),
    };
    for child in e.children().filter(|c| c.is_element()) {
        match child.tag_name().name() {
            "properties" => node.properties = build_properties(child),
            "children" => {
                for grandchild in child.children().filter(|c| c.is_element()) {
                    let sub = build_node(grandchild, file, warnings).map_err(|err| format!("under '{name}': {err}"))?;
                    merge_into(&mut node.children, sub, warnings, file);
                }
            }
            _ => {} // defaultValue, command, ...
        }
    }
    Ok(node)
}

fn build_properties(e: roxmltree::Node) -> Properties {
    let mut props = Properties::default();
    for p in e.children().filter(|c| c.is_element()) {
        match p.tag_name().name() {
            "help" => props.help = Some(element_text(p).trim().to_string()),
            "constraintErrorMessage" => props.constraint_error_message = Some(element_text(p).trim().to_string()),
            "valueless" => props.valueless = true,
            "multi" => props.multi = true,
            "constraint" => {
                for c in p.children().filter(|c| c.is_element()) {
                    props.constraints.push(match c.tag_name().name() {
                        "regex" => {
                            let source = element_text(c).trim().to_string();
                            let compiled = regex::Regex::new(&format!("^(?:{source})$")).map_err(|err| err.to_string());
                            ConstraintEntry::Regex { source, compiled }
                        }
                        "validator" => {
                            let mut words = c.attribute("name").unwrap_or("").split_whitespace();
                            let name = words.next().unwrap_or("").to_string();
                            let mut args: Vec<String> = words.map(str::to_string).collect();
                            args.extend(c.attribute("argument").unwrap_or("").split_whitespace().map(str::to_string));
                            ConstraintEntry::Validator { name, args }
                        }
                        other => ConstraintEntry::Unknown { element: other.to_string() },
                    });
                }
            }
            _ => {}
        }
    }
    props
}

fn merge_into(level: &mut BTreeMap<String, SpecNode>, new: SpecNode, warnings: &mut Vec<String>, file: &str) {
    let Some(existing) = level.get_mut(&new.name) else {
        level.insert(new.name.clone(), new);
        return;
    };
    if existing.kind != new.kind {
        warnings.push(format!(
            "{file}: '{}' is a <{}> here but a <{}> in {:?}; kept the first",
            new.name,
            new.kind.xml_name(),
            existing.kind.xml_name(),
            existing.files
        ));
        return;
    }
    existing.files.extend(new.files);
    let (old, add) = (&mut existing.properties, new.properties);
    if old.constraints.is_empty() {
        old.constraints = add.constraints;
    } else if !add.constraints.is_empty()
        && describe_constraints(&old.constraints) != describe_constraints(&add.constraints)
    {
        warnings.push(format!("{file}: '{}' redefines its constraint; kept the first", new.name));
    }
    if old.constraint_error_message.is_none() {
        old.constraint_error_message = add.constraint_error_message;
    }
    if old.help.is_none() {
        old.help = add.help;
    }
    old.valueless |= add.valueless;
    old.multi |= add.multi;
    for (_, child) in new.children {
        merge_into(&mut existing.children, child, warnings, file);
    }
}

fn describe_constraints(entries: &[ConstraintEntry]) -> Vec<String> {
    entries.iter().map(describe_entry).collect()
}

fn describe_entry(entry: &ConstraintEntry) -> String {
    match entry {
        ConstraintEntry::Regex { source, .. } => format!("regex '{source}'"),
        ConstraintEntry::Validator { name, args } if args.is_empty() => format!("validator {name}"),
        ConstraintEntry::Validator { name, args } => format!("validator {name} '{}'", args.join(" ")),
        ConstraintEntry::Unknown { element } => format!("<{element}>"),
    }
}

// ---------------------------------------------------------------------------------------------
// Command words

fn tokenize(command: &str) -> Result<Vec<String>, String> {
    let mut words = vec![];
    let mut current = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => current.push(ch),
                        None => return Err(format!("unterminated single quote in `{command}`")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch) => current.push(ch),
                            None => return Err(format!("unterminated double quote in `{command}`")),
                        },
                        Some(ch) => current.push(ch),
                        None => return Err(format!("unterminated double quote in `{command}`")),
                    }
                }
            }
            c => {
                in_word = true;
                current.push(c);
            }
        }
    }
    if in_word {
        words.push(current);
    }
    Ok(words)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn unknown_component(
    word: &str,
    position: usize,
    walked: &[&str],
    schema: &[&str],
    level: &BTreeMap<String, SpecNode>,
) -> String {
    let place =
        if walked.is_empty() { "at the top level".to_string() } else { format!("under '{}'", walked.join(" ")) };
    let mut msg = format!("unknown path component '{word}' (word {position}) {place}");
    let legacy = LEGACY_KEYWORDS.iter().find(|(path, old, _)| *path == schema && *old == word);
    if let Some((_, _, new)) = legacy {
        msg.push_str(&format!("; did you mean '{new}'? ('{word}' is VyOS 1.2/1.3 syntax; VyOS 1.4+ uses '{new}')"));
    } else {
        let limit = (word.chars().count() / 3).max(1);
        let mut close: Vec<(usize, &str)> = level
            .keys()
            .map(|k| (levenshtein(word, k), k.as_str()))
            .filter(|(d, k)| *d <= limit || (word.len() >= 3 && k.starts_with(word)))
            .collect();
        close.sort();
        if !close.is_empty() {
            let names: Vec<String> = close.iter().take(3).map(|(_, k)| format!("'{k}'")).collect();
            msg.push_str(&format!("; did you mean {}?", names.join(" or ")));
        }
    }
    if level.is_empty() {
        msg.push_str("; this node has no children");
    } else {
        const SHOWN: usize = 12;
        let names: Vec<&str> = level.keys().map(String::as_str).take(SHOWN).collect();
        msg.push_str(&format!("; valid here: {}", names.join(", ")));
        if level.len() > SHOWN {
            msg.push_str(&format!(", ... ({} more)", level.len() - SHOWN));
        }
    }
    msg
}

// ---------------------------------------------------------------------------------------------
// Constraints

enum Outcome {
    Pass,
    Fail(String),
    Unsupported(String),
}

/// OR over the constraint entries, as VyOS's `validate-value` does.
fn check_constraints(node: &SpecNode, value: &str) -> Result<(), String> {
    let entries = &node.properties.constraints;
    if entries.is_empty() {
        return Ok(());
    }
    let mut failures = vec![];
    let mut unsupported = vec![];
    for entry in entries {
        match evaluate(entry, value) {
            Outcome::Pass => return Ok(()),
            Outcome::Fail(why) => failures.push(why),
            Outcome::Unsupported(why) => unsupported.push(why),
        }
    }
    let mut msg = String::new();
    if !unsupported.is_empty() {
        msg.push_str(&format!("cannot be decided: {}", unsupported.join("; ")));
        if !failures.is_empty() {
            msg.push_str(&format!("; and the other constraints reject it: {}", failures.join("; ")));
        }
        return Err(msg);
    }
    msg.push_str(node.properties.constraint_error_message.as_deref().unwrap_or("Invalid value"));
    msg.push_str(&format!(" ({})", failures.join("; ")));
    Err(msg)
}

fn evaluate(entry: &ConstraintEntry, value: &str) -> Outcome {
    match entry {
        ConstraintEntry::Regex { source, compiled } => match compiled {
            Ok(re) if re.is_match(value) => Outcome::Pass,
            Ok(_) => Outcome::Fail(format!("regex '{source}' does not match")),
            Err(e) => Outcome::Unsupported(format!("regex '{source}' not supported by the Rust regex engine: {e}")),
        },
        ConstraintEntry::Validator { name, args } => match run_validator(name, args, value) {
            Some(Ok(())) => Outcome::Pass,
            Some(Err(why)) => Outcome::Fail(format!("{}: {why}", describe_entry(entry))),
            None => Outcome::Unsupported(if args.is_empty() {
                format!("validator {name} not implemented")
            } else {
                format!("validator {name} not implemented (argument '{}')", args.join(" "))
            }),
        },
        ConstraintEntry::Unknown { element } => {
            Outcome::Unsupported(format!("constraint element <{element}> not implemented"))
        }
    }
}

/// `None`: not implemented (for these arguments).
fn run_validator(name: &str, args: &[String], value: &str) -> Option<Result<(), String>> {
    if name == "numeric" {
        return numeric(args, value);
    }
    if !args.is_empty() {
        return None; // no argument forms implemented for the others
    }
    let ok = |b: bool, what: &str| if b { Ok(()) } else { Err(format!("'{value}' is not a valid {what}")) };
    let addr = parse_address(value);
    Some(match name {
        // ipaddrcheck --is-ipv4
        "ipv4" => ok(matches!(addr, Some(Address { v6: false, .. })), "IPv4 address or prefix"),
        // ipaddrcheck --is-ipv4-single
        "ipv4-address" => ok(matches!(addr, Some(Address { v6: false, len: None, .. })), "IPv4 address"),
        // ipaddrcheck --is-ipv4-net
        "ipv4-prefix" => ipv4_or_6_net(addr.as_ref(), Some(false), value, "IPv4 prefix"),
        // ipaddrcheck --is-ipv4-host
        "ipv4-host" => ipv4_or_6_host(addr.as_ref(), Some(false), value, "IPv4 host (address/length)"),
        "ipv6" => ok(matches!(addr, Some(Address { v6: true, .. })), "IPv6 address or prefix"),
        "ipv6-address" => ok(matches!(addr, Some(Address { v6: true, len: None, .. })), "IPv6 address"),
        "ipv6-prefix" => ipv4_or_6_net(addr.as_ref(), Some(true), value, "IPv6 prefix"),
        // ipaddrcheck --is-any-single / --is-any-net / --is-any-host / --is-any-cidr
        "ip-address" => ok(matches!(addr, Some(Address { len: None, .. })), "IP address"),
        "ip-prefix" => ipv4_or_6_net(addr.as_ref(), None, value, "IP prefix"),
        "ip-host" => ipv4_or_6_host(addr.as_ref(), None, value, "IP host (address/length)"),
        "ip-cidr" => ok(matches!(addr, Some(Address { len: Some(_), .. })), "IP address/length"),
        "ipv6-link-local" => ok(ipv6_link_local(value), "IPv6 link-local address"),
        "base64" => python_b64decode(value).map_err(|e| format!("'{value}' is not base64: {e}")),
        // validate-value --regex "[A-Za-z0-9][-.A-Za-z0-9]*"
        "fqdn" => ok(
            value.starts_with(|c: char| c.is_ascii_alphanumeric())
                && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'),
            "FQDN",
        ),
        // validate-value --regex "([0-9A-Fa-f]{2}:){5}([0-9A-Fa-f]{2})"
        "mac-address" => ok(
            value.len() == 17
                && value.split(':').count() == 6
                && value.split(':').all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit())),
            "MAC address",
        ),
        // python: prefix.split('/')[1] == '64' (IndexError, i.e. failure, without a '/')
        "ipv6-eui64-prefix" => {
            if value.split('/').nth(1) == Some("64") {
                Ok(())
            } else {
                Err(format!("'{value}' does not have prefix length 64"))
            }
        }
        "port-multi" => port_multi(value),
        "ip-protocol" => ip_protocol(value),
        _ => return None,
    })
}

/// vyos-1x `src/validators/port-multi`: a comma-separated list of ports (1–65535) and ranges
/// `a-b` (a ≤ b), each optionally negated with `!`. Named services (looked up in the router's
/// `/etc/services`) are not modelled: they are rejected, never passed unchecked.
fn port_multi(value: &str) -> Result<(), String> {
    let port = |p: &str| -> Option<u32> {
        (!p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse().ok())
            .flatten()
            .filter(|n| (1..=65535).contains(n))
    };
    for item in value.split(',') {
        let item = item.strip_prefix('!').unwrap_or(item);
        let ok = match item.split_once('-') {
            Some((a, b)) => matches!((port(a), port(b)), (Some(a), Some(b)) if a <= b),
            None => port(item).is_some(),
        };
        if !ok {
            return Err(format!(
                "'{item}' is not a valid port or port range (named services from /etc/services are not modelled)"
            ));
        }
    }
    Ok(())
}

/// vyos-1x `src/validators/ip-protocol`: a protocol number 0–255, or a name of its list,
/// optionally negated with `!` (the names most rules use; the others are rejected, not passed).
fn ip_protocol(value: &str) -> Result<(), String> {
    const NAMES: &[&str] = &[
        "all",
        "ip",
        "icmp",
        "igmp",
        "tcp",
        "udp",
        "tcp_udp",
        "gre",
        "esp",
        "ah",
        "ipv6-icmp",
        "icmpv6",
        "ospf",
        "pim",
        "vrrp",
        "l2tp",
        "sctp",
        "udplite",
        "ipip",
    ];
    if value.parse::<u16>().is_ok_and(|n| n <= 255) && !value.starts_with('+') {
        return Ok(());
    }
    let name = value.strip_prefix('!').unwrap_or(value);
    if NAMES.contains(&name) { Ok(()) } else { Err(format!("'{value}' is not a valid IP protocol")) }
}

/// An address as ipaddrcheck accepts it: the string must look like `is_any_single` or
/// `is_any_cidr` and be a valid address for libcidr.
#[derive(Debug, Clone, Copy)]
struct Address {
    v6: bool,
    bits: u128,
    len: Option<u32>,
}

fn decimal_no_leading_zero(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
}

fn parse_address(s: &str) -> Option<Address> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    if addr.contains('.') {
        // ^(([1-9]\d{0,2}|0)\.){3}([1-9]\d{0,2}|0)(/([1-9]\d*|0))?$, octets <= 255, length <= 32
        let parts: Vec<&str> = addr.split('.').collect();
        if parts.len() != 4 || !parts.iter().all(|p| p.len() <= 3 && decimal_no_leading_zero(p)) {
            return None;
        }
        let mut bits: u128 = 0;
        for p in parts {
            let octet: u128 = p.parse().ok()?;
            if octet > 255 {
                return None;
            }
            bits = (bits << 8) | octet;
        }
        let len = match len {
            None => None,
            Some(l) if decimal_no_leading_zero(l) && l.len() <= 2 => Some(l.parse::<u32>().ok().filter(|n| *n <= 32)?),
            Some(_) => return None,
        };
        Some(Address { v6: false, bits, len })
    } else {
        // ^[0-9a-fA-F:]+(/\d{1,3})?$, a valid IPv6 address (one "::" at most), length <= 128
        if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return None;
        }
        let parsed: Ipv6Addr = addr.parse().ok()?;
        let len = match len {
            None => None,
            Some(l) if !l.is_empty() && l.len() <= 3 && l.chars().all(|c| c.is_ascii_digit()) => {
                Some(l.parse::<u32>().ok().filter(|n| *n <= 128)?)
            }
            Some(_) => return None,
        };
        Some(Address { v6: true, bits: u128::from(parsed), len })
    }
}

fn host_bits_zero(a: &Address, len: u32) -> bool {
    let width = if a.v6 { 128 } else { 32 };
    let host = width - len;
    host == 0 || a.bits & ((1u128 << host) - 1) == 0
}

/// ipaddrcheck --is-ipv4-net / --is-ipv6-net / --is-any-net (`family`: Some(v6) or None for any).
fn ipv4_or_6_net(addr: Option<&Address>, family: Option<bool>, value: &str, what: &str) -> Result<(), String> {
    let Some(a) = addr.filter(|a| family.is_none_or(|v6| a.v6 == v6)) else {
        return Err(format!("'{value}' is not a valid {what}"));
    };
    let Some(len) = a.len else {
        return Err(format!("'{value}' is not a valid {what}: missing prefix length"));
    };
    if host_bits_zero(a, len) {
        Ok(())
    } else {
        Err(format!("'{value}' is not a valid {what}: host bits are set (not a network address)"))
    }
}

/// ipaddrcheck --is-ipv4-host / --is-ipv6-host / --is-any-host.
fn ipv4_or_6_host(addr: Option<&Address>, family: Option<bool>, value: &str, what: &str) -> Result<(), String> {
    let Some(a) = addr.filter(|a| family.is_none_or(|v6| a.v6 == v6)) else {
        return Err(format!("'{value}' is not a valid {what}"));
    };
    let Some(len) = a.len else {
        return Err(format!("'{value}' is not a valid {what}: missing prefix length"));
    };
    let width = if a.v6 { 128 } else { 32 };
    if len == width || !host_bits_zero(a, len) {
        Ok(())
    } else {
        Err(format!("'{value}' is not a valid {what}: it is a network address, not a host address"))
    }
}

/// vyos.validate.is_ipv6_link_local: strip `%zone`, parse as an IPv6 interface (address with an
/// optional /length), then the address must be in fe80::/10.
fn ipv6_link_local(value: &str) -> bool {
    let value = value.split('%').next().unwrap_or("");
    let (addr, len) = match value.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (value, None),
    };
    if let Some(l) = len
        && !(!l.is_empty() && l.chars().all(|c| c.is_ascii_digit()) && l.parse::<u32>().is_ok_and(|n| n <= 128))
    {
        return false;
    }
    addr.parse::<Ipv6Addr>().is_ok_and(|a| (u128::from(a) >> 118) == 0x3fa)
}

/// Python's `base64.b64decode(s)` (non-strict `binascii.a2b_base64`), which VyOS's `base64`
/// validator calls: characters outside the alphabet are discarded, a complete pad sequence ends
/// the input, and the data characters must not end in the middle of a quad.
fn python_b64decode(value: &str) -> Result<(), String> {
    if !value.is_ascii() {
        return Err("string argument should contain only ASCII characters".to_string());
    }
    let mut quad_pos = 0usize;
    let mut pads = 0usize;
    let mut data_chars = 0usize;
    for c in value.chars() {
        if c == '=' {
            if quad_pos >= 2 {
                pads += 1;
                if quad_pos + pads >= 4 {
                    return Ok(());
                }
            }
            continue;
        }
        if !(c.is_ascii_alphanumeric() || c == '+' || c == '/') {
            continue;
        }
        pads = 0;
        data_chars += 1;
        quad_pos = (quad_pos + 1) % 4;
    }
    match quad_pos {
        0 => Ok(()),
        1 => Err(format!("number of data characters ({data_chars}) cannot be 1 more than a multiple of 4")),
        _ => Err("Incorrect padding".to_string()),
    }
}

/// vyos-utils `numeric` (numeric.ml): `--range A-B` (repeatable; the value must be in one of
/// them), `--not-range`, `--not-value`, `--non-negative`, `--positive`, `--float`, `--relative`,
/// `--allow-range`, `--require-range`. `None` for an unknown option.
fn numeric(args: &[String], value: &str) -> Option<Result<(), String>> {
    let (mut positive, mut nonnegative, mut allow_float, mut relative, mut allow_range, mut require_range) =
        (false, false, false, false, false, false);
    let (mut ranges, mut not_ranges, mut not_values) = (vec![], vec![], vec![]);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--positive" => positive = true,
            "--non-negative" => nonnegative = true,
            "--float" => allow_float = true,
            "--relative" => relative = true,
            "--allow-range" => allow_range = true,
            "--require-range" => (allow_range, require_range) = (true, true),
            "--range" => ranges.push(it.next()?.clone()),
            "--not-range" => not_ranges.push(it.next()?.clone()),
            "--not-value" => not_values.push(it.next()?.clone()),
            "--" => {}
            _ => return None,
        }
    }
    let number_of_string = |s: &str| -> Result<f64, String> {
        let body = s.strip_prefix('-').unwrap_or(s);
        let (int, frac) = match body.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (body, None),
        };
        let digits = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit());
        if !digits(int) || !frac.is_none_or(digits) {
            return Err(format!("'{s}' is not a valid number"));
        }
        if !allow_float && frac.is_some() {
            return Err(format!("'{s}' is not a valid integer number"));
        }
        s.parse::<f64>().map_err(|_| format!("'{s}' is not a valid number"))
    };
    let range_of_string = |s: &str| -> Result<(f64, f64), String> {
        let parts: Vec<&str> = s.split('-').map(str::trim).collect();
        match parts.as_slice() {
            [l, r] => Ok((
                number_of_string(l).map_err(|e| format!("'{s}' is not a valid number range: {e}"))?,
                number_of_string(r).map_err(|e| format!("'{s}' is not a valid number range: {e}"))?,
            )),
            _ => Err(format!("'{s}' is not a valid number range")),
        }
    };
    let result = (|| -> Result<(), String> {
        let is_range = value.split_once('-').is_some_and(|(l, r)| {
            !l.is_empty() && !r.is_empty() && l.chars().chain(r.chars()).all(|c| c.is_ascii_digit())
        });
        let mut number = value;
        if relative {
            if is_range {
                return Err("increment/decrement does not apply to a range value".to_string());
            }
            let rel = (value.starts_with('+') || value.starts_with('-'))
                && value.len() > 1
                && value[1..].chars().all(|c| c.is_ascii_digit());
            if !rel {
                return Err("Value is not a relative increment/decrement".to_string());
            }
            number = &value[1..];
        }
        let (lo, hi) = if is_range { range_of_string(number)? } else { (number_of_string(number)?, f64::NAN) };
        if is_range && !allow_range {
            return Err("Value must be a number, not a range".to_string());
        }
        if !is_range && require_range {
            return Err("Value must be a range, not a number".to_string());
        }
        if nonnegative {
            if is_range {
                return Err("option '--non-negative' does not apply to a range value".to_string());
            }
            if lo < 0.0 {
                return Err("Number should be non-negative.".to_string());
            }
        }
        if positive {
            if is_range {
                return Err("option '--positive' does not apply to a range value".to_string());
            }
            if lo <= 0.0 {
                return Err("Number should be positive".to_string());
            }
        }
        if !not_values.is_empty() {
            if is_range {
                return Err("--not-value cannot be used with ranges".to_string());
            }
            for v in &not_values {
                if number_of_string(v)? == lo {
                    return Err("Value is excluded by --not-value".to_string());
                }
            }
        }
        let in_ranges = |rs: &[(f64, f64)], n: f64| rs.iter().any(|(l, r)| n >= *l && n <= *r);
        let ends: Vec<f64> = if is_range { vec![lo, hi] } else { vec![lo] };
        if !ranges.is_empty() {
            let rs = ranges.iter().map(|r| range_of_string(r)).collect::<Result<Vec<_>, _>>()?;
            if !ends.iter().all(|n| in_ranges(&rs, *n)) {
                let allowed = ranges.join(", ");
                return Err(if is_range {
                    format!("Range is not in any of allowed ranges ({allowed})")
                } else {
                    format!("Number is not in any of allowed ranges ({allowed})")
                });
            }
        }
        if !not_ranges.is_empty() {
            let rs = not_ranges.iter().map(|r| range_of_string(r)).collect::<Result<Vec<_>, _>>()?;
            if ends.iter().any(|n| in_ranges(&rs, *n)) {
                return Err(if is_range {
                    "Range is in one of excluded ranges".to_string()
                } else {
                    "Number is in one of excluded ranges".to_string()
                });
            }
        }
        Ok(())
    })();
    Some(result)
}
