//! SIGINT and SIGTERM during an apply: the step in progress is not abandoned half-way. The
//! request is a flag the run looks at between its phases (before a wave of steps, after a
//! step's changes, before its confirmation) and that waits look at while they poll: the step
//! in progress is reverted to its rollback point, the locks are released and the journal says
//! the run was interrupted. A signal is process-wide, so the flag is too.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks the run to stop at the next phase boundary.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Forgets a request (a new run in the same process, as tests do).
pub fn clear() {
    REQUESTED.store(false, Ordering::SeqCst);
}

/// Listens for SIGINT and SIGTERM on the current runtime and turns the first into a request.
/// The run then says what it does about it in its own progress lines.
pub fn listen() {
    tokio::spawn(async move {
        let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else { return };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        request();
    });
}
