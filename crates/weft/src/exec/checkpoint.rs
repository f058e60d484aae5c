//! The actor-checkpoint pattern: remember the last processed seqnum in the
//! view's KV, and on start resume right after it.
//!
//! An actor reads one tag as its inbox. After a restart it must see every
//! message it had not finished, once, in order, and then keep receiving new
//! ones. [`Checkpoint::resume`] opens a subscription at checkpoint + 1: the
//! subscription delivers the backlog from storage and then live entries
//! from the commit feed, as one stream with no gap between them (the feed is
//! joined before the backlog is read; see [`Subscription`]).
//!
//! Processing is at-least-once: an entry processed but not yet checkpointed
//! when the process dies is delivered again. Make processing idempotent, or
//! checkpoint before acting when losing an entry is the lesser harm.
//!
//! The checkpoint only moves forward ([`Checkpoint::advance`] compares and
//! sets), so a slow or duplicate processor cannot drag it back.
//!
//! A checkpoint below the log's trim point makes the subscription fail with
//! `Trimmed`: the entries the actor never saw are gone, and silently
//! skipping them is not this helper's call.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use futures::StreamExt;
//! use weft::exec::Checkpoint;
//! use weft::{Log, LogTag};
//!
//! let log = Log::memory();
//! let inbox = log.view(LogTag::with_key("actor", "orders")?);
//! let checkpoint = Checkpoint::for_view(&inbox, "checkpoint")?;
//! for msg in ["a", "b", "c"] {
//!     inbox.append(msg).await?;
//! }
//! checkpoint.advance(0).await?; // "a" was handled before a restart
//!
//! let mut resumed = checkpoint.resume(&inbox).await?;
//! assert_eq!(resumed.backlog_through, Some(2));
//! let next = resumed.subscription.next().await.unwrap()?;
//! assert_eq!(&next.data[..], b"b");
//! # Ok(()) }
//! ```

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::kv::{ViewKv, validate};
use crate::log::{LogView, Subscription};
use crate::model::Position;

/// The last processed seqnum of one consumer, kept in a view's KV.
///
/// Stored as a little-endian `u64` of exactly 8 bytes.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    kv: ViewKv,
    key: String,
}

/// A subscription resumed from a checkpoint.
#[derive(Debug)]
pub struct Resumed {
    /// Entries after the checkpoint: the backlog, then live ones.
    pub subscription: Subscription,
    /// Where the subscription started.
    pub from: Position,
    /// The view's last seqnum when the subscription opened: entries up to
    /// it are the backlog, later ones arrived live. `None` when the view was
    /// empty.
    pub backlog_through: Option<u64>,
}

fn decode(key: &str, bytes: &[u8]) -> Result<u64> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| {
        Error::corrupt(format!(
            "kv key {key:?} holds {} bytes, not an 8-byte checkpoint",
            bytes.len()
        ))
    })?;
    Ok(u64::from_le_bytes(arr))
}

fn encode(seqnum: u64) -> Bytes {
    Bytes::copy_from_slice(&seqnum.to_le_bytes())
}

impl Checkpoint {
    /// The checkpoint stored under `key` of `kv`.
    ///
    /// Errors: `InvalidInput` for a key the KV would reject.
    pub fn new(kv: ViewKv, key: impl Into<String>) -> Result<Self> {
        let key = key.into();
        validate(&key, None)?;
        Ok(Checkpoint { kv, key })
    }

    /// The checkpoint stored under `key` of `view`'s own KV.
    ///
    /// Errors: `InvalidInput` for a bad key; `Unsupported` when the backend
    /// has no KV.
    pub fn for_view(view: &LogView, key: impl Into<String>) -> Result<Self> {
        Checkpoint::new(view.kv()?, key)
    }

    /// The last processed seqnum, `None` before the first checkpoint.
    ///
    /// Errors: `Corrupt` when the key holds something else; otherwise the
    /// KV's kinds.
    pub async fn load(&self) -> Result<Option<u64>> {
        match self.kv.get(&self.key).await? {
            Some(bytes) => decode(&self.key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Where processing resumes: right after the checkpoint, or at the
    /// beginning of the log when there is none.
    ///
    /// Errors: as [`Checkpoint::load`].
    pub async fn resume_position(&self) -> Result<Position> {
        Ok(match self.load().await? {
            Some(seqnum) => Position::At(seqnum.saturating_add(1)),
            None => Position::Beginning,
        })
    }

    /// Records that everything up to `seqnum` was processed. Only moves
    /// forward: true when it wrote, false when the checkpoint already was at
    /// or past `seqnum`.
    ///
    /// Errors: `Corrupt` when the key holds something else; otherwise the
    /// KV's kinds.
    pub async fn advance(&self, seqnum: u64) -> Result<bool> {
        loop {
            let current = self.kv.get(&self.key).await?;
            if let Some(bytes) = &current
                && decode(&self.key, bytes)? >= seqnum
            {
                return Ok(false);
            }
            if self
                .kv
                .compare_and_set(&self.key, current.as_deref(), Some(encode(seqnum)))
                .await?
            {
                return Ok(true);
            }
            // Another processor moved it in between; compare again.
        }
    }

    /// Forgets the checkpoint: the next resume starts at the beginning.
    ///
    /// Errors: the KV's kinds.
    pub async fn reset(&self) -> Result<()> {
        self.kv.delete(&self.key).await
    }

    /// Subscribes to `view` from right after the checkpoint: the backlog,
    /// then live entries, with no gap between them.
    ///
    /// Errors: as [`Checkpoint::load`] and [`LogView::check_tail`]. A
    /// checkpoint below the trim point surfaces as a `Trimmed` error from
    /// the subscription.
    pub async fn resume(&self, view: &LogView) -> Result<Resumed> {
        let from = self.resume_position().await?;
        let subscription = view.subscribe(from);
        // Read after subscribing: whatever the tail says, the subscription
        // already covers it.
        let backlog_through = view.check_tail().await?;
        Ok(Resumed {
            subscription,
            from,
            backlog_through,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn decode_checks_the_length() {
        assert_eq!(decode("k", &encode(7)).unwrap(), 7);
        for bad in [&b""[..], &b"1234567"[..], &b"123456789"[..]] {
            assert_eq!(decode("k", bad).unwrap_err().kind(), ErrorKind::Corrupt);
        }
    }
}
