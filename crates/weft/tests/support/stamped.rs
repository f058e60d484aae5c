//! A store for tests on a paused clock: it stamps every object with
//! simulated time (the store's own `last_modified`, which GC compares) and
//! checks, at the instant each write lands, the promise retention GC makes:
//! a manifest that lands references only objects that exist, and a delete
//! that lands removes nothing the current manifest references. A v5
//! manifest's references include its live history: the stamper decodes
//! every history page as it lands and expands the tree on its own (every
//! page that ends after the first live sequence, and the segments of the
//! live entries those pages hold).

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use tokio::time::Instant;
use weft::clock::Clock;
use weft::format::history::{PageItems, decode_page};
use weft::wal::Manifest;

/// Wall-clock time of the simulated world's start.
pub const EPOCH_MS: u64 = 1_700_000_000_000;

/// Simulated wall-clock time: the world's start plus the paused clock's
/// elapsed time (the stamps, the writers and GC all read it).
#[derive(Debug)]
pub struct SimClock {
    start: Instant,
}

impl SimClock {
    /// A clock starting at [`EPOCH_MS`] now.
    pub fn new() -> Self {
        SimClock {
            start: Instant::now(),
        }
    }
}

impl Clock for SimClock {
    fn now_ms(&self) -> u64 {
        EPOCH_MS + self.start.elapsed().as_millis() as u64
    }
}

/// Below the faults: stamps objects in simulated time and checks the GC
/// promise at the instant each write lands.
#[derive(Debug)]
pub struct Stamper {
    inner: Arc<dyn ObjectStore>,
    clock: Arc<SimClock>,
    manifest: Path,
    state: Mutex<StamperState>,
}

#[derive(Debug, Default)]
struct StamperState {
    stamps: HashMap<String, i64>,
    /// Every history page that landed, decoded.
    pages: HashMap<String, PageItems>,
    /// History pages some landed manifest named.
    pages_named: BTreeSet<String>,
    /// What the current manifest references.
    referenced: BTreeSet<String>,
    manifests: usize,
    deleted: Vec<String>,
    violations: Vec<String>,
}

impl Stamper {
    /// Stamps and checks `inner`.
    pub fn new(inner: Arc<dyn ObjectStore>, clock: Arc<SimClock>, manifest: &str) -> Self {
        Stamper {
            inner,
            clock,
            manifest: Path::from(manifest),
            state: Mutex::new(StamperState::default()),
        }
    }

    /// Everything found wrong so far.
    pub fn violations(&self) -> Vec<String> {
        self.state.lock().unwrap().violations.clone()
    }

    /// Objects deleted so far.
    pub fn deleted(&self) -> Vec<String> {
        self.state.lock().unwrap().deleted.clone()
    }

    /// History pages some landed manifest named, so far.
    pub fn pages_named(&self) -> usize {
        self.state.lock().unwrap().pages_named.len()
    }

    /// History pages deleted so far.
    pub fn pages_deleted(&self) -> usize {
        let state = self.state.lock().unwrap();
        state
            .deleted
            .iter()
            .filter(|d| d.contains("/history/"))
            .count()
    }

    /// Manifest states that landed so far.
    pub fn manifests(&self) -> usize {
        self.state.lock().unwrap().manifests
    }

    fn stamp(&self, meta: &mut ObjectMeta) {
        if let Some(ms) = self
            .state
            .lock()
            .unwrap()
            .stamps
            .get(meta.location.as_ref())
        {
            meta.last_modified = chrono::DateTime::from_timestamp_millis(*ms).expect("in range");
        }
    }

    /// A write of `location` landed with `bytes`.
    fn landed(&self, location: &Path, bytes: &Bytes) {
        let now = self.clock.now_ms() as i64;
        let mut state = self.state.lock().unwrap();
        state.stamps.insert(location.to_string(), now);
        if *location != self.manifest {
            if location.as_ref().contains("/history/")
                && let Ok(page) = decode_page(bytes)
            {
                state.pages.insert(location.to_string(), page.items);
            }
            return;
        }
        state.manifests += 1;
        let m = match Manifest::from_bytes(bytes) {
            Ok(m) => m,
            Err(e) => {
                state
                    .violations
                    .push(format!("a manifest that does not decode landed: {e}"));
                return;
            }
        };
        let mut referenced: BTreeSet<String> = m
            .entries()
            .iter()
            .map(|e| e.location.clone())
            .chain(m.snapshot().map(|s| s.location.clone()))
            .collect();
        if let Some(h) = m.history() {
            // Depth first through the live part of the tree, as stored.
            let mut stack: Vec<(String, u64)> = h
                .pointers()
                .map(|(_, p)| (p.location.clone(), p.end_seq))
                .collect();
            while let Some((location, end)) = stack.pop() {
                if end <= h.live_from {
                    continue;
                }
                referenced.insert(location.clone());
                state.pages_named.insert(location.clone());
                match state.pages.get(&location) {
                    Some(PageItems::Entries(es)) => referenced.extend(
                        es.iter()
                            .filter(|e| e.end_sequence() > h.live_from)
                            .map(|e| e.location.clone()),
                    ),
                    Some(PageItems::Pointers(ps)) => {
                        stack.extend(ps.iter().map(|p| (p.location.clone(), p.end_seq)))
                    }
                    // Reported below as a reference to a missing object.
                    None => {}
                }
            }
        }
        for location in &referenced {
            if !state.stamps.contains_key(location) {
                let n = state.manifests;
                let deleted = state.deleted.contains(location);
                state.violations.push(format!(
                    "manifest state {n} (epoch {}) references {location}, which does not exist \
                     (deleted: {deleted})",
                    m.epoch(),
                ));
            }
        }
        state.referenced = referenced;
    }

    /// A delete of `location` is about to land.
    fn deleting(&self, location: &Path) {
        let mut state = self.state.lock().unwrap();
        if state.referenced.contains(location.as_ref()) {
            state.violations.push(format!(
                "{location} was deleted while the current manifest references it"
            ));
        }
        state.pages.remove(location.as_ref());
        if state.stamps.remove(location.as_ref()).is_some() {
            state.deleted.push(location.to_string());
        }
    }
}

impl std::fmt::Display for Stamper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stamper({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Stamper {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let bytes: Bytes = payload.clone().into();
        let result = self.inner.put_opts(location, payload, opts).await;
        if result.is_ok() {
            self.landed(location, &bytes);
        }
        result
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let mut got = self.inner.get_opts(location, options).await?;
        self.stamp(&mut got.meta);
        Ok(got)
    }
    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        self.deleting(location);
        self.inner.delete(location).await
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        // The in-memory store's listing is ready at once; collect it now so
        // the stamps are those of this instant.
        let listed: Vec<object_store::Result<ObjectMeta>> =
            futures::executor::block_on(futures::StreamExt::collect(self.inner.list(prefix)));
        let stamped: Vec<_> = listed
            .into_iter()
            .map(|r| {
                r.map(|mut meta| {
                    self.stamp(&mut meta);
                    meta
                })
            })
            .collect();
        Box::pin(futures::stream::iter(stamped))
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let mut listed = self.inner.list_with_delimiter(prefix).await?;
        for meta in &mut listed.objects {
            self.stamp(meta);
        }
        Ok(listed)
    }
    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy(from, to).await
    }
    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }
}
