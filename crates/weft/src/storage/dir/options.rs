//! Settings of the `dir` backend: plain values, loadable with serde.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::MAX_ENTRY_BYTES;

/// When an append is acknowledged relative to the sync of its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    /// An append returns only after `fdatasync` covered its bytes; it then
    /// survives a crash of the process, the OS or the machine. The default.
    #[default]
    Durable,
    /// An append returns once its bytes are handed to the OS, before any
    /// sync: it survives a crash of the process but **not** of the OS or the
    /// machine. Syncs still happen at segment roll-over, on trim, on
    /// [`DirStorage::sync`](super::DirStorage::sync) and on close. After a
    /// machine crash the tail written since the last sync may be lost, and
    /// recovery of a relaxed segment cuts it at the first damaged frame.
    /// Opt in only when losing recent appends on power loss is acceptable.
    Relaxed,
}

/// Settings of a [`DirStorage`](super::DirStorage).
///
/// ```
/// use weft::storage::dir::{DirOptions, SyncMode};
///
/// let options: DirOptions =
///     serde_json::from_str(r#"{ "segment_bytes": 1048576, "sync": "durable" }"#).unwrap();
/// assert_eq!(options.segment_bytes, 1 << 20);
/// assert_eq!(options.sync, SyncMode::Durable);
/// assert_eq!(options.max_entry_bytes, DirOptions::default().max_entry_bytes);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct DirOptions {
    /// A segment file is closed and a new one started once the next write
    /// would take it past this size (a single write larger than this still
    /// goes into one segment). Between 4 KiB and 1 GiB; default 64 MiB.
    pub segment_bytes: u64,
    /// When appends are acknowledged; default [`SyncMode::Durable`].
    pub sync: SyncMode,
    /// The most entries one write group (one write, one sync) carries.
    /// Default 8192.
    pub max_batch_entries: usize,
    /// The most payload bytes one write group carries (an append batch that
    /// is larger on its own still goes as one group). Default 8 MiB.
    pub max_batch_bytes: usize,
    /// How long, in microseconds, the writer may wait after a sync for the
    /// appenders it just acknowledged to come back, so that concurrent
    /// appenders keep sharing syncs. The wait ends as soon as as many
    /// appends are queued as the last sync acknowledged, and it never
    /// happens after the writer was idle, so a lone appender never waits
    /// for it. 0 disables it. Default 200.
    pub linger_micros: u64,
    /// How much of the linger, in microseconds, the writer spends spinning
    /// (watching the queue on the CPU) before it sleeps: returning
    /// appenders usually arrive within tens of microseconds, and a sleep
    /// costs a wake-up per group. 0 never spins. Default 50.
    pub spin_micros: u64,
    /// The largest payload accepted; larger appends fail with
    /// `InvalidInput`. At most 16 MiB; default 16 MiB.
    pub max_entry_bytes: usize,
    /// How many append ids the writer remembers: the ids of the newest
    /// this many entries appended with one
    /// ([`AppendRequest::with_id`](crate::AppendRequest::with_id)). A retry
    /// whose original is among them answers with the original result; an
    /// older one is appended again. Rebuilt from the log on open, as far
    /// back as this many ids or this many entries (whole segments),
    /// whichever is reached first. Each id
    /// costs its bytes, its entry's primary tag and about 120 bytes of
    /// memory. At least 1; default 65,536.
    pub append_id_window: usize,
    /// The memory the backend may use for what it keeps besides the write
    /// groups in flight: the log index (its in-memory tail, its store's
    /// cache and write buffers), recently committed entries kept for
    /// readers, and the streams' next versions the writer holds. Whatever
    /// the log's length, the backend stays within about this much. At
    /// least 32 MiB; default 256 MiB. See [`MemorySplit`].
    pub memory_budget: usize,
    /// How far ahead of its data the writer extends the active segment
    /// file, in bytes; 0 never does. The file then grows once per this
    /// many bytes instead of at every write group, and a sync that does
    /// not change the file's size leaves the filesystem's journal alone:
    /// on ext4 here a lone appender made 1.2–1.4 times as many durable
    /// appends per second (BENCHMARKS.md, "Issue 17: preallocated segments
    /// and one write per piece"). After a write group under 256 KiB the
    /// space is written zeros (synced with that group), so later small
    /// groups land in blocks the file already has and their syncs write
    /// the data only; after a larger group it is a hole, which costs no
    /// writes (BENCHMARKS.md, "Issue 30: zero-filled preallocation"). The
    /// writer cuts it off when the segment is sealed or the log closed,
    /// and after a crash the next open does (readers take the zeros for
    /// space never written, not for damage). At most 64 MiB; default 1 MiB.
    pub preallocate_bytes: u64,
}

setters! {
    DirOptions {
        with_segment_bytes => segment_bytes: u64,
        with_sync => sync: SyncMode,
        with_max_batch_entries => max_batch_entries: usize,
        with_max_batch_bytes => max_batch_bytes: usize,
        with_linger_micros => linger_micros: u64,
        with_spin_micros => spin_micros: u64,
        with_max_entry_bytes => max_entry_bytes: usize,
        with_append_id_window => append_id_window: usize,
        with_memory_budget => memory_budget: usize,
        with_preallocate_bytes => preallocate_bytes: u64,
    }
}

/// How a [`DirOptions::memory_budget`] is divided.
///
/// The shares add up to 7/8 of the budget: the last eighth is left for
/// what no share counts — the index batch being written and fjall's
/// compactions, and the memory the allocator holds beside what is in use
/// (freed blocks it has not returned yet), measured at 15–40 % of the heap
/// in use under the dir soak (BENCHMARKS.md, "dir soak").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemorySplit {
    /// The index store's caches (fjall's block cache, and the index's
    /// cache of tag rows: an eighth of this): 1/4 of the budget.
    pub index_cache: usize,
    /// The index's in-memory tail (entries not yet in its store): 1/8.
    pub index_tail: usize,
    /// The index store's write buffers (fjall's memtables, active and
    /// sealed, in memory bytes rather than the bytes fjall counts): 1/4.
    pub index_write_buffers: usize,
    /// Recently committed entries, payloads included, kept for readers
    /// that follow the log: 1/8.
    pub recent_entries: usize,
    /// Streams whose next version the writer holds (about 192 bytes each:
    /// the tag's two strings behind an `Arc`, and the map's slot): 1/8 of
    /// the budget.
    pub sequencer_streams: usize,
}

/// Memory one stream held by the sequencer takes.
const SEQUENCER_STREAM_BYTES: usize = 192;

impl MemorySplit {
    /// The split of `budget` bytes.
    pub fn of(budget: usize) -> MemorySplit {
        let eighth = budget / 8;
        MemorySplit {
            index_cache: 2 * eighth,
            index_tail: eighth,
            index_write_buffers: 2 * eighth,
            recent_entries: eighth,
            sequencer_streams: (eighth / SEQUENCER_STREAM_BYTES).max(1024),
        }
    }
}

impl Default for DirOptions {
    fn default() -> Self {
        DirOptions {
            segment_bytes: 64 << 20,
            sync: SyncMode::Durable,
            max_batch_entries: 8192,
            max_batch_bytes: 8 << 20,
            linger_micros: 200,
            spin_micros: 50,
            max_entry_bytes: MAX_ENTRY_BYTES,
            append_id_window: 1 << 16,
            memory_budget: 256 << 20,
            preallocate_bytes: 1 << 20,
        }
    }
}

/// The smallest memory budget accepted.
pub const MIN_MEMORY_BUDGET: usize = 32 << 20;

/// The most [`DirOptions::preallocate_bytes`] accepted.
pub const MAX_PREALLOCATE_BYTES: u64 = 64 << 20;

/// The smallest segment size accepted.
pub const MIN_SEGMENT_BYTES: u64 = 4 << 10;

/// The largest segment size accepted (segment offsets are kept as `u32`).
pub const MAX_SEGMENT_BYTES: u64 = 1 << 30;

impl DirOptions {
    /// How [`memory_budget`](DirOptions::memory_budget) is divided.
    pub fn memory_split(&self) -> MemorySplit {
        MemorySplit::of(self.memory_budget)
    }

    /// The settings of the log index this backend keeps, from its budget.
    pub(crate) fn index_options(&self) -> crate::index::IndexOptions {
        let split = self.memory_split();
        crate::index::IndexOptions {
            cache_bytes: split.index_cache,
            tail_bytes: split.index_tail,
            write_buffer_bytes: split.index_write_buffers,
            ..crate::index::IndexOptions::default()
        }
    }

    /// Checks the settings.
    ///
    /// Errors: `InvalidInput` naming the first setting out of range.
    pub fn validate(&self) -> Result<()> {
        if !(MIN_SEGMENT_BYTES..=MAX_SEGMENT_BYTES).contains(&self.segment_bytes) {
            return Err(Error::invalid_input(format!(
                "segment_bytes {} is outside {MIN_SEGMENT_BYTES}..={MAX_SEGMENT_BYTES}",
                self.segment_bytes
            )));
        }
        if self.max_batch_entries == 0 {
            return Err(Error::invalid_input("max_batch_entries must be at least 1"));
        }
        if self.max_batch_bytes == 0 {
            return Err(Error::invalid_input("max_batch_bytes must be at least 1"));
        }
        if self.max_entry_bytes > MAX_ENTRY_BYTES {
            return Err(Error::invalid_input(format!(
                "max_entry_bytes {} exceeds the limit of {MAX_ENTRY_BYTES}",
                self.max_entry_bytes
            )));
        }
        if self.spin_micros > self.linger_micros {
            return Err(Error::invalid_input(format!(
                "spin_micros {} exceeds linger_micros {}",
                self.spin_micros, self.linger_micros
            )));
        }
        if self.append_id_window == 0 {
            return Err(Error::invalid_input("append_id_window must be at least 1"));
        }
        if self.memory_budget < MIN_MEMORY_BUDGET {
            return Err(Error::invalid_input(format!(
                "memory_budget {} is below {MIN_MEMORY_BUDGET} bytes",
                self.memory_budget
            )));
        }
        if self.preallocate_bytes > MAX_PREALLOCATE_BYTES {
            return Err(Error::invalid_input(format!(
                "preallocate_bytes {} exceeds {MAX_PREALLOCATE_BYTES}",
                self.preallocate_bytes
            )));
        }
        if self.linger_micros > 1_000_000 {
            return Err(Error::invalid_input(format!(
                "linger_micros {} exceeds one second",
                self.linger_micros
            )));
        }
        Ok(())
    }
}
