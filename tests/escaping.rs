//! One escaping function per language a value can reach, each checked by the real reader of
//! that language: arbitrary strings the topology accepts go in, and come back out unchanged as
//! one word or one value, with no new line, command or section.
//! (Issue "Safe under hostile input and faults", the property test.)
//!
//! | language | escaping function | read back by |
//! |---|---|---|
//! | POSIX shell | `transport::shell::quote` | `/bin/sh` (dash) |
//! | VyOS `set` lines (`vbash -s`) | `desired::vyos::quote` | `bash`, which is what vbash is |
//! | wg-quick comments | `desired::text::wg_comment` | wg-quick's line rule (one line per line) |
//! | YAML | `desired::yaml::to_string` | serde-saphyr |
//! | terminal | `style::terminal_safe` | the characters a terminal acts on |

use std::process::Command;

use proptest::prelude::*;

/// What the topology accepts in a value: printable text, no control character (see
/// `topology::is_hidden`). Quotes, `$`, backticks, `;`, `\`, spaces and any Unicode
/// letter are all in.
fn accepted() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,40}",
        "[a-z0-9'\"`$;&|<>(){}\\\\ !#*?~=%^-]{0,30}",
        "\\PC{0,20}".prop_filter("no hidden characters", |s| !s.chars().any(fabric::topology::is_hidden)),
    ]
}

fn run(program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(program).args(args).output().expect("the shell runs");
    (out.status.success(), String::from_utf8(out.stdout).expect("utf-8"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn shell_reads_a_quoted_value_back_as_one_word(s in accepted()) {
        let line = format!("set -- {}; printf '%s|%s' \"$#\" \"$1\"", fabric::transport::shell::quote(&s));
        let (ok, out) = run("/bin/sh", &["-c", &line]);
        prop_assert!(ok, "{line}");
        prop_assert_eq!(out, format!("1|{s}"));
    }

    #[test]
    fn vbash_reads_a_vyos_value_back_as_the_last_word_of_one_line(s in accepted()) {
        let set = format!("set interfaces wireguard wg0 description {}", fabric::desired::vyos::quote(&s));
        prop_assert_eq!(set.lines().count(), 1, "{}", set);
        let line = format!("{}; printf '%s|%s' \"$#\" \"$5\"", set.replacen("set", "set --", 1));
        let (ok, out) = run("bash", &["-c", &line]);
        prop_assert!(ok, "{line}");
        prop_assert_eq!(out, format!("5|{s}"));
    }

    #[test]
    fn a_wg_quick_comment_is_one_line_and_the_value_itself(s in accepted(), any in "\\PC*|[\\x00-\\x1f\\x7f]{1,5}") {
        prop_assert_eq!(fabric::desired::text::wg_comment(&s), s);
        // Whatever it is given, a comment never starts another line of the file.
        let c = fabric::desired::text::wg_comment(&format!("x{any}\n[Interface]\nPostUp = touch /tmp/p"));
        prop_assert!(!c.contains('\n') && !c.contains('\r'), "{c:?}");
    }

    #[test]
    fn yaml_reads_a_value_back_as_one_string(s in accepted()) {
        let y = fabric::desired::yaml::to_string(&serde_json::json!({ "name": s, "next": 1 }));
        let back: serde_json::Value = serde_saphyr::from_str(&y).unwrap();
        prop_assert_eq!(back, serde_json::json!({ "name": s, "next": 1 }));
    }

    #[test]
    fn a_terminal_sees_no_control_sequence(s in accepted(), hostile in "[\\x00-\\x1f\\x7f\\u{202a}-\\u{202e}]{1,4}") {
        let safe = fabric::style::terminal_safe(&format!("{s}{hostile}{s}"), false);
        let acts = safe.chars().any(|c| (c.is_control() && c != '\n' && c != '\t') || ('\u{202a}'..='\u{202e}').contains(&c));
        prop_assert!(!acts, "{safe:?}");
        prop_assert_eq!(fabric::style::terminal_safe(&s, false), s);
    }
}
