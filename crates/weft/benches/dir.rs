//! Benchmarks of the `dir` backend against the raw disk, in the same run.
//!
//! `cargo bench -p weft --bench dir` prints, each as the median of several
//! runs:
//!
//! 1. durable 100-byte appends/s at 1, 8, 64 and 1024 concurrent appenders
//!    (each awaiting its own append), against a loop that writes 100 bytes
//!    and `fdatasync`s each write; efficiency = measured / (N × baseline),
//!    capped at 100 %, per back-to-back pair of runs; and against the
//!    smallest group commit there is (the same appender tasks handing
//!    100-byte records to one thread that writes what queued, `fdatasync`s
//!    and answers them): what a closed loop of N appenders can reach on
//!    this machine at all, since every sync waits for the answered
//!    appenders to come back;
//! 2. 1 MiB records, MB/s, against `dd if=/dev/zero of=FILE bs=1M count=N
//!    conv=fdatasync` (one sync for everything) and against the smallest
//!    group commit with the log's group limit (one sync per group, as an
//!    acknowledged append needs);
//! 3. single-appender commit latency p50/p99 against a bare
//!    write + `fdatasync` loop;
//! 4. the time to reopen a 1 GiB log (page cache warm);
//! 5. a fixed amount of work (`WEFT_BENCH_WORK` appends of 100 bytes,
//!    default 200,000, spread over the largest of `WEFT_BENCH_APPENDERS`,
//!    default 1024)
//!    with the writer's spin turned off, for counting instructions per
//!    append under `perf stat -e instructions:u` or
//!    `valgrind --tool=callgrind`: a figure the noise of a shared machine
//!    does not move, where the other sections' rates do;
//! 6. peers in the same run (`benches/dir/peers.rs`): okaywal and fjall
//!    used as a log, 100-byte appends each durable before it is
//!    acknowledged, at the same appender counts as section 1, against the
//!    log and the smallest group commit; weft ÷ the better peer and
//!    weft ÷ bare group commit as medians of back-to-back runs;
//!    `WEFT_BENCH_SYSTEMS=weft,group,okaywal,fjall` runs only those named
//!    (to count one system's system calls with `strace -f -c`);
//! 7. the hard delete (`benches/dir/erase.rs`): erasing one user's stream
//!    of 32 entries, spread over a log of 50,000 or 500,000 entries or in
//!    its newest 2 %, against a bare rewrite (read, write beside,
//!    `fdatasync`, rename) of the same segment files in the same run.
//!
//! The data lives under the workspace's `target/` (the repo's filesystem).
//! `WEFT_BENCH_QUICK=1` shrinks everything to a smoke run of a few seconds.
//! `WEFT_BENCH_ONLY=appends,bandwidth,latency,reopen,peers,work,erase` picks
//! sections;
//! `WEFT_BENCH_RUNS=n` overrides the number of runs;
//! `WEFT_BENCH_REOPEN_ENTRY=1024,100` sets the reopen section's entry sizes,
//! `WEFT_BENCH_APPENDERS=1,8,64,1024` the appender counts;
//! `WEFT_BENCH_PREALLOCATE=BYTES` the log's `preallocate_bytes` (default
//! its default), to compare with it off (0) in one build;
//! `WEFT_BENCH_SPIN_MICROS` the log's `spin_micros` (default its default,
//! in section 5 0); `WEFT_BENCH_LINGER_MICROS` its `linger_micros`;
//! `WEFT_BENCH_WORKERS` the tokio runtime's worker
//! threads (default 2); the bare loops extend their files ahead as the log
//! does (zeros ahead of small writes, a hole ahead of large ones), or
//! always with zeros (`WEFT_BENCH_ZERO_AHEAD=1`) or always with a hole
//! (`WEFT_BENCH_HOLE_AHEAD=1`, the log's way before issue 30).
//!
//! The bare loops' files, like the log's active segment, are extended as
//! far ahead of their data as the log's default `preallocate_bytes`,
//! except the bare write + `fdatasync` loops of sections 1 and 3, whose
//! files grow with every write (so that each sync also commits a new
//! size); section 1's "ahead" columns are the same loop with its file
//! extended ahead.

// Benchmarks measure real time: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

#[path = "dir/erase.rs"]
mod erase;
#[path = "dir/peers.rs"]
mod peers;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft::storage::Storage;
use weft::storage::dir::{DirOptions, DirStorage};
use weft::{AppendRequest, Log, LogTag};

struct Config {
    runs: usize,
    window: Duration,
    warmup: Duration,
    bandwidth_mib: u64,
    latency_samples: usize,
    reopen_bytes: u64,
    work_appends: u64,
}

fn config() -> Config {
    let mut cfg = base_config();
    if let Some(runs) = std::env::var("WEFT_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
    {
        cfg.runs = runs;
    }
    cfg
}

fn base_config() -> Config {
    if std::env::var_os("WEFT_BENCH_QUICK").is_some() {
        Config {
            runs: 1,
            window: Duration::from_millis(150),
            warmup: Duration::from_millis(30),
            bandwidth_mib: 16,
            latency_samples: 200,
            reopen_bytes: 16 << 20,
            work_appends: 2_000,
        }
    } else {
        Config {
            runs: 5,
            window: Duration::from_secs(2),
            warmup: Duration::from_millis(300),
            bandwidth_mib: 512,
            latency_samples: 5000,
            reopen_bytes: 1 << 30,
            work_appends: 200_000,
        }
    }
}

fn wanted(section: &str) -> bool {
    match std::env::var("WEFT_BENCH_ONLY") {
        Ok(only) => only.split(',').any(|s| s.trim() == section),
        Err(_) => true,
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// A number from the environment variable `name`, if set.
fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// `WEFT_BENCH_APPENDERS` (comma-separated counts), else 1, 8, 64, 1024.
fn appender_counts() -> Vec<usize> {
    std::env::var("WEFT_BENCH_APPENDERS")
        .ok()
        .and_then(|v| v.split(',').map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 8, 64, 1024])
}

/// The log's settings for the runs: its defaults, with
/// `WEFT_BENCH_PREALLOCATE` and `WEFT_BENCH_SPIN_MICROS` if set.
fn log_options() -> DirOptions {
    let mut options = DirOptions::default();
    if let Some(bytes) = env_number("WEFT_BENCH_PREALLOCATE") {
        options.preallocate_bytes = bytes;
    }
    if let Some(micros) = env_number("WEFT_BENCH_SPIN_MICROS") {
        options.spin_micros = micros;
    }
    if let Some(micros) = env_number("WEFT_BENCH_LINGER_MICROS") {
        options.linger_micros = micros;
    }
    options
}

fn bench_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/weft-bench");
    std::fs::create_dir_all(&root).expect("create bench root");
    root
}

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("dir-")
        .tempdir_in(bench_root())
        .expect("bench tempdir")
}

/// How far ahead of its data a bare loop below extends its file when it
/// does: the log's default `preallocate_bytes`.
fn ahead_bytes() -> u64 {
    DirOptions::default().preallocate_bytes
}

/// How the bare loops below extend their files ahead: as the log extends
/// its active segment (written zeros ahead of a write smaller than
/// [`ZERO_FILL_BELOW`], a hole ahead of a larger one), unless
/// `WEFT_BENCH_HOLE_AHEAD=1` (always a hole, what the log did before
/// issue 30) or `WEFT_BENCH_ZERO_AHEAD=1` (always zeros).
fn zero_ahead(write_len: usize) -> bool {
    if std::env::var_os("WEFT_BENCH_ZERO_AHEAD").is_some() {
        return true;
    }
    if std::env::var_os("WEFT_BENCH_HOLE_AHEAD").is_some() {
        return false;
    }
    (write_len as u64) < ZERO_FILL_BELOW
}

/// The log writer's limit below which a group extends the segment with
/// zeros (`ZERO_FILL_BELOW` in `storage/dir/writer.rs`).
const ZERO_FILL_BELOW: u64 = 256 << 10;

/// A file written at its end, extended [`ahead_bytes`] at a time beforehand
/// when `ahead` (so most syncs leave its size alone, as the log's active
/// segment does), else grown by every write.
struct Sink {
    file: File,
    end: u64,
    allocated: u64,
    ahead: bool,
}

impl Sink {
    fn create(path: &Path, ahead: bool) -> Sink {
        Sink {
            file: File::create(path).expect("create"),
            end: 0,
            allocated: 0,
            ahead,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        use std::os::unix::fs::FileExt;
        let to = self.end + bytes.len() as u64;
        if self.ahead && to > self.allocated {
            let from = self.allocated.max(self.end);
            self.allocated = to + ahead_bytes();
            if zero_ahead(bytes.len()) {
                // Written zeros: later syncs overwrite allocated blocks.
                let zeros = vec![0u8; (self.allocated - from) as usize];
                self.file.write_all_at(&zeros, from).expect("zero ahead");
            } else {
                self.file.set_len(self.allocated).expect("extend");
            }
        }
        self.file.write_all_at(bytes, self.end).expect("write");
        self.end = to;
    }
}

/// Appends of `size` bytes, each followed by `fdatasync`, for `window`
/// (the file extended ahead of the data when `ahead`).
fn baseline_rate(size: usize, window: Duration, ahead: bool) -> f64 {
    let dir = scratch();
    let mut sink = Sink::create(&dir.path().join("baseline"), ahead);
    let buf = vec![0x5au8; size];
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < window {
        sink.write(&buf);
        sink.file.sync_data().expect("fdatasync");
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// A record and the appender waiting for it to be durable.
type Handed = (Bytes, tokio::sync::oneshot::Sender<()>);

/// The smallest group commit: one OS thread takes what queued (up to
/// `max_group` bytes), writes it (small records gathered into one `write`,
/// large ones written from their own buffers), `fdatasync`s, and answers.
/// It stops when every sender is gone.
fn spawn_group_syncer(
    path: &Path,
    max_group: usize,
) -> (std::sync::mpsc::Sender<Handed>, std::thread::JoinHandle<()>) {
    // Its file is extended ahead of the data, as the log's segment is.
    let mut sink = Sink::create(path, true);
    let (tx, rx) = std::sync::mpsc::channel::<Handed>();
    let syncer = std::thread::spawn(move || {
        let mut small = Vec::new();
        let mut waiters = Vec::new();
        while let Ok(first) = rx.recv() {
            let mut bytes = 0;
            let mut next = Some(first);
            while let Some((record, waiter)) = next {
                bytes += record.len();
                if record.len() >= 64 << 10 {
                    sink.write(&small);
                    small.clear();
                    sink.write(&record);
                } else {
                    small.extend_from_slice(&record);
                }
                waiters.push(waiter);
                next = if bytes < max_group {
                    rx.try_recv().ok()
                } else {
                    None
                };
            }
            sink.write(&small);
            small.clear();
            sink.file.sync_data().expect("fdatasync");
            for w in waiters.drain(..) {
                let _ = w.send(());
            }
        }
    });
    (tx, syncer)
}

/// Hands `record` to the syncer and waits until it is durable.
async fn hand(tx: &std::sync::mpsc::Sender<Handed>, record: &Bytes) {
    let (done, wait) = tokio::sync::oneshot::channel();
    tx.send((record.clone(), done)).expect("syncer");
    wait.await.expect("synced");
}

/// Durable appends/s of the smallest group commit with `writers`
/// closed-loop appenders of 100-byte records.
async fn bare_group_rate(writers: usize, cfg: &Config) -> f64 {
    let dir = scratch();
    let (tx, syncer) = spawn_group_syncer(&dir.path().join("group"), usize::MAX);
    let count = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let payload = Bytes::from(vec![0x42u8; 100]);
    let mut tasks = Vec::with_capacity(writers);
    for _ in 0..writers {
        let (tx, count, stop, payload) = (tx.clone(), count.clone(), stop.clone(), payload.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                hand(&tx, &payload).await;
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    drop(tx);
    tokio::time::sleep(cfg.warmup).await;
    let (c0, t0) = (count.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(cfg.window).await;
    let (c1, t1) = (count.load(Ordering::Relaxed), Instant::now());
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("appender");
    }
    syncer.join().expect("syncer thread");
    (c1 - c0) as f64 / (t1 - t0).as_secs_f64()
}

/// MB/s of the smallest group commit with `writers` appenders of 1 MiB
/// records, groups of at most `batch_mib` MiB (the log's setting).
async fn bare_group_bandwidth(total_mib: u64, writers: u64, batch_mib: usize) -> f64 {
    let dir = scratch();
    let (tx, syncer) = spawn_group_syncer(&dir.path().join("group"), batch_mib << 20);
    let record = big_record();
    let each = (total_mib / writers).max(1);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..writers {
        let (tx, record) = (tx.clone(), record.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..each {
                hand(&tx, &record).await;
            }
        }));
    }
    drop(tx);
    for t in tasks {
        t.await.expect("appender");
    }
    let secs = start.elapsed().as_secs_f64();
    syncer.join().expect("syncer thread");
    (each * writers) as f64 * 1.048_576 / secs
}

/// A 1 MiB record that does not compress to nothing.
fn big_record() -> Bytes {
    (0..1usize << 20)
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// One measured window of concurrent appends.
struct AppendRun {
    rate: f64,
    per_sync: f64,
    cpu_us: f64,
}

/// Durable appends/s with `writers` concurrent appenders, the appends each
/// sync carried, and the process CPU time per append.
async fn append_rate(writers: usize, cfg: &Config) -> AppendRun {
    let dir = scratch();
    let storage = Arc::new(
        DirStorage::open_with(dir.path(), log_options())
            .await
            .expect("open"),
    );
    let log = Log::from_arc(storage.clone());
    let count = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let payload = Bytes::from(vec![0x42u8; 100]);
    let mut tasks = Vec::with_capacity(writers);
    for w in 0..writers {
        let (log, count, stop, payload) =
            (log.clone(), count.clone(), stop.clone(), payload.clone());
        let tag = LogTag::with_key("bench", format!("w{}", w % 64)).expect("tag");
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                log.append(AppendRequest::new(tag.clone(), payload.clone()))
                    .await
                    .expect("append");
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(cfg.warmup).await;
    let (c0, t0, cpu0, s0) = (
        count.load(Ordering::Relaxed),
        Instant::now(),
        cpu_time(),
        storage.stats(),
    );
    tokio::time::sleep(cfg.window).await;
    let (c1, t1, cpu1, s1) = (
        count.load(Ordering::Relaxed),
        Instant::now(),
        cpu_time(),
        storage.stats(),
    );
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("appender");
    }
    log.storage().close().await.expect("close");
    let n = (c1 - c0) as f64;
    AppendRun {
        rate: n / (t1 - t0).as_secs_f64(),
        per_sync: (s1.entries - s0.entries) as f64 / (s1.syncs - s0.syncs).max(1) as f64,
        cpu_us: (cpu1 - cpu0).as_secs_f64() * 1e6 / n.max(1.0),
    }
}

/// The median over back-to-back pairs of `rate / (writers × base)`,
/// capped at 1: how much of `writers` independent loops' syncs one
/// committer reached.
fn efficiency(rates: &[f64], bases: &[f64], writers: usize) -> f64 {
    median(
        rates
            .iter()
            .zip(bases)
            .map(|(r, b)| (r / (writers as f64 * b)).min(1.0))
            .collect(),
    )
}

fn section_appends(rt: &tokio::runtime::Runtime, cfg: &Config) {
    println!(
        "\n## durable 100-byte appends/s (median of {} runs, {:?} windows)",
        cfg.runs, cfg.window
    );
    println!(
        "{:>9} {:>12} {:>16} {:>11} {:>10} {:>14} {:>13} {:>11} {:>10} {:>13} {:>13}",
        "appenders",
        "appends/s",
        "baseline fsync/s",
        "efficiency",
        "per sync",
        "CPU µs/append",
        "bare group/s",
        "its effic.",
        "log÷bare",
        "ahead fsync/s",
        "effic.(ahead)"
    );
    for writers in appender_counts() {
        let mut runs = Vec::new();
        let mut bases = Vec::new();
        let mut groups = Vec::new();
        let mut aheads = Vec::new();
        for _ in 0..cfg.runs {
            bases.push(baseline_rate(100, cfg.window, false));
            aheads.push(baseline_rate(100, cfg.window, true));
            groups.push(rt.block_on(bare_group_rate(writers, cfg)));
            runs.push(rt.block_on(append_rate(writers, cfg)));
        }
        let rates: Vec<f64> = runs.iter().map(|r| r.rate).collect();
        let group_efficiency = efficiency(&groups, &bases, writers);
        let of_group = median(runs.iter().zip(&groups).map(|(r, g)| r.rate / g).collect());
        let group = median(groups);
        // Efficiency per back-to-back pair (the disk's fsync rate drifts on
        // a shared machine), then the median of the pairs.
        let log_efficiency = efficiency(&rates, &bases, writers);
        // The same against a loop whose file is extended ahead, as the
        // log's is: what is left when the sizes' journal commits are gone.
        let ahead_efficiency = efficiency(&rates, &aheads, writers);
        let ahead = median(aheads);
        let base = median(bases);
        let rate = median(rates);
        let per_sync = median(runs.iter().map(|r| r.per_sync).collect());
        let cpu = median(runs.iter().map(|r| r.cpu_us).collect());
        println!(
            "{writers:>9} {rate:>12.0} {base:>16.0} {:>10.1}% {per_sync:>10.1} {cpu:>14.2} {group:>13.0} {:>10.1}% {of_group:>9.2}x {ahead:>13.0} {:>12.1}%",
            log_efficiency * 100.0,
            group_efficiency * 100.0,
            ahead_efficiency * 100.0
        );
    }
}

/// MB/s of `total_mib` 1 MiB records with `writers` concurrent appenders.
async fn record_bandwidth(total_mib: u64, writers: u64, batch_mib: usize) -> f64 {
    let dir = scratch();
    let options = log_options().with_max_batch_bytes(batch_mib << 20);
    let log = Log::new(
        DirStorage::open_with(dir.path(), options)
            .await
            .expect("open"),
    );
    let record = big_record();
    let each = (total_mib / writers).max(1);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (log, record) = (log.clone(), record.clone());
        let tag = LogTag::with_key("big", format!("w{w}")).expect("tag");
        tasks.push(tokio::spawn(async move {
            for _ in 0..each {
                log.append(AppendRequest::new(tag.clone(), record.clone()))
                    .await
                    .expect("append");
            }
        }));
    }
    for t in tasks {
        t.await.expect("appender");
    }
    let secs = start.elapsed().as_secs_f64();
    log.storage().close().await.expect("close");
    (each * writers) as f64 * 1.048_576 / secs
}

fn dd_bandwidth(total_mib: u64) -> f64 {
    let dir = scratch();
    let file = dir.path().join("dd.out");
    let start = Instant::now();
    let out = std::process::Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", file.display()))
        .arg("bs=1M")
        .arg(format!("count={total_mib}"))
        .arg("conv=fdatasync")
        .output()
        .expect("run dd");
    assert!(
        out.status.success(),
        "dd failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    total_mib as f64 * 1.048_576 / start.elapsed().as_secs_f64()
}

fn section_bandwidth(rt: &tokio::runtime::Runtime, cfg: &Config) {
    let mib = cfg.bandwidth_mib;
    println!(
        "\n## 1 MiB records, {mib} MiB per run (median of {} runs)",
        cfg.runs
    );
    println!(
        "{:>33} {:>10} {:>10} {:>16} {:>10}",
        "", "MB/s", "of dd", "bare group MB/s", "log÷bare"
    );
    let mut dds = Vec::new();
    let mut rows = Vec::new();
    // (appenders, max_batch_bytes in MiB): the default group limit, then
    // one sized for bulk loads. Each log run follows its own dd run.
    for (writers, batch_mib) in [(1u64, 8usize), (16, 8), (64, 8), (64, 64)] {
        let mut rates = Vec::new();
        let mut shares = Vec::new();
        let mut bares = Vec::new();
        let mut of_bare = Vec::new();
        for _ in 0..cfg.runs {
            let dd = dd_bandwidth(mib);
            let bare = rt.block_on(bare_group_bandwidth(mib, writers, batch_mib));
            let rate = rt.block_on(record_bandwidth(mib, writers, batch_mib));
            dds.push(dd);
            rates.push(rate);
            shares.push(rate / dd);
            bares.push(bare);
            of_bare.push(rate / bare);
        }
        rows.push((
            writers,
            batch_mib,
            median(rates),
            median(shares),
            median(bares),
            median(of_bare),
        ));
    }
    println!(
        "{:>33} {:>10.0} {:>9.0}%",
        "dd bs=1M conv=fdatasync",
        median(dds),
        100.0
    );
    for (writers, batch_mib, rate, share, bare, of_bare) in rows {
        println!(
            "{:>33} {rate:>10.0} {:>9.0}% {bare:>16.0} {of_bare:>9.2}x",
            format!("log, {writers} appenders, {batch_mib} MiB groups"),
            100.0 * share
        );
    }
}

fn bare_latencies(samples: usize) -> Vec<Duration> {
    let dir = scratch();
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("bare"))
        .expect("create");
    let buf = vec![0x11u8; 100];
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        file.write_all(&buf).expect("write");
        file.sync_data().expect("fdatasync");
        out.push(t.elapsed());
    }
    out
}

async fn log_latencies(samples: usize) -> Vec<Duration> {
    let dir = scratch();
    let log = Log::new(
        DirStorage::open_with(dir.path(), log_options())
            .await
            .expect("open"),
    );
    let tag = LogTag::new("latency").expect("tag");
    let payload = Bytes::from(vec![0x11u8; 100]);
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        log.append(AppendRequest::new(tag.clone(), payload.clone()))
            .await
            .expect("append");
        out.push(t.elapsed());
    }
    log.storage().close().await.expect("close");
    out
}

fn section_latency(rt: &tokio::runtime::Runtime, cfg: &Config) {
    println!(
        "\n## single-appender commit latency, 100-byte entries, {} samples per run (median of {} runs)",
        cfg.latency_samples, cfg.runs
    );
    let mut stats = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let mut ratios = (Vec::new(), Vec::new());
    for _ in 0..cfg.runs {
        let mut bare = bare_latencies(cfg.latency_samples);
        let mut log = rt.block_on(log_latencies(cfg.latency_samples));
        bare.sort();
        log.sort();
        stats[0].push(percentile(&bare, 0.5).as_secs_f64() * 1e6);
        stats[1].push(percentile(&bare, 0.99).as_secs_f64() * 1e6);
        stats[2].push(percentile(&log, 0.5).as_secs_f64() * 1e6);
        stats[3].push(percentile(&log, 0.99).as_secs_f64() * 1e6);
        ratios
            .0
            .push(percentile(&log, 0.5).as_secs_f64() / percentile(&bare, 0.5).as_secs_f64());
        ratios
            .1
            .push(percentile(&log, 0.99).as_secs_f64() / percentile(&bare, 0.99).as_secs_f64());
    }
    let [bp50, bp99, lp50, lp99] = stats.map(median);
    println!("{:>26} {:>10} {:>10}", "", "p50 µs", "p99 µs");
    println!("{:>26} {bp50:>10.1} {bp99:>10.1}", "write + fdatasync");
    println!("{:>26} {lp50:>10.1} {lp99:>10.1}", "log append");
    println!(
        "{:>26} {:>9.2}x {:>9.2}x",
        "ratio (median of pairs)",
        median(ratios.0),
        median(ratios.1)
    );
}

/// Builds a log of about `bytes` bytes of `entry`-byte payloads, quickly
/// (large batches), and closes it.
async fn build_log(dir: &Path, bytes: u64, entry: usize) -> u64 {
    let log = Log::new(DirStorage::open(dir).await.expect("open"));
    let payload = Bytes::from(vec![0x33u8; entry]);
    let tags: Vec<LogTag> = (0..64)
        .map(|i| LogTag::with_key("stream", format!("s{i}")).expect("tag"))
        .collect();
    let frame = weft::format::frame::encoded_len(
        &[tags[0].clone(), LogTag::new("all").expect("tag")],
        entry,
    );
    let per_batch = ((4 << 20) / frame).max(1);
    // Size the log by its bytes on disk, frames included.
    let total = bytes / frame as u64;
    let mut written = 0u64;
    while written < total {
        let n = per_batch.min((total - written) as usize);
        let reqs = (0..n)
            .map(|i| {
                let t = &tags[(written as usize + i) % tags.len()];
                AppendRequest::new(t.clone(), payload.clone())
                    .with_tag(LogTag::new("all").expect("tag"))
            })
            .collect();
        log.append_batch(reqs).await.expect("append batch");
        written += n as u64;
    }
    log.storage().close().await.expect("close");
    written
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").metadata().expect("stat"))
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// CPU time (user + system) of this process so far, from /proc; the wall
/// clock of a shared two-core machine is noisy, CPU time much less so.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which sits in parentheses).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line (11 and 12 here);
    // the kernel reports them in USER_HZ = 100 ticks per second.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

fn section_reopen(rt: &tokio::runtime::Runtime, cfg: &Config) {
    println!(
        "\n## reopen (page cache warm; median of {} opens)",
        cfg.runs
    );
    println!(
        "{:>14} {:>12} {:>10} {:>12} {:>12}",
        "entry bytes", "entries", "MiB", "open ms", "open CPU ms"
    );
    let sizes: Vec<usize> = std::env::var("WEFT_BENCH_REOPEN_ENTRY")
        .ok()
        .and_then(|v| v.split(',').map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1024, 100]);
    for entry in sizes {
        let dir = scratch();
        let entries = rt.block_on(build_log(dir.path(), cfg.reopen_bytes, entry));
        let size = dir_bytes(dir.path());
        let mut times = Vec::new();
        let mut cpu = Vec::new();
        for _ in 0..cfg.runs {
            let (t, c) = (Instant::now(), cpu_time());
            let storage = rt.block_on(DirStorage::open(dir.path())).expect("reopen");
            let took = t.elapsed();
            cpu.push((cpu_time() - c).as_secs_f64() * 1e3);
            assert_eq!(rt.block_on(storage.tip()).expect("tip").next, entries);
            rt.block_on(storage.close()).expect("close");
            drop(storage);
            times.push(took.as_secs_f64() * 1e3);
        }
        println!(
            "{entry:>14} {entries:>12} {:>10.0} {:>12.0} {:>12.0}",
            size as f64 / (1 << 20) as f64,
            median(times),
            median(cpu)
        );
    }
}

fn main() {
    let cfg = config();
    // Two workers, as many as the machine the figures were taken on has
    // cores; `WEFT_BENCH_WORKERS` sets more, to see how much of a run is
    // the share of a busy machine's CPU that the process's threads get.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(env_number("WEFT_BENCH_WORKERS").unwrap_or(2).max(1))
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "dir backend benchmarks; data under {}",
        bench_root()
            .canonicalize()
            .unwrap_or_else(|_| bench_root())
            .display()
    );
    if wanted("appends") {
        section_appends(&rt, &cfg);
    }
    if wanted("bandwidth") {
        section_bandwidth(&rt, &cfg);
    }
    if wanted("latency") {
        section_latency(&rt, &cfg);
    }
    if wanted("reopen") {
        section_reopen(&rt, &cfg);
    }
    if wanted("work") {
        section_work(&rt, &cfg);
    }
    if wanted("peers") {
        section_peers(&rt, &cfg);
    }
    if wanted("erase") {
        erase::section_erase(&rt, &cfg);
    }
}

/// Section 6: the log against okaywal and fjall used as a log, and against
/// the smallest group commit, at each appender count. Each run measures the
/// four back to back, so a slow phase of the shared disk hits all alike;
/// the ratios are medians of the runs' own ratios.
fn section_peers(rt: &tokio::runtime::Runtime, cfg: &Config) {
    println!(
        "\n## peers: durable 100-byte appends/s (median of {} runs, {:?} windows)",
        cfg.runs, cfg.window
    );
    let names: Vec<&str> = peers::Peer::ALL.iter().map(|p| p.name()).collect();
    println!(
        "{:>9} {:>12} {:>16} {:>16} {:>13} {:>12} {:>11} {:>14}",
        "appenders",
        "weft/s",
        names[0],
        names[1],
        "bare group/s",
        "weft÷peer",
        "weft÷bare",
        "weft per sync"
    );
    let record = [0x42u8; 100];
    for writers in appender_counts() {
        let mut wefts = Vec::new();
        let mut per_sync = Vec::new();
        let mut peer_rates = vec![Vec::new(); peers::Peer::ALL.len()];
        let mut groups = Vec::new();
        let mut of_peer = Vec::new();
        let mut of_group = Vec::new();
        for _ in 0..cfg.runs {
            // A system left out by `WEFT_BENCH_SYSTEMS` counts as 0/s (its
            // ratios then say nothing), so one system can run alone under
            // `strace` or `perf`.
            let group = if system_wanted("group") {
                rt.block_on(bare_group_rate(writers, cfg))
            } else {
                0.0
            };
            let weft = if system_wanted("weft") {
                let run = rt.block_on(append_rate(writers, cfg));
                per_sync.push(run.per_sync);
                run.rate
            } else {
                per_sync.push(0.0);
                0.0
            };
            let mut best = 0f64;
            for (k, peer) in peers::Peer::ALL.into_iter().enumerate() {
                if !system_wanted(peer.key()) {
                    peer_rates[k].push(0.0);
                    continue;
                }
                let dir = scratch();
                let run =
                    peers::closed_loop(peer, dir.path(), writers, &record, cfg.warmup, cfg.window)
                        .expect("peer run");
                peer_rates[k].push(run.rate());
                best = best.max(run.rate());
            }
            of_peer.push(weft / best);
            of_group.push(weft / group);
            wefts.push(weft);
            groups.push(group);
        }
        let [okaywal, fjall] = [&peer_rates[0], &peer_rates[1]].map(|r| median(r.clone()));
        println!(
            "{writers:>9} {:>12.0} {okaywal:>16.0} {fjall:>16.0} {:>13.0} {:>11.2}x {:>10.2}x {:>14.1}",
            median(wefts),
            median(groups),
            median(of_peer),
            median(of_group),
            median(per_sync)
        );
    }
}

/// Whether section 6 runs `system` (`weft`, `group`, `okaywal`, `fjall`):
/// all of them unless `WEFT_BENCH_SYSTEMS` names some.
fn system_wanted(system: &str) -> bool {
    match std::env::var("WEFT_BENCH_SYSTEMS") {
        Ok(only) => only.split(',').any(|s| s.trim() == system),
        Err(_) => true,
    }
}

/// Section 5: a fixed number of appends, for instruction counts.
fn section_work(rt: &tokio::runtime::Runtime, cfg: &Config) {
    let total: u64 = env_number("WEFT_BENCH_WORK").unwrap_or(cfg.work_appends);
    // The largest of the appender counts (at least one appender).
    let writers = appender_counts().into_iter().max().unwrap_or(1).max(1) as u64;
    // Spinning executes instructions for as long as it waits: off, unless
    // asked for.
    let spin_micros = env_number("WEFT_BENCH_SPIN_MICROS").unwrap_or(0);
    println!(
        "\n## fixed work: {total} appends of 100 B by {writers} appenders (spin {spin_micros} µs)"
    );
    let (secs, cpu) = rt.block_on(fixed_work(total, writers, spin_micros));
    println!(
        "{:>10} {:>12} {:>14}",
        "appends", "appends/s", "CPU µs/append"
    );
    println!(
        "{:>10} {:>12.0} {:>14.2}",
        total,
        total as f64 / secs,
        cpu * 1e6 / total as f64
    );
}

/// Appends `total` entries from `writers` tasks; the wall and CPU seconds.
async fn fixed_work(total: u64, writers: u64, spin_micros: u64) -> (f64, f64) {
    let dir = scratch();
    let options = log_options().with_spin_micros(spin_micros);
    let log = Log::new(
        DirStorage::open_with(dir.path(), options)
            .await
            .expect("open"),
    );
    let payload = Bytes::from(vec![0x42u8; 100]);
    let (t0, cpu0) = (Instant::now(), cpu_time());
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (log, payload) = (log.clone(), payload.clone());
            let tag = LogTag::with_key("bench", format!("w{}", w % 64)).expect("tag");
            // The first `total % writers` tasks take one more.
            let mine = total / writers + u64::from(w < total % writers);
            tokio::spawn(async move {
                for _ in 0..mine {
                    log.append(AppendRequest::new(tag.clone(), payload.clone()))
                        .await
                        .expect("append");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("appender");
    }
    let (secs, cpu) = (
        t0.elapsed().as_secs_f64(),
        (cpu_time() - cpu0).as_secs_f64(),
    );
    log.storage().close().await.expect("close");
    (secs, cpu)
}
