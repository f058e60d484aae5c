//! A read-only follower of a log directory that another process (or
//! another handle) writes.
//!
//! [`DirFollower`] takes no lock, so it neither waits for the writer nor
//! locks it out. Opening it judges the directory exactly as opening the
//! writer would ([`super::scan`]): damage the writer's open would refuse,
//! the follower's open refuses (`Corrupt`); a torn tail the writer's open
//! would cut, the follower leaves out. It then serves every read, view and
//! subscription from its own index, and a background thread polls the
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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;

use super::kv::DirKv;
use super::read::{ReadState, Shelf};
use super::scan::{self, Accepted, Access, Scan, SegmentRef};
use super::segment::Segment;
use super::trim::{self, TrimPoint};
use crate::error::{Error, ErrorKind, Result};
use crate::kv::KvStore;
use crate::model::{AppendResult, LogEntry, LogTag, MAX_ENTRY_BYTES};
use crate::outage::Outage;
use crate::storage::core::Gate;
use crate::storage::index::LogIndex;
use crate::storage::{Capabilities, CommitFeed, Freshness, NewEntry, Storage, Tip};

/// How a [`DirFollower`] tails its directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirFollowerOptions {
    /// The pause between two looks at the directory: how far the follower
    /// lags the writer, at most (plus the time to read what was added).
    /// Between 1 ms and 60 s; default 100 ms.
    pub poll_interval: Duration,
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

    /// Opens a follower of the log in `path` with `options`.
    ///
    /// Errors: as [`DirFollower::open`]; `InvalidInput` for bad options.
    pub async fn open_with(
        path: impl AsRef<Path>,
        options: DirFollowerOptions,
    ) -> Result<DirFollower> {
        options.validate()?;
        let dir = path.as_ref().to_path_buf();
        // The scan state holds single-threaded caches, so the tailing
        // thread makes the first survey too and hands back the rest.
        let (opened_tx, opened_rx) = tokio::sync::oneshot::channel();
        let (stop, stop_rx) = mpsc::channel();
        let interval = options.poll_interval;
        let thread = std::thread::Builder::new()
            .name("weft-dir-follower".into())
            .spawn(move || match open_blocking(&dir) {
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

    /// Every tag with the number of live entries carrying it, and its
    /// latest version as a primary tag (`None`: it is nobody's primary
    /// tag), sorted by tag.
    pub fn tags(&self) -> Vec<(LogTag, u64, Option<u64>)> {
        let state = self.shared.state.read();
        let mut tags: Vec<(LogTag, u64, Option<u64>)> = state
            .index
            .tag_counts()
            .map(|(t, n)| (t.clone(), n as u64, state.latest_version(t)))
            .collect();
        tags.sort_by(|a, b| a.0.cmp(&b.0));
        tags
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
    }
}

/// Judges the directory and builds the follower's first state.
fn open_blocking(dir: &Path) -> Result<(Arc<Shared>, Tailer)> {
    require_log(dir)?;
    let survey = scan::survey(dir, Access::ReadOnly, 0)?;
    let versions = survey.versions();
    let tailer = Tailer {
        dir: dir.to_path_buf(),
        trim: survey.trim.clone(),
        scan: survey.scan,
    };
    let shared = Arc::new(Shared {
        dir: dir.to_path_buf(),
        state: Shelf::new(ReadState::new(survey.index, versions, survey.segments)),
        gate: Gate::new("the log directory follower"),
    });
    Ok((shared, tailer))
}

/// `Ok` when `dir` is a directory holding a log: a segment, the trim file,
/// the KV directory the writer creates on open, or the `LOCK` file of an
/// earlier build. For callers that must not create a log by opening one.
///
/// Errors: `NotFound` when there is no such directory or it holds no log;
/// `InvalidInput` when `dir` is not a directory; I/O kinds.
pub fn require_log(dir: &Path) -> Result<()> {
    let handle = super::lock::open_dir(dir).map_err(|e| {
        if e.kind() == ErrorKind::NotFound {
            Error::new(
                ErrorKind::NotFound,
                format!("no log at {}: the directory does not exist", dir.display()),
            )
        } else {
            e
        }
    })?;
    drop(handle);
    let (firsts, _) = scan::list(dir)?;
    let marked = ["kv", trim::FILE_NAME, "LOCK"]
        .iter()
        .any(|name| dir.join(name).exists());
    if firsts.is_empty() && !marked {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "no log at {}: the directory holds no weft log",
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// The tailing thread's own state: where the scan stands.
struct Tailer {
    dir: PathBuf,
    trim: Option<TrimPoint>,
    scan: Scan,
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
    /// last poll, made visible and published.
    fn advance(&mut self, shared: &Shared) -> Result<()> {
        // The listing first, then the trim file (see `scan::survey`).
        let (firsts, _) = scan::list(&self.dir)?;
        let trim = trim::load(&self.dir)?;
        self.follow_trim(shared, trim)?;
        let live_from = self.scan.live_from();
        let firsts = &firsts[scan::below_trim(&firsts, live_from)..];

        let before = shared.state.read().index.next();
        let tail = {
            let state = shared.state.read();
            state
                .segments
                .last_key_value()
                .map(|(&first, seg)| (first, seg.end))
        };
        if tail.is_none() {
            scan::check_first(&self.dir, firsts.first().copied(), live_from)?;
        }
        let new: Vec<u64> = firsts
            .iter()
            .copied()
            .filter(|&f| tail.is_none_or(|(t, _)| f > t))
            .collect();
        let result = self.scan_all(shared, tail, &new);
        self.publish(shared, before);
        result
    }

    /// Scans the known last segment from where it stopped, then the new
    /// ones, making each segment's whole batches visible as it goes (what
    /// was accepted stays accepted even when a later step fails).
    fn scan_all(&mut self, shared: &Shared, tail: Option<(u64, u64)>, new: &[u64]) -> Result<()> {
        if let Some((first, end)) = tail {
            let (path, file, relaxed) = {
                let state = shared.state.read();
                let seg = state
                    .segments
                    .get(&first)
                    .ok_or_else(|| Error::internal("the follower lost its last segment"))?;
                (seg.path.clone(), Arc::clone(&seg.file), seg.relaxed)
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
            let mut staged = Vec::new();
            let seg = SegmentRef {
                path: &path,
                file: &file,
                relaxed,
            };
            let scanned = self.scan.segment(seg, end, new.is_empty(), |a| {
                staged.push(a);
                Ok(())
            });
            let mut state = shared.state.write();
            let state = &mut *state;
            if let Some(seg) = state.segments.get_mut(&first) {
                for a in &staged {
                    scan::seg_push(seg, &mut state.index, a)?;
                }
                if let Some(a) = staged.last() {
                    seg.end = a.end;
                }
            }
            if scanned?.torn.is_some() {
                // A write in progress (or torn): wait for the next poll.
                return Ok(());
            }
        }
        for (i, &first) in new.iter().enumerate() {
            let last = i + 1 == new.len();
            let Some(mut seg) = self.scan.open_segment(first, last)? else {
                return Ok(()); // its creation is in progress
            };
            let mut staged: Vec<Accepted> = Vec::new();
            let scanned = self.scan.segment(
                SegmentRef::of(&seg),
                super::segment::HEADER_LEN,
                last,
                |a| {
                    staged.push(a);
                    Ok(())
                },
            );
            if !staged.is_empty() {
                let mut state = shared.state.write();
                let state = &mut *state;
                for a in &staged {
                    scan::seg_push(&mut seg, &mut state.index, a)?;
                }
                if let Some(a) = staged.last() {
                    seg.end = a.end;
                }
                state.segments.insert(first, seg);
            }
            if scanned?.torn.is_some() {
                return Ok(());
            }
        }
        Ok(())
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
        let jumped = self.scan.next() <= point.through;
        self.scan.trimmed(&point);
        let mut state = shared.state.write();
        if jumped {
            // Entries between the scan and the trim point were trimmed
            // before this follower read them: start over at the trim
            // point, with the counters it records.
            let first = point.through + 1;
            let versions: HashMap<LogTag, u64> = point.next_versions.iter().cloned().collect();
            *state = ReadState::new(
                LogIndex::starting_at(first),
                versions,
                Vec::<Segment>::new(),
            );
            // Nothing below `first` will ever be announced.
            shared.state.feed().advance_to(first);
        } else {
            state.index.trim(point.through);
            // Whole segments below the trim point go (never the last).
            let firsts: Vec<u64> = state.segments.keys().copied().collect();
            let n = firsts
                .windows(2)
                .take_while(|w| w[1] <= point.through + 1)
                .count();
            for f in &firsts[..n] {
                state.segments.remove(f);
            }
        }
        drop(state);
        self.trim = Some(point);
        Ok(())
    }

    /// Publishes what became visible since `before` (at most
    /// [`MAX_PUBLISHED`] entries: the last ones).
    fn publish(&self, shared: &Shared, before: u64) {
        let (first, next) = {
            let state = shared.state.read();
            (state.index.first(), state.index.next())
        };
        let from = before
            .max(first)
            .max(next.saturating_sub(MAX_PUBLISHED as u64));
        if from >= next {
            return;
        }
        let seqnums: Vec<u64> = (from..next).collect();
        match shared.state.fetch_blocking(&seqnums) {
            Ok(entries) => shared.state.feed().publish(entries.into()),
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
        Ok(self.shared.state.read().latest_version(tag))
    }

    async fn trim(&self, _through: u64) -> Result<()> {
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
        Ok(())
    }
}

impl Drop for DirFollower {
    fn drop(&mut self) {
        self.stop_thread();
    }
}
