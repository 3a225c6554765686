//! Every `fabric` command the README, `docs/` and the `--help` texts show, checked against the
//! binary: a new user follows them literally, so each must parse, and each that contacts nothing
//! is run with its exit status and output checked.
//!
//! Run: the commands that contact nothing (validate, fmt, graph, render, schema, completions, man,
//! `plan --offline`, `plan --observed` with the chart indexes off, `show`) and the documented usage
//! errors, in a directory holding the example topology as `topology.yaml`. Parsed only: the live
//! ones (apply, a live plan, verify, lock, runs, rotate, state snapshot): the example's addresses
//! are production's, and nothing here may reach them.

use fabric_testkit::run::{stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::Output;

use clap::Parser;
use fabric::command::args::Format;
use fabric::command::cli::{Cli, Command};

/// The command lines the docs show on purpose as usage errors, and what clap says about each.
const USAGE_ERRORS: &[(&str, &str)] = &[("fabric plan --fromat markdown", "unexpected argument '--fromat'")];

/// Where a command line was found, and the line as a shell would get it (comment and
/// redirection dropped).
struct Example {
    from: String,
    line: String,
    /// Inline code in prose with no flag (`fabric state snapshot`): it may name a command
    /// rather than show a command line.
    name_only: bool,
}

/// A command line that names an existing command but leaves out what it requires (a
/// subcommand, `--out`): how prose names a command.
fn names_a_command(kind: clap::error::ErrorKind) -> bool {
    use clap::error::ErrorKind::*;
    matches!(kind, MissingSubcommand | DisplayHelpOnMissingArgumentOrSubcommand | MissingRequiredArgument)
}

/// `fabric …` lines of a Markdown file: in code blocks, and in inline code. A synopsis
/// (`[--out DIR]`, `text\|dot`) is not a command line.
fn markdown_examples(file: &str, text: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut in_block = false;
    for (i, line) in text.lines().enumerate() {
        let from = format!("{file}:{}", i + 1);
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        let candidates: Vec<&str> =
            if in_block { vec![line.trim()] } else { line.split('`').skip(1).step_by(2).collect() };
        for c in candidates {
            match c.strip_prefix("cargo run --release -- ") {
                Some(rest) => push(&mut out, &from, &format!("fabric {rest}"), false),
                None if c.starts_with("fabric ") => push(&mut out, &from, c, !in_block && !c.contains(" -")),
                None => {}
            }
        }
    }
    out
}

fn push(out: &mut Vec<Example>, from: &str, line: &str, name_only: bool) {
    let line = line.split(" # ").next().unwrap_or_default();
    let line = line.split(" > ").next().unwrap_or_default().trim();
    let synopsis = ['[', '|', '…'].iter().any(|c| line.contains(*c)) || line.contains("...");
    if !synopsis && line.len() > "fabric ".len() {
        out.push(Example { from: from.into(), line: line.into(), name_only });
    }
}

/// The examples of every `--help` text (its "Examples:" lines), each subcommand's included;
/// every help text exits 0.
fn help_examples(dir: &Path) -> Vec<Example> {
    fn walk(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(path.clone());
        for sub in cmd.get_subcommands() {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            walk(sub, p, out);
        }
    }
    let mut paths = Vec::new();
    walk(&<Cli as clap::CommandFactory>::command(), vec![], &mut paths);
    let mut out = Vec::new();
    for path in paths {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let o = fabric(dir, &args);
        assert_eq!(o.status.code(), Some(0), "fabric {}: {}", args.join(" "), stderr(&o));
        let text = stdout(&o);
        let from = format!("fabric {} --help", path.join(" "));
        let examples = text.split_once("Examples:\n").map(|(_, e)| e).unwrap_or_default();
        for l in examples.lines().take_while(|l| l.starts_with("  ")).map(str::trim) {
            // `fabric … ARGS   what it does`: the words after a wide gap say what it does; a
            // `#` line is a comment, `a && b` two commands.
            let l = l.split("   ").next().unwrap_or_default();
            for c in l.split(" && ").filter(|c| c.starts_with("fabric ")) {
                push(&mut out, &from, c, false);
            }
        }
    }
    out
}

fn fabric(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_fabric"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("HOME", dir.parent().unwrap())
        // Contacts nothing: an online-capable check (the chart indexes) is off.
        .env("FABRIC_CHART_INDEXES", "off")
        .env("FABRIC_SSH_CONFIG", "/dev/null")
        .env_remove("FABRIC_TOPOLOGY")
        .env_remove("FABRIC_STATE_DIR")
        .output()
        .expect("run fabric")
}

/// What running a parsed command line must give: its exit status and what its output starts
/// with; None for a command that would contact a target (it is only parsed).
fn expected(cli: &Cli) -> Option<(i32, &'static str)> {
    match &cli.command {
        Command::Plan(p) if p.offline || p.observed.is_some() => {
            // Offline, or from the snapshot the test writes (nothing in it): everything changes.
            Some((if p.detailed_exitcode { 2 } else { 0 }, plan_starts(p.format)))
        }
        // The plan the work directory holds as `b1.plan`.
        Command::Show(s) => Some((0, plan_starts(s.format))),
        Command::Validate(_) => Some((0, "topology.yaml: valid")),
        // The example is in canonical form: fmt (with or without --check) says so and writes nothing.
        Command::Fmt(f) if !f.diff => Some((0, "topology.yaml is in canonical form")),
        Command::Fmt(_) => Some((0, "")),
        Command::Graph(_) | Command::Schema(_) | Command::Completions(_) => Some((0, "")),
        Command::Render(_) => Some((0, "")),
        Command::Man(_) => Some((0, ".ie")),
        _ => None,
    }
}

/// How a plan printed in `format` starts.
fn plan_starts(format: Format) -> &'static str {
    match format {
        Format::Human => "fabric plan: ",
        Format::Markdown => "### fabric plan: ",
        Format::Json => "{\n  \"format_version\": \"1.6\"",
    }
}

/// A directory holding what the docs' commands name: the example as `topology.yaml`, the pull
/// request's base (`base.yaml`), an empty snapshot (`state.json`), a saved plan (`b1.plan`,
/// for `show`), and the files `render` writes
/// where the docs check them (`.`, `../devops`).
fn workdir() -> PathBuf {
    let root = std::env::temp_dir().join(format!("fabric-doc-examples-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("work");
    std::fs::create_dir_all(&dir).unwrap();
    let example = include_str!("../topology.example.yaml");
    std::fs::write(dir.join("topology.yaml"), example).unwrap();
    let batch = "local_queues: [{ name: batch, namespace: batch }]";
    let base = example.replace(&format!("gpu_quota: 2\n        {batch}"), &format!("gpu_quota: 1\n        {batch}"));
    assert_ne!(base, example, "the base differs from the head");
    std::fs::write(dir.join("base.yaml"), base).unwrap();
    let snap = fabric::live::snapshot::Snapshot::new("sp-franca", "", Default::default(), vec![]);
    std::fs::write(dir.join("state.json"), serde_json::to_string(&snap).unwrap()).unwrap();
    let o = fabric(&dir, &["plan", "--offline", "-q", "--out", "b1.plan"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for out in [".", "../devops"] {
        let o = fabric(&dir, &["render", "--out", out, "-q"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    dir
}

#[test]
fn every_documented_command_parses_and_the_offline_ones_do_what_the_docs_say() {
    let dir = workdir();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut examples = Vec::new();
    let mut docs: Vec<PathBuf> = vec![root.join("README.md")];
    let mut in_docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    in_docs.sort();
    docs.extend(in_docs);
    for p in &docs {
        let name = p.strip_prefix(root).unwrap().display().to_string();
        examples.extend(markdown_examples(&name, &std::fs::read_to_string(p).unwrap()));
    }
    examples.extend(help_examples(&dir));
    assert!(examples.len() > 80, "found {} examples", examples.len());

    let (mut ran, mut parsed, mut wrong) = (0, 0, Vec::new());
    for e in &examples {
        let args: Vec<&str> = e.line.split_whitespace().skip(1).collect();
        let usage = USAGE_ERRORS.iter().find(|(l, _)| *l == e.line);
        let parsed_line = Cli::try_parse_from(e.line.split_whitespace());
        if e.name_only && parsed_line.as_ref().is_err_and(|err| names_a_command(err.kind())) {
            parsed += 1;
            continue;
        }
        let cli = match (parsed_line, usage) {
            (Ok(_), Some(_)) => {
                wrong.push(format!("{}: `{}` is shown as a usage error but parses", e.from, e.line));
                continue;
            }
            (Ok(cli), None) => cli,
            (Err(err), None) => {
                wrong.push(format!("{}: `{}` does not parse: {}", e.from, e.line, err.kind()));
                continue;
            }
            (Err(_), Some((_, says))) => {
                // Refused before anything is read: safe to run.
                let o = fabric(&dir, &args);
                ran += 1;
                if o.status.code() != Some(1) || !stderr(&o).contains(says) || !o.stdout.is_empty() {
                    wrong.push(format!("{}: `{}` exits {:?}: {}", e.from, e.line, o.status.code(), stderr(&o)));
                }
                continue;
            }
        };
        let Some((code, starts)) = expected(&cli) else {
            parsed += 1;
            continue;
        };
        let o = fabric(&dir, &args);
        ran += 1;
        let out = stdout(&o);
        if o.status.code() != Some(code)
            || !out.starts_with(starts)
            || (starts.is_empty() && code == 0 && out.is_empty() && !matches!(cli.command, Command::Render(_)))
        {
            wrong.push(format!(
                "{}: `{}` exits {:?} (want {code}), its output starts {:?} (want {starts:?}): {}",
                e.from,
                e.line,
                o.status.code(),
                &out[..out.len().min(60)],
                stderr(&o).lines().filter(|l| l.contains("×") || l.contains("error")).collect::<Vec<_>>().join(" | ")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} documented commands are wrong:\n{}",
        wrong.len(),
        examples.len(),
        wrong.join("\n")
    );
    eprintln!("{} documented commands: {ran} run, {parsed} parsed only", examples.len());
    assert!(ran > 30 && parsed > 30, "ran {ran}, parsed only {parsed}");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// The help texts state the exit codes the commands give (docs/errors.md has them all).
#[test]
fn help_texts_state_the_exit_codes() {
    let dir = std::env::temp_dir();
    for (args, says) in [
        (&["plan", "--help"][..], &["1 error (a usage error", "2 changes", "3 partial"][..]),
        (&["runs", "--help"], &["0 when\nevery cluster was read, 3 when some could not be"]),
        (&["lock", "status", "--help"], &["Exit status: 0 when every\ntarget was read, 3 when some"]),
        (&["state", "snapshot", "--help"], &["3 when some could not be"]),
    ] {
        let o = fabric(&dir, args);
        assert_eq!(o.status.code(), Some(0));
        let text = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
        for s in says {
            let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(text.contains(&s), "`fabric {}` lacks {s:?}: {text}", args.join(" "));
        }
    }
}
