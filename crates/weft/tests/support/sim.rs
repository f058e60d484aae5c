//! A deterministic simulation of the bucket WAL, and the checker of what it
//! records.
//!
//! One run is one seed. On an in-memory store wrapped by the fault store,
//! under a single-thread tokio runtime whose clock is paused (so every sleep,
//! latency and timeout is free and the schedule depends only on the seed),
//! it runs:
//!
//! * a supervisor that opens writers (producers) on a seeded failover
//!   schedule, and a fresh one whenever the current writer halted;
//! * appenders that append to the current writer, or sometimes to an older
//!   one (a zombie from an earlier epoch that does not know it was fenced),
//!   without waiting for one append before making the next;
//! * a replica tailing the log throughout, and readers that read the whole
//!   log with a fresh replica now and then.
//!
//! Every operation's invocation and outcome is recorded with a logical time
//! (one counter, so "returned before invoked" is exact), and every manifest
//! state that lands in the store is recorded below the fault layer. The
//! checker then proves, from the history alone, the log's guarantees; see
//! [`check`].

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use object_store::path::Path;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;
use ulid::Ulid;
use weft::ErrorKind;
use weft::clock::ManualClock;
use weft::format::{HistoryPage, ManifestEntry, PageItems, decode_page, decode_segment};
use weft::objects::RetryPolicy;
use weft::wal::{CheckpointPolicy, FnApplier, Manifest, Producer, Record, Replica};
use weft_testkit::fault::{FaultConfig, FaultStats, FaultStore, OpFaults};
use weft_testkit::hooked::{After, Before, HookedStore, Op, after, before};

/// The manifest's path in the simulated bucket.
pub const MANIFEST: &str = "wal/manifest";
/// The segments' prefix in the simulated bucket.
pub const SEGMENTS: &str = "wal/seg";
/// The history pages' prefix (the default next to the manifest).
pub const HISTORY: &str = "wal/history";

/// The fault mix of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// A little of every fault, failovers, zombies.
    Mixed,
    /// Most puts fail, some ambiguously: writers halt often.
    UploadStorm,
}

/// What one simulated run produced.
#[derive(Debug)]
pub struct SimRun {
    /// The seed.
    pub seed: u64,
    /// Every recorded event, rendered with its simulated time: two runs of
    /// one seed must produce the same trace.
    pub trace: Vec<String>,
    /// Every manifest object that landed in the store, in order.
    pub manifests: Vec<Bytes>,
    /// Everything the checker found wrong (empty: the run is correct).
    pub violations: Vec<String>,
    /// Writers that halted on a failure (not fenced, not closed).
    pub halts: usize,
    /// Appends acknowledged with a sequence.
    pub acked: usize,
    /// Appends (accepted or refused) that failed with `Fenced`.
    pub fenced: usize,
    /// Appends whose outcome was reported unknown (`Indeterminate`).
    pub indeterminate: usize,
    /// Writers opened.
    pub writers: usize,
    /// Faults the store injected.
    pub stats: FaultStats,
    /// History pages stored (checkpoints happened).
    pub pages: usize,
    /// The most levels any manifest state's history had.
    pub levels: usize,
    /// Writers whose process died right after a history page of theirs
    /// landed (between a checkpoint's upload and its CAS), and right after
    /// a segment landed (between the upload and the commit).
    pub crashes: [usize; 2],
}

/// What an operation was.
#[derive(Clone, Debug)]
enum OpKind {
    /// An append of `records` to writer `writer`.
    Append { writer: usize, records: Vec<Bytes> },
    /// Opening writer `writer`.
    Open { writer: usize },
    /// A full read of the log through a fresh replica.
    Read,
    /// One poll of the tailing replica.
    Poll,
    /// Closing writer `writer`.
    Close { writer: usize },
}

/// How an operation ended.
#[derive(Clone, Debug, PartialEq)]
enum OpResult {
    Pending,
    /// `wait` returned this sequence.
    Acked(u64),
    /// `append` itself failed: the append was never accepted.
    Refused(ErrorKind),
    /// `append` accepted it, `wait` failed.
    Failed(ErrorKind),
    /// A writer opened with this epoch.
    Opened(u64),
    /// A read saw these records, from sequence 0 on.
    Read(Vec<Bytes>),
    /// The tailing replica had applied this many records after the poll.
    Polled(usize),
    /// Any other operation failed.
    Error(ErrorKind),
    /// A close succeeded.
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
    producer: Arc<Producer>,
    epoch: u64,
    run: Ulid,
}

/// The state every simulated task shares.
struct World {
    start: Instant,
    clock: AtomicU64,
    ops: Mutex<Vec<OpRecord>>,
    trace: Mutex<Vec<String>>,
    writers: Mutex<Vec<Writer>>,
    replica_log: Arc<Mutex<Vec<(u64, Bytes)>>>,
    violations: Mutex<Vec<String>>,
    appenders_done: AtomicBool,
    writers_closed: AtomicBool,
    halts: AtomicU64,
    /// Writers whose process died right after a history page landed, and
    /// right after a segment landed.
    crashes: Arc<[AtomicU64; 2]>,
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

    /// Reserves the id the next `invoke` returns (to name payloads by it).
    fn next_id(&self) -> usize {
        self.ops.lock().unwrap().len()
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

    fn writer(&self, index: usize) -> Arc<Producer> {
        self.writers.lock().unwrap()[index].producer.clone()
    }

    fn writer_count(&self) -> usize {
        self.writers.lock().unwrap().len()
    }
}

/// The knobs of one run, drawn from its seed.
#[derive(Clone, Debug)]
struct Plan {
    faults: FaultConfig,
    retry: RetryPolicy,
    flush_interval: Duration,
    segment_max_bytes: usize,
    upload_concurrency: usize,
    manifest_batch: usize,
    appenders: usize,
    appends_each: usize,
    zombie_chance: f64,
    failovers: Vec<Duration>,
    poll_interval: Duration,
    read_interval: Duration,
    checkpoint: CheckpointPolicy,
    /// The chance that a writer's process dies right after one of its
    /// uploads (a history page, or a segment) landed: nothing it sends
    /// afterwards reaches the store.
    crash_chance: f64,
}

/// A checkpoint policy small enough that a run of a few dozen segments
/// checkpoints often and builds a tree of several levels, drawn from its
/// own stream of `seed` (so the rest of a seed's plan is as before).
pub fn tiny_checkpoints(seed: u64) -> CheckpointPolicy {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xc4ec_4901);
    let max_recent_entries = rng.random_range(2..=8);
    CheckpointPolicy::default()
        .with_max_recent_entries(max_recent_entries)
        .with_max_recent_bytes(1 << 20)
        .with_leaf_entries(rng.random_range(1..max_recent_entries))
        .with_leaf_bytes(1 << 19)
        .with_fanout(rng.random_range(2..=4))
        .with_max_pages_per_commit(rng.random_range(1..=4))
}

/// A duration of `lo..=hi` ms drawn from `rng`.
pub fn ms(rng: &mut ChaCha8Rng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.random_range(lo..=hi))
}

fn plan(seed: u64, profile: Profile) -> Plan {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_5111);
    let (faults, retry) = faults(seed, profile, &mut rng);
    let failovers = {
        let n = rng.random_range(0..=3);
        let mut at: Vec<Duration> = (0..n).map(|_| ms(&mut rng, 10, 400)).collect();
        at.sort();
        at
    };
    Plan {
        faults,
        retry,
        flush_interval: ms(&mut rng, 3, 20),
        segment_max_bytes: rng.random_range(12..=96),
        upload_concurrency: rng.random_range(1..=4),
        manifest_batch: rng.random_range(1..=4),
        appenders: rng.random_range(2..=4),
        appends_each: rng.random_range(4..=10),
        zombie_chance: rng.random_range(0.0..0.35),
        failovers,
        poll_interval: ms(&mut rng, 2, 30),
        read_interval: ms(&mut rng, 10, 80),
        checkpoint: tiny_checkpoints(seed),
        crash_chance: match profile {
            Profile::Mixed => ChaCha8Rng::seed_from_u64(seed ^ 0x00c7_a54e).random_range(0.0..0.5),
            _ => 0.0,
        },
    }
}

/// The faults and the writers' retry policy of a run of `profile`, drawn
/// from `rng`.
pub fn faults(seed: u64, profile: Profile, rng: &mut ChaCha8Rng) -> (FaultConfig, RetryPolicy) {
    let rng = &mut *rng;
    let put = match profile {
        Profile::Mixed => OpFaults {
            error: rng.random_range(0.0..0.15),
            conflict_409: rng.random_range(0.0..0.05),
            ambiguous: rng.random_range(0.0..0.15),
            hang: rng.random_range(0.0..0.05),
            lost: rng.random_range(0.0..0.05),
            late: rng.random_range(0.0..0.05),
            resent: 0.0,
            latency: rng.random_range(0.3..1.0),
            latency_min: Duration::ZERO,
            latency_max: ms(rng, 1, 40),
        },
        Profile::UploadStorm => OpFaults {
            error: rng.random_range(0.5..0.8),
            conflict_409: rng.random_range(0.0..0.05),
            ambiguous: rng.random_range(0.05..0.2),
            hang: rng.random_range(0.0..0.05),
            lost: rng.random_range(0.0..0.05),
            late: rng.random_range(0.0..0.05),
            resent: 0.0,
            latency: rng.random_range(0.3..1.0),
            latency_min: Duration::ZERO,
            latency_max: ms(rng, 1, 40),
        },
    };
    let get = OpFaults {
        error: rng.random_range(0.0..0.1),
        ambiguous: rng.random_range(0.0..0.05),
        hang: rng.random_range(0.0..0.03),
        latency: rng.random_range(0.2..1.0),
        latency_max: ms(rng, 1, 20),
        ..OpFaults::default()
    };
    let faults = FaultConfig {
        seed,
        put,
        get,
        precondition_storm: rng.random_range(0.0..0.1),
        hang_for: ms(rng, 50, 2_000),
        late_by: ms(rng, 1, 3_000),
        ..FaultConfig::default()
    };
    let retry = RetryPolicy::default()
        .with_max_attempts(rng.random_range(3..=8))
        .with_base_backoff(ms(rng, 1, 5))
        .with_max_backoff(ms(rng, 10, 60))
        .with_jitter(0.5);
    (faults, retry)
}

/// Runs one seed to completion on its own paused single-thread runtime and
/// checks its history.
pub fn simulate(seed: u64, profile: Profile) -> SimRun {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("build the simulation runtime");
    rt.block_on(run(seed, profile))
}

/// Simulated time a run may take before it counts as hung.
const SIM_LIMIT: Duration = Duration::from_secs(3_600);

async fn run(seed: u64, profile: Profile) -> SimRun {
    let plan = plan(seed, profile);
    let memory = Arc::new(InMemory::new());
    let recorder = Recorder::new(memory.clone(), MANIFEST);
    let faults = FaultStore::wrap(recorder.store(), plan.faults.clone());
    let world = Arc::new(World {
        start: Instant::now(),
        clock: AtomicU64::new(0),
        ops: Mutex::new(Vec::new()),
        trace: Mutex::new(Vec::new()),
        writers: Mutex::new(Vec::new()),
        replica_log: Arc::new(Mutex::new(Vec::new())),
        violations: Mutex::new(Vec::new()),
        appenders_done: AtomicBool::new(false),
        writers_closed: AtomicBool::new(false),
        halts: AtomicU64::new(0),
        crashes: Arc::new([AtomicU64::new(0), AtomicU64::new(0)]),
    });
    world.note(format!("seed {seed} {profile:?} {plan:?}"));

    let finished =
        tokio::time::timeout(SIM_LIMIT, drive(seed, &plan, world.clone(), faults.clone())).await;
    if finished.is_err() {
        world.violation(format!(
            "the run did not finish within {SIM_LIMIT:?} of simulated time \
             (a waiter or task hung)"
        ));
    }

    let inner: Arc<dyn ObjectStore> = memory;
    let pages = match load_pages(&inner, HISTORY).await {
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
    let manifests = recorder.history();
    let ops = world.ops.lock().unwrap().clone();
    let runs: HashMap<String, u64> = world
        .writers
        .lock()
        .unwrap()
        .iter()
        .map(|w| (w.run.to_string(), w.epoch))
        .collect();
    let replica_log = world.replica_log.lock().unwrap().clone();
    let mut violations = std::mem::take(&mut *world.violations.lock().unwrap());
    violations.extend(check(
        &ops,
        &final_log,
        &manifests,
        &pages,
        &runs,
        &replica_log,
    ));
    let count = |f: &dyn Fn(&OpRecord) -> bool| ops.iter().filter(|o| f(o)).count();
    let is_append = |o: &OpRecord| matches!(o.kind, OpKind::Append { .. });
    let acked = count(&|o| is_append(o) && matches!(o.result, OpResult::Acked(_)));
    let fenced = count(&|o| {
        is_append(o)
            && matches!(
                o.result,
                OpResult::Failed(ErrorKind::Fenced) | OpResult::Refused(ErrorKind::Fenced)
            )
    });
    let indeterminate =
        count(&|o| is_append(o) && o.result == OpResult::Failed(ErrorKind::Indeterminate));
    let trace = std::mem::take(&mut *world.trace.lock().unwrap());
    let levels = max_levels(&manifests);
    SimRun {
        seed,
        trace,
        manifests,
        violations,
        halts: world.halts.load(Ordering::SeqCst) as usize,
        acked,
        fenced,
        indeterminate,
        writers: world.writer_count(),
        stats: faults.stats(),
        pages: pages.len(),
        levels,
        crashes: [0, 1].map(|i| world.crashes[i].load(Ordering::SeqCst) as usize),
    }
}

/// The most history levels any of `manifests` has.
pub fn max_levels(manifests: &[Bytes]) -> usize {
    manifests
        .iter()
        .filter_map(|b| Manifest::from_bytes(b).ok())
        .filter_map(|m| m.history().map(|h| h.levels.len()))
        .max()
        .unwrap_or(0)
}

/// Everything that happens in one run, up to closing every writer.
async fn drive(seed: u64, plan: &Plan, world: Arc<World>, store: Arc<FaultStore>) {
    let store: Arc<dyn ObjectStore> = store;
    if !open_writer(seed, plan, &world, &store).await {
        world.violation("no writer could be opened".into());
        return;
    }
    let supervisor = tokio::spawn(supervise(seed, plan.clone(), world.clone(), store.clone()));
    let replica = tokio::spawn(tail(plan.poll_interval, world.clone(), store.clone()));
    let reader = tokio::spawn(read_now_and_then(
        plan.read_interval,
        world.clone(),
        store.clone(),
    ));
    let appenders: Vec<_> = (0..plan.appenders)
        .map(|a| {
            let rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(a as u64));
            tokio::spawn(append_some(rng, plan.clone(), world.clone()))
        })
        .collect();
    let mut waits = Vec::new();
    for a in appenders {
        waits.extend(a.await.expect("appender task"));
    }
    for w in waits {
        w.await.expect("wait task");
    }
    world.appenders_done.store(true, Ordering::SeqCst);
    supervisor.await.expect("supervisor task");
    reader.await.expect("reader task");
    let count = world.writer_count();
    for index in 0..count {
        let id = world.invoke(OpKind::Close { writer: index });
        let result = match world.writer(index).close().await {
            Ok(()) => OpResult::Closed,
            Err(e) => OpResult::Error(e.kind()),
        };
        world.complete(id, result);
    }
    world.writers_closed.store(true, Ordering::SeqCst);
    replica.await.expect("replica task");
}

/// Opens the next writer, retrying failed opens a bounded number of times.
async fn open_writer(seed: u64, plan: &Plan, world: &World, store: &Arc<dyn ObjectStore>) -> bool {
    for _ in 0..50 {
        let index = world.writer_count();
        let id = world.invoke(OpKind::Open { writer: index });
        let own = mortal(seed, plan, world, index, store.clone());
        // Failovers fence the writer before on purpose.
        let opened = Producer::builder(own, MANIFEST, SEGMENTS)
            .with_take_over(true)
            .with_seed(seed.wrapping_mul(1_000).wrapping_add(index as u64 + 1))
            .with_clock(ManualClock::new(1_700_000_000_000))
            .with_retry_policy(plan.retry.clone())
            .with_flush_interval(plan.flush_interval)
            .with_segment_max_bytes(plan.segment_max_bytes)
            .with_upload_concurrency(plan.upload_concurrency)
            .with_manifest_batch(plan.manifest_batch)
            .with_checkpoint_policy(plan.checkpoint.clone())
            .open()
            .await;
        match opened {
            Ok(p) => {
                let epoch = p.epoch();
                let mut writers = world.writers.lock().unwrap();
                writers.push(Writer {
                    run: p.run_id(),
                    epoch,
                    producer: Arc::new(p),
                });
                drop(writers);
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

/// The store as writer `index`'s process sees it. With the plan's crash
/// chance the process dies right after its `k`-th upload of one kind (a
/// history page, or a segment) landed — between a create-only upload and
/// the CAS that would name it: from then on none of its requests reaches
/// the store (they fail as a dead process's would never be answered; a
/// write it sent earlier may still land late, below). The writer halts on
/// those failures and the supervisor replaces it, as after a crash.
fn mortal(
    seed: u64,
    plan: &Plan,
    world: &World,
    index: usize,
    store: Arc<dyn ObjectStore>,
) -> Arc<dyn ObjectStore> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6d6f_7274 ^ ((index as u64) << 24));
    if !rng.random_bool(plan.crash_chance) {
        return store;
    }
    let (kind, prefix) = if rng.random_bool(0.7) {
        (0, format!("{HISTORY}/"))
    } else {
        (1, format!("{SEGMENTS}/"))
    };
    let left = AtomicU32::new(rng.random_range(1..=3));
    let dead = Arc::new(AtomicBool::new(false));
    let (dying, gone) = (dead.clone(), dead);
    let crashes = world.crashes.clone();
    world.note(format!(
        "writer {index} will crash after upload {left:?} under {prefix}"
    ));
    let hooked = HookedStore::new(store)
        .with_hook(before(move |_call, _inner| {
            let gone = gone.load(Ordering::SeqCst);
            async move {
                if gone {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    Before::Answer(object_store::Error::Generic {
                        store: "sim",
                        source: "the writer's process is gone".into(),
                    })
                } else {
                    Before::Proceed
                }
            }
        }))
        .with_hook(after(move |call, ok, _inner| {
            if ok
                && call.op == Op::Put
                && call.path.as_ref().starts_with(prefix.as_str())
                && !dying.load(Ordering::SeqCst)
                && left.fetch_sub(1, Ordering::SeqCst) == 1
            {
                dying.store(true, Ordering::SeqCst);
                crashes[kind].fetch_add(1, Ordering::SeqCst);
            }
            async { After::Keep }
        }));
    Arc::new(hooked)
}

/// Fails over on schedule, and replaces a writer that halted.
async fn supervise(seed: u64, plan: Plan, world: Arc<World>, store: Arc<dyn ObjectStore>) {
    let mut schedule = plan.failovers.clone().into_iter().peekable();
    let mut counted_halt = BTreeSet::new();
    while !world.appenders_done.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let current = world.writer_count() - 1;
        let halted = world.writer(current).halted();
        let due = schedule
            .peek()
            .is_some_and(|at| world.start.elapsed() >= *at);
        if let Some(err) = &halted
            && err.kind() != ErrorKind::Fenced
            && counted_halt.insert(current)
        {
            world.halts.fetch_add(1, Ordering::SeqCst);
            world.note(format!("writer {current} halted: {err}"));
        }
        if due {
            schedule.next();
        }
        if (due || halted.is_some()) && !open_writer(seed, &plan, &world, &store).await {
            world.violation("no replacement writer could be opened".into());
            return;
        }
    }
}

/// One appender: appends without waiting for earlier appends, mostly to the
/// current writer, sometimes to an older one. Returns the tasks that wait
/// for its appends.
async fn append_some(
    mut rng: ChaCha8Rng,
    plan: Plan,
    world: Arc<World>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut waits = Vec::new();
    for _ in 0..plan.appends_each {
        tokio::time::sleep(ms(&mut rng, 0, 25)).await;
        let count = world.writer_count();
        let writer = if count > 1 && rng.random_bool(plan.zombie_chance) {
            rng.random_range(0..count - 1)
        } else {
            count - 1
        };
        let id = world.next_id();
        let records: Vec<Bytes> = (0..rng.random_range(1..=3))
            .map(|r| Bytes::from(format!("op{id}r{r}")))
            .collect();
        let producer = world.writer(writer);
        let invoked = world.invoke(OpKind::Append {
            writer,
            records: records.clone(),
        });
        assert_eq!(invoked, id, "single-threaded: nothing ran in between");
        match producer.append(records, None).await {
            Err(e) => world.complete(id, OpResult::Refused(e.kind())),
            Ok(durability) => {
                let world = world.clone();
                waits.push(tokio::spawn(async move {
                    let result = match durability.wait().await {
                        Ok(seq) => OpResult::Acked(seq),
                        Err(e) => OpResult::Failed(e.kind()),
                    };
                    world.complete(id, result);
                }));
            }
        }
    }
    waits
}

/// The tailing replica: polls throughout, then catches up once the writers
/// are closed.
async fn tail(poll_interval: Duration, world: Arc<World>, store: Arc<dyn ObjectStore>) {
    let sink = world.replica_log.clone();
    let applier = FnApplier::new(move |r: &Record| {
        let seq = r.sequence.expect("a v4 manifest numbers records");
        sink.lock().unwrap().push((seq, r.data.clone()));
        Ok(())
    });
    let mut replica = Replica::builder(store, MANIFEST, applier)
        .with_prefetch(3)
        .build();
    let mut quiet_polls = 0;
    loop {
        let closing = world.writers_closed.load(Ordering::SeqCst);
        let id = world.invoke(OpKind::Poll);
        match replica.poll().await {
            Ok(outcome) => {
                let applied = world.replica_log.lock().unwrap().len();
                world.complete(id, OpResult::Polled(applied));
                if closing && outcome.applied == 0 {
                    quiet_polls += 1;
                }
            }
            Err(e) => {
                let kind = e.kind();
                world.complete(id, OpResult::Error(kind));
                if !matches!(kind, ErrorKind::Unavailable | ErrorKind::Indeterminate) {
                    world.violation(format!("the replica failed: {e}"));
                    return;
                }
            }
        }
        // Two quiet polls after everything closed: the replica is caught up.
        if quiet_polls >= 2 {
            return;
        }
        tokio::time::sleep(poll_interval).await;
    }
}

/// Reads the whole log through a fresh replica now and then.
async fn read_now_and_then(interval: Duration, world: Arc<World>, store: Arc<dyn ObjectStore>) {
    while !world.appenders_done.load(Ordering::SeqCst) {
        tokio::time::sleep(interval).await;
        let id = world.invoke(OpKind::Read);
        let seen: Arc<Mutex<Vec<Bytes>>> = Arc::default();
        let sink = seen.clone();
        let applier = FnApplier::new(move |r: &Record| {
            sink.lock().unwrap().push(r.data.clone());
            Ok(())
        });
        let mut replica = Replica::builder(store.clone(), MANIFEST, applier).build();
        match replica.poll().await {
            Ok(_) => {
                let seen = seen.lock().unwrap().clone();
                world.complete(id, OpResult::Read(seen));
            }
            Err(e) => {
                world.complete(id, OpResult::Error(e.kind()));
                if !matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Indeterminate) {
                    world.violation(format!("a reader failed: {e}"));
                }
            }
        }
    }
}

/// Every history page under `prefix` in `store` (below the faults), by
/// location. Pages are never deleted in a simulation, so this holds every
/// page any manifest state named.
pub async fn load_pages(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
) -> Result<HashMap<String, HistoryPage>, String> {
    use futures::TryStreamExt;
    let metas: Vec<object_store::ObjectMeta> = store
        .list(Some(&Path::from(prefix)))
        .try_collect()
        .await
        .map_err(|e| e.to_string())?;
    let mut out = HashMap::new();
    for meta in metas {
        let bytes = store
            .get(&meta.location)
            .await
            .map_err(|e| e.to_string())?
            .bytes()
            .await
            .map_err(|e| e.to_string())?;
        let page = decode_page(&bytes).map_err(|e| format!("page {}: {e}", meta.location))?;
        out.insert(meta.location.to_string(), page);
    }
    Ok(out)
}

/// Every entry a manifest state holds — its history pages' (walked here,
/// independently of the library's reader) and its own — in order, and the
/// locations of the pages it names.
pub fn expand(
    m: &Manifest,
    pages: &HashMap<String, HistoryPage>,
) -> Result<(Vec<ManifestEntry>, Vec<String>), String> {
    fn walk(
        location: &str,
        level: usize,
        pages: &HashMap<String, HistoryPage>,
        entries: &mut Vec<ManifestEntry>,
        named: &mut Vec<String>,
    ) -> Result<(), String> {
        let page = pages
            .get(location)
            .ok_or_else(|| format!("the manifest names page {location}, which is not stored"))?;
        if usize::from(page.level) != level {
            return Err(format!(
                "page {location} has level {}, not {level}",
                page.level
            ));
        }
        named.push(location.to_owned());
        match &page.items {
            PageItems::Entries(es) => entries.extend(es.iter().cloned()),
            PageItems::Pointers(ps) => {
                for p in ps {
                    walk(&p.location, level - 1, pages, entries, named)?;
                }
            }
        }
        Ok(())
    }
    let mut entries = Vec::new();
    let mut named = Vec::new();
    if let Some(h) = m.history() {
        for (level, p) in h.pointers() {
            let before = entries.len();
            walk(&p.location, level, pages, &mut entries, &mut named)?;
            let got = (
                entries[before..].first().map(|e| e.sequence),
                entries[before..].last().map(|e| e.end_sequence()),
            );
            if got != (Some(p.first_seq), Some(p.end_seq)) {
                return Err(format!(
                    "page {} holds {got:?}, its pointer says {}..{}",
                    p.location, p.first_seq, p.end_seq
                ));
            }
        }
    }
    entries.extend(m.entries().iter().cloned());
    Ok((entries, named))
}

/// The final log, read from the store below the faults: every record with
/// its sequence. Checks that every committed location exists and holds the
/// manifest's count of records.
async fn final_log(
    store: &Arc<dyn ObjectStore>,
    pages: &HashMap<String, HistoryPage>,
) -> Result<Vec<(u64, Bytes)>, String> {
    let bytes = match store.get(&Path::from(MANIFEST)).await {
        Ok(got) => got.bytes().await.map_err(|e| e.to_string())?,
        Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e.to_string()),
    };
    let m = Manifest::from_bytes(&bytes).map_err(|e| e.to_string())?;
    let (entries, _) = expand(&m, pages)?;
    let mut out = Vec::new();
    for e in &entries {
        let seg = store
            .get(&Path::from(e.location.as_str()))
            .await
            .map_err(|err| format!("committed segment {} is missing: {err}", e.location))?
            .bytes()
            .await
            .map_err(|err| err.to_string())?;
        let seg = decode_segment(seg).map_err(|err| format!("{}: {err}", e.location))?;
        if Some(seg.records.len() as u32) != e.count {
            return Err(format!(
                "segment {} holds {} records, its entry says {:?}",
                e.location,
                seg.records.len(),
                e.count
            ));
        }
        for (i, r) in seg.records.into_iter().enumerate() {
            out.push((e.sequence + i as u64, r));
        }
    }
    Ok(out)
}

/// Kinds a `wait` may fail with only when the append is certainly not in
/// the log (the producer proved it, or never tried to commit it).
fn clean_failure(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Fenced | ErrorKind::Unavailable | ErrorKind::Conflict | ErrorKind::Closed
    )
}

/// Checks a run's history; returns every violation found.
///
/// * the final log is dense from sequence 0 and holds no record twice;
/// * an acknowledged append is in it exactly once, whole, at the sequence
///   it was told; an append refused by `append` or failed by `wait` with a
///   clean kind is not in it at all; no append is in it partly;
/// * every waiter was resolved;
/// * linearizability as a log (the linearization is the committed order):
///   if append A returned before append B was invoked and both are in the
///   log, A is before B; a read returns a prefix of the final log that holds
///   every append acknowledged before the read was invoked and nothing
///   invoked after it returned, and never less than a read that returned
///   before it was invoked; a successful replica poll likewise covers every
///   append acknowledged before it;
/// * the tailing replica's log is a prefix of the final log (after the final
///   catch-up: all of it);
/// * writers' epochs strictly increase in the order they opened; the
///   manifest's epoch never goes back; each manifest state keeps every entry
///   of the one before; and every entry a state adds comes from the run
///   holding that state's epoch, i.e. no writer committed after it was
///   fenced.
fn check(
    ops: &[OpRecord],
    final_log: &[(u64, Bytes)],
    manifests: &[Bytes],
    pages: &HashMap<String, HistoryPage>,
    runs: &HashMap<String, u64>,
    replica_log: &[(u64, Bytes)],
) -> Vec<String> {
    let mut v = Vec::new();

    // The final log: dense, no duplicates.
    for (i, (seq, _)) in final_log.iter().enumerate() {
        if *seq != i as u64 {
            v.push(format!("final log: record {i} has sequence {seq}"));
            break;
        }
    }
    let mut position: HashMap<&Bytes, u64> = HashMap::new();
    for (seq, data) in final_log {
        if let Some(first) = position.insert(data, *seq) {
            v.push(format!(
                "record {data:?} is in the log twice (at {first} and {seq})"
            ));
        }
    }

    // Appends: where each one is (if anywhere), against what it was told.
    let mut placed: Vec<(usize, u64, u64)> = Vec::new(); // (op, first seq, end)
    for (id, op) in ops.iter().enumerate() {
        let OpKind::Append { records, .. } = &op.kind else {
            if op.result == OpResult::Pending {
                v.push(format!("op #{id} {:?} never returned", op.kind));
            }
            continue;
        };
        let found: Vec<Option<u64>> = records.iter().map(|r| position.get(r).copied()).collect();
        let present = found.iter().filter(|f| f.is_some()).count();
        let at = found.first().copied().flatten();
        if present != 0 && present != records.len() {
            v.push(format!("append #{id} is in the log only partly: {found:?}"));
            continue;
        }
        if present == records.len() {
            let first = at.unwrap_or_default();
            let contiguous = found
                .iter()
                .enumerate()
                .all(|(i, f)| *f == Some(first + i as u64));
            if !contiguous {
                v.push(format!(
                    "append #{id} is in the log but not contiguous: {found:?}"
                ));
            }
            placed.push((id, first, first + records.len() as u64));
        }
        match (&op.result, at) {
            (OpResult::Pending, _) => v.push(format!("append #{id}: waiter left hanging")),
            (OpResult::Acked(seq), Some(first)) if *seq == first => {}
            (OpResult::Acked(seq), Some(first)) => v.push(format!(
                "append #{id} was told sequence {seq} but is at {first}"
            )),
            (OpResult::Acked(seq), None) => v.push(format!(
                "append #{id} was acknowledged at {seq} but is not in the log (lost)"
            )),
            (OpResult::Refused(kind), Some(first)) => v.push(format!(
                "append #{id} was refused ({kind:?}) but is in the log at {first}"
            )),
            (OpResult::Failed(kind), Some(first)) if clean_failure(*kind) => v.push(format!(
                "append #{id} failed with {kind:?} (nothing committed) but is in the log at {first}"
            )),
            _ => {}
        }
    }

    // Real-time order between appends that are in the log.
    for &(a, a_first, _) in &placed {
        let Some(a_ret) = ops[a].returned else {
            continue;
        };
        if !matches!(ops[a].result, OpResult::Acked(_)) {
            continue;
        }
        for &(b, b_first, _) in &placed {
            if a_ret < ops[b].invoked && a_first >= b_first {
                v.push(format!(
                    "append #{a} (at {a_first}) returned before #{b} was invoked, \
                     yet #{b} is at {b_first}"
                ));
            }
        }
    }

    // Reads and polls.
    let acked_end_before = |t: u64| -> u64 {
        placed
            .iter()
            .filter(|(id, _, _)| {
                matches!(ops[*id].result, OpResult::Acked(_))
                    && ops[*id].returned.is_some_and(|r| r < t)
            })
            .map(|(_, _, end)| *end)
            .max()
            .unwrap_or(0)
    };
    let first_invoked_after = |t: u64| -> u64 {
        placed
            .iter()
            .filter(|(id, _, _)| ops[*id].invoked > t)
            .map(|(_, first, _)| *first)
            .min()
            .unwrap_or(u64::MAX)
    };
    let mut reads: Vec<(u64, u64, usize)> = Vec::new(); // (invoked, returned, len)
    for (id, op) in ops.iter().enumerate() {
        let (len, ret) = match (&op.result, op.returned) {
            (OpResult::Read(seen), Some(ret)) => {
                let prefix = seen.len() <= final_log.len()
                    && seen.iter().zip(final_log).all(|(a, (_, b))| a == b);
                if !prefix {
                    v.push(format!("read #{id} is not a prefix of the final log"));
                }
                (seen.len(), ret)
            }
            (OpResult::Polled(applied), Some(ret)) => (*applied, ret),
            _ => continue,
        };
        let need = acked_end_before(op.invoked);
        if (len as u64) < need {
            v.push(format!(
                "{:?} #{id} saw {len} records, but appends through {need} were \
                 acknowledged before it began",
                op.kind
            ));
        }
        let future = first_invoked_after(ret);
        if (len as u64) > future {
            v.push(format!(
                "{:?} #{id} saw {len} records, including an append invoked after it returned \
                 (at {future})",
                op.kind
            ));
        }
        if matches!(op.kind, OpKind::Read) {
            reads.push((op.invoked, ret, len));
        }
    }
    for &(_, r1_ret, r1_len) in &reads {
        for &(r2_inv, _, r2_len) in &reads {
            if r1_ret < r2_inv && r2_len < r1_len {
                v.push(format!(
                    "a read saw {r2_len} records after an earlier read saw {r1_len}: \
                     the log went backwards"
                ));
            }
        }
    }

    // The tailing replica.
    let replica_prefix = replica_log.len() <= final_log.len()
        && replica_log.iter().zip(final_log).all(|(a, b)| a == b);
    if !replica_prefix {
        v.push("the replica's log is not a prefix of the final log".into());
    } else if replica_log.len() != final_log.len() {
        v.push(format!(
            "the replica caught up to {} of {} records",
            replica_log.len(),
            final_log.len()
        ));
    }

    // Writers and manifest history.
    let mut last_epoch = 0;
    for (id, op) in ops.iter().enumerate() {
        if let OpResult::Opened(epoch) = op.result {
            if epoch <= last_epoch {
                v.push(format!(
                    "open #{id} got epoch {epoch} after a writer with epoch {last_epoch}"
                ));
            }
            last_epoch = epoch;
        }
    }
    v.extend(check_manifest_history(manifests, pages, runs));
    v
}

/// The run id in a segment location `<prefix>/<run>/<ordinal>`.
fn run_of(location: &str) -> Option<&str> {
    let mut parts = location.rsplit('/');
    parts.next()?;
    parts.next()
}

/// Checks the manifest states a run left, in order: the epoch never goes
/// back, neither does the next sequence, each state keeps the entries of
/// the one before (counting those its history pages hold: a checkpoint
/// moves entries, it never loses or changes one), and every entry and every
/// history page a state adds comes from the run (by the run id in its
/// location, mapped to its epoch by `runs`) that holds the state's epoch —
/// so no fenced writer committed, or checkpointed, after it was fenced.
pub fn check_manifest_history(
    manifests: &[Bytes],
    pages: &HashMap<String, HistoryPage>,
    runs: &HashMap<String, u64>,
) -> Vec<String> {
    let mut v = Vec::new();
    let mut prev: Option<(Manifest, Vec<ManifestEntry>, BTreeSet<String>)> = None;
    for (i, bytes) in manifests.iter().enumerate() {
        let m = match Manifest::from_bytes(bytes) {
            Ok(m) => m,
            Err(e) => {
                v.push(format!("manifest state {i} does not decode: {e}"));
                continue;
            }
        };
        let (all, named) = match expand(&m, pages) {
            Ok(x) => x,
            Err(e) => {
                v.push(format!("manifest state {i}: {e}"));
                continue;
            }
        };
        let named: BTreeSet<String> = named.into_iter().collect();
        let kept = prev.as_ref().map_or(0, |p| p.1.len());
        if let Some((p, p_all, p_named)) = &prev {
            if m.epoch() < p.epoch() {
                v.push(format!(
                    "manifest state {i}: epoch went back from {} to {}",
                    p.epoch(),
                    m.epoch()
                ));
            }
            if m.next_sequence() < p.next_sequence() {
                v.push(format!("manifest state {i}: next sequence went back"));
            }
            if all.get(..p_all.len()) != Some(&p_all[..]) {
                v.push(format!(
                    "manifest state {i} does not keep the entries of state {}",
                    i - 1
                ));
                prev = Some((m, all, named));
                continue;
            }
            for page in named.difference(p_named) {
                let run = page_run(page).unwrap_or("");
                if runs.get(run) != Some(&m.epoch()) {
                    v.push(format!(
                        "manifest state {i} (epoch {}) adds page {page}, not of its writer's run",
                        m.epoch()
                    ));
                }
            }
        }
        for e in &all[kept..] {
            let run = run_of(&e.location).unwrap_or("");
            match runs.get(run) {
                Some(&epoch) if epoch == m.epoch() => {}
                Some(&epoch) => v.push(format!(
                    "manifest state {i} (epoch {}) adds {} from the run of epoch {epoch}: \
                     a fenced writer committed",
                    m.epoch(),
                    e.location
                )),
                None => v.push(format!(
                    "manifest state {i} adds {} from an unknown run",
                    e.location
                )),
            }
        }
        prev = Some((m, all, named));
    }
    v
}

/// The run id in a history page location `<prefix>/<lv>-<first>-<end>-<run>-<plan>`.
fn page_run(location: &str) -> Option<&str> {
    // <level>-<first>-<end>-<run>-<plan>
    location.rsplit('/').next()?.split('-').nth(3)
}

/// A run's report in a few lines, for failure messages.
pub fn summary(run: &SimRun) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "seed {}: {} writers, {} acked, {} fenced, {} indeterminate, {} halts; faults {:?}",
        run.seed, run.writers, run.acked, run.fenced, run.indeterminate, run.halts, run.stats
    );
    for v in &run.violations {
        let _ = writeln!(s, "  violation: {v}");
    }
    s
}

/// Below the faults: records every manifest object that lands.
#[derive(Debug)]
pub struct Recorder {
    store: Arc<HookedStore>,
    history: Arc<Mutex<Vec<Bytes>>>,
}

impl Recorder {
    /// Records the manifest at `manifest` of `inner`.
    pub fn new(inner: Arc<dyn ObjectStore>, manifest: &str) -> Self {
        let history = Arc::new(Mutex::new(Vec::new()));
        let landed = history.clone();
        let manifest = Path::from(manifest);
        let store = HookedStore::new(inner).with_hook(after(move |call, ok, _inner| {
            if let (Op::Put, true, Some((payload, _))) = (call.op, ok, &call.put)
                && call.path == manifest
            {
                landed.lock().unwrap().push(Bytes::from(payload.clone()));
            }
            async { After::Keep }
        }));
        Recorder {
            store: Arc::new(store),
            history,
        }
    }

    /// The recording store, to stack the faults over.
    pub fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// Every manifest object written so far, in order.
    pub fn history(&self) -> Vec<Bytes> {
        self.history.lock().unwrap().clone()
    }
}

/// The checker must catch what it claims to catch: hand-made histories
/// that break one guarantee each.
mod checker_tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::from(s.to_string())
    }

    fn append(records: &[&str], invoked: u64, returned: u64, result: OpResult) -> OpRecord {
        OpRecord {
            kind: OpKind::Append {
                writer: 0,
                records: records.iter().map(|r| b(r)).collect(),
            },
            invoked,
            returned: Some(returned),
            result,
        }
    }

    fn read(seen: &[&str], invoked: u64, returned: u64) -> OpRecord {
        OpRecord {
            kind: OpKind::Read,
            invoked,
            returned: Some(returned),
            result: OpResult::Read(seen.iter().map(|r| b(r)).collect()),
        }
    }

    fn log(records: &[&str]) -> Vec<(u64, Bytes)> {
        records
            .iter()
            .enumerate()
            .map(|(i, r)| (i as u64, b(r)))
            .collect()
    }

    fn violations(ops: &[OpRecord], final_log: &[(u64, Bytes)]) -> Vec<String> {
        check(
            ops,
            final_log,
            &[],
            &HashMap::new(),
            &HashMap::new(),
            final_log,
        )
    }

    #[test]
    fn a_correct_history_passes() {
        let ops = [
            append(&["a0", "a1"], 0, 3, OpResult::Acked(0)),
            append(&["b0"], 1, 5, OpResult::Failed(ErrorKind::Indeterminate)),
            append(&["c0"], 2, 4, OpResult::Failed(ErrorKind::Fenced)),
            read(&["a0", "a1"], 6, 7),
        ];
        assert_eq!(
            violations(&ops, &log(&["a0", "a1", "b0"])),
            Vec::<String>::new()
        );
    }

    #[test]
    fn lost_misplaced_and_partial_appends_are_caught() {
        let ops = [append(&["a0"], 0, 1, OpResult::Acked(0))];
        assert!(violations(&ops, &log(&[]))[0].contains("lost"));
        let v = violations(&ops, &log(&["x", "a0"]));
        assert!(v[0].contains("told sequence 0 but is at 1"), "{v:?}");
        let ops = [append(
            &["a0", "a1"],
            0,
            1,
            OpResult::Failed(ErrorKind::Indeterminate),
        )];
        assert!(violations(&ops, &log(&["a0"]))[0].contains("only partly"));
    }

    #[test]
    fn clean_failures_that_landed_and_duplicates_are_caught() {
        let ops = [append(&["a0"], 0, 1, OpResult::Failed(ErrorKind::Fenced))];
        assert!(violations(&ops, &log(&["a0"]))[0].contains("nothing committed"));
        let ops = [append(&["a0"], 0, 1, OpResult::Refused(ErrorKind::Closed))];
        assert!(violations(&ops, &log(&["a0"]))[0].contains("refused"));
        let ops = [append(&["a0"], 0, 1, OpResult::Acked(0))];
        let v = violations(&ops, &log(&["a0", "a0"]));
        assert!(v.iter().any(|m| m.contains("twice")), "{v:?}");
    }

    #[test]
    fn real_time_order_is_enforced() {
        // a returned (t=1) before b was invoked (t=2), yet b is first.
        let ops = [
            append(&["a"], 0, 1, OpResult::Acked(1)),
            append(&["b"], 2, 3, OpResult::Acked(0)),
        ];
        let v = violations(&ops, &log(&["b", "a"]));
        assert!(v.iter().any(|m| m.contains("returned before")), "{v:?}");
    }

    #[test]
    fn stale_future_and_backward_reads_are_caught() {
        let acked = append(&["a"], 0, 1, OpResult::Acked(0));
        // Invoked after `a` was acknowledged, yet does not see it.
        let v = violations(&[acked.clone(), read(&[], 2, 3)], &log(&["a"]));
        assert!(
            v.iter().any(|m| m.contains("acknowledged before it began")),
            "{v:?}"
        );
        // Sees `b`, which was invoked only after the read returned.
        let late = append(&["b"], 5, 6, OpResult::Acked(1));
        let v = violations(
            &[acked.clone(), read(&["a", "b"], 2, 3), late],
            &log(&["a", "b"]),
        );
        assert!(
            v.iter().any(|m| m.contains("invoked after it returned")),
            "{v:?}"
        );
        // Two reads in sequence: the second sees less.
        let unknown = append(&["b"], 0, 9, OpResult::Failed(ErrorKind::Indeterminate));
        let v = violations(
            &[acked, unknown, read(&["a", "b"], 2, 3), read(&["a"], 4, 5)],
            &log(&["a", "b"]),
        );
        assert!(v.iter().any(|m| m.contains("went backwards")), "{v:?}");
        let v = violations(&[read(&["z"], 0, 1)], &log(&["a"]));
        assert!(v.iter().any(|m| m.contains("not a prefix")), "{v:?}");
    }

    #[test]
    fn a_lagging_or_diverging_replica_is_caught() {
        let full = log(&["a", "b"]);
        let v = check(
            &[],
            &full,
            &[],
            &HashMap::new(),
            &HashMap::new(),
            &full[..1],
        );
        assert!(v[0].contains("caught up to 1 of 2"), "{v:?}");
        let v = check(
            &[],
            &full,
            &[],
            &HashMap::new(),
            &HashMap::new(),
            &log(&["b"]),
        );
        assert!(v[0].contains("not a prefix"), "{v:?}");
    }

    #[test]
    fn commits_by_fenced_runs_and_rewritten_history_are_caught() {
        use weft::format::ManifestVersion;
        let old = Ulid::from_parts(1, 1).to_string();
        let new = Ulid::from_parts(1, 2).to_string();
        let runs: HashMap<String, u64> = [(old.clone(), 1), (new.clone(), 2)].into();
        let no_pages = HashMap::new();
        let mut m = Manifest::new(ManifestVersion::V4);
        m.bump_epoch().unwrap();
        m.append(format!("wal/seg/{old}/0"), vec![], 1).unwrap();
        let s1 = m.to_bytes().unwrap();
        m.bump_epoch().unwrap();
        let s2 = m.to_bytes().unwrap();
        let mut good = m.clone();
        good.append(format!("wal/seg/{new}/0"), vec![], 1).unwrap();
        m.append(format!("wal/seg/{old}/1"), vec![], 1).unwrap();
        let zombie = m.to_bytes().unwrap();
        let ok = [s1.clone(), s2.clone(), good.to_bytes().unwrap()];
        assert_eq!(
            check_manifest_history(&ok, &no_pages, &runs),
            Vec::<String>::new()
        );
        let v = check_manifest_history(&[s1.clone(), s2.clone(), zombie], &no_pages, &runs);
        assert!(v[0].contains("a fenced writer committed"), "{v:?}");
        let v = check_manifest_history(&[s2, s1], &no_pages, &runs);
        assert!(v.iter().any(|m| m.contains("epoch went back")), "{v:?}");
        let mut other = Manifest::new(ManifestVersion::V4);
        other.append(format!("wal/seg/{new}/9"), vec![], 1).unwrap();
        let v = check_manifest_history(
            &ok[..1]
                .iter()
                .cloned()
                .chain([other.to_bytes().unwrap()])
                .collect::<Vec<_>>(),
            &no_pages,
            &runs,
        );
        assert!(
            v.iter().any(|m| m.contains("does not keep the entries")),
            "{v:?}"
        );
    }

    #[test]
    fn checkpoints_by_fenced_runs_and_lost_entries_are_caught() {
        use weft::format::{ManifestVersion, decode_page};
        let old = Ulid::from_parts(1, 1);
        let new = Ulid::from_parts(1, 2);
        let runs: HashMap<String, u64> = [(old.to_string(), 1), (new.to_string(), 2)].into();
        let policy = CheckpointPolicy::default()
            .with_max_recent_entries(2)
            .with_max_recent_bytes(1 << 20)
            .with_leaf_entries(1)
            .with_leaf_bytes(1 << 19)
            .with_fanout(2)
            .with_max_pages_per_commit(4);
        let mut m = Manifest::new(ManifestVersion::V5);
        m.bump_epoch().unwrap();
        for o in 0..3 {
            m.append(format!("wal/seg/{old}/{o}"), vec![], 1).unwrap();
        }
        let s1 = m.to_bytes().unwrap();
        m.bump_epoch().unwrap();
        let s2 = m.to_bytes().unwrap();
        let mut pages = HashMap::new();
        let mut checkpointed = |m: &mut Manifest, run: Ulid| {
            let ups = m
                .checkpoint(&policy, m.next_sequence(), |l, f, e| {
                    format!("{HISTORY}/{l:02x}-{f:016x}-{e:016x}-{run}-{:016x}", 0)
                })
                .unwrap();
            assert!(!ups.is_empty());
            for u in ups {
                pages.insert(u.location, decode_page(&u.bytes).unwrap());
            }
            m.to_bytes().unwrap()
        };
        let mut good = m.clone();
        let s3 = checkpointed(&mut good, new);
        let mut zombie = m.clone();
        let s3_zombie = checkpointed(&mut zombie, old);
        let none: Vec<String> = Vec::new();
        let ok = [s1.clone(), s2.clone(), s3];
        assert_eq!(check_manifest_history(&ok, &pages, &runs), none);
        let v = check_manifest_history(&[s1.clone(), s2.clone(), s3_zombie], &pages, &runs);
        assert!(v[0].contains("not of its writer's run"), "{v:?}");
        // A page that is not stored, or a state that lost entries.
        let v = check_manifest_history(&ok, &HashMap::new(), &runs);
        assert!(v[0].contains("not stored"), "{v:?}");
        let mut lost = good.clone();
        lost.truncate_through(0);
        let v = check_manifest_history(&[s1, s2, lost.to_bytes().unwrap()], &pages, &runs);
        assert!(v[0].contains("does not keep the entries"), "{v:?}");
    }
}
