//! A small, deterministic YAML emitter for JSON values.
//!
//! Rendered files are compared byte for byte (`render --check`) and read by people in pull
//! requests, so the output must be stable and plain: block style, two-space indents, keys in the
//! order the renderer inserted them, strings quoted only when a YAML reader could take them for
//! something else, and multi-line strings as literal blocks. A property test checks that every
//! value reads back unchanged.

use serde_json::Value;

/// One document, ending in a newline.
pub fn to_string(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => map(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => seq(&mut out, a, 0),
        other => {
            out.push_str(&scalar(other, 0));
            out.push('\n');
        }
    }
    out
}

/// Several documents separated by `---`.
pub fn documents(vs: &[Value]) -> String {
    vs.iter().map(to_string).collect::<Vec<_>>().join("---\n")
}

fn indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

fn is_block(v: &Value) -> bool {
    matches!(v, Value::Object(m) if !m.is_empty()) || matches!(v, Value::Array(a) if !a.is_empty())
}

fn map(out: &mut String, m: &serde_json::Map<String, Value>, level: usize) {
    let mut first = true;
    for (k, v) in m {
        if !first {
            indent(out, level);
        }
        first = false;
        out.push_str(&key(k));
        out.push(':');
        value_after_key(out, v, level);
    }
}

fn value_after_key(out: &mut String, v: &Value, level: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            indent(out, level + 2);
            map(out, m, level + 2);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            indent(out, level);
            seq(out, a, level);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other, level + 2));
            out.push('\n');
        }
    }
}

fn seq(out: &mut String, a: &[Value], level: usize) {
    let mut first = true;
    for v in a {
        if !first {
            indent(out, level);
        }
        first = false;
        out.push_str("- ");
        match v {
            Value::Object(m) if !m.is_empty() => map(out, m, level + 2),
            Value::Array(inner) if !inner.is_empty() => seq(out, inner, level + 2),
            other => {
                out.push_str(&scalar(other, level + 2));
                out.push('\n');
            }
        }
    }
    debug_assert!(!is_block(&Value::Null));
}

fn key(k: &str) -> String {
    if plain_ok(k) { k.to_string() } else { quoted(k) }
}

fn scalar(v: &Value, level: usize) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s, level),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

fn quoted(s: &str) -> String {
    // A JSON string is a valid YAML double-quoted scalar.
    serde_json::to_string(s).expect("strings serialize")
}

fn string(s: &str, level: usize) -> String {
    if s.contains('\n') && literal_ok(s) {
        let (chomp, body) = match s.strip_suffix('\n') {
            Some(b) if !b.ends_with('\n') => ("|", b),
            _ => ("|-", s),
        };
        let mut out = String::from(chomp);
        for line in body.split('\n') {
            out.push('\n');
            if !line.is_empty() {
                indent(&mut out, level);
                out.push_str(line);
            }
        }
        return out;
    }
    if plain_ok(s) { s.to_string() } else { quoted(s) }
}

/// A literal block keeps the text exactly when no line has leading spaces on the first line
/// (which would need an indentation indicator), no trailing spaces, no tabs or control
/// characters, and the text does not end in several newlines.
fn literal_ok(s: &str) -> bool {
    // Block indentation is taken from the first non-empty line, so it must not start with a space.
    s.split('\n').find(|l| !l.is_empty()).is_some_and(|l| !l.starts_with(' '))
        && !s.ends_with("\n\n")
        && !s.chars().any(|c| (c.is_control() && c != '\n') || c == '\u{feff}')
        && s.split('\n').all(|l| !l.ends_with(' '))
}

/// Whether `s` can be written unquoted and read back as the same string.
fn plain_ok(s: &str) -> bool {
    if s.is_empty() || s.trim() != s {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    const SPECIAL: &[&str] =
        &["null", "~", "true", "false", "yes", "no", "on", "off", "y", "n", ".nan", ".inf", "-.inf", "+.inf"];
    if SPECIAL.contains(&lower.as_str()) {
        return false;
    }
    // Anything that starts like a number (or a date/time) is quoted: YAML 1.1 and 1.2 readers
    // disagree on forms like 0o17, 1_000, 1:20 and 2026-01-01.
    let first = s.chars().next().unwrap_or(' ');
    if first.is_ascii_digit() || ((first == '-' || first == '+' || first == '.') && s.len() > 1) {
        return false;
    }
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        return false;
    }
    if s.contains(": ") || s.contains(" #") || s.ends_with(':') {
        return false;
    }
    s.chars().all(|c| !c.is_control() && c != '\u{feff}' && c != '\u{85}' && c != '\u{2028}' && c != '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn back(text: &str) -> Value {
        serde_saphyr::from_str::<crate::topology::tree::Node>(text)
            .map(|n| n.to_json())
            .unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn block_style() {
        let v = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "a"}},
            "spec": {"list": [{"name": "x", "n": 1}, "plain", ["nested"]], "empty": {}, "none": [], "on": "on", "v": "1.18"}});
        let y = to_string(&v);
        assert_eq!(
            y,
            "apiVersion: v1\nkind: X\nmetadata:\n  name: a\n  labels:\n    app.kubernetes.io/name: a\nspec:\n  list:\n  - name: x\n    \"n\": 1\n  - plain\n  - - nested\n  empty: {}\n  none: []\n  \"on\": \"on\"\n  v: \"1.18\"\n"
        );
        assert_eq!(back(&y), v);
    }

    #[test]
    fn multiline_strings_are_literal_blocks() {
        let v = json!({"valuesContent": "cluster:\n  name: sp\n", "two": "a\nb"});
        let y = to_string(&v);
        assert_eq!(y, "valuesContent: |\n  cluster:\n    name: sp\ntwo: |-\n  a\n  b\n");
        assert_eq!(back(&y), v);
    }

    #[test]
    fn ambiguous_strings_are_quoted() {
        for s in [
            "",
            " x",
            "true",
            "No",
            "null",
            "~",
            "0x10",
            "1e3",
            "2026-01-01",
            "-1",
            "a: b",
            "x #c",
            "*a",
            "&a",
            "!t",
            "@x",
            "%x",
            ":",
        ] {
            let y = to_string(&json!({ "k": s }));
            assert_eq!(back(&y)["k"], json!(s), "{s:?} → {y}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_value_reads_back(v in arb_json()) {
            let y = to_string(&v);
            proptest::prop_assert_eq!(back(&y), v, "{}", y);
        }
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[ -~\n]{0,12}".prop_map(Value::String),
            prop::sample::select(vec!["yes", "1.0", "0o7", "-", "- a", "a:b", "#", "null", "1:2"])
                .prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-z./-]{1,8}", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }
}
