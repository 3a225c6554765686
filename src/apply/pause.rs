//! A test hook, in the manner of git's `GIT_TEST_*` variables: with
//! `FABRIC_TEST_PAUSE=<point>:<seconds>` an apply stops for that long at the named point and
//! says so on stderr (`fabric: test pause at <point>`), so a fault test can kill the process,
//! cut a link or stop a host exactly there instead of guessing with timers. The pause changes no
//! decision of the run, only when it happens; unset, it costs one environment lookup per point.
//!
//! The points, in the order an apply passes them:
//! - `locked`: the step's hosts are locked; nothing is journaled, armed or changed yet;
//! - `applied`: the step's changes are made (and the routers armed to revert); not yet checked;
//! - `confirming`: the first router is confirmed, the others not yet.

use std::time::Duration;

/// The variable that names the point and the pause.
pub const VAR: &str = "FABRIC_TEST_PAUSE";

/// The pause `spec` asks for at `point`, if any.
fn wanted(spec: &str, point: &str) -> Option<Duration> {
    let (name, secs) = spec.split_once(':')?;
    (name == point).then(|| secs.parse::<u64>().ok().map(Duration::from_secs)).flatten()
}

/// Pauses at `point` when the test hook asks for it.
pub async fn at(point: &str) {
    let Some(pause) = std::env::var(VAR).ok().and_then(|spec| wanted(&spec, point)) else { return };
    eprintln!("fabric: test pause at {point}");
    tokio::time::sleep(pause).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_is_asked_for_by_point_and_seconds() {
        assert_eq!(wanted("locked:3", "locked"), Some(Duration::from_secs(3)));
        assert_eq!(wanted("locked:3", "applied"), None);
        assert_eq!(wanted("locked", "locked"), None);
        assert_eq!(wanted("locked:x", "locked"), None);
    }
}
