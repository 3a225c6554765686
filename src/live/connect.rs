//! Connecting to a host, trying again when the connect failed at once (an sshd restarting),
//! never when it timed out (a host or link that is down: named within one connect timeout, so
//! that a cut site is still reported in seconds).

use crate::transport::retry::{self, Transient};
use crate::transport::ssh::{Endpoint, Session, SshError};

/// Whether a failed connect is worth another try: the host answered that nothing listens
/// (refused) or closed the connection during the handshake: an sshd restarting. Anything else
/// is not retried: a timeout, an unreachable network or host (`No route to host` is how a cut
/// link shows in the lab) is named at once, so that a partition shows within one connect
/// timeout; a key or authentication failure (or an answer past the output cap) would fail the
/// same way again.
///
/// The reason is the text of the `std::io::Error` of the TCP connect (`strerror`'s words on
/// Linux and the BSDs: "Connection refused", "Connection reset by peer").
pub fn connect_transient(e: &SshError) -> Option<Transient> {
    match e {
        SshError::Connect { reason, .. }
            if reason.starts_with("Connection refused") || reason.starts_with("Connection reset") =>
        {
            Some(Transient::new(reason.clone()))
        }
        SshError::Protocol { reason, .. } => Some(Transient::new(reason.clone())),
        SshError::Connect { .. }
        | SshError::NoAccess { .. }
        | SshError::HostKeyRevoked { .. }
        | SshError::Timeout { .. }
        | SshError::UnknownHost { .. }
        | SshError::HostKeyChanged { .. }
        | SshError::Auth { .. }
        | SshError::CommandTimeout { .. }
        | SshError::OutputTooLarge { .. } => None,
    }
}

/// Connects to `ep`, trying again within [`retry::SSH_CONNECT`] when the connect fails at once.
pub async fn connect(ep: &Endpoint) -> Result<Session, SshError> {
    retry::retry(&retry::SSH_CONNECT, &ep.target, "connect", connect_transient, || Session::connect(ep)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep() -> (String, String) {
        ("router.sp".into(), "10.0.0.1:22".into())
    }

    /// A refusal the jump host reports (`transport::ssh::through_jump`) is retried as a direct
    /// one; a cut link behind it, or a refusal without its description, is not.
    #[test]
    fn a_refused_connect_behind_a_jump_host_is_retried_like_a_direct_one() {
        use crate::transport::ssh::through_jump;
        use russh::{ChannelOpenFailure, Error};
        let refused = Error::ChannelOpenFailure(ChannelOpenFailure::ConnectFailed);
        let connect =
            |reason: String| SshError::Connect { target: "router.sp".into(), addr: "198.18.2.2:22".into(), reason };
        let e = connect(through_jump(&refused, Some("Connection refused"), "10.1.0.3:22"));
        assert!(connect_transient(&e).is_some(), "retried like a direct refusal");
        let e = connect(through_jump(&refused, Some("No route to host"), "10.1.0.3:22"));
        assert!(connect_transient(&e).is_none(), "a cut link is named, not retried");
        let e = connect(through_jump(&refused, None, "j:22"));
        assert!(connect_transient(&e).is_none());
    }

    #[test]
    fn only_a_connect_that_failed_at_once_is_retried() {
        let (target, addr) = ep();
        let refused =
            SshError::Connect { target: target.clone(), addr: addr.clone(), reason: "Connection refused".into() };
        assert_eq!(connect_transient(&refused).map(|t| t.why), Some("Connection refused".into()));
        let dropped = SshError::Protocol { target: target.clone(), reason: "Disconnected".into() };
        assert!(connect_transient(&dropped).is_some());
        // A timeout is how a partition shows: named at once, never retried.
        let timeout = SshError::Timeout { target: target.clone(), addr: addr.clone(), secs: 8 };
        assert_eq!(connect_transient(&timeout), None);
        let changed = SshError::HostKeyChanged {
            target: target.clone(),
            addr: addr.clone(),
            fingerprint: "SHA256:x".into(),
            file: "known_hosts".into(),
            line: 1,
        };
        assert_eq!(connect_transient(&changed), None);
        let auth = SshError::Auth { target, addr, user: "root".into(), tried: "no key found".into() };
        assert_eq!(connect_transient(&auth), None);
    }
}
