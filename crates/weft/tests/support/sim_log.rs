//! The deterministic simulation one level up: the shared log on a bucket
//! (`BucketStorage` writers, a `BucketFollower`) through the `Log` API, with
//! tags, stream versions, conditional appends and atomic batches.
//!
//! Same machinery as `sim.rs` (fault store over an in-memory store, paused
//! single-thread runtime, a supervisor failing over on a seeded schedule,
//! zombie writers, recorded history, manifest states recorded below the
//! faults); the checker adds what the log promises on top of the WAL:
//!
//! * seqnums dense from 0; each primary tag's versions dense from 0;
//! * an acknowledged append (or batch) is in the log whole, at the seqnums
//!   and versions it was told; a conditional one got exactly the version it
//!   asked for; a cleanly failed one is absent;
//! * real-time order of acknowledged appends;
//! * reads on the current writer see every append acknowledged before them
//!   and nothing invoked after them; a `Conflict` from the current writer
//!   names a next version that some linearization allows;
//! * reads on any writer (zombies included) and on the follower are
//!   prefixes of the final log, the follower's never go backwards, and the
//!   follower ends equal to the final log;
//! * exactly-once appends: most appends carry append ids (their payloads),
//!   and every `Indeterminate` one is retried with them on the newest
//!   writer (across failovers) until it gets an answer; each id is in the
//!   log exactly once, in the frame of the entry it names, and a retried
//!   append that was acknowledged is where it was told;
//! * epochs and manifest history as in `sim.rs`.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use object_store::path::Path;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;
use weft::clock::ManualClock;
use weft::format::decode_segment;
use weft::format::frame;
use weft::objects::RetryPolicy;
use weft::storage::bucket::{BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage};
use weft::wal::Manifest;
use weft::{AppendRequest, ErrorDetail, ErrorKind, Log, LogEntry, LogTag, Position, Storage};
use weft_testkit::fault::{FaultConfig, FaultStats, FaultStore};

use super::sim::{
    Profile, Recorder, check_manifest_history, expand, faults, load_pages, ms, tiny_checkpoints,
};

const PREFIX: &str = "log";
const TAGS: [&str; 3] = ["acct:0", "acct:1", "acct:2"];

/// What one run produced (see [`super::sim::SimRun`]).
#[derive(Debug)]
pub struct LogRun {
    pub seed: u64,
    pub trace: Vec<String>,
    pub manifests: Vec<Bytes>,
    pub violations: Vec<String>,
    pub acked: usize,
    pub conflicts: usize,
    pub fenced: usize,
    /// Appends retried with their ids after `Indeterminate`, and how many
    /// of those retries were answered with an original that had landed.
    pub retried: usize,
    pub retried_landed: usize,
    pub writers: usize,
    pub stats: FaultStats,
    pub pages: usize,
    /// Writers that opened from a stream-state checkpoint.
    pub from_checkpoint: usize,
}

#[derive(Clone, Debug)]
enum OpKind {
    /// One append (`expected` set: `append_if`) or an atomic batch.
    Append {
        writer: usize,
        entries: Vec<(LogTag, Bytes)>,
        expected: Option<u64>,
    },
    Open {
        writer: usize,
    },
    /// `read_log` on writer `writer`.
    WriterRead {
        writer: usize,
    },
    /// A read of the follower's whole log.
    FollowerRead,
    Close {
        writer: usize,
    },
}

#[derive(Clone, Debug, PartialEq)]
enum OpResult {
    Pending,
    /// (seqnum, stream version) of each entry.
    Acked(Vec<(u64, u64)>),
    Failed(ErrorKind, Option<ErrorDetail>),
    Opened(u64),
    /// Payloads read, from seqnum 0 on.
    Read(Vec<Bytes>),
    Error(ErrorKind),
    Closed,
}

#[derive(Clone, Debug)]
struct OpRecord {
    kind: OpKind,
    invoked: u64,
    returned: Option<u64>,
    result: OpResult,
}

struct Writer {
    log: Log,
    epoch: u64,
    run: String,
}

struct World {
    start: Instant,
    clock: AtomicU64,
    ops: Mutex<Vec<OpRecord>>,
    trace: Mutex<Vec<String>>,
    writers: Mutex<Vec<Writer>>,
    violations: Mutex<Vec<String>>,
    appenders_done: AtomicBool,
    /// Writers an appender saw fail (they stop for good): the supervisor
    /// replaces them, also while the appender's retries are still going.
    failed_writers: Mutex<Vec<usize>>,
    /// (retried, answered with an original that had landed)
    retries: Mutex<(usize, usize)>,
    from_checkpoint: AtomicUsize,
}

impl World {
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }

    fn note(&self, what: String) {
        let at = self.start.elapsed().as_micros();
        self.trace
            .lock()
            .unwrap()
            .push(format!("{at:>10}us {what}"));
    }

    fn invoke(&self, kind: OpKind) -> usize {
        let invoked = self.tick();
        let mut ops = self.ops.lock().unwrap();
        let id = ops.len();
        self.note(format!("#{id} invoke {kind:?}"));
        ops.push(OpRecord {
            kind,
            invoked,
            returned: None,
            result: OpResult::Pending,
        });
        id
    }

    fn complete(&self, id: usize, result: OpResult) {
        let returned = self.tick();
        self.note(format!("#{id} return {result:?}"));
        let mut ops = self.ops.lock().unwrap();
        ops[id].returned = Some(returned);
        ops[id].result = result;
    }

    fn violation(&self, what: String) {
        self.note(format!("VIOLATION {what}"));
        self.violations.lock().unwrap().push(what);
    }

    fn writer(&self, index: usize) -> Log {
        self.writers.lock().unwrap()[index].log.clone()
    }

    fn writer_count(&self) -> usize {
        self.writers.lock().unwrap().len()
    }
}

#[derive(Clone, Debug)]
struct Plan {
    faults: FaultConfig,
    retry: RetryPolicy,
    flush_interval: Duration,
    appenders: usize,
    appends_each: usize,
    zombie_chance: f64,
    failovers: Vec<Duration>,
    poll_interval: Duration,
    read_interval: Duration,
}

fn plan(seed: u64, profile: Profile) -> Plan {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x1095_5111);
    let (faults, retry) = faults(seed, profile, &mut rng);
    let n = rng.random_range(0..=3);
    let mut failovers: Vec<Duration> = (0..n).map(|_| ms(&mut rng, 10, 400)).collect();
    failovers.sort();
    Plan {
        faults,
        retry,
        flush_interval: ms(&mut rng, 2, 15),
        appenders: rng.random_range(2..=4),
        appends_each: rng.random_range(4..=10),
        zombie_chance: rng.random_range(0.0..0.3),
        failovers,
        poll_interval: ms(&mut rng, 2, 30),
        read_interval: ms(&mut rng, 10, 60),
    }
}

const SIM_LIMIT: Duration = Duration::from_secs(3_600);

/// Runs one seed of the bucket-log simulation and checks it.
pub fn simulate_log(seed: u64, profile: Profile) -> LogRun {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("build the simulation runtime");
    rt.block_on(run(seed, profile))
}

async fn run(seed: u64, profile: Profile) -> LogRun {
    let plan = plan(seed, profile);
    let memory = Arc::new(InMemory::new());
    let recorder = Recorder::new(memory.clone(), &format!("{PREFIX}/manifest"));
    let faults = FaultStore::wrap(recorder.store(), plan.faults.clone());
    let world = Arc::new(World {
        start: Instant::now(),
        clock: AtomicU64::new(0),
        ops: Mutex::new(Vec::new()),
        trace: Mutex::new(Vec::new()),
        writers: Mutex::new(Vec::new()),
        violations: Mutex::new(Vec::new()),
        appenders_done: AtomicBool::new(false),
        failed_writers: Mutex::new(Vec::new()),
        retries: Mutex::new((0, 0)),
        from_checkpoint: AtomicUsize::new(0),
    });
    world.note(format!("seed {seed} {profile:?} {plan:?}"));
    let store: Arc<dyn ObjectStore> = faults.clone();
    let follower =
        tokio::time::timeout(SIM_LIMIT, drive(seed, &plan, world.clone(), store.clone()))
            .await
            .unwrap_or_else(|_| {
                world.violation(format!(
                    "the run did not finish within {SIM_LIMIT:?} of simulated time"
                ));
                None
            });

    let inner: Arc<dyn ObjectStore> = memory;
    let pages = match load_pages(&inner, &format!("{PREFIX}/history")).await {
        Ok(pages) => pages,
        Err(e) => {
            world.violation(format!("the history pages cannot be read: {e}"));
            HashMap::new()
        }
    };
    let final_log = match final_log(&inner, &pages).await {
        Ok(log) => log,
        Err(e) => {
            world.violation(format!("the final log cannot be read: {e}"));
            Vec::new()
        }
    };
    // The follower, which tailed through the faults, ends equal to it.
    if let Some(follower) = follower {
        let want = final_log.len() as u64;
        let caught_up = tokio::time::timeout(Duration::from_secs(600), async {
            while follower.tip().await.unwrap().next < want && follower.stopped().is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        match follower.read(None, 0, usize::MAX).await {
            Ok(seen) if caught_up.is_ok() && seen == final_log => {}
            Ok(seen) => world.violation(format!(
                "the follower ended with {} of {} entries (stopped: {:?})",
                seen.len(),
                final_log.len(),
                follower.stopped()
            )),
            Err(e) => world.violation(format!("the follower cannot be read: {e}")),
        }
        let _ = follower.close().await;
    }

    let ops = world.ops.lock().unwrap().clone();
    let runs: HashMap<String, u64> = world
        .writers
        .lock()
        .unwrap()
        .iter()
        .map(|w| (w.run.clone(), w.epoch))
        .collect();
    let manifests = recorder.history();
    let mut violations = std::mem::take(&mut *world.violations.lock().unwrap());
    violations.extend(check(&ops, &final_log));
    violations.extend(check_manifest_history(&manifests, &pages, &runs));
    let appends = || {
        ops.iter()
            .filter(|o| matches!(o.kind, OpKind::Append { .. }))
    };
    let acked = appends()
        .filter(|o| matches!(o.result, OpResult::Acked(_)))
        .count();
    let conflicts = appends()
        .filter(|o| {
            matches!(
                o.result,
                OpResult::Failed(
                    ErrorKind::Conflict,
                    Some(ErrorDetail::VersionConflict { .. })
                )
            )
        })
        .count();
    let fenced = appends()
        .filter(|o| matches!(o.result, OpResult::Failed(ErrorKind::Fenced, _)))
        .count();
    let trace = std::mem::take(&mut *world.trace.lock().unwrap());
    let (retried, retried_landed) = *world.retries.lock().unwrap();
    LogRun {
        seed,
        trace,
        manifests,
        violations,
        acked,
        conflicts,
        fenced,
        retried,
        retried_landed,
        writers: world.writer_count(),
        stats: faults.stats(),
        pages: pages.len(),
        from_checkpoint: world.from_checkpoint.load(Ordering::SeqCst),
    }
}

/// Runs the writers, appenders and readers; returns the follower.
async fn drive(
    seed: u64,
    plan: &Plan,
    world: Arc<World>,
    store: Arc<dyn ObjectStore>,
) -> Option<BucketFollower> {
    if !open_writer(seed, plan, &world, &store).await {
        world.violation("no writer could be opened".into());
        return None;
    }
    let follower = open_follower(plan, &store).await;
    let Some(follower) = follower else {
        world.violation("no follower could be opened".into());
        return None;
    };
    let follower = Arc::new(follower);
    let supervisor = tokio::spawn(supervise(seed, plan.clone(), world.clone(), store.clone()));
    let reader = tokio::spawn(read_follower(
        plan.read_interval,
        world.clone(),
        follower.clone(),
    ));
    let appenders: Vec<_> = (0..plan.appenders)
        .map(|a| {
            let rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(37).wrapping_add(a as u64));
            tokio::spawn(append_some(rng, plan.clone(), world.clone()))
        })
        .collect();
    for a in appenders {
        a.await.expect("appender task");
    }
    world.appenders_done.store(true, Ordering::SeqCst);
    supervisor.await.expect("supervisor task");
    reader.await.expect("reader task");
    for index in 0..world.writer_count() {
        let id = world.invoke(OpKind::Close { writer: index });
        let result = match world.writer(index).storage().close().await {
            Ok(()) => OpResult::Closed,
            Err(e) => OpResult::Error(e.kind()),
        };
        world.complete(id, result);
    }
    Arc::into_inner(follower)
}

async fn open_follower(plan: &Plan, store: &Arc<dyn ObjectStore>) -> Option<BucketFollower> {
    for _ in 0..50 {
        let options = BucketFollowerOptions::default()
            .with_poll_interval(plan.poll_interval)
            .with_prefetch(3)
            .with_numbers_in_memory(true);
        if let Ok(f) = BucketFollower::open(store.clone(), PREFIX, options).await {
            return Some(f);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

async fn open_writer(seed: u64, plan: &Plan, world: &World, store: &Arc<dyn ObjectStore>) -> bool {
    for _ in 0..50 {
        let index = world.writer_count();
        let id = world.invoke(OpKind::Open { writer: index });
        let options = BucketOptions::default()
            .with_flush_interval(plan.flush_interval)
            .with_retry(plan.retry.clone())
            .with_seed(Some(
                seed.wrapping_mul(1_000).wrapping_add(index as u64 + 1),
            ))
            .with_checkpoint(tiny_checkpoints(seed))
            .with_state_checkpoint_entries([0, 2, 5][(seed % 3) as usize])
            .with_numbers_in_memory(true)
            .with_take_over(true);
        let opened = BucketStorage::open_with_clock(
            store.clone(),
            PREFIX,
            options,
            ManualClock::new(1_700_000_000_000),
        )
        .await;
        match opened {
            Ok(storage) => {
                if storage.filling_in() {
                    world.from_checkpoint.fetch_add(1, Ordering::SeqCst);
                }
                let (epoch, run) = (storage.epoch(), storage.run_id().to_string());
                world.writers.lock().unwrap().push(Writer {
                    log: Log::new(storage),
                    epoch,
                    run,
                });
                world.complete(id, OpResult::Opened(epoch));
                return true;
            }
            Err(e) => {
                world.complete(id, OpResult::Error(e.kind()));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    false
}

/// Fails over on schedule, and replaces a writer that stopped accepting.
async fn supervise(seed: u64, plan: Plan, world: Arc<World>, store: Arc<dyn ObjectStore>) {
    let mut schedule = plan.failovers.clone().into_iter().peekable();
    let mut stopped_seen = 0;
    while !world.appenders_done.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let due = schedule
            .peek()
            .is_some_and(|at| world.start.elapsed() >= *at);
        if due {
            schedule.next();
        }
        // A writer that failed an append stops for good: replace it once.
        let current = world.writer_count() - 1;
        let stopped = {
            let ops = world.ops.lock().unwrap();
            ops.iter().any(|o| {
                matches!(o.kind, OpKind::Append { writer, .. } if writer == current)
                    && matches!(
                        o.result,
                        OpResult::Failed(
                            ErrorKind::Closed
                                | ErrorKind::Unavailable
                                | ErrorKind::Indeterminate
                                | ErrorKind::Internal,
                            _
                        )
                    )
            })
        };
        let stopped = stopped || world.failed_writers.lock().unwrap().contains(&current);
        if stopped && stopped_seen <= current {
            stopped_seen = current + 1;
        } else if !due {
            continue;
        }
        if !open_writer(seed, &plan, &world, &store).await {
            world.violation("no replacement writer could be opened".into());
            return;
        }
    }
}

async fn append_some(mut rng: ChaCha8Rng, plan: Plan, world: Arc<World>) {
    for _ in 0..plan.appends_each {
        tokio::time::sleep(ms(&mut rng, 0, 25)).await;
        let count = world.writer_count();
        let writer = if count > 1 && rng.random_bool(plan.zombie_chance) {
            rng.random_range(0..count - 1)
        } else {
            count - 1
        };
        let log = world.writer(writer);
        let tag: LogTag = TAGS[rng.random_range(0..TAGS.len())].parse().unwrap();
        let shape = rng.random_range(0..10);
        // Asked before the op's id is taken: a writer that opened from a
        // state checkpoint may read the stream's last entry to answer (a
        // store call, which lets other tasks run, and can fail under the
        // faults: then this op is skipped).
        let known_next = if (2..=4).contains(&shape) {
            match log.next_version(&tag).await {
                Ok(next) => Some(next),
                Err(e) if matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::Internal) => {
                    world.violation(format!("next_version of {tag}: {e}"));
                    continue;
                }
                Err(_) => continue,
            }
        } else {
            None
        };
        let id_hint = world.ops.lock().unwrap().len();
        let (entries, expected) = match shape {
            // A batch of two, on two streams.
            0..=1 => {
                let other: LogTag = TAGS[rng.random_range(0..TAGS.len())].parse().unwrap();
                (
                    vec![
                        (tag, Bytes::from(format!("op{id_hint}e0"))),
                        (other, Bytes::from(format!("op{id_hint}e1"))),
                    ],
                    None,
                )
            }
            // Conditional, usually on what the writer last saw.
            2..=4 => {
                let next = known_next.unwrap_or_default();
                let expected = if rng.random_bool(0.8) {
                    next
                } else {
                    next.saturating_sub(1)
                };
                (
                    vec![(tag, Bytes::from(format!("op{id_hint}e0")))],
                    Some(expected),
                )
            }
            _ => (vec![(tag, Bytes::from(format!("op{id_hint}e0")))], None),
        };
        let with_ids = rng.random_bool(0.85);
        let id = world.invoke(OpKind::Append {
            writer,
            entries: entries.clone(),
            expected,
        });
        assert_eq!(id, id_hint, "single-threaded: nothing ran in between");
        // An entry's append id is its payload, so the checker can match
        // them up in the final log.
        let requests: Vec<AppendRequest> = entries
            .iter()
            .map(|(t, d)| {
                let r = AppendRequest::new(t.clone(), d.clone());
                if with_ids {
                    r.with_id(String::from_utf8(d.to_vec()).unwrap())
                } else {
                    r
                }
            })
            .collect();
        let mut result = attempt(&log, requests.clone(), expected).await;
        if with_ids && is_unknown(&result) {
            result = retry(&mut rng, &world, id, writer, requests, expected, result).await;
        }
        match result {
            Ok(results) => {
                let at = results
                    .iter()
                    .map(|r| (r.seqnum, r.stream_version))
                    .collect();
                world.complete(id, OpResult::Acked(at));
                // Read your writes on the writer that acknowledged it.
                read_writer(&world, writer).await;
            }
            Err(e) => world.complete(id, OpResult::Failed(e.kind(), e.detail().cloned())),
        }
    }
}

/// One try of an append: `append_if`, `append` or `append_batch`.
async fn attempt(
    log: &Log,
    requests: Vec<AppendRequest>,
    expected: Option<u64>,
) -> weft::Result<Vec<weft::AppendResult>> {
    match (expected, requests.len()) {
        (Some(v), _) => log
            .append_if(requests.into_iter().next().unwrap(), v)
            .await
            .map(|r| vec![r]),
        (None, 1) => log
            .append(requests.into_iter().next().unwrap())
            .await
            .map(|r| vec![r]),
        (None, _) => log.append_batch(requests).await,
    }
}

/// True for an outcome the caller cannot tell from "written": retried with
/// the append's ids.
fn is_unknown(result: &weft::Result<Vec<weft::AppendResult>>) -> bool {
    matches!(result, Err(e) if e.kind() == ErrorKind::Indeterminate)
}

/// Retries op `id` (first tried on `writer`, with outcome `first`) with
/// its append ids on the newest writer, until it gets an answer: success,
/// or `Conflict` (then the original did not land: its id would have
/// answered). Other failures of a retry (a writer that stopped, was fenced
/// or could not reach the store) are tried again on the next writer,
/// within a bound; an op that never gets an answer stays `Indeterminate`.
async fn retry(
    rng: &mut ChaCha8Rng,
    world: &World,
    id: usize,
    mut writer: usize,
    requests: Vec<AppendRequest>,
    expected: Option<u64>,
    first: weft::Result<Vec<weft::AppendResult>>,
) -> weft::Result<Vec<weft::AppendResult>> {
    let mut result = first;
    for n in 1..=200 {
        world.failed_writers.lock().unwrap().push(writer);
        tokio::time::sleep(ms(rng, 2, 20)).await;
        writer = world.writer_count() - 1;
        let log = world.writer(writer);
        let Ok(before) = log.tip().await else {
            continue;
        };
        result = attempt(&log, requests.clone(), expected).await;
        world.note(format!(
            "#{id} retry {n} on writer {writer} (tip {}): {:?}",
            before.next,
            result
                .as_ref()
                .map(|rs| rs.iter().map(|r| r.seqnum).collect::<Vec<_>>())
        ));
        match &result {
            Ok(rs) => {
                let mut retries = world.retries.lock().unwrap();
                retries.0 += 1;
                if rs.iter().any(|r| r.seqnum < before.next) {
                    retries.1 += 1;
                }
                return result;
            }
            Err(e) if e.kind() == ErrorKind::Conflict => {
                world.retries.lock().unwrap().0 += 1;
                return result;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Indeterminate
                        | ErrorKind::Closed
                        | ErrorKind::Fenced
                        | ErrorKind::Unavailable
                        | ErrorKind::Internal
                ) => {}
            Err(e) => {
                world.violation(format!("#{id}: a retry failed with {e}"));
                break;
            }
        }
    }
    // Still unknown: whatever the last retry said, an earlier try may
    // have landed.
    Err(weft::Error::new(
        ErrorKind::Indeterminate,
        format!("no answer after retries; the last: {:?}", result.err()),
    ))
}

async fn read_writer(world: &World, writer: usize) {
    let id = world.invoke(OpKind::WriterRead { writer });
    let result = match world
        .writer(writer)
        .read_log(Position::Beginning, usize::MAX)
        .await
    {
        Ok(entries) => OpResult::Read(entries.into_iter().map(|e| e.data).collect()),
        Err(e) => OpResult::Error(e.kind()),
    };
    world.complete(id, result);
}

async fn read_follower(interval: Duration, world: Arc<World>, follower: Arc<BucketFollower>) {
    while !world.appenders_done.load(Ordering::SeqCst) {
        tokio::time::sleep(interval).await;
        let id = world.invoke(OpKind::FollowerRead);
        let result = match follower.read(None, 0, usize::MAX).await {
            Ok(entries) => OpResult::Read(entries.into_iter().map(|e| e.data).collect()),
            Err(e) => OpResult::Error(e.kind()),
        };
        world.complete(id, result);
    }
}

/// The final log, decoded from the store below the faults.
async fn final_log(
    store: &Arc<dyn ObjectStore>,
    pages: &HashMap<String, weft::format::HistoryPage>,
) -> Result<Vec<LogEntry>, String> {
    let path = Path::from(format!("{PREFIX}/manifest"));
    let bytes = match store.get(&path).await {
        Ok(got) => got.bytes().await.map_err(|e| e.to_string())?,
        Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e.to_string()),
    };
    let m = Manifest::from_bytes(&bytes).map_err(|e| e.to_string())?;
    let (entries, _) = expand(&m, pages)?;
    let mut out = Vec::new();
    for e in entries
        .iter()
        .filter(|e| e.end_sequence() > m.first_sequence())
    {
        let seg = store
            .get(&Path::from(e.location.as_str()))
            .await
            .map_err(|err| format!("committed segment {} is missing: {err}", e.location))?
            .bytes()
            .await
            .map_err(|err| err.to_string())?;
        let seg = decode_segment(seg).map_err(|err| format!("{}: {err}", e.location))?;
        for (i, r) in seg.records.iter().enumerate() {
            let f = frame::decode(r).map_err(|err| format!("{}: {err}", e.location))?;
            if f.meta.seqnum != e.sequence + i as u64 {
                return Err(format!(
                    "{} record {i} holds seqnum {} at WAL sequence {}",
                    e.location,
                    f.meta.seqnum,
                    e.sequence + i as u64
                ));
            }
            // An append id, where there is one, is its entry's payload.
            if let Some(id) = f.append_id
                && id.as_bytes() != f.data
            {
                return Err(format!(
                    "{} record {i} carries append id {id:?} for payload {:?}",
                    e.location,
                    String::from_utf8_lossy(f.data)
                ));
            }
            out.push(f.to_entry());
        }
    }
    Ok(out)
}

/// Kinds an append fails with only when nothing of it was committed.
fn clean_failure(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Conflict
            | ErrorKind::Fenced
            | ErrorKind::Unavailable
            | ErrorKind::Closed
            | ErrorKind::InvalidInput
    )
}

fn check(ops: &[OpRecord], final_log: &[LogEntry]) -> Vec<String> {
    let mut v = Vec::new();
    // Dense seqnums, dense versions per primary tag, unique payloads.
    let mut next_version: HashMap<&LogTag, u64> = HashMap::new();
    let mut position: HashMap<&Bytes, &LogEntry> = HashMap::new();
    for (i, e) in final_log.iter().enumerate() {
        if e.seqnum != i as u64 {
            v.push(format!("final log: entry {i} has seqnum {}", e.seqnum));
        }
        let want = next_version.entry(e.primary_tag()).or_insert(0);
        if e.stream_version != *want {
            v.push(format!(
                "entry {} of {} has version {}, the stream's next was {want}",
                e.seqnum,
                e.primary_tag(),
                e.stream_version
            ));
        }
        *want = e.stream_version + 1;
        // Payloads are unique per append (and are its append ids): one
        // twice is an append written twice, a retry that was not caught.
        if position.insert(&e.data, e).is_some() {
            v.push(format!("payload {:?} is in the log twice", e.data));
        }
    }

    // Which writer was current for an op: no newer writer's open had begun
    // by the time the op returned (a claim may land before its open
    // returns).
    let opens: Vec<(usize, u64)> = ops
        .iter()
        .filter_map(|o| match o.kind {
            OpKind::Open { writer } => Some((writer, o.invoked)),
            _ => None,
        })
        .collect();
    let current = |writer: usize, returned: u64| {
        !opens
            .iter()
            .any(|&(w, invoked)| w > writer && invoked < returned)
    };

    // Appends against the final log.
    let mut placed: Vec<(usize, u64)> = Vec::new(); // (op, first seqnum)
    for (id, op) in ops.iter().enumerate() {
        let OpKind::Append {
            entries, expected, ..
        } = &op.kind
        else {
            continue;
        };
        let found: Vec<Option<&&LogEntry>> = entries.iter().map(|(_, d)| position.get(d)).collect();
        let present = found.iter().filter(|f| f.is_some()).count();
        if present != 0 && present != entries.len() {
            v.push(format!("append #{id} is in the log only partly"));
            continue;
        }
        if present == entries.len() {
            let first = found[0].map_or(0, |e| e.seqnum);
            for (i, ((tag, _), f)) in entries.iter().zip(&found).enumerate() {
                let e = f.expect("present");
                if e.seqnum != first + i as u64 || e.primary_tag() != tag {
                    v.push(format!(
                        "append #{id}: entry {i} is at {} on {}, not contiguous on {tag}",
                        e.seqnum,
                        e.primary_tag()
                    ));
                }
            }
            placed.push((id, first));
        }
        match &op.result {
            OpResult::Pending => v.push(format!("append #{id} never returned")),
            OpResult::Acked(at) => {
                if present == 0 {
                    v.push(format!(
                        "append #{id} was acknowledged at {at:?} but is lost"
                    ));
                    continue;
                }
                let actual: Vec<(u64, u64)> = found
                    .iter()
                    .map(|f| f.map_or((0, 0), |e| (e.seqnum, e.stream_version)))
                    .collect();
                if *at != actual {
                    v.push(format!("append #{id} was told {at:?} but is at {actual:?}"));
                }
                if let Some(want) = expected
                    && actual[0].1 != *want
                {
                    v.push(format!(
                        "append_if #{id} expected version {want} but got {}",
                        actual[0].1
                    ));
                }
            }
            OpResult::Failed(kind, _) if clean_failure(*kind) && present > 0 => v.push(format!(
                "append #{id} failed with {kind:?} (nothing committed) but is in the log"
            )),
            _ => {}
        }
    }

    // Real-time order of acknowledged appends.
    for &(a, a_first) in &placed {
        if !matches!(ops[a].result, OpResult::Acked(_)) {
            continue;
        }
        let Some(a_ret) = ops[a].returned else {
            continue;
        };
        for &(b, b_first) in &placed {
            if a_ret < ops[b].invoked && a_first >= b_first {
                v.push(format!(
                    "append #{a} returned before #{b} was invoked, yet #{b} is first"
                ));
            }
        }
    }

    // A conflict from the current writer: the next version it names must
    // be one some linearization allows.
    for (id, op) in ops.iter().enumerate() {
        let (
            OpKind::Append {
                writer, entries, ..
            },
            OpResult::Failed(ErrorKind::Conflict, Some(ErrorDetail::VersionConflict { next, .. })),
            Some(ret),
        ) = (&op.kind, &op.result, op.returned)
        else {
            continue;
        };
        if !current(*writer, ret) {
            continue;
        }
        let tag = &entries[0].0;
        let on_tag = |e: &LogEntry| e.primary_tag() == tag;
        let before = placed
            .iter()
            .filter(|(a, _)| {
                matches!(ops[*a].result, OpResult::Acked(_))
                    && ops[*a].returned.is_some_and(|r| r < op.invoked)
            })
            .flat_map(|(a, _)| match &ops[*a].kind {
                OpKind::Append { entries, .. } => entries.clone(),
                _ => Vec::new(),
            })
            .filter_map(|(_, d)| position.get(&d).copied())
            .filter(|e| on_tag(e))
            .map(|e| e.stream_version + 1)
            .max()
            .unwrap_or(0);
        let after = placed
            .iter()
            .filter(|(a, _)| ops[*a].invoked > ret)
            .flat_map(|(a, _)| match &ops[*a].kind {
                OpKind::Append { entries, .. } => entries.clone(),
                _ => Vec::new(),
            })
            .filter_map(|(_, d)| position.get(&d).copied())
            .filter(|e| on_tag(e))
            .map(|e| e.stream_version)
            .min()
            .unwrap_or(u64::MAX);
        if *next < before || *next > after {
            v.push(format!(
                "conflict #{id} on {tag} named next version {next}, but it must lie in \
                 {before}..={after}"
            ));
        }
    }

    // Reads.
    let acked_end_before = |t: u64| -> usize {
        placed
            .iter()
            .filter(|(a, _)| {
                matches!(ops[*a].result, OpResult::Acked(_))
                    && ops[*a].returned.is_some_and(|r| r < t)
            })
            .map(|(a, first)| match &ops[*a].kind {
                OpKind::Append { entries, .. } => *first as usize + entries.len(),
                _ => 0,
            })
            .max()
            .unwrap_or(0)
    };
    let first_invoked_after = |t: u64| -> usize {
        placed
            .iter()
            .filter(|(a, _)| ops[*a].invoked > t)
            .map(|(_, first)| *first as usize)
            .min()
            .unwrap_or(usize::MAX)
    };
    let mut follower_last = 0;
    for (id, op) in ops.iter().enumerate() {
        let (OpResult::Read(seen), Some(ret)) = (&op.result, op.returned) else {
            continue;
        };
        let prefix =
            seen.len() <= final_log.len() && seen.iter().zip(final_log).all(|(a, b)| *a == b.data);
        if !prefix {
            v.push(format!(
                "{:?} #{id} is not a prefix of the final log",
                op.kind
            ));
        }
        match op.kind {
            OpKind::WriterRead { writer } if current(writer, ret) => {
                let need = acked_end_before(op.invoked);
                if seen.len() < need {
                    v.push(format!(
                        "read #{id} on the current writer saw {} entries, but {need} were \
                         acknowledged before it",
                        seen.len()
                    ));
                }
                if seen.len() > first_invoked_after(ret) {
                    v.push(format!(
                        "read #{id} saw an append invoked after it returned"
                    ));
                }
            }
            OpKind::FollowerRead => {
                if seen.len() < follower_last {
                    v.push(format!(
                        "follower read #{id} saw {} entries after one saw {follower_last}",
                        seen.len()
                    ));
                }
                follower_last = seen.len();
            }
            _ => {}
        }
    }

    // Epochs.
    let mut last = 0;
    for op in ops {
        if let OpResult::Opened(epoch) = op.result {
            if epoch <= last {
                v.push(format!("a writer opened with epoch {epoch} after {last}"));
            }
            last = epoch;
        }
    }
    v
}

/// The log checker catches what it claims to: one broken promise each.
mod checker_tests {
    use super::*;

    fn tag(t: &str) -> LogTag {
        t.parse().unwrap()
    }

    fn entry(seqnum: u64, t: &str, version: u64, data: &str) -> LogEntry {
        LogEntry {
            seqnum,
            stream_version: version,
            tags: vec![tag(t)],
            data: Bytes::from(data.to_string()),
            timestamp_ms: 0,
            append_id: None,
        }
    }

    fn append(data: &str, expected: Option<u64>, t: (u64, u64), result: OpResult) -> OpRecord {
        OpRecord {
            kind: OpKind::Append {
                writer: 0,
                entries: vec![(tag("a"), Bytes::from(data.to_string()))],
                expected,
            },
            invoked: t.0,
            returned: Some(t.1),
            result,
        }
    }

    #[test]
    fn a_correct_history_passes_and_broken_ones_do_not() {
        let log = vec![entry(0, "a", 0, "x"), entry(1, "a", 1, "y")];
        let good = [
            append("x", None, (0, 1), OpResult::Acked(vec![(0, 0)])),
            append("y", Some(1), (2, 3), OpResult::Acked(vec![(1, 1)])),
            append(
                "z",
                Some(1),
                (4, 5),
                OpResult::Failed(
                    ErrorKind::Conflict,
                    Some(ErrorDetail::VersionConflict {
                        expected: 1,
                        next: 2,
                    }),
                ),
            ),
        ];
        assert_eq!(check(&good, &log), Vec::<String>::new());

        // A version gap in a stream.
        let gap = vec![entry(0, "a", 0, "x"), entry(1, "a", 2, "y")];
        assert!(
            check(&good[..1], &gap)
                .iter()
                .any(|m| m.contains("has version 2"))
        );
        // append_if acknowledged with a version other than it asked for.
        let wrong = [append("y", Some(0), (2, 3), OpResult::Acked(vec![(1, 1)]))];
        assert!(
            check(&wrong, &log)
                .iter()
                .any(|m| m.contains("expected version 0"))
        );
        // A conflict naming a next version no linearization allows: "x"
        // was acknowledged before it began, so next >= 1; "y" was invoked
        // after it returned and got version 1, so next <= 1.
        let conflict = [
            append("x", None, (0, 1), OpResult::Acked(vec![(0, 0)])),
            append(
                "c",
                Some(0),
                (2, 3),
                OpResult::Failed(
                    ErrorKind::Conflict,
                    Some(ErrorDetail::VersionConflict {
                        expected: 0,
                        next: 2,
                    }),
                ),
            ),
            append("y", None, (4, 5), OpResult::Acked(vec![(1, 1)])),
        ];
        assert!(
            check(&conflict, &log)
                .iter()
                .any(|m| m.contains("must lie in 1..=1"))
        );
        // An acknowledged append that is not there, and a clean failure
        // that is.
        let lost = [append("q", None, (0, 1), OpResult::Acked(vec![(2, 2)]))];
        assert!(check(&lost, &log).iter().any(|m| m.contains("lost")));
        let landed = [append(
            "x",
            None,
            (0, 1),
            OpResult::Failed(ErrorKind::Unavailable, None),
        )];
        assert!(
            check(&landed, &log)
                .iter()
                .any(|m| m.contains("nothing committed"))
        );
    }
}
