//! Problems found in a topology, and their rendering as miette diagnostics.
//!
//! Checks produce [`Problem`]s that name a [`Path`]; the path becomes a span only when the problem
//! is attached to its source. That keeps every check a pure function of data, testable without
//! text, while every message the operator sees still points at file, line and column.

use std::fmt;
use std::sync::Arc;

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceSpan};
use serde::Serialize;

use super::tree::{Node, Path, Span};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem, before it is tied to the source text.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub severity: Severity,
    /// Stable identifier, e.g. `topology::overlap`; listed in docs/errors.md.
    pub code: &'static str,
    pub message: String,
    pub path: Path,
    /// Text on the label under the offending value.
    pub label: String,
    pub help: Option<String>,
    /// Other places involved (the first definition of a duplicate, the overlapping prefix).
    pub related: Vec<(Path, String)>,
    /// Other places whose span is already known.
    pub related_spans: Vec<(Span, String)>,
    /// Where the span is already known (syntax errors): used instead of `path`.
    pub span: Option<Span>,
}

impl Problem {
    pub fn error(code: &'static str, path: Path, message: impl Into<String>) -> Problem {
        Problem {
            severity: Severity::Error,
            code,
            message: message.into(),
            path,
            label: String::new(),
            help: None,
            related: Vec::new(),
            related_spans: Vec::new(),
            span: None,
        }
    }
    pub fn warning(code: &'static str, path: Path, message: impl Into<String>) -> Problem {
        Problem { severity: Severity::Warning, ..Problem::error(code, path, message) }
    }
    pub fn label(mut self, label: impl Into<String>) -> Problem {
        self.label = label.into();
        self
    }
    pub fn help(mut self, help: impl Into<String>) -> Problem {
        self.help = Some(help.into());
        self
    }
    pub fn related(mut self, path: Path, label: impl Into<String>) -> Problem {
        self.related.push((path, label.into()));
        self
    }
    pub fn related_at(mut self, span: Span, label: impl Into<String>) -> Problem {
        self.related_spans.push((span, label.into()));
        self
    }
    pub fn at(mut self, span: Span) -> Problem {
        self.span = Some(span);
        self
    }
}

/// A problem tied to its file: what the operator sees.
#[derive(Debug, Clone)]
pub struct Diag {
    pub problem: Problem,
    pub src: NamedSource<Arc<String>>,
    pub labels: Vec<LabeledSpan>,
    pub file: String,
    pub line: usize,
    pub column: usize,
}

impl Diag {
    pub fn new(problem: Problem, tree: Option<&Node>, file: &str, text: &Arc<String>) -> Diag {
        let locate = |p: &Path| tree.map(|t| t.span_of(p)).unwrap_or_default();
        let primary = problem.span.unwrap_or_else(|| locate(&problem.path));
        let primary = clamp(primary, text);
        let mut labels = vec![LabeledSpan::new_primary_with_span(
            Some(problem.label.clone()).filter(|l| !l.is_empty()),
            SourceSpan::from((primary.offset, primary.len)),
        )];
        let related: Vec<(Span, String)> = problem
            .related
            .iter()
            .map(|(p, l)| (locate(p), l.clone()))
            .chain(problem.related_spans.iter().cloned())
            .collect();
        let (line, column) = line_col(text, primary.offset);
        let mut problem = problem;
        let mut far = Vec::new();
        for (s, label) in related {
            let s = clamp(s, text);
            let (rl, rc) = line_col(text, s.offset);
            // miette joins a label that comes earlier in the file into one snippet with every
            // line in between; a distant earlier place is named in the help instead.
            if rl + 6 < line {
                far.push(format!("{label}: {file}:{rl}:{rc}"));
            } else {
                labels.push(LabeledSpan::new_with_span(Some(label), SourceSpan::from((s.offset, s.len))));
            }
        }
        if !far.is_empty() {
            let see = far.join("\n");
            problem.help = Some(match problem.help.take() {
                Some(h) => format!("{h}\n{see}"),
                None => see,
            });
        }
        Diag {
            src: NamedSource::new(file, super::userinfo::mask_userinfo(text).map_or_else(|| text.clone(), Arc::new))
                .with_language("yaml"),
            labels,
            file: file.to_string(),
            line,
            column,
            problem,
        }
    }

    /// `file:line:col`, as compilers print it.
    pub fn location(&self) -> String {
        format!("{}:{}:{}", self.file, self.line, self.column)
    }
}

fn clamp(s: Span, text: &str) -> Span {
    let offset = s.offset.min(text.len());
    Span { offset, len: s.len.min(text.len() - offset) }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut off = offset.min(text.len());
    while !text.is_char_boundary(off) {
        off -= 1;
    }
    let before = &text[..off];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problem.message)
    }
}

impl std::error::Error for Diag {}

impl Diagnostic for Diag {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.problem.code))
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.problem.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.problem.help.as_ref().map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.src)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }
}

/// The machine-readable form of a diagnostic (`validate --format json`).
#[derive(Serialize)]
pub struct DiagJson<'a> {
    pub severity: Severity,
    pub code: &'a str,
    pub message: &'a str,
    pub file: &'a str,
    pub line: usize,
    pub column: usize,
    pub path: String,
    pub help: Option<&'a str>,
}

impl<'a> From<&'a Diag> for DiagJson<'a> {
    fn from(d: &'a Diag) -> Self {
        DiagJson {
            severity: d.problem.severity,
            code: d.problem.code,
            message: &d.problem.message,
            file: &d.file,
            line: d.line,
            column: d.column,
            path: d.problem.path.to_string(),
            help: d.problem.help.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let t = "a: 1\nbé: x\n";
        assert_eq!(line_col(t, 0), (1, 1));
        assert_eq!(line_col(t, 5), (2, 1));
        // 'x' is at byte 10 ('é' is two bytes) but column 5.
        assert_eq!(line_col(t, 10), (2, 5));
        assert_eq!(line_col(t, 999), (3, 1));
    }
}
