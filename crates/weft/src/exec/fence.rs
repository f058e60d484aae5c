//! The lease-plus-version-fence pattern: one writer owns a stream by lease,
//! and every append it makes is conditional on the version it last saw.
//!
//! A lease tells a writer it owned the stream a moment ago; it cannot tell
//! the writer it still owns it at the instant a write lands. A process can
//! pause (GC, swap, a slow disk) past its lease's expiry, another process
//! takes the lease over and writes, and then the first one wakes and
//! writes too. The version fence closes that gap: each append names the
//! version it expects the stream to be at, and the log refuses it if
//! anyone appended in between. Clock trouble then costs a rejected append,
//! never two writers interleaving their decisions on one stream.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use std::time::Duration;
//! use weft::clock::ManualClock;
//! use weft::exec::FencedWriter;
//! use weft::{ErrorKind, Log, LogTag};
//!
//! let log = Log::memory();
//! let stream = log.view(LogTag::with_key("execution", "exec-1")?);
//! let ttl = Duration::from_secs(5);
//!
//! // node-a's clock stalls: it will keep believing its lease is valid.
//! let a_clock = ManualClock::new(0);
//! let mut a = FencedWriter::claim(stream.clone(), "owner", "node-a", ttl, a_clock).await?.unwrap();
//! a.append("step-1 by a").await?;
//!
//! // On node-b's clock the lease expired; it takes over and writes.
//! let b_clock = ManualClock::new(60_000);
//! let mut b = FencedWriter::claim(stream.clone(), "owner", "node-b", ttl, b_clock).await?.unwrap();
//! b.append("step-2 by b").await?;
//!
//! // node-a wakes up: the log itself rejects its stale write.
//! let err = a.append("step-2 by a").await.unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::Conflict);
//! assert_eq!(stream.read_all().await?.len(), 2);
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::Lease;
use crate::log::LogView;
use crate::model::{AppendResult, LogEntry};

/// How many entries one catch-up read fetches.
const CATCH_UP_CHUNK: usize = 1024;

/// A writer of one stream that holds its lease and fences every append on
/// the stream version it last saw.
#[derive(Debug)]
pub struct FencedWriter {
    view: LogView,
    lease: Lease,
    /// The version the next append expects (the fence).
    next_version: u64,
}

impl FencedWriter {
    /// Claims `view`'s stream: acquires the lease under `lease_key` of the
    /// view's KV for `holder`, and fences on the stream's version as of the
    /// claim. `None` when another holder's lease is still valid.
    ///
    /// Errors: as [`Lease::acquire`]; `Unsupported` when the backend has no
    /// KV.
    pub async fn claim(
        view: LogView,
        lease_key: &str,
        holder: &str,
        ttl: Duration,
        clock: Arc<dyn Clock>,
    ) -> Result<Option<FencedWriter>> {
        let kv = view.kv()?;
        let Some(lease) = Lease::acquire(&kv, lease_key, holder, ttl, clock).await? else {
            return Ok(None);
        };
        Ok(Some(FencedWriter::with_lease(view, lease)))
    }

    /// A writer for a lease already held, fencing on the stream's current
    /// version.
    pub fn with_lease(view: LogView, lease: Lease) -> FencedWriter {
        let next_version = view.next_version();
        FencedWriter {
            view,
            lease,
            next_version,
        }
    }

    /// The version the next append expects.
    pub fn next_version(&self) -> u64 {
        self.next_version
    }

    /// The lease.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The stream's view.
    pub fn view(&self) -> &LogView {
        &self.view
    }

    /// The stream's entries from the fence on (those the writer has not
    /// seen), moving the fence past them. Call it after a claim to fold
    /// what the previous holder wrote, or after a `Conflict` to re-read
    /// before deciding again.
    ///
    /// Errors: as [`LogView::read_after_version`].
    pub async fn catch_up(&mut self) -> Result<Vec<LogEntry>> {
        let storage = self.view.log().storage();
        let mut out = Vec::new();
        loop {
            let chunk = storage
                .read_versions(self.view.tag(), self.next_version, CATCH_UP_CHUNK)
                .await?;
            let done = chunk.len() < CATCH_UP_CHUNK;
            if let Some(last) = chunk.last() {
                self.next_version = last.stream_version + 1;
            }
            out.extend(chunk);
            if done {
                return Ok(out);
            }
        }
    }

    /// Appends `data` to the stream if it is still at the fence, then moves
    /// the fence past the new entry.
    ///
    /// Errors: `Conflict` when the lease has expired by this writer's clock
    /// (renew it first), or when the stream moved past the fence: someone
    /// else wrote, so this writer must re-read ([`catch_up`](Self::catch_up))
    /// and decide again, or step down. Otherwise as [`LogView::append_if`].
    pub async fn append(&mut self, data: impl Into<Bytes>) -> Result<AppendResult> {
        if self.lease.is_expired() {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "the lease {:?} of {} expired at {} ms; renew it before writing",
                    self.lease.key(),
                    self.lease.holder(),
                    self.lease.expires_at_ms()
                ),
            ));
        }
        let result = self.view.append_if(data, self.next_version).await?;
        self.next_version = result.stream_version + 1;
        Ok(result)
    }

    /// Extends the lease. False when it was lost to another holder.
    ///
    /// Errors: as [`Lease::renew`].
    pub async fn renew(&mut self) -> Result<bool> {
        self.lease.renew().await
    }

    /// Releases the lease if it is still this writer's.
    ///
    /// Errors: as [`Lease::release`].
    pub async fn release(self) -> Result<bool> {
        self.lease.release().await
    }
}
