//! Log entries as WAL records, and reassembling committed batches.

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::format::frame;
use crate::model::LogEntry;
use crate::wal::Record;

/// Frames a batch as records: one frame per entry, the last one marked as
/// the end of the batch, each carrying the append id at its position in
/// `ids` (which may be empty: no ids).
pub(super) fn encode_batch(entries: &[LogEntry], ids: &[Option<String>]) -> Result<Vec<Bytes>> {
    let last = entries.len().saturating_sub(1);
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let id = ids.get(i).and_then(|id| id.as_deref());
            let mut buf = Vec::with_capacity(frame::encoded_len_with_id(&e.tags, id, e.data.len()));
            let offset = u32::try_from(i).map_err(|_| {
                Error::invalid_input("an append batch is limited to u32::MAX entries")
            })?;
            frame::encode_with_id(&mut buf, e, id, offset, i == last)?;
            Ok(Bytes::from(buf))
        })
        .collect()
}

/// A whole batch as its records held it: the entries, and the append id
/// of each (`None` for an entry without one).
#[derive(Debug)]
pub(super) struct Assembled {
    pub(super) entries: Vec<LogEntry>,
    pub(super) ids: Vec<Option<Box<str>>>,
}

/// Turns records back into whole batches, in order, dropping records that
/// were already applied (replicas deliver at least once).
#[derive(Debug)]
pub(super) struct BatchAssembler {
    /// The seqnum of the next entry to accept; `None` until the first
    /// record, whose seqnum starts the log (it may be above 0 once the log
    /// was trimmed).
    next: Option<u64>,
    pending: Vec<LogEntry>,
    pending_ids: Vec<Option<Box<str>>>,
}

impl BatchAssembler {
    /// An assembler that starts wherever the first record is.
    pub(super) fn new() -> Self {
        BatchAssembler {
            next: None,
            pending: Vec::new(),
            pending_ids: Vec::new(),
        }
    }

    /// An assembler for a log trimmed through `first - 1`, where that trim
    /// point may fall inside a batch: the first record must be entry
    /// `first`, and the batch it ends is delivered without its trimmed
    /// head.
    pub(super) fn starting_at(first: u64) -> Self {
        BatchAssembler {
            next: Some(first),
            pending: Vec::new(),
            pending_ids: Vec::new(),
        }
    }

    /// Takes one record; returns a batch when the record completes one.
    ///
    /// Errors: `Corrupt` when the record is not a valid frame, or its seqnum
    /// does not continue the log, or disagrees with the WAL's numbering.
    pub(super) fn push(&mut self, record: &Record) -> Result<Option<Vec<LogEntry>>> {
        Ok(self.push_with_ids(record)?.map(|b| b.entries))
    }

    /// [`push`](BatchAssembler::push), keeping the batch's append ids.
    ///
    /// Errors: as [`push`](BatchAssembler::push).
    pub(super) fn push_with_ids(&mut self, record: &Record) -> Result<Option<Assembled>> {
        let decoded = frame::decode(&record.data).map_err(|e| {
            Error::from(e).context(format!(
                "record {} of entry {}",
                record.index, record.entry_sequence
            ))
        })?;
        let seqnum = decoded.meta.seqnum;
        if let Some(wal_seq) = record.sequence
            && wal_seq != seqnum
        {
            return Err(Error::corrupt(format!(
                "record at WAL sequence {wal_seq} holds entry {seqnum}"
            )));
        }
        if self.next.is_none() {
            if decoded.meta.group_offset != 0 {
                return Err(Error::corrupt(format!(
                    "the log starts with entry {seqnum} in the middle of a batch"
                )));
            }
            self.next = Some(seqnum);
        }
        let next = self.next.unwrap_or(seqnum);
        let expected = next + self.pending.len() as u64;
        if seqnum < expected {
            // Re-delivery of something already applied.
            return Ok(None);
        }
        if seqnum > expected {
            return Err(Error::corrupt(format!(
                "entry {seqnum} arrived where {expected} was expected"
            )));
        }
        let batch_end = decoded.meta.batch_end;
        self.pending.push(decoded.to_entry());
        self.pending_ids.push(decoded.append_id.map(Box::from));
        if !batch_end {
            return Ok(None);
        }
        let entries = std::mem::take(&mut self.pending);
        let ids = std::mem::take(&mut self.pending_ids);
        self.next = Some(next + entries.len() as u64);
        Ok(Some(Assembled { entries, ids }))
    }
}
