//! Nothing panics on any input: arbitrary bytes, and the example mutated at random. Every input
//! that loads is also taken through the graph and an offline plan.

use fabric::operation::Workspace;
use fabric::operation::plan::Source;
use fabric::plan::select::Selection;
use fabric::topology::load_str;
use proptest::prelude::*;

const EXAMPLE: &str = include_str!("../topology.example.yaml");

/// Loads and, when valid, builds the graph and plans everything offline.
fn whole_pipeline(text: String) {
    if let Ok(l) = load_str("fuzz.yaml", text)
        && let Ok(ws) = Workspace::new(l)
    {
        let sel = Selection { with_deps: true, ..Default::default() };
        if let Ok(planned) = fabric::operation::plan::make(&ws, sel, Source::Offline) {
            let _ = fabric::plan::view::json(&planned.plan, fabric::plan::view::Unchanged::Hidden);
        }
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    Truncate(usize),
    ReplaceChar(usize, char),
    Indent(usize, bool),
    ReplaceValue(usize, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let special = prop::sample::select(vec![
        ':', '-', '[', ']', '{', '}', '&', '*', '!', '#', '\'', '"', '\t', '\n', ' ', '0', 'x', '|', '>', '%', '@',
        '\u{0}', 'é',
    ]);
    let value = prop::sample::select(vec![
        "",
        "~",
        "null",
        "-1",
        "0",
        "99999999999999999999",
        "1e309",
        "[]",
        "{}",
        "*a",
        "&a x",
        "\"\"",
        "true",
        "0x10",
        "10.0.0.0/33",
        "a.b.c.d",
        "!!binary aGk=",
        "<<: *a",
        "? x",
        "'",
        "[a, [b, [c, [d]]]]",
    ]);
    prop_oneof![
        any::<usize>().prop_map(Mutation::DeleteLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), special).prop_map(|(i, c)| Mutation::ReplaceChar(i, c)),
        (any::<usize>(), any::<bool>()).prop_map(|(i, d)| Mutation::Indent(i, d)),
        (any::<usize>(), value).prop_map(|(i, v)| Mutation::ReplaceValue(i, v.to_string())),
    ]
}

fn apply(text: &str, muts: &[Mutation]) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    for m in muts {
        let n = lines.len().max(1);
        match m {
            Mutation::DeleteLine(i) if !lines.is_empty() => {
                lines.remove(i % n);
            }
            Mutation::DuplicateLine(i) if !lines.is_empty() => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Mutation::SwapLines(a, b) if !lines.is_empty() => lines.swap(a % n, b % n),
            Mutation::Truncate(i) => {
                let joined = lines.join("\n");
                let mut cut = i % (joined.len() + 1);
                while !joined.is_char_boundary(cut) {
                    cut -= 1;
                }
                lines = joined[..cut].lines().map(String::from).collect();
            }
            Mutation::ReplaceChar(i, c) if !lines.is_empty() => {
                let l = &mut lines[i % n];
                let chars: Vec<char> = l.chars().collect();
                if !chars.is_empty() {
                    let k = i % chars.len();
                    *l = chars.iter().enumerate().map(|(j, x)| if j == k { *c } else { *x }).collect();
                }
            }
            Mutation::Indent(i, deeper) if !lines.is_empty() => {
                let l = &mut lines[i % n];
                if *deeper {
                    l.insert_str(0, "  ");
                } else if l.starts_with("  ") {
                    l.drain(..2);
                }
            }
            Mutation::ReplaceValue(i, v) if !lines.is_empty() => {
                let l = &mut lines[i % n];
                if let Some(colon) = l.find(": ") {
                    l.truncate(colon + 2);
                    l.push_str(v);
                }
            }
            _ => {}
        }
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        whole_pipeline(String::from_utf8_lossy(&bytes).into_owned());
    }

    #[test]
    fn arbitrary_yaml_shaped_text_never_panics(s in "[a-z_:{}\\[\\], \n\\-0-9./'\"&*!#|>]{0,400}") {
        whole_pipeline(s);
    }

    #[test]
    fn mutated_example_never_panics(muts in prop::collection::vec(mutation(), 1..6)) {
        whole_pipeline(apply(EXAMPLE, &muts));
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for depth in [100usize, 10_000, 100_000] {
        let text = format!("version: {}{}", "[".repeat(depth), "]".repeat(depth));
        whole_pipeline(text);
        let text = format!(
            "sites:\n{}",
            (0..depth.min(2000)).map(|i| format!("{}- a:\n", "  ".repeat(i))).collect::<String>()
        );
        whole_pipeline(text);
    }
}

#[test]
fn too_deep_input_is_named() {
    let text = format!("version: {}1{}", "[".repeat(40), "]".repeat(40));
    match load_str("deep.yaml", text) {
        Err(fabric::topology::LoadError::Invalid { diags, .. }) => {
            assert!(diags[0].problem.message.contains("nesting deeper than 32 levels"), "{}", diags[0].problem.message)
        }
        other => panic!("expected a depth error, got {other:?}"),
    }
}

#[test]
fn the_mutator_changes_the_input() {
    // Guards against a mutator that silently does nothing (which would make the property vacuous).
    let out = apply(EXAMPLE, &[Mutation::DeleteLine(10)]);
    assert_ne!(out, EXAMPLE.trim_end());
    let version_line = EXAMPLE.lines().position(|l| l.starts_with("version:")).unwrap();
    let out = apply(EXAMPLE, &[Mutation::ReplaceValue(version_line, "{}".into())]);
    assert!(out.contains("version: {}"));
    assert!(load_str("x", out).is_err());
}
