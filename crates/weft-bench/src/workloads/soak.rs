//! Soak: a bucket log that grows for a while at a fixed load, and what its
//! age costs.
//!
//! A `Log` over `BucketStorage` (default options) takes batches of 20
//! entries of 1 KiB on 10 000 streams from 8 appenders, paced to a fixed
//! rate, for 10 minutes (30 s in `--quick`; `--soak-secs` overrides). Per
//! window (a minute; 10 s in quick mode) it reports commit latency p50/p99
//! (append call to acknowledgement), appends/s, the manifest object's size
//! and the process's RSS (the writer is the only thing it holds).
//!
//! Then, each in a fresh process of this binary (`--probe`, so its RSS is
//! its own): a fresh follower with an empty cache directory, the same
//! follower restarted on that directory, the writer reopened on its own
//! cache directory, and a writer on a host with no local state. Each
//! reports its open time, its first read (the newest entry), its first
//! append (writers) and its RSS. A fresh follower's catch-up is compared
//! with a raw parallel GET of every segment.
//!
//! Targets: RSS within the budget + 100 MB, commit p50 in the last window
//! at most 1.2x the first, the manifest within its bound, every open below
//! a second.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use serde::{Deserialize, Serialize};
use weft::storage::bucket::{BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage};
use weft::{AppendRequest, Log, LogTag};

use super::Ctx;
use crate::plot::Plot;
use crate::report::{Report, Row};
use crate::stats::{MIB, Samples};

const W: &str = "soak";
const ENTRY: usize = 1024;
const BATCH: usize = 20;
const APPENDERS: usize = 8;
const STREAMS: u64 = 10_000;
/// The log's prefix under the workload's store.
const PREFIX: &str = "log";
/// The memory budget the targets are checked against (the backends'
/// default), and the slack the target allows on top.
const BUDGET_MB: f64 = 256.0;
const SLACK_MB: f64 = 100.0;
/// The manifest's bound: the checkpoint policy keeps it far below this.
const MANIFEST_BOUND: u64 = 256 << 10;

/// Settings of a soak run (from the command line).
#[derive(Clone, Copy, Debug)]
pub struct SoakSettings {
    /// How long the load runs; `None`: 600 s, or 30 s in quick mode.
    pub secs: Option<u64>,
    /// Entries per second the appenders are paced to.
    pub rate: u64,
}

impl Default for SoakSettings {
    fn default() -> Self {
        SoakSettings {
            secs: None,
            rate: 3_000,
        }
    }
}

/// The resident set of this process now and at its peak, in MB.
pub fn rss_mb() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// One window of the load.
#[derive(Clone, Debug, Serialize)]
struct Window {
    end_s: f64,
    entries_per_s: f64,
    commit_p50_ms: f64,
    commit_p99_ms: f64,
    manifest_bytes: u64,
    rss_mb: f64,
    /// The store's own latency at the time: a 60 KiB PUT then a 40 KiB
    /// conditional PUT (what one commit asks of it), p50 of a few.
    raw_commit_p50_ms: f64,
}

/// What a probe process measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProbeResult {
    pub open_ms: f64,
    pub first_read_ms: f64,
    pub first_append_ms: Option<f64>,
    /// A fresh follower: time until its local state covered the whole log.
    pub caught_up_ms: Option<f64>,
    pub rss_mb: f64,
    pub peak_rss_mb: f64,
    pub entries: u64,
}

/// What a probe opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProbeKind {
    /// A follower (with `--probe-cache`: on that cache directory).
    Follower,
    /// A writer (with `--probe-cache`: on that cache directory).
    Writer,
}

/// Runs one probe in this process: opens what `kind` says on the log at
/// `prefix`, reads its newest entry (and appends one, for a writer), and
/// returns the timings and this process's RSS.
pub async fn probe(
    store: Arc<dyn ObjectStore>,
    kind: ProbeKind,
    cache: Option<&Path>,
    catch_up: bool,
) -> Result<ProbeResult> {
    let cache_dir = cache.map(Path::to_path_buf);
    let started = Instant::now();
    let mut follower = None;
    let (log, writer) = match kind {
        ProbeKind::Follower => {
            let options = BucketFollowerOptions::default().with_cache_dir(cache_dir);
            let f = Arc::new(BucketFollower::open(store, PREFIX, options).await?);
            follower = Some(f.clone());
            (Log::from_arc(f), false)
        }
        ProbeKind::Writer => {
            let options = BucketOptions::default().with_cache_dir(cache_dir);
            (
                Log::new(BucketStorage::open(store, PREFIX, options).await?),
                true,
            )
        }
    };
    let open_ms = started.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let newest = log
        .latest_seqnum()
        .await?
        .context("the soaked log has no entries")?;
    let got = log.storage().read(None, newest, 1).await?;
    if got.len() != 1 {
        bail!("reading entry {newest} returned {} entries", got.len());
    }
    let first_read_ms = t.elapsed().as_secs_f64() * 1e3;
    let first_append_ms = if writer {
        let t = Instant::now();
        log.append(AppendRequest::new(
            LogTag::new("probe")?,
            Bytes::from_static(b"probe"),
        ))
        .await?;
        Some(t.elapsed().as_secs_f64() * 1e3)
    } else {
        None
    };
    let caught_up_ms = match (&follower, catch_up) {
        (Some(f), true) => {
            // Caught up: every entry from before the open is indexed.
            f.filled_in().await?;
            Some(started.elapsed().as_secs_f64() * 1e3)
        }
        _ => None,
    };
    let (rss, peak) = rss_mb();
    log.close().await?;
    Ok(ProbeResult {
        open_ms,
        first_read_ms,
        first_append_ms,
        caught_up_ms,
        rss_mb: rss,
        peak_rss_mb: peak,
        entries: newest + 1,
    })
}

/// Runs a probe in a child process of this binary.
async fn probe_process(
    ctx: &Ctx,
    prefix: &str,
    kind: ProbeKind,
    cache: Option<&Path>,
    catch_up: bool,
) -> Result<ProbeResult> {
    let exe = std::env::current_exe()?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("--probe")
        .arg(match kind {
            ProbeKind::Follower => "follower",
            ProbeKind::Writer => "writer",
        })
        .arg("--probe-prefix")
        .arg(prefix);
    if let Some(c) = cache {
        cmd.arg("--probe-cache").arg(c);
    }
    if catch_up {
        cmd.arg("--probe-catch-up");
    }
    if let Some(env) = &ctx.s3_env_file {
        cmd.arg("--s3-env").arg(env);
    }
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .await?;
    if !out.status.success() {
        bail!("probe {kind:?} failed: {}", out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("the probe printed no result")?;
    Ok(serde_json::from_str(line)?)
}

/// GETs every segment of the log at `prefix`, `concurrency` at a time:
/// what reading the whole log costs without weft. Returns (time, bytes).
async fn raw_parallel_get(
    store: &Arc<dyn ObjectStore>,
    concurrency: usize,
) -> Result<(Duration, u64)> {
    let segments: Vec<ObjectPath> = store
        .list(Some(&ObjectPath::from(format!("{PREFIX}/segments"))))
        .map_ok(|m| m.location)
        .try_collect()
        .await?;
    let t = Instant::now();
    let bytes: Vec<u64> = futures::stream::iter(segments)
        .map(|p| {
            let store = store.clone();
            async move {
                let b = store.get(&p).await?.bytes().await?;
                anyhow::Ok(b.len() as u64)
            }
        })
        .buffer_unordered(concurrency)
        .try_collect()
        .await?;
    Ok((t.elapsed(), bytes.iter().sum()))
}

/// What one commit asks of the store, done by hand a few times: a segment
/// PUT and a manifest-sized conditional PUT. Returns the p50 in ms.
async fn raw_commit_p50(store: &Arc<dyn ObjectStore>, segment: &Bytes, manifest: &Bytes) -> f64 {
    use object_store::{PutMode, PutOptions, UpdateVersion};
    let seg = ObjectPath::from("raw/segment");
    let man = ObjectPath::from("raw/manifest");
    let mut version: Option<UpdateVersion> = None;
    let mut samples = Samples::new();
    for _ in 0..8 {
        let t = Instant::now();
        if store.put(&seg, segment.clone().into()).await.is_err() {
            continue;
        }
        let mode = match version.take() {
            Some(v) => PutMode::Update(v),
            None => PutMode::Overwrite,
        };
        match store
            .put_opts(&man, manifest.clone().into(), PutOptions::from(mode))
            .await
        {
            Ok(put) => {
                version = Some(UpdateVersion::from(put));
                samples.push(t.elapsed());
            }
            Err(_) => version = None,
        }
    }
    samples.summary().map_or(f64::NAN, |l| l.p50)
}

async fn manifest_size(store: &Arc<dyn ObjectStore>) -> u64 {
    store
        .head(&ObjectPath::from(format!("{PREFIX}/manifest")))
        .await
        .map_or(0, |m| m.size)
}

pub async fn run(ctx: &mut Ctx, report: &mut Report) -> Result<()> {
    let settings = ctx.soak;
    let secs = settings.secs.unwrap_or(if ctx.quick { 30 } else { 600 });
    let window = Duration::from_secs(if ctx.quick { 10 } else { 60 }.min(secs.max(1)));
    let duration = Duration::from_secs(secs);
    let prefix = ctx.fresh_prefix("soak");
    let store = ctx.s3()?.store(&prefix)?;
    let follower_cache = ctx.fresh_dir("soak-follower")?;
    let writer_cache = ctx.fresh_dir("soak-writer")?;
    let stateless_cache = ctx.fresh_dir("soak-stateless")?;
    // The writer keeps its numbers in its cache directory, as a service
    // would (default options otherwise).
    let options = BucketOptions::default().with_cache_dir(Some(writer_cache.clone()));
    let log = Log::new(BucketStorage::open(store.clone(), PREFIX, options).await?);

    let fill = crate::load::payload(ENTRY, 11);
    let tags: Arc<Vec<LogTag>> = Arc::new(
        (0..STREAMS)
            .map(|i| LogTag::with_key("s", format!("{i}")))
            .collect::<weft::Result<_>>()?,
    );
    let committed = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(std::sync::Mutex::new(Samples::new()));
    let start = Instant::now();
    let end = start + duration;
    // Each appender gets an equal share of the rate, one batch per tick.
    let per_appender =
        Duration::from_secs_f64((APPENDERS * BATCH) as f64 / settings.rate.max(1) as f64);
    let mut appenders = Vec::new();
    for a in 0..APPENDERS {
        let (log, fill, tags) = (log.clone(), fill.clone(), tags.clone());
        let (committed, latencies) = (committed.clone(), latencies.clone());
        appenders.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(per_appender);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut n = a as u64;
            while Instant::now() < end {
                tick.tick().await;
                // Each entry its own payload (as an application's would
                // be): a shared buffer would hide what a copy of the log
                // in memory costs.
                let batch: Vec<AppendRequest> = (0..BATCH)
                    .map(|_| {
                        n = n.wrapping_add(7919);
                        let mut data = fill.to_vec();
                        data[..8].copy_from_slice(&n.to_le_bytes());
                        AppendRequest::new(tags[(n % STREAMS) as usize].clone(), data)
                    })
                    .collect();
                let t = Instant::now();
                log.append_batch(batch).await?;
                latencies
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(t.elapsed());
                committed.fetch_add(BATCH as u64, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    let raw_segment = crate::load::payload(60 << 10, 12);
    let raw_manifest = crate::load::payload(40 << 10, 13);
    let mut windows: Vec<Window> = Vec::new();
    let mut last_count = 0;
    let mut next = start + window;
    while next <= end + Duration::from_millis(1) {
        tokio::time::sleep_until(next.into()).await;
        let count = committed.load(Ordering::Relaxed);
        let lat = std::mem::take(&mut *latencies.lock().unwrap_or_else(|p| p.into_inner()));
        let l = lat.summary();
        let w = Window {
            end_s: (next - start).as_secs_f64(),
            entries_per_s: (count - last_count) as f64 / window.as_secs_f64(),
            commit_p50_ms: l.map_or(f64::NAN, |l| l.p50),
            commit_p99_ms: l.map_or(f64::NAN, |l| l.p99),
            manifest_bytes: manifest_size(&store).await,
            rss_mb: rss_mb().0,
            raw_commit_p50_ms: raw_commit_p50(&store, &raw_segment, &raw_manifest).await,
        };
        println!(
            "   t={:>5.0}s  {:>7.0} entries/s  commit p50 {:>6.1} ms p99 {:>7.1} ms  manifest {:>7} B  RSS {:>6.1} MB  raw PUT+CAS p50 {:>6.1} ms",
            w.end_s,
            w.entries_per_s,
            w.commit_p50_ms,
            w.commit_p99_ms,
            w.manifest_bytes,
            w.rss_mb,
            w.raw_commit_p50_ms
        );
        windows.push(w);
        last_count = count;
        next += window;
    }
    for a in appenders {
        a.await??;
    }
    let total = committed.load(Ordering::Relaxed);
    let case = format!(
        "{secs} s at {} entries/s, {BATCH} x {ENTRY} B batches, {APPENDERS} appenders",
        settings.rate
    );
    let (first, last) = match (windows.first(), windows.last()) {
        (Some(f), Some(l)) => (f.clone(), l.clone()),
        _ => bail!("the soak ran no full window"),
    };
    for w in &windows {
        report.add(
            Row::new(
                W,
                format!("{case}: window ending {:.0} s", w.end_s),
                "commit p50",
            )
            .value(vec![w.commit_p50_ms], "ms")
            .note(format!(
                "p99 {:.1} ms, {:.0} entries/s, manifest {} B, RSS {:.1} MB, raw PUT+CAS p50 {:.1} ms",
                w.commit_p99_ms,
                w.entries_per_s,
                w.manifest_bytes,
                w.rss_mb,
                w.raw_commit_p50_ms
            )),
        );
    }
    let ratio = last.commit_p50_ms / first.commit_p50_ms;
    let raw_ratio = last.raw_commit_p50_ms / first.raw_commit_p50_ms;
    report.add(
        Row::new(W, &case, "commit p50, last window / first")
            .value(vec![ratio], "x")
            .target("<= 1.2", ratio <= 1.2)
            .note(format!(
                "the store's own PUT+CAS p50 moved {raw_ratio:.2}x over the same windows"
            )),
    );
    let peak_rss = windows.iter().map(|w| w.rss_mb).fold(0.0, f64::max);
    report.add(
        Row::new(W, &case, "writer RSS, largest window")
            .value(vec![peak_rss], "MB")
            .target(
                format!("<= {} MB", BUDGET_MB + SLACK_MB),
                peak_rss <= BUDGET_MB + SLACK_MB,
            )
            .note(format!("{total} entries")),
    );
    let largest_manifest = windows.iter().map(|w| w.manifest_bytes).max().unwrap_or(0);
    report.add(
        Row::new(W, &case, "manifest object, largest")
            .value(vec![largest_manifest as f64 / 1024.0], "KiB")
            .target(
                format!("<= {} KiB", MANIFEST_BOUND >> 10),
                largest_manifest <= MANIFEST_BOUND,
            ),
    );

    // Opens, each in its own process. Followers while the writer is still
    // up; then the writer steps down and is reopened.
    let mut opens = Vec::new();
    let fresh = probe_process(
        ctx,
        &prefix,
        ProbeKind::Follower,
        Some(&follower_cache),
        true,
    )
    .await?;
    opens.push(("fresh follower (empty cache dir)", fresh.clone()));
    let restarted = probe_process(
        ctx,
        &prefix,
        ProbeKind::Follower,
        Some(&follower_cache),
        false,
    )
    .await?;
    opens.push(("restarted follower (its cache dir)", restarted));
    log.close().await?;
    let reopened =
        probe_process(ctx, &prefix, ProbeKind::Writer, Some(&writer_cache), false).await?;
    opens.push(("reopened writer (its cache dir)", reopened));
    let stateless = probe_process(
        ctx,
        &prefix,
        ProbeKind::Writer,
        Some(&stateless_cache),
        false,
    )
    .await?;
    opens.push(("writer with no local state (empty cache dir)", stateless));
    let handed = probe_process(
        ctx,
        &prefix,
        ProbeKind::Writer,
        Some(&follower_cache),
        false,
    )
    .await?;
    opens.push(("writer on the standby follower's cache dir", handed));
    for (what, p) in &opens {
        report.add(
            Row::new(W, format!("open after {total} entries"), *what)
                .value(vec![p.open_ms], "ms")
                .target("< 1000 ms", p.open_ms < 1000.0)
                .note(format!(
                    "first read {:.1} ms{}, RSS {:.1} MB (peak {:.1} MB)",
                    p.first_read_ms,
                    p.first_append_ms
                        .map_or(String::new(), |a| format!(", first append {a:.1} ms")),
                    p.rss_mb,
                    p.peak_rss_mb
                )),
        );
    }
    let (raw_time, raw_bytes) = raw_parallel_get(&store, 32).await?;
    let raw_row = report.add(
        Row::new(
            W,
            format!("read all {total} entries"),
            "raw parallel GET of every segment (32)",
        )
        .value(vec![raw_time.as_secs_f64()], "s")
        .note(format!("{:.0} MiB", raw_bytes as f64 / MIB)),
    );
    if let Some(ms) = fresh.caught_up_ms {
        report.add(
            Row::new(
                W,
                format!("read all {total} entries"),
                "fresh follower caught up",
            )
            .value(vec![ms / 1e3], "s")
            .against(&raw_row),
        );
    }
    ctx.plots.push(Plot::TimeSeries {
        file: "soak_rss.svg".into(),
        title: format!("Soak: writer RSS ({case})"),
        y_label: "RSS, MB".into(),
        series: vec![(
            "writer RSS".into(),
            windows.iter().map(|w| (w.end_s, w.rss_mb)).collect(),
        )],
    });
    ctx.plots.push(Plot::TimeSeries {
        file: "soak_manifest.svg".into(),
        title: format!("Soak: manifest object size ({case})"),
        y_label: "manifest, KiB".into(),
        series: vec![(
            "manifest".into(),
            windows
                .iter()
                .map(|w| (w.end_s, w.manifest_bytes as f64 / 1024.0))
                .collect(),
        )],
    });
    ctx.plots.push(Plot::TimeSeries {
        file: "soak_commit.svg".into(),
        title: format!("Soak: commit latency ({case})"),
        y_label: "ms".into(),
        series: vec![
            (
                "commit p50".into(),
                windows.iter().map(|w| (w.end_s, w.commit_p50_ms)).collect(),
            ),
            (
                "commit p99".into(),
                windows.iter().map(|w| (w.end_s, w.commit_p99_ms)).collect(),
            ),
            (
                "raw PUT+CAS p50".into(),
                windows
                    .iter()
                    .map(|w| (w.end_s, w.raw_commit_p50_ms))
                    .collect(),
            ),
        ],
    });
    Ok(())
}
