//! Warnings shown once per cause: the same warning at many places (a node per line of the
//! topology, each with the same fix) is printed once, with the other places listed in its help,
//! so that a small topology's few causes are a few warnings, not one screen per node.

use crate::topology::problem::{Diag, Severity};

/// What makes two warnings one cause: the same code, label and first line of help (the fix).
/// The message is not part of it: it names the place (`node franca-lan`).
fn cause(d: &Diag) -> Option<(&'static str, &str, &str)> {
    let p = &d.problem;
    (p.severity == Severity::Warning)
        .then(|| (p.code, p.label.as_str(), p.help.as_deref().and_then(|h| h.lines().next()).unwrap_or_default()))
}

/// `diags` in order, each warning's cause once: its first place in full, the others named in its
/// help (`file:line:col`). Errors are kept one by one (each must be fixed where it is).
pub fn once_per_cause(diags: &[Diag]) -> Vec<Diag> {
    let mut out: Vec<Diag> = Vec::new();
    let mut more: Vec<Vec<String>> = Vec::new();
    for d in diags {
        let first = cause(d).and_then(|c| out.iter().position(|o| cause(o) == Some(c)));
        match first {
            Some(i) => more[i].push(format!("{} ({})", d.location(), d.problem.message)),
            None => {
                out.push(d.clone());
                more.push(Vec::new());
            }
        }
    }
    for (d, places) in out.iter_mut().zip(more) {
        if places.is_empty() {
            continue;
        }
        let also = format!("the same cause at {} more place(s):\n{}", places.len(), places.join("\n"));
        d.problem.help = Some(match d.problem.help.take() {
            Some(h) => format!("{h}\n{also}"),
            None => also,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::problem::Problem;
    use std::sync::Arc;

    fn diag(p: Problem, line: usize) -> Diag {
        let text = Arc::new("a\n".repeat(10));
        let mut d = Diag::new(p, None, "t.yaml", &text);
        d.line = line;
        d
    }

    #[test]
    fn one_cause_at_three_places_is_one_warning_naming_the_others() {
        let w = |name: &str| {
            Problem::warning("topology::node", Default::default(), format!("node `{name}` is never installed"))
                .label("nothing to install from")
                .help("add `k3s_airgap:`")
        };
        let other = Problem::warning("topology::quota", Default::default(), "another cause");
        let err = |name: &str| Problem::error("topology::node", Default::default(), format!("node `{name}` is bad"));
        let shown = once_per_cause(&[
            diag(w("a"), 3),
            diag(err("x"), 4),
            diag(w("b"), 5),
            diag(other, 6),
            diag(err("y"), 7),
            diag(w("c"), 8),
        ]);
        let messages: Vec<&str> = shown.iter().map(|d| d.problem.message.as_str()).collect();
        assert_eq!(messages, ["node `a` is never installed", "node `x` is bad", "another cause", "node `y` is bad"]);
        assert_eq!(
            shown[0].problem.help.as_deref(),
            Some(
                "add `k3s_airgap:`\nthe same cause at 2 more place(s):\nt.yaml:5:1 (node `b` is never installed)\n\
                 t.yaml:8:1 (node `c` is never installed)"
            )
        );
        assert_eq!(shown[2].problem.help, None, "a warning of its own is left as it is");
    }
}
