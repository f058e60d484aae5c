//! Retention GC: deletes the objects of a log that no manifest references
//! any more — segments whose entries were truncated, superseded snapshots,
//! uploads a fenced or crashed writer never committed — once they are older
//! than a grace period.
//!
//! # What a pass does
//!
//! 1. Read the manifest (a missing or unreadable manifest stops the pass
//!    before anything is listed: no manifest means nothing is known to be
//!    garbage).
//! 2. List the segment, snapshot and history prefixes.
//! 3. Read the manifest again, *after* the listing, and decide on that copy:
//!    anything committed before the listing finished is seen as referenced.
//!    A v5 manifest's references include everything its history pages
//!    hold: GC walks the live part of the tree (every page that ends after
//!    the first live sequence) and counts the live entries' segments and
//!    the pages themselves as referenced.
//! 4. Just before deleting, read it once more (a conditional GET); if it
//!    changed, decide again on the new copy and delete only what both
//!    decisions call garbage.
//!
//! # The rules, per listed object
//!
//! * **Referenced** by the manifest (an entry's segment, the snapshot
//!   pointer, a live history page, a segment of a live entry a history
//!   page holds): kept.
//! * **Unrecognised** (a name that is not `<segment prefix>/<run ULID>/
//!   <ordinal:016x>`, `<snapshot prefix>/<through:016x>-<ULID>` or
//!   `<history prefix>/<level:02x>-<first:016x>-<end:016x>-<run ULID>`):
//!   kept. GC deletes only what it knows the writer made.
//! * **In flight**: the writer that committed the newest entry uploads its
//!   segments under its own run with increasing ordinals and commits them in
//!   ordinal order, so in that run every unreferenced ordinal *above* the
//!   highest committed one may be an upload still waiting for its commit.
//!   It is kept whatever its age. So is every segment of the newest run
//!   (by ULID) that has no committed segment at all and is newer than the
//!   run of the newest entry: the writer that claimed the log last, before
//!   its first commit. Likewise a history page of the newest committer (or
//!   claimant) that reaches past the manifest's history: a checkpoint
//!   stores its pages before the CAS that names them.
//! * Otherwise the object is garbage once `now - last_modified >= grace`;
//!   younger, it is kept (**young**). `now` comes from an injected
//!   [`Clock`], `last_modified` from the store.
//!
//! # Why this is safe
//!
//! *A live manifest never references a deleted object.* Manifests only ever
//! gain locations at the end: a location that a manifest no longer lists
//! (truncated, superseded) never comes back. So the only way a deleted
//! object could become referenced again is a commit of an upload that GC
//! saw unreferenced — an upload in flight. Such an upload is protected
//! three times: by the in-flight rules while its writer is the newest
//! committer or the newest claimant, by the grace period (a writer commits
//! within seconds of uploading: one CAS with bounded retries), and by the
//! listing order (an upload committed before step 3 is referenced).
//!
//! *A zombie writer.* A writer that was fenced can still finish an upload
//! late, but it can never commit it: its next manifest CAS names a version
//! of the manifest that the new writer already replaced, and a reload shows
//! it a newer epoch. Its late object is unreferenced forever; its
//! `last_modified` is the time it landed, so it is collected one grace
//! period after that — never before it landed, since GC acts only on what
//! it listed.
//!
//! *Readers.* A replica may hold an older copy of the manifest that still
//! lists a truncated segment, and find it deleted. It only needed that
//! segment if its cursor was in the truncated part, which the fresh
//! manifest reports as `Trimmed` anyway; the replica re-reads the manifest
//! on a missing object and reports exactly that (and follows the newer
//! pointer for a superseded snapshot). No reader ever applies wrong data.
//!
//! The grace period must exceed the longest time any writer can take from
//! finishing a segment upload to committing it (the producer's retry
//! policy bounds one commit to seconds; the default grace is an hour). With
//! clocks skewed so much that a live writer's run id sorts before an older
//! writer's, that bound is what protects its first uncommitted upload.
//!
//! A dry run makes the same decisions and deletes nothing.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{GetOptions, ObjectMeta, ObjectStore};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};
use ulid::Ulid;

use super::history::{self, HistoryReader, parse_page_name};
use super::snapshot;
use crate::clock::{self, Clock};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{ManifestData, decode_manifest};
use crate::store::{Outcome, RetryPolicy, StoreOp, classify, retry_store, to_error};

/// What kind of object GC looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// A segment under the segment prefix.
    Segment,
    /// A snapshot under the snapshot prefix.
    Snapshot,
    /// A history page of a v5 manifest, under the history prefix.
    HistoryPage,
}

/// Why GC kept an unreferenced object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeepReason {
    /// Younger than the grace period.
    Young,
    /// May be an upload its writer has not committed yet.
    InFlight,
    /// Not named the way weft names segments and snapshots.
    Unrecognised,
}

/// One object GC decided about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcObject {
    /// Its path.
    pub location: String,
    /// Segment or snapshot.
    pub kind: ObjectKind,
    /// Its size in bytes.
    pub size: u64,
    /// When the store says it was last written, in ms since the Unix epoch.
    pub last_modified_ms: i64,
}

/// An unreferenced object GC kept, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptObject {
    /// The object.
    pub object: GcObject,
    /// Why it stays.
    pub reason: KeepReason,
}

/// What a GC pass did (or, in a dry run, would do).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcReport {
    /// Nothing was deleted; `deleted` lists what would have been.
    pub dry_run: bool,
    /// The pass's notion of now, in ms since the Unix epoch.
    pub now_ms: u64,
    /// The grace period, in ms.
    pub grace_ms: u64,
    /// The epoch of the manifest the decisions were made on.
    pub epoch: u64,
    /// Objects listed under both prefixes.
    pub listed: usize,
    /// Listed objects the manifest references (kept).
    pub referenced: usize,
    /// Objects deleted (or that would be, in a dry run).
    pub deleted: Vec<GcObject>,
    /// Unreferenced objects kept.
    pub kept: Vec<KeptObject>,
    /// Total size of `deleted`.
    pub deleted_bytes: u64,
}

/// One retention GC pass over a log; see the [module docs](self).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> weft::Result<()> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use bytes::Bytes;
/// use object_store::memory::InMemory;
/// use weft::wal::{Gc, Producer};
///
/// let store = Arc::new(InMemory::new());
/// let producer = Producer::builder(store.clone(), "wal/manifest", "wal/seg").open().await?;
/// producer.append(vec![Bytes::from("a")], None).await?.wait().await?;
/// producer.truncate_through(0).await?;
/// let report = Gc::new(store, "wal/manifest", "wal/seg")
///     .with_grace(Duration::from_secs(3600))
///     .dry_run(true)
///     .run()
///     .await?;
/// // The truncated segment is unreferenced but was written just now.
/// assert!(report.deleted.is_empty());
/// assert_eq!(report.kept.len(), 1);
/// # producer.close().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Gc {
    store: Arc<dyn ObjectStore>,
    manifest_path: String,
    segment_prefix: String,
    snapshot_prefix: String,
    history_prefix: String,
    grace: Duration,
    dry_run: bool,
    concurrency: usize,
    clock: Arc<dyn Clock>,
    retry: RetryPolicy,
}

/// The default grace period: one hour.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3600);

impl Gc {
    /// A pass over the log whose manifest is at `manifest_path` and whose
    /// segments are under `segment_prefix`; snapshots are looked for under
    /// [`snapshot::default_prefix`]. Grace: [`DEFAULT_GRACE`].
    pub fn new(
        store: Arc<dyn ObjectStore>,
        manifest_path: impl Into<String>,
        segment_prefix: impl Into<String>,
    ) -> Self {
        let manifest_path: String = manifest_path.into().trim_matches('/').to_owned();
        Gc {
            store,
            snapshot_prefix: snapshot::default_prefix(&manifest_path),
            history_prefix: history::default_prefix(&manifest_path),
            manifest_path,
            segment_prefix: segment_prefix.into().trim_matches('/').to_owned(),
            grace: DEFAULT_GRACE,
            dry_run: false,
            concurrency: 8,
            clock: clock::system(),
            retry: RetryPolicy::default(),
        }
    }

    /// Look for snapshots under `prefix` instead.
    pub fn with_snapshot_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.snapshot_prefix = prefix.into().trim_matches('/').to_owned();
        self
    }

    /// Look for history pages under `prefix` instead.
    pub fn with_history_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.history_prefix = prefix.into().trim_matches('/').to_owned();
        self
    }

    /// Unreferenced objects younger than this are kept.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Decide, report, delete nothing.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Deletes in flight at once (default 8).
    pub fn with_concurrency(mut self, deletes: usize) -> Self {
        self.concurrency = deletes.max(1);
        self
    }

    /// Where "now" comes from (default: the system clock).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Retries of reads, listings and deletes.
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    fn check(&self) -> Result<Path> {
        let manifest = Path::parse(&self.manifest_path).map_err(|e| {
            Error::invalid_input(format!(
                "manifest path {:?} is not valid",
                self.manifest_path
            ))
            .with_source(e)
        })?;
        if self.manifest_path.is_empty() {
            return Err(Error::invalid_input("manifest path is empty"));
        }
        for (what, p) in [
            ("segment", &self.segment_prefix),
            ("snapshot", &self.snapshot_prefix),
            ("history", &self.history_prefix),
        ] {
            if p.is_empty() {
                return Err(Error::invalid_input(format!(
                    "GC needs a non-empty {what} prefix: it never lists the whole store"
                )));
            }
            Path::parse(p).map_err(|e| {
                Error::invalid_input(format!("{what} prefix {p:?} is not valid")).with_source(e)
            })?;
        }
        let nested = |a: &str, b: &str| a == b || b.starts_with(&format!("{a}/"));
        let prefixes = [
            &self.segment_prefix,
            &self.snapshot_prefix,
            &self.history_prefix,
        ];
        for (i, a) in prefixes.iter().enumerate() {
            for b in &prefixes[i + 1..] {
                if nested(a, b) || nested(b, a) {
                    return Err(Error::invalid_input(format!(
                        "the prefixes {a:?} and {b:?} overlap"
                    )));
                }
            }
        }
        for p in prefixes {
            if nested(p, &self.manifest_path) {
                return Err(Error::invalid_input(format!(
                    "the manifest {:?} lies under the prefix {p:?}",
                    self.manifest_path
                )));
            }
        }
        Ok(manifest)
    }

    /// Runs the pass.
    ///
    /// Errors: `InvalidInput` for bad paths or overlapping prefixes;
    /// `NotFound` when there is no manifest; `Corrupt` for an unreadable
    /// one; store errors (`Unavailable` after the retries,
    /// `PermissionDenied`). A delete that fails after objects were already
    /// deleted returns its error; running the pass again is safe and
    /// finishes the work.
    pub async fn run(&self) -> Result<GcReport> {
        let manifest_path = self.check()?;
        let mut seed = ChaCha8Rng::from_os_rng();
        let first = self
            .read_manifest(&manifest_path, None, seed.random())
            .await?;
        let Some((_, etag)) = first else {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("no manifest at {manifest_path}: GC deletes nothing without one"),
            ));
        };
        let mut listed = self
            .list(ObjectKind::Segment, &self.segment_prefix, seed.random())
            .await?;
        listed.extend(
            self.list(ObjectKind::Snapshot, &self.snapshot_prefix, seed.random())
                .await?,
        );
        listed.extend(
            self.list(ObjectKind::HistoryPage, &self.history_prefix, seed.random())
                .await?,
        );
        // Decide on a copy read after the listing, and check it once more
        // right before deleting.
        let (manifest, etag) = self
            .reread(&manifest_path, etag, None, seed.random())
            .await?;
        let now_ms = self.clock.now_ms();
        let reader = HistoryReader::new(self.store.clone(), 4 << 20);
        let refs = References::walk(self, &reader, &manifest).await?;
        let mut decision = decide(self, &refs, &listed, now_ms);
        if !self.dry_run && !decision.delete.is_empty() {
            let (latest, _) = self
                .reread(
                    &manifest_path,
                    etag.clone(),
                    Some(manifest.clone()),
                    seed.random(),
                )
                .await?;
            if latest != manifest {
                let refs = References::walk(self, &reader, &latest).await?;
                let again = decide(self, &refs, &listed, now_ms);
                let keep: HashSet<&str> =
                    again.delete.iter().map(|o| o.location.as_str()).collect();
                let (still, spared): (Vec<_>, Vec<_>) = std::mem::take(&mut decision.delete)
                    .into_iter()
                    .partition(|o| keep.contains(o.location.as_str()));
                if !spared.is_empty() {
                    info!(
                        spared = spared.len(),
                        "the manifest changed; sparing objects"
                    );
                }
                decision = Decision {
                    delete: still,
                    ..again
                };
            }
        }
        let deleted_bytes = decision.delete.iter().map(|o| o.size).sum();
        if !self.dry_run {
            self.delete(&decision.delete, seed.random()).await?;
        }
        info!(
            dry_run = self.dry_run,
            deleted = decision.delete.len(),
            deleted_bytes,
            kept = decision.kept.len(),
            "retention GC pass"
        );
        metrics::counter!("weft_gc_deleted_objects_total").increment(if self.dry_run {
            0
        } else {
            decision.delete.len() as u64
        });
        Ok(GcReport {
            dry_run: self.dry_run,
            now_ms,
            grace_ms: u64::try_from(self.grace.as_millis()).unwrap_or(u64::MAX),
            epoch: manifest.epoch,
            listed: listed.len(),
            referenced: decision.referenced,
            deleted: decision.delete,
            kept: decision.kept,
            deleted_bytes,
        })
    }

    /// Reads the manifest (conditionally on `etag` when given); `None` when
    /// it does not exist.
    async fn read_manifest(
        &self,
        path: &Path,
        etag: Option<String>,
        seed: u64,
    ) -> Result<Option<(Option<ManifestData>, Option<String>)>> {
        let mut backoff = self.retry.backoff(seed);
        let got = retry_store(
            &mut backoff,
            StoreOp::Read,
            true,
            |_, _| {},
            || {
                let opts = GetOptions {
                    if_none_match: etag.clone(),
                    ..GetOptions::default()
                };
                async move {
                    let got = self.store.get_opts(path, opts).await?;
                    let etag = got.meta.e_tag.clone();
                    Ok((got.bytes().await?, etag))
                }
            },
        )
        .await;
        let (bytes, etag) = match got {
            Ok(v) => v,
            Err(g) if matches!(g.error, object_store::Error::NotModified { .. }) => {
                return Ok(Some((None, etag)));
            }
            Err(g) if g.outcome == Outcome::NotFound => return Ok(None),
            Err(g) => return Err(to_error(StoreOp::Read, path.as_ref(), g.error)),
        };
        let data = decode_manifest(&bytes).map_err(|e| e.context(format!("manifest {path}")))?;
        Ok(Some((Some(data), etag)))
    }

    /// Reads the manifest again; `known` is the copy `etag` names, if any.
    async fn reread(
        &self,
        path: &Path,
        etag: Option<String>,
        known: Option<ManifestData>,
        seed: u64,
    ) -> Result<(ManifestData, Option<String>)> {
        let conditional = if known.is_some() { etag } else { None };
        match self.read_manifest(path, conditional.clone(), seed).await? {
            Some((Some(m), etag)) => Ok((m, etag)),
            Some((None, _)) => Ok((known.expect("conditional only with a copy"), conditional)),
            None => Err(Error::new(
                ErrorKind::NotFound,
                format!("manifest {path} disappeared during GC; nothing was deleted"),
            )),
        }
    }

    async fn list(&self, kind: ObjectKind, prefix: &str, seed: u64) -> Result<Vec<Listed>> {
        let path = Path::from(prefix);
        let mut backoff = self.retry.backoff(seed);
        let metas: Vec<ObjectMeta> = retry_store(
            &mut backoff,
            StoreOp::List,
            true,
            |_, _| {},
            || self.store.list(Some(&path)).try_collect::<Vec<_>>(),
        )
        .await
        .map_err(|g| to_error(StoreOp::List, prefix, g.error))?;
        Ok(metas
            .into_iter()
            .map(|m| Listed {
                object: GcObject {
                    location: m.location.to_string(),
                    kind,
                    size: m.size,
                    last_modified_ms: m.last_modified.timestamp_millis(),
                },
            })
            .collect())
    }

    async fn delete(&self, objects: &[GcObject], seed: u64) -> Result<()> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let jobs: Vec<(Path, u64)> = objects
            .iter()
            .map(|o| (Path::from(o.location.as_str()), rng.random()))
            .collect();
        let results: Vec<Result<()>> = futures::stream::iter(jobs)
            .map(|(path, seed)| async move {
                let mut backoff = self.retry.backoff(seed);
                match retry_store(
                    &mut backoff,
                    StoreOp::Delete,
                    true,
                    |_, _| {},
                    || self.store.delete(&path),
                )
                .await
                {
                    Ok(()) => Ok(()),
                    Err(g) if classify(StoreOp::Delete, &g.error) == Outcome::NotFound => Ok(()),
                    Err(g) => {
                        warn!(%path, error = %g.error, "GC could not delete an object");
                        Err(to_error(StoreOp::Delete, path.as_ref(), g.error))
                    }
                }
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        let failed: Vec<Error> = results.into_iter().filter_map(|r| r.err()).collect();
        match failed.into_iter().next() {
            None => Ok(()),
            Some(first) => Err(first.context(format!(
                "GC deleted some of {} objects; run it again to finish",
                objects.len()
            ))),
        }
    }
}

/// A listed object.
#[derive(Debug, Clone)]
struct Listed {
    object: GcObject,
}

/// The decisions of one pass over one manifest copy.
#[derive(Debug, Default)]
struct Decision {
    referenced: usize,
    delete: Vec<GcObject>,
    kept: Vec<KeptObject>,
}

/// `<prefix>/<run>/<ordinal:016x>` → (run, ordinal).
fn parse_segment(prefix: &str, location: &str) -> Option<(Ulid, u64)> {
    let rest = location.strip_prefix(prefix)?.strip_prefix('/')?;
    let (run, ordinal) = rest.split_once('/')?;
    if ordinal.len() != 16 || !ordinal.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((
        Ulid::from_string(run).ok()?,
        u64::from_str_radix(ordinal, 16).ok()?,
    ))
}

fn parse_snapshot(prefix: &str, location: &str) -> Option<(u64, Ulid)> {
    let name = location.strip_prefix(prefix)?.strip_prefix('/')?;
    if name.contains('/') {
        return None;
    }
    snapshot::parse_object_name(name)
}

/// Segment ordinals of one run, as sorted, disjoint inclusive ranges.
#[derive(Debug, Default, Clone)]
struct Ordinals(Vec<(u64, u64)>);

impl Ordinals {
    /// Adds `o`; cheap when ordinals arrive in increasing order (they do:
    /// a run commits its segments in ordinal order).
    fn add(&mut self, o: u64) {
        if let Some(last) = self.0.last_mut() {
            if last.1.checked_add(1) == Some(o) || (last.0 <= o && o <= last.1) {
                last.1 = last.1.max(o);
                return;
            }
            if o > last.1 {
                self.0.push((o, o));
                return;
            }
        }
        let at = self.0.partition_point(|r| r.1 < o);
        if self.0.get(at).is_some_and(|r| r.0 <= o) {
            return;
        }
        self.0.insert(at, (o, o));
    }

    fn contains(&self, o: u64) -> bool {
        let at = self.0.partition_point(|r| r.1 < o);
        self.0.get(at).is_some_and(|r| r.0 <= o)
    }

    fn top(&self) -> Option<u64> {
        self.0.last().map(|r| r.1)
    }
}

/// What one manifest copy references, its history pages included, kept
/// compact: weft-named segments as ordinal ranges per run (a run commits
/// consecutive ordinals), everything else by location.
#[derive(Debug, Default)]
struct References {
    runs: BTreeMap<Ulid, Ordinals>,
    locations: HashSet<String>,
    /// The run of the newest entry (the one that committed last).
    newest_committer: Option<Ulid>,
    /// Where the manifest's own entries begin (the end of its history).
    history_end: u64,
}

impl References {
    fn add_entry(&mut self, gc: &Gc, location: &str) {
        match parse_segment(&gc.segment_prefix, location) {
            Some((run, ordinal)) => {
                self.runs.entry(run).or_default().add(ordinal);
                self.newest_committer = Some(run);
            }
            None => {
                self.locations.insert(location.to_owned());
            }
        }
    }

    /// The references of `manifest`, walking the live part of its history.
    async fn walk(gc: &Gc, reader: &HistoryReader, manifest: &ManifestData) -> Result<Self> {
        let mut refs = References {
            history_end: manifest.recent_from(),
            ..References::default()
        };
        refs.locations
            .extend(manifest.snapshot.iter().map(|s| s.location.clone()));
        if let Some(h) = &manifest.history {
            let live_from = h.live_from;
            let mut stack: Vec<(usize, crate::format::PagePointer)> =
                h.pointers().map(|(l, p)| (l, p.clone())).collect();
            stack.reverse();
            // Depth first, oldest first, so entries come in sequence order.
            while let Some((level, pointer)) = stack.pop() {
                if pointer.end_seq <= live_from {
                    continue;
                }
                refs.locations.insert(pointer.location.clone());
                let page = reader
                    .page(&pointer.location)
                    .await
                    .map_err(|e| e.context("GC reads the history to learn what it references"))?;
                match &page.items {
                    crate::format::PageItems::Entries(es) => {
                        for e in es.iter().filter(|e| e.end_sequence() > live_from) {
                            refs.add_entry(gc, &e.location);
                        }
                    }
                    crate::format::PageItems::Pointers(ps) => {
                        for p in ps.iter().rev() {
                            stack.push((level.saturating_sub(1), p.clone()));
                        }
                    }
                }
            }
        }
        for e in &manifest.entries {
            refs.add_entry(gc, &e.location);
        }
        Ok(refs)
    }

    /// The references of a manifest without history pages (tests).
    #[cfg(test)]
    fn without_history(gc: &Gc, manifest: &ManifestData) -> Self {
        assert!(manifest.history.is_none());
        let mut refs = References {
            history_end: manifest.recent_from(),
            ..References::default()
        };
        refs.locations
            .extend(manifest.snapshot.iter().map(|s| s.location.clone()));
        for e in &manifest.entries {
            refs.add_entry(gc, &e.location);
        }
        refs
    }

    fn references(&self, gc: &Gc, location: &str) -> bool {
        if self.locations.contains(location) {
            return true;
        }
        parse_segment(&gc.segment_prefix, location)
            .is_some_and(|(run, o)| self.runs.get(&run).is_some_and(|os| os.contains(o)))
    }
}

fn parse_page(prefix: &str, location: &str) -> Option<(u8, u64, u64, Ulid)> {
    let name = location.strip_prefix(prefix)?.strip_prefix('/')?;
    if name.contains('/') {
        return None;
    }
    parse_page_name(name)
}

fn decide(gc: &Gc, refs: &References, listed: &[Listed], now_ms: u64) -> Decision {
    let newest_committer = refs.newest_committer;
    // The newest run without a commit, if newer than the newest committer.
    let newest_claimant = listed
        .iter()
        .filter_map(|l| match l.object.kind {
            ObjectKind::Segment => {
                parse_segment(&gc.segment_prefix, &l.object.location).map(|(run, _)| run)
            }
            ObjectKind::HistoryPage => {
                parse_page(&gc.history_prefix, &l.object.location).map(|(.., run)| run)
            }
            ObjectKind::Snapshot => None,
        })
        .filter(|run| !refs.runs.contains_key(run))
        .filter(|run| newest_committer.is_none_or(|c| *run > c))
        .max();
    let grace_ms = i64::try_from(gc.grace.as_millis()).unwrap_or(i64::MAX);
    let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
    let mut out = Decision::default();
    for l in listed {
        let o = &l.object;
        if refs.references(gc, &o.location) {
            out.referenced += 1;
            continue;
        }
        let reason = match o.kind {
            ObjectKind::Segment => match parse_segment(&gc.segment_prefix, &o.location) {
                None => Some(KeepReason::Unrecognised),
                Some((run, ordinal)) => {
                    let pending_in_committer = Some(run) == newest_committer
                        && refs
                            .runs
                            .get(&run)
                            .and_then(Ordinals::top)
                            .is_some_and(|top| ordinal > top);
                    if pending_in_committer || Some(run) == newest_claimant {
                        Some(KeepReason::InFlight)
                    } else {
                        None
                    }
                }
            },
            ObjectKind::Snapshot => parse_snapshot(&gc.snapshot_prefix, &o.location)
                .is_none()
                .then_some(KeepReason::Unrecognised),
            ObjectKind::HistoryPage => match parse_page(&gc.history_prefix, &o.location) {
                None => Some(KeepReason::Unrecognised),
                Some((_, _, end, run)) => {
                    let writer = Some(run) == newest_committer || Some(run) == newest_claimant;
                    (writer && end > refs.history_end).then_some(KeepReason::InFlight)
                }
            },
        };
        let reason = reason.or_else(|| {
            (now.saturating_sub(o.last_modified_ms) < grace_ms).then_some(KeepReason::Young)
        });
        match reason {
            Some(reason) => out.kept.push(KeptObject {
                object: o.clone(),
                reason,
            }),
            None => out.delete.push(o.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{ManifestEntry, ManifestVersion, SnapshotPointer};
    use object_store::memory::InMemory;

    const HOUR: i64 = 3_600_000;
    const NOW: u64 = 10 * HOUR as u64;

    fn run(ms: u64) -> Ulid {
        Ulid::from_parts(ms, 7)
    }

    fn seg(run: Ulid, ordinal: u64) -> String {
        format!("wal/seg/{run}/{ordinal:016x}")
    }

    fn listed(location: &str, kind: ObjectKind, age_ms: i64) -> Listed {
        Listed {
            object: GcObject {
                location: location.to_owned(),
                kind,
                size: 10,
                last_modified_ms: NOW as i64 - age_ms,
            },
        }
    }

    fn manifest(entries: &[String], snapshot: Option<&str>) -> ManifestData {
        ManifestData {
            version: ManifestVersion::V4,
            epoch: 3,
            next_sequence: entries.len() as u64,
            entries: entries
                .iter()
                .enumerate()
                .map(|(i, l)| ManifestEntry {
                    sequence: i as u64,
                    count: Some(1),
                    location: l.clone(),
                    metadata: vec![],
                })
                .collect(),
            snapshot: snapshot.map(|s| SnapshotPointer {
                location: s.to_owned(),
                through_seq: 0,
                created_ms: 0,
            }),
            history: None,
        }
    }

    fn gc() -> Gc {
        Gc::new(Arc::new(InMemory::new()), "wal/manifest", "wal/seg")
    }

    fn outcome(d: &Decision, location: &str) -> Option<KeepReason> {
        if d.delete.iter().any(|o| o.location == location) {
            return None;
        }
        Some(
            d.kept
                .iter()
                .find(|k| k.object.location == location)
                .unwrap_or_else(|| panic!("{location} neither kept nor deleted"))
                .reason,
        )
    }

    #[test]
    fn every_rule_decides_its_case() {
        let (old, cur, zombie, claimant) = (run(1), run(2), run(3), run(4));
        let old_snap = format!("wal/snapshots/0000000000000001-{}", run(5));
        let cur_snap = format!("wal/snapshots/0000000000000002-{}", run(6));
        let m = manifest(&[seg(cur, 3), seg(cur, 4)], Some(&cur_snap));
        let objects = vec![
            listed(&seg(old, 0), ObjectKind::Segment, 2 * HOUR), // truncated, old
            listed(&seg(cur, 2), ObjectKind::Segment, 2 * HOUR), // truncated, current run
            listed(&seg(cur, 3), ObjectKind::Segment, 2 * HOUR), // referenced
            listed(&seg(cur, 4), ObjectKind::Segment, 2 * HOUR), // referenced
            listed(&seg(cur, 5), ObjectKind::Segment, 2 * HOUR), // in flight, however old
            listed(&seg(zombie, 0), ObjectKind::Segment, 2 * HOUR), // older claimant
            listed(&seg(claimant, 0), ObjectKind::Segment, 2 * HOUR), // newest claimant
            listed(&seg(old, 9), ObjectKind::Segment, HOUR / 2), // young
            listed("wal/seg/notes.txt", ObjectKind::Segment, 2 * HOUR),
            listed(
                "wal/seg/not-a-ulid/0000000000000000",
                ObjectKind::Segment,
                2 * HOUR,
            ),
            listed(&old_snap, ObjectKind::Snapshot, 2 * HOUR), // superseded
            listed(&cur_snap, ObjectKind::Snapshot, 2 * HOUR), // referenced
            listed("wal/snapshots/manual-copy", ObjectKind::Snapshot, 2 * HOUR),
        ];
        let g = gc();
        let d = decide(&g, &References::without_history(&g, &m), &objects, NOW);
        assert_eq!(d.referenced, 3);
        assert_eq!(outcome(&d, &seg(old, 0)), None);
        assert_eq!(outcome(&d, &seg(cur, 2)), None);
        assert_eq!(outcome(&d, &seg(cur, 5)), Some(KeepReason::InFlight));
        assert_eq!(outcome(&d, &seg(zombie, 0)), None);
        assert_eq!(outcome(&d, &seg(claimant, 0)), Some(KeepReason::InFlight));
        assert_eq!(outcome(&d, &seg(old, 9)), Some(KeepReason::Young));
        assert_eq!(
            outcome(&d, "wal/seg/notes.txt"),
            Some(KeepReason::Unrecognised)
        );
        assert_eq!(
            outcome(&d, "wal/seg/not-a-ulid/0000000000000000"),
            Some(KeepReason::Unrecognised)
        );
        assert_eq!(outcome(&d, &old_snap), None);
        assert_eq!(
            outcome(&d, "wal/snapshots/manual-copy"),
            Some(KeepReason::Unrecognised)
        );
        assert_eq!(d.delete.len() + d.kept.len() + d.referenced, objects.len());
    }

    #[test]
    fn grace_boundary_and_an_empty_manifest() {
        let r = run(1);
        // Everything truncated: no committer; the newest run is protected
        // as a possible claimant, older runs age out.
        let m = manifest(&[], None);
        let objects = vec![
            listed(&seg(r, 0), ObjectKind::Segment, HOUR),
            listed(&seg(r, 1), ObjectKind::Segment, HOUR - 1),
            listed(&seg(run(2), 0), ObjectKind::Segment, 5 * HOUR),
        ];
        let g = gc();
        let d = decide(&g, &References::without_history(&g, &m), &objects, NOW);
        assert_eq!(outcome(&d, &seg(r, 0)), None, "exactly the grace: garbage");
        assert_eq!(outcome(&d, &seg(r, 1)), Some(KeepReason::Young));
        assert_eq!(outcome(&d, &seg(run(2), 0)), Some(KeepReason::InFlight));
    }

    #[test]
    fn bad_prefixes_are_refused() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let cases = [
            Gc::new(store.clone(), "wal/manifest", ""),
            Gc::new(store.clone(), "wal/manifest", "wal"),
            Gc::new(store.clone(), "wal/manifest", "wal/seg").with_snapshot_prefix("wal/seg/s"),
            Gc::new(store.clone(), "", "wal/seg"),
        ];
        for gc in cases {
            assert_eq!(gc.check().unwrap_err().kind(), ErrorKind::InvalidInput);
        }
        Gc::new(store, "wal/manifest", "wal/seg").check().unwrap();
    }
}
