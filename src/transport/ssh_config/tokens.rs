//! `%` tokens and `${VAR}` in ssh_config values, as OpenSSH expands them (openssh-portable
//! `misc.c`, `percent_expand` and `percent_dollar_expand`; which keyword takes which token:
//! ssh_config(5), TOKENS; the values: `ssh.c`, `main`, the `cinfo` it fills).
//!
//! An unknown token is an error, as in OpenSSH (`percent_expand` is fatal on one). `%C` (a SHA-1
//! of `%l%h%p%r%j`) is refused by name: fabric has no SHA-1 and never needs one.

/// The tokens HostName takes.
pub const HOSTNAME: &str = "h";
/// The tokens ProxyJump takes.
pub const PROXY_JUMP: &str = "hnpr";
/// The tokens of IdentityFile, UserKnownHostsFile and the other paths (`DEFAULT_CLIENT_PERCENT_EXPAND_ARGS`).
pub const PATHS: &str = "CdhijkLlnpru";

/// What each token stands for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Values {
    /// `%h`: the host name to connect to (after HostName).
    pub host: String,
    /// `%n`: the name as given (the alias).
    pub original: String,
    pub port: String,
    /// `%r`: the remote user.
    pub user: String,
    /// `%u`
    pub local_user: String,
    /// `%i`
    pub uid: String,
    /// `%d`
    pub home: String,
    /// `%j`: ProxyJump as resolved, or empty.
    pub jump: String,
    /// `%l` and `%L`
    pub local_host: String,
    pub local_short: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenError {
    #[error("`%{0}` is not a token this keyword takes (ssh_config(5), TOKENS)")]
    Unknown(char),
    #[error("`%C` is not supported by fabric (write the path without it)")]
    Hash,
    #[error("a `%` ends the value (write `%%` for a literal `%`)")]
    Trailing,
    #[error("the environment variable `{0}` is not set")]
    Unset(String),
    #[error("an unterminated `${{`")]
    Unterminated,
}

impl Values {
    fn get(&self, token: char) -> Option<&str> {
        Some(match token {
            'h' => &self.host,
            'n' | 'k' => &self.original,
            'p' => &self.port,
            'r' => &self.user,
            'u' => &self.local_user,
            'i' => &self.uid,
            'd' => &self.home,
            'j' => &self.jump,
            'l' => &self.local_host,
            'L' => &self.local_short,
            _ => return None,
        })
    }
}

/// Expands the `allowed` tokens of `s`, and `${VAR}` when `env` is set.
pub fn expand(s: &str, allowed: &str, values: &Values, env: bool) -> Result<String, TokenError> {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '%' => match chars.next() {
                None => return Err(TokenError::Trailing),
                Some('%') => out.push('%'),
                Some('C') if allowed.contains('C') => return Err(TokenError::Hash),
                Some(t) => match values.get(t).filter(|_| allowed.contains(t)) {
                    Some(v) => out.push_str(v),
                    None => return Err(TokenError::Unknown(t)),
                },
            },
            '$' if env && chars.peek() == Some(&'{') => {
                chars.next();
                let name: String = chars.by_ref().take_while(|&c| c != '}').collect();
                if !s.contains(&format!("${{{name}}}")) {
                    return Err(TokenError::Unterminated);
                }
                out.push_str(&std::env::var(&name).map_err(|_| TokenError::Unset(name.clone()))?);
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Values {
        Values {
            host: "10.0.0.1".into(),
            original: "router".into(),
            port: "2222".into(),
            user: "vyos".into(),
            local_user: "op".into(),
            uid: "1000".into(),
            home: "/home/op".into(),
            jump: "bastion".into(),
            local_host: "ws.lab".into(),
            local_short: "ws".into(),
        }
    }

    #[test]
    fn tokens_each_keyword_takes() {
        let v = values();
        assert_eq!(
            expand("%d/.ssh/%r@%h:%p-%n-%u-%i-%j-%l-%L%%", PATHS, &v, true).unwrap(),
            "/home/op/.ssh/vyos@10.0.0.1:2222-router-op-1000-bastion-ws.lab-ws%"
        );
        assert_eq!(expand("%h.lab", HOSTNAME, &v, false).unwrap(), "10.0.0.1.lab");
        assert_eq!(expand("%p", HOSTNAME, &v, false), Err(TokenError::Unknown('p')), "HostName takes %h and %% only");
        assert_eq!(expand("%x", PATHS, &v, true), Err(TokenError::Unknown('x')));
        assert_eq!(expand("%C", PATHS, &v, true), Err(TokenError::Hash));
        assert_eq!(expand("50%", PATHS, &v, true), Err(TokenError::Trailing));
    }

    #[test]
    fn environment_variables() {
        let home = std::env::var("HOME").unwrap_or_default();
        assert_eq!(expand("${HOME}/k", PATHS, &values(), true).unwrap(), format!("{home}/k"));
        assert_eq!(expand("${HOME}/k", PATHS, &values(), false).unwrap(), "${HOME}/k", "only where env is allowed");
        assert_eq!(
            expand("${FABRIC_SURELY_UNSET_VAR}", PATHS, &values(), true),
            Err(TokenError::Unset("FABRIC_SURELY_UNSET_VAR".into()))
        );
        assert_eq!(expand("${HOME", PATHS, &values(), true), Err(TokenError::Unterminated));
    }
}
