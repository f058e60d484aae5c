//! Replica catch-up: a fresh replica reads a written log from the start,
//! against a raw parallel GET of the very same segment objects; and
//! opendata-buffer's Consumer reading back a log its Producer wrote.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path;
use weft::wal::{FnApplier, Replica};

use super::Ctx;
use super::peer::{PEER_DATA, PEER_MANIFEST, PeerSink, WeftSink, WriteSettings};
use super::raw::{PAR, parallel_get};
use crate::load::payload;
use crate::plot::Plot;
use crate::report::{Report, Row};
use crate::stats::{MIB, mib_per_s};

const W: &str = "replica";
const RECORD: usize = 16 << 10;
const FLUSH: usize = 1 << 20;

/// Writes about `total` bytes of `RECORD`-sized records through `sink`
/// (saturating, so segments come out at the flush size).
async fn fill<S: crate::load::Sink>(sink: Arc<S>, total: usize) -> Result<u64> {
    // One appender, an exact record count, up to 4096 commits pending.
    let rec = payload(RECORD, 11);
    let n = total / RECORD;
    let mut pending = std::collections::VecDeque::new();
    for _ in 0..n {
        pending.push_back(sink.submit(vec![rec.clone()]).await?);
        if pending.len() > 4096
            && let Some(p) = pending.pop_front()
        {
            S::wait(p).await?;
        }
    }
    for p in pending {
        S::wait(p).await?;
    }
    Ok((n * RECORD) as u64)
}

async fn list(store: &Arc<dyn ObjectStore>, prefix: &str) -> Result<Vec<Path>> {
    let p = Path::from(prefix);
    let metas: Vec<_> = store.list(Some(&p)).try_collect().await?;
    Ok(metas.into_iter().map(|m| m.location).collect())
}

/// GETs every path with `PAR` requests in flight, taking the bodies in
/// path order (`buffered`, as an in-order reader must): the ordered
/// counterpart of [`parallel_get`]; MiB/s.
async fn parallel_get_in_order(store: &Arc<dyn ObjectStore>, paths: Vec<Path>) -> Result<f64> {
    let t = Instant::now();
    let mut bytes = 0u64;
    let mut bodies = futures::stream::iter(paths)
        .map(|p| {
            let store = store.clone();
            async move { store.get(&p).await?.bytes().await }
        })
        .buffered(PAR);
    while let Some(b) = bodies.try_next().await? {
        bytes += b.len() as u64;
    }
    Ok(mib_per_s(bytes, t.elapsed()))
}

/// One catch-up of a fresh replica; MiB/s of record bytes.
async fn catch_up(store: Arc<dyn ObjectStore>, records: u64, prefetch: usize) -> Result<f64> {
    let bytes = Arc::new(AtomicU64::new(0));
    let b = bytes.clone();
    let applier = FnApplier::new(move |r: &weft::wal::Record| {
        b.fetch_add(r.data.len() as u64, Ordering::Relaxed);
        Ok(())
    });
    let t = Instant::now();
    let mut replica = Replica::builder(store, Path::from("wal/manifest"), applier)
        .with_prefetch(prefetch)
        .build();
    let mut applied = 0u64;
    while applied < records {
        let o = replica.poll().await?;
        applied += o.applied as u64;
        if o.applied == 0 && o.unchanged && t.elapsed() > Duration::from_secs(120) {
            bail!("replica stalled at {applied} of {records} records");
        }
    }
    Ok(mib_per_s(bytes.load(Ordering::Relaxed), t.elapsed()))
}

/// opendata Consumer: serial `next_batch` until the log is drained.
async fn peer_serial(store: Arc<dyn ObjectStore>) -> Result<f64> {
    let t = Instant::now();
    let mut c = peer_consumer(store).await?;
    let mut bytes = 0u64;
    while let Some(b) = c.next_batch().await? {
        bytes += b.entries.iter().map(|e| e.len() as u64).sum::<u64>();
    }
    let el = t.elapsed();
    c.close().await?;
    Ok(mib_per_s(bytes, el))
}

/// opendata Consumer: descriptors from one manifest read, fetched through
/// `PAR` concurrent fetch handles, in order.
async fn peer_parallel(store: Arc<dyn ObjectStore>) -> Result<f64> {
    let t = Instant::now();
    let mut c = peer_consumer(store).await?;
    let mut bytes = 0u64;
    loop {
        let ds = c.next_descriptors(256).await?;
        if ds.is_empty() {
            break;
        }
        let h = c.fetch_handle();
        let sizes: Vec<u64> = futures::stream::iter(ds)
            .map(|d| {
                let h = h.clone();
                async move {
                    let b = h.fetch(d).await?;
                    Ok::<u64, buffer::Error>(b.entries.iter().map(|e| e.len() as u64).sum())
                }
            })
            .buffered(PAR)
            .try_collect()
            .await?;
        bytes += sizes.iter().sum::<u64>();
    }
    let el = t.elapsed();
    c.close().await?;
    Ok(mib_per_s(bytes, el))
}

async fn peer_consumer(store: Arc<dyn ObjectStore>) -> Result<buffer::Consumer> {
    let config = buffer::ConsumerConfig {
        object_store: common::ObjectStoreConfig::InMemory,
        manifest_path: PEER_MANIFEST.into(),
        data_path_prefix: PEER_DATA.into(),
        gc_interval: Duration::from_secs(3600),
        gc_grace_period: Duration::from_secs(3600),
    };
    Ok(buffer::Consumer::with_object_store(config, store, None).await?)
}

pub async fn run(ctx: &mut Ctx, report: &mut Report) -> Result<()> {
    let total = if ctx.quick { 8 << 20 } else { 256 << 20 };
    let s = WriteSettings {
        flush_interval: Duration::from_millis(20),
        flush_bytes: FLUSH,
    };
    let case = format!(
        "{} MiB of {} KiB records, ~1 MiB segments",
        total >> 20,
        RECORD >> 10
    );

    // weft: write once, read many times.
    let store = ctx.fresh_store("replica")?;
    let sink = Arc::new(WeftSink::open(store.clone(), s).await?);
    let written = fill(sink.clone(), total).await?;
    sink.close().await?;
    let records = written / RECORD as u64;
    let segments = list(&store, "wal/seg").await?;
    let seg_bytes: u64 = {
        let metas: Vec<_> = store
            .list(Some(&Path::from("wal/seg")))
            .try_collect()
            .await?;
        metas.iter().map(|m| m.size).sum()
    };

    let mut raw_runs = Vec::new();
    let mut ordered_runs = Vec::new();
    let mut raw1_runs = Vec::new();
    let mut rep_runs = Vec::new();
    let mut rep1_runs = Vec::new();
    for _ in 0..ctx.runs {
        raw_runs.push(parallel_get(&store, segments.clone(), PAR).await?.0);
        rep_runs.push(catch_up(store.clone(), records, PAR).await?);
        ordered_runs.push(parallel_get_in_order(&store, segments.clone()).await?);
        raw1_runs.push(parallel_get(&store, segments.clone(), 1).await?.0);
        rep1_runs.push(catch_up(store.clone(), records, 1).await?);
    }
    let note = format!(
        "{} segments, {:.1} MiB stored",
        segments.len(),
        seg_bytes as f64 / MIB
    );
    let raw_row = report.add(
        Row::new(W, &case, format!("raw parallel GET ({PAR})"))
            .value(raw_runs, "MiB/s")
            .note(note),
    );
    let rep = Row::new(W, &case, format!("weft Replica (prefetch {PAR})"))
        .value(rep_runs, "MiB/s")
        .against(&raw_row);
    let met = rep.ratio.is_some_and(|x| x >= 0.95);
    let rep = report.add(rep.target("≥ 95% of raw parallel GET", met));
    report.add(
        Row::new(W, &case, format!("raw parallel GET in order ({PAR})"))
            .value(ordered_runs, "MiB/s")
            .against(&raw_row),
    );
    let raw1 = report.add(Row::new(W, &case, "raw sequential GET").value(raw1_runs, "MiB/s"));
    report.add(
        Row::new(W, &case, "weft Replica (prefetch 1)")
            .value(rep1_runs, "MiB/s")
            .against(&raw1),
    );

    // opendata-buffer: its own producer writes the same data; its consumer
    // reads it back (a fresh consumer per run: it claims the manifest).
    let pstore = ctx.fresh_store("peer-read")?;
    let psink = Arc::new(PeerSink::open(pstore.clone(), s)?);
    fill(psink.clone(), total).await?;
    if let Ok(p) = Arc::try_unwrap(psink) {
        p.close().await?;
    }
    let peer_objects = list(&pstore, PEER_DATA).await?;
    // The peer's data objects (not its manifest), for a raw GET of them
    // in the same runs: the peer's own ceiling on this server.
    let manifest = Path::from(PEER_MANIFEST);
    let peer_data: Vec<Path> = peer_objects
        .iter()
        .filter(|p| **p != manifest)
        .cloned()
        .collect();
    let mut ser = Vec::new();
    let mut par = Vec::new();
    let mut peer_raw = Vec::new();
    for _ in 0..ctx.runs {
        ser.push(peer_serial(pstore.clone()).await?);
        peer_raw.push(parallel_get(&pstore, peer_data.clone(), PAR).await?.0);
        par.push(peer_parallel(pstore.clone()).await?);
    }
    let peer_ser = report.add(
        Row::new(W, &case, "opendata Consumer next_batch")
            .value(ser, "MiB/s")
            .note(format!("{} objects incl. manifest", peer_objects.len())),
    );
    let peer_raw = report.add(
        Row::new(
            W,
            &case,
            format!("raw parallel GET of the peer's objects ({PAR})"),
        )
        .value(peer_raw, "MiB/s")
        .against(&raw_row),
    );
    let peer_par = report.add(
        Row::new(W, &case, format!("opendata Consumer fetch ×{PAR}"))
            .value(par, "MiB/s")
            .against(&peer_raw),
    );
    report.add(
        Row::new(W, &case, "weft Replica vs opendata (serial)")
            .value(vec![rep.value], "MiB/s")
            .against(&peer_ser),
    );
    let vs = Row::new(W, &case, "weft Replica vs opendata (×8)")
        .value(vec![rep.value], "MiB/s")
        .against(&peer_par);
    let met = vs.ratio.is_some_and(|x| x >= 1.0);
    report.add(vs.target("≥ 1× peer", met));
    ctx.plots.push(Plot::Lines {
        file: "replica_catchup.svg".into(),
        title: format!("Read-back MiB/s ({case})"),
        x_label: "fetch concurrency (log scale)".into(),
        y_label: "MiB/s".into(),
        series: vec![
            (
                "raw GET".into(),
                vec![(1.0, raw1.value), (PAR as f64, raw_row.value)],
            ),
            (
                "weft Replica".into(),
                vec![
                    (1.0, report_value(report, "weft Replica (prefetch 1)")),
                    (PAR as f64, rep.value),
                ],
            ),
            (
                "opendata Consumer".into(),
                vec![(1.0, peer_ser.value), (PAR as f64, peer_par.value)],
            ),
        ],
    });
    Ok(())
}

fn report_value(report: &Report, subject: &str) -> f64 {
    report
        .rows
        .iter()
        .rev()
        .find(|r| r.workload == W && r.subject == subject)
        .map_or(f64::NAN, |r| r.value)
}
