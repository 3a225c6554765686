//! OpenSSH's host and user patterns, as its `match.c` defines them (openssh-portable
//! `match.c`: `match_pattern`, `match_pattern_list`, `match_hostname`).
//!
//! `*` matches any run of characters and `?` one character; nothing else is special. Patterns
//! are case-sensitive, except in `match_hostname`, which lowercases the name and the pattern
//! (`Match host` and `Match originalhost`); `Host` lines use the case-sensitive `match_pattern`.

/// `match_pattern`: does `s` match the single pattern `pattern` (no lists, no negation)?
pub fn matches(s: &str, pattern: &str) -> bool {
    fn rec(p: &[u8], s: &[u8]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => rec(&p[1..], s) || (!s.is_empty() && rec(p, &s[1..])),
            (Some(b'?'), Some(_)) => rec(&p[1..], &s[1..]),
            (Some(a), Some(b)) if a == b => rec(&p[1..], &s[1..]),
            _ => false,
        }
    }
    rec(pattern.as_bytes(), s.as_bytes())
}

/// `match_pattern_list`: a comma-separated list where `!` negates. A negated match wins over
/// everything (no match); otherwise any positive match matches. With `lower`, the pattern is
/// lowercased first (the caller lowercases `s`).
pub fn matches_list(s: &str, list: &str, lower: bool) -> bool {
    let mut positive = false;
    for item in list.split(',') {
        let (negated, pattern) = match item.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, item),
        };
        let pattern = if lower { pattern.to_ascii_lowercase() } else { pattern.to_string() };
        if matches(s, &pattern) {
            if negated {
                return false;
            }
            positive = true;
        }
    }
    positive
}

/// `match_hostname`: `matches_list` on the lowercased host name.
pub fn matches_hostname(host: &str, list: &str) -> bool {
    matches_list(&host.to_ascii_lowercase(), list, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(matches("x", "*"));
        assert!(matches("franca-router", "*-router"));
        assert!(!matches("franca-lan", "*-router"));
        assert!(matches("host", "h?st"));
        assert!(!matches("hst", "h?st"));
        assert!(matches("10.250.1.2", "10.250.*"));
        assert!(matches("", ""));
        assert!(!matches("a", ""));
    }

    #[test]
    fn host_patterns_are_case_sensitive_and_match_host_is_not() {
        assert!(!matches("Router", "router"));
        assert!(matches_hostname("Router", "ROUTER"));
    }

    #[test]
    fn a_negation_wins_over_any_positive_match() {
        assert!(matches_list("sp-router", "*-router", false));
        assert!(!matches_list("sp-router", "*-router,!sp-*", false));
        assert!(!matches_list("sp-router", "!sp-*,*", false));
        assert!(!matches_list("x", "!y", false), "a list of negations alone matches nothing");
    }
}
