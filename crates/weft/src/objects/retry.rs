//! Bounded retries with exponential backoff, seeded jitter and a deadline.
//!
//! A [`RetryPolicy`] is plain, serde-loadable configuration; a [`Backoff`] is
//! one operation's retry state, drawing its jitter from a seeded RNG so that
//! a run under a given seed replays the same delays (no `thread_rng`).
//! Sleeps and deadlines use tokio's clock, so tests on a paused clock
//! control them.
//!
//! # Deadlines
//!
//! What a deadline means is on [`RetryPolicy`]. Here: [`Backoff::attempt`]
//! cuts an attempt off when the deadline comes, and [`Backoff::reset`]
//! starts it over after a step that made progress.

use std::future::Future;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

pub use super::outcome::DeadlinePassed;
use super::outcome::{Outcome, StoreOp, classify};
use crate::clock::monotonic_now;

/// How often and how patiently to retry.
///
/// Attempts alone do not bound time: a store that accepts connections and
/// then answers nothing (a paused server) makes every attempt wait for the
/// HTTP client's own timeout. So every operation also has a deadline,
/// [`deadline`](Self::deadline) after it started: an attempt is cut off
/// when the deadline comes (a write cut off is *ambiguous*: it may have
/// been sent), no attempt starts after it, and no retry sleeps past it. An
/// operation whose several steps each make progress (reading a long log)
/// starts its deadline over at every step that made progress; it is the
/// time allowed *without progress*. Jitter is drawn from a seeded RNG, so
/// a run under a given seed replays the same delays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Total attempts, the first one included (1 = never retry).
    pub max_attempts: u32,
    /// Delay before the first retry; doubles with every further retry.
    pub base_backoff: Duration,
    /// Upper bound of one delay.
    pub max_backoff: Duration,
    /// Fraction of each delay (0.0–1.0) that is randomised away, so that
    /// competing writers do not retry in lock step.
    pub jitter: f64,
    /// The longest one operation keeps trying (without progress): its
    /// attempts are cut off, and no retry is started, once this much time
    /// has passed since it began (see the type's docs).
    pub deadline: Duration,
    /// The longest one attempt may take (cut off earlier by the deadline);
    /// `None`: only the deadline bounds it.
    pub attempt_timeout: Option<Duration>,
}

setters! {
    RetryPolicy {
        with_max_attempts => max_attempts: u32,
        with_base_backoff => base_backoff: Duration,
        with_max_backoff => max_backoff: Duration,
        with_jitter => jitter: f64,
        with_attempt_timeout => attempt_timeout: Option<Duration>,
    }
}

/// The default [`RetryPolicy::deadline`].
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 8,
            base_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_secs(2),
            jitter: 0.5,
            deadline: DEFAULT_DEADLINE,
            attempt_timeout: None,
        }
    }
}

impl RetryPolicy {
    /// A policy that tries once and never retries.
    pub fn never() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The delay before retry number `retry` (0 = the first retry), with
    /// jitter drawn from `rng`.
    pub fn delay(&self, retry: u32, rng: &mut impl Rng) -> Duration {
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        let full = self
            .base_backoff
            .checked_mul(factor)
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff);
        let jitter = self.jitter.clamp(0.0, 1.0);
        if jitter == 0.0 {
            return full;
        }
        let cut: f64 = rng.random_range(0.0..=jitter);
        full.mul_f64(1.0 - cut)
    }

    /// A fresh retry loop whose jitter comes from `seed`; its deadline is
    /// [`deadline`](Self::deadline) from now.
    pub(crate) fn backoff(&self, seed: u64) -> Backoff {
        Backoff::new(self.clone(), seed)
    }

    /// This policy with `deadline` (and an attempt timeout no longer than
    /// it).
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self.attempt_timeout = self.attempt_timeout.map(|t| t.min(deadline));
        self
    }
}

/// The state of one operation's retries.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: RetryPolicy,
    attempts: u32,
    rng: ChaCha8Rng,
    deadline: Instant,
    /// A deadline set from outside ([`Backoff::until`]) that progress does
    /// not move.
    fixed: Option<Instant>,
}

impl Backoff {
    /// A retry loop under `policy`, jitter seeded by `seed`, whose deadline
    /// is the policy's from now.
    pub fn new(policy: RetryPolicy, seed: u64) -> Self {
        let deadline = after(policy.deadline);
        Backoff {
            policy,
            attempts: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            deadline,
            fixed: None,
        }
    }

    /// Ends the operation no later than `at` as well (for an operation that
    /// inherits a deadline, such as an append's).
    pub fn until(mut self, at: Instant) -> Self {
        self.fixed = Some(self.fixed.map_or(at, |f| f.min(at)));
        self
    }

    /// When the operation must be over.
    pub fn deadline(&self) -> Instant {
        match self.fixed {
            Some(f) => f.min(self.deadline),
            None => self.deadline,
        }
    }

    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline().saturating_duration_since(monotonic_now())
    }

    /// True once the deadline has passed.
    pub fn expired(&self) -> bool {
        self.remaining().is_zero()
    }

    /// Attempts made so far (counted by [`Backoff::next_delay`]).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Records an attempt and returns the delay before the next one, or
    /// `None` when the policy's attempts are used up or the deadline would
    /// pass before the next attempt could start.
    pub fn next_delay(&mut self) -> Option<Duration> {
        self.attempts = self.attempts.saturating_add(1);
        if self.attempts >= self.policy.max_attempts.max(1) {
            return None;
        }
        let delay = self.policy.delay(self.attempts - 1, &mut self.rng);
        if delay >= self.remaining() {
            return None;
        }
        Some(delay)
    }

    /// Runs one attempt, cut off at the deadline (and after the policy's
    /// attempt timeout); `None` when it was cut off. An attempt is not
    /// started at all once the deadline has passed.
    pub async fn limit<F: Future>(&self, attempt: F) -> Option<F::Output> {
        let mut budget = self.remaining();
        if let Some(t) = self.policy.attempt_timeout {
            budget = budget.min(t);
        }
        if budget.is_zero() {
            return None;
        }
        tokio::time::timeout(budget, attempt).await.ok()
    }

    /// [`limit`](Self::limit) for one object-store request: a request cut
    /// off is answered with a timeout error (which [`classify`] calls
    /// ambiguous for a write: it may have been sent), one not started with
    /// an error saying it was not sent (transient).
    pub async fn attempt<T>(
        &self,
        request: impl Future<Output = object_store::Result<T>>,
    ) -> object_store::Result<T> {
        if self.expired() {
            return Err(deadline_error(false, "was not sent"));
        }
        match self.limit(request).await {
            Some(result) => result,
            None => Err(deadline_error(true, "got no answer in time")),
        }
    }

    /// Records a failed attempt and sleeps before the next one. Returns
    /// false (without sleeping) when no attempt is left.
    pub async fn wait(&mut self) -> bool {
        match self.next_delay() {
            Some(delay) => {
                crate::clock::sleep(delay).await;
                true
            }
            None => false,
        }
    }

    /// Starts over (after progress was made), keeping the RNG stream: the
    /// attempts are counted from zero and the policy's deadline runs from
    /// now (a deadline set by [`until`](Self::until) stays).
    pub fn reset(&mut self) {
        self.attempts = 0;
        self.deadline = after(self.policy.deadline);
    }
}

fn after(d: Duration) -> Instant {
    let now = monotonic_now();
    // A deadline too far away to represent is no deadline.
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
}

fn deadline_error(sent: bool, what: &'static str) -> object_store::Error {
    object_store::Error::Generic {
        store: "weft",
        source: Box::new(DeadlinePassed { what, sent }),
    }
}

/// A failure that a retry loop gave up on.
#[derive(Debug)]
pub struct GaveUp {
    /// What the last error meant.
    pub outcome: Outcome,
    /// The last error.
    pub error: object_store::Error,
    /// Attempts made.
    pub attempts: u32,
}

/// Runs `attempt` until it succeeds, retrying transient failures (and, when
/// `retry_ambiguous`, ambiguous ones: only for idempotent requests, such as
/// a put of bytes that are the same on every attempt) with backoff.
///
/// Any other outcome, or running out of attempts, returns [`GaveUp`].
/// `on_retry` is called before each retry (for metrics and tracing).
pub async fn retry_store<T, F, Fut>(
    backoff: &mut Backoff,
    op: StoreOp,
    retry_ambiguous: bool,
    mut on_retry: impl FnMut(Outcome, &object_store::Error),
    mut attempt: F,
) -> Result<T, GaveUp>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, object_store::Error>>,
{
    loop {
        let error = match backoff.attempt(attempt()).await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let outcome = classify(op, &error);
        let retryable =
            outcome == Outcome::Transient || (retry_ambiguous && outcome == Outcome::Ambiguous);
        if retryable {
            on_retry(outcome, &error);
            if backoff.wait().await {
                continue;
            }
        } else {
            backoff.attempts = backoff.attempts.saturating_add(1);
        }
        return Err(GaveUp {
            outcome,
            error,
            attempts: backoff.attempts,
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            base_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(25),
            jitter: 0.5,
            ..RetryPolicy::default()
        }
    }

    #[test]
    fn delays_grow_are_capped_and_jittered_within_bounds() {
        let p = RetryPolicy {
            jitter: 0.0,
            ..policy()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(p.delay(0, &mut rng), Duration::from_millis(10));
        assert_eq!(p.delay(1, &mut rng), Duration::from_millis(20));
        assert_eq!(p.delay(2, &mut rng), Duration::from_millis(25));
        assert_eq!(p.delay(40, &mut rng), Duration::from_millis(25));
        let p = policy();
        for retry in 0..10 {
            let d = p.delay(retry, &mut rng);
            assert!(d <= Duration::from_millis(25), "{d:?}");
            assert!(d >= Duration::from_millis(5), "{d:?}");
        }
    }

    #[test]
    fn same_seed_same_delays_and_attempts_are_bounded() {
        let delays = |seed| {
            let mut b = policy().backoff(seed);
            std::iter::from_fn(|| b.next_delay()).collect::<Vec<_>>()
        };
        assert_eq!(delays(7), delays(7));
        assert_eq!(delays(7).len(), 3, "4 attempts = 3 delays");
        assert_ne!(delays(7), delays(8));
        assert_eq!(RetryPolicy::never().backoff(0).next_delay(), None);
    }

    fn unavailable() -> object_store::Error {
        object_store::Error::Generic {
            store: "test",
            source: Box::new(std::fmt::Error),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retry_store_retries_transient_then_succeeds() {
        let calls = Arc::new(AtomicU32::new(0));
        let mut b = policy().backoff(3);
        let mut retries = 0;
        let c = calls.clone();
        let v = retry_store(
            &mut b,
            StoreOp::Put,
            false,
            |_, _| retries += 1,
            || {
                let c = c.clone();
                async move {
                    if c.fetch_add(1, Ordering::SeqCst) < 2 {
                        Err(unavailable())
                    } else {
                        Ok(42)
                    }
                }
            },
        )
        .await
        .unwrap();
        assert_eq!(v, 42);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(retries, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_store_gives_up_after_max_attempts_and_on_conflict() {
        let mut b = policy().backoff(3);
        let calls = AtomicU32::new(0);
        let err = retry_store(
            &mut b,
            StoreOp::Put,
            false,
            |_, _| {},
            || {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>(unavailable()) }
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.outcome, Outcome::Transient);
        assert_eq!(err.attempts, 4);
        assert_eq!(calls.load(Ordering::SeqCst), 4);

        let mut b = policy().backoff(3);
        let err = retry_store(
            &mut b,
            StoreOp::UpdateIfMatch,
            true,
            |_, _| {},
            || async {
                Err::<(), _>(object_store::Error::Precondition {
                    path: "m".into(),
                    source: "412".into(),
                })
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.outcome, Outcome::Conflict);
        assert_eq!(err.attempts, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_attempt_is_cut_off_at_the_deadline() {
        let policy = RetryPolicy {
            deadline: Duration::from_secs(5),
            ..policy()
        };
        let start = monotonic_now();
        let mut b = policy.backoff(1);
        let hang = std::future::pending::<object_store::Result<()>>;
        let err = retry_store(&mut b, StoreOp::Put, true, |_, _| {}, hang)
            .await
            .unwrap_err();
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(5),
            "cut at the deadline"
        );
        assert_eq!(
            err.outcome,
            Outcome::Ambiguous,
            "a write cut off may have landed"
        );
        assert_eq!(err.attempts, 1, "no time was left for another attempt");
        // Reads cut off are simply transient; an attempt after the deadline
        // is never sent.
        let b = policy.backoff(2);
        let err = b
            .attempt(std::future::pending::<object_store::Result<()>>())
            .await;
        assert_eq!(
            classify(StoreOp::Read, &err.unwrap_err()),
            Outcome::Transient
        );
        let sent = AtomicU32::new(0);
        let late = b
            .attempt(async {
                sent.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .await;
        assert_eq!(
            classify(StoreOp::Put, &late.unwrap_err()),
            Outcome::Transient
        );
        assert_eq!(
            sent.load(Ordering::SeqCst),
            0,
            "not started after the deadline"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_before_the_deadline_and_progress_moves_it() {
        let policy = RetryPolicy {
            max_attempts: 1_000,
            base_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(1),
            jitter: 0.0,
            deadline: Duration::from_millis(3_500),
            attempt_timeout: None,
        };
        let start = monotonic_now();
        let mut b = policy.backoff(3);
        let mut waits = 0;
        while b.wait().await {
            waits += 1;
        }
        assert_eq!(waits, 3, "1 s apart within 3.5 s");
        assert!(start.elapsed() <= Duration::from_millis(3_500));
        b.reset();
        assert!(b.wait().await, "progress starts the deadline over");
        // A deadline set from outside stays.
        let mut fixed = policy
            .backoff(4)
            .until(monotonic_now() + Duration::from_millis(500));
        assert!(!fixed.wait().await);
        fixed.reset();
        assert!(!fixed.wait().await);
        // An attempt timeout cuts each attempt, not the operation.
        let timed = RetryPolicy {
            attempt_timeout: Some(Duration::from_millis(200)),
            deadline: Duration::from_secs(10),
            max_attempts: 3,
            ..policy
        };
        let start = monotonic_now();
        let mut b = timed.backoff(5);
        let err = retry_store(
            &mut b,
            StoreOp::Read,
            false,
            |_, _| {},
            std::future::pending::<object_store::Result<()>>,
        )
        .await
        .unwrap_err();
        assert_eq!(err.attempts, 3);
        assert_eq!(start.elapsed(), Duration::from_millis(200 * 3 + 1_000 * 2));
    }
}
