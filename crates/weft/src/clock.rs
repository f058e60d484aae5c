//! Time, in one place: an injectable wall clock, so tests and simulations
//! can control time, and the two kinds of waiting the library does.
//!
//! Library code never reads the system clock directly: it asks a [`Clock`]
//! for wall time (what is written into logs and manifests), measures
//! deadlines and durations with [`monotonic_now`] and sleeps through
//! [`sleep`] (both tokio's, which a test can pause and advance), and bounds
//! real waits of OS threads with [`os_monotonic_now`]. `clippy.toml` bans
//! the underlying calls everywhere else, so this module is where a fully
//! simulated clock would plug in.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

    /// Sets the clock to `ms`, forward or back (a wall clock stepped back
    /// by NTP or by hand, for tests of what a log does then).
    pub fn set(&self, ms: u64) {
        self.now.store(ms, Ordering::SeqCst);
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

/// Waits `duration` on tokio's timer: polls, backoffs and injected latency
/// all sleep here, so a test on tokio's paused clock controls every wait.
pub async fn sleep(duration: Duration) {
    #[allow(clippy::disallowed_methods)]
    tokio::time::sleep(duration).await;
}

/// Now, on the monotonic clock that deadlines are measured on: tokio's, so
/// that tests and simulations on a paused runtime control it (and a
/// wall-clock step never moves a deadline).
pub fn monotonic_now() -> tokio::time::Instant {
    #[allow(clippy::disallowed_methods)]
    tokio::time::Instant::now()
}

/// Now, on the operating system's monotonic clock, for bounding real waits
/// of OS threads (the `dir` backend's group commit, which waits on a
/// condition variable that no paused tokio clock could wake) and for
/// latency figures. Never written anywhere, so it cannot make a log differ
/// between runs.
pub fn os_monotonic_now() -> Instant {
    #[allow(clippy::disallowed_methods)]
    Instant::now()
}
