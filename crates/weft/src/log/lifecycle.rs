//! Per-stream lifecycle: truncating a stream before a version, and
//! deleting it (soft), stored with the log.
//!
//! A stream's *start* is the first version its reads by tag return:
//! [`Log::stream`], [`Log::stream_versions`], [`Log::read_from`], the
//! `read_after*` helpers, [`Log::subscribe`] and the views built on them
//! skip the stream's own entries (those whose primary tag it is) below it.
//! Its numbering goes on: the next append gets the next version, and
//! conditions still name real versions (a deleted stream is not
//! [`Expected::NoStream`](crate::Expected::NoStream) again — it had
//! entries). An entry that carries the tag only as a secondary tag belongs
//! to another stream and is not hidden.
//!
//! The entries stay in the log, readable by seqnum and in whole-log reads
//! and subscriptions, until retention or a trim drops them: this is a
//! *soft* delete (as a truncate-before is in event stores), not an
//! erasure. Replicas and snapshots hold them as they hold every entry.
//!
//! The start is stored in the log's KV under the reserved scope
//! `_weft:streams` (layout in `docs/FORMATS.md`), so every process and
//! every server over the log sees it; it only moves forward. A backend
//! without a KV has no lifecycle (every stream starts at 0).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use weft::{AppendRequest, Log, LogTag};
//!
//! let log = Log::memory();
//! let cart = LogTag::with_key("cart", "42")?;
//! for item in ["apple", "pear", "plum"] {
//!     log.append(AppendRequest::new(cart.clone(), item)).await?;
//! }
//! log.truncate_stream(&cart, 2).await?;
//! let kept = log.read_all(&cart).await?;
//! assert_eq!(kept.len(), 1);
//! assert_eq!(kept[0].stream_version, 2);
//!
//! // A soft delete hides everything so far; the next entry starts a new
//! // life at the next version.
//! log.delete_stream(&cart).await?;
//! assert!(log.read_all(&cart).await?.is_empty());
//! let again = log.append(AppendRequest::new(cart.clone(), "fig")).await?;
//! assert_eq!(again.stream_version, 3);
//! assert_eq!(log.read_all(&cart).await?.len(), 1);
//! # Ok(()) }
//! ```

use bytes::{BufMut, Bytes, BytesMut};

use super::Log;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::MAX_KEY_BYTES;
use crate::model::{LogEntry, LogTag};
use crate::retention::RESERVED_NAMESPACE;
use crate::storage::Storage;

/// Where a stream starts and whether a delete put it there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamLifecycle {
    /// The first version reads of the stream return (0: all of it).
    pub start_version: u64,
    /// True when the last change was a [`Log::delete_stream`].
    pub deleted: bool,
}

impl StreamLifecycle {
    /// True when `entry` is one of `tag`'s own entries below the start.
    pub(crate) fn hides(&self, tag: &LogTag, entry: &LogEntry) -> bool {
        entry.stream_version < self.start_version && entry.primary_tag() == tag
    }
}

/// The KV scope of stream lifecycles: `_weft:streams`.
pub fn streams_scope() -> LogTag {
    LogTag::with_key(RESERVED_NAMESPACE, "streams").expect("a valid reserved tag")
}

/// How many times a change retries a compare-and-set that lost a race.
const CHANGE_ATTEMPTS: usize = 64;

const FORMAT_VERSION: u8 = 1;
const FLAG_DELETED: u8 = 1;

/// The KV key of `tag`'s lifecycle: its text when it fits, else `:` and
/// a 128-bit FNV-1a of it in hex (no tag's text starts with `:`, so the
/// two kinds never meet; the value names its tag, so a collision of the
/// hash is caught).
fn key_of(tag: &LogTag) -> String {
    let text = tag.to_string();
    if text.len() <= MAX_KEY_BYTES {
        return text;
    }
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for &b in text.as_bytes() {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    format!(":{h:032x}")
}

fn encode(tag: &LogTag, state: StreamLifecycle) -> Bytes {
    let text = tag.to_string();
    let mut out = BytesMut::with_capacity(12 + text.len());
    out.put_u8(FORMAT_VERSION);
    out.put_u8(if state.deleted { FLAG_DELETED } else { 0 });
    out.put_u64_le(state.start_version);
    // A tag's text is at most 511 bytes.
    out.put_u16_le(text.len() as u16);
    out.put_slice(text.as_bytes());
    out.freeze()
}

fn decode(tag: &LogTag, bytes: &[u8]) -> Result<StreamLifecycle> {
    let bad = |why: &str| Error::corrupt(format!("the lifecycle of stream {tag}: {why}"));
    if bytes.len() < 12 {
        return Err(bad("shorter than its header"));
    }
    if bytes[0] != FORMAT_VERSION {
        return Err(bad(&format!("unknown format version {}", bytes[0])));
    }
    if bytes[1] & !FLAG_DELETED != 0 {
        return Err(bad(&format!("unknown flags {:#04x}", bytes[1])));
    }
    let start_version = u64::from_le_bytes(bytes[2..10].try_into().expect("8 bytes"));
    let len = usize::from(u16::from_le_bytes([bytes[10], bytes[11]]));
    if bytes.len() != 12 + len {
        return Err(bad("its length does not match its tag's"));
    }
    if bytes[12..] != *tag.to_string().as_bytes() {
        return Err(bad("it names another stream"));
    }
    Ok(StreamLifecycle {
        start_version,
        deleted: bytes[1] & FLAG_DELETED != 0,
    })
}

/// `tag`'s stored lifecycle and the bytes it was read from.
async fn load(storage: &dyn Storage, tag: &LogTag) -> Result<(StreamLifecycle, Option<Bytes>)> {
    let kv = match storage.kv() {
        Ok(kv) => kv,
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            return Ok((StreamLifecycle::default(), None));
        }
        Err(e) => return Err(e),
    };
    match kv.get(&streams_scope(), &key_of(tag)).await? {
        None => Ok((StreamLifecycle::default(), None)),
        Some(bytes) => Ok((decode(tag, &bytes)?, Some(bytes))),
    }
}

/// `tag`'s lifecycle as stored (the default when none is).
///
/// Errors: `Corrupt` for a stored value that does not decode; the KV's
/// kinds.
pub(crate) async fn lifecycle_of(storage: &dyn Storage, tag: &LogTag) -> Result<StreamLifecycle> {
    Ok(load(storage, tag).await?.0)
}

impl Log {
    /// Where `tag`'s stream starts for reads by tag, and whether a delete
    /// put it there (see [`crate::log::lifecycle`]).
    ///
    /// Errors: `Corrupt` for a stored lifecycle that does not decode; the
    /// KV's kinds.
    pub async fn stream_lifecycle(&self, tag: &LogTag) -> Result<StreamLifecycle> {
        lifecycle_of(self.storage.as_ref(), tag).await
    }

    /// Hides `tag`'s entries below `before_version` from reads by tag; its
    /// numbering goes on. The start only moves forward: a `before_version`
    /// at or below the current start changes nothing. Returns the
    /// lifecycle now stored.
    ///
    /// Errors: `InvalidInput` when `before_version` is past the stream's
    /// next version; `Unsupported` when the backend has no KV; `ReadOnly`
    /// on a follower; the KV's kinds.
    pub async fn truncate_stream(
        &self,
        tag: &LogTag,
        before_version: u64,
    ) -> Result<StreamLifecycle> {
        self.change_lifecycle(tag, Some(before_version)).await
    }

    /// Deletes `tag`'s stream softly: every entry it has so far is hidden
    /// from reads by tag (the start moves to its next version). A later
    /// append starts a new life at the next version, which reads show.
    /// Returns the lifecycle now stored.
    ///
    /// Errors: as [`Log::truncate_stream`].
    pub async fn delete_stream(&self, tag: &LogTag) -> Result<StreamLifecycle> {
        self.change_lifecycle(tag, None).await
    }

    /// The last entry carrying `tag` below `before` that reads by tag
    /// show (walking back over the stream's hidden entries, one read each).
    ///
    /// Errors: as [`Storage::read_prev`].
    pub(crate) async fn prev_visible(
        &self,
        tag: &LogTag,
        mut before: u64,
    ) -> Result<Option<LogEntry>> {
        let lifecycle = self.stream_lifecycle(tag).await?;
        loop {
            match self.storage.read_prev(Some(tag), before).await? {
                Some(e) if lifecycle.hides(tag, &e) => before = e.seqnum,
                found => return Ok(found),
            }
        }
    }

    /// Truncates before `before` (`None`: delete, before the next version).
    async fn change_lifecycle(&self, tag: &LogTag, before: Option<u64>) -> Result<StreamLifecycle> {
        let kv = self.storage.kv()?;
        let scope = streams_scope();
        let key = key_of(tag);
        for _ in 0..CHANGE_ATTEMPTS {
            let (current, stored) = load(self.storage.as_ref(), tag).await?;
            let next = self.next_version(tag).await?;
            let wanted = match before {
                Some(v) if v > next => {
                    return Err(Error::invalid_input(format!(
                        "cannot truncate {tag} before version {v}: its next version is {next}"
                    )));
                }
                Some(v) => StreamLifecycle {
                    start_version: current.start_version.max(v),
                    deleted: current.deleted && v <= current.start_version,
                },
                None => StreamLifecycle {
                    start_version: current.start_version.max(next),
                    deleted: true,
                },
            };
            if wanted == current {
                return Ok(current);
            }
            let value = encode(tag, wanted);
            if kv
                .compare_and_set(&scope, &key, stored.as_deref(), Some(value))
                .await?
            {
                return Ok(wanted);
            }
        }
        Err(Error::new(
            ErrorKind::Unavailable,
            format!("changing the lifecycle of {tag} lost {CHANGE_ATTEMPTS} races; try again"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_damage_is_corrupt() {
        let tag = LogTag::with_key("cart", "42").unwrap();
        let state = StreamLifecycle {
            start_version: 7,
            deleted: true,
        };
        let bytes = encode(&tag, state);
        assert_eq!(decode(&tag, &bytes).unwrap(), state);
        let other = LogTag::new("cart").unwrap();
        assert_eq!(
            decode(&other, &bytes).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
        for cut in 0..bytes.len() {
            assert_eq!(
                decode(&tag, &bytes[..cut]).unwrap_err().kind(),
                ErrorKind::Corrupt
            );
        }
        let mut flags = bytes.to_vec();
        flags[1] = 0x80;
        assert_eq!(decode(&tag, &flags).unwrap_err().kind(), ErrorKind::Corrupt);
        let mut version = bytes.to_vec();
        version[0] = 2;
        assert_eq!(
            decode(&tag, &version).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
    }

    #[test]
    fn long_tags_get_a_hashed_key_no_tag_text_can_take() {
        let short = LogTag::with_key("a", "b").unwrap();
        assert_eq!(key_of(&short), "a:b");
        let long = LogTag::with_key("n".repeat(255), "k".repeat(255)).unwrap();
        let key = key_of(&long);
        assert!(key.starts_with(':') && key.len() == 33, "{key}");
        crate::kv::validate(&key, None).unwrap();
        let other = LogTag::with_key("n".repeat(255), "j".repeat(255)).unwrap();
        assert_ne!(key_of(&other), key);
    }
}
