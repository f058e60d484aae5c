//! How the backend talks to a PostgreSQL log (where it is:
//! [`PgLocation`](crate::connect::PgLocation), in `connect`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::MAX_ENTRY_BYTES;

/// Settings of a [`PgStorage`](super::PgStorage): plain values, loadable
/// with serde.
///
/// ```
/// use weft::storage::postgres::PgOptions;
///
/// let o: PgOptions = serde_json::from_str(r#"{ "pool_size": 4 }"#).unwrap();
/// assert_eq!(o.pool_size, 4);
/// assert_eq!(o.max_in_flight, PgOptions::default().max_in_flight);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct PgOptions {
    /// Connections for reads, KV and appends. Default 8.
    pub pool_size: usize,
    /// Append transactions one handle keeps in flight at once. Appends
    /// that arrive while all are busy queue and go together in the next
    /// one (group commit). Default 1: a second group in flight finds the
    /// numbering lock held (by the first) and is staged, to be numbered by
    /// a later round and collected after its notification — more server
    /// calls per entry and a later answer than waiting on the client and
    /// going out with everything queued meanwhile. Measured with
    /// `weft-bench --only pg-append` (BENCHMARKS.md, two alternated pairs
    /// of runs): 1 instead of 2 gave 1.05–1.8× the entries/s in every case
    /// at 1, 4 and 16 processes, and a lower p99 in all but one.
    /// More than 1 may pay off for a handle far from its server, where
    /// round trips rather than the server bound it (not measured here).
    pub max_in_flight: usize,
    /// The most entries one append transaction carries. Default 4096.
    pub max_group_entries: usize,
    /// The most payload bytes one append transaction carries (a larger
    /// single batch still goes alone). Default 8 MiB.
    pub max_group_bytes: usize,
    /// The deadline of every operation, connecting included, in
    /// milliseconds: past it a read is `Unavailable` and a write
    /// `Indeterminate`, never a hang. Default 30 000.
    pub op_timeout_ms: u64,
    /// The server-side `statement_timeout`, in milliseconds (0: the
    /// server's default). Should be below `op_timeout_ms`, so the server
    /// gives up first and the write is known not to have happened.
    /// Default 20 000.
    pub statement_timeout_ms: u64,
    /// How often, in milliseconds, the tailer reads the log without a
    /// notification (the fallback when a NOTIFY was lost). Default 1000.
    pub poll_interval_ms: u64,
    /// The largest payload accepted. At most 16 MiB; default 16 MiB.
    pub max_entry_bytes: usize,
    /// Create the log's schema when it does not exist; when false, opening
    /// a missing log is `NotFound`. Default true.
    pub create_if_missing: bool,
}

setters! {
    PgOptions {
        with_pool_size => pool_size: usize,
        with_max_in_flight => max_in_flight: usize,
        with_max_group_entries => max_group_entries: usize,
        with_max_group_bytes => max_group_bytes: usize,
        with_op_timeout_ms => op_timeout_ms: u64,
        with_statement_timeout_ms => statement_timeout_ms: u64,
        with_poll_interval_ms => poll_interval_ms: u64,
        with_max_entry_bytes => max_entry_bytes: usize,
        with_create_if_missing => create_if_missing: bool,
    }
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            pool_size: 8,
            max_in_flight: 1,
            max_group_entries: 4096,
            max_group_bytes: 8 << 20,
            op_timeout_ms: 30_000,
            statement_timeout_ms: 20_000,
            poll_interval_ms: 1000,
            max_entry_bytes: MAX_ENTRY_BYTES,
            create_if_missing: true,
        }
    }
}

impl PgOptions {
    /// Checks the settings.
    ///
    /// Errors: `InvalidInput` naming the first setting out of range.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("pool_size", self.pool_size as u64),
            ("max_in_flight", self.max_in_flight as u64),
            ("max_group_entries", self.max_group_entries as u64),
            ("max_group_bytes", self.max_group_bytes as u64),
            ("op_timeout_ms", self.op_timeout_ms),
            ("poll_interval_ms", self.poll_interval_ms),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(Error::invalid_input(format!("{name} must be at least 1")));
            }
        }
        if self.max_in_flight > self.pool_size {
            return Err(Error::invalid_input(format!(
                "max_in_flight {} exceeds pool_size {}",
                self.max_in_flight, self.pool_size
            )));
        }
        if self.max_entry_bytes > MAX_ENTRY_BYTES {
            return Err(Error::invalid_input(format!(
                "max_entry_bytes {} exceeds the limit of {MAX_ENTRY_BYTES}",
                self.max_entry_bytes
            )));
        }
        if self.op_timeout_ms > 3_600_000 || self.statement_timeout_ms > 3_600_000 {
            return Err(Error::invalid_input("timeouts are limited to one hour"));
        }
        Ok(())
    }

    pub(super) fn op_timeout(&self) -> Duration {
        Duration::from_millis(self.op_timeout_ms)
    }

    pub(super) fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.poll_interval_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        assert!(PgOptions::default().validate().is_ok());
        let bad = PgOptions {
            max_in_flight: 9,
            ..PgOptions::default()
        };
        assert!(bad.validate().is_err());
        let bad = PgOptions {
            pool_size: 0,
            ..PgOptions::default()
        };
        assert!(bad.validate().is_err());
    }
}
