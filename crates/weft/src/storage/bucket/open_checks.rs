//! What every bucket handle — writer, follower, tool — checks of a log it
//! opens: that the manifest is a weft log's, and that the log state a trim
//! stored as the WAL's snapshot is the one its pointer names. Shared here
//! so that the writer, the follower and the catch-up they share need not
//! reach into each other.

use crate::error::{Error, Result};
use crate::format::{LogState, ManifestData, decode_log_state};

/// A weft log's manifest numbers records (v3/v4) and every entry has
/// records; segment-numbered entries (v1/v2, or legacy entries of a
/// converted v1/v2 manifest) mean a WAL some other writer keeps.
pub(super) fn check_weft_log(path: &object_store::path::Path, m: &ManifestData) -> Result<()> {
    if m.version.has_record_counts() && m.entries.iter().all(|e| e.count.is_some_and(|c| c > 0)) {
        return Ok(());
    }
    Err(Error::invalid_input(format!(
        "{path} is a {:?} manifest with segment-numbered entries, not a weft log \
         (which numbers records: v3 or v4)",
        m.version
    )))
}

/// Decodes the log state a trim stored as the WAL's snapshot.
///
/// Errors: `Corrupt` when the snapshot is not a log state, or covers
/// another trim point than the manifest's pointer says.
pub(super) fn decode_trim_state(snapshot: &[u8], through_seq: u64) -> Result<LogState> {
    let state = decode_log_state(snapshot)
        .map_err(|e| e.context("the bucket log's snapshot is not a weft log state"))?;
    if state.through != through_seq {
        return Err(Error::corrupt(format!(
            "the snapshot pointer says through {through_seq}, its log state says {}",
            state.through
        )));
    }
    Ok(state)
}
