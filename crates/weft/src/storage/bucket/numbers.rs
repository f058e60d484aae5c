//! A bucket log's numbers — which seqnums carry each tag, which seqnum
//! holds each version of a stream — in memory, or in the persistent log
//! index ([`crate::index`]) in a cache directory.
//!
//! In memory ([`MemoryIndex`]) they cost a few dozen bytes per entry and are
//! rebuilt from the bucket on every open. In a cache directory they cost
//! disk, memory stays within the index's configured caches whatever the
//! log's length, and a writer or follower that reopens on the directory
//! reads only what was committed since it last recorded (the index's
//! covered point). The index is derived state: one of another log, damaged,
//! or inconsistent with the log (its recorded tip does not match the entry
//! in the bucket, or it covers more than the log holds) is rebuilt.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::index::{Index, IndexEntry, IndexOptions};
use crate::model::{LogEntry, LogTag};
use crate::storage::kit::MemoryIndex;
pub(crate) use crate::storage::kit::{FillWatch, Floors, IndexVersions};
use crate::storage::kit::{MemoryVersions, VersionTable};

/// One entry's numbers, and the check value the index records for it.
#[derive(Clone, Debug)]
pub(crate) struct EntryNumbers {
    pub(crate) seqnum: u64,
    pub(crate) tags: Vec<LogTag>,
    pub(crate) version: u64,
    pub(crate) check: u64,
}

impl EntryNumbers {
    pub(crate) fn of(e: &LogEntry) -> Self {
        EntryNumbers {
            seqnum: e.seqnum,
            tags: e.tags.clone(),
            version: e.stream_version,
            check: check_of(e),
        }
    }

    pub(crate) fn of_all(batch: &[LogEntry]) -> Vec<Self> {
        batch.iter().map(EntryNumbers::of).collect()
    }
}

/// Where a log's numbers live.
#[derive(Debug)]
pub(crate) enum Numbers {
    /// In memory, rebuilt on open.
    Memory(MemoryIndex),
    /// In the persistent index of a cache directory, and the directory's
    /// lock.
    Disk(Arc<Index>, Arc<CacheDir>),
}

/// The value the index records for an entry, to tell later whether the
/// bucket still holds the same log: a CRC-32C of its numbers and payload.
pub(crate) fn check_of(e: &LogEntry) -> u64 {
    let mut crc = crc32c::crc32c(&e.seqnum.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &e.stream_version.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &e.timestamp_ms.to_le_bytes());
    u64::from(crc32c::crc32c_append(crc, &e.data))
}

impl Numbers {
    /// The first live seqnum.
    pub(crate) fn first(&self) -> u64 {
        match self {
            Numbers::Memory(i) => i.first(),
            Numbers::Disk(i, _) => i.first(),
        }
    }

    /// The seqnum after the last entry recorded.
    pub(crate) fn next(&self) -> u64 {
        match self {
            Numbers::Memory(i) => i.next(),
            Numbers::Disk(i, _) => i.next(),
        }
    }

    /// Records entries that continue the log.
    ///
    /// Errors: `Corrupt` for an entry out of order; the index's I/O kinds.
    pub(crate) fn push(&mut self, batch: &[EntryNumbers]) -> Result<()> {
        match self {
            Numbers::Memory(i) => {
                for e in batch {
                    i.insert(e.seqnum, &e.tags, e.version)?;
                }
                Ok(())
            }
            Numbers::Disk(i, _) => {
                let entries: Vec<IndexEntry> = batch
                    .iter()
                    .map(|e| IndexEntry {
                        seqnum: e.seqnum,
                        tags: e.tags.as_slice().into(),
                        version: e.version,
                        locator: None,
                        check: e.check,
                    })
                    .collect();
                i.push(&entries)
            }
        }
    }

    /// Forgets every entry with seqnum `<= through`; `floors` are the
    /// version floors a trim stored (the index keeps its own for streams it
    /// has rows for).
    ///
    /// Errors: the index's I/O kinds.
    pub(crate) fn trim(&mut self, through: u64, floors: &[(LogTag, u64)]) -> Result<()> {
        match self {
            Numbers::Memory(i) => {
                i.trim(through);
                Ok(())
            }
            Numbers::Disk(i, _) => i.trim(through.saturating_add(1), floors),
        }
    }

    pub(crate) fn seqnums(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<u64>> {
        match self {
            Numbers::Memory(i) => i.seqnums(tag, from, max),
            Numbers::Disk(i, _) => {
                if from < i.first() {
                    return Err(Error::trimmed(from, i.first()));
                }
                i.seqnums(tag, from, max)
            }
        }
    }

    pub(crate) fn version_seqnums(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<u64>> {
        match self {
            Numbers::Memory(i) => i.version_seqnums(tag, from_version, max),
            Numbers::Disk(i, _) => i.version_seqnums(tag, from_version, max),
        }
    }

    pub(crate) fn prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<u64>> {
        match self {
            Numbers::Memory(i) => Ok(i.prev(tag, before)),
            Numbers::Disk(i, _) => i.prev(tag, before),
        }
    }

    /// See [`Storage::streams`](crate::Storage::streams).
    pub(crate) fn streams(
        &self,
        from: Option<&LogTag>,
        max: usize,
    ) -> Result<Vec<crate::storage::StreamInfo>> {
        match self {
            Numbers::Memory(i) => Ok(i.streams(from, max)),
            Numbers::Disk(i, _) => i.streams(from, max),
        }
    }

    pub(crate) fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        match self {
            Numbers::Memory(i) => Ok(i.latest_version(tag)),
            Numbers::Disk(i, _) => Ok(i.next_version(tag)?.checked_sub(1)),
        }
    }

    /// The seqnum of the last entry of stream `tag`, whose next version is
    /// `next` (> 0), or [`TRIMMED`] when that entry was trimmed away.
    ///
    /// Errors: `Corrupt` when the numbers do not hold that version; the
    /// index's I/O kinds.
    ///
    /// [`TRIMMED`]: crate::format::state_checkpoint::TRIMMED
    pub(crate) fn last_seqnum(&self, tag: &LogTag, next: u64) -> Result<u64> {
        let Some(version) = next.checked_sub(1) else {
            return Err(Error::corrupt(format!(
                "stream {tag} has a row but no entry"
            )));
        };
        match self.version_seqnums(tag, version, 1) {
            Ok(found) => found.first().copied().ok_or_else(|| {
                Error::corrupt(format!(
                    "the numbers have no seqnum for version {version} of stream {tag}"
                ))
            }),
            Err(e) if e.kind() == crate::ErrorKind::Trimmed => {
                Ok(crate::format::state_checkpoint::TRIMMED)
            }
            Err(e) => Err(e),
        }
    }

    /// Checks a state checkpoint's `floors` against these numbers, which
    /// must cover exactly the log up to the checkpoint's entry: every
    /// stream the checkpoint names continues at the version it says, and
    /// it leaves no stream out.
    ///
    /// Errors: `Corrupt` naming the first stream that differs; the index's
    /// I/O kinds.
    pub(crate) fn check_floors(&self, floors: &Floors) -> Result<()> {
        for (tag, floor) in floors.iter() {
            let have = self.latest_version(tag)?.map_or(0, |v| v + 1);
            if have != *floor {
                return Err(Error::corrupt(format!(
                    "the state checkpoint this writer opened from says stream {tag} continues \
                     at version {floor}, the log up to it says {have}"
                )));
            }
        }
        let known = match self {
            Numbers::Memory(i) => i.next_versions_through(u64::MAX),
            Numbers::Disk(i, _) => i.tags(usize::MAX)?,
        };
        if let Some((tag, next)) = known
            .into_iter()
            .find(|(tag, next)| *next > 0 && !floors.contains_key(tag))
        {
            return Err(Error::corrupt(format!(
                "the state checkpoint this writer opened from leaves out stream {tag}, which \
                 continues at version {next} in the log up to it"
            )));
        }
        Ok(())
    }

    /// The version floors a trim through `through` must store: every
    /// primary tag's next version as of `through` (memory), or those of
    /// the streams no live entry will carry on (index).
    ///
    /// Errors: the index's I/O kinds.
    pub(crate) fn floors_through(&self, through: u64) -> Result<Vec<(LogTag, u64)>> {
        match self {
            Numbers::Memory(i) => Ok(i.next_versions_through(through)),
            Numbers::Disk(i, _) => i.streams_ending_by(through),
        }
    }
}

/// A cache directory held by one handle until dropped: an OS advisory lock
/// (`flock`) on `<dir>/LOCK`, released by the OS if the process dies.
#[derive(Debug)]
pub(crate) struct CacheDir {
    path: std::path::PathBuf,
    _lock: std::fs::File,
    /// A handle's private directory, removed when it is dropped (after
    /// the lock: fields drop in order).
    temporary: Option<tempfile::TempDir>,
}

impl CacheDir {
    /// The directory a handle uses: `path`, or without one (and unless the
    /// numbers are to stay in memory) a private temporary directory, so
    /// that memory does not grow with the log whatever the options.
    ///
    /// Errors: as [`CacheDir::acquire`]; I/O kinds when no temporary
    /// directory can be made.
    pub(crate) fn for_handle(path: Option<&Path>, in_memory: bool) -> Result<Option<CacheDir>> {
        match (path, in_memory) {
            (Some(p), _) => CacheDir::acquire(p).map(Some),
            (None, true) => Ok(None),
            (None, false) => CacheDir::temporary().map(Some),
        }
    }

    /// True for a handle's private temporary directory.
    pub(crate) fn is_temporary(&self) -> bool {
        self.temporary.is_some()
    }

    /// A private directory under the system's temporary directory, removed
    /// when dropped (a process that dies leaves it behind: `weft-index-*`).
    ///
    /// Errors: I/O kinds.
    pub(crate) fn temporary() -> Result<CacheDir> {
        let dir = tempfile::Builder::new()
            .prefix("weft-index-")
            .tempdir()
            .map_err(|e| Error::io("create a temporary index directory", e))?;
        let mut held = CacheDir::acquire(dir.path())?;
        held.temporary = Some(dir);
        Ok(held)
    }

    /// Takes the directory `path` (created if absent) without waiting.
    ///
    /// Errors: `Locked` when another handle (in this process or another)
    /// uses it; I/O kinds when it cannot be used.
    pub(crate) fn acquire(path: &Path) -> Result<CacheDir> {
        use fs4::fs_std::FileExt;
        std::fs::create_dir_all(path)
            .map_err(|e| Error::io(format!("create the cache directory {}", path.display()), e))?;
        let lock = path.join("LOCK");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)
            .map_err(|e| Error::io(format!("open lock file {}", lock.display()), e))?;
        let locked = file
            .try_lock_exclusive()
            .map_err(|e| Error::io(format!("lock {}", lock.display()), e))?;
        if !locked {
            return Err(Error::new(
                crate::ErrorKind::Locked,
                format!(
                    "the cache directory {} is in use by another writer or follower",
                    path.display()
                ),
            ));
        }
        Ok(CacheDir {
            path: path.to_path_buf(),
            _lock: file,
            temporary: None,
        })
    }

    /// Opens the persistent index in the directory for the log `identity`
    /// names.
    ///
    /// Errors: `InvalidInput` for bad options; I/O kinds.
    pub(crate) fn open_index(&self, identity: &str, options: IndexOptions) -> Result<Index> {
        Index::open(&self.path.join("index"), identity.as_bytes(), options)
    }
}

/// A writer's stream versions: all in memory, or over the index.
#[derive(Debug)]
pub(crate) enum WriterVersions {
    Memory(MemoryVersions),
    Index(IndexVersions),
}

impl VersionTable for WriterVersions {
    fn next_version(&mut self, tag: &LogTag) -> Result<Option<u64>> {
        match self {
            WriterVersions::Memory(m) => m.next_version(tag),
            WriterVersions::Index(i) => i.next_version(tag),
        }
    }

    fn set_next_version(&mut self, tag: &LogTag, next: u64) -> Result<()> {
        match self {
            WriterVersions::Memory(m) => m.set_next_version(tag, next),
            WriterVersions::Index(i) => i.set_next_version(tag, next),
        }
    }
}

/// Bytes naming a log for its index: the manifest's path. (Not the store:
/// the same bucket reached through another wrapper is the same log. Two
/// logs at the same path in different buckets are told apart by the tip
/// check instead.)
pub(crate) fn identity(manifest: &str) -> String {
    format!("weft bucket log\n{manifest}")
}
