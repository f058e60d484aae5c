//! One log line per outage, not one per retry.
//!
//! A loop that retries a failing store or directory every poll interval
//! would print a warning per attempt: a 20 s outage at a 50 ms interval is
//! hundreds of lines that say the same thing. An [`Outage`] logs the first
//! failure as a warning, every further one at debug level, and one warning
//! when the loop recovers, with how many attempts failed over how long.

use std::time::Instant;

use crate::error::Error;

/// The failure state of one retrying loop.
#[derive(Debug)]
pub(crate) struct Outage {
    what: &'static str,
    failures: u64,
    since: Option<Instant>,
}

impl Outage {
    /// A loop doing `what` (for the log lines), not failing.
    pub(crate) fn new(what: &'static str) -> Self {
        Outage {
            what,
            failures: 0,
            since: None,
        }
    }

    /// Failed attempts since the last success.
    #[cfg(test)]
    pub(crate) fn failures(&self) -> u64 {
        self.failures
    }

    /// Records a failed attempt that will be retried.
    pub(crate) fn failed(&mut self, err: &Error) {
        self.failures += 1;
        if self.failures == 1 {
            self.since = Some(Instant::now());
            tracing::warn!(
                what = self.what,
                error = %err,
                "failing; retrying (further failures are logged at debug level until it recovers)"
            );
        } else {
            tracing::debug!(
                what = self.what,
                failures = self.failures,
                error = %err,
                "still failing; retrying"
            );
        }
    }

    /// Records a successful attempt; logs the end of an outage, if there
    /// was one.
    pub(crate) fn recovered(&mut self) {
        if self.failures == 0 {
            return;
        }
        let seconds = self.since.map_or(0.0, |s| s.elapsed().as_secs_f64());
        tracing::warn!(
            what = self.what,
            failures = self.failures,
            seconds,
            "recovered after {} failed attempts over {seconds:.1} s",
            self.failures
        );
        self.failures = 0;
        self.since = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_failures_until_recovery() {
        let mut o = Outage::new("test");
        o.recovered();
        assert_eq!(o.failures(), 0);
        for _ in 0..5 {
            o.failed(&Error::closed("x"));
        }
        assert_eq!(o.failures(), 5);
        o.recovered();
        assert_eq!(o.failures(), 0);
    }
}
