//! A deterministic simulation of retention GC racing every kind of manifest
//! edit, and the checker of the one promise GC makes: **no current manifest
//! ever references an object that is gone.**
//!
//! One run is one seed, on the same machinery as `sim.rs` (an in-memory
//! store under the fault store, a paused single-thread runtime). It runs:
//!
//! * writers (producers) opened on a seeded failover schedule and whenever
//!   the current one halted, with appenders committing segments to them
//!   (sometimes to a fenced zombie);
//! * an editor making every other kind of manifest edit: truncation and
//!   snapshots through the writer, and snapshots by a tool beside it
//!   (`write_unowned`, which keeps the epoch);
//! * GC passes with **no grace period**, all the time.
//!
//! Most runs checkpoint (a tiny policy drawn per seed): writers store
//! history pages create-only before the CAS that names them, crash or are
//! fenced between the two, and truncations cut into the pages, so GC's
//! walk of the tree and its rules for pages meet every race too.
//!
//! The faults include writes that land long after their caller gave up —
//! manifest CASes (commits, claims, edits) among them, some later than the
//! commit window — and answers that hang longer than the window, so that
//! writers meet it.
//!
//! Below the faults a [`Stamper`] gives every object a `last_modified`
//! stamp in simulated time (the store's clock) and checks, at the instant
//! each write lands: a manifest that lands references only objects that
//! exist; a delete that lands removes nothing the current manifest
//! references. At the end, after every late write had time to land and
//! the commit window had passed, one more claim and GC pass must leave no
//! unreferenced weft object behind (GC is not merely safe by never
//! deleting), and a fresh replica must read the log.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;
use weft::objects::RetryPolicy;
use weft::wal::KeepReason;
use weft::wal::window::{COMMIT_WINDOW, STAMP_MARGIN};
use weft::wal::{Applier, CheckpointPolicy, Gc, Producer, Record, Replica, SnapshotWriter};
use weft_testkit::fault::{FaultConfig, FaultStats, FaultStore, OpFaults};

use super::sim::{Profile, faults, ms, tiny_checkpoints};
use super::stamped::{SimClock, Stamper};

/// The manifest's path.
pub const MANIFEST: &str = "wal/manifest";
/// The segments' prefix.
pub const SEGMENTS: &str = "wal/seg";
/// The snapshots' prefix (the default next to the manifest).
pub const SNAPSHOTS: &str = "wal/snapshots";

/// What one run produced.
#[derive(Debug)]
pub struct GcRun {
    /// The seed.
    pub seed: u64,
    /// Every recorded event with its simulated time.
    pub trace: Vec<String>,
    /// What the checker found wrong.
    pub violations: Vec<String>,
    /// Objects GC deleted (deletes that landed).
    pub deleted: usize,
    /// Objects GC deleted after an earlier pass had kept them as pending.
    pub deleted_after_pending: usize,
    /// Pending objects GC kept, summed over passes.
    pub kept_pending: usize,
    /// Manifest states that landed.
    pub manifests: usize,
    /// History pages some manifest named.
    pub pages_named: usize,
    /// History pages GC deleted.
    pub pages_deleted: usize,
    /// Edits (truncations, snapshots) that succeeded, by kind.
    pub edits: [usize; 3],
    /// Writers opened.
    pub writers: usize,
    /// Faults injected.
    pub stats: FaultStats,
}

/// The knobs of one run.
#[derive(Debug, Clone)]
struct Plan {
    faults: FaultConfig,
    retry: RetryPolicy,
    appenders: usize,
    appends_each: usize,
    zombie_chance: f64,
    failovers: Vec<Duration>,
    edit_every: Duration,
    gc_every: Duration,
    /// The longest pause between two appends of one appender.
    append_gap: Duration,
    /// How writers checkpoint (the default policy never does in a run
    /// this short).
    checkpoint: CheckpointPolicy,
}

fn plan(seed: u64) -> Plan {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0067_6373_696d);
    let (mut faults, mut retry) = faults(seed, Profile::Mixed, &mut rng);
    // More late landings, of deletes too; some of them, and some hangs,
    // longer than the commit window.
    faults.put.late = rng.random_range(0.02..0.12);
    faults.delete = OpFaults {
        error: rng.random_range(0.0..0.1),
        ambiguous: rng.random_range(0.0..0.1),
        late: rng.random_range(0.0..0.1),
        ..OpFaults::default()
    };
    let window = COMMIT_WINDOW.as_millis() as u64;
    if rng.random_bool(0.3) {
        faults.late_by = ms(&mut rng, window / 2, 3 * window);
    }
    // A third of the runs last many commit windows: appends minutes apart,
    // and answers that hang (or requests that vanish) for longer than the
    // window, so writers meet it and GC's window rule decides.
    let slow = rng.random_bool(0.35);
    if slow {
        faults.hang_for = ms(&mut rng, window / 2, 2 * window);
        faults.put.hang = rng.random_range(0.02..0.1);
        faults.put.lost = rng.random_range(0.02..0.1);
        faults.get.hang = rng.random_range(0.0..0.05);
    }
    retry.deadline = ms(&mut rng, 5_000, 300_000);
    let failovers = {
        let n = rng.random_range(0..=3);
        let mut at: Vec<Duration> = (0..n).map(|_| ms(&mut rng, 10, 400)).collect();
        at.sort();
        at
    };
    Plan {
        faults,
        retry,
        appenders: rng.random_range(2..=3),
        appends_each: rng.random_range(5..=12),
        zombie_chance: rng.random_range(0.0..0.2),
        failovers,
        edit_every: if slow {
            ms(&mut rng, 500, 20_000)
        } else {
            ms(&mut rng, 5, 60)
        },
        gc_every: if slow {
            ms(&mut rng, 300, 10_000)
        } else {
            ms(&mut rng, 3, 40)
        },
        append_gap: if slow {
            ms(&mut rng, 1_000, window / 3)
        } else {
            Duration::from_millis(30)
        },
        checkpoint: if rng.random_bool(0.75) {
            // A checkpoint at almost every commit: few entries stay.
            let max_recent_entries = rng.random_range(2..=3);
            tiny_checkpoints(seed)
                .with_max_recent_entries(max_recent_entries)
                .with_leaf_entries(rng.random_range(1..max_recent_entries))
                .with_fanout(rng.random_range(2..=3))
        } else {
            CheckpointPolicy::default()
        },
    }
}

/// The state the simulated tasks share.
struct World {
    start: Instant,
    trace: Mutex<Vec<String>>,
    writers: Mutex<Vec<Arc<Producer>>>,
    acked: Mutex<Option<u64>>,
    appenders_done: AtomicBool,
    edits: Mutex<[usize; 3]>,
    kept_pending: AtomicUsize,
    pending_seen: Mutex<BTreeSet<String>>,
    deleted_after_pending: AtomicUsize,
}

impl World {
    fn note(&self, what: String) {
        let at = self.start.elapsed().as_micros();
        self.trace
            .lock()
            .unwrap()
            .push(format!("{at:>12}us {what}"));
    }

    fn current(&self) -> Option<Arc<Producer>> {
        self.writers.lock().unwrap().last().cloned()
    }
}

/// Runs one seed on its own paused single-thread runtime.
pub fn simulate_gc(seed: u64) -> GcRun {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("build the simulation runtime");
    rt.block_on(run(seed))
}

async fn run(seed: u64) -> GcRun {
    let plan = plan(seed);
    let clock = Arc::new(SimClock::new());
    let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let stamper = Arc::new(Stamper::new(memory.clone(), clock.clone(), MANIFEST));
    let faulty = FaultStore::wrap(stamper.clone(), plan.faults.clone());
    let store: Arc<dyn ObjectStore> = faulty.clone();
    let world = Arc::new(World {
        start: Instant::now(),
        trace: Mutex::new(Vec::new()),
        writers: Mutex::new(Vec::new()),
        acked: Mutex::new(None),
        appenders_done: AtomicBool::new(false),
        edits: Mutex::new([0; 3]),
        kept_pending: AtomicUsize::new(0),
        pending_seen: Mutex::new(BTreeSet::new()),
        deleted_after_pending: AtomicUsize::new(0),
    });
    world.note(format!("seed {seed} {plan:?}"));
    let mut violations = Vec::new();

    let limit = Duration::from_secs(24 * 3_600);
    let driven = tokio::time::timeout(
        limit,
        drive(seed, &plan, world.clone(), store.clone(), clock.clone()),
    )
    .await;
    if driven.is_err() {
        violations.push(format!("the run did not finish within {limit:?}"));
    }
    // Every late write lands; then, the commit window past, a last claim
    // and GC pass collect every upload that can no longer be committed.
    let settle = plan.faults.hang_for + plan.faults.late_by + Duration::from_secs(1);
    tokio::time::sleep(settle + COMMIT_WINDOW + STAMP_MARGIN + Duration::from_secs(2)).await;
    faulty.set_config(FaultConfig {
        seed,
        ..FaultConfig::default()
    });
    let last = Producer::builder(store.clone(), MANIFEST, SEGMENTS)
        .with_take_over(true)
        .with_clock(clock.clone())
        .with_seed(seed ^ 0xfeed)
        .with_checkpoint_policy(plan.checkpoint.clone())
        .open()
        .await;
    match last {
        Ok(p) => {
            let _ = p.close().await;
        }
        Err(e) => violations.push(format!("the final claim failed: {e}")),
    }
    match gc_pass(&world, &store, &clock, &plan, 0).await {
        Ok(report) => {
            for kept in report.kept {
                if kept.reason != KeepReason::Unrecognised {
                    violations.push(format!(
                        "after every write landed and the window passed, GC still keeps {} ({:?})",
                        kept.object.location, kept.reason
                    ));
                }
            }
        }
        Err(e) => violations.push(format!("the final GC pass failed: {e}")),
    }
    if let Err(e) = read_everything(&store).await {
        violations.push(format!("a fresh replica cannot read the log: {e}"));
    }
    let listed: Vec<ObjectMeta> = memory
        .list(Some(&Path::from("wal")))
        .try_collect()
        .await
        .unwrap_or_default();
    world.note(format!("{} objects left", listed.len()));
    violations.extend(stamper.violations());
    let trace = std::mem::take(&mut *world.trace.lock().unwrap());
    let edits = *world.edits.lock().unwrap();
    GcRun {
        seed,
        trace,
        violations,
        deleted: stamper.deleted().len(),
        deleted_after_pending: world.deleted_after_pending.load(Ordering::SeqCst),
        kept_pending: world.kept_pending.load(Ordering::SeqCst),
        manifests: stamper.manifests(),
        pages_named: stamper.pages_named(),
        pages_deleted: stamper.pages_deleted(),
        edits,
        writers: world.writers.lock().unwrap().len(),
        stats: faulty.stats(),
    }
}

async fn drive(
    seed: u64,
    plan: &Plan,
    world: Arc<World>,
    store: Arc<dyn ObjectStore>,
    clock: Arc<SimClock>,
) {
    if !open_writer(seed, plan, &world, &store, &clock).await {
        world.note("no writer could be opened".into());
        return;
    }
    let supervisor = tokio::spawn(supervise(
        seed,
        plan.clone(),
        world.clone(),
        store.clone(),
        clock.clone(),
    ));
    let editor = tokio::spawn(edit(
        seed,
        plan.clone(),
        world.clone(),
        store.clone(),
        clock.clone(),
    ));
    let collector = tokio::spawn(collect(
        plan.clone(),
        world.clone(),
        store.clone(),
        clock.clone(),
    ));
    let appenders: Vec<_> = (0..plan.appenders)
        .map(|a| {
            let rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(77).wrapping_add(a as u64));
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
    editor.await.expect("editor task");
    collector.await.expect("gc task");
    let writers = world.writers.lock().unwrap().clone();
    for w in writers {
        let _ = w.close().await;
    }
}

async fn open_writer(
    seed: u64,
    plan: &Plan,
    world: &World,
    store: &Arc<dyn ObjectStore>,
    clock: &Arc<SimClock>,
) -> bool {
    for attempt in 0..50u64 {
        let index = world.writers.lock().unwrap().len() as u64;
        let opened = Producer::builder(store.clone(), MANIFEST, SEGMENTS)
            .with_take_over(true)
            .with_seed(
                seed.wrapping_mul(1_000)
                    .wrapping_add(index * 64 + attempt + 1),
            )
            .with_clock(clock.clone())
            .with_retry_policy(plan.retry.clone())
            .with_flush_interval(Duration::from_millis(7))
            .with_segment_max_bytes(48)
            .with_manifest_batch(2)
            .with_checkpoint_policy(plan.checkpoint.clone())
            .open()
            .await;
        match opened {
            Ok(p) => {
                world.note(format!(
                    "writer {index} opened: run {} epoch {}",
                    p.run_id(),
                    p.epoch()
                ));
                world.writers.lock().unwrap().push(Arc::new(p));
                return true;
            }
            Err(e) => {
                world.note(format!("open failed: {e}"));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    false
}

async fn supervise(
    seed: u64,
    plan: Plan,
    world: Arc<World>,
    store: Arc<dyn ObjectStore>,
    clock: Arc<SimClock>,
) {
    let mut schedule = plan.failovers.clone().into_iter().peekable();
    while !world.appenders_done.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let halted = world.current().and_then(|w| w.halted());
        let due = schedule
            .peek()
            .is_some_and(|at| world.start.elapsed() >= *at);
        if due {
            schedule.next();
        }
        if (due || halted.is_some()) && !open_writer(seed, &plan, &world, &store, &clock).await {
            world.note("no replacement writer could be opened".into());
            return;
        }
    }
}

async fn append_some(
    mut rng: ChaCha8Rng,
    plan: Plan,
    world: Arc<World>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut waits = Vec::new();
    for i in 0..plan.appends_each {
        let gap = plan.append_gap.as_millis() as u64;
        tokio::time::sleep(ms(&mut rng, 0, gap)).await;
        let writer = {
            let writers = world.writers.lock().unwrap();
            let n = writers.len();
            if n > 1 && rng.random_bool(plan.zombie_chance) {
                writers[rng.random_range(0..n - 1)].clone()
            } else {
                writers[n - 1].clone()
            }
        };
        let records: Vec<Bytes> = (0..rng.random_range(1..=3))
            .map(|r| Bytes::from(format!("a{i}r{r}")))
            .collect();
        if let Ok(d) = writer.append(records, None).await {
            let world = world.clone();
            waits.push(tokio::spawn(async move {
                if let Ok(seq) = d.wait().await {
                    let mut acked = world.acked.lock().unwrap();
                    *acked = Some(acked.map_or(seq, |a| a.max(seq)));
                }
            }));
        }
    }
    waits
}

/// Truncations and snapshots, through the writer and by a tool beside it.
async fn edit(
    seed: u64,
    plan: Plan,
    world: Arc<World>,
    store: Arc<dyn ObjectStore>,
    clock: Arc<SimClock>,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0000_6564_6974);
    let mut n = 0u64;
    while !world.appenders_done.load(Ordering::SeqCst) {
        tokio::time::sleep(plan.edit_every).await;
        let Some(acked) = *world.acked.lock().unwrap() else {
            continue;
        };
        let Some(writer) = world.current() else {
            continue;
        };
        let through = rng.random_range(0..=acked);
        let kind = rng.random_range(0..3usize);
        n += 1;
        let snapshots = SnapshotWriter::new(store.clone(), MANIFEST)
            .with_clock(clock.clone())
            .with_seed(seed.wrapping_mul(7_919).wrapping_add(n))
            .with_retry_policy(plan.retry.clone());
        let bytes = Bytes::from(format!("state through {through}"));
        let result = match kind {
            0 => writer.truncate_through(through).await.map(|_| ()),
            1 => snapshots.write(&writer, bytes, through).await.map(|_| ()),
            _ => snapshots
                .write_unowned(&Path::from(MANIFEST), bytes, through)
                .await
                .map(|_| ()),
        };
        let what = ["truncate", "snapshot", "tool snapshot"][kind];
        match result {
            Ok(()) => {
                world.edits.lock().unwrap()[kind] += 1;
                world.note(format!("{what} through {through}: ok"));
            }
            Err(e) => world.note(format!("{what} through {through}: {:?} {e}", e.kind())),
        }
    }
}

/// GC with no grace period, again and again.
async fn collect(plan: Plan, world: Arc<World>, store: Arc<dyn ObjectStore>, clock: Arc<SimClock>) {
    let mut pass = 0u64;
    while !world.appenders_done.load(Ordering::SeqCst) {
        tokio::time::sleep(plan.gc_every).await;
        pass += 1;
        if let Err(e) = gc_pass(&world, &store, &clock, &plan, pass).await {
            world.note(format!("gc pass {pass}: {:?}", e.kind()));
        }
    }
}

async fn gc_pass(
    world: &World,
    store: &Arc<dyn ObjectStore>,
    clock: &Arc<SimClock>,
    plan: &Plan,
    pass: u64,
) -> weft::Result<weft::wal::GcReport> {
    let report = Gc::new(store.clone(), MANIFEST, SEGMENTS)
        .with_grace(Duration::ZERO)
        .with_clock(clock.clone())
        .with_retry_policy(plan.retry.clone())
        .with_concurrency(2)
        .with_seed(pass)
        .run()
        .await?;
    let mut seen = world.pending_seen.lock().unwrap();
    for kept in &report.kept {
        if kept.reason == KeepReason::Pending {
            world.kept_pending.fetch_add(1, Ordering::SeqCst);
            seen.insert(kept.object.location.clone());
        }
    }
    for gone in &report.deleted {
        if seen.contains(&gone.location) {
            world.deleted_after_pending.fetch_add(1, Ordering::SeqCst);
        }
    }
    drop(seen);
    world.note(format!(
        "gc pass {pass}: deleted {}, kept {}",
        report.deleted.len(),
        report.kept.len()
    ));
    Ok(report)
}

/// Reads the whole log with a fresh replica (restoring the snapshot).
async fn read_everything(store: &Arc<dyn ObjectStore>) -> weft::Result<()> {
    struct Sink;
    #[async_trait]
    impl Applier for Sink {
        async fn apply(&mut self, _record: &Record) -> weft::Result<()> {
            Ok(())
        }
        async fn restore(&mut self, _snapshot: Bytes, _through: u64) -> weft::Result<()> {
            Ok(())
        }
    }
    Replica::builder(store.clone(), MANIFEST, Sink)
        .build()
        .poll()
        .await
        .map(|_| ())
}
