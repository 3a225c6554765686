//! SIGINT and SIGTERM during an apply: the step in progress is not abandoned half-way. The
//! request is a flag the run looks at between its phases (before a wave of steps, after a
//! step's changes, before its confirmation) and that waits look at while they poll: the step
//! in progress is reverted to its rollback point, the locks are released and the journal says
//! the run was interrupted. A signal is process-wide, so the flag is too. A lost Lease stops
//! a run the same way ([`Stop`]).

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

/// What stops a step before its next change: a signal (process-wide, above), or the Lease that
/// guards the step lost (`lease::Watch`; per run, as two runs may share a process in tests).
#[derive(Debug, Clone, Default)]
pub struct Stop {
    lease: Option<(crate::apply::lease::Watch, crate::addr::Target)>,
}

impl Stop {
    /// Stops on a signal, or when the run loses `guard`'s Lease.
    pub fn guarded(watch: crate::apply::lease::Watch, guard: crate::addr::Target) -> Stop {
        Stop { lease: Some((watch, guard)) }
    }

    /// Why to stop now, if so: `interrupted` for a signal, else the Lease's reason.
    pub fn why(&self) -> Option<String> {
        if requested() {
            return Some("interrupted".into());
        }
        let (watch, guard) = self.lease.as_ref()?;
        watch.lost(guard)
    }
}
