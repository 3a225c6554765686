//! `fabric fmt`: the topology file in canonical form (`topology::fmt`).

use std::path::Path;

use clap::Args;
use miette::Report;

use super::{Done, EXAMPLE, EXAMPLE_NAME, usage};
use crate::command::args::Global;
use crate::style::{Style, terminal_safe};
use crate::topology::fmt::{FmtError, format};
use crate::topology::{self, LoadError};

/// Rewrite the topology file in canonical form, keeping its comments
///
/// The keys of every mapping, one-line flow mappings (`{ name: a, role: gpu }`) included, in the
/// order docs/topology.md lists them (keys it does not know after, as written; the keys of a free
/// map such as `decisions.public_address` as written), two spaces per level, lists indented under
/// their key, one space after a colon, flow collections spaced as `{ a: 1, b: [x, y] }`, no
/// trailing spaces, at most one blank line in a row. A comment on its own lines moves with the key
/// or list item below it; a trailing comment stays on its line. Scalars and quotes are kept as
/// written, and so is a flow collection over several lines.
///
/// Only the YAML syntax is checked (`fabric validate` checks the rest): a file that does not parse
/// is refused at its file:line:column, and the result must mean exactly what the file said; in
/// either case nothing is written. With --check nothing is written: exit 1 naming the file when
/// it is not in canonical form (the CI guard), 0 when it is. Running fmt twice changes nothing.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  fabric fmt\n  fabric -f topology.yaml fmt --check --diff   CI: exit 1 and show the changes when not canonical"
)]
pub struct Opts {
    /// Write nothing; exit 1, naming the file, when it is not in canonical form
    #[arg(long)]
    pub check: bool,
    /// Also show the changes as a unified diff (of the file against its canonical form)
    #[arg(long)]
    pub diff: bool,
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    let (file, text) = read(g)?;
    if g.example && !o.check && !o.diff {
        return Err(usage(
            "fmt::example",
            "the embedded example cannot be rewritten; nothing was written",
            "add --check or --diff, or format a file of your own with -f FILE",
        ));
    }
    let formatted = format(&text).map_err(|e| refused(g, &file, &text, e))?;
    let changed = formatted != text;
    let st = Style::stdout(g.no_color);
    if o.diff && changed {
        let d = similar::TextDiff::from_lines(&text, &formatted);
        let diff = d.unified_diff().context_radius(3).header(&file, &format!("{file} (canonical)")).to_string();
        crate::out!("{}", terminal_safe(&diff, st.color));
    }
    if o.check {
        if changed {
            crate::outln!("{}", terminal_safe(&file, false));
            return Err(usage(
                "fmt::unformatted",
                format!("{file} is not in canonical form; nothing was written"),
                format!("run `fabric -f {file} fmt` and commit the result (`--diff` shows the changes)"),
            ));
        }
        if !g.quiet {
            crate::outln!("{} is in canonical form", terminal_safe(&file, false));
        }
        return Ok(Done::Ok);
    }
    if !changed {
        if !g.quiet {
            crate::outln!("{} is in canonical form", terminal_safe(&file, false));
        }
        return Ok(Done::Ok);
    }
    write(Path::new(&file), &formatted).map_err(|e| {
        usage("fmt::io", format!("cannot write {file}: {e}; it was left as it was"), "check that the file is writable")
    })?;
    // As terraform fmt: the files it rewrote, one a line.
    crate::outln!("{}", terminal_safe(&file, false));
    Ok(Done::Ok)
}

/// The topology's name and text: -f's file (or ./topology.yaml), or the embedded example.
fn read(g: &Global) -> Result<(String, String), Report> {
    if g.example {
        return Ok((EXAMPLE_NAME.to_string(), EXAMPLE.to_string()));
    }
    let path = super::topology_path(g);
    if !path.exists() && g.topology.is_none() {
        return Err(usage(
            "fabric::no-topology",
            "no topology.yaml in this directory",
            "name a file with -f FILE (or $FABRIC_TOPOLOGY)",
        ));
    }
    let text = topology::read_file(&path).map_err(|e| match e {
        LoadError::Io { .. } => usage("topology::io", e.to_string(), "check the path given with -f"),
        _ => usage("topology::io", e.to_string(), "give a topology file (-f FILE): a regular file of at most 1 MiB"),
    })?;
    Ok((path.display().to_string(), text))
}

/// Why the file is not formatted, as one error naming its place (and the syntax error's snippet
/// printed above it).
fn refused(g: &Global, file: &str, text: &str, e: FmtError) -> Report {
    match e {
        FmtError::Syntax(p) => {
            let d = topology::problem::Diag::new(*p, None, file, &std::sync::Arc::new(text.to_string()));
            let (line, column, message) = (d.line, d.column, d.problem.message.clone());
            super::print_diags(&[d], g);
            usage(
                "topology::syntax",
                format!("{file}:{line}:{column}: {message}; nothing was written"),
                "fix the YAML at that place (spaces, not tabs; `key: value`), then run `fabric fmt` again",
            )
        }
        FmtError::Unsupported { line, what } => usage(
            "fmt::unsupported",
            format!("{file}:{line}: fmt cannot lay out {what}; nothing was written"),
            "write that line as a plain `key: value` entry or `- ` list item, indented with spaces",
        ),
        FmtError::Meaning(why) => usage(
            "fmt::meaning",
            format!("{file}: {why}"),
            "please report it with the file; `fabric validate` still reads the file as it is",
        ),
    }
}

/// Writes `text` over `path` as a whole: a temporary file beside it (with its permissions), then
/// renamed over it, so an interrupted fmt never leaves half a topology.
fn write(path: &Path, text: &str) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.fmt-{}", std::process::id()));
    let result = std::fs::write(&tmp, text)
        .and_then(|()| std::fs::set_permissions(&tmp, std::fs::metadata(path)?.permissions()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
