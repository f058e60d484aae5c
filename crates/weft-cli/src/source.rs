//! Where `read` and `tail` get entries from.
//!
//! A `dir` log is always read through a read-only [`Scanner`] over its
//! files, never opened: opening takes the backend's exclusive lock, and a
//! reader must neither wait for a writer nor lock one out (a `tail` left
//! running would otherwise stop every `append`). A bucket is read through
//! a read-only follower ([`location::follow_bucket`]), which never fences
//! the writer.

use weft::store::Location;
use weft::{Log, LogEntry, LogTag, Result};

use crate::dirlog::{self, Scanner};
use crate::location::{self, StoreArgs};

/// A source of entries.
pub(crate) enum Source {
    /// The log, opened through its backend.
    Log(Log),
    /// A `dir` log, read from its files.
    Scan(Scanner),
}

impl Source {
    /// Opens `location` for reading.
    ///
    /// Errors: `NotFound` (no log), and the backend's kinds.
    pub(crate) async fn open(location: &Location, args: &StoreArgs) -> Result<Source> {
        match location {
            Location::Dir { path } => Ok(Source::Scan(dirlog::scanner(path)?)),
            _ => Ok(Source::Log(location::follow_bucket(location, args).await?)),
        }
    }

    /// Opens the `LOG` argument `text` for reading: a PostgreSQL location
    /// through its backend, anything else as [`Source::open`] does.
    ///
    /// Errors: `InvalidInput` for a bad location; as [`Source::open`].
    pub(crate) async fn open_arg(text: &str, args: &StoreArgs) -> Result<Source> {
        match crate::pg::location(text) {
            Some(pg) => Ok(Source::Log(crate::pg::open_log(pg?).await?)),
            None => Source::open(&location::parse(text)?, args).await,
        }
    }

    /// The first readable seqnum.
    pub(crate) fn first_seqnum(&self) -> Result<u64> {
        match self {
            Source::Log(log) => Ok(log.storage().first_seqnum()),
            Source::Scan(scan) => scan.first_seqnum(),
        }
    }

    /// Up to `max` entries from seqnum `from` on (carrying `tag` if given).
    ///
    /// Errors: `Trimmed` below the first readable seqnum; `Corrupt`; I/O.
    pub(crate) async fn read(
        &self,
        tag: Option<&LogTag>,
        from: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        match self {
            Source::Log(log) => log.storage().read(tag, from, max).await,
            Source::Scan(scan) => scan.read(tag, from, max),
        }
    }

    /// Releases the log (and its lock).
    pub(crate) async fn close(self) {
        if let Source::Log(log) = self
            && let Err(e) = log.close().await
        {
            tracing::warn!(error = %e, "closing the log failed");
        }
    }
}
