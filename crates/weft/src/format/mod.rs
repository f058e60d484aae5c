//! Wire formats: pure encode/decode, no I/O. Every decoder returns an error
//! on malformed input and never panics.
//!
//! * [`segment`] — segment objects (v1 = upstream "batch v1", v2 adds a
//!   CRC-32C): a block of length-prefixed records and a small footer.
//! * [`manifest`] — manifest objects v1 to v5: entries, an optional
//!   snapshot block, and a footer carrying the epoch and next sequence
//!   (v5: and the frontier of the history tree).
//! * [`history`] — the immutable pages a v5 manifest moves its older
//!   entries into, and the pointers that name them.
//! * [`frame`] — the checksummed entry frame of the `dir` backend's
//!   segment files (also the record layout of bucket segments).
//! * [`index_rows`] — keys and values of the persistent log index's rows.
//! * [`log_state`] — the shared log's numbering state at a trim point, the
//!   base snapshot a bucket log stores when it trims.
//! * [`state_checkpoint`] — every stream's next version as of a seqnum,
//!   which a bucket log's writer stores now and then so that a writer with
//!   no local state opens without reading the whole log.
//! * [`bucket_kv`] — one key of a bucket log's KV, with the writer tokens
//!   that make its compare-and-set outcome exact.
//! * [`writer_lease`] — the object that names a bucket log's live writer.
//! * [`dir_segment`], [`trim_point`], [`dir_kv`] — the `dir` backend's
//!   segment header, trim file and KV bucket files.
//! * [`replica_cursor`] — a replica's saved cursor.
//!
//! Every decoder reads through one bounds-checked reader (`fields.rs`).
//!
//! Every byte layout is drawn in `docs/FORMATS.md`. Decoders report bad
//! bytes as [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt); encoders
//! report values that cannot be represented as
//! [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput).

pub mod bucket_kv;
pub mod dir_kv;
pub mod dir_segment;
pub(crate) mod fields;
pub mod frame;
pub mod history;
pub(crate) mod history_block;
pub mod index_rows;
pub mod log_state;
pub mod manifest;
pub mod replica_cursor;
pub mod segment;
pub mod state_checkpoint;
pub mod trim_point;
pub mod writer_lease;

pub use bucket_kv::{
    KvObject, MAX_WRITERS, WRITER_TOKEN_LEN, WriterToken, decode_kv_object, encode_kv_object,
};
pub use history::{
    History, HistoryPage, MAX_LEVELS, PageItems, PagePointer, decode_page, encode_page,
};
pub use log_state::{LogState, decode_log_state, encode_log_state};
pub use manifest::{
    MANIFEST_FOOTER_LEN, MANIFEST_V4_FOOTER_LEN, ManifestData, ManifestEntry, ManifestFooter,
    ManifestVersion, Metadata, SNAPSHOT_BLOCK_FIXED_LEN, SnapshotPointer, check_snapshot,
    decode_manifest, encode_entry, encode_manifest, encode_trailer, encode_trailer_with_history,
    read_manifest_footer, trailer_len, trailer_len_with_history,
};
pub use segment::{
    Compression, DEFAULT_MAX_BLOCK_LEN, DecodedSegment, SEGMENT_V1_FOOTER_LEN,
    SEGMENT_V2_FOOTER_LEN, SegmentBuilder, SegmentInfo, SegmentVersion, ZSTD_LEVEL, decode_segment,
    decode_segment_with_limit, encode_segment, inspect_segment,
};
pub use state_checkpoint::{StateCheckpoint, decode_state_checkpoint, encode_state_checkpoint};
pub use writer_lease::{WriterLease, decode_lease, encode_lease};
