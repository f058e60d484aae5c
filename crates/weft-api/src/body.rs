//! The JSON bodies of the API's routes.
//!
//! Field names follow the API contract (`docs/SERVER.md`); payloads are
//! base64 in fields named `data`. Conversions to and from weft's own types
//! live here too, so server and client convert one way.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use weft::{AppendResult, Error, LogEntry, LogTag, Result};

pub use crate::expected::{ExpectedWire, StreamState};

/// One entry of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its global position.
    pub seqnum: u64,
    /// Its version in its primary (first) tag's stream.
    pub stream_version: u64,
    /// Its tags, primary first (`namespace` or `namespace:key`).
    pub tags: Vec<String>,
    /// The payload.
    #[serde(with = "crate::b64")]
    pub data: Bytes,
    /// When it was appended (milliseconds since the Unix epoch).
    pub timestamp_ms: u64,
    /// The append id it was appended with, `null` for none (absent from
    /// servers older than this field, which reads as none).
    #[serde(default)]
    pub id: Option<String>,
}

impl From<&LogEntry> for Entry {
    fn from(e: &LogEntry) -> Self {
        Entry {
            seqnum: e.seqnum,
            stream_version: e.stream_version,
            tags: e.tags.iter().map(|t| t.to_string()).collect(),
            data: e.data.clone(),
            timestamp_ms: e.timestamp_ms,
            id: e.append_id.clone(),
        }
    }
}

impl Entry {
    /// The [`LogEntry`] this describes.
    ///
    /// Errors: `InvalidInput` for a malformed tag.
    pub fn into_entry(self) -> Result<LogEntry> {
        Ok(LogEntry {
            seqnum: self.seqnum,
            stream_version: self.stream_version,
            tags: tags(&self.tags)?,
            data: self.data,
            timestamp_ms: self.timestamp_ms,
            append_id: self.id,
        })
    }
}

/// Parses tags.
///
/// Errors: `InvalidInput` for a malformed tag.
pub fn tags(names: &[String]) -> Result<Vec<LogTag>> {
    names.iter().map(|t| t.parse::<LogTag>()).collect()
}

/// `POST /v1/append`: one entry or an atomic batch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendBody {
    /// The entries, written all or none, with contiguous seqnums.
    pub entries: Vec<NewEntry>,
    /// Append only if the first entry's primary tag (`tag`) is at
    /// `next_version`.
    #[serde(default)]
    pub condition: Option<Condition>,
    /// The append id of a single-entry append (exactly once); a batch gives
    /// ids per entry.
    #[serde(default)]
    pub id: Option<String>,
}

/// One entry to append.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewEntry {
    /// Tags, primary first.
    pub tags: Vec<String>,
    /// The payload.
    #[serde(with = "crate::b64")]
    pub data: Bytes,
    /// This entry's append id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Append only if this entry's primary tag's stream satisfies this
    /// (counting the batch's earlier entries): a version number, or one of
    /// the strings `"any"`, `"no_stream"`, `"stream_exists"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<ExpectedWire>,
}

/// A condition on a stream's next version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// The stream (the first entry's primary tag).
    pub tag: String,
    /// The version its next entry must get.
    pub next_version: u64,
}

/// The answer to an append.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendReply {
    /// The first entry's seqnum.
    pub seqnum: u64,
    /// The first entry's stream version.
    pub stream_version: u64,
    /// The first entry's timestamp.
    pub timestamp_ms: u64,
    /// How many entries the request held.
    pub count: usize,
    /// One result per entry, in request order (an entry whose id was
    /// already in the log answers with its original).
    pub results: Vec<Appended>,
}

/// One appended entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appended {
    /// Its seqnum.
    pub seqnum: u64,
    /// Its version in its primary tag.
    pub stream_version: u64,
    /// Its primary tag.
    pub primary_tag: String,
    /// Its timestamp.
    pub timestamp_ms: u64,
}

impl From<&AppendResult> for Appended {
    fn from(r: &AppendResult) -> Self {
        Appended {
            seqnum: r.seqnum,
            stream_version: r.stream_version,
            primary_tag: r.primary_tag.to_string(),
            timestamp_ms: r.timestamp_ms,
        }
    }
}

impl Appended {
    /// The [`AppendResult`] this describes.
    ///
    /// Errors: `InvalidInput` for a malformed tag.
    pub fn into_result(self) -> Result<AppendResult> {
        Ok(AppendResult {
            seqnum: self.seqnum,
            stream_version: self.stream_version,
            primary_tag: self.primary_tag.parse()?,
            timestamp_ms: self.timestamp_ms,
        })
    }
}

impl AppendReply {
    /// The answer for `results` (at least one).
    ///
    /// Errors: `Internal` for no result.
    pub fn of(results: &[AppendResult]) -> Result<Self> {
        let first = results
            .first()
            .ok_or_else(|| Error::internal("an append answered with no result"))?;
        Ok(AppendReply {
            seqnum: first.seqnum,
            stream_version: first.stream_version,
            timestamp_ms: first.timestamp_ms,
            count: results.len(),
            results: results.iter().map(Appended::from).collect(),
        })
    }
}

/// `GET /v1/entries`: a page of the log (or of one tag, with `tag=`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntriesPage {
    /// The entries, in seqnum order.
    pub entries: Vec<Entry>,
    /// The seqnum to ask for next.
    pub next: u64,
    /// True when the server cut the page short (its page limits) before
    /// the end: ask again from `next`.
    #[serde(default)]
    pub more: bool,
}

/// `GET /v1/streams/{tag}/entries`: a page of one stream by version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionsPage {
    /// The entries, in version order.
    pub entries: Vec<Entry>,
    /// The version to ask for next.
    pub next_version: u64,
    /// True when the server cut the page short: ask again.
    #[serde(default)]
    pub more: bool,
}

/// `GET /v1/entries/prev`: the last entry before a seqnum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrevEntry {
    /// The entry, if there is one.
    pub entry: Option<Entry>,
}

/// One stream (tag).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stream {
    /// The tag.
    pub tag: String,
    /// The version its next entry gets (0 for a tag never used as a
    /// primary tag); trimmed entries included.
    pub next_version: u64,
    /// Live entries carrying the tag, as primary or secondary tag.
    pub entries: u64,
}

/// `GET /v1/streams`: a page of streams, in the storage seam's stream
/// order (`weft::storage::stream_order`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamsPage {
    /// The streams.
    pub streams: Vec<Stream>,
    /// The tag to pass as `after` for the next page.
    pub next: Option<String>,
}

/// `GET /v1/tip`: the live range of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tip {
    /// The first readable seqnum.
    pub first: u64,
    /// The seqnum the next entry gets.
    pub next: u64,
}

/// `POST /v1/trim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trim {
    /// Drop every entry with a seqnum up to and including this.
    pub through: u64,
}

/// The answer of `POST /v1/streams/{tag}/erase`: the payloads of the
/// entries the stream's start hides are erased for good.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Erased {
    /// The stream, as text.
    pub tag: String,
    /// How many entries this request erased (entries erased before are
    /// not counted again).
    pub erased: u64,
}

/// `GET /v1/status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// `dir`, `memory`, `s3`, `az` or `postgres`.
    pub backend: String,
    /// `leader` (takes appends) or `follower` (serves reads).
    pub role: String,
    /// The seqnum the next entry gets.
    pub tip: u64,
    /// The first readable seqnum.
    pub first: u64,
    /// The writer lease of a bucket log, when there is one.
    pub lease: Option<Lease>,
    /// The server's version.
    pub version: String,
    /// Entries appended through this server since it started.
    pub appends_total: u64,
    /// What the backend can do.
    pub capabilities: Capabilities,
    /// Where the leader is, when this server is a follower that knows.
    #[serde(default)]
    pub leader: Option<String>,
}

/// A bucket log's writer lease, as the server knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Who holds it (the writer's name).
    pub holder: Option<String>,
    /// This server holds it.
    pub held_here: bool,
}

/// [`weft::storage::Capabilities`] on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Writes are refused (a follower).
    pub read_only: bool,
    /// Entries survive a restart of the server.
    pub durable: bool,
    /// The largest payload accepted, in bytes.
    pub max_entry_bytes: usize,
    /// Append ids are honoured.
    pub append_ids: bool,
    /// Per-view KV is available.
    pub kv: bool,
}

/// `GET /v1/kv/{scope}/{key}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvValue {
    /// The value; `null` when the key is absent.
    #[serde(default, with = "crate::b64::option")]
    pub data: Option<Bytes>,
}

/// `POST /v1/kv/{scope}/{key}/cas`: compare-and-set (also set-if-absent
/// and delete-if, with a `null` on either side).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvCas {
    /// The value the key must hold (`null`: absent).
    #[serde(default, with = "crate::b64::option")]
    pub expected: Option<Bytes>,
    /// The value to write (`null`: delete).
    #[serde(default, with = "crate::b64::option")]
    pub data: Option<Bytes>,
}

/// The answer to a compare-and-set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvWritten {
    /// True when it wrote.
    pub written: bool,
}

/// `POST /v1/kv/{scope}/{key}/increment`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvIncrement {
    /// What to add.
    pub delta: i64,
}

/// The answer to an increment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvCounter {
    /// The counter's new value.
    pub value: i64,
}

/// One answer on the pipelined append session (`GET /v1/session`, a
/// WebSocket): each text message the client sends is an [`AppendBody`],
/// and each is answered, in the order sent, by one of these.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionAnswer {
    /// The append succeeded.
    Ok(AppendReply),
    /// It failed; the error as every route reports it.
    Error(crate::fault::Fault),
}
