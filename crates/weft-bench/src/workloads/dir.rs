//! Dir-backend workloads, each with a baseline measured in the same run on
//! the same filesystem:
//!
//! * small durable appends at 1/8/64/1024 closed-loop appenders, against a
//!   bare `write` + `fdatasync` loop of the same record size (what one
//!   appender gets without group commit), and against two peer logs at the
//!   same counts and record size, each append durable before it returns:
//!   okaywal (a write-ahead log whose writers share `fsync`s) and fjall
//!   used as a log (the peers are the dir bench's, `weft/benches/dir/peers.rs`);
//! * large records, against the same loop at that size and against
//!   `dd … conv=fdatasync` (sequential bandwidth with one sync at the end);
//! * mixed tags with conditional appends, against the same mix appended
//!   unconditionally.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use weft::storage::dir::{DirStats, DirStorage};
use weft::{AppendRequest, ErrorKind, Log, LogTag};

use super::Ctx;
use crate::load::{Outcome, closed_loop, payload};
use crate::plot::Plot;
use crate::report::{Report, Row};
use crate::stats::Samples;

// The dir bench's peer logs, shared so both benches compare against the
// same code.
#[path = "../../../weft/benches/dir/peers.rs"]
mod peers;

const SMALL: usize = 128;

/// The baseline name of weft's row against the faster peer of a case.
const BETTER_PEER: &str = "better peer (okaywal 0.3 or fjall 3 as a log)";

fn tags(n: usize) -> Vec<LogTag> {
    (0..n)
        .map(|i| LogTag::with_key("bench", format!("k{i}")).expect("valid tag"))
        .collect()
}

async fn open(ctx: &mut Ctx, name: &str) -> Result<(Arc<DirStorage>, Log)> {
    let dir = ctx.fresh_dir(name)?;
    let storage = Arc::new(DirStorage::open(&dir).await?);
    let log = Log::from_arc(storage.clone());
    Ok((storage, log))
}

/// `appenders` closed-loop appenders of `record`-byte entries over 16 tags.
async fn weft_appends(
    ctx: &mut Ctx,
    appenders: usize,
    record: usize,
    duration: Duration,
) -> Result<(Outcome, DirStats)> {
    let (storage, log) = open(ctx, "dir").await?;
    let tags = Arc::new(tags(16));
    let data = payload(record, 3);
    let l = log.clone();
    let o = closed_loop(appenders, duration, move |w, i| {
        let log = l.clone();
        let tag = tags[(w + i as usize) % tags.len()].clone();
        let data = data.clone();
        async move {
            let n = data.len() as u64;
            log.append(AppendRequest::new(tag, data)).await?;
            Ok(n)
        }
    })
    .await?;
    let stats = storage.stats();
    log.close().await?;
    Ok((o, stats))
}

/// `appenders` closed-loop appenders of `record`-byte entries on a new log
/// of `peer`, one OS thread each (the peers' write calls block): its
/// durable appends/s and the appends' latencies.
async fn peer_appends(
    ctx: &mut Ctx,
    peer: peers::Peer,
    appenders: usize,
    record: usize,
    duration: Duration,
) -> Result<(f64, Samples)> {
    let dir = ctx.fresh_dir("peer")?;
    let data = payload(record, 3);
    let run = tokio::task::spawn_blocking(move || {
        peers::closed_loop(peer, &dir, appenders, &data, Duration::ZERO, duration)
    })
    .await?
    .with_context(|| format!("{} run", peer.name()))?;
    let mut latency = Samples::new();
    for d in &run.latencies {
        latency.push(*d);
    }
    Ok((run.rate(), latency))
}

/// The bare loop: `write(record)` then `fdatasync`, one thread, on a file
/// opened for append in the same directory tree.
async fn fsync_loop(dir: &Path, record: usize, duration: Duration) -> Result<Outcome> {
    let path = dir.join("fsync-loop.bin");
    let data = payload(record, 4);
    tokio::task::spawn_blocking(move || {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        let mut out = Outcome::default();
        let start = Instant::now();
        while start.elapsed() < duration || out.ops == 0 {
            let t = Instant::now();
            f.write_all(&data)?;
            f.sync_data()?;
            out.latency.push(t.elapsed());
            out.ops += 1;
            out.bytes += data.len() as u64;
        }
        out.elapsed = start.elapsed();
        drop(f);
        std::fs::remove_file(&path)?;
        anyhow::Ok(out)
    })
    .await?
}

/// `dd if=/dev/zero of=… bs=1M count=… conv=fdatasync`, timed from outside
/// (process start to exit); MiB/s.
async fn dd(dir: &Path, mib: usize) -> Result<f64> {
    let path = dir.join("dd.bin");
    let t = Instant::now();
    let out = tokio::process::Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", path.display()))
        .arg("bs=1M")
        .arg(format!("count={mib}"))
        .arg("conv=fdatasync")
        .output()
        .await
        .context("run dd")?;
    let el = t.elapsed();
    if !out.status.success() {
        bail!("dd failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let _ = std::fs::remove_file(&path);
    Ok(mib as f64 / el.as_secs_f64())
}

pub async fn small_appends(ctx: &mut Ctx, report: &mut Report) -> Result<()> {
    const W: &str = "dir-append";
    let duration = ctx.duration(Duration::from_secs(3));
    let base_dir = ctx.fresh_dir("fsync")?;
    let counts = [1usize, 8, 64, 1024];
    // Baseline, weft and peer runs interleave, so slow phases of the shared
    // disk hit all alike.
    let mut base_runs = Vec::new();
    let mut base_lat = Samples::new();
    let mut runs = vec![Vec::new(); counts.len()];
    let mut lats = vec![Samples::new(); counts.len()];
    let mut per_sync = vec![Vec::new(); counts.len()];
    // Per peer, per count: the runs and their latencies.
    let mut peer_runs = vec![vec![Vec::new(); counts.len()]; peers::Peer::ALL.len()];
    let mut peer_lats = vec![vec![Samples::new(); counts.len()]; peers::Peer::ALL.len()];
    for _ in 0..ctx.runs {
        let o = fsync_loop(&base_dir, SMALL, duration).await?;
        base_runs.push(o.ops_per_s());
        base_lat.extend(&o.latency);
        for (k, &appenders) in counts.iter().enumerate() {
            let (o, stats) = weft_appends(ctx, appenders, SMALL, duration).await?;
            runs[k].push(o.ops_per_s());
            lats[k].extend(&o.latency);
            per_sync[k].push(stats.entries as f64 / stats.syncs.max(1) as f64);
            for (p, peer) in peers::Peer::ALL.into_iter().enumerate() {
                let (rate, latency) = peer_appends(ctx, peer, appenders, SMALL, duration).await?;
                peer_runs[p][k].push(rate);
                peer_lats[p][k].extend(&latency);
            }
        }
    }
    let base = report.add(
        Row::new(W, format!("{SMALL} B records"), "write+fdatasync loop")
            .value(base_runs, "ops/s")
            .latency(base_lat.summary()),
    );
    let mut hist = vec![(
        "write+fdatasync loop".to_string(),
        base_lat.values().to_vec(),
    )];
    let mut weft_pts = Vec::new();
    let mut peer_pts = vec![Vec::new(); peers::Peer::ALL.len()];
    for (k, &appenders) in counts.iter().enumerate() {
        let row = report.add(
            Row::new(
                W,
                format!("{SMALL} B, {appenders} appenders"),
                "weft dir backend",
            )
            .value(runs[k].clone(), "appends/s")
            .latency(lats[k].summary())
            .against(&base)
            .note(format!(
                "{:.1} entries per fdatasync",
                crate::stats::median(&per_sync[k])
            )),
        );
        weft_pts.push((appenders as f64, row.value));
        hist.push((
            format!("weft, {appenders} appenders"),
            lats[k].values().to_vec(),
        ));
        // The peers' own rows, then weft against the better of them (one
        // baseline name whichever peer it was, so the regression guard's
        // key stays put).
        let mut better = 0f64;
        for (p, peer) in peers::Peer::ALL.into_iter().enumerate() {
            let peer_row = report.add(
                Row::new(W, format!("{SMALL} B, {appenders} appenders"), peer.name())
                    .value(peer_runs[p][k].clone(), "appends/s")
                    .latency(peer_lats[p][k].summary()),
            );
            better = better.max(peer_row.value);
            peer_pts[p].push((appenders as f64, peer_row.value));
        }
        report.add(
            Row::new(
                W,
                format!("{SMALL} B, {appenders} appenders"),
                "weft dir backend",
            )
            .value(runs[k].clone(), "appends/s")
            .against_value(BETTER_PEER, better),
        );
    }
    ctx.plots.push(Plot::Lines {
        file: "dir_appends_vs_appenders.svg".into(),
        title: format!("Dir backend: durable {SMALL} B appends/s against appenders"),
        x_label: "concurrent appenders (log scale)".into(),
        y_label: "appends/s".into(),
        series: [
            ("weft dir backend".to_string(), weft_pts),
            (
                "write+fdatasync loop (1 thread)".into(),
                vec![(1.0, base.value), (1024.0, base.value)],
            ),
        ]
        .into_iter()
        .chain(
            peers::Peer::ALL
                .into_iter()
                .zip(peer_pts)
                .map(|(peer, pts)| (peer.name().to_string(), pts)),
        )
        .collect(),
    });
    ctx.plots.push(Plot::Histogram {
        file: "dir_append_latency.svg".into(),
        title: format!("Dir backend: durable {SMALL} B append latency"),
        series: hist,
    });
    Ok(())
}

pub async fn large_records(ctx: &mut Ctx, report: &mut Report) -> Result<()> {
    const W: &str = "dir-large";
    let duration = ctx.duration(Duration::from_secs(3));
    let dd_mib = if ctx.quick { 16 } else { 256 };
    let base_dir = ctx.fresh_dir("dd")?;
    let mut dd_runs = Vec::new();
    for _ in 0..ctx.runs {
        dd_runs.push(dd(&base_dir, dd_mib).await?);
    }
    let dd_row = report.add(
        Row::new(
            W,
            format!("{dd_mib} MiB sequential"),
            "dd bs=1M conv=fdatasync",
        )
        .value(dd_runs, "MiB/s"),
    );
    let sizes: Vec<usize> = if ctx.quick {
        vec![1 << 20]
    } else {
        vec![256 << 10, 1 << 20, 4 << 20]
    };
    for size in sizes {
        let label = if size >= 1 << 20 {
            format!("{} MiB", size >> 20)
        } else {
            format!("{} KiB", size >> 10)
        };
        let mut runs = Vec::new();
        let mut lat = Samples::new();
        for _ in 0..ctx.runs {
            let o = fsync_loop(&base_dir, size, duration).await?;
            runs.push(o.mib_per_s());
            lat.extend(&o.latency);
        }
        let loop_row = report.add(
            Row::new(W, format!("{label} records"), "write+fdatasync loop")
                .value(runs, "MiB/s")
                .latency(lat.summary()),
        );
        for appenders in [1usize, 4] {
            let mut runs = Vec::new();
            let mut lat = Samples::new();
            for _ in 0..ctx.runs {
                let (o, _) = weft_appends(ctx, appenders, size, duration).await?;
                runs.push(o.mib_per_s());
                lat.extend(&o.latency);
            }
            let row = Row::new(
                W,
                format!("{label} records, {appenders} appenders"),
                "weft dir backend",
            )
            .value(runs, "MiB/s")
            .latency(lat.summary())
            .against(&loop_row);
            let vs_dd = row.value / dd_row.value;
            report.add(row.note(format!("{:.2}× dd", vs_dd)));
        }
    }
    Ok(())
}

pub async fn mixed_tags(ctx: &mut Ctx, report: &mut Report) -> Result<()> {
    const W: &str = "dir-mixed";
    let duration = ctx.duration(Duration::from_secs(3));
    let appenders = 8;
    let ntags = 64;
    let case = format!("{appenders} appenders, {ntags} streams, {SMALL} B, 2 tags/entry");
    let mut plain = Vec::new();
    let mut plain_lat = Samples::new();
    let mut cond = Vec::new();
    let mut cond_lat = Samples::new();
    let mut conflict_share = Vec::new();
    for _ in 0..ctx.runs {
        for conditional in [false, true] {
            let (_storage, log) = open(ctx, "mixed").await?;
            let tags = Arc::new(tags(ntags));
            let group: Arc<Vec<LogTag>> = Arc::new(
                (0..4)
                    .map(|g| LogTag::with_key("group", format!("g{g}")).expect("valid tag"))
                    .collect(),
            );
            let conflicts = Arc::new(AtomicU64::new(0));
            let c = conflicts.clone();
            let data: Bytes = payload(SMALL, 8);
            let l = log.clone();
            let o = closed_loop(appenders, duration, move |w, i| {
                let log = l.clone();
                // A scattered walk over the streams, different per appender.
                let k = (w as u64 * 7919 + i * 104_729) as usize;
                let tag = tags[k % tags.len()].clone();
                let second = group[k % group.len()].clone();
                let data = data.clone();
                let conflicts = c.clone();
                async move {
                    loop {
                        let req =
                            AppendRequest::with_tags([tag.clone(), second.clone()], data.clone());
                        if !conditional {
                            log.append(req).await?;
                            return Ok(SMALL as u64);
                        }
                        let expected = log.next_version(&tag).await?;
                        match log.append_if(req, expected).await {
                            Ok(_) => return Ok(SMALL as u64),
                            Err(e) if e.kind() == ErrorKind::Conflict => {
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
            })
            .await?;
            log.close().await?;
            if conditional {
                cond.push(o.ops_per_s());
                cond_lat.extend(&o.latency);
                conflict_share
                    .push(conflicts.load(Ordering::Relaxed) as f64 / o.ops.max(1) as f64 * 100.0);
            } else {
                plain.push(o.ops_per_s());
                plain_lat.extend(&o.latency);
            }
        }
    }
    let base = report.add(
        Row::new(W, &case, "weft, unconditional append")
            .value(plain, "appends/s")
            .latency(plain_lat.summary()),
    );
    report.add(
        Row::new(W, &case, "weft, append_if (expected version)")
            .value(cond, "appends/s")
            .latency(cond_lat.summary())
            .against(&base)
            .note(format!(
                "{:.1}% conflicts retried",
                crate::stats::median(&conflict_share)
            )),
    );
    Ok(())
}
