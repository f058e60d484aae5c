//! The writer thread: group commit, segment roll-over, trim.
//!
//! Appends reach one dedicated OS thread through a channel. The thread
//! takes every append already queued (up to the batch limits) as one
//! *group*, assigns numbers, encodes the frames into one buffer, writes it
//! with one positioned write, syncs it with one `fdatasync`, then makes the
//! whole group visible, publishes it on the commit feed and answers every
//! appender. Appends that arrive while a sync runs wait in the channel and
//! form the next group, so concurrent appenders share syncs without any
//! timer. The optional linger lets the writer wait, right after answering,
//! for the appenders it just answered to come back (they usually do within
//! microseconds), so groups stay large instead of alternating between a
//! straggler and everyone else. The queue (see [`super::queue`]) wakes the
//! writer once per group rather than once per append, and the writer spins
//! briefly before it sleeps, because on a two-core machine the wake-ups,
//! not the bytes, are what a cohort of appenders waits for.
//!
//! The writer never writes a group before the previous one is synced;
//! recovery depends on that (see [`super::recovery`]). If a write or sync
//! fails, the writer answers the group with `Indeterminate` (the bytes may
//! or may not be on disk; a reopen tells) and stops its [`Gate`], which
//! refuses every later append with `Closed` (the I/O error as its source):
//! after a failed `fdatasync` the kernel may have dropped the dirty pages,
//! so retrying the sync could report success for lost data.
//!
//! Recording a group in the log index, making it visible and announcing it
//! on the feed is one step ([`Shelf::publish`]). Recording is a few
//! hash-map pushes into the index's in-memory tail; the index's own thread
//! writes it to disk. Only when that thread falls a whole tail budget
//! behind does the writer wait for it, before taking the lock.
//!
//! The sequencer keeps a bounded set of streams' next versions and looks
//! the others up in the index ([`IndexVersions`]): every group is in the
//! index before the next one is numbered.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;
use tracing::{debug, error, warn};

use super::erase;
use super::fsutil;
use super::lock::DirLock;
use super::options::{DirOptions, SyncMode};
use super::queue::Queue;
use super::read::{ReadState, Shelf};
use super::segment::{self, HEADER_LEN, Segment};
use super::trim::{self, TrimPoint};
use super::walk::Locators;
use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::format::frame;
use crate::index::IndexEntry;
use crate::model::{AppendResult, LogEntry};
use crate::storage::NewEntry;
use crate::storage::kit::Gate;
use crate::storage::kit::IndexVersions;
use crate::storage::kit::Sequencer;
use crate::storage::kit::{AppendIds, Planned};
use crate::storage::kit::{result_of, single_result};

/// Payloads this large are written straight from the caller's buffer
/// (vectored write) instead of being copied into the group buffer, with
/// their checksum computed by the appender.
pub(super) const LARGE_PAYLOAD: usize = 64 << 10;

/// The CRC-32C of each payload of `batch` if any payload is large, else
/// nothing (small payloads are checksummed while being copied).
pub(super) fn payload_crcs(batch: &[NewEntry]) -> Vec<u32> {
    if batch.iter().any(|e| e.data.len() >= LARGE_PAYLOAD) {
        batch.iter().map(|e| crc32c::crc32c(&e.data)).collect()
    } else {
        Vec::new()
    }
}

/// A reply channel for one command.
pub(super) type Reply<T> = oneshot::Sender<Result<T>>;

/// An append's entries as the appender sent them.
pub(super) enum Batch {
    /// One entry (`Storage::append_one`): no vector either way.
    One {
        entry: NewEntry,
        /// Its payload's CRC-32C when the payload has at least
        /// [`LARGE_PAYLOAD`] bytes (computed by the appender).
        data_crc: Option<u32>,
    },
    /// A batch.
    Many {
        batch: Vec<NewEntry>,
        /// CRC-32C of each payload, computed by the appender when the batch
        /// holds a payload of at least [`LARGE_PAYLOAD`] bytes (else empty).
        data_crcs: Vec<u32>,
    },
}

impl Batch {
    /// The checksums of a lone entry's payload, in a batch's form.
    fn crcs_of_one(data_crc: Option<u32>) -> Vec<u32> {
        data_crc.into_iter().collect()
    }

    fn len(&self) -> usize {
        match self {
            Batch::One { .. } => 1,
            Batch::Many { batch, .. } => batch.len(),
        }
    }

    fn payload_bytes(&self) -> usize {
        match self {
            Batch::One { entry, .. } => entry.data.len(),
            Batch::Many { batch, .. } => payload_bytes(batch),
        }
    }
}

/// Where an append's answer goes: one result for [`Batch::One`], a vector
/// for [`Batch::Many`].
pub(super) enum Replier {
    One(Reply<AppendResult>),
    Many(Reply<Vec<AppendResult>>),
}

impl Replier {
    fn send(self, answer: Result<Results>) {
        match self {
            Replier::One(tx) => {
                let _ = tx.send(answer.and_then(Results::into_one));
            }
            Replier::Many(tx) => {
                let _ = tx.send(answer.map(Results::into_vec));
            }
        }
    }
}

/// An append's results.
enum Results {
    One(AppendResult),
    Many(Vec<AppendResult>),
}

impl Results {
    fn into_one(self) -> Result<AppendResult> {
        match self {
            Results::One(r) => Ok(r),
            Results::Many(v) => single_result(v),
        }
    }

    fn into_vec(self) -> Vec<AppendResult> {
        match self {
            Results::One(r) => vec![r],
            Results::Many(v) => v,
        }
    }
}

/// An append's plan: a lone entry without an append id is numbered
/// without the vectors of a [`Planned`].
enum Plan {
    One(LogEntry, AppendResult),
    Many(Planned),
}

impl Plan {
    /// The entries to write.
    fn entries(&self) -> &[LogEntry] {
        match self {
            Plan::One(entry, _) => std::slice::from_ref(entry),
            Plan::Many(p) => &p.entries,
        }
    }

    fn id(&self, i: usize) -> Option<&str> {
        match self {
            Plan::One(..) => None,
            Plan::Many(p) => p.id(i),
        }
    }

    fn writes_ids(&self) -> bool {
        match self {
            Plan::One(..) => false,
            Plan::Many(p) => p.writes_ids(),
        }
    }

    fn known_through(&self) -> Option<u64> {
        match self {
            Plan::One(..) => None,
            Plan::Many(p) => p.known_through,
        }
    }

    fn results(self) -> Results {
        match self {
            Plan::One(_, r) => Results::One(r),
            Plan::Many(p) => Results::Many(p.results),
        }
    }

    /// The results, and the entries moved into `committed`.
    fn commit_into(self, committed: &mut Vec<LogEntry>) -> Results {
        match self {
            Plan::One(entry, r) => {
                committed.push(entry);
                Results::One(r)
            }
            Plan::Many(p) => {
                committed.extend(p.entries);
                Results::Many(p.results)
            }
        }
    }
}

/// What the writer thread is asked to do.
pub(super) enum Command {
    Append {
        batch: Batch,
        reply: Replier,
    },
    Trim {
        through: u64,
        reply: Reply<()>,
    },
    /// Erases the first segment's worth of `seqnums`: answers how many it
    /// erased and how many of `seqnums` it dealt with.
    Erase {
        seqnums: Vec<u64>,
        reply: Reply<(u64, usize)>,
    },
    Sync {
        reply: Reply<()>,
    },
    Close {
        reply: Reply<()>,
    },
}

/// Counters behind [`DirStats`](super::DirStats).
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) entries: AtomicU64,
    pub(super) appends: AtomicU64,
    pub(super) groups: AtomicU64,
    pub(super) syncs: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) segments_created: AtomicU64,
    pub(super) replayed: AtomicU64,
}

/// State shared by the storage handle and the writer thread.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) dir: PathBuf,
    /// The read state and the commit feed.
    pub(super) state: Shelf,
    pub(super) counters: Counters,
    /// Closed by `close`; stopped by a failed write or sync.
    pub(super) gate: Gate,
    /// Test hook: make the next segment sync fail.
    pub(super) fail_next_sync: AtomicBool,
}

impl Shared {
    pub(super) fn read_state(&self) -> std::sync::RwLockReadGuard<'_, ReadState> {
        self.state.read()
    }

    fn write_state(&self) -> std::sync::RwLockWriteGuard<'_, ReadState> {
        self.state.write()
    }

    /// `Closed` once the log was closed or the writer failed.
    pub(super) fn check_writable(&self) -> Result<()> {
        self.gate.check_writable()
    }
}

/// The segment being appended to.
struct Active {
    first: u64,
    file: Arc<File>,
    /// Where the next write goes.
    end: u64,
    /// Seqnum after its last entry.
    next: u64,
    relaxed: bool,
    /// Its format allows frames with append ids.
    append_ids: bool,
    /// The file's length: the bytes from `end` on are a preallocated hole.
    allocated: u64,
}

/// An append's reply channel with its plan (or why it has none).
type Answer = (Replier, Result<Plan>);

/// An append's reply channel with what it will be told.
type Answered = (Replier, Result<Results>);

struct Pending {
    batch: Batch,
    reply: Replier,
}

/// The writer thread's state.
pub(super) struct Writer {
    shared: Arc<Shared>,
    queue: Arc<Queue<Command>>,
    /// Commands taken from the queue, not yet handled.
    inbox: VecDeque<Command>,
    options: DirOptions,
    clock: Arc<dyn Clock>,
    sequencer: Sequencer<IndexVersions>,
    /// Which entries get a locator in the index.
    locators: Locators,
    /// The append ids of the newest entries (see `DirOptions::append_id_window`).
    ids: AppendIds,
    active: Option<Active>,
    /// The group being written: copied bytes...
    buf: Vec<u8>,
    /// ...and large payloads written in place: each goes after `buf[..at]`.
    large: Vec<(usize, Bytes)>,
    /// Bytes of the group: `buf` plus the large payloads.
    group_len: usize,
    /// Per entry of the group: where its frame starts in the group, and in
    /// `buf` (where its checksum is). Kept between groups, like `indexed`,
    /// so a large group does not allocate and free them each time.
    frame_starts: Vec<(usize, usize)>,
    /// The group's entries as recorded in the log index.
    indexed: Vec<IndexEntry>,
    /// The appends of the group being gathered (empty between groups).
    group: Vec<Pending>,
    /// The group's appends with their plans, then with their answers.
    planned: Vec<Answer>,
    answers: Vec<Answered>,
    /// Zeros to extend the active segment with (empty until needed).
    zeros: Vec<u8>,
    /// Relaxed mode: bytes were written since the last sync.
    dirty: bool,
    lock: Option<DirLock>,
    failed: bool,
}

/// What the open rebuilt for the writer to go on from.
pub(super) struct Resumed {
    pub(super) sequencer: Sequencer<IndexVersions>,
    /// Where the next locator goes.
    pub(super) locators: Locators,
    pub(super) ids: AppendIds,
}

impl Writer {
    /// A writer appending to the last of the segments in `shared`.
    ///
    /// Errors: I/O kinds when the last segment cannot be opened.
    pub(super) fn new(
        shared: Arc<Shared>,
        queue: Arc<Queue<Command>>,
        options: DirOptions,
        clock: Arc<dyn Clock>,
        resumed: Resumed,
        lock: DirLock,
    ) -> Result<Self> {
        let Resumed {
            sequencer,
            locators,
            ids,
        } = resumed;
        let last = shared.read_state().segments.values().next_back().cloned();
        let active = match last {
            Some(s) => {
                let file = segment::open_file(&s.path, true)?;
                let allocated = file
                    .metadata()
                    .map_err(|e| Error::io(format!("stat {}", s.path.display()), e))?
                    .len();
                Some(Active {
                    first: s.first,
                    file: Arc::new(file),
                    end: s.end,
                    next: s.next,
                    relaxed: s.relaxed,
                    append_ids: s.append_ids,
                    allocated,
                })
            }
            None => None,
        };
        Ok(Writer {
            shared,
            queue,
            inbox: VecDeque::new(),
            options,
            clock,
            sequencer,
            locators,
            ids,
            active,
            buf: Vec::new(),
            large: Vec::new(),
            group_len: 0,
            frame_starts: Vec::new(),
            indexed: Vec::new(),
            group: Vec::new(),
            planned: Vec::new(),
            answers: Vec::new(),
            zeros: Vec::new(),
            dirty: false,
            lock: Some(lock),
            failed: false,
        })
    }

    fn relaxed(&self) -> bool {
        self.options.sync == SyncMode::Relaxed
    }

    /// Runs until closed or until every handle is gone.
    pub(super) fn run(mut self) {
        let linger = Duration::from_micros(self.options.linger_micros);
        // Appenders answered by the last group, and when.
        let mut answered = 0usize;
        let mut answered_at = crate::clock::os_monotonic_now();
        loop {
            if self.inbox.is_empty() && !self.queue.recv_all(&mut self.inbox) {
                break;
            }
            let Some(cmd) = self.inbox.pop_front() else {
                continue;
            };
            match cmd {
                Command::Append { batch, reply } => {
                    let mut group = std::mem::take(&mut self.group);
                    group.push(Pending { batch, reply });
                    self.gather(&mut group, answered, answered_at + linger);
                    answered = group.len();
                    self.commit(&mut group);
                    self.group = group;
                    answered_at = crate::clock::os_monotonic_now();
                }
                Command::Trim { through, reply } => {
                    let _ = reply.send(self.trim(through));
                }
                Command::Erase { seqnums, reply } => {
                    let _ = reply.send(self.erase(&seqnums));
                }
                Command::Sync { reply } => {
                    let _ = reply.send(self.sync_if_dirty());
                }
                Command::Close { reply } => {
                    let result = self.finish();
                    // Release the directory before answering, so a reopen
                    // right after `close` finds it free.
                    drop(self);
                    let _ = reply.send(result);
                    return;
                }
            }
        }
        if let Err(e) = self.finish() {
            warn!(error = %e, "final sync of the log directory failed");
        }
    }

    /// Adds queued appends to `group` within the batch limits, stopping at
    /// any other command. Waits (until `deadline`) only while fewer than
    /// `expect` appends are in the group.
    fn gather(&mut self, group: &mut Vec<Pending>, expect: usize, deadline: Instant) {
        let mut entries: usize = group.iter().map(|p| p.batch.len()).sum();
        let mut bytes: usize = group.iter().map(|p| p.batch.payload_bytes()).sum();
        loop {
            while let Some(Command::Append { batch, .. }) = self.inbox.front() {
                let (n, b) = (batch.len(), batch.payload_bytes());
                if entries + n > self.options.max_batch_entries
                    || bytes + b > self.options.max_batch_bytes
                {
                    return;
                }
                let Some(Command::Append { batch, reply }) = self.inbox.pop_front() else {
                    return;
                };
                entries += n;
                bytes += b;
                group.push(Pending { batch, reply });
            }
            if !self.inbox.is_empty()
                || group.len() >= expect
                || entries >= self.options.max_batch_entries
                || bytes >= self.options.max_batch_bytes
                || crate::clock::os_monotonic_now() >= deadline
            {
                return;
            }
            self.queue.recv_until(
                expect - group.len(),
                deadline,
                Duration::from_micros(self.options.spin_micros),
                &mut self.inbox,
            );
            if self.inbox.is_empty() {
                return;
            }
        }
    }

    fn stop(&mut self, why: &Error) {
        error!(error = %why, "the log directory stops accepting writes");
        self.failed = true;
        self.shared.gate.stop(why);
    }

    fn check_writable(&self) -> Result<()> {
        self.shared.check_writable()
    }

    /// Stops the writer when the directory is no longer the one it locked
    /// (see [`super::lock`]).
    fn check_directory(&mut self) -> Result<()> {
        let Some(lock) = &self.lock else {
            return self.check_writable();
        };
        if let Err(e) = lock.identity().check() {
            self.stop(&e);
            return Err(e);
        }
        Ok(())
    }

    /// Writes, syncs, publishes and answers one group; leaves `group`
    /// empty (its capacity kept for the next).
    fn commit(&mut self, group: &mut Vec<Pending>) {
        // Nothing is numbered or written yet: a closed log, or a directory
        // swapped under the lock (which stops the writer), tells every
        // appender why.
        if let Err(e) = self.check_writable().and_then(|()| self.check_directory()) {
            for p in group.drain(..) {
                p.reply.send(Err(e.clone()));
            }
            return;
        }
        let group_first = self.sequencer.next_seqnum();
        let mut planned = std::mem::take(&mut self.planned);
        let mut frame_starts = std::mem::take(&mut self.frame_starts);
        planned.clear();
        frame_starts.clear();
        let placed = match self.plan_and_encode(group, group_first, &mut planned, &mut frame_starts)
        {
            Err(e) => {
                // Never write a group whose numbering the sequencer
                // already moved past a frame that failed to encode.
                self.stop(&e);
                for (reply, _) in planned.drain(..) {
                    reply.send(Err(e.clone()));
                }
                None
            }
            // Nothing to write: conflicts, and retries of committed appends.
            Ok(_) if self.group_len == 0 => {
                for (reply, outcome) in planned.drain(..) {
                    reply.send(outcome.map(Plan::results));
                }
                None
            }
            Ok(writes_ids) => match self.write_group(group_first, writes_ids) {
                Ok(placed) => Some(placed),
                Err(e) => {
                    self.stop(&e);
                    answer_unwritten(&mut planned, &e, group_first);
                    None
                }
            },
        };
        if let Some((first, base)) = placed {
            self.publish_and_answer(first, base, &mut planned, &frame_starts);
        }
        self.planned = planned;
        self.frame_starts = frame_starts;
    }

    /// Numbers every append of `group` and encodes its frames into the
    /// group buffers; each append's reply goes into `planned` with its
    /// plan or its conflict, and `frame_starts` gets each frame's place
    /// (in the written group, in the buffer). Returns whether any frame
    /// carries an append id.
    ///
    /// Errors: `Internal` when a validated entry fails to encode (the
    /// failing append's reply is in `planned` then; the caller must stop).
    fn plan_and_encode(
        &mut self,
        group: &mut Vec<Pending>,
        group_first: u64,
        planned: &mut Vec<Answer>,
        frame_starts: &mut Vec<(usize, usize)>,
    ) -> Result<bool> {
        let timestamp_ms = self.clock.now_ms();
        self.buf.clear();
        self.large.clear();
        let mut referenced = 0usize;
        let mut writes_ids = false;
        for p in group.drain(..) {
            // `DirStorage::append` validated the batch before sending it.
            // Every id numbered before this group is committed (the writer
            // stops when a group fails), and an id numbered earlier in this
            // group is answered only if the group commits.
            let (outcome, data_crcs) = match p.batch {
                Batch::One { entry, data_crc } if entry.append_id.is_none() => {
                    let planned = self.sequencer.plan_one(entry, timestamp_ms).map(|e| {
                        let r = result_of(&e);
                        Plan::One(e, r)
                    });
                    (planned, Batch::crcs_of_one(data_crc))
                }
                Batch::One { entry, data_crc } => (
                    self.ids
                        .plan(&mut self.sequencer, vec![entry], timestamp_ms, |_| Ok(None))
                        .map(Plan::Many),
                    Batch::crcs_of_one(data_crc),
                ),
                Batch::Many { batch, data_crcs } => (
                    self.ids
                        .plan(&mut self.sequencer, batch, timestamp_ms, |_| Ok(None))
                        .map(Plan::Many),
                    data_crcs,
                ),
            };
            if let Ok(plan) = &outcome {
                writes_ids |= plan.writes_ids();
                if let Err(e) =
                    self.encode_plan(plan, &data_crcs, group_first, &mut referenced, frame_starts)
                {
                    planned.push((p.reply, Err(e.clone())));
                    return Err(e);
                }
            }
            planned.push((p.reply, outcome));
        }
        self.group_len = self.buf.len() + referenced;
        Ok(writes_ids)
    }

    /// Encodes one planned append's frames into the group buffers. A large
    /// payload whose checksum the appender computed is referenced, not
    /// copied (`referenced` counts those bytes).
    fn encode_plan(
        &mut self,
        plan: &Plan,
        data_crcs: &[u32],
        group_first: u64,
        referenced: &mut usize,
        frame_starts: &mut Vec<(usize, usize)>,
    ) -> Result<()> {
        let entries = plan.entries();
        // The appender's payload checksums are by batch position, which
        // retried entries shifted: without them large payloads are copied.
        let crcs: &[u32] = if data_crcs.len() == entries.len() {
            data_crcs
        } else {
            &[]
        };
        for (i, entry) in entries.iter().enumerate() {
            frame_starts.push((self.buf.len() + *referenced, self.buf.len()));
            let offset = (entry.seqnum - group_first) as u32;
            let end = i + 1 == entries.len();
            let id = plan.id(i);
            let encoded = match crcs.get(i) {
                Some(&crc) if entry.data.len() >= LARGE_PAYLOAD => {
                    frame::encode_head_with_id(&mut self.buf, entry, id, offset, end, crc).map(
                        |()| {
                            self.large.push((self.buf.len(), entry.data.clone()));
                            *referenced += entry.data.len();
                        },
                    )
                }
                _ => frame::encode_with_id(&mut self.buf, entry, id, offset, end),
            };
            // Validation makes this unreachable.
            encoded
                .map_err(|e| Error::internal(format!("encoding a validated entry failed: {e}")))?;
        }
        Ok(())
    }

    /// Makes a written group visible (index, then read state), then
    /// answers its appenders: in that order, so an answered append is
    /// readable. Stops the writer when the group cannot be shown.
    fn publish_and_answer(
        &mut self,
        first: u64,
        base: u64,
        planned: &mut Vec<Answer>,
        frame_starts: &[(usize, usize)],
    ) {
        let mut answers = std::mem::take(&mut self.answers);
        answers.clear();
        let mut committed: Vec<LogEntry> = Vec::with_capacity(frame_starts.len());
        let mut appends = 0u64;
        for (reply, outcome) in planned.drain(..) {
            match outcome {
                Ok(plan) => {
                    appends += 1;
                    answers.push((reply, Ok(plan.commit_into(&mut committed))));
                }
                Err(e) => answers.push((reply, Err(e))),
            }
        }
        let n = committed.len() as u64;
        let group_len = self.group_len as u64;
        let mut indexed = std::mem::take(&mut self.indexed);
        indexed.clear();
        indexed.extend(
            committed
                .iter()
                .zip(frame_starts)
                .map(|(entry, &(at, in_buf))| {
                    let crc = self
                        .buf
                        .get(in_buf + 4..in_buf + 8)
                        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                    IndexEntry {
                        seqnum: entry.seqnum,
                        tags: entry.tags.as_slice().into(),
                        version: entry.stream_version,
                        locator: self.locators.place(first, base + at as u64, entry.seqnum),
                        check: u64::from(crc),
                    }
                }),
        );
        // Wait for the index's room outside the lock readers take.
        let index = Arc::clone(self.shared.state.index());
        let shown = index.reserve().and_then(|()| {
            self.shared.state.publish(committed, |state, entries| {
                index.push(&indexed)?;
                let Some(seg) = state.segments.get_mut(&first) else {
                    return Err(Error::internal(
                        "the active segment vanished from the read state",
                    ));
                };
                seg.end = base + group_len;
                seg.next += n;
                state.next += n;
                state.recent.extend(entries);
                Ok(())
            })
        });
        indexed.clear();
        self.indexed = indexed;
        if let Err(e) = shown {
            drop(answers);
            self.stop(&e);
            return;
        }
        // Every version the group set is in the index now.
        self.sequencer.table().shrink();
        let c = &self.shared.counters;
        c.entries.fetch_add(n, Ordering::Relaxed);
        c.appends.fetch_add(appends, Ordering::Relaxed);
        c.groups.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(group_len, Ordering::Relaxed);
        for (reply, answer) in answers.drain(..) {
            reply.send(answer);
        }
        self.answers = answers;
    }

    /// Places the encoded group in a segment, writes and (durable mode)
    /// syncs it. Returns the segment's first seqnum and the write offset.
    /// A group with append ids never goes into a segment whose format
    /// predates them.
    fn write_group(&mut self, group_first: u64, writes_ids: bool) -> Result<(u64, u64)> {
        let len = self.group_len as u64;
        let relaxed = self.relaxed();
        let roll = match &self.active {
            None => true,
            Some(a) => {
                a.next != group_first
                    || a.relaxed != relaxed
                    || (writes_ids && !a.append_ids)
                    || (a.next > a.first && a.end + len > self.options.segment_bytes)
            }
        };
        if roll {
            self.roll(group_first)?;
        }
        let Some(active) = self.active.as_mut() else {
            return Err(Error::internal("no active segment after roll-over"));
        };
        let base = active.end;
        let step = self.options.preallocate_bytes;
        if step > 0 && base + len > active.allocated {
            // Grow the file ahead of the data, so the syncs until the group
            // that passes this size do not change it. A failure costs only
            // that: the write below grows the file as it goes.
            let to = base + len + step;
            let grown = if len < ZERO_FILL_BELOW {
                // Written zeros, not a hole: a small group written into a
                // hole makes its sync allocate blocks too, which on ext4
                // here costs more round trips to the disk than the data
                // (64 appenders: 0.75-0.88 ms per sync against 1.3-2.1 ms;
                // BENCHMARKS.md, "Issue 30: zero-filled preallocation").
                // The zeros go to disk with this group's sync.
                let from = active.allocated.max(base + len);
                write_zeros(&active.file, &mut self.zeros, from, to)
            } else {
                // A large group's sync writes megabytes anyway: zeros
                // would double its bytes for little gain.
                active.file.set_len(to)
            };
            if let Err(e) = grown {
                debug!(error = %e, "could not extend the active segment ahead");
            }
            // Even after a failure: the zeros may be partly written, and
            // the file must be cut back to its data when it is sealed.
            active.allocated = to;
        }
        write_group_bytes(&active.file, base, &self.buf, &self.large)
            .map_err(|e| Error::io("write to the active segment", e))?;
        active.end += len;
        active.next = self.sequencer.next_seqnum();
        let first = active.first;
        if relaxed {
            self.dirty = true;
        } else {
            self.sync_active()?;
        }
        Ok((first, base))
    }

    /// Seals the active segment (synced) and starts a new one at `first`.
    fn roll(&mut self, first: u64) -> Result<()> {
        self.sync_if_dirty()?;
        // Only the last segment may end in unwritten space: an earlier one
        // with a tail that does not parse is damage to every reader.
        if let Err(e) = self.cut_preallocation() {
            self.stop(&e);
            return Err(e);
        }
        let (seg, file) = segment::create(&self.shared.dir, first, self.relaxed())?;
        self.shared
            .counters
            .segments_created
            .fetch_add(1, Ordering::Relaxed);
        self.active = Some(Active {
            first,
            file: Arc::new(file),
            end: HEADER_LEN,
            next: first,
            relaxed: seg.relaxed,
            append_ids: seg.append_ids,
            allocated: HEADER_LEN,
        });
        self.shared.write_state().segments.insert(first, seg);
        Ok(())
    }

    fn sync_active(&mut self) -> Result<()> {
        let Some(active) = &self.active else {
            return Ok(());
        };
        if self.shared.fail_next_sync.swap(false, Ordering::AcqRel) {
            return Err(Error::io(
                "sync the active segment",
                std::io::Error::other("injected sync failure"),
            ));
        }
        active
            .file
            .sync_data()
            .map_err(|e| Error::io("sync the active segment", e))?;
        self.shared.counters.syncs.fetch_add(1, Ordering::Relaxed);
        self.dirty = false;
        Ok(())
    }

    /// Cuts the active segment's file back to its data, durably.
    fn cut_preallocation(&mut self) -> Result<()> {
        let Some(active) = self.active.as_mut() else {
            return Ok(());
        };
        if active.allocated <= active.end {
            return Ok(());
        }
        active
            .file
            .set_len(active.end)
            .and_then(|()| active.file.sync_all())
            .map_err(|e| Error::io("cut the active segment's preallocated space", e))?;
        active.allocated = active.end;
        Ok(())
    }

    fn sync_if_dirty(&mut self) -> Result<()> {
        if self.failed {
            return self.check_writable();
        }
        if self.dirty
            && let Err(e) = self.sync_active()
        {
            self.stop(&e);
            return Err(e);
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        let result = if self.failed {
            Ok(())
        } else {
            self.sync_if_dirty()
        };
        // A closed log's files hold nothing but their data; left in place
        // the space costs nothing but is cut by the next open.
        if result.is_ok()
            && !self.failed
            && let Err(e) = self.cut_preallocation()
        {
            warn!(error = %e, "could not cut the active segment's preallocated space; the next open will");
        }
        // Whatever is still queued is refused (its callers see `Closed`),
        // and so is everything sent from now on.
        drop(self.queue.close_receiver());
        self.inbox.clear();
        // Leave the index covering everything, so the next open reads
        // nothing but its tip. A failure only costs that open a replay.
        if let Err(e) = self.shared.state.index().release() {
            warn!(error = %e, "could not close the log index; the next open rebuilds what it lacks");
        }
        self.lock.take();
        result
    }

    /// Trims through `through`: durable trim point first, then memory, then
    /// whole segments below it.
    fn trim(&mut self, through: u64) -> Result<()> {
        self.check_writable()?;
        self.check_directory()?;
        let next = self.sequencer.next_seqnum();
        if through >= next {
            return Err(Error::invalid_input(format!(
                "cannot trim through {through}: the log ends before it (next seqnum {next})"
            )));
        }
        // The trim point must never be durable ahead of the entries it
        // counts.
        self.sync_if_dirty()?;
        if through < self.shared.read_state().first {
            return Ok(());
        }
        // The streams left without a live entry: their numbering lives on
        // in the trim file (the others' goes on from their live entries).
        let index = Arc::clone(self.shared.state.index());
        let mut next_versions = index.streams_ending_by(through)?;
        next_versions.sort();
        let point = TrimPoint {
            through,
            next_versions,
        };
        trim::store(&self.shared.dir, &point)?;
        if let Err(e) = index.trim(through + 1, &point.next_versions) {
            // The next open records it from the trim file.
            warn!(error = %e, "could not record the trim point in the log index");
        }
        self.ids.forget_through(through);
        let doomed: Vec<Segment> = self.shared.write_state().trim(through);
        self.shared
            .state
            .forget_segments(doomed.iter().map(|s| s.first));
        if !doomed.is_empty() {
            for seg in &doomed {
                if let Err(e) = fsutil::remove_file(&seg.path) {
                    warn!(error = %e, "could not remove a trimmed segment; the next open will");
                }
            }
            if let Err(e) = fsutil::sync_dir(&self.shared.dir) {
                warn!(error = %e, "could not sync the directory after removing trimmed segments");
            }
        }
        Ok(())
    }
}

impl Writer {
    /// Erases the payloads of the first of `seqnums` (a hard delete, see
    /// [`super::erase`]) that share a segment: seals the active segment
    /// first when it holds one of them, rewrites that segment, then drops
    /// what readers cached of the old bytes and gives the index the new
    /// check value of its tip when that was erased. Returns how many it
    /// erased and how many of `seqnums` it dealt with (the handle sends the
    /// rest again, so appends queued meanwhile wait for one segment's
    /// rewrite at a time, not for the whole erase).
    fn erase(&mut self, seqnums: &[u64]) -> Result<(u64, usize)> {
        self.check_writable()?;
        self.check_directory()?;
        let next = self.sequencer.next_seqnum();
        crate::storage::kit::check_erasable(seqnums, next)?;
        let first_live = self.shared.read_state().first;
        let skipped = seqnums.partition_point(|&s| s < first_live);
        let live = &seqnums[skipped..];
        let Some(&head) = live.first() else {
            return Ok((0, seqnums.len()));
        };
        if self.active.as_ref().is_some_and(|a| head >= a.first) {
            self.roll(next)?;
        }
        // The segment of `head`, the last one starting at or below it, and
        // the seqnums it holds.
        let (first, end) = {
            let state = self.shared.read_state();
            let mut from = state.segments.range(..=head);
            let Some((&first, _)) = from.next_back() else {
                return Err(Error::corrupt(format!(
                    "no segment holds live seqnum {head}"
                )));
            };
            let end = state
                .segments
                .range(first + 1..)
                .next()
                .map_or(u64::MAX, |(&f, _)| f);
            (first, end)
        };
        let mine = &live[..live.partition_point(|&s| s < end)];
        let result = erase::rewrite_segment(&self.shared.dir, first, mine);
        // Whatever happened, reads must open the file again.
        self.shared.state.forget_segments([first]);
        let done = result?;
        self.shared.write_state().recent.forget_any(mine);
        if let Some((seqnum, check)) = done.last_check
            && seqnum + 1 == next
        {
            let index = Arc::clone(self.shared.state.index());
            if let Err(e) = index.recheck(seqnum, check) {
                // The next open finds the tip check changed and rebuilds
                // the index: slow, not wrong.
                warn!(error = %e, "could not record the erased tip's check in the log index");
            }
        }
        Ok((done.erased, skipped + mine.len()))
    }
}

/// Groups smaller than this extend the active segment with written zeros,
/// larger ones with a hole (see `Writer::write_group`).
const ZERO_FILL_BELOW: u64 = 256 << 10;

/// The largest piece of zeros written at once when extending a segment.
const ZERO_CHUNK: usize = 1 << 20;

/// Writes zeros over `from..to` of `file`, from `zeros` (sized here once).
fn write_zeros(file: &File, zeros: &mut Vec<u8>, from: u64, to: u64) -> std::io::Result<()> {
    let total = to.saturating_sub(from);
    let chunk = usize::try_from(total).map_or(ZERO_CHUNK, |t| t.min(ZERO_CHUNK));
    if zeros.len() < chunk {
        zeros.resize(chunk, 0);
    }
    let mut at = from;
    while at < to {
        let n = usize::try_from(to - at).map_or(chunk, |r| r.min(chunk));
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// Writes `buf` with the `large` payloads spliced in at their positions,
/// at `offset`: one positioned write per piece (the frame heads and small
/// frames between the payloads, and each payload from its own buffer).
///
/// Not one vectored write of the whole group: on this machine's kernel
/// (6.18, ext4) a `pwritev` of a group of 1 MiB payloads between short
/// heads spent its time copying into the page cache at about a quarter of
/// the speed the same bytes reach in one write per piece (1 MiB records,
/// 16 appenders: 267–276 MB/s against 1,144–1,172 MB/s; BENCHMARKS.md,
/// "Issue 17: preallocated segments and one write per piece"). A few more
/// system calls per
/// group of megabytes cost nothing measurable.
fn write_group_bytes(
    file: &File,
    offset: u64,
    buf: &[u8],
    large: &[(usize, Bytes)],
) -> std::io::Result<()> {
    let mut at = offset;
    let mut from = 0;
    for (cut, data) in large {
        let between = buf.get(from..*cut).unwrap_or(&[]);
        file.write_all_at(between, at)?;
        at += between.len() as u64;
        file.write_all_at(data, at)?;
        at += data.len() as u64;
        from = *cut;
    }
    file.write_all_at(buf.get(from..).unwrap_or(&[]), at)
}

fn payload_bytes(batch: &[NewEntry]) -> usize {
    batch.iter().map(|e| e.data.len()).sum()
}

/// Answers the appends of a group whose write or sync failed: a retry of
/// an append committed before the group keeps its answer whatever became
/// of the group; any other planned append may or may not be durable.
fn answer_unwritten(planned: &mut Vec<Answer>, failure: &Error, group_first: u64) {
    for (reply, outcome) in planned.drain(..) {
        let answer = match outcome {
            Ok(plan)
                if plan.entries().is_empty()
                    && plan.known_through().is_none_or(|s| s < group_first) =>
            {
                Ok(plan.results())
            }
            Ok(_) => Err(Error::new(
                ErrorKind::Indeterminate,
                "the write or sync of this append failed; it may or may not be durable",
            )
            .with_source(failure.clone())),
            Err(conflict) => Err(conflict),
        };
        reply.send(answer);
    }
}
