//! Hostile input is refused where it enters, with a diagnostic that points at it: a topology
//! string that would become a new line in a router's configuration or a command, a name that
//! would break out of a quoted value, a device or a huge file given as the topology.
//! (Issue "Safe under hostile input and faults", items 1 and 8.)

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const EXAMPLE: &str = include_str!("../topology.example.yaml");

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("fabric-hostile-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

fn validate(file: &std::path::Path) -> (i32, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_fabric")).args(["--no-color", "validate", "-f"]).arg(file).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The example with its `name:` replaced by `value` (a YAML double-quoted scalar).
fn with_name(value: &str) -> String {
    let line = EXAMPLE.lines().find(|l| l.starts_with("name:")).expect("the example has a name");
    EXAMPLE.replacen(line, &format!("name: {value}"), 1)
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn a_name_that_would_add_a_wg_quick_section_is_refused_at_its_line() {
    let d = dir();
    let f = d.join("t.yaml");
    let text = with_name(r#""x\n[Interface]\nPostUp = touch /tmp/pwned""#);
    std::fs::write(&f, &text).unwrap();
    let (code, err) = validate(&f);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("topology::control-character"), "{err}");
    assert!(err.contains("U+000A"), "{err}");
    assert!(err.contains(&format!("t.yaml:{}:", line_of(&text, "name: "))), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_name_that_would_close_a_quote_is_not_a_label_value() {
    let d = dir();
    let f = d.join("t.yaml");
    std::fs::write(&f, with_name(r#""x'; touch /tmp/p; echo '""#)).unwrap();
    let (code, err) = validate(&f);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("topology::name"), "{err}");
    assert!(err.contains("not a label value"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn terminal_escapes_and_bidi_overrides_are_refused_anywhere() {
    let d = dir();
    for (i, hostile) in ["\\e]0;owned\\a", "\\x1b[2J", "abc\\u202Edef", "a\\tb"].iter().enumerate() {
        let f = d.join(format!("t{i}.yaml"));
        // In a value other than a name: the repository URL of ArgoCD.
        let line = EXAMPLE.lines().find(|l| l.trim_start().starts_with("repo:")).expect("the example has a repo");
        let indent = &line[..line.len() - line.trim_start().len()];
        std::fs::write(&f, EXAMPLE.replacen(line, &format!("{indent}repo: \"https://x/{hostile}\""), 1)).unwrap();
        let (code, err) = validate(&f);
        assert_eq!(code, 1, "{hostile}: {err}");
        assert!(err.contains("topology::control-character"), "{hostile}: {err}");
        // The diagnostic itself shows the character escaped, never raw.
        assert!(!err.contains('\u{1b}') && !err.contains('\u{202e}'), "{hostile}: {err:?}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_ssh_host_that_would_be_read_as_an_option_is_refused() {
    let d = dir();
    let f = d.join("t.yaml");
    let text = EXAMPLE.replacen(
        "ssh: { host: 192.168.0.1, user: vyos }",
        "ssh: { host: \"-oProxyCommand=touch /tmp/p\", user: vyos }",
        1,
    );
    assert_ne!(text, EXAMPLE, "the example's router has this ssh line");
    std::fs::write(&f, &text).unwrap();
    let (code, err) = validate(&f);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("topology::ssh") && err.contains("is not a host"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_device_or_a_huge_file_is_refused_at_once() {
    let started = Instant::now();
    let (code, err) = validate(std::path::Path::new("/dev/zero"));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "validate /dev/zero took {:?}", started.elapsed());

    let d = dir();
    let f = d.join("big.yaml");
    let mut text = EXAMPLE.to_string();
    while text.len() <= 1 << 20 {
        text.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    std::fs::write(&f, &text).unwrap();
    let (code, err) = validate(&f);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("a topology is at most 1048576 bytes"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}
