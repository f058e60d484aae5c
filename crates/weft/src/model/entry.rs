//! Entries, append requests and their results, read positions.

use bytes::Bytes;

use super::tag::LogTag;
use crate::error::{Error, Result};

/// The largest payload one entry may carry by default (16 MiB). Backends may
/// lower it; a larger append is an [`InvalidInput`](crate::ErrorKind::InvalidInput)
/// error and writes nothing.
pub const MAX_ENTRY_BYTES: usize = 16 << 20;

/// The most tags one entry may carry.
pub const MAX_TAGS_PER_ENTRY: usize = 64;

/// One immutable entry of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    /// Global position: unique, dense and increasing across all tags.
    pub seqnum: u64,
    /// Position within the primary tag's stream, dense from 0.
    pub stream_version: u64,
    /// The tags, primary first, without duplicates.
    pub tags: Vec<LogTag>,
    /// The payload.
    pub data: Bytes,
    /// When the storage accepted the entry, in milliseconds since the Unix
    /// epoch (from the storage's clock).
    pub timestamp_ms: u64,
    /// The append id the entry was appended with
    /// ([`AppendRequest::with_id`]), `None` for an entry appended without
    /// one (and for entries a backend stored before it kept ids). Ids
    /// outlive the backend's retry window: a read returns the id for as
    /// long as the entry is in the log.
    pub append_id: Option<String>,
}

impl LogEntry {
    /// The primary tag: the stream whose version this entry carries.
    pub fn primary_tag(&self) -> &LogTag {
        &self.tags[0]
    }

    /// True when `tag` is one of the entry's tags.
    pub fn has_tag(&self, tag: &LogTag) -> bool {
        self.tags.iter().any(|t| t == tag)
    }
}

/// What to append: a payload and one or more tags (the first is primary).
///
/// ```
/// use weft::{AppendRequest, LogTag};
///
/// let orders = LogTag::new("orders")?;
/// let one = LogTag::with_key("orders", "order-42")?;
/// let req = AppendRequest::new(orders.clone(), "placed").with_tag(one);
/// assert_eq!(req.primary_tag(), Some(&orders));
/// # Ok::<(), weft::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendRequest {
    tags: Vec<LogTag>,
    data: Bytes,
    append_id: Option<String>,
}

/// The longest append id, in bytes.
pub const MAX_APPEND_ID_BYTES: usize = 255;

impl AppendRequest {
    /// A request for one tag.
    pub fn new(tag: LogTag, data: impl Into<Bytes>) -> Self {
        AppendRequest {
            tags: vec![tag],
            data: data.into(),
            append_id: None,
        }
    }

    /// A request for several tags; the first is the primary tag. Duplicates
    /// are dropped (keeping the first occurrence).
    pub fn with_tags(tags: impl IntoIterator<Item = LogTag>, data: impl Into<Bytes>) -> Self {
        let mut req = AppendRequest {
            tags: Vec::new(),
            data: data.into(),
            append_id: None,
        };
        for tag in tags {
            req = req.with_tag(tag);
        }
        req
    }

    /// Adds a secondary tag (ignored if already present).
    pub fn with_tag(mut self, tag: LogTag) -> Self {
        if !self.tags.contains(&tag) {
            self.tags.push(tag);
        }
        self
    }

    /// Gives the append a caller-chosen id, for exactly-once appends: when
    /// an entry with this id is already in the log, the append writes
    /// nothing and returns that entry's original result, so an append
    /// whose outcome was `Indeterminate` can be retried safely. The id is
    /// 1 to [`MAX_APPEND_ID_BYTES`] bytes without control characters (a
    /// UUID, `"order-42/placed"`), stored in the entry.
    ///
    /// A known id answers with its original result whatever the retry
    /// carries: a conditional append is not checked again (the retry of an
    /// `append_if` that won gets its result, not a conflict), and tags and
    /// payload are not compared. In a batch, entries with known ids are
    /// answered with their originals and the others are written; an id
    /// repeated within one batch is
    /// [`InvalidInput`](crate::ErrorKind::InvalidInput).
    ///
    /// How long ids are remembered is the backend's window; a retry older
    /// than it is appended again:
    ///
    /// * memory and PostgreSQL: as long as the entry is in the log (until
    ///   it is trimmed);
    /// * dir and the bucket writer: the ids of the newest 65,536 entries
    ///   appended with one (`DirOptions::append_id_window`,
    ///   `BucketOptions::append_id_window`), across reopens and, on a
    ///   bucket, writer failover (a bucket writer with a `cache_dir`
    ///   rebuilds only the ids its open reads); never past a trim.
    ///
    /// A backend that cannot honour ids (a read-only follower) refuses
    /// them with [`Unsupported`](crate::ErrorKind::Unsupported).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> weft::Result<()> {
    /// use weft::{AppendRequest, Log, LogTag};
    ///
    /// let log = Log::memory();
    /// let orders = LogTag::new("orders")?;
    /// let placed = || AppendRequest::new(orders.clone(), "placed").with_id("order-42/placed");
    /// let first = log.append(placed()).await?;
    /// // The reply was lost (say): the retry answers with the original.
    /// assert_eq!(log.append(placed()).await?, first);
    /// assert_eq!(log.read_all(&orders).await?.len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.append_id = Some(id.into());
        self
    }

    /// The append id, if the request has one.
    pub fn append_id(&self) -> Option<&str> {
        self.append_id.as_deref()
    }

    /// The primary tag, if the request has any tag.
    pub fn primary_tag(&self) -> Option<&LogTag> {
        self.tags.first()
    }

    /// The tags, primary first.
    pub fn tags(&self) -> &[LogTag] {
        &self.tags
    }

    /// The payload.
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// Splits the request into its tags and payload.
    pub fn into_parts(self) -> (Vec<LogTag>, Bytes) {
        (self.tags, self.data)
    }

    /// Splits the request into its tags, payload and append id.
    pub fn into_parts_with_id(self) -> (Vec<LogTag>, Bytes, Option<String>) {
        (self.tags, self.data, self.append_id)
    }

    /// Checks the request against the limits every backend enforces — the
    /// same check a backend makes of each entry of a batch
    /// ([`storage::kit::check_append`](crate::storage::kit::check_append)),
    /// for a caller that wants to know before it sends.
    ///
    /// Errors: [`InvalidInput`](crate::ErrorKind::InvalidInput) when there is
    /// no tag, too many tags, a bad append id, or the payload exceeds
    /// `max_entry_bytes`.
    pub fn validate(&self, max_entry_bytes: usize) -> Result<()> {
        check_entry(
            &self.tags,
            self.data.len(),
            self.append_id.as_deref(),
            max_entry_bytes,
        )
    }
}

/// The largest append batch, in the bytes of its entries' frames (see
/// `docs/FORMATS.md`), whatever the backend.
pub const MAX_BATCH_BYTES: usize = 1 << 30;

/// The one check of one entry, whoever makes it: 1 to
/// [`MAX_TAGS_PER_ENTRY`] distinct tags, an append id (if any) of 1 to
/// [`MAX_APPEND_ID_BYTES`] bytes without control characters, and a
/// payload of at most `max_entry_bytes`.
///
/// Errors: `InvalidInput`, saying which rule the entry breaks.
pub(crate) fn check_entry(
    tags: &[LogTag],
    data_len: usize,
    append_id: Option<&str>,
    max_entry_bytes: usize,
) -> Result<()> {
    if tags.is_empty() || tags.len() > MAX_TAGS_PER_ENTRY {
        return Err(Error::invalid_input(format!(
            "an entry needs 1 to {MAX_TAGS_PER_ENTRY} tags, this one has {}",
            tags.len()
        )));
    }
    for (i, tag) in tags.iter().enumerate() {
        if tags[..i].contains(tag) {
            return Err(Error::invalid_input(format!(
                "tag {tag} appears twice in one entry"
            )));
        }
    }
    if let Some(id) = append_id
        && (id.is_empty() || id.len() > MAX_APPEND_ID_BYTES || id.chars().any(char::is_control))
    {
        return Err(Error::invalid_input(format!(
            "append id {id:?} must be 1 to {MAX_APPEND_ID_BYTES} bytes without control characters"
        )));
    }
    if data_len > max_entry_bytes {
        return Err(Error::invalid_input(format!(
            "entry payload is {data_len} bytes; the limit is {max_entry_bytes}"
        )));
    }
    Ok(())
}

/// The outcome of a successful append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendResult {
    /// The entry's global seqnum.
    pub seqnum: u64,
    /// The entry's version in its primary tag's stream.
    pub stream_version: u64,
    /// The primary tag.
    pub primary_tag: LogTag,
    /// The storage timestamp, in milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
}

/// Where a read or subscription starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// The first entry still in the log (after any trim).
    Beginning,
    /// After the last entry: only entries appended from now on.
    End,
    /// At this seqnum (inclusive). Below the trim point it is a
    /// [`Trimmed`](crate::ErrorKind::Trimmed) error.
    At(u64),
    /// At the first live entry whose timestamp (milliseconds since the
    /// Unix epoch, the writer's clock, monotonic within the log) is at or
    /// after this time; after the last entry when none is. Found with
    /// [`Storage::seek_time`](crate::Storage::seek_time): O(log n) reads.
    /// A subscription resolves it once, when first polled: from then on it
    /// delivers every later entry, so a time in the future acts as `End`
    /// at that moment.
    Since(u64),
}
