//! An injectable clock, so tests and simulations can control time.
//!
//! Library code never reads the system clock directly: it asks a [`Clock`]
//! for wall-clock time, and [`monotonic_now`] for the instants that
//! deadlines and durations are measured in.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        #[allow(clippy::disallowed_methods)]
        let now = SystemTime::now();
        now.duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to (for tests and simulation).
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A manual clock reading `start_ms`.
    pub fn new(start_ms: u64) -> Arc<Self> {
        Arc::new(ManualClock {
            now: AtomicU64::new(start_ms),
        })
    }

    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

/// The default clock handle.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// Now, on the monotonic clock that deadlines are measured on: tokio's, so
/// that tests and simulations on a paused runtime control it (and a
/// wall-clock step never moves a deadline).
pub fn monotonic_now() -> tokio::time::Instant {
    tokio::time::Instant::now()
}
