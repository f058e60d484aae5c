//! A fault-injecting `ObjectStore` wrapper for tests and simulation.
//!
//! [`FaultStore`] stacks over any store and, per request, may add latency,
//! fail cleanly (nothing written), answer 409, answer 412 to a conditional
//! put (a "412 storm"), or leave the caller unsure what happened (an
//! *ambiguous* failure, reported as a timeout):
//!
//! * `ambiguous` — the request is performed, then a timeout is reported at
//!   once;
//! * `hang` — the request is performed, then the caller hears nothing until
//!   [`FaultConfig::hang_for`] has passed and gets a timeout;
//! * `lost` — the request never reaches the store, and the caller hangs the
//!   same way (a timeout that did not land);
//! * `late` — the caller hangs and gets its timeout, and the write reaches
//!   the store only afterwards ([`FaultConfig::late_by`] after the timeout),
//!   as a request a server was still working on when the client gave up.
//!   Puts and deletes only; other requests treat it like `lost`.
//! * `resent` — the put is performed, and the caller is answered as
//!   object_store answers a request it resent after a 5xx whose first copy
//!   had landed: a conditional put gets 412 (the resend lost to its own
//!   first copy), an unconditional one succeeds.
//!
//! Every put under a chosen path prefix can also be made to fail.
//!
//! Latency is drawn per request, so concurrent requests complete in a
//! seeded order that differs from the order they were issued in: that is
//! how the wrapper reorders concurrent completions.
//!
//! The injected errors have the same shape as the real ones (see
//! [`outcome`](weft::objects::outcome)): a clean failure is a `Generic` error with
//! no transport error inside (what an unmapped 5xx looks like), a 409 is
//! `AlreadyExists`, a 412 is `Precondition`, a timeout is a `Generic` error
//! wrapping object_store's `HttpError` of kind `Timeout`; so callers are
//! tested on the classification they use in production. (This crate turns
//! on weft's `aws` feature, so weft's classification knows that error.)
//!
//! Decisions are deterministic: each one is drawn from an RNG seeded by
//! `(seed, operation, path, how many times this operation ran on this
//! path)`, so the same seed makes the same decisions for the same requests
//! regardless of how concurrent requests on different paths interleave.
//! Latency uses `weft::clock::sleep` (tokio's timer), so a paused tokio
//! clock controls it.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::client::{HttpError, HttpErrorKind};
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

const STORE: &str = "fault";

/// Fault probabilities of one kind of request. Probabilities are in
/// `0.0..=1.0` and checked in the order the fields are listed; the first
/// that fires decides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OpFaults {
    /// Fail before touching the inner store (an unmapped 5xx).
    pub error: f64,
    /// Answer 409 Conflict before touching the inner store.
    pub conflict_409: f64,
    /// Perform the request on the inner store, then report a timeout.
    pub ambiguous: f64,
    /// Perform the request, then hang for [`FaultConfig::hang_for`] before
    /// reporting a timeout (the caller hears nothing in between).
    pub hang: f64,
    /// Drop the request without performing it, hang for
    /// [`FaultConfig::hang_for`], then report a timeout.
    pub lost: f64,
    /// Hang for [`FaultConfig::hang_for`] and report a timeout, then
    /// perform the write [`FaultConfig::late_by`] later.
    pub late: f64,
    /// Puts only: perform the request, then answer as a resend of it would
    /// (412 for a conditional put).
    pub resent: f64,
    /// Chance of adding latency to a request.
    pub latency: f64,
    /// Added latency is uniform in `latency_min..=latency_max`.
    pub latency_min: Duration,
    /// Upper bound of added latency.
    pub latency_max: Duration,
}

/// What [`FaultStore`] injects. Plain data (serde-able); all zero = a
/// transparent wrapper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultConfig {
    /// Seed of every decision.
    pub seed: u64,
    /// Faults of `put` / `put_opts` (all modes).
    pub put: OpFaults,
    /// Faults of `get` / `get_opts` / `head`.
    pub get: OpFaults,
    /// Faults of `delete`.
    pub delete: OpFaults,
    /// Faults of `list` and `list_with_delimiter` (errors and latency only).
    pub list: OpFaults,
    /// Chance that a conditional put (`Create` or `Update`) is answered with
    /// 412 Precondition Failed without being attempted.
    pub precondition_storm: f64,
    /// Every put whose path starts with one of these prefixes fails cleanly.
    pub fail_put_prefixes: Vec<String>,
    /// Every get (and head) whose path starts with one of these prefixes
    /// fails cleanly.
    pub fail_get_prefixes: Vec<String>,
    /// How long a `hang` or `lost` request keeps its caller waiting before
    /// the timeout (default 30 s, a typical client request timeout).
    pub hang_for: Duration,
    /// How long after its caller's timeout a `late` write lands (default
    /// 1 s).
    pub late_by: Duration,
}

/// The default of [`FaultConfig::hang_for`].
pub const DEFAULT_HANG: Duration = Duration::from_secs(30);

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            seed: 0,
            put: OpFaults::default(),
            get: OpFaults::default(),
            delete: OpFaults::default(),
            list: OpFaults::default(),
            precondition_storm: 0.0,
            fail_put_prefixes: Vec::new(),
            fail_get_prefixes: Vec::new(),
            hang_for: DEFAULT_HANG,
            late_by: Duration::from_secs(1),
        }
    }
}

/// Counts of injected faults, for assertions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Clean errors injected.
    pub errors: u64,
    /// 409s injected.
    pub conflicts_409: u64,
    /// 412s injected.
    pub preconditions: u64,
    /// Requests performed and then reported as timed out at once.
    pub ambiguous: u64,
    /// Requests performed, then left hanging until a timeout.
    pub hung: u64,
    /// Requests dropped without being performed, then timed out.
    pub lost: u64,
    /// Writes performed only after their caller timed out.
    pub late: u64,
    /// Puts performed and then answered as their resend would be.
    pub resent: u64,
    /// Requests delayed.
    pub delayed: u64,
    /// Puts and gets refused by a failing prefix.
    pub prefix_failures: u64,
}

/// The error source of every injected fault.
#[derive(Debug, Clone)]
pub struct InjectedFault {
    what: &'static str,
    path: String,
}

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "injected fault: {} on {}", self.what, self.path)
    }
}

impl std::error::Error for InjectedFault {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Put,
    Get,
    Delete,
    List,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Pass,
    Error,
    Conflict409,
    Precondition,
    Ambiguous,
    Hang,
    Lost,
    Late,
    Resent,
}

#[derive(Debug, Default)]
struct Counters {
    errors: AtomicU64,
    conflicts_409: AtomicU64,
    preconditions: AtomicU64,
    ambiguous: AtomicU64,
    hung: AtomicU64,
    lost: AtomicU64,
    late: AtomicU64,
    resent: AtomicU64,
    delayed: AtomicU64,
    prefix_failures: AtomicU64,
}

#[derive(Debug)]
struct State {
    config: FaultConfig,
    calls: HashMap<(Op, String), u64>,
}

/// An `ObjectStore` that injects faults into requests to `inner`.
#[derive(Debug)]
pub struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    state: Mutex<State>,
    counters: Counters,
}

impl fmt::Display for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultStore({})", self.inner)
    }
}

impl FaultStore {
    /// Wraps `inner` with the faults of `config`.
    pub fn new(inner: Arc<dyn ObjectStore>, config: FaultConfig) -> Self {
        FaultStore {
            inner,
            state: Mutex::new(State {
                config,
                calls: HashMap::new(),
            }),
            counters: Counters::default(),
        }
    }

    /// Wraps `inner` with the faults of `config`, as a shareable handle.
    pub fn wrap(inner: Arc<dyn ObjectStore>, config: FaultConfig) -> Arc<Self> {
        Arc::new(FaultStore::new(inner, config))
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    /// Replaces the configuration (the per-path call counts are kept, so
    /// decisions stay a function of the request history).
    pub fn set_config(&self, config: FaultConfig) {
        self.lock().config = config;
    }

    /// The current configuration.
    pub fn config(&self) -> FaultConfig {
        self.lock().config.clone()
    }

    /// Makes every put under `prefix` fail cleanly from now on.
    pub fn fail_puts_under(&self, prefix: impl Into<String>) {
        self.lock().config.fail_put_prefixes.push(prefix.into());
    }

    /// Stops failing puts by prefix.
    pub fn clear_put_failures(&self) {
        self.lock().config.fail_put_prefixes.clear();
    }

    /// Makes every get and head under `prefix` fail cleanly from now on.
    pub fn fail_gets_under(&self, prefix: impl Into<String>) {
        self.lock().config.fail_get_prefixes.push(prefix.into());
    }

    /// Stops failing gets by prefix.
    pub fn clear_get_failures(&self) {
        self.lock().config.fail_get_prefixes.clear();
    }

    /// How many faults were injected so far.
    pub fn stats(&self) -> FaultStats {
        let c = &self.counters;
        FaultStats {
            errors: c.errors.load(Ordering::Relaxed),
            conflicts_409: c.conflicts_409.load(Ordering::Relaxed),
            preconditions: c.preconditions.load(Ordering::Relaxed),
            ambiguous: c.ambiguous.load(Ordering::Relaxed),
            hung: c.hung.load(Ordering::Relaxed),
            lost: c.lost.load(Ordering::Relaxed),
            late: c.late.load(Ordering::Relaxed),
            resent: c.resent.load(Ordering::Relaxed),
            delayed: c.delayed.load(Ordering::Relaxed),
            prefix_failures: c.prefix_failures.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State inconsistent
        // (every update is a single assignment), so a poisoned lock is used.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decides the fate of one request and sleeps its latency.
    async fn decide(&self, op: Op, path: &Path, conditional: bool) -> Decision {
        let (decision, delay) = self.draw(op, path, conditional);
        if let Some(delay) = delay {
            self.counters.delayed.fetch_add(1, Ordering::Relaxed);
            weft::clock::sleep(delay).await;
        }
        let counter = match decision {
            Decision::Pass => None,
            Decision::Error => Some(&self.counters.errors),
            Decision::Conflict409 => Some(&self.counters.conflicts_409),
            Decision::Precondition => Some(&self.counters.preconditions),
            Decision::Ambiguous => Some(&self.counters.ambiguous),
            Decision::Hang => Some(&self.counters.hung),
            Decision::Lost => Some(&self.counters.lost),
            Decision::Late => Some(&self.counters.late),
            Decision::Resent => Some(&self.counters.resent),
        };
        if let Some(c) = counter {
            c.fetch_add(1, Ordering::Relaxed);
        }
        decision
    }

    /// Draws the decision and the latency of one request.
    fn draw(&self, op: Op, path: &Path, conditional: bool) -> (Decision, Option<Duration>) {
        let mut state = self.lock();
        let key = (op, path.to_string());
        let n = {
            let count = state.calls.entry(key).or_insert(0);
            *count += 1;
            *count - 1
        };
        let cfg = &state.config;
        let faults = match op {
            Op::Put => &cfg.put,
            Op::Get => &cfg.get,
            Op::Delete => &cfg.delete,
            Op::List => &cfg.list,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(mix(cfg.seed, op, path.as_ref(), n));
        let delay = latency(faults, &mut rng);
        let failing = match op {
            Op::Put => cfg.fail_put_prefixes.as_slice(),
            Op::Get => cfg.fail_get_prefixes.as_slice(),
            Op::Delete | Op::List => &[],
        };
        let prefixed = failing
            .iter()
            .any(|p| path.as_ref().starts_with(p.as_str()));
        let decision = if prefixed {
            self.counters
                .prefix_failures
                .fetch_add(1, Ordering::Relaxed);
            Decision::Error
        } else if chance(&mut rng, faults.error) {
            Decision::Error
        } else if op != Op::List && chance(&mut rng, faults.conflict_409) {
            Decision::Conflict409
        } else if conditional && chance(&mut rng, cfg.precondition_storm) {
            Decision::Precondition
        } else if op != Op::List && chance(&mut rng, faults.ambiguous) {
            Decision::Ambiguous
        } else if op != Op::List && chance(&mut rng, faults.hang) {
            Decision::Hang
        } else if op != Op::List && chance(&mut rng, faults.lost) {
            Decision::Lost
        } else if op != Op::List && chance(&mut rng, faults.late) {
            if matches!(op, Op::Put | Op::Delete) {
                Decision::Late
            } else {
                Decision::Lost
            }
        } else if op == Op::Put && chance(&mut rng, faults.resent) {
            Decision::Resent
        } else {
            Decision::Pass
        };
        (decision, delay)
    }

    /// Runs a request under `decision`: refused ones never reach `inner`;
    /// ambiguous, hanging and lost ones end in a timeout whatever happened.
    async fn perform<T, F>(
        &self,
        decision: Decision,
        path: &Path,
        request: F,
    ) -> object_store::Result<T>
    where
        F: Future<Output = object_store::Result<T>>,
    {
        if let Some(e) = refused(decision, path) {
            return Err(e);
        }
        // `perform` is not used for late puts and deletes; for everything
        // else a late request is a lost one.
        if matches!(decision, Decision::Lost | Decision::Late) {
            weft::clock::sleep(self.hang_for()).await;
            return Err(timeout(path));
        }
        let result = request.await;
        match decision {
            // The request (or its own failure) happened; the caller hears
            // nothing about it.
            Decision::Ambiguous => Err(timeout(path)),
            Decision::Hang => {
                weft::clock::sleep(self.hang_for()).await;
                Err(timeout(path))
            }
            _ => result,
        }
    }

    fn hang_for(&self) -> Duration {
        self.lock().config.hang_for
    }

    /// A `late` write: the caller waits out its timeout while `write` is
    /// held back, and the write runs `late_by` after the timeout, on its
    /// own task (the caller has long given up on it).
    async fn late<T: Send + 'static>(
        &self,
        path: &Path,
        write: impl Future<Output = object_store::Result<T>> + Send + 'static,
    ) -> object_store::Result<T> {
        let (hang, late_by) = {
            let state = self.lock();
            (state.config.hang_for, state.config.late_by)
        };
        tokio::spawn(async move {
            weft::clock::sleep(hang + late_by).await;
            let _ = write.await;
        });
        weft::clock::sleep(hang).await;
        Err(timeout(path))
    }
}

fn chance(rng: &mut impl Rng, p: f64) -> bool {
    // Always draw, so one probability's value does not shift later draws.
    let x: f64 = rng.random();
    x < p.clamp(0.0, 1.0)
}

fn latency(f: &OpFaults, rng: &mut impl Rng) -> Option<Duration> {
    if !chance(rng, f.latency) {
        return None;
    }
    let lo = f.latency_min.min(f.latency_max).as_nanos() as u64;
    let hi = f.latency_max.max(f.latency_min).as_nanos() as u64;
    Some(Duration::from_nanos(rng.random_range(lo..=hi)))
}

/// A stable (FNV-1a) mix of the decision key; `DefaultHasher` is not
/// guaranteed stable across Rust releases.
fn mix(seed: u64, op: Op, path: &str, n: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(&seed.to_le_bytes());
    eat(&[op as u8]);
    eat(path.as_bytes());
    eat(&n.to_le_bytes());
    h
}

fn fault(what: &'static str, path: &Path) -> InjectedFault {
    InjectedFault {
        what,
        path: path.to_string(),
    }
}

fn clean_error(path: &Path) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: Box::new(fault("server error", path)),
    }
}

fn conflict_409(path: &Path) -> object_store::Error {
    object_store::Error::AlreadyExists {
        path: path.to_string(),
        source: Box::new(fault("409 conflict", path)),
    }
}

fn precondition(path: &Path) -> object_store::Error {
    object_store::Error::Precondition {
        path: path.to_string(),
        source: Box::new(fault("412 precondition failed", path)),
    }
}

fn timeout(path: &Path) -> object_store::Error {
    let cause = fault("timeout after the request was sent", path);
    let source = Box::new(HttpError::new(HttpErrorKind::Timeout, cause));
    object_store::Error::Generic {
        store: STORE,
        source,
    }
}

/// The error of a decision that does not reach the inner store.
fn refused(decision: Decision, path: &Path) -> Option<object_store::Error> {
    match decision {
        Decision::Error => Some(clean_error(path)),
        Decision::Conflict409 => Some(conflict_409(path)),
        Decision::Precondition => Some(precondition(path)),
        Decision::Pass
        | Decision::Ambiguous
        | Decision::Hang
        | Decision::Lost
        | Decision::Late
        | Decision::Resent => None,
    }
}

#[async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let conditional = !matches!(opts.mode, PutMode::Overwrite);
        let decision = self.decide(Op::Put, location, conditional).await;
        if decision == Decision::Resent {
            let landed = self.inner.put_opts(location, payload, opts).await;
            return match landed {
                Ok(_) if conditional => Err(precondition(location)),
                other => other,
            };
        }
        if decision == Decision::Late {
            let (inner, path) = (self.inner.clone(), location.clone());
            let write = async move { inner.put_opts(&path, payload, opts).await };
            return self.late(location, write).await;
        }
        self.perform(
            decision,
            location,
            self.inner.put_opts(location, payload, opts),
        )
        .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let decision = self.decide(Op::Put, location, false).await;
        self.perform(
            decision,
            location,
            self.inner.put_multipart_opts(location, opts),
        )
        .await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let decision = self.decide(Op::Get, location, false).await;
        self.perform(decision, location, self.inner.get_opts(location, options))
            .await
    }

    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        let decision = self.decide(Op::Delete, location, false).await;
        if decision == Decision::Late {
            let (inner, path) = (self.inner.clone(), location.clone());
            let write = async move { inner.delete(&path).await };
            return self.late(location, write).await;
        }
        self.perform(decision, location, self.inner.delete(location))
            .await
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        // `list` is synchronous, so latency cannot be slept here; only the
        // error decision applies (drawn without the latency wait).
        let path = prefix.cloned().unwrap_or_default();
        let fail = {
            let mut state = self.lock();
            let n = {
                let count = state.calls.entry((Op::List, path.to_string())).or_insert(0);
                *count += 1;
                *count - 1
            };
            let mut rng =
                ChaCha8Rng::seed_from_u64(mix(state.config.seed, Op::List, path.as_ref(), n));
            let _ = latency(&state.config.list, &mut rng);
            chance(&mut rng, state.config.list.error)
        };
        if fail {
            self.counters.errors.fetch_add(1, Ordering::Relaxed);
            return futures::stream::once(async move { Err(clean_error(&path)) }).boxed();
        }
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let path = prefix.cloned().unwrap_or_default();
        let decision = self.decide(Op::List, &path, false).await;
        self.perform(decision, &path, self.inner.list_with_delimiter(prefix))
            .await
    }

    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        let decision = self.decide(Op::Put, to, false).await;
        self.perform(decision, to, self.inner.copy(from, to)).await
    }

    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        let decision = self.decide(Op::Put, to, true).await;
        self.perform(decision, to, self.inner.copy_if_not_exists(from, to))
            .await
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // measures tokio's paused time
mod tests {
    use object_store::memory::InMemory;

    use super::*;
    use weft::objects::outcome::{Outcome, StoreOp, classify_result};

    fn store(config: FaultConfig) -> (Arc<InMemory>, FaultStore) {
        let inner = Arc::new(InMemory::new());
        let faults = FaultStore::new(inner.clone(), config);
        (inner, faults)
    }

    async fn run(seed: u64) -> Vec<Outcome> {
        let (_, s) = store(FaultConfig {
            seed,
            put: OpFaults {
                error: 0.2,
                conflict_409: 0.1,
                ambiguous: 0.2,
                ..OpFaults::default()
            },
            precondition_storm: 0.2,
            ..FaultConfig::default()
        });
        let mut out = Vec::new();
        for i in 0..200 {
            let path = Path::from(format!("k/{}", i % 7));
            let r = s.put_opts(&path, "x".into(), PutOptions::default()).await;
            out.push(classify_result(StoreOp::Put, &r));
        }
        out
    }

    #[tokio::test]
    async fn same_seed_same_decisions() {
        let a = run(11).await;
        assert_eq!(a, run(11).await);
        assert_ne!(a, run(12).await);
        assert!(a.contains(&Outcome::Committed));
        assert!(a.contains(&Outcome::Transient));
        assert!(a.contains(&Outcome::Ambiguous));
    }

    #[tokio::test]
    async fn ambiguous_puts_land_but_report_a_timeout() {
        let (inner, s) = store(FaultConfig {
            put: OpFaults {
                ambiguous: 1.0,
                ..OpFaults::default()
            },
            ..FaultConfig::default()
        });
        let path = Path::from("seg/1");
        let r = s.put(&path, "data".into()).await;
        assert_eq!(classify_result(StoreOp::Put, &r), Outcome::Ambiguous);
        let got = inner.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(&got[..], b"data");
        assert_eq!(s.stats().ambiguous, 1);
    }

    #[tokio::test]
    async fn clean_errors_and_409s_do_not_write() {
        for (faults, expect) in [
            (
                OpFaults {
                    error: 1.0,
                    ..OpFaults::default()
                },
                Outcome::Transient,
            ),
            (
                OpFaults {
                    conflict_409: 1.0,
                    ..OpFaults::default()
                },
                Outcome::Transient,
            ),
        ] {
            let (inner, s) = store(FaultConfig {
                put: faults,
                ..FaultConfig::default()
            });
            let path = Path::from("seg/1");
            let r = s.put(&path, "data".into()).await;
            assert_eq!(classify_result(StoreOp::Put, &r), expect);
            assert!(inner.head(&path).await.is_err(), "nothing was written");
        }
    }

    #[tokio::test]
    async fn precondition_storms_hit_only_conditional_puts() {
        let (_, s) = store(FaultConfig {
            precondition_storm: 1.0,
            ..FaultConfig::default()
        });
        let path = Path::from("manifest");
        s.put(&path, "plain".into()).await.unwrap();
        let r = s
            .put_opts(&Path::from("other"), "c".into(), PutMode::Create.into())
            .await;
        assert_eq!(
            classify_result(StoreOp::CreateIfAbsent, &r),
            Outcome::Conflict
        );
        assert_eq!(s.stats().preconditions, 1);
    }

    #[tokio::test]
    async fn failing_prefix_switch() {
        let (inner, s) = store(FaultConfig::default());
        s.fail_puts_under("wal/seg/");
        let r = s.put(&Path::from("wal/seg/a"), "x".into()).await;
        assert_eq!(classify_result(StoreOp::Put, &r), Outcome::Transient);
        s.put(&Path::from("wal/manifest"), "m".into())
            .await
            .unwrap();
        assert!(inner.head(&Path::from("wal/seg/a")).await.is_err());
        s.clear_put_failures();
        s.put(&Path::from("wal/seg/a"), "x".into()).await.unwrap();
        assert_eq!(s.stats().prefix_failures, 1);
        s.fail_gets_under("wal/seg/");
        let r = s.get(&Path::from("wal/seg/a")).await;
        assert_eq!(classify_result(StoreOp::Read, &r), Outcome::Transient);
        s.get(&Path::from("wal/manifest")).await.unwrap();
        s.clear_get_failures();
        s.get(&Path::from("wal/seg/a")).await.unwrap();
        assert_eq!(s.stats().prefix_failures, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn latency_follows_the_paused_clock() {
        let (_, s) = store(FaultConfig {
            get: OpFaults {
                latency: 1.0,
                latency_min: Duration::from_secs(5),
                latency_max: Duration::from_secs(5),
                ..OpFaults::default()
            },
            ..FaultConfig::default()
        });
        s.inner().put(&Path::from("a"), "x".into()).await.unwrap();
        let start = tokio::time::Instant::now();
        s.get(&Path::from("a")).await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        assert_eq!(s.stats().delayed, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn hanging_writes_land_and_answer_only_after_the_hang() {
        let (inner, s) = store(FaultConfig {
            put: OpFaults {
                hang: 1.0,
                ..OpFaults::default()
            },
            hang_for: Duration::from_secs(12),
            ..FaultConfig::default()
        });
        let path = Path::from("seg/1");
        let start = tokio::time::Instant::now();
        let mut put = Box::pin(s.put(&path, "data".into()));
        // The write lands while the caller is still waiting for an answer.
        tokio::select! {
            _ = &mut put => panic!("a hanging put answered early"),
            _ = weft::clock::sleep(Duration::from_secs(11)) => {}
        }
        assert!(inner.head(&path).await.is_ok(), "the write landed");
        let r = put.await;
        assert_eq!(start.elapsed(), Duration::from_secs(12));
        assert_eq!(classify_result(StoreOp::Put, &r), Outcome::Ambiguous);
        assert_eq!(s.stats().hung, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn lost_writes_time_out_without_landing() {
        let (inner, s) = store(FaultConfig {
            put: OpFaults {
                lost: 1.0,
                ..OpFaults::default()
            },
            ..FaultConfig::default()
        });
        let path = Path::from("seg/1");
        let start = tokio::time::Instant::now();
        let r = s.put(&path, "data".into()).await;
        assert_eq!(start.elapsed(), DEFAULT_HANG);
        assert_eq!(classify_result(StoreOp::Put, &r), Outcome::Ambiguous);
        assert!(inner.head(&path).await.is_err(), "nothing was written");
        assert_eq!(s.stats().lost, 1);
    }

    /// Issues `n` concurrent puts and returns the order they completed in.
    async fn completion_order(seed: u64, n: usize) -> Vec<usize> {
        let (_, s) = store(FaultConfig {
            seed,
            put: OpFaults {
                latency: 1.0,
                latency_min: Duration::from_millis(1),
                latency_max: Duration::from_millis(100),
                ..OpFaults::default()
            },
            ..FaultConfig::default()
        });
        let s = Arc::new(s);
        let done = Arc::new(Mutex::new(Vec::new()));
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let (s, done) = (s.clone(), done.clone());
                tokio::spawn(async move {
                    s.put(&Path::from(format!("k/{i}")), "x".into())
                        .await
                        .unwrap();
                    done.lock().unwrap().push(i);
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        done.lock().unwrap().clone()
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn seeded_latency_reorders_concurrent_completions_the_same_way() {
        let a = completion_order(4, 16).await;
        assert_ne!(a, (0..16).collect::<Vec<_>>(), "completions were reordered");
        assert_eq!(a, completion_order(4, 16).await, "same seed, same order");
        assert_ne!(a, completion_order(5, 16).await);
    }

    #[tokio::test(start_paused = true)]
    async fn late_writes_land_after_the_callers_timeout() {
        let (inner, s) = store(FaultConfig {
            put: OpFaults {
                late: 1.0,
                ..OpFaults::default()
            },
            hang_for: Duration::from_secs(2),
            late_by: Duration::from_secs(3),
            ..FaultConfig::default()
        });
        let path = Path::from("manifest");
        let start = tokio::time::Instant::now();
        let r = s.put(&path, "late".into()).await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        assert_eq!(classify_result(StoreOp::Put, &r), Outcome::Ambiguous);
        weft::clock::sleep(Duration::from_millis(2_999)).await;
        assert!(inner.head(&path).await.is_err(), "not yet");
        weft::clock::sleep(Duration::from_millis(2)).await;
        let got = inner.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(&got[..], b"late", "landed after the caller gave up");
        assert_eq!(s.stats().late, 1);
    }

    #[test]
    fn config_is_plain_serde_data() {
        let cfg = FaultConfig {
            seed: 3,
            precondition_storm: 0.5,
            fail_put_prefixes: vec!["x/".into()],
            ..FaultConfig::default()
        };
        let json = serde_json::to_string(&cfg).unwrap();
        let back: FaultConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, cfg);
        let partial: FaultConfig = serde_json::from_str(r#"{"seed": 9}"#).unwrap();
        assert_eq!(partial.seed, 9);
        assert_eq!(partial.hang_for, DEFAULT_HANG);
    }
}
