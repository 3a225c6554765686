//! Where an apply's time went, phase by phase (`fabric apply -v` prints it; the `apply_lab`
//! benchmark sets it beside the apply's floor). Phases are recorded as they end, from wherever
//! they run, into one list for the process: an apply is one per process.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Phases recorded so far: name and how long each took, in the order they ended.
static PHASES: Mutex<Vec<(String, Duration)>> = Mutex::new(Vec::new());

/// A phase that started at `since`: [`Phase::end`] records it and starts the next one.
pub struct Phase {
    since: Instant,
}

impl Phase {
    pub fn start() -> Phase {
        Phase { since: Instant::now() }
    }

    /// Records `name` as having taken the time since the last mark, and starts the next phase.
    pub fn end(&mut self, name: &str) {
        let now = Instant::now();
        record(name, now - self.since);
        self.since = now;
    }
}

/// Records a phase that took `took`.
pub fn record(name: &str, took: Duration) {
    PHASES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((name.to_string(), took));
}

/// The phases recorded so far, emptying the list.
pub fn take() -> Vec<(String, Duration)> {
    std::mem::take(&mut *PHASES.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
}

/// The timeline as lines: each phase in ms, then the total (`fabric apply -v`). The benchmark
/// reads these lines back: `<phase>: <ms> ms`.
pub fn lines(phases: &[(String, Duration)]) -> Vec<String> {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut out = vec!["apply timeline:".to_string()];
    out.extend(phases.iter().map(|(name, took)| format!("  {name}: {:.0} ms", ms(*took))));
    let total: Duration = phases.iter().map(|(_, t)| *t).sum();
    out.push(format!("  total: {:.0} ms", ms(total)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_lists_each_phase_and_the_total() {
        let phases = [
            ("read and plan".to_string(), Duration::from_millis(400)),
            ("B.1 check".into(), Duration::from_micros(2_600)),
        ];
        assert_eq!(
            lines(&phases),
            ["apply timeline:", "  read and plan: 400 ms", "  B.1 check: 3 ms", "  total: 403 ms"]
        );
    }
}
