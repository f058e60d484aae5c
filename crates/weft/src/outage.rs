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
            self.since = Some(crate::clock::os_monotonic_now());
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
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts warnings and debug events.
    struct Counter {
        warn: Arc<AtomicUsize>,
        debug: Arc<AtomicUsize>,
    }

    impl tracing::Subscriber for Counter {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            match *event.metadata().level() {
                tracing::Level::WARN => self.warn.fetch_add(1, Ordering::Relaxed),
                tracing::Level::DEBUG => self.debug.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    #[test]
    fn an_outage_of_many_retries_is_two_warnings() {
        let warn = Arc::new(AtomicUsize::new(0));
        let debug = Arc::new(AtomicUsize::new(0));
        let counter = Counter {
            warn: warn.clone(),
            debug: debug.clone(),
        };
        tracing::subscriber::with_default(counter, || {
            let mut o = Outage::new("test");
            o.recovered();
            for _ in 0..400 {
                o.failed(&Error::closed("store away"));
            }
            assert_eq!(o.failures(), 400);
            o.recovered();
            assert_eq!(o.failures(), 0);
            // A second outage: two more.
            o.failed(&Error::closed("store away"));
            o.recovered();
        });
        assert_eq!(
            warn.load(Ordering::Relaxed),
            4,
            "start and end of two outages"
        );
        assert_eq!(debug.load(Ordering::Relaxed), 399);
    }
}
