//! Retention GC scenarios and helpers shared by `tests/local/gc.rs` (in memory)
//! and `tests/servers/gc_s3.rs` (SeaweedFS).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::wal::manifest;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};
use weft::clock::{Clock, ManualClock, SystemClock};
use weft::objects::RetryPolicy;
use weft::wal::KeepReason;
use weft::wal::{
    Cursor, CursorStore, FnApplier, Gc, GcReport, MemoryCursorStore, Producer, ProducerBuilder,
    Record, Replica, SnapshotWriter,
};
use weft::{ErrorKind, Result};

pub const MANIFEST: &str = "wal/manifest";

pub const SEGMENTS: &str = "wal/seg";

pub const HOUR: Duration = Duration::from_secs(3600);

/// Opening fences any earlier writer at once (the failover these tests
/// make on purpose; the writer lease has its own tests).
pub fn builder(store: Arc<dyn ObjectStore>) -> ProducerBuilder {
    Producer::builder(store, MANIFEST, SEGMENTS)
        .with_take_over(true)
        .with_flush_interval(Duration::from_millis(5))
        .with_retry_policy(
            RetryPolicy::default()
                .with_max_attempts(4)
                .with_base_backoff(Duration::from_millis(2))
                .with_max_backoff(Duration::from_millis(20))
                .with_jitter(0.5),
        )
}

/// A clock reading the system time shifted by `ahead`.
pub fn later(ahead: Duration) -> Arc<dyn Clock> {
    ManualClock::new(SystemClock.now_ms() + ahead.as_millis() as u64)
}

pub fn gc(store: &Arc<dyn ObjectStore>, clock: Arc<dyn Clock>) -> Gc {
    Gc::new(store.clone(), MANIFEST, SEGMENTS)
        .with_grace(HOUR)
        .with_clock(clock)
}

pub async fn list(store: &Arc<dyn ObjectStore>, prefix: &str) -> BTreeSet<String> {
    store
        .list(Some(&Path::from(prefix)))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap()
}

pub async fn append(p: &Producer, text: &str) -> u64 {
    p.append(vec![Bytes::from(text.to_owned())], None)
        .await
        .unwrap()
        .wait()
        .await
        .unwrap()
}

pub fn deleted(r: &GcReport) -> BTreeSet<String> {
    r.deleted.iter().map(|o| o.location.clone()).collect()
}

pub fn kept(r: &GcReport, reason: KeepReason) -> BTreeSet<String> {
    r.kept
        .iter()
        .filter(|k| k.reason == reason)
        .map(|k| k.object.location.clone())
        .collect()
}

pub type Seen = Arc<std::sync::Mutex<Vec<String>>>;

pub fn texts(seen: &Seen) -> Vec<String> {
    seen.lock().unwrap().clone()
}

pub fn collecting() -> (Seen, impl weft::wal::Applier) {
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let applier = FnApplier::new(move |r: &Record| {
        sink.lock()
            .unwrap()
            .push(String::from_utf8(r.data.to_vec()).unwrap());
        Ok(())
    });
    (seen, applier)
}

/// A restoring applier whose state is the list of records seen, snapshot
/// included (a snapshot's bytes are its records joined by commas).
pub struct Joined(pub Vec<String>);

#[async_trait::async_trait]
impl weft::wal::Applier for Joined {
    async fn apply(&mut self, r: &Record) -> Result<()> {
        self.0.push(String::from_utf8(r.data.to_vec()).unwrap());
        Ok(())
    }
    async fn restore(&mut self, s: Bytes, _through: u64) -> Result<()> {
        self.0 = String::from_utf8(s.to_vec())
            .unwrap()
            .split(',')
            .map(str::to_owned)
            .collect();
        Ok(())
    }
}

pub async fn gc_collects_what_no_manifest_needs(store: Arc<dyn ObjectStore>) {
    // Writer 1 commits two segments, then writer 2 fences it.
    let w1 = builder(store.clone()).open().await.unwrap();
    append(&w1, "a").await;
    append(&w1, "b").await;
    let w2 = builder(store.clone()).open().await.unwrap();
    // The fenced writer still uploads; its commit fails: a zombie object.
    let zombie = w1
        .append(vec![Bytes::from("zombie")], None)
        .await
        .unwrap()
        .wait()
        .await
        .unwrap_err();
    assert_eq!(zombie.kind(), ErrorKind::Fenced);
    let zombie_path = format!("{SEGMENTS}/{}/{:016x}", w1.run_id(), 2);
    append(&w2, "c").await;
    append(&w2, "d").await;
    // A replica that tails everything, before retention.
    let (seen, applier) = collecting();
    let mut tail = Replica::builder(store.clone(), MANIFEST, applier).build();
    tail.poll().await.unwrap();
    assert_eq!(texts(&seen), ["a", "b", "c", "d"]);

    // Snapshot through b (drops a, b), then through c (drops c): the first
    // snapshot is superseded.
    let snaps = SnapshotWriter::new(store.clone(), MANIFEST);
    let s1 = snaps.write(&w2, Bytes::from("a,b"), 1).await.unwrap();
    let s2 = snaps.write(&w2, Bytes::from("a,b,c"), 2).await.unwrap();
    // An upload of the current writer above its last commit: in flight.
    let in_flight = format!("{SEGMENTS}/{}/{:016x}", w2.run_id(), 9);
    store
        .put(
            &Path::from(in_flight.as_str()),
            PutPayload::from_static(b"x"),
        )
        .await
        .unwrap();
    // Something GC did not write and does not understand.
    let foreign = format!("{SEGMENTS}/README");
    store
        .put(
            &Path::from(foreign.as_str()),
            PutPayload::from_static(b"hi"),
        )
        .await
        .unwrap();

    let m = manifest(&store, MANIFEST).await;
    let live: BTreeSet<String> = m.entries().iter().map(|e| e.location.clone()).collect();
    assert_eq!(live.len(), 1, "only d's segment is live");
    let all_segments = list(&store, SEGMENTS).await;
    let garbage: BTreeSet<String> = all_segments
        .iter()
        .filter(|l| !live.contains(*l) && **l != in_flight && **l != foreign)
        .cloned()
        .chain([s1.location.clone()])
        .collect();
    assert!(garbage.contains(&zombie_path), "{garbage:?}");
    assert_eq!(garbage.len(), 5, "a, b, zombie, c and the first snapshot");

    // Now: everything is young; nothing goes.
    let report = gc(&store, later(Duration::ZERO)).run().await.unwrap();
    assert!(report.deleted.is_empty(), "{report:?}");
    assert_eq!(kept(&report, KeepReason::Young), garbage);
    assert_eq!(report.referenced, 2, "d's segment and the current snapshot");
    assert_eq!(report.epoch, w2.epoch());

    // Two hours on, a dry run names the garbage and deletes nothing.
    let before = list(&store, "wal").await;
    let dry = gc(&store, later(2 * HOUR))
        .dry_run(true)
        .run()
        .await
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!(deleted(&dry), garbage);
    assert_eq!(
        kept(&dry, KeepReason::InFlight),
        BTreeSet::from([in_flight.clone()])
    );
    assert_eq!(
        kept(&dry, KeepReason::Unrecognised),
        BTreeSet::from([foreign.clone()])
    );
    assert_eq!(list(&store, "wal").await, before);

    // The real pass deletes exactly that.
    let real = gc(&store, later(2 * HOUR)).run().await.unwrap();
    assert_eq!(deleted(&real), garbage);
    assert_eq!(real.deleted_bytes, dry.deleted_bytes);
    let after = list(&store, "wal").await;
    let expect: BTreeSet<String> = before.difference(&garbage).cloned().collect();
    assert_eq!(after, expect);
    assert!(after.contains(&s2.location) && after.contains(MANIFEST));
    // Running it again finds nothing more.
    assert!(
        gc(&store, later(2 * HOUR))
            .run()
            .await
            .unwrap()
            .deleted
            .is_empty()
    );

    // The log still works for everyone: the tailing replica goes on, a new
    // one bootstraps from the current snapshot.
    append(&w2, "e").await;
    tail.poll().await.unwrap();
    assert_eq!(texts(&seen), ["a", "b", "c", "d", "e"]);
    let mut fresh = Replica::builder(store.clone(), MANIFEST, Joined(Vec::new())).build();
    fresh.poll().await.unwrap();
    assert_eq!(fresh.applier().0, ["a", "b", "c", "d", "e"]);
    // A replica whose cursor was in the collected part is told it was
    // trimmed.
    let stale = MemoryCursorStore::new();
    stale.save(Cursor::at_entry(0)).await.unwrap();
    let (_, applier) = collecting();
    let mut behind = Replica::builder(store.clone(), MANIFEST, applier)
        .with_cursor_store(stale)
        .build();
    assert_eq!(behind.poll().await.unwrap_err().kind(), ErrorKind::Trimmed);
    w2.close().await.unwrap();
    assert_eq!(w1.close().await.unwrap_err().kind(), ErrorKind::Fenced);
}
