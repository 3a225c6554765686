//! A WireGuard public key, as a router prints it or the topology records it: parsed before use.
//! A router's answer is untrusted input (a compromised router may print anything); only 32 bytes
//! in canonical base64 become a key, and only a key ever reaches a peer's configuration. It lives
//! with the topology because the topology may carry each router's key (for `render`).

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

/// A Curve25519 public key, base64 as `wg pubkey` prints it (44 characters).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WgKey(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{shown:?} is not a WireGuard public key (32 bytes in base64)")]
pub struct NotAKey {
    /// The answer, cut short and with control characters escaped (`{:?}`), for the message.
    pub shown: String,
}

impl FromStr for WgKey {
    type Err = NotAKey;
    fn from_str(s: &str) -> Result<WgKey, NotAKey> {
        let bad = || NotAKey { shown: s.chars().take(60).collect() };
        if s.len() != 44 {
            return Err(bad());
        }
        let bytes = B64.decode(s).map_err(|_| bad())?;
        // Canonical only: the same 32 bytes must encode back to the same text.
        if bytes.len() != 32 || B64.encode(&bytes) != s {
            return Err(bad());
        }
        Ok(WgKey(s.to_string()))
    }
}

impl fmt::Display for WgKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

serde_as_text!(WgKey);

/// `format` of a key in the generated schema; the schema pass checks it ([`check_format`]).
pub const FORMAT_WGKEY: &str = "wireguard-key";

impl schemars::JsonSchema for WgKey {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WgKey".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "format": FORMAT_WGKEY,
            "description": "A WireGuard public key: 32 bytes in base64 (44 characters), as `wg pubkey` prints it."
        })
    }
}

/// Checks a string of the schema's `format`; None for another format.
pub fn check_format(format: &str, s: &str) -> Option<Result<(), NotAKey>> {
    (format == FORMAT_WGKEY).then(|| s.parse::<WgKey>().map(|_| ()))
}

/// The key in a command's output: its one line, trimmed; None when it printed nothing (no key
/// yet), an error when it printed anything but a key.
pub fn from_output(stdout: &str) -> Result<Option<WgKey>, NotAKey> {
    let t = stdout.trim_matches(|c| c == ' ' || c == '\n' || c == '\r');
    if t.is_empty() {
        return Ok(None);
    }
    t.parse().map(Some).map_err(|_| NotAKey { shown: t.chars().take(60).collect() })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const KEY: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";

    #[test]
    fn a_key_and_only_a_key() {
        assert_eq!(KEY.parse::<WgKey>().unwrap().to_string(), KEY);
        assert_eq!(from_output(&format!("{KEY}\n")).unwrap().unwrap().to_string(), KEY);
        assert_eq!(from_output("").unwrap(), None);
        for bad in [
            format!("{KEY}\n[Interface]\nPostUp = touch /tmp/p"),
            format!("{KEY} extra"),
            "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dh=".to_string(), // not canonical
            "A".repeat(44),
            "not a key".into(),
        ] {
            assert!(from_output(&bad).is_err(), "{bad:?}");
        }
        let e = from_output("\u{1b}[2J").unwrap_err().to_string();
        assert!(!e.contains('\u{1b}'), "{e:?}");
    }

    proptest! {
        #[test]
        fn any_32_bytes_are_a_key(b in proptest::collection::vec(any::<u8>(), 32)) {
            let text = B64.encode(&b);
            prop_assert_eq!(text.parse::<WgKey>().unwrap().to_string(), text);
        }

        #[test]
        fn nothing_with_a_line_break_inside_is_a_key(a in "[!-~]{1,40}", b in "[!-~]{1,40}") {
            let s = format!("{a}\n{b}");
            prop_assert!(s.parse::<WgKey>().is_err());
            prop_assert!(from_output(&s).is_err());
        }
    }
}
