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
//!   `<history prefix>/<level:02x>-<first:016x>-<end:016x>-<run ULID>-
//!   <plan:016x>`): kept. GC deletes only what it knows the writer made.
//! * **In flight**: segments that the log's current writer may still be
//!   committing: when the writer lease names the run that holds the
//!   manifest's epoch (see `super::lease`), that run's uncommitted
//!   ordinals; without such a lease, in the run of the newest entry every
//!   ordinal above its highest committed one, and every segment of the
//!   newest run (by ULID) that has no committed segment and is newer than
//!   the run of the newest entry (the writer that claimed the log last,
//!   before its first commit). Likewise that writer's history pages that
//!   reach past the manifest's history: a checkpoint stores its pages
//!   before the CAS that names them. Kept until they are settled (below).
//! * **Settled**: objects no CAS can ever make referenced again —
//!   * a segment whose run has committed entries in the manifest, at or
//!     below that run's highest committed ordinal (committed, then
//!     truncated: writers commit a run's segments in ordinal order), or of
//!     a run that is not the newest entry's (a writer that committed before
//!     a newer one claimed the log: fenced);
//!   * a segment or history page of any run but the lease's, when the
//!     lease names the run that holds the manifest's epoch (only that run
//!     can still commit — whatever the heuristics above would guess);
//!   * a history page that ends at or before the manifest's history (every
//!     page a checkpoint creates holds its new leaf, past the history of
//!     the version it was conditioned on, and the history only grows), or
//!     before the first live sequence (trimmed: no reader descends there);
//!   * a snapshot that sorts at or before the manifest's pointer (the
//!     pointer only moves forward, see [`super::maintenance`]);
//!   * anything the manifest was written more than
//!     `COMMIT_WINDOW` +
//!     `STAMP_MARGIN` after (by the store's
//!     own stamps): see `super::window`. A checkpoint never reuses a page
//!     stored by an earlier attempt (each plan names its pages afresh), so
//!     every page a CAS names was uploaded after the version it is
//!     conditioned on was learned.
//!
//!   Anything else is kept as **pending**: an upload whose CAS may still
//!   land.
//! * A settled object is garbage once `now - last_modified >= grace`;
//!   younger, it is kept (**young**). `now` comes from an injected
//!   [`Clock`], `last_modified` from the store. The grace period is a
//!   retention choice (how long replicas that read an old manifest may
//!   still find truncated segments), not a safety margin: any grace, zero
//!   included, is safe.
//!
//! # Why this is safe
//!
//! *A live manifest never references a deleted object.* Manifests only ever
//! gain locations at the end and by a CAS; a location that a manifest no
//! longer lists (truncated, superseded) never comes back, because manifest
//! versions never repeat and writers only ever add their own fresh uploads.
//! So the only way a deleted object could become referenced is a CAS that
//! references an upload GC saw unreferenced — whether the writer sends it
//! now, or a server applies it late, long after its writer gave up. The
//! structural rules name objects no writer will ever reference again; the
//! commit window proves it for everything else: a CAS can only land on the
//! version it was conditioned on, and no writer conditions a CAS
//! referencing an upload on a version learned more than the window after
//! the upload began (`super::window`). GC decides on a manifest read
//! after the listing, and again on the newest copy just before deleting.
//!
//! *Readers.* A replica may hold an older copy of the manifest that still
//! lists a truncated segment, and find it deleted. It only needed that
//! segment if its cursor was in the truncated part, which the fresh
//! manifest reports as `Trimmed` anyway; the replica re-reads the manifest
//! on a missing object and reports exactly that (and follows the newer
//! pointer for a superseded snapshot). No reader ever applies wrong data.
//! The grace period keeps truncated segments readable for such replicas.
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
use tracing::{debug, info};
use ulid::Ulid;

use super::history::{self, HistoryReader, PageName, parse_page_name};
use super::lease;
use super::snapshot;
use super::window;
use crate::clock::{self, Clock};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{ManifestData, decode_manifest};
use crate::objects::{Outcome, RetryPolicy, StoreOp, classify, retry_store, to_error};

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
    /// A CAS may still make it referenced: it was written within the commit
    /// window before the manifest's last write (see `super::window`).
    Pending,
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
    /// When that manifest was written (the store's stamp), in ms since the
    /// Unix epoch.
    pub manifest_written_ms: i64,
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
    seed: Option<u64>,
}

/// The default grace period: one hour.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3600);

impl Gc {
    /// A pass over the log whose manifest is at `manifest_path` and whose
    /// segments are under `segment_prefix`; snapshots are looked for under
    /// `snapshot::default_prefix`. Grace: [`DEFAULT_GRACE`].
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
            seed: None,
        }
    }

    /// Seeds the retries' jitter (for reproducible simulation; default:
    /// from the operating system).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
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
        let mut seed = crate::random::rng(self.seed);
        let first = self
            .read_manifest(&manifest_path, None, seed.random())
            .await?;
        let Some((_, etag, _)) = first else {
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
        let writer = self.writer_of(&manifest.data).await;
        let now_ms = self.clock.now_ms();
        let reader = HistoryReader::new(self.store.clone(), 4 << 20);
        let refs = References::walk(self, &reader, &manifest.data).await?;
        let mut decision = decide(self, &refs, manifest.written_ms, writer, &listed, now_ms);
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
                let writer = self.writer_of(&latest.data).await;
                let refs = References::walk(self, &reader, &latest.data).await?;
                let again = decide(self, &refs, latest.written_ms, writer, &listed, now_ms);
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
            epoch: manifest.data.epoch,
            manifest_written_ms: manifest.written_ms,
            listed: listed.len(),
            referenced: decision.referenced,
            deleted: decision.delete,
            kept: decision.kept,
            deleted_bytes,
        })
    }

    /// The run the writer lease names for `manifest`'s epoch, if it does
    /// (an unreadable lease names none: the other rules still hold).
    async fn writer_of(&self, manifest: &ManifestData) -> Option<Ulid> {
        let path = lease::lease_path(&Path::from(self.manifest_path.as_str()));
        let mut backoff = self.retry.backoff(manifest.epoch);
        match lease::read_lease(self.store.as_ref(), &path, &mut backoff).await {
            // A lease still at the reserving epoch names an opener that
            // has not claimed yet: it says nothing about who can commit.
            Ok(Some(l))
                if l.lease.epoch == manifest.epoch && l.lease.epoch != lease::RESERVING_EPOCH =>
            {
                Some(l.lease.run)
            }
            _ => None,
        }
    }

    /// Reads the manifest (conditionally on `etag` when given); `None` when
    /// it does not exist.
    async fn read_manifest(
        &self,
        path: &Path,
        etag: Option<String>,
        seed: u64,
    ) -> Result<Option<(Option<ManifestData>, Option<String>, i64)>> {
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
                    let written = got.meta.last_modified.timestamp_millis();
                    Ok((got.bytes().await?, etag, written))
                }
            },
        )
        .await;
        let (bytes, etag, written) = match got {
            Ok(v) => v,
            Err(g) if matches!(g.error, object_store::Error::NotModified { .. }) => {
                return Ok(Some((None, etag, 0)));
            }
            Err(g) if g.outcome == Outcome::NotFound => return Ok(None),
            Err(g) => return Err(to_error(StoreOp::Read, path.as_ref(), g.error)),
        };
        let data = decode_manifest(&bytes).map_err(|e| e.context(format!("manifest {path}")))?;
        Ok(Some((Some(data), etag, written)))
    }

    /// Reads the manifest again; `known` is the copy `etag` names, if any.
    async fn reread(
        &self,
        path: &Path,
        etag: Option<String>,
        known: Option<StampedManifest>,
        seed: u64,
    ) -> Result<(StampedManifest, Option<String>)> {
        let conditional = if known.is_some() { etag } else { None };
        match self.read_manifest(path, conditional.clone(), seed).await? {
            Some((Some(data), etag, written_ms)) => {
                Ok((StampedManifest { data, written_ms }, etag))
            }
            Some((None, _, _)) => Ok((known.expect("conditional only with a copy"), conditional)),
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
                        debug!(%path, error = %g.error, "GC could not delete an object");
                        Err(to_error(StoreOp::Delete, path.as_ref(), g.error))
                    }
                }
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        let failed: Vec<Error> = results.into_iter().filter_map(|r| r.err()).collect();
        let deleted = objects.len() - failed.len();
        match failed.into_iter().next() {
            None => Ok(()),
            Some(first) => {
                // The caller gets the error; this is for the record.
                info!(
                    deleted,
                    of = objects.len(),
                    error = %first,
                    "GC could not delete every object"
                );
                Err(first.context(format!(
                    "GC deleted {deleted} of {} objects; run it again to finish",
                    objects.len()
                )))
            }
        }
    }
}

/// A manifest and when the store says it was written.
#[derive(Debug, Clone, PartialEq)]
struct StampedManifest {
    data: ManifestData,
    written_ms: i64,
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
    /// The snapshot pointer: through which sequence, and where.
    snapshot: Option<(u64, String)>,
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
            snapshot: manifest
                .snapshot
                .as_ref()
                .map(|s| (s.through_seq, s.location.clone())),
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
                let page = tokio::time::timeout(gc.retry.deadline, reader.page(&pointer.location))
                    .await
                    .unwrap_or_else(|_| {
                        Err(Error::new(
                            ErrorKind::Unavailable,
                            format!(
                                "history page {} got no answer within the deadline",
                                pointer.location
                            ),
                        ))
                    })
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
            snapshot: manifest
                .snapshot
                .as_ref()
                .map(|s| (s.through_seq, s.location.clone())),
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

fn parse_page(prefix: &str, location: &str) -> Option<PageName> {
    let name = location.strip_prefix(prefix)?.strip_prefix('/')?;
    if name.contains('/') {
        return None;
    }
    parse_page_name(name)
}

/// Decides about every listed object on `refs` (what the manifest
/// references, its history included) and `written_ms` (the store's stamp
/// of the manifest's write); `writer` is the run the writer lease names
/// for the manifest's epoch, when it does.
fn decide(
    gc: &Gc,
    refs: &References,
    written_ms: i64,
    writer: Option<Ulid>,
    listed: &[Listed],
    now_ms: u64,
) -> Decision {
    let newest_committer = refs.newest_committer;
    // The newest run without a commit, if newer than the newest committer.
    let newest_claimant = listed
        .iter()
        .filter_map(|l| match l.object.kind {
            ObjectKind::Segment => {
                parse_segment(&gc.segment_prefix, &l.object.location).map(|(run, _)| run)
            }
            ObjectKind::HistoryPage => {
                parse_page(&gc.history_prefix, &l.object.location).map(|p| p.run)
            }
            ObjectKind::Snapshot => None,
        })
        .filter(|run| !refs.runs.contains_key(run))
        .filter(|run| newest_committer.is_none_or(|c| *run > c))
        .max();
    let pointer = refs
        .snapshot
        .as_ref()
        .map(|(through, location)| (*through, location.as_str()));
    let grace_ms = i64::try_from(gc.grace.as_millis()).unwrap_or(i64::MAX);
    let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
    let mut out = Decision::default();
    for l in listed {
        let o = &l.object;
        if refs.references(gc, &o.location) {
            out.referenced += 1;
            continue;
        }
        let aged_out = window::outside_window(written_ms, o.last_modified_ms);
        let reason = match o.kind {
            ObjectKind::Segment => match parse_segment(&gc.segment_prefix, &o.location) {
                None => Some(KeepReason::Unrecognised),
                Some((run, ordinal)) => {
                    let top = refs.runs.get(&run).and_then(Ordinals::top);
                    let settled = match writer {
                        // The lease names the only run that can commit.
                        Some(w) => w != run || top.is_some_and(|top| ordinal <= top),
                        None => {
                            top.is_some_and(|top| ordinal <= top)
                                || (top.is_some() && Some(run) != newest_committer)
                        }
                    };
                    let in_flight = match writer {
                        Some(w) => w == run,
                        None => {
                            (Some(run) == newest_committer && top.is_some_and(|top| ordinal > top))
                                || Some(run) == newest_claimant
                        }
                    };
                    if settled || aged_out {
                        None
                    } else if in_flight {
                        Some(KeepReason::InFlight)
                    } else {
                        Some(KeepReason::Pending)
                    }
                }
            },
            ObjectKind::Snapshot => match parse_snapshot(&gc.snapshot_prefix, &o.location) {
                None => Some(KeepReason::Unrecognised),
                Some((through, _)) => {
                    let superseded = pointer.is_some_and(|p| (through, o.location.as_str()) <= p);
                    (!superseded && !aged_out).then_some(KeepReason::Pending)
                }
            },
            ObjectKind::HistoryPage => match parse_page(&gc.history_prefix, &o.location) {
                None => Some(KeepReason::Unrecognised),
                Some(PageName { end, run, .. }) => {
                    // Every page a checkpoint creates ends past the history
                    // of the version it is conditioned on, and the history
                    // end never moves back: a page ending within it is one
                    // no CAS that can still land names (or a trimmed one).
                    let settled = end <= refs.history_end || writer.is_some_and(|w| w != run);
                    let in_flight = match writer {
                        Some(w) => w == run,
                        None => Some(run) == newest_committer || Some(run) == newest_claimant,
                    };
                    if settled || aged_out {
                        None
                    } else if in_flight {
                        Some(KeepReason::InFlight)
                    } else {
                        Some(KeepReason::Pending)
                    }
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

    fn stamped(data: ManifestData, written_ms: i64) -> StampedManifest {
        StampedManifest { data, written_ms }
    }

    /// [`decide`] on a manifest without history pages.
    fn decide_stamped(
        gc: &Gc,
        stamped: &StampedManifest,
        writer: Option<Ulid>,
        listed: &[Listed],
        now_ms: u64,
    ) -> Decision {
        let refs = References::without_history(gc, &stamped.data);
        decide(gc, &refs, stamped.written_ms, writer, listed, now_ms)
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
        // The manifest was written now, two hours after most objects: even
        // uploads the in-flight rules would guess pending are past the
        // commit window, so only grace and names keep anything.
        let d = decide_stamped(&gc(), &stamped(m, NOW as i64), None, &objects, NOW);
        assert_eq!(d.referenced, 3);
        assert_eq!(outcome(&d, &seg(old, 0)), None);
        assert_eq!(outcome(&d, &seg(cur, 2)), None);
        assert_eq!(outcome(&d, &seg(cur, 5)), None);
        assert_eq!(outcome(&d, &seg(zombie, 0)), None);
        assert_eq!(outcome(&d, &seg(claimant, 0)), None);
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
        // Written just before the manifest, the in-flight rules decide.
        let recent = |location: &str| listed(location, ObjectKind::Segment, 1_000);
        let d = decide_stamped(
            &gc(),
            &stamped(manifest(&[seg(cur, 3), seg(cur, 4)], None), NOW as i64),
            None,
            &[
                recent(&seg(cur, 5)),
                recent(&seg(claimant, 0)),
                recent(&seg(zombie, 0)),
            ],
            NOW,
        );
        assert_eq!(outcome(&d, &seg(cur, 5)), Some(KeepReason::InFlight));
        assert_eq!(outcome(&d, &seg(claimant, 0)), Some(KeepReason::InFlight));
        assert_eq!(outcome(&d, &seg(zombie, 0)), Some(KeepReason::Pending));
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
        let d = decide_stamped(&gc(), &stamped(m, NOW as i64), None, &objects, NOW);
        assert_eq!(outcome(&d, &seg(r, 0)), None, "exactly the grace: garbage");
        assert_eq!(outcome(&d, &seg(r, 1)), Some(KeepReason::Young));
        assert_eq!(
            outcome(&d, &seg(run(2), 0)),
            None,
            "past the window: no claimant can still commit it"
        );
    }

    /// With no grace at all, what is deleted at once is what no CAS can
    /// ever reference again; every upload that one still may (written
    /// within the commit window before the manifest's last write) is kept.
    #[test]
    fn without_grace_only_settled_objects_go() {
        let gc = gc().with_grace(Duration::ZERO);
        let (fenced, cur, fresh, lease_run) = (run(1), run(2), run(9), run(3));
        let snap = |through: u64, id: u64| {
            format!("wal/snapshots/{through:016x}-{}", Ulid::from_parts(id, 1))
        };
        let (old_snap, cur_snap, new_snap) = (snap(1, 5), snap(2, 6), snap(3, 7));
        let mut m = manifest(&[seg(fenced, 0), seg(cur, 3), seg(cur, 4)], Some(&cur_snap));
        if let Some(p) = m.snapshot.as_mut() {
            p.through_seq = 2;
        }
        // Everything was written a second before the manifest.
        let age = 1_000;
        let objects = vec![
            listed(&seg(fenced, 1), ObjectKind::Segment, age), // fenced run's upload
            listed(&seg(cur, 1), ObjectKind::Segment, age),    // committed, truncated
            listed(&seg(cur, 5), ObjectKind::Segment, age),    // in flight
            listed(&seg(fresh, 0), ObjectKind::Segment, age),  // newest claimant
            listed(&seg(run(0), 0), ObjectKind::Segment, age), // an older run, no entries
            listed(&old_snap, ObjectKind::Snapshot, age),      // superseded
            listed(&new_snap, ObjectKind::Snapshot, age),      // a snapshot not recorded yet
        ];
        let d = decide_stamped(&gc, &stamped(m.clone(), NOW as i64), None, &objects, NOW);
        assert_eq!(outcome(&d, &seg(fenced, 1)), None);
        assert_eq!(outcome(&d, &seg(cur, 1)), None);
        assert_eq!(outcome(&d, &seg(cur, 5)), Some(KeepReason::InFlight));
        assert_eq!(outcome(&d, &seg(fresh, 0)), Some(KeepReason::InFlight));
        assert_eq!(outcome(&d, &seg(run(0), 0)), Some(KeepReason::Pending));
        assert_eq!(outcome(&d, &old_snap), None);
        assert_eq!(outcome(&d, &new_snap), Some(KeepReason::Pending));

        // The lease names the run holding the epoch: only it can commit, so
        // every other run's leftovers are settled, and its own uploads are
        // in flight even though its run id sorts before the others.
        let with_lease = [
            listed(&seg(run(0), 0), ObjectKind::Segment, age),
            listed(&seg(fresh, 0), ObjectKind::Segment, age),
            listed(&seg(lease_run, 0), ObjectKind::Segment, age),
        ];
        let d = decide_stamped(
            &gc,
            &stamped(m.clone(), NOW as i64),
            Some(lease_run),
            &with_lease,
            NOW,
        );
        assert_eq!(outcome(&d, &seg(run(0), 0)), None);
        assert_eq!(outcome(&d, &seg(lease_run, 0)), Some(KeepReason::InFlight));
        assert_eq!(
            outcome(&d, &seg(fresh, 0)),
            None,
            "the newest-claimant guess yields to the lease"
        );

        // Once the manifest was written more than the window after them,
        // pending uploads can no longer be committed.
        let later = NOW as i64 + (window::COMMIT_WINDOW + window::STAMP_MARGIN).as_millis() as i64;
        let d = decide_stamped(&gc, &stamped(m, later), None, &objects, NOW);
        assert_eq!(outcome(&d, &seg(run(0), 0)), None);
        assert_eq!(outcome(&d, &new_snap), None);
        assert_eq!(
            outcome(&d, &seg(cur, 5)),
            None,
            "its writer can no longer commit it"
        );
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
