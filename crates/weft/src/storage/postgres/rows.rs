//! Decoding rows of the `entries` table.

use bytes::Bytes;
use tokio_postgres::Row;

use crate::error::{Error, Result};
use crate::model::{LogEntry, LogTag};

/// A non-negative `bigint` as `u64`.
///
/// Errors: `Corrupt` for a negative value (the layout never stores one).
pub(super) fn u64_of(value: i64, what: &str) -> Result<u64> {
    u64::try_from(value).map_err(|_| Error::corrupt(format!("{what} is negative: {value}")))
}

/// A `u64` as a `bigint` parameter.
///
/// Errors: `InvalidInput` above `i64::MAX` (no seqnum or version gets there).
pub(super) fn i64_of(value: u64, what: &str) -> Result<i64> {
    i64::try_from(value)
        .map_err(|_| Error::invalid_input(format!("{what} {value} is beyond the log's range")))
}

/// An entry from a row whose columns `at..at + 6` are `seqnum, version,
/// tags, data, ts, append_id`; `None` when `seqnum` is NULL (an outer join found no
/// entry).
///
/// Errors: `Corrupt` when a stored value is out of range or a tag does not
/// parse.
pub(super) fn entry_at(row: &Row, at: usize) -> Result<Option<LogEntry>> {
    let Some(seqnum) = row.get::<_, Option<i64>>(at) else {
        return Ok(None);
    };
    let seqnum = u64_of(seqnum, "seqnum")?;
    let version = u64_of(row.get(at + 1), "version")?;
    let tags: Vec<String> = row.get(at + 2);
    let tags = tags
        .iter()
        .map(|t| {
            t.parse::<LogTag>()
                .map_err(|e| Error::corrupt(format!("entry {seqnum} has a bad tag {t:?}: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    if tags.is_empty() {
        return Err(Error::corrupt(format!("entry {seqnum} has no tag")));
    }
    let data: Vec<u8> = row.get(at + 3);
    let timestamp_ms = u64_of(row.get(at + 4), "timestamp")?;
    let append_id: Option<String> = row.get(at + 5);
    Ok(Some(LogEntry {
        seqnum,
        stream_version: version,
        tags,
        data: Bytes::from(data),
        timestamp_ms,
        append_id,
    }))
}
