//! Standard output that a closed pipe does not break: `fabric graph | head -c 0` leaves the
//! reader gone, and Rust's `print!` would panic on the EPIPE (Rust ignores SIGPIPE, so every
//! write to a closed pipe fails instead of ending the process). As ripgrep does, a broken pipe is
//! quiet: nothing more is written, the command goes on and ends as it would have. An apply whose
//! output pipe closes is never cut short between a change and its journal entry.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout failed: later writes are skipped.
static BROKEN: AtomicBool = AtomicBool::new(false);

/// Writes `args` to stdout; a closed pipe is silent, another failure said once on stderr.
pub fn write(args: std::fmt::Arguments<'_>) {
    if BROKEN.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        BROKEN.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("fabric: cannot write to stdout: {e}; the rest of the output is left out");
        }
    }
}

/// `print!` to stdout, quiet on a closed pipe ([`write`]).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::command::stdout::write(format_args!($($arg)*)) };
}

/// `println!` to stdout, quiet on a closed pipe ([`write`]).
#[macro_export]
macro_rules! outln {
    () => { $crate::command::stdout::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::command::stdout::write(format_args!("{}\n", format_args!($($arg)*))) };
}
