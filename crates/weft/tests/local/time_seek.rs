//! Reads and subscriptions from a time: timestamps stay monotonic when the
//! writer's clock goes back (also across a reopen), `seek_time` finds the
//! first entry at or after a time, and it does so in O(log n) reads.
//! Every single-writer backend here (memory, dir, bucket on an in-memory
//! store); the conformance suite covers PostgreSQL and the server with the
//! system clock.

#![allow(clippy::disallowed_methods)]

use crate::support;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use weft::clock::{Clock, ManualClock};
use weft::storage::bucket::BucketStorage;
use weft::storage::{Capabilities, CommitFeed, NewEntry};
use weft::{
    AppendRequest, AppendResult, DirStorage, Log, LogEntry, LogTag, MemoryStorage, Position,
    Result, Storage, Tip,
};

type Opener =
    Box<dyn Fn(Arc<dyn Clock>) -> Pin<Box<dyn Future<Output = Log> + Send>> + Send + Sync>;

fn tag(s: &str) -> LogTag {
    s.parse().unwrap()
}

/// The first seqnum with a timestamp `>= t`, by looking at every entry.
fn first_at_or_after(entries: &[LogEntry], t: u64, next: u64) -> u64 {
    entries
        .iter()
        .find(|e| e.timestamp_ms >= t)
        .map_or(next, |e| e.seqnum)
}

/// Appends under a clock that moves forward, steps back, and catches up;
/// reopens (when the backend can) with the clock further back; then checks
/// monotonic stamps and every lookup by time against a linear scan.
async fn clock_going_back(open: Opener, reopens: bool) {
    let clock = ManualClock::new(1_000_000);
    let mut log = open(clock.clone()).await;
    // (clock before the step, entries appended one by one)
    let steps: &[(u64, usize)] = &[
        (1_000_000, 3),
        (1_000_010, 2),
        (999_000, 3), // back by a second: stamped 1_000_010 until it catches up
        (1_000_005, 1),
        (1_000_020, 2),
    ];
    let mut stamps = Vec::new();
    for &(now, n) in steps {
        clock.set(now);
        for i in 0..n {
            let r = log
                .append(AppendRequest::new(tag("t"), format!("{now}/{i}")))
                .await
                .unwrap();
            stamps.push(r.timestamp_ms);
        }
    }
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
    // Two stamped at 1_000_010, then four while the clock is behind it.
    assert_eq!(
        stamps[3..9],
        [1_000_010; 6],
        "held at the newest while behind"
    );
    if reopens {
        log.close().await.unwrap();
        clock.set(990_000);
        log = open(clock.clone()).await;
        let r = log
            .append(AppendRequest::new(tag("t"), "reopened"))
            .await
            .unwrap();
        assert_eq!(
            r.timestamp_ms, 1_000_020,
            "a reopened writer keeps the newest stamp"
        );
    }
    let entries = log.read_log(Position::Beginning, usize::MAX).await.unwrap();
    let times: Vec<u64> = entries.iter().map(|e| e.timestamp_ms).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let next = log.tip().await.unwrap().next;
    for t in [
        0,
        999_000,
        1_000_000,
        1_000_001,
        1_000_010,
        1_000_011,
        1_000_020,
        1_000_021,
        u64::MAX,
    ] {
        let want = first_at_or_after(&entries, t, next);
        assert_eq!(log.storage().seek_time(t).await.unwrap(), want, "seek {t}");
        let page = log.read_log(Position::Since(t), 1).await.unwrap();
        assert_eq!(
            page.first().map(|e| e.seqnum),
            (want < next).then_some(want),
            "read since {t}"
        );
        if want < next {
            let mut sub = log.subscribe_log(Position::Since(t));
            let first = sub.next().await.unwrap().unwrap();
            assert_eq!(first.seqnum, want, "subscribe since {t}");
        }
    }
    log.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_clock_going_back() {
    clock_going_back(
        Box::new(|clock| Box::pin(async move { Log::new(MemoryStorage::with_clock(clock)) })),
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dir_clock_going_back() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let path = dir.path().to_path_buf();
    clock_going_back(
        Box::new(move |clock| {
            let path = path.clone();
            Box::pin(async move {
                Log::new(
                    DirStorage::open_with_clock(&path, Default::default(), clock)
                        .await
                        .unwrap(),
                )
            })
        }),
        true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_clock_going_back() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    clock_going_back(
        Box::new(move |clock| {
            let store = store.clone();
            Box::pin(async move {
                Log::new(
                    BucketStorage::open_with_clock(
                        store,
                        "log",
                        support::bucket_log_cases::options(),
                        clock,
                    )
                    .await
                    .unwrap(),
                )
            })
        }),
        true,
    )
    .await;
}

/// A memory backend that counts its reads.
struct Counting {
    inner: MemoryStorage,
    reads: AtomicU64,
}

#[async_trait]
impl Storage for Counting {
    async fn append(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        self.inner.append(batch).await
    }
    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read(tag, from, max).await
    }
    async fn read_versions(&self, tag: &LogTag, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        self.inner.read_versions(tag, from, max).await
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
    async fn trim(&self, through: u64) -> Result<()> {
        self.inner.trim(through).await
    }
    async fn streams(&self, from: Option<&LogTag>, max: usize) -> Result<Vec<weft::StreamInfo>> {
        self.inner.streams(from, max).await
    }
    fn feed(&self) -> &CommitFeed {
        self.inner.feed()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
}

/// On a log of 2^16 entries, each second apart, every lookup takes at
/// most log2(n) + 1 single-entry reads, and finds the right entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_time_reads_logarithmically() {
    let clock = ManualClock::new(0);
    let storage = Arc::new(Counting {
        inner: MemoryStorage::with_clock(clock.clone()),
        reads: AtomicU64::new(0),
    });
    let log = Log::from_arc(storage.clone());
    let n = 1u64 << 16;
    for chunk in 0..(n / 1024) {
        let batch = (0..1024)
            .map(|i| AppendRequest::new(tag("t"), Bytes::from(format!("{chunk}/{i}"))))
            .collect();
        // One batch per clock second: entries of a batch share a stamp.
        clock.set(chunk * 1000);
        log.append_batch(batch).await.unwrap();
    }
    for chunk in [0, 1, 17, 63, 64] {
        storage.reads.store(0, Ordering::SeqCst);
        let got = storage.seek_time(chunk * 1000).await.unwrap();
        assert_eq!(got, (chunk * 1024).min(n), "second {chunk}");
        let reads = storage.reads.load(Ordering::SeqCst);
        assert!(reads <= 17, "{reads} reads for 2^16 entries");
    }
}
