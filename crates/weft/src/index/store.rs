//! The index's rows in an embedded store: fjall, a log-structured
//! key-value store.
//!
//! ## Why fjall
//!
//! Measured against redb 4.6 on the index's own workload
//! (`cargo bench -p weft --bench index_stores`; figures and the command in
//! BENCHMARKS.md). With a million entries, fjall recorded them 1.4× (1 k
//! streams) to 4.6× (1 M streams) faster — an LSM tree turns rows scattered
//! over many streams into sequential writes where a copy-on-write B-tree
//! rewrites a leaf page per stream touched — and took 2–4× less disk. It
//! checks a checksum on every block it reads: of 60 damaged copies of a
//! store (flipped bytes, truncated files, garbage), redb opened and
//! answered 8 with silently different data (all flipped bytes in its one
//! file), fjall 2 (a garbage journal, which it treats as torn and rolls
//! back: a consistent older state, which the witness rows below catch).
//! Neither panicked. redb's reads were 2–4× faster and it opened in
//! milliseconds, where fjall reads its active journal (up to 64 MB, the
//! size at which fjall starts a new one) on open: 0.5–2.8 s on the shared
//! test machine. That is the cost of this choice; it does not grow with
//! the log, and a release after a clean close (every row flushed into
//! table files) empties the journal, so only an open after a crash reads
//! one (`Store::release`).
//!
//! The store is configured so its memory stays inside the index's budget:
//! a bounded block cache, small memtables, a small journal.
//!
//! Keys and values are laid out in [`crate::format::index_rows`].

use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::tail::TailEntry;
use super::{FastMap, Fresh, IndexOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::format::index_rows::{
    CHUNK_MAX, FORMAT, TagRow, append_id_key, decode_chunk, decode_pair_key, decode_seqnum_key,
    decode_tag_key, decode_tip_value, decode_u64_value, encode_chunk, meta, pair_key, seqnum_key,
    tag_key, tip_value, u64_value,
};
use crate::model::LogTag;

/// How the write buffer budget is shared: the postings and versions
/// tables take most writes (a third each), the four others a twelfth each.
fn memtable_bytes(name: &str, write_buffer_bytes: usize) -> u64 {
    let share = match name {
        "postings" | "versions" => write_buffer_bytes / 3,
        _ => write_buffer_bytes / 12,
    };
    share.max(1 << 20) as u64
}

/// The journal size past which fjall flushes memtables (its minimum): a
/// crash replays at most this much on reopen.
const JOURNAL_BYTES: u64 = 64 << 20;

/// The subdirectory fjall keeps its files in.
pub(super) const STORE_DIR: &str = "store";

/// A file whose presence says a read found the store damaged: the next
/// open starts afresh.
const DAMAGED: &str = "DAMAGED";

/// The key of each keyspace's witness row: `[batch u64]`, the serial of
/// the batch that last wrote the keyspace's rows (every batch writes every
/// witness and takes a serial of its own). It sorts after every row key,
/// so no scan meets it. A keyspace whose witness disagrees with the meta
/// record lost rows (a file of it deleted or rolled back): the index is
/// damaged.
const WITNESS: [u8; 9] = [0xff; 9];

/// Past this much journal, the flusher has fjall write its in-memory
/// tables out, so an open after a crash has at most about this much to
/// apply (it still reads the active journal, up to 64 MB, through).
const JOURNAL_FLUSH_BYTES: u64 = 8 << 20;

/// Why [`Store::open_existing`] did not open a store.
enum Refused {
    /// Start afresh, for this reason.
    Fresh(Fresh),
    /// Another handle has it open (`Locked`).
    InUse(Error),
}

impl From<Fresh> for Refused {
    fn from(fresh: Fresh) -> Self {
        Refused::Fresh(fresh)
    }
}

/// How long a wait for fjall to write its memtables out (a close's, or the
/// flusher's at the write buffer bound) lasts with no flush landing.
const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Threads fjall uses for flushes and compactions: one. With more, fjall
/// 3.1's first worker hands every compaction request back to the queue
/// (to keep itself free for flushes) and takes it again while the other
/// workers are busy, spinning a core; one worker does both jobs in turn,
/// which the index's write rate leaves plenty of time for.
const WORKERS: usize = 1;

/// The store's view of where the index stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Meta {
    pub(super) covered: u64,
    pub(super) first: u64,
    pub(super) tip: Option<(u64, u64)>,
    pub(super) next_tag_id: u64,
}

/// Entries the flusher moves from the tail into the store in one batch.
pub(super) struct FlushBatch {
    /// `(seqnum, entry)`, consecutive.
    pub(super) entries: Vec<(u64, TailEntry)>,
}

/// Memory one tag row in the flusher's row cache takes: the tag (an `Arc`
/// of two strings, ~144 bytes once the entry that shared it is gone), the
/// row (32 bytes) and the map's slot.
const ROW_BYTES: usize = 192;

/// The flusher's tag rows (it is their only writer, so a batch does not
/// look every tag up in the store) take this share of the index's cache
/// budget; fjall's block cache the rest.
const ROW_CACHE_SHARE: usize = 8;

/// How many tag rows the flusher keeps for a cache budget of `cache_bytes`.
fn row_capacity(cache_bytes: usize) -> usize {
    (cache_bytes / ROW_CACHE_SHARE / ROW_BYTES).max(1024)
}

/// fjall's block cache for a cache budget of `cache_bytes`: what the row
/// cache leaves.
fn block_cache_bytes(cache_bytes: usize) -> u64 {
    cache_bytes.saturating_sub(row_capacity(cache_bytes) * ROW_BYTES) as u64
}

/// The bound on fjall's memtables, in the bytes fjall counts, for a write
/// buffer budget of `write_buffer_bytes`. fjall counts a row as its key,
/// its value and 64 bytes; in memory it is a skiplist node of about 96
/// bytes plus its key and value on the heap when longer than 20 bytes, so
/// the index's rows (16-byte pair keys with short chunks, tag keys of 20–
/// 70 bytes) take up to about 1.5 times what fjall counts.
fn counted_write_buffer_bytes(write_buffer_bytes: usize) -> u64 {
    (write_buffer_bytes / 3 * 2) as u64
}

/// The keyspaces of one index.
pub(super) struct Store {
    path: PathBuf,
    /// How many rows `rows` may hold.
    row_capacity: usize,
    /// The most memtable bytes (as fjall counts them) the store may hold,
    /// sealed or active; see [`Store::bound_write_buffers`].
    write_buffer_limit: u64,
    /// How many of the next [`Store::after_batch`] calls fail (tests).
    #[cfg(test)]
    pub(super) fail_after_batch: std::sync::atomic::AtomicU32,
    /// Tag rows as last committed; written only after a commit, by the
    /// writer of the rows, so it is never older than the store.
    rows: std::sync::Mutex<FastMap<LogTag, TagRow>>,
    /// Held by each batch from reading the meta and tag rows it builds on
    /// until its commit: a trim interleaved with a flush would otherwise
    /// write back tag rows and witnesses read before the flush committed.
    writer: std::sync::Mutex<()>,
    db: fjall::Database,
    meta: fjall::Keyspace,
    tags: fjall::Keyspace,
    postings: fjall::Keyspace,
    versions: fjall::Keyspace,
    locators: fjall::Keyspace,
    append_ids: fjall::Keyspace,
    /// Bytes of rows written since fjall last wrote its memtables out: what
    /// its journal holds beyond them. Counted here because fjall reports
    /// the journal's file size, which it preallocates to 64 MiB.
    journaled: std::sync::atomic::AtomicU64,
    /// Batches committed since the open (counted under the writer lock,
    /// before each commit).
    commits: std::sync::atomic::AtomicU64,
    /// The value of `commits` when [`Store::compact_journal`] last sealed
    /// the memtables and then saw every sealed one written into table
    /// files (`u64::MAX`: not since the open). Equal to `commits`: nothing
    /// lives in the journal alone; see [`Store::release`].
    flushed_through: std::sync::atomic::AtomicU64,
}

fn map_err(what: &str, e: fjall::Error) -> Error {
    let kind = match &e {
        fjall::Error::Io(io) => return Error::io(what, clone_io(io)),
        fjall::Error::Storage(fjall::LsmError::Io(io)) => return Error::io(what, clone_io(io)),
        fjall::Error::Locked => ErrorKind::Locked,
        fjall::Error::Poisoned | fjall::Error::KeyspaceDeleted => ErrorKind::Closed,
        _ => ErrorKind::Corrupt,
    };
    Error::new(kind, format!("{what}: {e}"))
}

fn clone_io(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}

const KEYSPACES: [&str; 6] = [
    "meta",
    "tags",
    "postings",
    "versions",
    "locators",
    "append_ids",
];

impl Store {
    /// Opens the store in `dir`, or creates an empty one there when there
    /// is none, it cannot be read, or it belongs to another log (removing
    /// what was there).
    pub(super) fn open_or_create(
        dir: &Path,
        identity: &[u8],
        options: &IndexOptions,
    ) -> Result<(Store, Option<Fresh>)> {
        let existed = dir
            .read_dir()
            .map(|mut d| d.next().is_some())
            .unwrap_or(false);
        let fresh = if existed {
            match Store::open_existing(dir, identity, options) {
                Ok(store) => return Ok((store, None)),
                // Another process has it open: not damage, and its files
                // must not be removed under it.
                Err(Refused::InUse(e)) => return Err(e),
                Err(Refused::Fresh(fresh)) => fresh,
            }
        } else {
            Fresh::Missing
        };
        if existed {
            tracing::warn!(dir = %dir.display(), reason = ?fresh, "discarding the log index");
            std::fs::remove_dir_all(dir)
                .map_err(|e| Error::io(format!("remove {}", dir.display()), e))?;
        }
        let store = Store::open_raw(dir, options)?;
        store.initialize(identity, 0, &[])?;
        Ok((store, Some(fresh)))
    }

    /// Opens the store in `dir` only if it is there and sound for the log
    /// `identity` (`None` when [`Store::open_or_create`] would start it
    /// afresh), removing and creating nothing.
    pub(super) fn open_if_sound(
        dir: &Path,
        identity: &[u8],
        options: &IndexOptions,
    ) -> Result<Option<Store>> {
        if !dir.join(STORE_DIR).is_dir() {
            return Ok(None);
        }
        match Store::open_existing(dir, identity, options) {
            Ok(store) => Ok(Some(store)),
            Err(Refused::InUse(e)) => Err(e),
            Err(Refused::Fresh(_)) => Ok(None),
        }
    }

    fn open_existing(
        dir: &Path,
        identity: &[u8],
        options: &IndexOptions,
    ) -> Result<Store, Refused> {
        if dir.join(DAMAGED).exists() {
            return Err(Fresh::Damaged("an earlier read found it damaged".into()).into());
        }
        // A damaged file must never take the process down: a store that
        // panics on it is treated like one that reports it.
        let opened = std::panic::catch_unwind(|| Store::open_raw(dir, options))
            .map_err(|_| Fresh::Damaged("the store panicked while opening".into()))?;
        let store = match opened {
            Ok(store) => store,
            Err(e) if e.kind() == ErrorKind::Locked => return Err(Refused::InUse(e)),
            Err(e) => return Err(Fresh::Damaged(e.to_string()).into()),
        };
        let format = store
            .meta_u64(meta::FORMAT)
            .map_err(|e| Fresh::Damaged(e.to_string()))?;
        if format != Some(u64::from(FORMAT)) {
            return Err(Fresh::Damaged(format!(
                "index format {format:?}, this build reads {FORMAT}"
            ))
            .into());
        }
        let stored = store
            .meta
            .get(meta::IDENTITY)
            .map_err(|e| Fresh::Damaged(e.to_string()))?;
        if stored.as_deref() != Some(identity) {
            return Err(Fresh::OtherLog.into());
        }
        store.meta().map_err(|e| Fresh::Damaged(e.to_string()))?;
        store
            .check_witnesses()
            .map_err(|e| Fresh::Damaged(e.to_string()))?;
        Ok(store)
    }

    fn open_raw(dir: &Path, options: &IndexOptions) -> Result<Store> {
        let what = format!("open the log index in {}", dir.display());
        // No `max_write_buffer_size`: fjall 3.1 stores it and never reads
        // it; `bound_write_buffers` applies the bound instead.
        let db = fjall::Database::builder(dir.join(STORE_DIR))
            .cache_size(block_cache_bytes(options.cache_bytes))
            .max_journaling_size(JOURNAL_BYTES)
            .worker_threads(WORKERS)
            .open()
            .map_err(|e| map_err(&what, e))?;
        let ks = |name: &str| {
            db.keyspace(name, || {
                fjall::KeyspaceCreateOptions::default()
                    .max_memtable_size(memtable_bytes(name, options.write_buffer_bytes))
                    .manual_journal_persist(true)
            })
            .map_err(|e| map_err(&what, e))
        };
        Ok(Store {
            path: dir.to_path_buf(),
            row_capacity: row_capacity(options.cache_bytes),
            write_buffer_limit: counted_write_buffer_bytes(options.write_buffer_bytes),
            #[cfg(test)]
            fail_after_batch: std::sync::atomic::AtomicU32::new(0),
            rows: std::sync::Mutex::new(FastMap::default()),
            writer: std::sync::Mutex::new(()),
            meta: ks(KEYSPACES[0])?,
            tags: ks(KEYSPACES[1])?,
            postings: ks(KEYSPACES[2])?,
            versions: ks(KEYSPACES[3])?,
            locators: ks(KEYSPACES[4])?,
            append_ids: ks(KEYSPACES[5])?,
            journaled: std::sync::atomic::AtomicU64::new(0),
            commits: std::sync::atomic::AtomicU64::new(0),
            flushed_through: std::sync::atomic::AtomicU64::new(u64::MAX),
            db,
        })
    }

    fn row_cache(&self) -> std::sync::MutexGuard<'_, FastMap<LogTag, TagRow>> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, ()> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds the meta serial and every witness of the batch after the last
    /// one committed to `b`.
    fn seal_batch(&self, b: &mut fjall::OwnedWriteBatch) -> Result<()> {
        let serial = self
            .meta_u64(meta::BATCH)?
            .ok_or_else(|| Error::corrupt("the log index has no batch record"))?
            .checked_add(1)
            .ok_or_else(|| Error::corrupt("the log index's batch serial overflows"))?;
        b.insert(&self.meta, meta::BATCH, u64_value(serial));
        for ks in self.keyspaces() {
            b.insert(ks, WITNESS, u64_value(serial));
        }
        Ok(())
    }

    /// Commits `b`; the caller holds the writer lock. Counted in `commits`
    /// first, so a commit that fails half-way still counts.
    fn commit(&self, b: fjall::OwnedWriteBatch, what: &str) -> Result<()> {
        self.commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        b.commit().map_err(|e| map_err(what, e))
    }

    /// Writes the meta rows of an empty index and syncs them.
    fn initialize(&self, identity: &[u8], first: u64, floors: &[(LogTag, u64)]) -> Result<()> {
        let _writer = self.writer();
        self.row_cache().clear();
        let mut b = self.db.batch();
        b.insert(&self.meta, meta::FORMAT, u64_value(u64::from(FORMAT)));
        b.insert(&self.meta, meta::IDENTITY, identity);
        b.insert(&self.meta, meta::COVERED, u64_value(first));
        b.insert(&self.meta, meta::FIRST, u64_value(first));
        let mut next_id = 0u64;
        for (tag, next) in floors {
            let row = TagRow {
                id: next_id,
                next_version: *next,
                floor: *next,
                last: 0,
            };
            next_id += 1;
            b.insert(&self.tags, tag_key(tag), row.encode());
        }
        b.insert(&self.meta, meta::NEXT_TAG_ID, u64_value(next_id));
        b.insert(&self.meta, meta::BATCH, u64_value(0));
        for ks in self.keyspaces() {
            b.insert(ks, WITNESS, u64_value(0));
        }
        self.commit(b, "initialize the log index")?;
        self.sync()
    }

    /// Removes whatever is in `dir` and creates an empty store there for a
    /// log that begins at `first`, with version `floors`.
    pub(super) fn recreate(
        dir: &Path,
        identity: &[u8],
        options: &IndexOptions,
        first: u64,
        floors: &[(LogTag, u64)],
    ) -> Result<Store> {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("remove {}", dir.display()), e)),
        }
        let store = Store::open_raw(dir, options)?;
        store.initialize(identity, first, floors)?;
        Ok(store)
    }

    /// Makes the next open discard this store.
    pub(super) fn mark_damaged(&self) -> Result<()> {
        let path = self.path.join(DAMAGED);
        std::fs::write(&path, b"").map_err(|e| Error::io(format!("write {}", path.display()), e))
    }

    fn keyspaces(&self) -> [&fjall::Keyspace; 6] {
        [
            &self.meta,
            &self.tags,
            &self.postings,
            &self.versions,
            &self.locators,
            &self.append_ids,
        ]
    }

    /// Checks every keyspace's witness against the last batch's serial.
    fn check_witnesses(&self) -> Result<()> {
        let serial = self
            .meta_u64(meta::BATCH)?
            .ok_or_else(|| Error::corrupt("the log index has no batch record"))?;
        for (ks, name) in self.keyspaces().into_iter().zip(KEYSPACES) {
            let witness = ks
                .get(WITNESS)
                .map_err(|e| map_err("read the log index", e))?
                .map(|v| decode_u64_value(&v, "witness"))
                .transpose()?;
            if witness != Some(serial) {
                return Err(Error::corrupt(format!(
                    "the log index's {name} rows end at batch {witness:?}, its record says {serial}"
                )));
            }
        }
        Ok(())
    }

    fn meta_u64(&self, name: &str) -> Result<Option<u64>> {
        self.meta
            .get(name)
            .map_err(|e| map_err("read the log index", e))?
            .map(|v| decode_u64_value(&v, name))
            .transpose()
    }

    pub(super) fn meta(&self) -> Result<Meta> {
        let need = |name: &str| {
            self.meta_u64(name)?
                .ok_or_else(|| Error::corrupt(format!("the log index has no {name} record")))
        };
        let tip = self
            .meta
            .get(meta::TIP)
            .map_err(|e| map_err("read the log index", e))?
            .map(|v| decode_tip_value(&v))
            .transpose()?;
        let m = Meta {
            covered: need(meta::COVERED)?,
            first: need(meta::FIRST)?,
            tip,
            next_tag_id: need(meta::NEXT_TAG_ID)?,
        };
        if let Some((s, _)) = m.tip
            && s.checked_add(1) != Some(m.covered)
        {
            return Err(Error::corrupt(format!(
                "the log index's tip {s} does not end its covered range {}",
                m.covered
            )));
        }
        Ok(m)
    }

    pub(super) fn tag_row(&self, tag: &LogTag) -> Result<Option<TagRow>> {
        if let Some(row) = self.row_cache().get(tag) {
            return Ok(Some(*row));
        }
        self.tags
            .get(tag_key(tag))
            .map_err(|e| map_err("read the log index", e))?
            .map(|v| TagRow::decode(&v))
            .transpose()
    }

    /// `tag`'s row, checked against its version rows: a sequencer numbers
    /// the stream's next entry from `next_version`, so a row the version
    /// rows contradict (rewritten, or left behind by a lost batch) must not
    /// be believed. The last version chunk ends at `next_version` and its
    /// last seqnum is `last`; with no chunk (or one ending below it, after
    /// a trim raised the floor) `next_version` is the floor.
    ///
    /// Errors: `Corrupt` on a mismatch; I/O kinds.
    pub(super) fn checked_tag_row(&self, tag: &LogTag) -> Result<Option<TagRow>> {
        let Some(row) = self.tag_row(tag)? else {
            return Ok(None);
        };
        let last_chunk = match self
            .versions
            .range(pair_key(row.id, 0)..=pair_key(row.id, u64::MAX))
            .next_back()
        {
            None => None,
            Some(g) => {
                let (key, value) = g
                    .into_inner()
                    .map_err(|e| map_err("read the log index", e))?;
                let first = checked_pair(&key, row.id)?.1;
                let seqnums = decode_chunk(&value)?;
                Some((first + seqnums.len() as u64, seqnums.last().copied()))
            }
        };
        let sound = match last_chunk {
            Some((end, last)) if end == row.next_version => last == Some(row.last),
            Some((end, _)) => end < row.next_version && row.next_version == row.floor,
            None => row.next_version == row.floor,
        };
        if !sound {
            return Err(Error::corrupt(format!(
                "the log index's row of stream {tag} (next version {}, floor {}, last entry {}) \
                 disagrees with its version rows (they end at {:?})",
                row.next_version,
                row.floor,
                row.last,
                last_chunk.map(|(end, _)| end)
            )));
        }
        Ok(Some(row))
    }

    /// The chunks of `ks` for tag `id` from the one holding `from` (the
    /// last whose first key is `<= from`) up to key `to` (exclusive).
    fn chunks_from(
        ks: &fjall::Keyspace,
        id: u64,
        from: u64,
        to: u64,
    ) -> Result<impl Iterator<Item = Result<(u64, Vec<u64>)>>> {
        let start = match ks.range(pair_key(id, 0)..=pair_key(id, from)).next_back() {
            None => from,
            Some(g) => {
                let key = g.key().map_err(|e| map_err("read the log index", e))?;
                checked_pair(&key, id)?.1
            }
        };
        Ok(ks
            .range(pair_key(id, start)..pair_key(id, to.max(start)))
            .map(move |g| {
                let (key, value) = g
                    .into_inner()
                    .map_err(|e| map_err("read the log index", e))?;
                let (_, first) = checked_pair(&key, id)?;
                Ok((first, decode_chunk(&value)?))
            }))
    }

    /// Up to `max` seqnums in `[from, to)` carrying the tag `id`.
    pub(super) fn postings(&self, id: u64, from: u64, to: u64, max: usize) -> Result<Vec<u64>> {
        if from >= to {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for chunk in Store::chunks_from(&self.postings, id, from, to)? {
            let (first, seqnums) = chunk?;
            if seqnums.first() != Some(&first) {
                return Err(Error::corrupt(format!(
                    "the log index's postings chunk at {first} starts at {:?}",
                    seqnums.first()
                )));
            }
            for s in seqnums.into_iter().filter(|&s| s >= from) {
                if s >= to || out.len() >= max {
                    return Ok(out);
                }
                out.push(s);
            }
        }
        Ok(out)
    }

    /// How many seqnums in `[from, to)` carry the tag `id` (reads one row
    /// per chunk of them).
    pub(super) fn count_postings(&self, id: u64, from: u64, to: u64) -> Result<u64> {
        if from >= to {
            return Ok(0);
        }
        let mut n = 0u64;
        for chunk in Store::chunks_from(&self.postings, id, from, to)? {
            let (_, seqnums) = chunk?;
            n += seqnums.iter().filter(|&&s| s >= from && s < to).count() as u64;
        }
        Ok(n)
    }

    /// The last seqnum `< before` carrying the tag `id`.
    pub(super) fn last_posting_before(&self, id: u64, before: u64) -> Result<Option<u64>> {
        let Some(last) = before.checked_sub(1) else {
            return Ok(None);
        };
        let Some(g) = self
            .postings
            .range(pair_key(id, 0)..=pair_key(id, last))
            .next_back()
        else {
            return Ok(None);
        };
        let (key, value) = g
            .into_inner()
            .map_err(|e| map_err("read the log index", e))?;
        checked_pair(&key, id)?;
        Ok(decode_chunk(&value)?.into_iter().rfind(|&s| s < before))
    }

    /// Up to `max` `(version, seqnum)` of the stream `id` from version
    /// `from` on, dense (the first may be later than `from`).
    pub(super) fn versions(&self, id: u64, from: u64, max: usize) -> Result<Vec<(u64, u64)>> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for chunk in Store::chunks_from(&self.versions, id, from, u64::MAX)? {
            let (first, seqnums) = chunk?;
            // The chunks of a stream cover its versions densely: a gap
            // means a row is missing.
            if let Some(&(prev, _)) = out.last()
                && first != prev + 1
            {
                return Err(Error::corrupt(format!(
                    "the log index skips from version {prev} to {first}"
                )));
            }
            for (i, s) in seqnums.into_iter().enumerate() {
                let version = first + i as u64;
                if version < from {
                    continue;
                }
                if out.len() >= max {
                    return Ok(out);
                }
                out.push((version, s));
            }
        }
        Ok(out)
    }

    /// The last locator at or before `seqnum`.
    pub(super) fn locate(&self, seqnum: u64) -> Result<Option<(u64, Bytes)>> {
        let Some(g) = self.locators.range(..=seqnum_key(seqnum)).next_back() else {
            return Ok(None);
        };
        let (key, value) = g
            .into_inner()
            .map_err(|e| map_err("read the log index", e))?;
        Ok(Some((
            decode_seqnum_key(&key)?,
            Bytes::copy_from_slice(&value),
        )))
    }

    pub(super) fn append_id(&self, id: &[u8]) -> Result<Option<u64>> {
        self.append_ids
            .get(append_id_key(id))
            .map_err(|e| map_err("read the log index", e))?
            .map(|v| decode_u64_value(&v, "append id seqnum"))
            .transpose()
    }

    /// Up to `max` tags with their rows, in key order, those `keep` accepts.
    pub(super) fn tags(
        &self,
        max: usize,
        keep: impl Fn(&TagRow) -> bool,
    ) -> Result<Vec<(LogTag, TagRow)>> {
        let mut out = Vec::new();
        for g in self.tags.range(..WITNESS.as_slice()) {
            if out.len() >= max {
                break;
            }
            let (key, value) = g
                .into_inner()
                .map_err(|e| map_err("read the log index", e))?;
            let row = TagRow::decode(&value)?;
            if keep(&row) {
                out.push((decode_tag_key(&key)?, row));
            }
        }
        Ok(out)
    }

    /// Up to `max` tags after `lower` (a [`tag_key`] bound), in key order.
    pub(super) fn tags_after(
        &self,
        lower: std::ops::Bound<Vec<u8>>,
        max: usize,
    ) -> Result<Vec<LogTag>> {
        let mut out = Vec::new();
        let range = (lower, std::ops::Bound::Excluded(WITNESS.to_vec()));
        for g in self.tags.range(range) {
            if out.len() >= max {
                break;
            }
            let key = g.key().map_err(|e| map_err("read the log index", e))?;
            out.push(decode_tag_key(&key)?);
        }
        Ok(out)
    }

    /// Records a trim point and version floors.
    pub(super) fn trim(&self, first: u64, floors: &[(LogTag, u64)]) -> Result<()> {
        let _writer = self.writer();
        let m = self.meta()?;
        let mut next_id = m.next_tag_id;
        let mut b = self.db.batch();
        for (tag, next) in floors {
            let mut row = match self.tag_row(tag)? {
                Some(row) => row,
                None => {
                    next_id += 1;
                    TagRow {
                        id: next_id - 1,
                        ..TagRow::default()
                    }
                }
            };
            row.next_version = row.next_version.max(*next);
            row.floor = row.floor.max(*next).min(row.next_version);
            b.insert(&self.tags, tag_key(tag), row.encode());
        }
        b.insert(&self.meta, meta::NEXT_TAG_ID, u64_value(next_id));
        b.insert(&self.meta, meta::FIRST, u64_value(first.max(m.first)));
        self.seal_batch(&mut b)?;
        self.row_cache().clear();
        self.commit(b, "trim the log index")?;
        self.sync()
    }

    /// Records `check` as the tip's check value when the tip is `seqnum`.
    pub(super) fn recheck(&self, seqnum: u64, check: u64) -> Result<()> {
        let _writer = self.writer();
        let m = self.meta()?;
        if m.tip.map(|(s, _)| s) != Some(seqnum) {
            return Ok(());
        }
        let mut b = self.db.batch();
        b.insert(&self.meta, meta::TIP, tip_value(seqnum, check));
        self.seal_batch(&mut b)?;
        self.commit(b, "record the tip's new check value")?;
        self.sync()
    }

    /// Writes one batch of consecutive entries in one store batch.
    pub(super) fn write(&self, batch: &FlushBatch, sync: bool) -> Result<()> {
        let Some(&(last, ref last_entry)) = batch.entries.last() else {
            return Ok(());
        };
        let writer = self.writer();
        let m = self.meta()?;
        if batch.entries[0].0 != m.covered {
            return Err(Error::internal(format!(
                "index flush starts at {} but the store covers up to {}",
                batch.entries[0].0, m.covered
            )));
        }
        let mut next_id = m.next_tag_id;
        let mut rows: FastMap<&LogTag, TagRow> = FastMap::default();
        // Per tag: the seqnums carrying it, and (as a primary tag) its
        // first version in this batch with the seqnums of its versions.
        let mut carrying: FastMap<u64, Vec<u64>> = FastMap::default();
        let mut primary: FastMap<u64, (u64, Vec<u64>)> = FastMap::default();
        let mut b = self.db.batch();
        // Key and value bytes this batch adds to fjall's journal.
        let mut written = 0u64;
        for (seqnum, entry) in &batch.entries {
            for (i, tag) in entry.tags.iter().enumerate() {
                let row = match rows.get_mut(tag) {
                    Some(row) => row,
                    None => {
                        // The cache first, then the store.
                        let row = match self.tag_row(tag)? {
                            Some(row) => row,
                            None => {
                                next_id += 1;
                                TagRow {
                                    id: next_id - 1,
                                    ..TagRow::default()
                                }
                            }
                        };
                        rows.entry(tag).or_insert(row)
                    }
                };
                carrying.entry(row.id).or_default().push(*seqnum);
                if i == 0 {
                    let (first, list) = primary
                        .entry(row.id)
                        .or_insert_with(|| (entry.version, Vec::new()));
                    if *first + list.len() as u64 != entry.version {
                        return Err(Error::internal(format!(
                            "index flush: entry {seqnum} has version {} of {tag}, expected {}",
                            entry.version,
                            *first + list.len() as u64
                        )));
                    }
                    list.push(*seqnum);
                    row.next_version = row.next_version.max(entry.version + 1);
                    row.last = *seqnum;
                }
            }
            if let Some(loc) = &entry.locator {
                written += 9 + loc.len() as u64;
                b.insert(&self.locators, seqnum_key(*seqnum), loc.as_ref());
            }
        }
        for (id, seqnums) in &carrying {
            for chunk in seqnums.chunks(CHUNK_MAX) {
                let value = encode_chunk(chunk)?;
                written += 16 + value.len() as u64;
                b.insert(&self.postings, pair_key(*id, chunk[0]), value);
            }
        }
        for (id, (first, seqnums)) in &primary {
            for (n, chunk) in seqnums.chunks(CHUNK_MAX).enumerate() {
                let version = first + (n * CHUNK_MAX) as u64;
                let value = encode_chunk(chunk)?;
                written += 16 + value.len() as u64;
                b.insert(&self.versions, pair_key(*id, version), value);
            }
        }
        for (tag, row) in &rows {
            let (key, value) = (tag_key(tag), row.encode());
            written += (key.len() + value.len()) as u64;
            b.insert(&self.tags, key, value);
        }
        b.insert(&self.meta, meta::NEXT_TAG_ID, u64_value(next_id));
        b.insert(&self.meta, meta::COVERED, u64_value(last + 1));
        b.insert(&self.meta, meta::TIP, tip_value(last, last_entry.check));
        self.seal_batch(&mut b)?;
        self.commit(b, "write the log index")?;
        self.journaled
            .fetch_add(written, std::sync::atomic::Ordering::Relaxed);
        let mut cache = self.row_cache();
        if cache.len() + rows.len() > self.row_capacity {
            cache.clear();
        }
        // A batch with more tags than the cache holds keeps some of them.
        for (tag, row) in rows.into_iter().take(self.row_capacity) {
            cache.insert(tag.clone(), row);
        }
        drop(cache);
        drop(writer);
        if sync {
            self.sync()?;
        }
        Ok(())
    }

    /// Moves fjall's in-memory tables into table files when its journal
    /// has grown past [`JOURNAL_FLUSH_BYTES`] (`wait`: always, and wait
    /// until every table of every keyspace is written and synced), so that
    /// fewer journal records need applying on the next open (fjall still
    /// reads its active journal through).
    ///
    /// With `wait`, no row depends on the journal any more when it returns.
    /// fjall's `rotate_memtable_and_wait` does not promise that: it waits
    /// only when it rotated something itself, so a memtable an earlier
    /// rotation sealed (the flusher's, at its last sync) could still be
    /// waiting for its flush, which dropping the store abandons.
    pub(super) fn compact_journal(&self, wait: bool) -> Result<()> {
        let journaled = self.journaled.load(std::sync::atomic::Ordering::Relaxed);
        if !wait && journaled < JOURNAL_FLUSH_BYTES {
            return Ok(());
        }
        // Between two batches, so that once these flushes land every
        // keyspace's tables end at the same batch: a journal lost after a
        // crash then leaves an older state the witnesses agree on, which
        // the log replays into rather than a rebuild.
        let sealed_at = self.seal_memtables()?;
        if wait {
            // fjall writes and syncs a sealed memtable's table file and the
            // tree's new version before it drops the memtable. A flush that
            // keeps failing (a full disk) must not hang the caller: past
            // the bound, what is left stays in the journal.
            self.wait_for_flushes(|sealed, _| sealed == 0)?;
            self.flushed_through
                .store(sealed_at, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    /// Seals every keyspace's active memtable for fjall's worker to flush,
    /// holding the writer lock so no batch is half in the sealed tables;
    /// the journal they cover no longer counts. Returns how many batches
    /// the sealed memtables hold (`commits`).
    fn seal_memtables(&self) -> Result<u64> {
        let _writer = self.writer();
        for ks in self.keyspaces() {
            ks.rotate_memtable()
                .map_err(|e| map_err("flush the log index's memtables", e))?;
        }
        self.journaled
            .store(0, std::sync::atomic::Ordering::Relaxed);
        Ok(self.commits.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Keeps fjall's memtables, active and sealed together, within the
    /// write buffer budget. fjall 3.1 bounds each table's active memtable
    /// and stalls a writer only past four sealed memtables per table (up to
    /// five memtables each, six tables); its bound on all of them together
    /// (`max_write_buffer_size`) is not applied. So past half the bound
    /// the flusher seals every active memtable (fjall flushes sealed ones
    /// in the background), and past the bound it waits for those flushes,
    /// which holds the tail back and, once the tail is full, the appenders.
    ///
    /// It seals only when no sealed memtable waits for its flush: fjall's
    /// flush of a table writes all of the table's sealed memtables at
    /// once, so sealing again before it lands would only add a small table
    /// file to compact and another request to the queue of fjall's one
    /// worker, on every batch. The wait ends once the sealed memtables are
    /// written, even if fjall still counts more than the bound.
    ///
    /// Errors: I/O kinds when rotating fails or fjall's flushes make no
    /// progress for [`FLUSH_WAIT`].
    pub(super) fn bound_write_buffers(&self) -> Result<()> {
        let limit = self.write_buffer_limit;
        if self.db.write_buffer_size() <= limit / 2 {
            return Ok(());
        }
        let mut sealed_all = false;
        loop {
            if self.sealed_memtables() == 0 {
                if sealed_all {
                    // Everything this sealed is written and fjall still
                    // counts more than the bound: bytes that are not the
                    // index's memtables' (nothing else writes them), which
                    // no wait here would release.
                    return Ok(());
                }
                // Between two batches, as in `compact_journal`.
                self.seal_memtables()?;
                sealed_all = true;
            }
            // The wait ends once every sealed memtable is written, whatever
            // fjall's count then says: the count covers the active
            // memtables too, which only sealing releases, so a wait for the
            // count alone could wait for nothing.
            self.wait_for_flushes(|sealed, held| sealed == 0 || held <= limit)?;
            if self.db.write_buffer_size() <= limit {
                return Ok(());
            }
        }
    }

    /// Sealed memtables waiting for fjall's flush, over all keyspaces.
    fn sealed_memtables(&self) -> usize {
        self.keyspaces()
            .iter()
            .map(|ks| ks.sealed_memtable_count())
            .sum()
    }

    /// Waits until `done(sealed memtables, bytes fjall counts in memtables)`
    /// holds, polling while fjall's worker flushes. Every flush landed
    /// (either figure moving) restarts the clock, so a wait behind a long
    /// queue of flushes and compactions lasts as long as the worker keeps
    /// going, and one that sees nothing move for [`FLUSH_WAIT`] (a flush
    /// that keeps failing: a full disk, a dead worker) gives up.
    ///
    /// Errors: `TimedOut` I/O when nothing moves for [`FLUSH_WAIT`].
    fn wait_for_flushes(&self, done: impl Fn(usize, u64) -> bool) -> Result<()> {
        let mut seen = (self.sealed_memtables(), self.db.write_buffer_size());
        let mut since = crate::clock::os_monotonic_now();
        loop {
            let now = (self.sealed_memtables(), self.db.write_buffer_size());
            if done(now.0, now.1) {
                return Ok(());
            }
            if now != seen {
                seen = now;
                since = crate::clock::os_monotonic_now();
            } else if since.elapsed() > FLUSH_WAIT {
                return Err(Error::io(
                    "flush the log index's memtables",
                    std::io::Error::from(std::io::ErrorKind::TimedOut),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// What the flusher does after each batch it wrote (`sync`: a synced
    /// one): flush memtables when the journal has grown
    /// ([`Store::compact_journal`]), and keep them within the write buffer
    /// budget ([`Store::bound_write_buffers`]).
    ///
    /// Errors: theirs.
    pub(super) fn after_batch(&self, sync: bool) -> Result<()> {
        #[cfg(test)]
        if self
            .fail_after_batch
            .fetch_update(
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
                |n| n.checked_sub(1),
            )
            .is_ok()
        {
            return Err(Error::io(
                "flush the log index's memtables",
                std::io::Error::other("injected by a test"),
            ));
        }
        if sync {
            self.compact_journal(false)?;
        }
        self.bound_write_buffers()
    }

    /// Makes every batch written so far durable.
    pub(super) fn sync(&self) -> Result<()> {
        self.db
            .persist(fjall::PersistMode::SyncData)
            .map_err(|e| map_err("sync the log index", e))
    }

    /// Whether every batch committed since the open is in table files: the
    /// last [`Store::compact_journal`] that waited saw them all written,
    /// and nothing was committed or sealed after it.
    fn all_in_tables(&self) -> bool {
        let commits = self.commits.load(std::sync::atomic::Ordering::Relaxed);
        self.flushed_through
            .load(std::sync::atomic::Ordering::Relaxed)
            == commits
            && self.sealed_memtables() == 0
    }

    /// Lets go of the store (`closed`: after a close that succeeded). When
    /// every batch is in table files ([`Store::all_in_tables`]), fjall's
    /// journal then holds nothing its tables lack, and is emptied once
    /// fjall has let go: fjall's open reads its active journal through,
    /// up to 64 MB with a lookup per row, however much of it is flushed,
    /// and after a clean close finds nothing to read. (fjall reaches the
    /// same state itself when it starts a new journal once everything
    /// before it is flushed.) After a crash, or a close that failed, the
    /// journal stays and fjall replays it.
    pub(super) fn release(self, closed: bool) {
        let clean = closed && self.all_in_tables();
        let dir = self.path.join(STORE_DIR);
        // Every handle on fjall's database goes before its journal is
        // touched: its lock is then free.
        drop(self);
        if !clean {
            return;
        }
        match empty_journal(&dir) {
            Ok(true) => tracing::debug!(dir = %dir.display(), "emptied the log index's journal"),
            Ok(false) => {}
            Err(e) => tracing::warn!(
                dir = %dir.display(),
                error = %e,
                "could not empty the log index's journal; the next open reads it"
            ),
        }
    }
}

/// Empties the journal of the fjall database in `dir`, which is closed and
/// whose every row is in table files: truncates the active (newest)
/// journal file to nothing and removes older ones, holding fjall's lock so
/// that no open of the database can overlap. Returns `false`, touching
/// nothing, when the lock is held (the database was opened again
/// meanwhile) or there is no journal.
fn empty_journal(dir: &Path) -> std::io::Result<bool> {
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("lock"))?;
    // A fjall worker thread may let go of its last handle a moment after
    // the database is dropped.
    let mut tries = 0;
    loop {
        match lock.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if tries < 20 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
    let mut journals = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jnl") {
            // fjall names them by number and refuses other names.
            let Some(id) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<u64>().ok())
            else {
                return Ok(false);
            };
            journals.push((id, path));
        }
    }
    journals.sort();
    let Some((_, active)) = journals.pop() else {
        return Ok(false);
    };
    // fjall reopens the newest file as its active journal and appends to
    // it; its journal numbers go on from there.
    let file = std::fs::OpenOptions::new().write(true).open(&active)?;
    file.set_len(0)?;
    file.sync_all()?;
    if !journals.is_empty() {
        for (_, sealed) in &journals {
            std::fs::remove_file(sealed)?;
        }
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(true)
}

/// Decodes a pair key and checks that it belongs to `id`.
fn checked_pair(key: &[u8], id: u64) -> Result<(u64, u64)> {
    let (a, b) = decode_pair_key(key)?;
    if a != id {
        return Err(Error::corrupt(format!(
            "the log index returned a row of tag {a} for tag {id}"
        )));
    }
    Ok((a, b))
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;

    use super::*;

    /// A batch of `n` entries from `first`, each the first of a stream of
    /// its own (the index's most row-hungry case).
    fn new_streams(first: u64, n: u64) -> FlushBatch {
        FlushBatch {
            entries: (first..first + n)
                .map(|s| {
                    let tag = LogTag::with_key("orders", format!("customer-{s}")).unwrap();
                    let entry = TailEntry {
                        tags: vec![tag].into(),
                        version: 0,
                        locator: s.is_multiple_of(32).then(|| Bytes::from(vec![1u8; 12])),
                        check: s,
                    };
                    (s, entry)
                })
                .collect(),
        }
    }

    /// Runs `f` on a thread of its own and fails the test if it has not
    /// returned within `secs` (a wait that never ends must not hang the
    /// test run).
    fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(secs))
            .unwrap_or_else(|e| panic!("still waiting after {secs} s ({e})"))
    }

    /// A store with a 2 MiB cache and 4 MiB of write buffers in `dir`, its
    /// options, and its bound on memtable bytes as fjall counts them.
    fn small_budget_store(dir: &Path) -> (Store, IndexOptions, u64) {
        let options = IndexOptions {
            cache_bytes: 2 << 20,
            write_buffer_bytes: 4 << 20,
            ..IndexOptions::default()
        };
        let (store, _) = Store::open_or_create(dir, b"log", &options).unwrap();
        let limit = counted_write_buffer_bytes(options.write_buffer_bytes);
        (store, options, limit)
    }

    #[test]
    fn the_write_buffer_bound_waits_for_flushes_and_not_for_the_count() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, _, limit) = small_budget_store(tmp.path());
        // Memtable bytes fjall counts that no flush of the index's tables
        // releases (here a table of the same database that fjall never
        // seals), more than the bound: only the index's own sealed
        // memtables can be waited for.
        let ballast = store
            .db
            .keyspace("ballast", || {
                fjall::KeyspaceCreateOptions::default().max_memtable_size(64 << 20)
            })
            .unwrap();
        for i in 0..limit / 1000 + 1 {
            ballast.insert(i.to_be_bytes(), [0u8; 1000]).unwrap();
        }
        assert!(store.db.write_buffer_size() > limit);
        let store = Arc::new(store);
        for b in 0..3u64 {
            let s = Arc::clone(&store);
            within(60, move || {
                s.write(&new_streams(b * 2000, 2000), false).unwrap();
                s.bound_write_buffers().unwrap();
            });
            // It returned because the index's memtables were written,
            // not before.
            assert_eq!(store.sealed_memtables(), 0, "batch {b}");
            assert!(store.db.write_buffer_size() > limit);
        }
        let row = store
            .tag_row(&LogTag::with_key("orders", "customer-5999").unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(row.last, 5999);
    }

    /// The sizes of the store's journal files (the store in `dir`).
    pub(in crate::index) fn journal_sizes(dir: &Path) -> Vec<u64> {
        std::fs::read_dir(dir.join(STORE_DIR))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jnl"))
            .map(|p| std::fs::metadata(p).unwrap().len())
            .collect()
    }

    fn journal_bytes(dir: &Path) -> u64 {
        journal_sizes(dir).iter().sum()
    }

    #[test]
    fn the_journal_is_emptied_only_when_every_batch_is_in_tables() {
        let tmp = tempfile::tempdir().unwrap();
        let options = IndexOptions::default();
        let open = || Store::open_or_create(tmp.path(), b"log", &options).unwrap();

        // A batch after the last flush lives in the journal alone.
        let (store, _) = open();
        store.write(&new_streams(0, 500), false).unwrap();
        store.compact_journal(true).unwrap();
        store.write(&new_streams(500, 500), false).unwrap();
        store.sync().unwrap();
        store.release(true);
        assert!(journal_bytes(tmp.path()) > 0);
        let (store, fresh) = open();
        assert_eq!((fresh, store.meta().unwrap().covered), (None, 1000));

        // A close that failed (no flush since the open): kept.
        store.release(false);
        assert!(journal_bytes(tmp.path()) > 0);
        let (store, _) = open();
        assert_eq!(store.meta().unwrap().covered, 1000);

        // Flushed, but not since the open (the journal's rows replayed
        // into memtables are not in tables): kept.
        store.release(true);
        assert!(journal_bytes(tmp.path()) > 0);

        // Everything flushed: emptied, and nothing is lost.
        let (store, _) = open();
        store.write(&new_streams(1000, 500), false).unwrap();
        store.compact_journal(true).unwrap();
        store.release(true);
        assert_eq!(journal_bytes(tmp.path()), 0);
        let (store, fresh) = open();
        assert_eq!((fresh, store.meta().unwrap().covered), (None, 1500));
        let row = store
            .tag_row(&LogTag::with_key("orders", "customer-700").unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(row.last, 700);
        store.write(&new_streams(1500, 10), false).unwrap();
        assert_eq!(store.meta().unwrap().covered, 1510);
    }

    #[test]
    fn memtables_and_tag_rows_stay_within_the_budget() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, options, limit) = small_budget_store(tmp.path());
        let mut peak = 0;
        for b in 0..40u64 {
            store.write(&new_streams(b * 2000, 2000), false).unwrap();
            store.bound_write_buffers().unwrap();
            let held = store.db.write_buffer_size();
            assert!(
                held <= limit,
                "batch {b}: {held} memtable bytes, bound {limit}"
            );
            peak = peak.max(held);
            assert!(store.row_cache().len() <= store.row_capacity);
        }
        // 80,000 rows of each kind were written: far more than the bound
        // holds, so memtables were sealed and flushed on the way.
        assert!(peak > limit / 4, "peak {peak}");
        assert_eq!(store.row_capacity, row_capacity(options.cache_bytes));
        assert!(
            block_cache_bytes(options.cache_bytes) + (store.row_capacity * ROW_BYTES) as u64
                <= 2 << 20
        );
        // The rows written are all there.
        let tag = LogTag::with_key("orders", "customer-79999").unwrap();
        let row = store.tag_row(&tag).unwrap().unwrap();
        assert_eq!((row.next_version, row.last), (1, 79_999));
        assert_eq!(store.meta().unwrap().covered, 80_000);
    }
}
