//! ProxyJump's hops (openssh-portable `readconf.c`, `parse_jump`; `misc.c`,
//! `parse_user_host_port` and `parse_ssh_uri`): `[user@]host[:port]` or
//! `ssh://[user@]host[:port]`, an IPv6 address in brackets, hops separated by commas.
//!
//! `a,b,c` reaches the destination through `c`, which is itself reached with `-J a,b` (`ssh.c`,
//! `main`, the ProxyCommand it builds from `jump_host` and `jump_extra`): so the last hop is the
//! nearest one and the rest is that hop's own ProxyJump.

/// One hop: what `ssh -l USER -p PORT HOST` would be given.
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

/// The hop nearest the destination and the hops before it (`None` when it is the only one);
/// `None` when a hop is not `[user@]host[:port]`.
pub fn last_hop(list: &str) -> Option<(Hop, Option<String>)> {
    let (rest, last) = match list.rsplit_once(',') {
        Some((r, l)) => (Some(r.to_string()), l),
        None => (None, list),
    };
    // parse_jump checks the syntax of every hop, not only the one it keeps.
    if let Some(r) = &rest
        && r.split(',').any(|h| hop(h).is_none())
    {
        return None;
    }
    Some((hop(last)?, rest))
}

fn hop(s: &str) -> Option<Hop> {
    let s = s.trim();
    let s = s.strip_prefix("ssh://").unwrap_or(s);
    let (user, hostport) = match s.rsplit_once('@') {
        Some(("", _)) => return None,
        Some((u, h)) => (Some(u.to_string()), h),
        None => (None, s),
    };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        (h, after.strip_prefix(':'))
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() || host.contains([' ', '\t', ',']) {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok().filter(|p| *p > 0)?),
        None => None,
    };
    Some(Hop { user, host: host.to_string(), port })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hops_from_the_nearest() {
        let (h, rest) = last_hop("a,op@b:2200").unwrap();
        assert_eq!(h, Hop { user: Some("op".into()), host: "b".into(), port: Some(2200) });
        assert_eq!(rest.as_deref(), Some("a"));
        let (h, rest) = last_hop("x,y,ssh://[fd00::1]:22").unwrap();
        assert_eq!((h.host.as_str(), h.port, rest.as_deref()), ("fd00::1", Some(22), Some("x,y")));
        assert_eq!(last_hop("bastion").unwrap(), (Hop { user: None, host: "bastion".into(), port: None }, None));
    }

    #[test]
    fn bad_hops() {
        assert_eq!(last_hop("a:0"), None);
        assert_eq!(last_hop("a:port"), None);
        assert_eq!(last_hop("@a"), None);
        assert_eq!(last_hop("a:99999,b"), None, "every hop is checked");
        assert_eq!(last_hop(""), None);
    }
}
