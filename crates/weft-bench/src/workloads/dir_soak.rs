//! `dir-soak`: a dir log grown to a few GiB, then reopened.
//!
//! Eight appenders append batches of 100-byte entries over many streams
//! (1–2 tags each) until the log holds `WEFT_BENCH_SOAK_GIB` GiB (default
//! 4; 64 MiB in `--quick`). Every interval (`WEFT_BENCH_SOAK_INTERVAL_S`
//! seconds, by default a minute, two seconds in `--quick`) the workload
//! reports appends/s, the process's RSS and glibc's heap counters. Then
//! it closes the log and reopens it in a fresh child process, which
//! reports the open time, the time of a first read by tag and by version,
//! and its RSS. Targets: RSS within the backend's memory budget + 100 MB;
//! reopen under one second.
//!
//! `WEFT_BENCH_DIR_SOAK_REOPENS` (default 1) reopens the log that many
//! times, each in a fresh child (the reopen row gives the median, the
//! first reads and RSS are the last child's); `WEFT_BENCH_DIR_SOAK_KEEP`
//! names a path the closed log is moved to afterwards instead of being
//! removed (for reopening it by hand: `WEFT_BENCH_DIR_SOAK_REOPEN=<path>
//! weft-bench` runs one reopening child).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use weft::storage::dir::{DirOptions, DirStorage};
use weft::{AppendRequest, Log, LogTag};

use super::Ctx;
use crate::report::{Report, Row};

const WORKLOAD: &str = "dir-soak";

/// Set in the child that reopens the log: the log's directory.
pub const REOPEN_ENV: &str = "WEFT_BENCH_DIR_SOAK_REOPEN";

const ENTRY_BYTES: usize = 100;
const BATCH: usize = 64;
const APPENDERS: usize = 8;
const STREAMS: u64 = 1_000_000;

/// The memory the backend is configured with (its default budget).
fn budget_mib() -> f64 {
    DirOptions::default().memory_budget as f64 / (1 << 20) as f64
}

/// Current and peak resident set size in MiB (`VmRSS`, `VmHWM`).
pub fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// glibc's view of the heap in MiB: bytes in use, bytes free inside its
/// arenas, bytes in mmapped chunks (`mallinfo2`).
fn heap_mib() -> (f64, f64, f64) {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let m = unsafe { libc::mallinfo2() };
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    (mib(m.uordblks + m.hblkhd), mib(m.fordblks), mib(m.hblkhd))
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn stream(i: u64) -> LogTag {
    LogTag::with_key("orders", format!("customer-{i}")).expect("valid tag")
}

/// What the reopening child reports.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Reopened {
    open_ms: f64,
    first_reads_ms: f64,
    rss_mib: f64,
    next_seqnum: u64,
}

/// The child side: opens the log in `dir`, reads, reports one JSON line.
pub fn reopen_child(dir: &str) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let out = rt.block_on(async {
        let start = Instant::now();
        let storage = DirStorage::open(dir).await?;
        let open_ms = start.elapsed().as_secs_f64() * 1e3;
        let log = Log::new(storage);
        let t = Instant::now();
        let tag = stream(7);
        let by_tag = log.read_from(&tag, weft::Position::Beginning, 10).await?;
        let by_version = log.read_after_version(&tag, 0).await?;
        let first_reads_ms = t.elapsed().as_secs_f64() * 1e3;
        std::hint::black_box((by_tag, by_version));
        let next_seqnum = log.latest_seqnum().await?.map_or(0, |s| s + 1);
        let (rss, _) = rss_mib();
        log.close().await?;
        anyhow::Ok(Reopened {
            open_ms,
            first_reads_ms,
            rss_mib: rss,
            next_seqnum,
        })
    })?;
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}

fn reopen_in_child(dir: &Path) -> Result<Reopened> {
    let out = Command::new(std::env::current_exe()?)
        .env(REOPEN_ENV, dir)
        .output()
        .context("start the reopening child")?;
    if !out.status.success() {
        bail!(
            "reopening child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or_default())
        .with_context(|| format!("child said {text:?}"))
}

pub async fn run(ctx: &mut Ctx, report: &mut Report) -> Result<()> {
    let gib: f64 = std::env::var("WEFT_BENCH_SOAK_GIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4.0);
    let target_bytes = if ctx.quick {
        64u64 << 20
    } else {
        (gib * (1u64 << 30) as f64) as u64
    };
    let interval = match std::env::var("WEFT_BENCH_SOAK_INTERVAL_S")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(s) => Duration::from_secs(s),
        None if ctx.quick => Duration::from_secs(2),
        None => Duration::from_secs(60),
    };
    let dir: PathBuf = ctx.fresh_dir("dir-soak")?;
    let storage = DirStorage::open(&dir).await?;
    let log = Log::new(storage);
    let written = Arc::new(AtomicU64::new(0));
    let entries = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let data = Bytes::from(vec![7u8; ENTRY_BYTES]);
    let categories: Arc<Vec<LogTag>> = Arc::new(
        (0..16)
            .map(|c| LogTag::new(format!("category{c}")).expect("valid tag"))
            .collect(),
    );
    let mut tasks = Vec::new();
    for w in 0..APPENDERS as u64 {
        let (log, written, entries, done, data, categories) = (
            log.clone(),
            written.clone(),
            entries.clone(),
            done.clone(),
            data.clone(),
            categories.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut i = w << 40;
            while !done.load(Ordering::Relaxed) {
                let batch: Vec<AppendRequest> = (0..BATCH)
                    .map(|_| {
                        i += 1;
                        let r = mix(i);
                        let mut req = AppendRequest::new(stream(r % STREAMS), data.clone());
                        if (r >> 40) & 1 == 1 {
                            req = req.with_tag(categories[((r >> 48) % 16) as usize].clone());
                        }
                        req
                    })
                    .collect();
                log.append_batch(batch).await?;
                entries.fetch_add(BATCH as u64, Ordering::Relaxed);
                if written.fetch_add((BATCH * ENTRY_BYTES) as u64, Ordering::Relaxed)
                    >= target_bytes
                {
                    done.store(true, Ordering::Relaxed);
                }
            }
            anyhow::Ok(())
        }));
    }
    let start = Instant::now();
    let mut last = (start, 0u64);
    let mut minute = 0;
    let mut peak_rss: f64 = 0.0;
    while !done.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if last.0.elapsed() >= interval || done.load(Ordering::Relaxed) {
            let n = entries.load(Ordering::Relaxed);
            let rate = (n - last.1) as f64 / last.0.elapsed().as_secs_f64();
            let (rss, _) = rss_mib();
            peak_rss = peak_rss.max(rss);
            minute += 1;
            let heap = heap_mib();
            println!(
                "   interval {minute:>3}: {rate:>9.0} entries/s, RSS {rss:>6.0} MiB (malloc: {:.0} in use, {:.0} free, {:.0} mmapped), log {:.2} GiB",
                heap.0,
                heap.1,
                heap.2,
                written.load(Ordering::Relaxed) as f64 / (1u64 << 30) as f64
            );
            report.add(
                Row::new(WORKLOAD, format!("interval {minute}"), "weft dir")
                    .value(vec![rate], "entries/s")
                    .note(format!("RSS {rss:.0} MiB")),
            );
            last = (Instant::now(), n);
        }
    }
    for t in tasks {
        t.await??;
    }
    let total = entries.load(Ordering::Relaxed);
    let build_s = start.elapsed().as_secs_f64();
    log.close().await?;
    drop(log);
    let budget = budget_mib();
    report.add(
        Row::new(WORKLOAD, "writer RSS, peak of the intervals", "weft dir")
            .value(vec![peak_rss], "MiB")
            .target(
                format!("<= budget {budget:.0} MiB + 100"),
                peak_rss <= budget + 100.0,
            )
            .note(format!(
                "{total} entries in {build_s:.0} s ({:.0}/s)",
                total as f64 / build_s
            )),
    );
    let reopens: usize = std::env::var("WEFT_BENCH_DIR_SOAK_REOPENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut open_ms = Vec::with_capacity(reopens);
    let mut reopened = Reopened::default();
    for n in 0..reopens {
        reopened = reopen_in_child(&dir)?;
        if reopened.next_seqnum != total {
            bail!(
                "the reopened log ends at {}, {total} entries were appended",
                reopened.next_seqnum
            );
        }
        println!("   reopen {}: {:.1} ms", n + 1, reopened.open_ms);
        open_ms.push(reopened.open_ms);
    }
    if let Ok(keep) = std::env::var("WEFT_BENCH_DIR_SOAK_KEEP") {
        std::fs::rename(&dir, &keep).with_context(|| format!("move the log to {keep}"))?;
        println!("   the log is kept in {keep}");
    }
    let median_ms = crate::stats::median(&open_ms);
    report.add(
        Row::new(WORKLOAD, "reopen", "weft dir")
            .value(open_ms, "ms")
            .target("< 1000 ms", median_ms < 1000.0)
            .note(format!(
                "first reads by tag and version {:.1} ms",
                reopened.first_reads_ms
            )),
    );
    report.add(
        Row::new(WORKLOAD, "RSS of the reopened log", "weft dir")
            .value(vec![reopened.rss_mib], "MiB")
            .target(
                format!("<= budget {budget:.0} MiB + 100"),
                reopened.rss_mib <= budget + 100.0,
            ),
    );
    Ok(())
}
