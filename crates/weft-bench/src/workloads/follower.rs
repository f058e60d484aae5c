//! Follower lag: a primary appends at a steady pace; a replica tails the
//! bucket. Lag is the time from the append call to the replica applying
//! the record (each record carries its send time); the primary's own
//! commit latency for the same appends is the baseline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use bytes::{BufMut, Bytes, BytesMut};
use object_store::path::Path;
use weft::wal::{FnApplier, Replica};

use super::Ctx;
use super::peer::{WeftSink, WriteSettings};
use crate::plot::Plot;
use crate::report::{Report, Row};
use crate::stats::Samples;

const W: &str = "follower-lag";
const RECORD: usize = 1024;
const PACE: Duration = Duration::from_millis(2);

static BASE: OnceLock<Instant> = OnceLock::new();

fn now_ns() -> u64 {
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

fn stamped(fill: &Bytes) -> Bytes {
    let mut b = BytesMut::with_capacity(RECORD);
    b.put_u64_le(now_ns());
    b.put_slice(&fill[8..]);
    b.freeze()
}

fn age(record: &[u8]) -> Option<Duration> {
    let sent = u64::from_le_bytes(record.get(..8)?.try_into().ok()?);
    Some(Duration::from_nanos(now_ns().saturating_sub(sent)))
}

struct LagRun {
    lag: Samples,
    commit: Samples,
}

async fn lag_run(
    ctx: &mut Ctx,
    s: WriteSettings,
    poll: Duration,
    duration: Duration,
) -> Result<LagRun> {
    let store = ctx.fresh_store("lag")?;
    let sink = WeftSink::open(store.clone(), s).await?;

    let lag = Arc::new(Mutex::new(Samples::new()));
    let applied = Arc::new(AtomicU64::new(0));
    let (l, a) = (lag.clone(), applied.clone());
    let applier = FnApplier::new(move |r: &weft::wal::Record| {
        if let Some(d) = age(&r.data) {
            l.lock().unwrap_or_else(|p| p.into_inner()).push(d);
        }
        a.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    let mut replica = Replica::builder(store, Path::from("wal/manifest"), applier)
        .with_poll_interval(poll)
        .build();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let follower = tokio::spawn(async move {
        replica
            .run(async {
                let _ = stop_rx.await;
            })
            .await
    });

    let fill = crate::load::payload(RECORD, 5);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let waiter = tokio::spawn(async move {
        let mut commit = Samples::new();
        while let Some((t, d)) = rx.recv().await {
            let d: weft::wal::Durability = d;
            d.wait().await?;
            commit.push(Instant::now() - t);
        }
        anyhow::Ok(commit)
    });
    let mut tick = tokio::time::interval(PACE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let end = Instant::now() + duration;
    let mut sent = 0u64;
    while Instant::now() < end {
        tick.tick().await;
        let t = Instant::now();
        let d = sink.0.append(vec![stamped(&fill)], None).await?;
        let _ = tx.send((t, d));
        sent += 1;
    }
    drop(tx);
    let commit = waiter.await??;
    let deadline = Instant::now() + Duration::from_secs(20);
    while applied.load(Ordering::Relaxed) < sent {
        if Instant::now() > deadline {
            bail!(
                "replica applied {} of {sent} records within 20 s",
                applied.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = stop_tx.send(());
    follower.await??;
    sink.close().await?;
    let lag = std::mem::take(&mut *lag.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(LagRun { lag, commit })
}

/// The same measurement one layer up: a `Log` over `BucketStorage` as the
/// primary, a `Log` over `BucketFollower` whose live subscription sees each
/// entry. Every paced append runs in its own task (an append returns only
/// once committed).
async fn log_lag_run(
    ctx: &mut Ctx,
    interval: Duration,
    poll: Duration,
    duration: Duration,
) -> Result<LagRun> {
    use futures::StreamExt;
    use weft::storage::bucket::{
        BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage,
    };
    use weft::{AppendRequest, Log, LogTag, Position};

    let store = ctx.fresh_store("loglag")?;
    let primary = Log::new(
        BucketStorage::open(
            store.clone(),
            "log",
            BucketOptions::default().with_flush_interval(interval),
        )
        .await?,
    );
    let follower = Log::new(
        BucketFollower::open(
            store,
            "log",
            BucketFollowerOptions::default().with_poll_interval(poll),
        )
        .await?,
    );
    // The subscriber runs beside the appender, so each entry is timed as it
    // arrives (not when the appender is done).
    let mut sub = follower.subscribe_log(Position::End);
    let (count_tx, count_rx) = tokio::sync::oneshot::channel::<usize>();
    let subscriber = tokio::spawn(async move {
        let mut lag = Samples::new();
        let mut want: Option<usize> = None;
        let mut count_rx = Some(count_rx);
        loop {
            if want.is_some_and(|w| lag.values().len() >= w) {
                return anyhow::Ok(lag);
            }
            let next = async {
                match count_rx.as_mut() {
                    Some(rx) => tokio::select! {
                        biased;
                        e = sub.next() => (Some(e), None),
                        n = rx => (None, Some(n)),
                    },
                    None => (Some(sub.next().await), None),
                }
            };
            match tokio::time::timeout(Duration::from_secs(20), next).await {
                Err(_) => bail!("the follower delivered nothing for 20 s"),
                Ok((_, Some(n))) => {
                    want = Some(n.unwrap_or(0));
                    count_rx = None;
                }
                Ok((Some(Some(entry)), _)) => {
                    if let Some(d) = age(&entry?.data) {
                        lag.push(d);
                    }
                }
                Ok((Some(None), _)) => bail!("the follower's subscription ended"),
                Ok((None, None)) => {}
            }
        }
    });
    let tag = LogTag::new("lag")?;
    let fill = crate::load::payload(RECORD, 6);
    let end = Instant::now() + duration;
    let mut tick = tokio::time::interval(PACE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut tasks = Vec::new();
    let mut sent = 0usize;
    while Instant::now() < end {
        tick.tick().await;
        let log = primary.clone();
        let req = AppendRequest::new(tag.clone(), stamped(&fill));
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            log.append(req).await?;
            anyhow::Ok(t.elapsed())
        }));
        sent += 1;
    }
    let mut commit = Samples::new();
    for t in tasks {
        commit.push(t.await??);
    }
    let _ = count_tx.send(sent);
    let lag = subscriber.await??;
    follower.close().await?;
    primary.close().await?;
    Ok(LagRun { lag, commit })
}

pub async fn run(ctx: &mut Ctx, report: &mut Report) -> Result<()> {
    let duration = ctx.duration(Duration::from_secs(8));
    let cases: Vec<(u64, u64)> = if ctx.quick {
        vec![(20, 10)]
    } else {
        vec![(20, 10), (50, 25), (100, 50)]
    };
    let mut hist = Vec::new();
    for (interval, poll) in cases {
        let s = WriteSettings {
            flush_interval: Duration::from_millis(interval),
            flush_bytes: 8 << 20,
        };
        let case = format!(
            "1 KiB every {} ms, flush {interval} ms, poll {poll} ms",
            PACE.as_millis()
        );
        let mut lag = Samples::new();
        let mut commit = Samples::new();
        for _ in 0..ctx.runs {
            let r = lag_run(ctx, s, Duration::from_millis(poll), duration).await?;
            lag.extend(&r.lag);
            commit.extend(&r.commit);
        }
        let cs = commit.summary();
        let c = report.add(
            Row::new(W, &case, "primary commit (append → durable)")
                .value(vec![cs.map_or(f64::NAN, |x| x.p50)], "ms p50")
                .latency(cs),
        );
        let ls = lag.summary();
        let lag_row = Row::new(W, &case, "weft Replica lag (append → applied)")
            .value(vec![ls.map_or(f64::NAN, |x| x.p50)], "ms p50")
            .latency(ls)
            .against(&c);
        // Model: commit, then on average half a poll interval, then a
        // manifest GET and a segment GET.
        let raw = ctx.raw;
        let model = c.value + poll as f64 / 2.0 + raw.map_or(0.0, |r| 2.0 * r.get_small_p50);
        report.add(lag_row.note(format!("model commit + poll/2 + 2 GET = {model:.1} ms")));

        let mut llag = Samples::new();
        let mut lcommit = Samples::new();
        for _ in 0..ctx.runs {
            let r = log_lag_run(
                ctx,
                Duration::from_millis(interval),
                Duration::from_millis(poll),
                duration,
            )
            .await?;
            llag.extend(&r.lag);
            lcommit.extend(&r.commit);
        }
        let cs = lcommit.summary();
        let lc = report.add(
            Row::new(W, &case, "Log on BucketStorage: append")
                .value(vec![cs.map_or(f64::NAN, |x| x.p50)], "ms p50")
                .latency(cs),
        );
        let ls = llag.summary();
        report.add(
            Row::new(W, &case, "Log on BucketFollower: lag (subscription)")
                .value(vec![ls.map_or(f64::NAN, |x| x.p50)], "ms p50")
                .latency(ls)
                .against(&lc),
        );
        if interval == 50 || hist.is_empty() {
            hist = vec![
                (
                    format!("commit, flush {interval} ms"),
                    commit.values().to_vec(),
                ),
                (
                    format!("replica lag, poll {poll} ms"),
                    lag.values().to_vec(),
                ),
            ];
        }
    }
    ctx.plots.push(Plot::Histogram {
        file: "follower_lag.svg".into(),
        title: "Follower lag vs primary commit latency".into(),
        series: hist,
    });
    Ok(())
}
