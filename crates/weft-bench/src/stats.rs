//! Latency samples and the summaries the report prints.

use std::time::Duration;

use serde::Serialize;

/// Latency samples in milliseconds.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    ms: Vec<f64>,
}

impl Samples {
    pub fn new() -> Self {
        Samples::default()
    }

    pub fn push(&mut self, d: Duration) {
        self.ms.push(d.as_secs_f64() * 1e3);
    }

    pub fn extend(&mut self, other: &Samples) {
        self.ms.extend_from_slice(&other.ms);
    }

    pub fn values(&self) -> &[f64] {
        &self.ms
    }

    pub fn summary(&self) -> Option<Latency> {
        if self.ms.is_empty() {
            return None;
        }
        let mut v = self.ms.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        Some(Latency {
            n: v.len(),
            p50: quantile(&v, 0.50),
            p99: quantile(&v, 0.99),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            max: v[v.len() - 1],
        })
    }
}

/// A latency summary, in milliseconds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Latency {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub mean: f64,
    pub max: f64,
}

/// Nearest-rank quantile of sorted values.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median of `xs` (the lower middle for an even count).
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    v[(v.len() - 1) / 2]
}

pub const MIB: f64 = 1024.0 * 1024.0;

/// Bytes over a duration, in MiB/s.
pub fn mib_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / MIB / d.as_secs_f64().max(1e-9)
}
