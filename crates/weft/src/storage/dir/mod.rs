//! The `dir` backend: the log in a local directory, the embedded default.
//!
//! Entries are appended to segment files, fsynced in groups (concurrent
//! appenders share one `fdatasync`), recovered after a crash by checksum,
//! and guarded by an OS lock so only one handle writes a directory.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use weft::storage::dir::DirStorage;
//! use weft::{AppendRequest, Log, LogTag};
//!
//! let tmp = tempfile::tempdir().unwrap();
//! let orders = LogTag::new("orders")?;
//! {
//!     let log = Log::new(DirStorage::open(tmp.path()).await?);
//!     log.append(AppendRequest::new(orders.clone(), "placed")).await?;
//!     log.storage().close().await?;
//! }
//! let log = Log::new(DirStorage::open(tmp.path()).await?);
//! assert_eq!(log.read_all(&orders).await?.len(), 1);
//! # Ok(()) }
//! ```
//!
//! ## Directory layout
//!
//! ```text
//!  <dir>/<first seqnum:020>.seg     segments: header, then entry frames
//!  <dir>/trim                       the trim point (absent until the first trim)
//!  <dir>/kv/<hash:016x>.kv          per-view KV buckets
//!  *.tmp                            half-written replacements; removed on open
//! ```
//!
//! The single-writer lock is a `flock` on the directory itself (see
//! `lock.rs`): no file in it can be deleted or swapped to let a second
//! writer in. Every byte layout (entry frame, segment header, trim file,
//! KV bucket) is in `crate::format`.
//!
//! ## Durability
//!
//! In [`SyncMode::Durable`] (the default) an append returns only after
//! `fdatasync` covered its bytes, and only then does it become visible to
//! reads and reach the commit feed. Creating a segment syncs its header and
//! the directory before any entry goes in; trims replace the trim file
//! atomically (temporary file, fsync, rename, directory fsync) before
//! deleting segments. A failed write or sync stops the writer for good:
//! that group's appenders get `Indeterminate`, every later append `Closed`.
//!
//! ## The log index, and what opening costs
//!
//! Which entries carry a tag, which entry holds each version of a stream,
//! each stream's next version, and where entries' frames start live in a
//! persistent log index (`crate::index`, in `<dir>/index/`), not in
//! memory. Memory stays within [`DirOptions::memory_budget`] whatever the
//! log's length or number of streams; older entries are read from the
//! segment files on demand.
//!
//! Opening checks that the index describes this log (its tip: the checksum
//! of the last entry it covers) and scans only the segments after that
//! entry, verifying each frame's checksum and that seqnums and versions run
//! densely, so it costs the tail written since the index last covered the
//! log, not the log's length. A torn tail is cut back to the last whole
//! append batch; damage anywhere else in that tail is a `Corrupt` error
//! that leaves the log's files untouched (`scan.rs` says how the two are
//! told apart: the writer never writes a group before the previous one is
//! synced, so only the last group can be torn). Damage in the data before
//! is found when it is read (`Corrupt`), and by [`check`] (`weft verify`),
//! which reads everything. A missing, damaged or foreign index is rebuilt
//! from the log, once (see `recovery.rs`).
//!
//! ## Append ids
//!
//! An entry appended with an id carries it in its frame. The writer
//! remembers the ids of the newest [`DirOptions::append_id_window`] such
//! entries, and answers a retry whose id it remembers with the original
//! result instead of writing again; see [`AppendIds`](crate::storage::kit::AppendIds).
//! On open the window gets the ids of the entries the open scans (those the
//! log index did not cover), then of older entries walked backward segment
//! by segment until it is full or `append_id_window` entries were walked
//! over: the open stays bounded on a log with few ids, and a
//! retry whose original is among the newest `append_id_window` entries is
//! always recognized.
//!
//! ## Reads
//!
//! A read by tag or version asks the index for seqnums, then walks from the
//! nearest locator to each frame (a few dozen frames at most); recently
//! committed entries are served from memory (see `read.rs`).

mod check;
mod check_report;
mod erase;
mod follower;
mod fsutil;
mod ids;
mod index_check;
mod kv;
mod lock;
mod options;
mod presence;
mod queue;
mod read;
mod recent;
mod recovery;
mod scan;
mod segment;
mod trim;
mod walk;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use async_trait::async_trait;
use tokio::sync::oneshot;

use super::kit::{self, Gate};
use super::{Capabilities, CommitFeed, Freshness, NewEntry, Storage, StreamInfo, Tip};
use crate::clock::{self, Clock};
use crate::error::{Error, Result};
use crate::index::Index;
use crate::kv::KvStore;
use crate::model::{AppendResult, LogEntry, LogTag};
use crate::storage::kit::IndexVersions;
use crate::storage::kit::Sequencer;

pub use check::check;
pub use check_report::{DirCheck, DirSegmentInfo, DirTagInfo};
pub use follower::{DirFollower, DirFollowerOptions, FollowerIndex};
pub use kv::DirKv;
pub use options::{
    DirOptions, MAX_PREALLOCATE_BYTES, MAX_SEGMENT_BYTES, MIN_MEMORY_BUDGET, MIN_SEGMENT_BYTES,
    MemorySplit, SyncMode,
};
pub use presence::require_log;

use lock::DirLock;
use queue::Queue;
use read::{ReadState, Shelf};
use recovery::{IDENTITY, INDEX_DIR};
use scan::Access;
use writer::{Batch, Command, Counters, Replier, Shared, Writer};

/// Counters of a [`DirStorage`] since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirStats {
    /// Entries committed.
    pub entries: u64,
    /// Append calls (batches) committed.
    pub appends: u64,
    /// Write groups: one write (and, durable, one sync) each.
    pub groups: u64,
    /// `fdatasync` calls on segment files.
    pub syncs: u64,
    /// Frame bytes written.
    pub bytes_written: u64,
    /// Segment files created.
    pub segments_created: u64,
    /// Entries the open read into the log index: those written after the
    /// point the index covered (none after a clean close), or every live
    /// entry when the index was missing, damaged or another log's and
    /// was rebuilt.
    pub replayed: u64,
}

/// A log stored in a local directory.
///
/// Open it with [`DirStorage::open`] or [`DirStorage::open_with`]; wrap it
/// in a [`Log`](crate::Log). One handle per directory: a second open, in
/// this process or another, fails with [`ErrorKind::Locked`](crate::ErrorKind::Locked) until the
/// first is closed or dropped (or its process died).
pub struct DirStorage {
    shared: Arc<Shared>,
    queue: Arc<Queue<Command>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    kv: Arc<DirKv>,
    options: DirOptions,
    retention: crate::retention::RetentionSlot,
}

impl std::fmt::Debug for DirStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirStorage")
            .field("dir", &self.shared.dir)
            .field("options", &self.options)
            .finish()
    }
}

impl DirStorage {
    /// Opens (creating it if absent) the log in directory `path` with
    /// default options.
    ///
    /// Errors: `Locked` when the directory is open elsewhere; `Corrupt`
    /// when its data is damaged beyond a torn tail; I/O kinds.
    pub async fn open(path: impl AsRef<Path>) -> Result<DirStorage> {
        DirStorage::open_with(path, DirOptions::default()).await
    }

    /// Opens the log in `path` with `options`.
    ///
    /// Errors: as [`DirStorage::open`]; `InvalidInput` for bad options.
    pub async fn open_with(path: impl AsRef<Path>, options: DirOptions) -> Result<DirStorage> {
        DirStorage::open_with_clock(path, options, clock::system()).await
    }

    /// Opens the log in `path` with `options`, timestamping entries from
    /// `clock`.
    ///
    /// Errors: as [`DirStorage::open_with`].
    pub async fn open_with_clock(
        path: impl AsRef<Path>,
        options: DirOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<DirStorage> {
        options.validate()?;
        let dir = path.as_ref().to_path_buf();
        tokio::task::spawn_blocking(move || DirStorage::open_blocking(dir, options, clock))
            .await
            .map_err(|e| Error::internal(format!("open task failed: {e}")))?
    }

    fn open_blocking(
        dir: PathBuf,
        options: DirOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<DirStorage> {
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&dir)
                    .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    fsutil::sync_dir(parent)?;
                }
            }
            Err(e) => return Err(Error::io(format!("stat {}", dir.display()), e)),
            // A symlink is followed by the lock's open, which refuses
            // anything but a directory.
            Ok(_) => {}
        }
        let lock = DirLock::acquire(&dir)?;
        let kv = DirKv::open(&dir.join("kv"), lock.identity().clone())?;
        let split = options.memory_split();
        let index = Arc::new(Index::open(
            &dir.join(INDEX_DIR),
            IDENTITY,
            options.index_options(),
        )?);
        let opened = recovery::open_indexed(&dir, &index, Access::ReadWrite)?;
        let survey = opened.survey;
        recovery::repair(&dir, &survey.repairs)?;
        let next = survey.next_seqnum;
        let first = survey.live_from();
        let ids = ids::rebuild(
            &survey.segments,
            first,
            opened.scanned_from,
            next,
            opened.tail_ids,
            options.append_id_window,
        )?;
        let sequencer = Sequencer::with_table(
            next,
            IndexVersions::new(Arc::clone(&index), split.sequencer_streams),
        );
        let shared = Arc::new(Shared {
            dir: dir.clone(),
            state: Shelf::new(
                ReadState::new(first, next, survey.segments, split.recent_entries),
                index,
                None,
            ),
            counters: Counters::default(),
            gate: Gate::new("the log directory"),
            fail_next_sync: AtomicBool::new(false),
        });
        shared
            .counters
            .replayed
            .store(opened.replayed, Ordering::Relaxed);
        let mut sequencer = sequencer;
        // New entries are stamped no earlier than the newest one in the
        // log, whatever this process's clock says.
        if let Some(seqnum) = shared.state.index().prev(None, next)?
            && let Some(newest) = shared.state.fetch_blocking(&[seqnum])?.pop()
        {
            sequencer.note_timestamp(newest.timestamp_ms);
        }
        let queue = Arc::new(Queue::new());
        let retention = crate::retention::RetentionSlot::new(clock.clone());
        let writer = Writer::new(
            Arc::clone(&shared),
            Arc::clone(&queue),
            options.clone(),
            clock,
            writer::Resumed {
                sequencer,
                locators: opened.locators,
                ids,
            },
            lock,
        )?;
        let thread = std::thread::Builder::new()
            .name("weft-dir-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| Error::io("start the writer thread", e))?;
        tracing::debug!(dir = %dir.display(), next, replayed = opened.replayed, "opened log directory");
        Ok(DirStorage {
            shared,
            queue,
            thread: Mutex::new(Some(thread)),
            kv: Arc::new(kv),
            options,
            retention,
        })
    }

    /// The directory this log lives in.
    pub fn path(&self) -> &Path {
        &self.shared.dir
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &DirOptions {
        &self.options
    }

    /// Counters since the log was opened.
    pub fn stats(&self) -> DirStats {
        let c = &self.shared.counters;
        DirStats {
            entries: c.entries.load(Ordering::Relaxed),
            appends: c.appends.load(Ordering::Relaxed),
            groups: c.groups.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            bytes_written: c.bytes.load(Ordering::Relaxed),
            segments_created: c.segments_created.load(Ordering::Relaxed),
            replayed: c.replayed.load(Ordering::Relaxed),
        }
    }

    /// Makes every appended entry durable (a no-op in durable mode, where
    /// appends already are).
    ///
    /// Errors: `Closed`; I/O kinds (after which the log accepts no writes).
    pub async fn sync(&self) -> Result<()> {
        self.call(|reply| Command::Sync { reply }).await
    }

    /// Test hook: makes the next sync of a segment fail as if the disk
    /// reported an I/O error.
    #[doc(hidden)]
    pub fn inject_sync_failure(&self) {
        self.shared.fail_next_sync.store(true, Ordering::Release);
    }

    fn check_open(&self) -> Result<()> {
        self.shared.gate.check_open()
    }

    async fn call<T>(&self, make: impl FnOnce(writer::Reply<T>) -> Command) -> Result<T> {
        self.shared.check_writable()?;
        let (reply, rx) = oneshot::channel();
        self.queue
            .send(make(reply))
            .map_err(|_| Error::closed("the log directory's writer has stopped"))?;
        rx.await
            .map_err(|_| Error::closed("the log directory's writer has stopped"))?
    }
}

#[async_trait]
impl Storage for DirStorage {
    async fn append(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        kit::check_append(&batch, self.append_limits())?;
        // Checksum large payloads here, on the appender's thread, so the
        // single writer thread only combines checksums.
        let data_crcs = writer::payload_crcs(&batch);
        self.call(|reply| Command::Append {
            batch: Batch::Many { batch, data_crcs },
            reply: Replier::Many(reply),
        })
        .await
    }

    async fn append_one(&self, entry: NewEntry) -> Result<AppendResult> {
        kit::check_append(std::slice::from_ref(&entry), self.append_limits())?;
        let data_crc =
            (entry.data.len() >= writer::LARGE_PAYLOAD).then(|| crc32c::crc32c(&entry.data));
        self.call(|reply| Command::Append {
            batch: Batch::One { entry, data_crc },
            reply: Replier::One(reply),
        })
        .await
    }

    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        self.check_open()?;
        self.shared.state.entries(tag, from, max).await
    }

    async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        self.check_open()?;
        self.shared.state.versions(tag, from_version, max).await
    }

    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        self.check_open()?;
        self.shared.state.prev(tag, before).await
    }

    async fn tip(&self) -> Result<Tip> {
        self.check_open()?;
        Ok(self.shared.state.tip())
    }

    async fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.check_open()?;
        self.shared.state.latest_version(tag)
    }

    async fn streams(&self, from: Option<&LogTag>, max: usize) -> Result<Vec<StreamInfo>> {
        self.check_open()?;
        self.shared.state.streams(from, max).await
    }

    async fn trim(&self, through: u64) -> Result<()> {
        self.call(|reply| Command::Trim { through, reply }).await
    }

    async fn erase(&self, seqnums: &[u64]) -> Result<u64> {
        // One segment per command, so appends queued behind an erase wait
        // for one segment's rewrite at a time.
        let mut erased = 0;
        let mut rest = seqnums;
        while !rest.is_empty() {
            let seqnums = rest.to_vec();
            let (n, done) = self.call(|reply| Command::Erase { seqnums, reply }).await?;
            erased += n;
            // Every command deals with at least one seqnum.
            rest = &rest[done.clamp(1, rest.len())..];
        }
        Ok(erased)
    }

    fn feed(&self) -> &CommitFeed {
        self.shared.state.feed()
    }

    fn kv(&self) -> Result<Arc<dyn KvStore>> {
        self.check_open()?;
        Ok(self.kv.clone())
    }

    fn retention_slot(&self) -> Option<&crate::retention::RetentionSlot> {
        Some(&self.retention)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_only: false,
            durable: true,
            max_entry_bytes: self.options.max_entry_bytes,
            freshness: Freshness::SingleWriter,
        }
    }

    fn supports_append_ids(&self) -> bool {
        true
    }

    async fn close(&self) -> Result<()> {
        if !self.shared.gate.close() {
            return Ok(());
        }
        let (reply, rx) = oneshot::channel();
        let result = match self.queue.send(Command::Close { reply }) {
            Ok(()) => rx.await.unwrap_or(Ok(())),
            Err(_) => Ok(()),
        };
        self.shared.state.feed().close();
        result
    }
}

impl Drop for DirStorage {
    fn drop(&mut self) {
        // Closing the queue stops the writer; wait for it so the directory
        // lock is free once the handle is gone.
        self.queue.close_senders();
        let thread = self
            .thread
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            tracing::error!("the log directory's writer thread panicked");
        }
    }
}
