//! Per-stream lifecycle: truncating a stream before a version, deleting
//! it (soft), stored with the log, and erasing what that hides (hard).
//!
//! A stream's *start* is a version and the seqnum where that version is (or,
//! when the stream has no entry at that version yet, the log's end when the
//! start was set). Reads by seqnum of the tag — [`Log::stream`],
//! [`Log::read_from`], the `read_after` helpers, [`Log::subscribe`] and the
//! views built on them — begin at the start's seqnum, so they leave out
//! every entry that carries the tag below it (the stream's own and other
//! streams' that carry it as a secondary tag); reads by version
//! ([`Log::stream_versions`]) begin at the start's version. Either way a
//! read jumps to the start: it costs nothing per hidden entry, however
//! many there are. The stream's numbering goes on: the next append gets
//! the next version, and conditions still name real versions (a deleted
//! stream is not [`Expected::NoStream`](crate::Expected::NoStream) again —
//! it had entries).
//!
//! The entries stay in the log, readable by seqnum and in whole-log reads
//! and subscriptions, until retention or a trim drops them: this is a
//! *soft* delete (as a truncate-before is in event stores), not an
//! erasure. Replicas and snapshots hold them as they hold every entry.
//!
//! [`Log::erase_stream`] is the *hard* delete, for erasure requests: it
//! erases the payloads of the entries the start hides in the stored log
//! itself. Each keeps its place — seqnum, tags, version, time, append id —
//! and reads with an empty payload, in every read; seqnums, other streams
//! and the numbering do not change. What it cannot reach (copies made
//! before, other processes' caches until they turn over, the database's
//! old row versions until `VACUUM`) is listed in
//! `docs/FAILURE_SEMANTICS.md`.
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
//!
//! // The hard delete: the three hidden payloads are erased for good; the
//! // entries keep their places in the log.
//! assert_eq!(log.erase_stream(&cart).await?, 3);
//! let whole = log.read_log(weft::Position::Beginning, 10).await?;
//! assert_eq!(whole.len(), 4);
//! assert!(whole[..3].iter().all(|e| e.data.is_empty()));
//! assert_eq!(whole[3].data, "fig");
//! # Ok(()) }
//! ```

use bytes::Bytes;

use super::Log;
use crate::error::{Error, ErrorKind, Result};
use crate::format::fields::{Reader, Writer};
use crate::kv::MAX_KEY_BYTES;
use crate::model::{LogEntry, LogTag};
use crate::retention::RESERVED_NAMESPACE;
use crate::storage::Storage;

/// Where a stream starts and whether a delete put it there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamLifecycle {
    /// The first version reads of the stream by version return (0: all).
    pub start_version: u64,
    /// The first seqnum reads of the tag by seqnum return: where
    /// `start_version` is, or the log's end when the start was set if the
    /// stream had no entry at that version then (0: all).
    pub start_seqnum: u64,
    /// True when the last change was a [`Log::delete_stream`].
    pub deleted: bool,
}

impl StreamLifecycle {
    /// True when a read of the tag by seqnum leaves `entry` out.
    pub(crate) fn hides(&self, entry: &LogEntry) -> bool {
        entry.seqnum < self.start_seqnum
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
    let mut w = Writer::default();
    w.u8(FORMAT_VERSION)
        .u8(if state.deleted { FLAG_DELETED } else { 0 })
        .u64(state.start_version)
        .u64(state.start_seqnum)
        // A tag's text is at most 511 bytes.
        .u16(text.len() as u16)
        .bytes(text.as_bytes());
    Bytes::from(w.finish())
}

fn decode(tag: &LogTag, bytes: &[u8]) -> Result<StreamLifecycle> {
    let bad = |why: &str| Error::corrupt(format!("the lifecycle of stream {tag}: {why}"));
    let mut r = Reader::new(bytes, "stream lifecycle");
    let version = r.u8("format version")?;
    if version != FORMAT_VERSION {
        return Err(bad(&format!("unknown format version {version}")));
    }
    let flags = r.u8("flags")?;
    if flags & !FLAG_DELETED != 0 {
        return Err(bad(&format!("unknown flags {flags:#04x}")));
    }
    let start_version = r.u64("start version")?;
    let start_seqnum = r.u64("start seqnum")?;
    let named = r.text("tag")?;
    r.finish()?;
    if named != tag.to_string() {
        return Err(bad("it names another stream"));
    }
    Ok(StreamLifecycle {
        start_version,
        start_seqnum,
        deleted: flags & FLAG_DELETED != 0,
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

    /// Erases, for good, the payloads of the entries `tag`'s start hides
    /// (after [`Log::delete_stream`] or [`Log::truncate_stream`]): a hard
    /// delete, for erasure requests. Each entry whose primary tag is `tag`
    /// and whose version is below the start keeps its place — seqnum,
    /// tags, version, time, append id — and reads with an empty payload
    /// from then on, in whole-log reads too; the backend overwrites the
    /// stored bytes (rewriting sealed segments, or the rows). Entries of
    /// other streams that carry `tag` as a secondary tag are theirs and
    /// stay. Returns how many entries this call erased; calling it again
    /// erases what a crash or an error left, and nothing more.
    ///
    /// What is *not* reached: copies made before the erase — entries a
    /// subscriber or a replica already read, state folded from them,
    /// snapshots and backups — and, on a directory, followers in other
    /// processes that hold the old segment file open (until they close
    /// it). See `docs/FAILURE_SEMANTICS.md`.
    ///
    /// Errors: `Unsupported` when the backend cannot erase (a backend
    /// without a KV hides nothing, so there is nothing to erase: `Ok(0)`);
    /// `ReadOnly` on a directory follower or through a read-only store (a
    /// bucket follower erases as a tool does, without claiming the log);
    /// `Corrupt` for a stored lifecycle or
    /// segment that does not decode; the backend's kinds, after which some
    /// entries may be erased (call it again).
    pub async fn erase_stream(&self, tag: &LogTag) -> Result<u64> {
        let start = self.stream_lifecycle(tag).await?;
        if start.start_version == 0 {
            return Ok(0);
        }
        self.storage
            .erase_below(tag, start.start_version, start.start_seqnum)
            .await
    }

    /// The last entry carrying `tag` below `before` that reads by tag
    /// show (`None` when it is below the stream's start).
    ///
    /// Errors: as [`Storage::read_prev`].
    pub(crate) async fn prev_visible(&self, tag: &LogTag, before: u64) -> Result<Option<LogEntry>> {
        let lifecycle = self.stream_lifecycle(tag).await?;
        if before <= lifecycle.start_seqnum {
            return Ok(None);
        }
        let found = self.storage.read_prev(Some(tag), before).await?;
        Ok(found.filter(|e| !lifecycle.hides(e)))
    }

    /// The seqnum where `tag`'s stream reaches `version`: its entry at that
    /// version, or — when it has none yet — the log's end now. The tip is
    /// read first, so an entry appended at `version` after the read is at
    /// or past it, and every entry below `version` (which existed when the
    /// caller read the next version) is below it.
    async fn seqnum_of(&self, tag: &LogTag, version: u64) -> Result<u64> {
        let tip = self.storage.tip().await?;
        match self.storage.read_versions(tag, version, 1).await {
            Ok(found) => Ok(found.first().map_or(tip.next, |e| e.seqnum)),
            // The entry at `version` was trimmed: everything below it is
            // gone, and what is left of the stream is at or past it.
            Err(e) if e.kind() == ErrorKind::Trimmed => Ok(self.storage.tip().await?.first),
            Err(e) => Err(e),
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
                // The start only moves forward.
                Some(v) if v <= current.start_version => current,
                Some(v) => StreamLifecycle {
                    start_version: v,
                    start_seqnum: self.seqnum_of(tag, v).await?.max(current.start_seqnum),
                    deleted: false,
                },
                // Everything that carries the tag so far.
                None => StreamLifecycle {
                    start_version: next.max(current.start_version),
                    start_seqnum: self.seqnum_of(tag, next).await?.max(current.start_seqnum),
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
            start_seqnum: 1 << 40,
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
