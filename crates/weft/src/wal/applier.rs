//! Appliers: what a replica hands each committed record to.
//!
//! A replica delivers records at least once: after a crash, or after an
//! applier error, records since the last committed cursor arrive again.
//! **Apply must be idempotent** (an upsert or a delete keyed by the record
//! is; an unconditional counter increment is not).
//!
//! * [`Applier`] — the trait: `apply` each record, optionally `restore` a
//!   base snapshot.
//! * [`FnApplier`] — a closure.
//! * [`TypedApplier`] — a decoder (bytes → your operation) and a handler
//!   (apply the operation), so decoding and handling fail separately.

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Error, Result};

/// One committed record as a replica delivers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The sequence of the manifest entry (segment) holding the record.
    pub entry_sequence: u64,
    /// The record's index within its segment.
    pub index: u32,
    /// The record's own sequence, where the manifest numbers records (v3/v4:
    /// `entry_sequence + index`); `None` for per-entry numbering (v1/v2).
    pub sequence: Option<u64>,
    /// The record's bytes.
    pub data: Bytes,
    /// The payload of the metadata item covering this record (the append
    /// group it came from), if the writer attached one.
    pub metadata: Option<Bytes>,
    /// The ingestion time of that append group, in ms since the Unix epoch.
    pub ingestion_ms: Option<i64>,
}

/// Receives committed records in log order.
#[async_trait]
pub trait Applier: Send {
    /// Applies one record. An error stops the replica's step at this record;
    /// the next step retries from it.
    async fn apply(&mut self, record: &Record) -> Result<()>;

    /// Replaces the applier's state by a base snapshot covering everything
    /// through `through_seq`. Called before any record when a replica with
    /// no cursor finds a snapshot in the manifest.
    ///
    /// Errors: the default refuses with `Unsupported`; a replica then cannot
    /// bootstrap from a snapshot.
    async fn restore(&mut self, snapshot: Bytes, through_seq: u64) -> Result<()> {
        let _ = (snapshot, through_seq);
        Err(Error::unsupported(
            "this applier cannot restore a snapshot; implement Applier::restore",
        ))
    }
}

/// An applier made of a closure.
pub struct FnApplier<F>(pub F);

impl<F> FnApplier<F>
where
    F: FnMut(&Record) -> Result<()> + Send,
{
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        FnApplier(f)
    }
}

#[async_trait]
impl<F> Applier for FnApplier<F>
where
    F: FnMut(&Record) -> Result<()> + Send,
{
    async fn apply(&mut self, record: &Record) -> Result<()> {
        (self.0)(record)
    }
}

/// An applier split into a decoder and a handler.
pub struct TypedApplier<D, H> {
    decode: D,
    handle: H,
}

impl<T, D, H> TypedApplier<D, H>
where
    D: Fn(&[u8]) -> Result<T> + Send,
    H: FnMut(&Record, T) -> Result<()> + Send,
{
    /// An applier that decodes each record with `decode` and hands the
    /// value to `handle`.
    pub fn new(decode: D, handle: H) -> Self {
        TypedApplier { decode, handle }
    }
}

#[async_trait]
impl<T, D, H> Applier for TypedApplier<D, H>
where
    T: Send,
    D: Fn(&[u8]) -> Result<T> + Send,
    H: FnMut(&Record, T) -> Result<()> + Send,
{
    async fn apply(&mut self, record: &Record) -> Result<()> {
        let value = (self.decode)(&record.data).map_err(|e| {
            e.context(format!(
                "decoding record {} of entry {}",
                record.index, record.entry_sequence
            ))
        })?;
        (self.handle)(record, value)
    }
}
