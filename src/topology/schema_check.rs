//! Structural checks: the source tree against the JSON Schema generated from the model.
//!
//! Using the generated schema (rather than hand-written checks per field) means the structure the
//! loader accepts, the schema editors validate with, and the documentation can never disagree.
//! Only the subset of JSON Schema that schemars emits for our types is interpreted: `$ref`,
//! `type`, `properties`/`required`/`additionalProperties`, `items`, `enum`/`const`, `anyOf`/
//! `oneOf`, `minimum`/`maximum`, integer `format`s and the address formats of `net.rs`.

use serde_json::{Map, Value as J};

use super::net;
use super::problem::Problem;
use super::tree::{Node, Path, Value};
use super::wgkey;

/// Checks `node` against `schema` (whose `$defs` resolve references) and returns every problem.
pub fn check(node: &Node, schema: &J) -> Vec<Problem> {
    let mut out = Vec::new();
    Checker { root: schema }.node(node, schema, &Path::root(), &mut out);
    out
}

struct Checker<'a> {
    root: &'a J,
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing (null)",
        Value::Bool(_) => "a boolean",
        Value::Int(_) => "an integer",
        Value::Float(_) => "a number",
        Value::Str(_) => "a string",
        Value::Seq(_) => "a list",
        Value::Map(_) => "a mapping",
    }
}

fn type_matches(t: &str, v: &Value) -> bool {
    matches!(
        (t, v),
        ("null", Value::Null)
            | ("boolean", Value::Bool(_))
            | ("integer", Value::Int(_))
            | ("number", Value::Int(_) | Value::Float(_))
            | ("string", Value::Str(_))
            | ("array", Value::Seq(_))
            | ("object", Value::Map(_))
    )
}

fn type_word(t: &str) -> &str {
    match t {
        "null" => "nothing",
        "boolean" => "true or false",
        "integer" => "an integer",
        "number" => "a number",
        "string" => "a string",
        "array" => "a list",
        "object" => "a mapping",
        other => other,
    }
}

/// The closest candidate to `word`, if it is close enough to be a likely typo (a transposition,
/// a missing or extra letter, or a long shared prefix).
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let max_edits = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter_map(|c| {
            let edits = strsim::damerau_levenshtein(word, c);
            let jw = strsim::jaro_winkler(word, c);
            (edits <= max_edits || jw > 0.88).then_some((edits, c))
        })
        .min_by_key(|(edits, _)| *edits)
        .map(|(_, c)| c)
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        Value::Seq(_) | Value::Map(_) => String::new(),
    }
}

impl<'a> Checker<'a> {
    fn resolve(&self, schema: &'a J) -> &'a J {
        let mut s = schema;
        // Bounded: a reference chain longer than this would be a bug in the generated schema.
        for _ in 0..16 {
            match s.get("$ref").and_then(J::as_str) {
                Some(r) => {
                    let name = r.rsplit('/').next().unwrap_or_default();
                    match self.root.get("$defs").and_then(|d| d.get(name)) {
                        Some(target) => s = target,
                        None => return s,
                    }
                }
                None => return s,
            }
        }
        s
    }

    fn node(&self, node: &Node, schema: &'a J, path: &Path, out: &mut Vec<Problem>) {
        let schema = self.resolve(schema);
        if let Some(branches) = schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(J::as_array) {
            self.branches(node, branches, path, out);
            return;
        }
        if let Some(types) = schema.get("type") {
            let allowed: Vec<&str> = match types {
                J::String(t) => vec![t.as_str()],
                J::Array(ts) => ts.iter().filter_map(J::as_str).collect(),
                _ => vec![],
            };
            if !allowed.iter().any(|t| type_matches(t, &node.value)) {
                let want = allowed.iter().map(|t| type_word(t)).collect::<Vec<_>>().join(" or ");
                let mut p = Problem::error(
                    "topology::type",
                    path.clone(),
                    format!("`{path}` must be {want}, found {}", kind_name(&node.value)),
                )
                .label(format!("expected {want}"))
                .at(node.span);
                if allowed.contains(&"string") && matches!(node.value, Value::Int(_) | Value::Float(_) | Value::Bool(_))
                {
                    p = p.help(format!("quote the value to make it a string: \"{}\"", scalar_text(&node.value)));
                } else if let Some(desc) = schema.get("description").and_then(J::as_str) {
                    p = p.help(desc.to_string());
                }
                out.push(p);
                return;
            }
        }
        if let Some(values) = schema.get("enum").and_then(J::as_array) {
            let names: Vec<&str> = values.iter().filter_map(J::as_str).collect();
            self.one_of_names(node, &names, path, out);
            return;
        }
        match &node.value {
            Value::Map(entries) => self.object(node, entries, schema, path, out),
            Value::Seq(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        self.node(item, item_schema, &path.index(i), out);
                    }
                }
            }
            Value::Int(i) => self.integer(node, *i, schema, path, out),
            Value::Str(s) => {
                let format = schema.get("format").and_then(J::as_str);
                if let Some(Some(Err(_))) = format.map(|f| wgkey::check_format(f, s)) {
                    // The value is not repeated: whatever was pasted there (a private key with a
                    // typo?) stays out of the output.
                    out.push(
                        Problem::error(
                            "topology::wireguard-key",
                            path.clone(),
                            format!("`{path}` is not a WireGuard public key (32 bytes in base64, 44 characters)"),
                        )
                        .label("not a public key")
                        .help(
                            "copy the key `fabric apply --step B.1` prints for this router (`wg pubkey` on Linux, \
                             `show interfaces wireguard wg0 public-key` on VyOS), or leave the field out",
                        )
                        .at(node.span),
                    );
                } else if let Some(Some(Err(e))) = format.map(|f| net::check_format(f, s)) {
                    out.push(
                        Problem::error("topology::address", path.clone(), format!("`{path}`: {e}"))
                            .label("not a valid address")
                            .help(
                                schema
                                    .get("description")
                                    .and_then(J::as_str)
                                    .unwrap_or("write an IPv4 address such as 192.168.0.10")
                                    .to_string(),
                            )
                            .at(node.span),
                    );
                }
            }
            _ => {}
        }
    }

    fn integer(&self, node: &Node, i: i128, schema: &J, path: &Path, out: &mut Vec<Problem>) {
        let (fmt_min, fmt_max): (i128, i128) = match schema.get("format").and_then(J::as_str) {
            Some("uint8") => (0, u8::MAX.into()),
            Some("uint16") => (0, u16::MAX.into()),
            Some("uint32") => (0, u32::MAX.into()),
            Some("uint64" | "uint") => (0, u64::MAX.into()),
            Some("int32") => (i32::MIN.into(), i32::MAX.into()),
            _ => (i64::MIN.into(), i64::MAX.into()),
        };
        let min = schema.get("minimum").and_then(J::as_i64).map(i128::from).unwrap_or(fmt_min).max(fmt_min);
        let max = schema.get("maximum").and_then(J::as_i64).map(i128::from).unwrap_or(fmt_max).min(fmt_max);
        if i < min || i > max {
            let what = if path.0.last().is_some_and(|s| matches!(s, super::tree::Seg::Key(k) if k.contains("port"))) {
                "port"
            } else {
                "value"
            };
            out.push(
                Problem::error(
                    "topology::range",
                    path.clone(),
                    format!("`{path}`: {what} {i} is out of range {min}–{max}"),
                )
                .label(format!("must be between {min} and {max}"))
                .help(match schema.get("description").and_then(J::as_str) {
                    Some(d) => format!("use a value from {min} to {max} ({d})"),
                    None => format!("use a value from {min} to {max}"),
                })
                .at(node.span),
            );
        }
    }

    fn one_of_names(&self, node: &Node, names: &[&str], path: &Path, out: &mut Vec<Problem>) {
        let text = scalar_text(&node.value);
        if matches!(node.value, Value::Str(_)) && names.contains(&text.as_str()) {
            return;
        }
        let list = names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        let help = match did_you_mean(&text, names.iter().copied()) {
            Some(s) => format!("did you mean `{s}`? Allowed: {list}"),
            None => format!("allowed: {list}"),
        };
        out.push(
            Problem::error(
                "topology::enum",
                path.clone(),
                format!("`{path}`: `{text}` is not one of the allowed values"),
            )
            .label("not allowed here")
            .help(help)
            .at(node.span),
        );
    }

    fn branches(&self, node: &Node, branches: &'a [J], path: &Path, out: &mut Vec<Problem>) {
        // A list of string constants is an enum (schemars writes documented unit variants so).
        let consts: Option<Vec<&str>> = branches
            .iter()
            .map(|b| self.resolve(b))
            .filter(|b| b.get("type").and_then(J::as_str) != Some("null"))
            .map(|b| b.get("const").and_then(J::as_str))
            .collect();
        if let Some(names) = consts.filter(|n| !n.is_empty()) {
            if matches!(node.value, Value::Null)
                && branches.iter().any(|b| self.resolve(b).get("type").and_then(J::as_str) == Some("null"))
            {
                return;
            }
            self.one_of_names(node, &names, path, out);
            return;
        }
        let mut best: Option<Vec<Problem>> = None;
        for b in branches {
            let mut attempt = Vec::new();
            self.node(node, b, path, &mut attempt);
            if attempt.is_empty() {
                return;
            }
            // Prefer the branch whose type fits, i.e. whose problems are deeper than a type clash.
            let type_clash = attempt.iter().all(|p| p.code == "topology::type" && &p.path == path);
            let better = match &best {
                None => true,
                Some(prev) => {
                    let prev_clash = prev.iter().all(|p| p.code == "topology::type" && &p.path == path);
                    (prev_clash && !type_clash) || (prev_clash == type_clash && attempt.len() < prev.len())
                }
            };
            if better {
                best = Some(attempt);
            }
        }
        out.extend(best.unwrap_or_default());
    }

    fn object(&self, node: &Node, entries: &[super::tree::Entry], schema: &'a J, path: &Path, out: &mut Vec<Problem>) {
        let empty = Map::new();
        let props = schema.get("properties").and_then(J::as_object).unwrap_or(&empty);
        let additional = schema.get("additionalProperties");
        for (i, e) in entries.iter().enumerate() {
            if let Some(first) = entries[..i].iter().find(|f| f.key == e.key) {
                out.push(
                    Problem::error(
                        "topology::duplicate-key",
                        path.key(&e.key),
                        format!("key `{}` appears twice in {}", e.key, path),
                    )
                    .label("second time")
                    .help("remove one of them; YAML keeps only one value per key")
                    .at(e.key_span)
                    .related_at(first.key_span, "first here"),
                );
                continue;
            }
            let child = path.key(&e.key);
            if let Some(s) = props.get(&e.key) {
                self.node(&e.value, s, &child, out);
            } else {
                match additional {
                    Some(J::Bool(false)) => {
                        let names: Vec<&str> = props.keys().map(String::as_str).collect();
                        let list = names.join(", ");
                        let help = match did_you_mean(&e.key, names.iter().copied()) {
                            Some(s) => format!("did you mean `{s}`? Keys allowed here: {list}"),
                            None => format!("keys allowed here: {list}"),
                        };
                        out.push(
                            Problem::error(
                                "topology::unknown-key",
                                child,
                                format!("unknown key `{}` in {}", e.key, path),
                            )
                            .label("unknown key")
                            .help(help)
                            .at(e.key_span),
                        );
                    }
                    Some(s @ J::Object(_)) => self.node(&e.value, s, &child, out),
                    _ => {}
                }
            }
        }
        if let Some(required) = schema.get("required").and_then(J::as_array) {
            for r in required.iter().filter_map(J::as_str) {
                let misspelled = entries.iter().any(|e| {
                    !props.contains_key(&e.key) && did_you_mean(&e.key, props.keys().map(String::as_str)) == Some(r)
                });
                if !entries.iter().any(|e| e.key == r) && !misspelled {
                    // The property's own description, else its type's (a `$ref` carries both).
                    let desc = props
                        .get(r)
                        .and_then(|s| s.get("description").or_else(|| self.resolve(s).get("description")))
                        .and_then(J::as_str);
                    let mut p = Problem::error(
                        "topology::missing-key",
                        path.clone(),
                        format!("{path} is missing the required key `{r}`"),
                    )
                    .label(format!("`{r}` is missing here"));
                    if path.0.is_empty() {
                        p = p.at(super::tree::Span { offset: node.span.offset, len: 0 });
                    }
                    p = p.help(match desc {
                        Some(d) => format!("add `{r}:` ({d})"),
                        None => format!("add `{r}:`"),
                    });
                    out.push(p);
                }
            }
        }
    }
}
