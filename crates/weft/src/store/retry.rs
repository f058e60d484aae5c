//! Bounded retries with exponential backoff and seeded jitter.
//!
//! A [`RetryPolicy`] is plain, serde-loadable configuration; a [`Backoff`] is
//! one retry loop's state, drawing its jitter from a seeded RNG so that a run
//! under a given seed replays the same delays (no `thread_rng`). Sleeps use
//! `tokio::time::sleep`, so tests on tokio's paused clock control them.

use std::future::Future;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::outcome::{Outcome, StoreOp, classify};

/// How often and how patiently to retry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 8,
            base_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_secs(2),
            jitter: 0.5,
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

    /// A fresh retry loop whose jitter comes from `seed`.
    pub fn backoff(&self, seed: u64) -> Backoff {
        Backoff::new(self.clone(), seed)
    }
}

/// The state of one retry loop.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: RetryPolicy,
    attempts: u32,
    rng: ChaCha8Rng,
}

impl Backoff {
    /// A retry loop under `policy`, jitter seeded by `seed`.
    pub fn new(policy: RetryPolicy, seed: u64) -> Self {
        Backoff {
            policy,
            attempts: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// Attempts made so far (counted by [`Backoff::next_delay`]).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Records an attempt and returns the delay before the next one, or
    /// `None` when the policy's attempts are used up.
    pub fn next_delay(&mut self) -> Option<Duration> {
        self.attempts = self.attempts.saturating_add(1);
        if self.attempts >= self.policy.max_attempts.max(1) {
            return None;
        }
        Some(self.policy.delay(self.attempts - 1, &mut self.rng))
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

    /// Starts over (after progress was made), keeping the RNG stream.
    pub fn reset(&mut self) {
        self.attempts = 0;
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
        let error = match attempt().await {
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
}
