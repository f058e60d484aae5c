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
use futures::TryStreamExt;

use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::Lease;
use crate::log::LogView;
use crate::model::{AppendResult, LogEntry};

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
        Ok(Some(FencedWriter::with_lease(view, lease).await?))
    }

    /// A writer for a lease already held, fencing on the stream's current
    /// version as the backend reports it. A fence read from a lagging
    /// source (a follower) only costs a `Conflict` on the first append,
    /// never a wrong write: [`catch_up`](Self::catch_up) then moves it.
    ///
    /// Errors: as [`LogView::next_version`].
    pub async fn with_lease(view: LogView, lease: Lease) -> Result<FencedWriter> {
        let next_version = view.next_version().await?;
        Ok(FencedWriter {
            view,
            lease,
            next_version,
        })
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
    /// Errors: as [`LogView::stream_versions`].
    pub async fn catch_up(&mut self) -> Result<Vec<LogEntry>> {
        let mut unseen = Vec::new();
        self.catch_up_with(|entry| {
            unseen.push(entry);
            Ok(())
        })
        .await?;
        Ok(unseen)
    }

    /// Like [`catch_up`](Self::catch_up), handing each entry to `fold` as
    /// its page arrives instead of collecting them: the fence moves past
    /// each entry `fold` accepted, and an error from `fold` stops there.
    /// Returns how many entries were folded.
    ///
    /// Errors: `fold`'s; as [`LogView::stream_versions`].
    pub async fn catch_up_with(
        &mut self,
        mut fold: impl FnMut(LogEntry) -> Result<()>,
    ) -> Result<u64> {
        let mut unseen = self.view.stream_versions(self.next_version);
        let mut folded = 0;
        while let Some(entry) = unseen.try_next().await? {
            let next = entry.stream_version + 1;
            fold(entry)?;
            self.next_version = next;
            folded += 1;
        }
        Ok(folded)
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
