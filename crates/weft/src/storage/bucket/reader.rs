//! Entries of a bucket log read on demand, by seqnum, through bounded
//! caches.
//!
//! The writer and followers do not keep the log in memory: an entry is
//! found through the manifest (its own entries, then its history pages,
//! see [`crate::wal::history`]) and read from its segment object. Decoded
//! segments and history pages are kept in byte-bounded LRU caches, so
//! memory stays within a budget however long the log, and a run of reads
//! through one segment costs one GET.
//!
//! A segment can be gone when a truncation made it garbage after the
//! reader's copy of the manifest was taken: the reader then reads the
//! manifest again and answers `Trimmed` when the entry is no longer live,
//! `Corrupt` when the fresh manifest still names the missing object.

use std::sync::{Arc, RwLock};

use object_store::ObjectStore;
use object_store::path::Path;

use crate::error::{Error, ErrorKind, Result};
use crate::format::frame;
use crate::format::manifest::{ManifestData, ManifestEntry, decode_manifest};
use crate::format::segment::{DecodedSegment, decode_segment};
use crate::lru::ByteLru;
use crate::model::LogEntry;
use crate::objects::read_whole;
use crate::wal::HistoryReader;

/// Reads entries by seqnum from a bucket log's segments.
#[derive(Debug)]
pub(crate) struct BucketReader {
    store: Arc<dyn ObjectStore>,
    manifest_path: Path,
    history: HistoryReader,
    segments: ByteLru<String, DecodedSegment>,
    manifest: RwLock<Arc<ManifestData>>,
}

/// How many manifest entries one lookup asks the history for.
const LOOKUP_ENTRIES: usize = 64;

impl BucketReader {
    /// A reader of the log whose manifest is at `manifest_path`, caching up
    /// to `page_bytes` of history pages and `segment_bytes` of segments.
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        manifest_path: Path,
        manifest: Arc<ManifestData>,
        page_bytes: usize,
        segment_bytes: usize,
    ) -> Self {
        BucketReader {
            history: HistoryReader::new(store.clone(), page_bytes),
            store,
            manifest_path,
            segments: ByteLru::new(segment_bytes),
            manifest: RwLock::new(manifest),
        }
    }

    /// The manifest copy reads are planned on.
    pub(crate) fn manifest(&self) -> Arc<ManifestData> {
        self.manifest
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Plans later reads on `manifest` (a newer copy: the owner's commit or
    /// poll saw it).
    pub(crate) fn set_manifest(&self, manifest: Arc<ManifestData>) {
        *self.manifest.write().unwrap_or_else(|p| p.into_inner()) = manifest;
    }

    /// Bytes the caches hold now.
    pub(crate) fn cached_bytes(&self) -> usize {
        self.segments.bytes() + self.history.cached_bytes()
    }

    /// The entries with these seqnums (ascending, committed), in order.
    ///
    /// Errors: `Trimmed` when one is below the first live seqnum;
    /// `Corrupt` for damaged objects or a manifest naming a missing one;
    /// store errors.
    pub(crate) async fn read_seqnums(&self, seqnums: &[u64]) -> Result<Vec<LogEntry>> {
        let mut out = Vec::with_capacity(seqnums.len());
        let mut located: Vec<ManifestEntry> = Vec::new();
        let mut held: Option<(String, Arc<DecodedSegment>)> = None;
        for &seq in seqnums {
            let entry = match located.iter().find(|e| e.contains(seq)) {
                Some(e) => e.clone(),
                None => {
                    located = self.locate(seq).await?;
                    match located.first() {
                        Some(e) => e.clone(),
                        None => {
                            return Err(Error::corrupt(format!(
                                "no manifest entry holds committed seqnum {seq}"
                            )));
                        }
                    }
                }
            };
            let segment = match &held {
                Some((loc, s)) if *loc == entry.location => s.clone(),
                _ => {
                    let s = match self.segment(&entry.location).await {
                        Ok(s) => s,
                        Err(err) if err.kind() == ErrorKind::NotFound => {
                            return Err(self.missing(seq, &entry, err).await);
                        }
                        Err(err) => return Err(err),
                    };
                    held = Some((entry.location.clone(), s.clone()));
                    s
                }
            };
            let i = (seq - entry.sequence) as usize;
            let record = segment.records.get(i).ok_or_else(|| {
                Error::corrupt(format!(
                    "segment {} holds {} records; the manifest puts seqnum {seq} at {i}",
                    entry.location,
                    segment.records.len()
                ))
            })?;
            let f = frame::decode(record).map_err(|err| {
                Error::from(err).context(format!("record {i} of segment {}", entry.location))
            })?;
            if f.meta.seqnum != seq {
                return Err(Error::corrupt(format!(
                    "segment {} record {i} holds entry {}, the manifest says {seq}",
                    entry.location, f.meta.seqnum
                )));
            }
            out.push(f.to_entry());
        }
        Ok(out)
    }

    /// The manifest entries holding `seqnums` (ascending, committed), each
    /// with the seqnums it holds; seqnums below the first live one are
    /// left out.
    ///
    /// Errors: as [`Self::read_seqnums`].
    pub(crate) async fn segments_of(
        &self,
        seqnums: &[u64],
    ) -> Result<Vec<(ManifestEntry, Vec<u64>)>> {
        let mut out: Vec<(ManifestEntry, Vec<u64>)> = Vec::new();
        let mut located: Vec<ManifestEntry> = Vec::new();
        for &seq in seqnums {
            if let Some((entry, list)) = out.last_mut()
                && entry.contains(seq)
            {
                list.push(seq);
                continue;
            }
            let entry = match located.iter().find(|e| e.contains(seq)) {
                Some(e) => e.clone(),
                None => {
                    located = match self.locate(seq).await {
                        Ok(found) => found,
                        Err(e) if e.kind() == ErrorKind::Trimmed => continue,
                        Err(e) => return Err(e),
                    };
                    located.first().cloned().ok_or_else(|| {
                        Error::corrupt(format!("no manifest entry holds committed seqnum {seq}"))
                    })?
                }
            };
            out.push((entry, vec![seq]));
        }
        Ok(out)
    }

    /// Drops the cached copy of the segment at `location` (its object was
    /// rewritten).
    pub(crate) fn forget_segment(&self, location: &str) {
        self.segments.remove(&location.to_owned());
    }

    /// The manifest entries from the one holding `seq`, checked against the    /// The manifest entries from the one holding `seq`, checked against the
    /// first live seqnum.
    async fn locate(&self, seq: u64) -> Result<Vec<ManifestEntry>> {
        let mut m = self.manifest();
        if seq >= m.next_sequence {
            // Committed after this copy was taken.
            m = self.reload().await?;
        }
        let first = m.first_sequence();
        if seq < first {
            return Err(Error::trimmed(seq, first));
        }
        let found = self
            .history
            .entries_from(m.history.as_ref(), &m.entries, seq, LOOKUP_ENTRIES)
            .await;
        match found {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                // A page collected after a truncation this copy predates.
                let fresh = self.reload().await?;
                if seq < fresh.first_sequence() {
                    return Err(Error::trimmed(seq, fresh.first_sequence()));
                }
                Err(
                    Error::corrupt("the manifest names a history page that does not exist")
                        .with_source(e),
                )
            }
            Err(e) => Err(e),
            Ok(entries) => match entries.first() {
                Some(e) if e.record_range().is_none() => Err(Error::corrupt(format!(
                    "manifest entry {} does not number its records: not a weft log",
                    e.sequence
                ))),
                Some(e) if !e.contains(seq) => Err(Error::corrupt(format!(
                    "no manifest entry holds live seqnum {seq} (the next starts at {})",
                    e.sequence
                ))),
                _ => Ok(entries),
            },
        }
    }

    async fn segment(&self, location: &str) -> Result<Arc<DecodedSegment>> {
        let key = location.to_owned();
        if let Some(s) = self.segments.get(&key) {
            return Ok(s);
        }
        let bytes = read_whole(self.store.as_ref(), &Path::from(location)).await?;
        let len = bytes.len();
        let segment =
            Arc::new(decode_segment(bytes).map_err(|e| e.context(format!("segment {location}")))?);
        self.segments.insert(key, segment.clone(), len);
        Ok(segment)
    }

    async fn reload(&self) -> Result<Arc<ManifestData>> {
        let bytes = read_whole(self.store.as_ref(), &self.manifest_path).await?;
        let m = Arc::new(
            decode_manifest(&bytes)
                .map_err(|e| e.context(format!("manifest {}", self.manifest_path)))?,
        );
        let newer = m.next_sequence >= self.manifest().next_sequence;
        if newer {
            self.set_manifest(m.clone());
        }
        Ok(m)
    }

    /// The error for a segment that is gone when the manifest entry
    /// `entry` held `seq`: `Trimmed` if a trim dropped it, else `Corrupt`.
    pub(crate) async fn missing(&self, seq: u64, entry: &ManifestEntry, err: Error) -> Error {
        match self.reload().await {
            Ok(m) if seq < m.first_sequence() => Error::trimmed(seq, m.first_sequence()),
            Ok(_) => Error::corrupt(format!(
                "the manifest names segment {} (entry {}), which does not exist",
                entry.location, entry.sequence
            ))
            .with_source(err),
            Err(e) => e,
        }
    }
}
