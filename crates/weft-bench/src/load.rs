//! Load drivers shared by the workloads.
//!
//! * [`closed_loop`] — N workers, each issuing one operation at a time and
//!   timing it (latency under a given concurrency).
//! * [`saturate`] — N appenders that never wait for a commit before the
//!   next append; per appender a waiter task awaits the commits in order
//!   (commits are ordered, so in-order waiting loses nothing) and times
//!   each from append call to durable. Backpressure comes from the system
//!   under test and from a bounded window of pending commits.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::stats::Samples;

/// What a closed or saturating run measured.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub ops: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    pub latency: Samples,
}

impl Outcome {
    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn mib_per_s(&self) -> f64 {
        crate::stats::mib_per_s(self.bytes, self.elapsed)
    }
}

/// Runs `workers` loops of `op(worker, iteration)` for `duration` (and at
/// least one operation each). `op` returns the bytes it moved.
pub async fn closed_loop<F, Fut>(workers: usize, duration: Duration, op: F) -> Result<Outcome>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<u64>> + Send + 'static,
{
    let op = Arc::new(op);
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::with_capacity(workers);
    for w in 0..workers {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Outcome::default();
            let mut i = 0u64;
            loop {
                let t = Instant::now();
                out.bytes += op(w, i).await?;
                out.latency.push(t.elapsed());
                out.ops += 1;
                i += 1;
                if Instant::now() >= deadline {
                    break;
                }
            }
            anyhow::Ok(out)
        }));
    }
    let mut total = Outcome::default();
    for t in tasks {
        let o = t.await??;
        total.ops += o.ops;
        total.bytes += o.bytes;
        total.latency.extend(&o.latency);
    }
    total.elapsed = start.elapsed();
    Ok(total)
}

/// A log writer under test: submit a group of records, later wait for its
/// commit.
pub trait Sink: Send + Sync + 'static {
    type Pending: Send + 'static;
    fn submit(&self, records: Vec<Bytes>) -> impl Future<Output = Result<Self::Pending>> + Send;
    fn wait(pending: Self::Pending) -> impl Future<Output = Result<()>> + Send;
}

/// Saturating load: `appenders` tasks append `records_per_append` copies of
/// `record` as fast as the sink accepts them for `duration`; returns the
/// committed bytes over the time to the last commit.
pub async fn saturate<S: Sink>(
    sink: Arc<S>,
    appenders: usize,
    window: usize,
    duration: Duration,
    record: Bytes,
    records_per_append: usize,
) -> Result<Outcome> {
    let start = Instant::now();
    let deadline = start + duration;
    let group_bytes = (record.len() * records_per_append) as u64;
    let mut waiters = Vec::new();
    let mut appending = Vec::new();
    for _ in 0..appenders {
        let (tx, mut rx) = mpsc::channel::<(Instant, S::Pending)>(window.max(1));
        let sink = sink.clone();
        let record = record.clone();
        appending.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let t = Instant::now();
                let p = sink
                    .submit(vec![record.clone(); records_per_append])
                    .await?;
                if tx.send((t, p)).await.is_err() {
                    break;
                }
            }
            anyhow::Ok(())
        }));
        waiters.push(tokio::spawn(async move {
            let mut out = Outcome::default();
            let mut last = start;
            while let Some((t, p)) = rx.recv().await {
                S::wait(p).await?;
                last = Instant::now();
                out.latency.push(last - t);
                out.ops += 1;
                out.bytes += group_bytes;
            }
            out.elapsed = last - start;
            anyhow::Ok(out)
        }));
    }
    for a in appending {
        a.await??;
    }
    let mut total = Outcome::default();
    for w in waiters {
        let o = w.await??;
        total.ops += o.ops;
        total.bytes += o.bytes;
        total.elapsed = total.elapsed.max(o.elapsed);
        total.latency.extend(&o.latency);
    }
    Ok(total)
}

/// A payload of `len` bytes that does not compress (xorshift), so no
/// system gains from the data's shape.
pub fn payload(len: usize, seed: u64) -> Bytes {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    Bytes::from(v)
}
