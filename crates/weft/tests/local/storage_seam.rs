//! The storage seam beyond the conformance suite: what tip queries promise
//! per kind of backend, paged streams that fetch lazily and stop at a trim,
//! the `Trimmed` detail of version-keyed reads, and the sticky error a
//! stopped writer hands out (a fenced bucket writer keeps its epochs).

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::memory::InMemory;
use weft::kv::KvStore;
use weft::storage::bucket::{BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage};
use weft::storage::{Capabilities, CommitFeed, NewEntry, StreamInfo};
use weft::{
    AppendRequest, AppendResult, DirStorage, ErrorDetail, ErrorKind, Freshness, Log, LogEntry,
    LogTag, MemoryStorage, Position, Result, Storage, Tip,
};

fn tag(s: &str) -> LogTag {
    s.parse().unwrap()
}

/// Opening fences any earlier writer at once (failovers on purpose; the
/// writer lease has its own tests).
fn bucket_options() -> BucketOptions {
    BucketOptions::default()
        .with_take_over(true)
        .with_flush_interval(Duration::from_millis(2))
}

fn follower_options() -> BucketFollowerOptions {
    BucketFollowerOptions::default()
        .with_poll_interval(Duration::from_millis(5))
        .with_prefetch(4)
}

async fn bucket_writer(store: &Arc<dyn ObjectStore>) -> Log {
    Log::new(
        BucketStorage::open(store.clone(), "log", bucket_options())
            .await
            .unwrap(),
    )
}

async fn follower(store: &Arc<dyn ObjectStore>) -> Log {
    Log::new(
        BucketFollower::open(store.clone(), "log", follower_options())
            .await
            .unwrap(),
    )
}

async fn append_n(log: &Log, t: &LogTag, n: usize) {
    for i in 0..n {
        log.append(AppendRequest::new(t.clone(), format!("{i}")))
            .await
            .unwrap();
    }
}

/// Waits (bounded) until `log`'s tip satisfies `cond`.
async fn until(log: &Log, cond: impl Fn(Tip) -> bool) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while !cond(log.tip().await.unwrap()) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the condition held within 30 s");
}

/// What every single-writer backend reports: exact tips that follow its
/// own appends and trims, version queries from the same state, `Closed`
/// once closed.
async fn tip_follows_appends_and_trims(log: Log) {
    let t = tag("t");
    assert_eq!(
        log.storage().capabilities().freshness,
        Freshness::SingleWriter
    );
    assert_eq!(log.tip().await.unwrap(), Tip { first: 0, next: 0 });
    assert!(log.tip().await.unwrap().is_empty());
    append_n(&log, &t, 6).await;
    let tip = log.tip().await.unwrap();
    assert_eq!((tip, tip.last()), (Tip { first: 0, next: 6 }, Some(5)));
    log.trim(2).await.unwrap();
    assert_eq!(log.tip().await.unwrap(), Tip { first: 3, next: 6 });
    assert_eq!(log.latest_version(&t).await.unwrap(), Some(5));
    assert_eq!(log.next_version(&t).await.unwrap(), 6);
    // The feed's announced tip is the cheap view of the same state.
    assert_eq!(*log.storage().feed().watch_tip().borrow(), 6);
    log.close().await.unwrap();
    for err in [
        log.tip().await.unwrap_err(),
        log.latest_version(&t).await.unwrap_err(),
        log.latest_seqnum().await.unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::Closed);
    }
}

#[tokio::test]
async fn single_writer_tips_are_exact_on_memory() {
    tip_follows_appends_and_trims(Log::memory()).await;
}

#[tokio::test]
async fn single_writer_tips_are_exact_on_dir() {
    let dir = tempfile::tempdir().unwrap();
    tip_follows_appends_and_trims(Log::new(DirStorage::open(dir.path()).await.unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_writer_tips_are_exact_on_the_bucket_writer() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    tip_follows_appends_and_trims(bucket_writer(&store).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_answers_for_its_applied_prefix() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let w = bucket_writer(&store).await;
    let t = tag("t");
    append_n(&w, &t, 3).await;
    let f = follower(&store).await;
    assert_eq!(
        f.storage().capabilities().freshness,
        Freshness::AppliedPrefix
    );
    // Right after open the follower caught up once.
    assert_eq!(f.tip().await.unwrap(), Tip { first: 0, next: 3 });
    append_n(&w, &t, 2).await;
    until(&f, |tip| tip.next == 5).await;
    assert_eq!(f.latest_version(&t).await.unwrap(), Some(4));
}

#[tokio::test]
async fn a_dir_follower_answers_for_its_applied_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let w = Log::new(DirStorage::open(dir.path()).await.unwrap());
    let t = tag("t");
    append_n(&w, &t, 3).await;
    let options = weft::storage::dir::DirFollowerOptions::default()
        .with_poll_interval(Duration::from_millis(5));
    let f = Log::new(
        weft::storage::dir::DirFollower::open_with(dir.path(), options)
            .await
            .unwrap(),
    );
    assert_eq!(
        f.storage().capabilities().freshness,
        Freshness::AppliedPrefix
    );
    assert_eq!(f.tip().await.unwrap(), Tip { first: 0, next: 3 });
    append_n(&w, &t, 2).await;
    until(&f, |tip| tip.next == 5).await;
    assert_eq!(f.latest_version(&t).await.unwrap(), Some(4));
    f.close().await.unwrap();
    assert_eq!(f.tip().await.unwrap_err().kind(), ErrorKind::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_subscription_on_a_follower_of_a_wholly_trimmed_log_goes_live() {
    // The follower restores the trim's state: nothing to read, numbering
    // at 10. A tail subscription must start there, not below the trim.
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let w = bucket_writer(&store).await;
    let t = tag("t");
    append_n(&w, &t, 10).await;
    w.trim(9).await.unwrap();
    let f = follower(&store).await;
    assert_eq!(
        f.tip().await.unwrap(),
        Tip {
            first: 10,
            next: 10
        }
    );
    let mut tail = f.subscribe_tail(&t);
    let r = w
        .append(AppendRequest::new(t.clone(), "live"))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(30), tail.next())
        .await
        .expect("an entry within 30 s")
        .expect("the subscription goes on")
        .unwrap();
    assert_eq!((got.seqnum, got.stream_version), (r.seqnum, 10));
}

/// The `Trimmed` detail of a version-keyed read names versions.
async fn trimmed_versions_carry_their_detail(log: Log) {
    let (t, other) = (tag("t"), tag("other"));
    for i in 0..10 {
        let which = if i % 2 == 0 { &t } else { &other };
        log.append(AppendRequest::new(which.clone(), "x"))
            .await
            .unwrap();
    }
    // Through seqnum 5: versions 0..=2 of `t` (seqnums 0, 2, 4) are gone.
    log.trim(5).await.unwrap();
    let err = log.read_after_version(&t, 0).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    assert_eq!(
        err.detail(),
        Some(&ErrorDetail::Trimmed {
            requested: 1,
            first_available: 3
        })
    );
    let first: Vec<u64> = log
        .read_after_version(&t, 2)
        .await
        .unwrap()
        .iter()
        .map(|e| e.stream_version)
        .collect();
    assert_eq!(first, [3, 4]);
}

#[tokio::test]
async fn trimmed_version_reads_carry_the_detail_on_memory() {
    trimmed_versions_carry_their_detail(Log::memory()).await;
}

#[tokio::test]
async fn trimmed_version_reads_carry_the_detail_on_dir() {
    let dir = tempfile::tempdir().unwrap();
    trimmed_versions_carry_their_detail(Log::new(DirStorage::open(dir.path()).await.unwrap()))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trimmed_version_reads_carry_the_detail_on_the_bucket_writer() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    trimmed_versions_carry_their_detail(bucket_writer(&store).await).await;
}

#[tokio::test]
async fn a_stream_trimmed_away_before_a_reopen_reads_as_trimmed_with_detail() {
    let dir = tempfile::tempdir().unwrap();
    let (gone, live) = (tag("gone"), tag("live"));
    {
        let log = Log::new(DirStorage::open(dir.path()).await.unwrap());
        append_n(&log, &gone, 4).await;
        append_n(&log, &live, 2).await;
        log.trim(3).await.unwrap();
        log.close().await.unwrap();
    }
    let log = Log::new(DirStorage::open(dir.path()).await.unwrap());
    let err = log.read_after_version(&gone, 0).await.unwrap_err();
    assert_eq!(
        err.detail(),
        Some(&ErrorDetail::Trimmed {
            requested: 1,
            first_available: 4
        })
    );
    assert_eq!(log.next_version(&gone).await.unwrap(), 4);
}

/// A storage that counts reads and the largest page asked for, over the
/// memory backend.
#[derive(Debug, Default)]
struct CountingReads {
    inner: MemoryStorage,
    reads: AtomicUsize,
    largest: AtomicUsize,
    trim_after_first_read: Mutex<Option<u64>>,
}

impl CountingReads {
    fn count(&self, max: usize) {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.largest.fetch_max(max, Ordering::SeqCst);
    }

    async fn maybe_trim(&self) {
        let through = self.trim_after_first_read.lock().unwrap().take();
        if let Some(through) = through {
            self.inner.trim(through).await.unwrap();
        }
    }
}

#[async_trait]
impl Storage for CountingReads {
    async fn append(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        self.inner.append(batch).await
    }
    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        self.count(max);
        let page = self.inner.read(tag, from, max).await;
        self.maybe_trim().await;
        page
    }
    async fn read_versions(&self, tag: &LogTag, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        self.count(max);
        let page = self.inner.read_versions(tag, from, max).await;
        self.maybe_trim().await;
        page
    }
    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        self.inner.read_prev(tag, before).await
    }
    async fn tip(&self) -> Result<Tip> {
        self.inner.tip().await
    }
    async fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.inner.latest_version(tag).await
    }
    async fn streams(&self, from: Option<&LogTag>, max: usize) -> Result<Vec<StreamInfo>> {
        self.inner.streams(from, max).await
    }
    async fn trim(&self, through: u64) -> Result<()> {
        self.inner.trim(through).await
    }
    fn feed(&self) -> &CommitFeed {
        self.inner.feed()
    }
    fn kv(&self) -> Result<Arc<dyn KvStore>> {
        self.inner.kv()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
}

#[tokio::test]
async fn streams_fetch_bounded_pages_lazily() {
    let storage = Arc::new(CountingReads::default());
    let log = Log::from_arc(storage.clone());
    let (t, other) = (tag("t"), tag("other"));
    let total = 2 * weft::log::PAGE_ENTRIES + 10;
    let batch: Vec<AppendRequest> = (0..total)
        .flat_map(|i| {
            [
                AppendRequest::new(t.clone(), format!("{i}")),
                AppendRequest::new(other.clone(), "noise"),
            ]
        })
        .collect();
    log.append_batch(batch).await.unwrap();

    let mut stream = log.stream(&t, Position::Beginning);
    assert_eq!(
        storage.reads.load(Ordering::SeqCst),
        0,
        "nothing before a poll"
    );
    let first: Vec<LogEntry> = (&mut stream).take(5).try_collect().await.unwrap();
    assert_eq!(first.len(), 5);
    assert_eq!(storage.reads.load(Ordering::SeqCst), 1, "one page so far");
    let rest: Vec<LogEntry> = stream.try_collect().await.unwrap();
    assert_eq!(first.len() + rest.len(), total);
    let seqnums: Vec<u64> = first.iter().chain(&rest).map(|e| e.seqnum).collect();
    assert_eq!(
        seqnums,
        (0..total as u64).map(|i| 2 * i).collect::<Vec<_>>()
    );
    assert_eq!(storage.reads.load(Ordering::SeqCst), 3);
    assert_eq!(
        storage.largest.load(Ordering::SeqCst),
        weft::log::PAGE_ENTRIES
    );

    // By version, from the middle, through the view and the typed view.
    let versions: Vec<u64> = log
        .view(t.clone())
        .stream_versions(1500)
        .map_ok(|e| e.stream_version)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(versions, (1500..total as u64).collect::<Vec<_>>());
    let typed = log.typed_view(other.clone(), weft::JsonCodec::<u32>::new());
    let err = typed
        .stream(Position::Beginning)
        .next()
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "\"noise\" is no u32");
    // The Vec forms are the streams, collected.
    assert_eq!(
        log.read_after_version(&t, 1499).await.unwrap().len(),
        total - 1500
    );
}

#[tokio::test]
async fn a_trim_that_overtakes_a_stream_ends_it_with_trimmed() {
    let storage = Arc::new(CountingReads::default());
    let log = Log::from_arc(storage.clone());
    let t = tag("t");
    let n = weft::log::PAGE_ENTRIES + 5;
    log.append_batch(
        (0..n)
            .map(|i| AppendRequest::new(t.clone(), format!("{i}")))
            .collect(),
    )
    .await
    .unwrap();
    *storage.trim_after_first_read.lock().unwrap() = Some(n as u64 - 2);
    let items: Vec<Result<LogEntry>> = log.stream(&t, Position::Beginning).collect().await;
    assert_eq!(items.len(), weft::log::PAGE_ENTRIES + 1);
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    assert_eq!(
        err.detail(),
        Some(&ErrorDetail::Trimmed {
            requested: weft::log::PAGE_ENTRIES as u64,
            first_available: n as u64 - 1
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_bucket_writer_keeps_saying_fenced_with_both_epochs() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let old = BucketStorage::open(store.clone(), "log", bucket_options())
        .await
        .unwrap();
    let old_epoch = old.epoch();
    let old = Log::new(old);
    append_n(&old, &tag("t"), 2).await;
    let new = BucketStorage::open(store.clone(), "log", bucket_options())
        .await
        .unwrap();
    let new_epoch = new.epoch();
    let fenced = ErrorDetail::Fenced {
        ours: old_epoch,
        theirs: new_epoch,
    };
    // The append that finds out, and every one after it.
    for attempt in 0..3 {
        let err = old
            .append(AppendRequest::new(tag("t"), "zombie"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Fenced, "attempt {attempt}: {err}");
        assert_eq!(err.detail(), Some(&fenced), "attempt {attempt}: {err}");
    }
    // What was committed stays readable.
    assert_eq!(old.read_all(&tag("t")).await.unwrap().len(), 2);
    new.close().await.unwrap();
}
