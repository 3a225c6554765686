//! Terminal styling, decided once: color only on a terminal, never with NO_COLOR or --no-color;
//! and the one escaping function for the terminal ([`terminal_safe`]).

use std::io::IsTerminal;

#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// `no_color` is the flag; NO_COLOR (any non-empty value, see no-color.org) also turns it off.
    pub fn detect(no_color: bool, stream_is_tty: bool) -> Style {
        let env_off = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style { color: !no_color && !env_off && stream_is_tty }
    }
    pub fn stdout(no_color: bool) -> Style {
        Style::detect(no_color, std::io::stdout().is_terminal())
    }
    pub fn stderr(no_color: bool) -> Style {
        Style::detect(no_color, std::io::stderr().is_terminal())
    }
    fn paint(&self, code: &str, s: &str) -> String {
        if self.color { format!("\x1b[{code}m{s}\x1b[0m") } else { s.to_string() }
    }
    pub fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    pub fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }
    pub fn red(&self, s: &str) -> String {
        self.paint("31", s)
    }
    pub fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
    pub fn yellow(&self, s: &str) -> String {
        self.paint("33", s)
    }
}

/// Text as it may reach a terminal: control characters and bidirectional overrides become
/// visible escapes (`\u{1b}`), so nothing a host answered or a file held can move the cursor,
/// retitle the window or reorder what is shown. Line breaks and tabs stay; with `color`, the
/// SGR color sequences fabric itself writes (`ESC [ digits ; … m`) stay too.
pub fn terminal_safe(s: &str, color: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if color
            && c == '\u{1b}'
            && let Some(n) = sgr_len(rest)
        {
            out.push_str(&rest[..n]);
            rest = &rest[n..];
            continue;
        }
        let hidden = (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if hidden {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The length of an SGR sequence at the start of `s` (`ESC [ 0-9 ; … m`), if there is one.
fn sgr_len(s: &str) -> Option<usize> {
    let body = s.strip_prefix("\u{1b}[")?;
    let end = body.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
    (body[end..].starts_with('m')).then_some(2 + end + 1)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn escapes_become_visible_and_colors_stay_when_asked() {
        let st = Style { color: true };
        let red = st.red("x");
        assert_eq!(terminal_safe(&red, true), red);
        assert_eq!(terminal_safe(&red, false), "\\u{1b}[31mx\\u{1b}[0m");
        assert_eq!(terminal_safe("a\u{1b}]0;owned\u{7}b", true), "a\\u{1b}]0;owned\\u{7}b");
        assert_eq!(terminal_safe("l1\n\tl2 \u{202e}x", false), "l1\n\tl2 \\u{202e}x");
    }

    proptest! {
        #[test]
        fn nothing_but_colors_survives(s in "\\PC*", c in proptest::collection::vec(any::<char>(), 0..8)) {
            let text = format!("{s}{}", c.iter().collect::<String>());
            let safe = terminal_safe(&text, false);
            let leaked = safe.chars().any(|c| (c.is_control() && c != '\n' && c != '\t')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'));
            prop_assert!(!leaked, "{:?}", safe);
        }
    }
}
