//! `docs/topology.md`, generated from the JSON Schema (so the reference cannot drift from the
//! loader). One section per object or enum type, in the order a reader meets them from the top.

use std::fmt::Write;

use serde_json::Value as J;

fn def_name(r: &str) -> &str {
    r.rsplit('/').next().unwrap_or(r)
}

/// A short type description for a property schema, and the definitions it refers to.
fn type_of(s: &J, refs: &mut Vec<String>) -> String {
    if let Some(r) = s.get("$ref").and_then(J::as_str) {
        let n = def_name(r).to_string();
        let link = format!("[{n}](#{})", n.to_lowercase());
        refs.push(n);
        return link;
    }
    if let Some(any) = s.get("anyOf").or_else(|| s.get("oneOf")).and_then(J::as_array) {
        let parts: Vec<String> = any
            .iter()
            .filter(|b| b.get("type").and_then(J::as_str) != Some("null"))
            .map(|b| type_of(b, refs))
            .collect();
        return parts.join(" or ");
    }
    let ty = match s.get("type") {
        Some(J::String(t)) => t.clone(),
        Some(J::Array(ts)) => ts.iter().filter_map(J::as_str).filter(|t| *t != "null").collect::<Vec<_>>().join(" or "),
        _ => "any".into(),
    };
    match ty.as_str() {
        "array" => format!("list of {}", s.get("items").map(|i| type_of(i, refs)).unwrap_or_default()),
        "object" => match s.get("additionalProperties") {
            Some(v @ J::Object(_)) => format!("map of name → {}", type_of(v, refs)),
            _ => "mapping".into(),
        },
        "integer" => {
            let min = s.get("minimum").and_then(J::as_i64);
            let max = s.get("maximum").and_then(J::as_i64);
            match (min, max) {
                (Some(a), Some(b)) => format!("integer {a}–{b}"),
                (Some(0), None) => "integer ≥ 0".into(),
                _ => "integer".into(),
            }
        }
        "string" => match s.get("format").and_then(J::as_str) {
            Some(f) => format!("string ({f})"),
            None => "string".into(),
        },
        other => other.to_string(),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

fn default_of(s: &J) -> String {
    match s.get("default") {
        None => String::new(),
        Some(J::Null) => "none".into(),
        Some(J::Array(a)) if a.is_empty() => "`[]`".into(),
        Some(J::Object(o)) if o.is_empty() => "`{}`".into(),
        Some(J::String(v)) => format!("`{v}`"),
        Some(v) => format!("`{v}`"),
    }
}

/// Renders the reference. `intro` is written after the title.
pub fn markdown(schema: &J, intro: &str) -> String {
    let defs = schema.get("$defs").and_then(J::as_object).cloned().unwrap_or_default();
    let mut out = String::from("# Topology file reference\n\n");
    out.push_str(intro);
    out.push('\n');
    let mut queue: Vec<(String, J)> = vec![("Topology".into(), schema.clone())];
    let mut done: Vec<String> = Vec::new();
    while !queue.is_empty() {
        let (name, s) = queue.remove(0);
        if done.contains(&name) {
            continue;
        }
        done.push(name.clone());
        let _ = writeln!(out, "## {name}\n");
        if let Some(d) = s.get("description").and_then(J::as_str) {
            let _ = writeln!(out, "{}\n", d.trim());
        }
        let mut refs = Vec::new();
        if let Some(props) = s.get("properties").and_then(J::as_object) {
            let required: Vec<&str> = s
                .get("required")
                .and_then(J::as_array)
                .map(|r| r.iter().filter_map(J::as_str).collect())
                .unwrap_or_default();
            out.push_str("| key | type | required | default | description |\n|---|---|---|---|---|\n");
            for (k, p) in props {
                let ty = type_of(p, &mut refs);
                let desc = p
                    .get("description")
                    .or_else(|| {
                        p.get("$ref")
                            .and_then(J::as_str)
                            .and_then(|r| defs.get(def_name(r)))
                            .and_then(|d| d.get("description"))
                    })
                    .and_then(J::as_str)
                    .unwrap_or("");
                let req = if required.contains(&k.as_str()) { "yes" } else { "" };
                let _ = writeln!(out, "| `{k}` | {ty} | {req} | {} | {} |", default_of(p), one_line(desc));
            }
            out.push('\n');
        } else if let Some(variants) = s.get("oneOf").and_then(J::as_array) {
            out.push_str("| value | meaning |\n|---|---|\n");
            for v in variants {
                let name = v.get("const").and_then(J::as_str).unwrap_or("?");
                let desc = v.get("description").and_then(J::as_str).unwrap_or("");
                let _ = writeln!(out, "| `{name}` | {} |", one_line(desc));
            }
            out.push('\n');
        } else if let Some(values) = s.get("enum").and_then(J::as_array) {
            let names: Vec<String> = values.iter().filter_map(J::as_str).map(|v| format!("`{v}`")).collect();
            let _ = writeln!(out, "One of {}.\n", names.join(", "));
        } else {
            let _ = writeln!(out, "Type: {}.\n", type_of(&s, &mut refs));
        }
        for r in refs {
            if !done.contains(&r)
                && let Some(d) = defs.get(&r)
            {
                queue.push((r, d.clone()));
            }
        }
    }
    out
}
