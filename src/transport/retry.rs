//! Retrying what is safe to retry: a read, a connect, a server-side apply of the same object.
//!
//! The policy is pure (attempt counts, delays, budgets as numbers) and says nothing of which
//! errors are transient: each caller decides that for its own errors (`providers::kube`,
//! `live::pool`) and hands [`retry`] a function that answers it.
//!
//! The delays follow what Kubernetes' own clients do and stay bounded:
//!
//! * client-go `rest/with_retry.go` `IsNextRetry` retries a 429, or a 5xx that carries a
//!   `Retry-After` header (`checkWait`), and waits `max(backoff, Retry-After)` before the next
//!   attempt (`Before`); `rest/request.go` `request` retries a connection reset or a probable EOF
//!   for GETs only (`isErrRetryableFunc`: "We are not automatically retrying write operations,
//!   as they are not idempotent"). A server-side apply of the same object by the same field
//!   manager is idempotent, which is why fabric retries that write too (after reading back).
//! * kube-rs `kube-client` `client/retry.rs` `RetryPolicy::server_retry` retries 429/503/504 up
//!   to 15 times with up to 1000 s between attempts, silently: fabric turns it off
//!   (`providers::kube::client`) and retries here instead, within a budget and with a line per
//!   retry under `-v`.
//!
//! A timeout is never retried: it is how a partitioned site shows, and the partition must be
//! named within a connect timeout, not after a retry budget (see [`Policy::next`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often and for how long one operation is retried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The backoff before the second attempt; it doubles for each further one.
    pub base: Duration,
    /// No wait is longer: a server asking for more (`Retry-After`) is not retried.
    pub cap: Duration,
    /// No retry is scheduled to start later than this after the first attempt began.
    pub budget: Duration,
}

/// Kubernetes API calls: enough to ride out a throttled API (priority and fairness answers
/// `Retry-After: 1` first, kube-apiserver `staging/src/k8s.io/apiserver/pkg/server/filters/
/// priority-and-fairness.go` `tooManyRequests` with `droppedRequests.GetRetryAfter`) or an API
/// server restarting, short next to a step's `--wait-timeout`.
pub const KUBE: Policy = Policy {
    attempts: 5,
    base: Duration::from_millis(250),
    cap: Duration::from_secs(4),
    budget: Duration::from_secs(12),
};

/// SSH connects that fail at once (refused, reset during the handshake: an sshd restarting).
/// A connect that times out is not retried, so a cut site is still named within one connect
/// timeout.
pub const SSH_CONNECT: Policy = Policy {
    attempts: 5,
    base: Duration::from_millis(300),
    cap: Duration::from_secs(2),
    budget: Duration::from_secs(5),
};

// A retry budget must stay short next to the connect timeout that names a partition
// (`transport::ssh::DEFAULT_CONNECT_TIMEOUT`, 8 s): these are checked when fabric compiles.
const _: () = assert!(SSH_CONNECT.budget.as_secs() <= 5 && SSH_CONNECT.cap.as_secs() <= SSH_CONNECT.budget.as_secs());
const _: () = assert!(KUBE.budget.as_secs() <= 15 && KUBE.cap.as_secs() <= KUBE.budget.as_secs());

impl Policy {
    /// The wait before retry number `retry` (1 for the second attempt): exponential from
    /// `base`, capped at `cap`, with "equal jitter" (half fixed, half spread by `jitter` in
    /// [0, 1)) so that several clients throttled together do not come back together; never
    /// shorter than the server's `Retry-After` (client-go's `Before`).
    pub fn delay(&self, retry: u32, server_hint: Option<Duration>, jitter: f64) -> Duration {
        let exp = self.base.saturating_mul(1u32 << retry.saturating_sub(1).min(16)).min(self.cap);
        let jitter = jitter.clamp(0.0, 1.0);
        let spread = exp / 2 + exp.mul_f64(jitter) / 2;
        match server_hint {
            Some(h) => spread.max(h),
            None => spread,
        }
    }

    /// Whether to try again after `done` failed attempts, `elapsed` after the first began, and
    /// after how long; None: give up (attempts spent, the budget would be passed, or the server
    /// asks for a longer wait than `cap`).
    pub fn next(&self, done: u32, elapsed: Duration, server_hint: Option<Duration>, jitter: f64) -> Option<Duration> {
        if done >= self.attempts || server_hint.is_some_and(|h| h > self.cap) {
            return None;
        }
        let wait = self.delay(done, server_hint, jitter);
        (elapsed + wait <= self.budget).then_some(wait)
    }

    /// The longest any caller can spend waiting between attempts under this policy (the
    /// operations' own time not counted): the budget.
    pub fn worst_case_wait(&self) -> Duration {
        self.budget
    }
}

/// Why a failed attempt may be tried again, and how long the server asked to wait.
#[derive(Debug, Clone, PartialEq)]
pub struct Transient {
    pub why: String,
    pub server_hint: Option<Duration>,
}

impl Transient {
    pub fn new(why: impl Into<String>) -> Transient {
        Transient { why: why.into(), server_hint: None }
    }
}

/// One `-v` line for a retry: who (host or cluster), what, attempt n/N, why, and the wait.
pub fn retry_line(who: &str, what: &str, done: u32, policy: &Policy, why: &str, wait: Duration) -> String {
    format!(
        "retry: {who}: {what}: attempt {done}/{} failed ({why}); trying again in {} ms",
        policy.attempts,
        wait.as_millis()
    )
}

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Prints retry lines from now on (`-v`). Retries happen deep inside reads that have no progress
/// channel of their own (plan's reads, a revert's connect), so their lines go to stderr from
/// here, like a log subscriber's.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::SeqCst);
}

/// Prints `line` under `-v` (a retry line made with [`retry_line`]).
pub fn notice(line: &str) {
    if VERBOSE.load(Ordering::SeqCst) {
        eprintln!("fabric: {}", crate::style::terminal_safe(line, false));
    }
}

/// A number in [0, 1) that differs between processes and calls, for the jitter: the standard
/// library seeds each `RandomState` from the system's randomness and changes it for every new
/// one, so no dependency is needed for this little randomness.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Runs `op` until it succeeds, fails with an error `transient` does not call transient, or
/// `policy` gives up; every retry prints a line under `-v`. The last error is returned as is.
pub async fn retry<T, E, F, Fut>(
    policy: &Policy,
    who: &str,
    what: &str,
    transient: impl Fn(&E) -> Option<Transient>,
    mut op: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let start = Instant::now();
    let mut done = 0;
    loop {
        let e = match op().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        done += 1;
        let Some(t) = transient(&e) else { return Err(e) };
        let Some(wait) = policy.next(done, start.elapsed(), t.server_hint, jitter()) else { return Err(e) };
        notice(&retry_line(who, what, done, policy, &t.why, wait));
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Policy = Policy {
        attempts: 4,
        base: Duration::from_millis(100),
        cap: Duration::from_secs(1),
        budget: Duration::from_secs(3),
    };

    #[test]
    fn delays_double_up_to_the_cap_with_half_of_each_spread() {
        // Without spread (jitter 0) half the exponential step; with all of it, the whole step.
        assert_eq!(P.delay(1, None, 0.0), Duration::from_millis(50));
        let most = P.delay(1, None, 0.999_999);
        assert!(most > Duration::from_micros(99_900) && most < Duration::from_millis(100), "{most:?}");
        assert_eq!(P.delay(2, None, 0.0), Duration::from_millis(100));
        assert_eq!(P.delay(3, None, 0.5), Duration::from_millis(300));
        // 100 ms × 2^9 is past the cap: the cap.
        assert_eq!(P.delay(10, None, 0.0), Duration::from_millis(500));
        assert_eq!(P.delay(10, None, 1.0), Duration::from_secs(1));
        // A huge retry count neither overflows nor passes the cap.
        assert_eq!(P.delay(u32::MAX, None, 1.0), Duration::from_secs(1));
    }

    #[test]
    fn a_servers_retry_after_is_a_floor_and_more_than_the_cap_gives_up() {
        assert_eq!(P.delay(1, Some(Duration::from_millis(800)), 0.0), Duration::from_millis(800));
        assert_eq!(P.delay(3, Some(Duration::from_millis(10)), 0.0), Duration::from_millis(200));
        assert_eq!(P.next(1, Duration::ZERO, Some(Duration::from_secs(1)), 0.0), Some(Duration::from_secs(1)));
        // APF may ask for up to 32 s: fabric stops rather than hammer the server or wait past its budget.
        assert_eq!(P.next(1, Duration::ZERO, Some(Duration::from_secs(2)), 0.0), None);
    }

    #[test]
    fn attempts_and_budget_bound_the_retries() {
        assert!(P.next(3, Duration::ZERO, None, 0.0).is_some());
        assert_eq!(P.next(4, Duration::ZERO, None, 0.0), None, "4 attempts in all");
        // A retry that would start past the budget is not scheduled.
        assert_eq!(P.next(1, Duration::from_millis(2_960), None, 0.0), None);
        assert_eq!(P.next(1, Duration::from_millis(2_950), None, 0.0), Some(Duration::from_millis(50)));
    }

    #[test]
    fn the_policies_in_use_are_bounded() {
        for p in [KUBE, SSH_CONNECT] {
            let (mut elapsed, mut done) = (Duration::ZERO, 0);
            // The worst case: every delay at its fullest and the server asking for the cap.
            while let Some(w) = p.next(done + 1, elapsed, Some(p.cap), 1.0) {
                elapsed += w;
                done += 1;
            }
            assert!(elapsed <= p.worst_case_wait(), "{p:?}: {elapsed:?}");
            assert!(done < p.attempts);
        }
        assert!(SSH_CONNECT.budget < crate::transport::ssh::DEFAULT_CONNECT_TIMEOUT);
    }

    #[test]
    fn the_retry_line_names_who_what_attempt_and_why() {
        let l = retry_line("router.sp", "connect", 2, &SSH_CONNECT, "connection refused", Duration::from_millis(420));
        assert_eq!(l, "retry: router.sp: connect: attempt 2/5 failed (connection refused); trying again in 420 ms");
    }

    #[test]
    fn jitter_is_in_the_unit_interval() {
        for _ in 0..100 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j), "{j}");
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap()
    }

    /// Short waits, so that the runner's tests take milliseconds (nothing here measures time).
    const QUICK: Policy = Policy {
        attempts: 4,
        base: Duration::from_millis(1),
        cap: Duration::from_millis(2),
        budget: Duration::from_secs(60),
    };

    /// Runs [`retry`] under [`QUICK`] over `answers` (one per attempt, the last one repeated),
    /// where only `"reset"` is transient: the result and the number of attempts made.
    fn run_over(answers: &[Result<u32, &'static str>]) -> (Result<u32, &'static str>, usize) {
        let calls = std::cell::Cell::new(0);
        let r = rt().block_on(retry(
            &QUICK,
            "cluster.sp",
            "get",
            |e: &&str| (*e == "reset").then(|| Transient::new("reset")),
            || {
                let a = answers[calls.get().min(answers.len() - 1)];
                calls.set(calls.get() + 1);
                async move { a }
            },
        ));
        (r, calls.get())
    }

    #[test]
    fn retry_stops_at_the_first_success_or_the_first_final_error() {
        assert_eq!(run_over(&[Err("reset"), Err("reset"), Ok(3)]), (Ok(3), 3));
        assert_eq!(run_over(&[Err("403 Forbidden")]), (Err("403 Forbidden"), 1), "a final error is not retried");
        assert_eq!(run_over(&[Err("reset")]), (Err("reset"), 4), "gives up after its attempts, with the last error");
    }
}
