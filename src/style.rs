//! Terminal styling, decided once: color only on a terminal, never with NO_COLOR or --no-color.

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
