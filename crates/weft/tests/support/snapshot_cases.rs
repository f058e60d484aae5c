//! Base-snapshot scenarios and helpers shared by `tests/local/snapshot.rs` (in
//! memory) and `tests/servers/snapshot_s3.rs` (SeaweedFS).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::wal::manifest;
use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::ObjectStore;
use object_store::path::Path;
use weft::clock::ManualClock;
use weft::objects::RetryPolicy;
use weft::wal::{
    Applier, Cursor, CursorStore, MemoryCursorStore, Producer, ProducerBuilder, Record, Replica,
    SnapshotWriter, write_snapshot,
};
use weft::{Error, ErrorKind, Result};

pub const MANIFEST: &str = "wal/manifest";

pub const SEGMENTS: &str = "wal/seg";

pub const START_MS: u64 = 1_700_000_000_000;

/// Opening fences any earlier writer at once (the failover these tests
/// make on purpose; the writer lease has its own tests).
pub fn builder(store: Arc<dyn ObjectStore>) -> ProducerBuilder {
    Producer::builder(store, MANIFEST, SEGMENTS)
        .with_take_over(true)
        .with_flush_interval(Duration::from_millis(5))
        .with_retry_policy(
            RetryPolicy::default()
                .with_max_attempts(10)
                .with_base_backoff(Duration::from_millis(2))
                .with_max_backoff(Duration::from_millis(100))
                .with_jitter(0.5),
        )
}

/// Records are `key=value`; the state is the last value of every key.
#[derive(Default)]
pub struct KvState {
    pub state: BTreeMap<String, String>,
    pub restored: Option<u64>,
    pub applied: Vec<u64>,
}

#[async_trait]
impl Applier for KvState {
    async fn apply(&mut self, record: &Record) -> Result<()> {
        let text = std::str::from_utf8(&record.data).map_err(|e| Error::corrupt(e.to_string()))?;
        let (k, v) = text
            .split_once('=')
            .ok_or_else(|| Error::corrupt(format!("not a k=v record: {text}")))?;
        self.state.insert(k.to_owned(), v.to_owned());
        self.applied
            .push(record.sequence.expect("v4 numbers records"));
        Ok(())
    }

    async fn restore(&mut self, snapshot: Bytes, through_seq: u64) -> Result<()> {
        self.state =
            serde_json::from_slice(&snapshot).map_err(|e| Error::corrupt(e.to_string()))?;
        self.restored = Some(through_seq);
        Ok(())
    }
}

pub fn recs(items: &[&str]) -> Vec<Bytes> {
    items.iter().map(|s| Bytes::from(s.to_string())).collect()
}

pub async fn append(p: &Producer, items: &[&str]) -> u64 {
    p.append(recs(items), None)
        .await
        .unwrap()
        .wait()
        .await
        .unwrap()
}

/// The state after folding the first `n` records of `log`.
pub fn fold(log: &[&str], n: usize) -> BTreeMap<String, String> {
    let mut state = BTreeMap::new();
    for r in &log[..n] {
        let (k, v) = r.split_once('=').unwrap();
        state.insert(k.to_owned(), v.to_owned());
    }
    state
}

pub async fn list(store: &Arc<dyn ObjectStore>, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = store
        .list(Some(&Path::from(prefix)))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    names.sort();
    names
}

pub fn new_replica(store: &Arc<dyn ObjectStore>) -> Replica<KvState> {
    Replica::builder(store.clone(), MANIFEST, KvState::default()).build()
}

pub async fn snapshot_bootstraps_new_replicas(store: Arc<dyn ObjectStore>) {
    let clock = ManualClock::new(START_MS);
    let p = builder(store.clone())
        .with_clock(clock.clone())
        .open()
        .await
        .unwrap();
    let mut log = vec!["a=1", "b=1", "c=1"];
    assert_eq!(append(&p, &log[0..3]).await, 0);
    log.extend(["a=2", "d=1"]);
    assert_eq!(append(&p, &log[3..5]).await, 3);
    log.extend(["b=2", "e=1", "a=3", "f=1"]);
    assert_eq!(append(&p, &log[5..9]).await, 5);

    // A replica that tails from the start, before any snapshot.
    let old_cursor = MemoryCursorStore::new();
    let mut old = Replica::builder(store.clone(), MANIFEST, KvState::default())
        .with_cursor_store(old_cursor.clone())
        .build();
    assert_eq!(old.poll().await.unwrap().applied, 9);

    // Snapshot of the state through record 4 (the end of the second append).
    clock.advance(1_000);
    let bytes = Bytes::from(serde_json::to_vec(&fold(&log, 5)).unwrap());
    let pointer = write_snapshot(store.clone(), &p, bytes.clone(), 4, clock.clone())
        .await
        .unwrap();
    assert!(
        pointer
            .location
            .starts_with("wal/snapshots/0000000000000004-"),
        "{}",
        pointer.location
    );
    assert_eq!(pointer.created_ms, (START_MS + 1_000) as i64);
    let stored = store
        .get(&Path::from(pointer.location.as_str()))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(stored, bytes);
    let m = manifest(&store, MANIFEST).await;
    assert_eq!(m.snapshot(), Some(&pointer));
    assert_eq!(
        m.first_sequence(),
        5,
        "the two superseded entries were dropped"
    );
    assert_eq!(m.len(), 1);
    assert_eq!(m.epoch(), p.epoch(), "recording a snapshot claims nothing");

    // The writer goes on after the snapshot.
    log.extend(["c=2", "g=1"]);
    assert_eq!(append(&p, &log[9..11]).await, 9);

    // A new replica restores, then applies exactly the records after it.
    let mut fresh = new_replica(&store);
    let out = fresh.poll().await.unwrap();
    assert!(out.restored_snapshot);
    assert_eq!(out.applied, 6);
    assert_eq!(fresh.applier().restored, Some(4));
    assert_eq!(fresh.applier().applied, (5..11).collect::<Vec<_>>());
    assert_eq!(fresh.applier().state, fold(&log, 11));
    assert_eq!(fresh.cursor(), Some(Cursor::at_entry(11)));

    // The replica that was already tailing goes on from its cursor.
    let out = old.poll().await.unwrap();
    assert!(!out.restored_snapshot);
    assert_eq!(old.applier().applied, (0..11).collect::<Vec<_>>());
    assert_eq!(old.applier().state, fresh.applier().state);

    // A replica whose saved cursor is in the truncated part is told so.
    let stale = MemoryCursorStore::new();
    stale.save(Cursor::at_entry(3)).await.unwrap();
    let mut behind = Replica::builder(store.clone(), MANIFEST, KvState::default())
        .with_cursor_store(stale)
        .build();
    let err = behind.poll().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    assert!(err.message().contains(&pointer.location), "{err}");
    assert!(behind.applier().applied.is_empty());

    // A second snapshot through a record inside the live entry 5..9: that
    // entry straddles it and stays; a new replica skips its first records.
    clock.advance(1_000);
    let second = SnapshotWriter::new(store.clone(), MANIFEST)
        .with_clock(clock.clone())
        .write(
            &p,
            Bytes::from(serde_json::to_vec(&fold(&log, 7)).unwrap()),
            6,
        )
        .await
        .unwrap();
    let m = manifest(&store, MANIFEST).await;
    assert_eq!(m.first_sequence(), 5);
    assert_eq!(m.snapshot(), Some(&second));
    let mut fresh = new_replica(&store);
    fresh.poll().await.unwrap();
    assert_eq!(fresh.applier().restored, Some(6));
    assert_eq!(fresh.applier().applied, (7..11).collect::<Vec<_>>());
    assert_eq!(fresh.applier().state, fold(&log, 11));

    // Refused: a snapshot of records the log does not have. It is refused
    // before anything is stored; both recorded snapshots are still there
    // (the first is only superseded: GC's business).
    let err = SnapshotWriter::new(store.clone(), MANIFEST)
        .write(&p, Bytes::from_static(b"{}"), 11)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        list(&store, "wal/snapshots").await,
        vec![pointer.location.clone(), second.location.clone()]
    );
    assert_eq!(manifest(&store, MANIFEST).await.snapshot(), Some(&second));
    assert!(
        p.halted().is_none(),
        "a refused snapshot does not halt the writer"
    );
    assert_eq!(append(&p, &["h=1"]).await, 11);
    p.close().await.unwrap();
}

pub async fn a_tool_snapshots_beside_a_live_writer(store: Arc<dyn ObjectStore>) {
    let p = builder(store.clone()).open().await.unwrap();
    let log = ["a=1", "b=1", "a=2", "c=1"];
    append(&p, &log[0..2]).await;
    append(&p, &log[2..4]).await;
    let epoch = p.epoch();
    let pointer = SnapshotWriter::new(store.clone(), MANIFEST)
        .write_unowned(
            &Path::from(MANIFEST),
            Bytes::from(serde_json::to_vec(&fold(&log, 2)).unwrap()),
            1,
        )
        .await
        .unwrap();
    // The writer's next commit lands on top of the tool's edit.
    assert_eq!(append(&p, &["d=1"]).await, 4);
    assert!(p.halted().is_none());
    let m = manifest(&store, MANIFEST).await;
    assert_eq!(m.epoch(), epoch, "the tool fenced nobody");
    assert_eq!(m.snapshot(), Some(&pointer));
    assert_eq!(m.first_sequence(), 2);
    assert_eq!(m.next_sequence(), 5);
    let mut fresh = new_replica(&store);
    fresh.poll().await.unwrap();
    assert_eq!(fresh.applier().restored, Some(1));
    assert_eq!(fresh.applier().applied, vec![2, 3, 4]);
    // The writer's own maintenance sees the tool's pointer: truncating
    // past it would strand new replicas, so that is refused; a newer
    // snapshot through the writer works.
    let err = p.truncate_through(3).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(p.halted().is_none());
    let all = ["a=1", "b=1", "a=2", "c=1", "d=1"];
    SnapshotWriter::new(store.clone(), MANIFEST)
        .write(
            &p,
            Bytes::from(serde_json::to_vec(&fold(&all, 4)).unwrap()),
            3,
        )
        .await
        .unwrap();
    assert_eq!(manifest(&store, MANIFEST).await.first_sequence(), 4);
    p.close().await.unwrap();

    // Without a manifest a tool changes nothing.
    let err = SnapshotWriter::new(store.clone(), "other/manifest")
        .write_unowned(&Path::from("other/manifest"), Bytes::from_static(b"x"), 0)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(list(&store, "other").await.is_empty());
}

pub async fn an_object_cursor_carries_a_replica_across_restarts(store: Arc<dyn ObjectStore>) {
    use weft::wal::ObjectCursorStore;
    let p = builder(store.clone()).open().await.unwrap();
    let log = ["a=1", "b=1", "a=2", "c=1", "b=2"];
    append(&p, &log[0..2]).await;
    append(&p, &log[2..4]).await;
    write_snapshot(
        store.clone(),
        &p,
        Bytes::from(serde_json::to_vec(&fold(&log, 2)).unwrap()),
        1,
        ManualClock::new(START_MS),
    )
    .await
    .unwrap();
    let cursor_path = Path::from("replicas/r1.cursor");
    let cursors = || ObjectCursorStore::new(store.clone(), cursor_path.clone());
    let mut first = Replica::builder(store.clone(), MANIFEST, KvState::default())
        .with_cursor_store(cursors())
        .build();
    assert!(first.poll().await.unwrap().restored_snapshot);
    assert_eq!(first.applier().applied, vec![2, 3]);
    assert_eq!(cursors().load().await.unwrap(), Some(Cursor::at_entry(4)));
    append(&p, &log[4..5]).await;
    // A new process with the same cursor object: no restore, only what is
    // new.
    let mut second = Replica::builder(store.clone(), MANIFEST, KvState::default())
        .with_cursor_store(cursors())
        .build();
    let out = second.poll().await.unwrap();
    assert!(!out.restored_snapshot);
    assert_eq!(second.applier().applied, vec![4]);
    assert_eq!(cursors().load().await.unwrap(), Some(Cursor::at_entry(5)));
    // A damaged cursor object is an error, not a restart from scratch.
    store
        .put(&cursor_path, Bytes::from_static(b"not a cursor").into())
        .await
        .unwrap();
    let mut third = Replica::builder(store.clone(), MANIFEST, KvState::default())
        .with_cursor_store(cursors())
        .build();
    assert_eq!(third.poll().await.unwrap_err().kind(), ErrorKind::Corrupt);
    assert!(third.applier().applied.is_empty() && third.applier().restored.is_none());
    p.close().await.unwrap();
}
