//! Batched appends per second on the memory backend.
//!
//! `cargo bench -p weft --bench memory` prints, per batch size, the median
//! of several runs. `WEFT_BENCH_QUICK=1` runs one short iteration (CI smoke).

// Benchmarks measure real time: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use weft::{AppendRequest, Log, LogTag};

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

async fn run(batch: usize, entries: usize) -> f64 {
    let log = Log::memory();
    let tags: Vec<LogTag> = (0..16)
        .map(|i| LogTag::with_key("bench", format!("k{i}")).unwrap())
        .collect();
    let payload = bytes::Bytes::from(vec![7u8; 100]);
    let start = Instant::now();
    let mut written = 0;
    while written < entries {
        let reqs = (0..batch)
            .map(|i| AppendRequest::new(tags[(written + i) % tags.len()].clone(), payload.clone()))
            .collect();
        log.append_batch(reqs).await.unwrap();
        written += batch;
    }
    written as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let quick = std::env::var_os("WEFT_BENCH_QUICK").is_some();
    let (runs, entries) = if quick { (1, 2_000) } else { (7, 200_000) };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("memory backend, 100-byte entries, {entries} per run, median of {runs} runs");
    println!("{:>6} {:>14}", "batch", "appends/s");
    for batch in [1usize, 16, 256] {
        let rates: Vec<f64> = (0..runs)
            .map(|_| rt.block_on(run(batch, entries)))
            .collect();
        println!("{batch:>6} {:>14.0}", median(rates));
    }
}
