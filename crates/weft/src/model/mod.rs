//! The value types of the log: tags, entries, requests, results, positions.
//!
//! Pure data with validation; no I/O.

mod entry;
mod expected;
mod filter;
mod stream;
mod tag;

pub(crate) use entry::check_entry;
pub use entry::{
    AppendRequest, AppendResult, LogEntry, MAX_APPEND_ID_BYTES, MAX_BATCH_BYTES, MAX_ENTRY_BYTES,
    MAX_TAGS_PER_ENTRY, Position,
};
pub use expected::Expected;
pub use filter::TagFilter;
pub use stream::{StreamInfo, stream_order};
pub use tag::{LogTag, MAX_TAG_PART_BYTES};
