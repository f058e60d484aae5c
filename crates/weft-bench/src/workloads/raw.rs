//! Raw S3 baselines: what the server does with no log on top.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::Ctx;
use crate::load::payload;
use crate::report::{Report, Row};
use crate::stats::{MIB, Samples, mib_per_s};

const W: &str = "s3-raw";

/// The numbers other workloads compare against (ms, MiB/s).
#[derive(Clone, Copy, Debug)]
pub struct RawS3 {
    pub put_small_p50: f64,
    pub get_small_p50: f64,
    pub cas_p50: f64,
    pub put_seg_p50: f64,
    pub get_seg_p50: f64,
    pub par_put_mibs: f64,
    pub par_get_mibs: f64,
}

/// Size of a "segment" object in the raw baselines.
pub const SEG: usize = 1 << 20;
/// Concurrency of the raw parallel PUT/GET (= the replica's prefetch and
/// the producer's upload concurrency).
pub const PAR: usize = 8;

pub async fn run(ctx: &mut Ctx, report: &mut Report) -> Result<RawS3> {
    let store = ctx.fresh_store("raw")?;
    let (n_small, n_seg, par_total) = if ctx.quick {
        (20, 4, 4 * SEG)
    } else {
        (300, 40, 64 * SEG)
    };
    let small = payload(1024, 1);
    let seg = payload(SEG, 2);

    let put_small = sequential_puts(&store, "small", &small, n_small).await?;
    let get_small = sequential_gets(&store, "small", n_small).await?;
    let put_seg = sequential_puts(&store, "seg", &seg, n_seg).await?;
    let get_seg = sequential_gets(&store, "seg", n_seg).await?;
    let cas = conditional_puts(&store, &payload(4096, 3), n_small).await?;

    let l = |s: &Samples| s.summary();
    let mut out = RawS3 {
        put_small_p50: 0.0,
        get_small_p50: 0.0,
        cas_p50: 0.0,
        put_seg_p50: 0.0,
        get_seg_p50: 0.0,
        par_put_mibs: 0.0,
        par_get_mibs: 0.0,
    };
    for (case, s, slot) in [
        ("PUT 1 KiB, sequential", &put_small, &mut out.put_small_p50),
        ("GET 1 KiB, sequential", &get_small, &mut out.get_small_p50),
        ("conditional PUT 4 KiB (If-Match)", &cas, &mut out.cas_p50),
        ("PUT 1 MiB, sequential", &put_seg, &mut out.put_seg_p50),
        ("GET 1 MiB, sequential", &get_seg, &mut out.get_seg_p50),
    ] {
        let sum = l(s);
        let p50 = sum.map_or(f64::NAN, |x| x.p50);
        *slot = p50;
        report.add(
            Row::new(W, case, "raw S3")
                .value(vec![p50], "ms p50")
                .latency(sum),
        );
    }

    // PUT and GET throughput against the number of requests in flight,
    // several runs each, median.
    let mut put_pts = Vec::new();
    let mut get_pts = Vec::new();
    for conc in [1usize, 2, 4, PAR] {
        let mut put_runs = Vec::new();
        let mut get_runs = Vec::new();
        for r in 0..ctx.runs {
            let name = format!("par{conc}-{r}");
            put_runs.push(parallel_put(&store, &name, &seg, par_total / SEG, conc).await?);
            let paths: Vec<Path> = (0..par_total / SEG)
                .map(|i| Path::from(format!("{name}/{i:06}")))
                .collect();
            get_runs.push(parallel_get(&store, paths, conc).await?.0);
        }
        let case = format!("{conc} in flight, 1 MiB objects");
        let put_row = report.add(Row::new(W, &case, "raw PUT").value(put_runs, "MiB/s"));
        let get_row = report.add(Row::new(W, &case, "raw GET").value(get_runs, "MiB/s"));
        put_pts.push((conc as f64, put_row.value));
        get_pts.push((conc as f64, get_row.value));
        if conc == PAR {
            out.par_put_mibs = put_row.value;
            out.par_get_mibs = get_row.value;
        }
    }
    ctx.plots.push(crate::plot::Plot::Lines {
        file: "s3_raw_throughput.svg".into(),
        title: "Raw S3 throughput against requests in flight (1 MiB objects)".into(),
        x_label: "requests in flight (log scale)".into(),
        y_label: "MiB/s".into(),
        series: vec![("PUT".into(), put_pts), ("GET".into(), get_pts)],
    });

    ctx.plots.push(crate::plot::Plot::Histogram {
        file: "s3_raw_latency.svg".into(),
        title: "Raw S3 request latency (SeaweedFS on 127.0.0.1)".into(),
        series: vec![
            ("PUT 1 KiB".into(), put_small.values().to_vec()),
            ("GET 1 KiB".into(), get_small.values().to_vec()),
            ("conditional PUT 4 KiB".into(), cas.values().to_vec()),
            ("PUT 1 MiB".into(), put_seg.values().to_vec()),
            ("GET 1 MiB".into(), get_seg.values().to_vec()),
        ],
    });
    ctx.raw = Some(out);
    Ok(out)
}

async fn sequential_puts(
    store: &Arc<dyn ObjectStore>,
    name: &str,
    data: &bytes::Bytes,
    n: usize,
) -> Result<Samples> {
    let mut s = Samples::new();
    for i in 0..n {
        let t = Instant::now();
        store
            .put(
                &Path::from(format!("{name}/{i:06}")),
                PutPayload::from(data.clone()),
            )
            .await?;
        s.push(t.elapsed());
    }
    Ok(s)
}

async fn sequential_gets(store: &Arc<dyn ObjectStore>, name: &str, n: usize) -> Result<Samples> {
    let mut s = Samples::new();
    for i in 0..n {
        let t = Instant::now();
        let b = store
            .get(&Path::from(format!("{name}/{i:06}")))
            .await?
            .bytes()
            .await?;
        std::hint::black_box(b);
        s.push(t.elapsed());
    }
    Ok(s)
}

/// A manifest-like CAS loop: each PUT is conditional on the last ETag.
async fn conditional_puts(
    store: &Arc<dyn ObjectStore>,
    data: &bytes::Bytes,
    n: usize,
) -> Result<Samples> {
    let path = Path::from("cas/object");
    let first = store
        .put_opts(
            &path,
            PutPayload::from(data.clone()),
            PutOptions::from(PutMode::Create),
        )
        .await?;
    let mut version = UpdateVersion {
        e_tag: first.e_tag,
        version: first.version,
    };
    let mut s = Samples::new();
    for _ in 0..n {
        let t = Instant::now();
        let r = store
            .put_opts(
                &path,
                PutPayload::from(data.clone()),
                PutOptions::from(PutMode::Update(version.clone())),
            )
            .await?;
        s.push(t.elapsed());
        version = UpdateVersion {
            e_tag: r.e_tag,
            version: r.version,
        };
    }
    Ok(s)
}

/// PUTs `n` copies of `data` under `name/` with `concurrency` in flight;
/// MiB/s.
pub async fn parallel_put(
    store: &Arc<dyn ObjectStore>,
    name: &str,
    data: &bytes::Bytes,
    n: usize,
    concurrency: usize,
) -> Result<f64> {
    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let store = store.clone();
            let data = data.clone();
            let path = Path::from(format!("{name}/{i:06}"));
            async move { store.put(&path, PutPayload::from(data)).await }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    Ok((n * data.len()) as f64 / MIB / t.elapsed().as_secs_f64())
}

/// GETs every path with `concurrency` requests in flight; MiB/s and bytes.
pub async fn parallel_get(
    store: &Arc<dyn ObjectStore>,
    paths: Vec<Path>,
    concurrency: usize,
) -> Result<(f64, u64, Duration)> {
    let t = Instant::now();
    let sizes: Vec<usize> = futures::stream::iter(paths)
        .map(|p| {
            let store = store.clone();
            async move {
                let b = store.get(&p).await?.bytes().await?;
                Ok::<usize, object_store::Error>(b.len())
            }
        })
        .buffer_unordered(concurrency)
        .try_collect()
        .await?;
    let bytes: u64 = sizes.iter().map(|s| *s as u64).sum();
    let el = t.elapsed();
    Ok((mib_per_s(bytes, el), bytes, el))
}
