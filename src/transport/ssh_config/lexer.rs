//! One ssh_config line split as OpenSSH splits it (openssh-portable `readconf.c`,
//! `process_config_line_depth`; `misc.c`, `strdelim_internal` and `argv_split`): the keyword ends
//! at whitespace or a single `=`; the rest is split into arguments on blanks, with `"` or `'`
//! quoting, backslash escapes of quotes, backslashes and (outside quotes) spaces, and a `#` at
//! the start of an argument ending the line.

/// A line's keyword (lowercased, as OpenSSH matches keywords) and what follows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Words {
    pub keyword: String,
    /// The text after the keyword and its separator, as written (ProxyJump reads this).
    pub rest: String,
    pub args: Vec<String>,
}

/// Why a line cannot be read; the caller adds the file and line.
#[derive(Debug, Clone, PartialEq)]
pub enum LexError {
    NoArgument(String),
    Quotes,
}

/// Splits `line`; `None` for a blank line or a comment.
pub fn split(line: &str) -> Option<Result<Words, LexError>> {
    let line = line.trim_end_matches([' ', '\t', '\r', '\n', '\x0c']).trim_start_matches([' ', '\t']);
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let end = line.find([' ', '\t', '=']).unwrap_or(line.len());
    let keyword = line[..end].to_ascii_lowercase();
    let mut rest = line[end..].trim_start_matches([' ', '\t']);
    // One `=` may separate the keyword from its value, with blanks on either side.
    if let Some(r) = rest.strip_prefix('=') {
        rest = r.trim_start_matches([' ', '\t']);
    }
    if rest.is_empty() {
        return Some(Err(LexError::NoArgument(keyword)));
    }
    Some(argv_split(rest).map(|args| Words { keyword, rest: rest.to_string(), args }).ok_or(LexError::Quotes))
}

/// `argv_split` with `terminate_on_comment`; `None` for an unterminated quote.
fn argv_split(s: &str) -> Option<Vec<String>> {
    let chars: Vec<char> = s.chars().collect();
    let mut args = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == ' ' || chars[i] == '\t' {
            i += 1;
            continue;
        }
        if chars[i] == '#' {
            break;
        }
        let mut arg = String::new();
        let mut quote = None;
        while i < chars.len() {
            let c = chars[i];
            match (c, quote) {
                ('\\', q)
                    if chars
                        .get(i + 1)
                        .is_some_and(|&n| n == '\'' || n == '"' || n == '\\' || (q.is_none() && n == ' ')) =>
                {
                    arg.push(chars[i + 1]);
                    i += 1;
                }
                (' ' | '\t', None) => break,
                ('"' | '\'', None) => quote = Some(c),
                (c, Some(q)) if c == q => quote = None,
                (c, _) => arg.push(c),
            }
            i += 1;
        }
        if quote.is_some() {
            return None;
        }
        args.push(arg);
    }
    Some(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Words {
        split(line).unwrap().unwrap()
    }

    #[test]
    fn keyword_and_separators() {
        let w = words("  HostName   10.0.0.1  ");
        assert_eq!((w.keyword.as_str(), w.args.as_slice()), ("hostname", ["10.0.0.1".to_string()].as_slice()));
        assert_eq!(words("Port=2222").args, ["2222"]);
        assert_eq!(words("Port = 2222").args, ["2222"]);
        assert_eq!(words("Host a b # not c").args, ["a", "b"]);
        assert_eq!(words("ProxyJump a,b").rest, "a,b");
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(words(r#"IdentityFile "/a b/key" c\ d 'e"f'"#).args, ["/a b/key", "c d", "e\"f"]);
        assert_eq!(split("IdentityFile \"/a b").unwrap(), Err(LexError::Quotes));
    }

    #[test]
    fn blanks_comments_and_missing_values() {
        assert!(split("   ").is_none());
        assert!(split("  # Host x").is_none());
        assert_eq!(split("Host").unwrap(), Err(LexError::NoArgument("host".into())));
    }
}
