//! URL credentials (`user:password@`) kept out of everything fabric shows or logs: messages,
//! plans, the commands run on hosts, and the source lines diagnostics quote. Only the HTTP client
//! sees them (`providers::bundle`), to send them to the server they belong to.

/// `url` without its userinfo (`user:password@`), for anything that shows or logs it: the
/// credentials of a mirror stay out of messages, plans and the commands run on hosts.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), url),
    };
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    match authority.rfind('@') {
        Some(at) => format!("{scheme}{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// `text` (a whole topology file) with the userinfo of every URL in it masked by `*`, byte for
/// byte so every span still points where it did; None when there is none. Diagnostics show the
/// file's lines, and a mirror's password must not reach a terminal or a CI log through them.
pub fn mask_userinfo(text: &str) -> Option<String> {
    let mut masked: Option<String> = None;
    let mut from = 0;
    while let Some(i) = text[from..].find("://") {
        let start = from + i + 3;
        let rest = &text[start..];
        let end = rest.find(|c: char| "/?#\"',}] \t\r\n".contains(c)).unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            let out = masked.get_or_insert_with(|| text.to_string());
            out.replace_range(start..start + at, &"*".repeat(at));
        }
        from = start + end;
    }
    masked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_stripped_or_masked() {
        assert_eq!(redact("https://user:pw@m.example/a@b"), "https://m.example/a@b");
        assert_eq!(redact("https://a@b@m.example:1/k3s?x=@"), "https://m.example:1/k3s?x=@");
        assert_eq!(redact("https://m.example/k3s"), "https://m.example/k3s");
        assert_eq!(redact("user:pw@m.example/k3s"), "m.example/k3s");
        let text = "a: { url: \"https://u:pw@m/x\" }\nb: [https://m/@, http://é:p@n]\n";
        let masked = mask_userinfo(text).unwrap();
        assert_eq!(masked, "a: { url: \"https://****@m/x\" }\nb: [https://m/@, http://****@n]\n");
        assert_eq!(masked.len(), text.len());
        assert_eq!(mask_userinfo("url: https://m/x"), None);
    }
}
