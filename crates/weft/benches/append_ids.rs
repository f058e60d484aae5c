//! What exactly-once appends cost, each figure with ids against the same
//! thing without them in the same run: memory per remembered id, the id
//! check on the append path (the plan under the sequencer), durable appends
//! on the dir backend (8 concurrent appenders), and the dir backend's
//! reopen (which rebuilds the window from the log).
//!
//! `cargo bench -p weft --bench append_ids` prints each figure (medians of
//! several runs). `WEFT_BENCH_QUICK=1` runs one short iteration (CI smoke).
//! The dir logs live under the workspace's `target/`.

// Benchmarks measure real time: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use weft::storage::NewEntry;
use weft::storage::dir::{DirOptions, DirStorage};
use weft::storage::kit::AppendIds;
use weft::storage::kit::Sequencer;
use weft::{AppendRequest, AppendResult, Log, LogTag};

/// Counts live heap bytes, to measure what the id window holds.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn id(i: usize) -> String {
    format!("order-{i:08}/placed")
}

fn tag(i: usize) -> LogTag {
    LogTag::with_key("orders", format!("o-{}", i % 1000)).unwrap()
}

/// Heap bytes per id of a full window of `n` ids (21-byte ids, 12-byte
/// tags).
fn bytes_per_id(n: usize) -> f64 {
    let tags: Vec<LogTag> = (0..n).map(tag).collect();
    let ids: Vec<String> = (0..n).map(id).collect();
    let before = LIVE.load(Ordering::Relaxed);
    let mut window = AppendIds::bounded(n);
    for (i, (id, tag)) in ids.iter().zip(&tags).enumerate() {
        window.observe(
            id,
            AppendResult {
                seqnum: i as u64,
                stream_version: i as u64,
                primary_tag: tag.clone(),
                timestamp_ms: 0,
            },
        );
    }
    let after = LIVE.load(Ordering::Relaxed);
    assert_eq!(window.len(), n);
    (after - before) as f64 / n as f64
}

/// Nanoseconds per single-entry plan, with or without an id, through a
/// full window of `window` ids.
fn plan_ns(with_ids: bool, window: usize, appends: usize) -> f64 {
    let mut sequencer = Sequencer::new();
    let mut ids = AppendIds::bounded(window);
    let tags: Vec<LogTag> = (0..16).map(tag).collect();
    let start = Instant::now();
    for i in 0..appends {
        let entry = NewEntry {
            tags: vec![tags[i % tags.len()].clone()],
            data: bytes::Bytes::from_static(b"payload"),
            expected_version: None,
            append_id: with_ids.then(|| id(i)),
        };
        let planned = ids
            .plan(&mut sequencer, vec![entry], 1, |_| Ok(None))
            .unwrap();
        assert_eq!(planned.results.len(), 1);
    }
    start.elapsed().as_nanos() as f64 / appends as f64
}

/// Durable appends per second on a dir log: `appenders` tasks, each
/// awaiting its own single-entry appends, `per_appender` each.
async fn appends_per_sec(with_ids: bool, appenders: usize, per_appender: usize) -> f64 {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let log = std::sync::Arc::new(Log::new(DirStorage::open(tmp.path()).await.unwrap()));
    let start = Instant::now();
    let tasks: Vec<_> = (0..appenders)
        .map(|a| {
            let log = log.clone();
            tokio::spawn(async move {
                for k in 0..per_appender {
                    let i = a * per_appender + k;
                    let r = AppendRequest::new(tag(i), vec![7u8; 100]);
                    let r = if with_ids { r.with_id(id(i)) } else { r };
                    log.append(r).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let rate = (appenders * per_appender) as f64 / start.elapsed().as_secs_f64();
    log.close().await.unwrap();
    rate
}

/// Seconds to reopen a dir log of `entries` entries (with or without ids).
async fn reopen_secs(with_ids: bool, entries: usize) -> f64 {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let options = DirOptions::default();
    {
        let log = Log::new(
            DirStorage::open_with(tmp.path(), options.clone())
                .await
                .unwrap(),
        );
        for chunk in (0..entries).collect::<Vec<_>>().chunks(1000) {
            let batch = chunk
                .iter()
                .map(|&i| {
                    let r = AppendRequest::new(tag(i), vec![7u8; 100]);
                    if with_ids { r.with_id(id(i)) } else { r }
                })
                .collect();
            log.append_batch(batch).await.unwrap();
        }
        log.close().await.unwrap();
    }
    let start = Instant::now();
    let storage = DirStorage::open_with(tmp.path(), options).await.unwrap();
    let secs = start.elapsed().as_secs_f64();
    drop(storage);
    secs
}

fn main() {
    let quick = std::env::var_os("WEFT_BENCH_QUICK").is_some();
    let (runs, window, appends, entries, per_appender) = if quick {
        (1, 1_000, 2_000, 2_000, 50)
    } else {
        (5, 1 << 16, 500_000, 200_000, 1_000)
    };
    println!(
        "window of {window} ids: {:.0} heap bytes per id (21-byte ids, 12-byte tags)",
        bytes_per_id(window)
    );
    for with_ids in [false, true] {
        let ns: Vec<f64> = (0..runs)
            .map(|_| plan_ns(with_ids, window, appends))
            .collect();
        println!(
            "plan one entry {}: {:.0} ns (median of {runs} runs of {appends})",
            if with_ids {
                "with an id   "
            } else {
                "without an id"
            },
            median(ns)
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for with_ids in [false, true] {
        let secs: Vec<f64> = (0..runs)
            .map(|_| rt.block_on(reopen_secs(with_ids, entries)))
            .collect();
        println!(
            "dir reopen of {entries} 100-byte entries {}: {:.0} ms (median of {runs})",
            if with_ids {
                "with ids   "
            } else {
                "without ids"
            },
            median(secs) * 1e3
        );
    }
    // Pairs back to back, so both halves of a pair meet the same disk.
    let mut rates = [Vec::new(), Vec::new()];
    for _ in 0..runs {
        for (k, with_ids) in [false, true].into_iter().enumerate() {
            rates[k].push(rt.block_on(appends_per_sec(with_ids, 8, per_appender)));
        }
    }
    let [without, with] = rates.map(median);
    println!(
        "dir durable 100-byte appends, 8 appenders: {without:.0}/s without ids, {with:.0}/s with ids ({:+.1} %, median of {runs})",
        (with / without - 1.0) * 100.0
    );
}
