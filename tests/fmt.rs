//! `fabric fmt` (issue 36, item 6): the topology in canonical form, as `terraform fmt`. It never
//! changes what a topology means (the example and every topology under tests/ load to the same
//! model, formatted or not), running it twice changes nothing, `--check` writes nothing and exits
//! 1 naming the file, and a file that does not parse is refused at its file:line:column with
//! nothing written.

use std::path::{Path, PathBuf};
use std::process::Output;

use fabric::topology::fmt::format;
use fabric_testkit::run::{stderr, stdout};

fn fabric(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_fabric"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("FABRIC_TOPOLOGY")
        .output()
        .expect("run fabric")
}

fn workdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fabric-fmt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The example and the topologies the tests use (tests/data).
fn topologies() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![("topology.example.yaml".to_string(), include_str!("../topology.example.yaml").to_string())];
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("tests/data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap();
        if text.lines().any(|l| l.starts_with("version: ")) {
            out.push((p.strip_prefix(root).unwrap().display().to_string(), text));
        }
    }
    assert!(out.len() >= 5, "{:?}", out.iter().map(|(n, _)| n).collect::<Vec<_>>());
    out
}

/// The model a topology loads to, as text (every field, in order).
fn model(name: &str, text: &str) -> String {
    let loaded = fabric::topology::load_str(name, text.to_string()).unwrap_or_else(|e| panic!("{name}: {e}"));
    format!("{:#?}", loaded.topology)
}

#[test]
fn formatting_never_changes_what_a_topology_says_and_is_idempotent() {
    for (name, text) in topologies() {
        let once = format(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(model(&name, &once), model(&name, &text), "{name}: formatted, it loads to another model");
        assert_eq!(format(&once).unwrap(), once, "{name}: a second fmt changes it");
        // Every comment line is still there.
        let comments = |t: &str| {
            let mut c: Vec<String> = t.lines().filter_map(|l| l.find('#').map(|i| l[i..].to_string())).collect();
            c.sort();
            c
        };
        assert_eq!(comments(&once), comments(&text), "{name}: a comment was lost or changed");
    }
}

/// The example as a new user would scramble it: keys out of order, four-space indentation,
/// extra blank lines and spaces; fmt puts it back exactly.
#[test]
fn fmt_check_rewrite_and_refusals_through_the_binary() {
    let dir = workdir("cli");
    let example = include_str!("../topology.example.yaml");
    std::fs::write(dir.join("topology.yaml"), example).unwrap();

    // Canonical: --check exits 0 and writes nothing.
    let o = fabric(&dir, &["fmt", "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "topology.yaml is in canonical form\n");

    // Scrambled: `versions` after `sites`, `version` after `name`, its keys reordered, a
    // trailing space, three blank lines, an indentation of four.
    let scrambled = scramble(example);
    assert_ne!(scrambled, example);
    std::fs::write(dir.join("topology.yaml"), &scrambled).unwrap();
    let o = fabric(&dir, &["fmt", "--check", "--diff"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("--- topology.yaml\n+++ topology.yaml (canonical)\n"), "{out}");
    assert!(out.ends_with("\ntopology.yaml\n"), "the file is named: {out}");
    let err = stderr(&o);
    assert!(err.contains("topology.yaml is not in canonical form; nothing was written"), "{err}");
    assert!(err.contains("run `fabric -f topology.yaml fmt`"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("topology.yaml")).unwrap(), scrambled, "--check writes nothing");

    // fmt rewrites it to the canonical text, names it, and a second run changes nothing.
    let o = fabric(&dir, &["fmt"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "topology.yaml\n");
    assert_eq!(std::fs::read_to_string(dir.join("topology.yaml")).unwrap(), example);
    let o = fabric(&dir, &["-f", "topology.yaml", "fmt"]);
    assert_eq!(stdout(&o), "topology.yaml is in canonical form\n", "{}", stderr(&o));

    // A file that does not parse: refused at its file:line:column, nothing written.
    let broken = example.replacen("  cilium: 1.18.4\n", "  cilium: [1.18.4\n", 1);
    std::fs::write(dir.join("broken.yaml"), &broken).unwrap();
    for check in [false, true] {
        let args: &[&str] =
            if check { &["-f", "broken.yaml", "fmt", "--check"] } else { &["-f", "broken.yaml", "fmt"] };
        let o = fabric(&dir, args);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let err = stderr(&o);
        let at = match fabric::topology::load_str("broken.yaml", broken.clone()) {
            Err(fabric::topology::LoadError::Invalid { diags, .. }) => {
                format!("broken.yaml:{}:{}: ", diags[0].line, diags[0].column)
            }
            other => panic!("{other:?}"),
        };
        assert!(err.contains(&at) && err.contains("nothing was written"), "{at}: {err}");
        assert!(err.contains("topology::syntax"), "{err}");
        assert_eq!(std::fs::read_to_string(dir.join("broken.yaml")).unwrap(), broken);
    }
    // No file: the usual error; the embedded example is never rewritten.
    let o = fabric(&dir, &["-f", "missing.yaml", "fmt"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("missing.yaml"), "{}", stderr(&o));
    let o = fabric(&dir, &["--example", "fmt"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("the embedded example cannot be rewritten"), "{}", stderr(&o));
    let o = fabric(&dir, &["--example", "fmt", "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `example` with its top-level keys and `versions:` out of order, indented by four, with a
/// trailing space and extra blank lines.
fn scramble(example: &str) -> String {
    let versions_start = example.find("# Pinned versions.").unwrap();
    let versions_end = example.find("# The seed's \"Decisoes em aberto\"").unwrap();
    let versions = &example[versions_start..versions_end];
    let without = format!("{}{}", &example[..versions_start], &example[versions_end..]);
    let shuffled_versions = versions
        .replace("  k3s: v1.33.5+k3s1\n", "")
        .replace("  kueue: 0.15.2\n", "  kueue: 0.15.2\n  k3s: v1.33.5+k3s1\n")
        .replace("\n  ", "\n    ");
    let sites = without.find("\nmesh:").unwrap();
    let mut s = format!("{}\n\n\n{}{}", &without[..sites], shuffled_versions, &without[sites..]);
    s = s.replacen("version: 1\nname: sp-franca\n", "name: sp-franca   \nversion: 1\n", 1);
    s
}
