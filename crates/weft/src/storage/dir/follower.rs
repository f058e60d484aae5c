//! A read-only follower of a log directory that another process (or
//! another handle) writes.
//!
//! [`DirFollower`] takes no lock, so it neither waits for the writer nor
//! locks it out. Opening it judges the directory exactly as opening the
//! writer would ([`super::scan`]): damage the writer's open would refuse,
//! the follower's open refuses (`Corrupt`); a torn tail the writer's open
//! would cut, the follower leaves out. It then serves every read, view and
//! subscription from its own log index, and a background thread polls the
//! directory every [`DirFollowerOptions::poll_interval`] for whole batches
//! the writer added — judged by the same scan, from where the last poll
//! stopped — and publishes them on its commit feed. Writes, trims and KV
//! writes fail with `ReadOnly`.
//!
//! What a follower sees, and when:
//!
//! * Only whole append batches. Bytes of a batch still being written (or
//!   torn by a crash) are waited past: the next poll reads from the end of
//!   the last whole batch again.
//! * A batch as soon as its bytes are in the file, which can be a moment
//!   before the writer's `fdatasync` returns. After a crash of the
//!   *machine* (not of the writer process) such a batch may be lost with
//!   the page cache; the follower, on that machine, is gone with it.
//! * The writer's trims: after a poll, reads below the new trim point fail
//!   with `Trimmed`. A follower that lagged behind a trim point starts over
//!   at it.
//! * Segment roll-overs and a restarted writer (whose recovery may cut the
//!   torn tail the follower was waiting past): the follower goes on.
//!
//! Damage found while tailing stops the tailing (`Corrupt`, after a second
//! look to rule out a write in progress): the follower keeps serving what
//! it has, [`DirFollower::stopped`] says why, and its subscriptions end.
//! Transient I/O failures are retried at the next poll.
//!
//! Tip and version queries answer for what the polls have made visible
//! ([`Freshness::AppliedPrefix`]). The tailing thread announces on the
//! commit feed what each poll made visible, after it did: the feed's
//! contract for a tailer.
//!
//! ## Its own index
//!
//! A follower cannot use the writer's index in `<dir>/index/`: fjall, the
//! store underneath, takes an exclusive lock on its directory (there is no
//! read-only open, and an open may write — it replays the store's journal),
//! and a reader must neither block a writer from opening nor write into
//! the log's directory. So a follower keeps an index of its own, built the
//! same way from the same files ([`FollowerIndex`]): in a directory the
//! caller names, where it survives the follower (a later follower of the
//! same log reads only what was appended since — `weft read`, `tail` and
//! `inspect` keep theirs in a per-user cache), or else in a private
//! temporary directory removed with the follower, built from the whole log
//! on every open. Either way its memory is bounded by
//! [`FollowerIndex::memory_budget`], not by the log.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;

use super::check_report::{DirCheck, DirSegmentInfo, DirTagInfo};
use super::kv::DirKv;
use super::options::{MIN_MEMORY_BUDGET, MemorySplit};
use super::presence::require_log;
use super::read::{ReadState, Shelf, TempDir};
use super::recovery;
use super::scan::{self, Access, Repair, Scan, SegmentRef};
use super::segment::{self, HEADER_LEN};
use super::trim::{self, TrimPoint};
use super::walk::Locators;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{Index, IndexOptions};
use crate::kv::KvStore;
use crate::model::{AppendResult, LogEntry, LogTag, MAX_ENTRY_BYTES};
use crate::outage::Outage;
use crate::storage::kit::CommittedBatch;
use crate::storage::kit::Gate;
use crate::storage::{Capabilities, CommitFeed, Freshness, NewEntry, Storage, StreamInfo, Tip};

/// How a [`DirFollower`] tails its directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct DirFollowerOptions {
    /// The pause between two looks at the directory: how far the follower
    /// lags the writer, at most (plus the time to read what was added).
    /// Between 1 ms and 60 s; default 100 ms.
    pub poll_interval: Duration,
}

setters! {
    DirFollowerOptions {
        with_poll_interval => poll_interval: Duration,
    }
}

impl Default for DirFollowerOptions {
    fn default() -> Self {
        DirFollowerOptions {
            poll_interval: Duration::from_millis(100),
        }
    }
}

impl DirFollowerOptions {
    /// Checks the settings.
    ///
    /// Errors: `InvalidInput` for a poll interval outside 1 ms to 60 s.
    pub fn validate(&self) -> Result<()> {
        let ok = Duration::from_millis(1)..=Duration::from_secs(60);
        if !ok.contains(&self.poll_interval) {
            return Err(Error::invalid_input(format!(
                "poll_interval {:?} is outside 1 ms to 60 s",
                self.poll_interval
            )));
        }
        Ok(())
    }
}

/// Where a [`DirFollower`] keeps its own log index (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowerIndex {
    /// A directory of the follower's own (created if absent; never the
    /// log's `index/`): the index survives the follower, so a later one
    /// only reads what was appended since. One follower at a time per
    /// directory: another gets `Locked`. `None` (the default): a private
    /// temporary directory, removed with the follower; every open then
    /// builds the index from the whole log.
    pub dir: Option<PathBuf>,
    /// Memory for the index's caches and the recent entries kept for
    /// readers, divided as [`MemorySplit`] says. At least
    /// [`MIN_MEMORY_BUDGET`]; default 64 MiB.
    pub memory_budget: usize,
}

impl Default for FollowerIndex {
    fn default() -> Self {
        FollowerIndex {
            dir: None,
            memory_budget: 64 << 20,
        }
    }
}

impl FollowerIndex {
    /// Checks the settings.
    ///
    /// Errors: `InvalidInput` for a budget below [`MIN_MEMORY_BUDGET`].
    pub fn validate(&self) -> Result<()> {
        if self.memory_budget < MIN_MEMORY_BUDGET {
            return Err(Error::invalid_input(format!(
                "memory_budget {} is below {MIN_MEMORY_BUDGET} bytes",
                self.memory_budget
            )));
        }
        Ok(())
    }

    fn index_options(&self) -> IndexOptions {
        let split = MemorySplit::of(self.memory_budget);
        IndexOptions {
            cache_bytes: split.index_cache,
            tail_bytes: split.index_tail,
            write_buffer_bytes: split.index_write_buffers,
            ..IndexOptions::default()
        }
    }
}

/// The most entries one poll publishes on the feed. A poll that found more
/// publishes only the last of them; subscribers see the gap and read the
/// rest from storage.
const MAX_PUBLISHED: usize = 4096;

/// How many times damage at the end of the log is looked at again before
/// the tailing stops with it, and the pause before each look: a poll can
/// read a write in progress as damaged bytes.
const DAMAGE_LOOKS: u32 = 3;
const DAMAGE_PAUSE: Duration = Duration::from_millis(20);

#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    /// The read state and the commit feed.
    state: Shelf,
    /// Closed by `close`; stopped (with why) when the tailing stops.
    gate: Gate,
    /// What the open's survey found that opening for writing would change.
    repairs: Vec<Repair>,
    /// The trim point as of the last poll.
    trim: Mutex<Option<TrimPoint>>,
}

/// A read-only handle on a log directory another handle writes (see the
/// module docs).
pub struct DirFollower {
    shared: Arc<Shared>,
    kv: Arc<DirKv>,
    /// Dropping it stops the tailing thread.
    stop: Mutex<Option<mpsc::Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for DirFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirFollower")
            .field("dir", &self.shared.dir)
            .finish_non_exhaustive()
    }
}

impl DirFollower {
    /// Opens a follower of the log in `path` with default options.
    ///
    /// Errors: `NotFound` when there is no log there (nothing is created);
    /// `InvalidInput` when `path` is not a directory; `Corrupt` for
    /// whatever would make the writer's open refuse the log; I/O kinds.
    pub async fn open(path: impl AsRef<Path>) -> Result<DirFollower> {
        DirFollower::open_with(path, DirFollowerOptions::default()).await
    }

    /// Opens a follower of the log in `path` with `options`, its index in
    /// a private temporary directory.
    ///
    /// Errors: as [`DirFollower::open`]; `InvalidInput` for bad options.
    pub async fn open_with(
        path: impl AsRef<Path>,
        options: DirFollowerOptions,
    ) -> Result<DirFollower> {
        DirFollower::open_indexed(path, options, FollowerIndex::default()).await
    }

    /// Opens a follower of the log in `path` with `options`, its index
    /// where `index` says.
    ///
    /// Errors: as [`DirFollower::open`]; `InvalidInput` for bad options;
    /// `Locked` when another follower uses the index directory now.
    pub async fn open_indexed(
        path: impl AsRef<Path>,
        options: DirFollowerOptions,
        index: FollowerIndex,
    ) -> Result<DirFollower> {
        options.validate()?;
        index.validate()?;
        let dir = path.as_ref().to_path_buf();
        // The scan state holds single-threaded caches, so the tailing
        // thread makes the first survey too and hands back the rest.
        let (opened_tx, opened_rx) = tokio::sync::oneshot::channel();
        let (stop, stop_rx) = mpsc::channel();
        let interval = options.poll_interval;
        let thread = std::thread::Builder::new()
            .name("weft-dir-follower".into())
            .spawn(move || match open_blocking(&dir, &index) {
                Ok((shared, tailer)) => {
                    let _ = opened_tx.send(Ok(Arc::clone(&shared)));
                    tail(tailer, &shared, interval, &stop_rx);
                }
                Err(e) => {
                    let _ = opened_tx.send(Err(e));
                }
            })
            .map_err(|e| Error::io("start the follower thread", e))?;
        let shared = opened_rx
            .await
            .map_err(|_| Error::internal("the follower thread ended before opening"))??;
        let kv = Arc::new(DirKv::open_read_only(&shared.dir.join("kv")));
        Ok(DirFollower {
            shared,
            kv,
            stop: Mutex::new(Some(stop)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The directory this follower reads.
    pub fn path(&self) -> &Path {
        &self.shared.dir
    }

    /// Why the follower stopped tailing, if it did (it then serves what it
    /// has and its subscriptions end).
    pub fn stopped(&self) -> Option<String> {
        self.stop_error().map(|e| e.to_string())
    }

    /// The error that stopped the tailing, if one did.
    pub fn stop_error(&self) -> Option<Error> {
        self.shared.gate.stopped()
    }

    /// What the follower holds, as [`check`](super::check()) reports it
    /// but from its index, without reading the log: its range, trim point,
    /// segments, the first `max_tags` tags in tag order with their live
    /// entries and latest versions, and what its open found that opening
    /// for writing would change (a torn tail among the problems). Costs
    /// the tags listed and their entries' index rows, not the log's
    /// length.
    ///
    /// Errors: the index's (`Corrupt`, I/O kinds).
    pub async fn inspect(&self, max_tags: usize) -> Result<DirCheck> {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || inspect_blocking(&shared, max_tags))
            .await
            .map_err(|e| Error::internal(format!("inspect task failed: {e}")))?
    }

    fn check_open(&self) -> Result<()> {
        self.shared.gate.check_open()
    }

    fn read_only() -> Error {
        Error::new(
            ErrorKind::ReadOnly,
            "this is a read-only follower of a log directory; write through its writer",
        )
    }

    fn stop_thread(&self) {
        self.stop.lock().unwrap_or_else(|p| p.into_inner()).take();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            tracing::error!("the log directory follower's thread panicked");
        }
        if !self.shared.gate.is_closed()
            && let Err(e) = self.shared.state.index().release()
        {
            tracing::warn!(error = %e, "could not close the follower's log index");
        }
    }
}

/// What [`DirFollower::inspect`] reports.
fn inspect_blocking(shared: &Shared, max_tags: usize) -> Result<DirCheck> {
    let index = shared.state.index();
    let (first, next, segments) = {
        let state = shared.state.read();
        let segments: Vec<(PathBuf, u64, u64)> = state
            .segments
            .values()
            .map(|s| (s.path.clone(), s.first, s.entries()))
            .collect();
        (state.first, state.next, segments)
    };
    let mut report = DirCheck::empty(&shared.dir);
    report.first_seqnum = first;
    report.next_seqnum = next;
    report.entries = next - first;
    report.trimmed_through = shared
        .trim
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|t| t.through);
    for (path, first_seqnum, entries) in segments {
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        report.bytes += bytes;
        report.segments.push(DirSegmentInfo {
            file: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            first_seqnum,
            entries,
            bytes,
        });
    }
    // Tags of trimmed-away streams stay in the index; list live ones.
    let mut skip = 0usize;
    while report.tags.len() < max_tags {
        let want = max_tags - report.tags.len() + skip;
        let rows = index.tags(want)?;
        let more = rows.len() == want;
        for (tag, next_version) in rows.into_iter().skip(skip) {
            skip += 1;
            let entries = index.count(&tag)?;
            if entries > 0 && report.tags.len() < max_tags {
                report.tags.push(DirTagInfo {
                    tag,
                    entries,
                    latest_version: next_version.checked_sub(1),
                });
            }
        }
        if !more {
            break;
        }
    }
    for repair in &shared.repairs {
        if repair.drops_data() {
            report.problems.push(repair.to_string());
        } else {
            report.notes.push(repair.to_string());
        }
    }
    Ok(report)
}

/// A private temporary directory for a follower's index.
fn temp_index_dir() -> Result<PathBuf> {
    use rand::Rng as _;
    let base = std::env::temp_dir();
    let mut rng = crate::random::rng(None);
    for _ in 0..16 {
        let path = base.join(format!(
            "weft-follower-index-{}-{:016x}",
            std::process::id(),
            rng.random::<u64>()
        ));
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(format!("create {}", path.display()), e)),
        }
    }
    Err(Error::internal(
        "no free name for a temporary log index directory",
    ))
}

/// The identity a follower's index records: the log it follows, by path.
fn follower_identity(dir: &Path) -> Vec<u8> {
    let path = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut id = b"weft dir follower\0".to_vec();
    id.extend_from_slice(path.as_os_str().as_encoded_bytes());
    id
}

/// Judges the directory and builds the follower's first state.
fn open_blocking(dir: &Path, settings: &FollowerIndex) -> Result<(Arc<Shared>, Tailer)> {
    require_log(dir)?;
    let (index_dir, temp) = match &settings.dir {
        Some(d) => (d.clone(), None),
        None => {
            let d = temp_index_dir()?;
            (d.clone(), Some(TempDir(d)))
        }
    };
    let split = MemorySplit::of(settings.memory_budget);
    let index = Arc::new(Index::open(
        &index_dir,
        &follower_identity(dir),
        settings.index_options(),
    )?);
    let opened = recovery::open_indexed(dir, &index, Access::ReadOnly)?;
    let survey = opened.survey;
    let first = survey.live_from();
    let next = survey.next_seqnum;
    let tailer = Tailer {
        dir: dir.to_path_buf(),
        trim: survey.trim.clone(),
        scan: survey.scan,
        locators: opened.locators,
        index: Arc::clone(&index),
        recent_bytes: split.recent_entries,
        tail_file: None,
    };
    let shared = Arc::new(Shared {
        dir: dir.to_path_buf(),
        state: Shelf::new(
            ReadState::new(first, next, survey.segments, split.recent_entries),
            index,
            temp,
        ),
        gate: Gate::new("the log directory follower"),
        repairs: survey.repairs,
        trim: Mutex::new(survey.trim),
    });
    Ok((shared, tailer))
}

/// The tailing thread's own state: where the scan stands.
struct Tailer {
    dir: PathBuf,
    trim: Option<TrimPoint>,
    scan: Scan,
    /// Which entries get a locator in the index.
    locators: Locators,
    index: Arc<Index>,
    /// The budget of the ring of recent entries.
    recent_bytes: usize,
    /// The last segment, open.
    tail_file: Option<(u64, File)>,
}

/// Polls until told to stop (or the follower is gone).
fn tail(mut tailer: Tailer, shared: &Shared, interval: Duration, stop: &mpsc::Receiver<()>) {
    let mut outage = Outage::new("log directory follower poll");
    let mut looks = 0u32;
    loop {
        let pause = if looks > 0 { DAMAGE_PAUSE } else { interval };
        match stop.recv_timeout(pause) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        match tailer.advance(shared) {
            Ok(()) => {
                looks = 0;
                outage.recovered();
            }
            Err(e) if e.kind() == ErrorKind::Corrupt && looks + 1 < DAMAGE_LOOKS => {
                tracing::debug!(error = %e, "the log looks damaged; looking again");
                looks += 1;
            }
            Err(e) if retryable(e.kind()) => {
                looks = 0;
                outage.failed(&e);
            }
            Err(e) => {
                tracing::error!(error = %e, "the log directory follower stopped tailing");
                shared.gate.stop(&e);
                shared.state.feed().close();
                return;
            }
        }
    }
}

/// Failures the next poll may not see: a file that vanished between the
/// listing and its open (a trim), resources, interrupted calls.
fn retryable(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::NotFound | ErrorKind::Unavailable)
}

impl Tailer {
    /// One poll: the trim point, then the whole batches added since the
    /// last poll, recorded in the index, made visible and published.
    fn advance(&mut self, shared: &Shared) -> Result<()> {
        // The listing first, then the trim file (see `scan::layout`).
        let (firsts, _) = scan::list(&self.dir)?;
        let trim = trim::load(&self.dir)?;
        self.follow_trim(shared, trim)?;
        let live_from = self.scan.live_from();
        let firsts = &firsts[scan::below_trim(&firsts, live_from)..];

        let before = shared.state.read().next;
        let tail = {
            let state = shared.state.read();
            state
                .segments
                .last_key_value()
                .map(|(&first, seg)| (first, seg.end, seg.relaxed))
        };
        if tail.is_none() {
            scan::check_first(&self.dir, firsts.first().copied(), live_from)?;
        }
        let new: Vec<u64> = firsts
            .iter()
            .copied()
            .filter(|&f| tail.is_none_or(|(t, _, _)| f > t))
            .collect();
        let result = self.scan_all(shared, tail, &new);
        self.publish(shared, before);
        result
    }

    /// Scans the known last segment from where it stopped, then the new
    /// ones, recording each whole batch in the index as it is accepted and
    /// making each segment's batches visible after it (what was accepted
    /// stays accepted even when a later step fails).
    fn scan_all(
        &mut self,
        shared: &Shared,
        tail: Option<(u64, u64, bool)>,
        new: &[u64],
    ) -> Result<()> {
        if let Some((first, end, relaxed)) = tail {
            let path = self.dir.join(segment::file_name(first));
            if self.tail_file.as_ref().is_none_or(|(f, _)| *f != first) {
                self.tail_file = Some((first, segment::open_file(&path, false)?));
            }
            let Some((_, file)) = self.tail_file.take() else {
                return Err(Error::internal("the follower lost its last segment"));
            };
            let len = file
                .metadata()
                .map_err(|e| Error::io(format!("stat {}", path.display()), e))?
                .len();
            if len < end {
                return Err(Error::corrupt(format!(
                    "{}: the segment shrank to {len} bytes, below entries already read (to {end})",
                    path.display()
                )));
            }
            let seg = SegmentRef {
                first,
                path: &path,
                file: &file,
                relaxed,
            };
            let (scanned, accepted) = self.scan_segment(seg, end, new.is_empty());
            self.tail_file = Some((first, file));
            if let Some((next, end)) = accepted {
                let mut state = shared.state.write();
                if let Some(seg) = state.segments.get_mut(&first) {
                    seg.end = end;
                    seg.next = next;
                }
                state.next = next;
            }
            if scanned?.torn.is_some() {
                // A write in progress (or torn): wait for the next poll.
                return Ok(());
            }
        }
        for (i, &first) in new.iter().enumerate() {
            let last = i + 1 == new.len();
            let Some((mut seg, file)) = self.scan.open_segment(first, last, false)? else {
                return Ok(()); // its creation is in progress
            };
            let (scanned, accepted) =
                self.scan_segment(SegmentRef::of(&seg, &file), HEADER_LEN, last);
            if let Some((next, end)) = accepted {
                seg.end = end;
                seg.next = next;
                let mut state = shared.state.write();
                state.next = next;
                state.segments.insert(first, seg);
                drop(state);
                self.tail_file = Some((first, file));
            }
            if scanned?.torn.is_some() {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Scans `seg` from byte `from`, recording every whole batch in the
    /// index; returns the scan's outcome and, if it accepted any live
    /// entry, the seqnum after it and where its batch ends.
    fn scan_segment(
        &mut self,
        seg: SegmentRef<'_>,
        from: u64,
        last: bool,
    ) -> (Result<scan::Scanned>, Option<(u64, u64)>) {
        let index = &self.index;
        let locators = &mut self.locators;
        let mut accepted: Option<(u64, u64)> = None;
        let scanned = self.scan.segment(seg, from, last, |a| {
            if a.live {
                index.push(&[locators.index_entry(a)])?;
            }
            accepted = Some((a.seqnum + 1, a.end));
            Ok(())
        });
        (scanned, accepted)
    }

    /// Applies a trim the writer made since the last poll.
    fn follow_trim(&mut self, shared: &Shared, trim: Option<TrimPoint>) -> Result<()> {
        let old = self.trim.as_ref().map(|t| t.through);
        let new = trim.as_ref().map(|t| t.through);
        if new < old {
            return Err(Error::corrupt(format!(
                "{}: the trim point went back from {old:?} to {new:?}",
                self.dir.display()
            )));
        }
        let Some(point) = trim.filter(|_| new != old) else {
            return Ok(());
        };
        let first = point.through + 1;
        let jumped = self.scan.next() <= point.through;
        if jumped {
            // Entries between the scan and the trim point were trimmed
            // before this follower read them: start over at the trim
            // point, with the counters it records.
            self.index.start_over(
                first,
                &point.next_versions,
                "the log was trimmed past what this follower had read",
            )?;
            self.scan.trimmed(&point);
            self.locators = Locators::default();
            self.tail_file = None;
            *shared.state.write() = ReadState::new(first, first, Vec::new(), self.recent_bytes);
            // Nothing below `first` will ever be announced.
            shared.state.feed().advance_to(first);
        } else {
            self.scan.trimmed(&point);
            self.index.trim(first, &point.next_versions)?;
            let doomed = shared.state.write().trim(point.through);
            shared.state.forget_segments(doomed.iter().map(|s| s.first));
        }
        *shared.trim.lock().unwrap_or_else(|p| p.into_inner()) = Some(point.clone());
        self.trim = Some(point);
        Ok(())
    }

    /// Publishes what became visible since `before` (at most
    /// [`MAX_PUBLISHED`] entries: the last ones), keeping them among the
    /// recent entries.
    fn publish(&self, shared: &Shared, before: u64) {
        let (first, next) = {
            let state = shared.state.read();
            (state.first, state.next)
        };
        let from = before
            .max(first)
            .max(next.saturating_sub(MAX_PUBLISHED as u64));
        if from >= next {
            return;
        }
        let seqnums: Vec<u64> = (from..next).collect();
        match shared.state.fetch_blocking(&seqnums) {
            Ok(entries) => {
                let batch = CommittedBatch::from(entries);
                shared.state.write().recent.extend(&batch);
                shared.state.feed().publish(batch);
            }
            // The entries are visible; subscribers that miss them here
            // read them from storage when the next batch shows the gap.
            Err(e) => tracing::warn!(error = %e, "could not read new entries for the feed"),
        }
    }
}

#[async_trait]
impl Storage for DirFollower {
    async fn append(&self, _batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        Err(Self::read_only())
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

    async fn trim(&self, _through: u64) -> Result<()> {
        Err(Self::read_only())
    }

    async fn erase(&self, _seqnums: &[u64]) -> Result<u64> {
        Err(Self::read_only())
    }

    fn feed(&self) -> &CommitFeed {
        self.shared.state.feed()
    }

    fn kv(&self) -> Result<Arc<dyn KvStore>> {
        self.check_open()?;
        Ok(self.kv.clone())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_only: true,
            durable: true,
            max_entry_bytes: MAX_ENTRY_BYTES,
            freshness: Freshness::AppliedPrefix,
        }
    }

    async fn close(&self) -> Result<()> {
        if !self.shared.gate.close() {
            return Ok(());
        }
        self.stop.lock().unwrap_or_else(|p| p.into_inner()).take();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            tokio::task::spawn_blocking(move || thread.join())
                .await
                .map_err(|e| Error::internal(format!("close task failed: {e}")))?
                .map_err(|_| Error::internal("the log directory follower's thread panicked"))?;
        }
        self.shared.state.feed().close();
        // Leave its own index covering what it read, so the next follower
        // on the same index directory reads on from there.
        let index = Arc::clone(self.shared.state.index());
        tokio::task::spawn_blocking(move || index.release())
            .await
            .map_err(|e| Error::internal(format!("close task failed: {e}")))??;
        Ok(())
    }
}

impl Drop for DirFollower {
    fn drop(&mut self) {
        self.stop_thread();
    }
}
