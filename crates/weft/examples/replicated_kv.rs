//! A replicated key-value store on the bucket WAL: the typical use of
//! `weft::wal` on its own.
//!
//! * The **producer** turns every `put` and `delete` into one record and
//!   appends it; the WAL makes it durable in the bucket and numbers it.
//! * Each **replica** tails the WAL and applies the records to a local
//!   embedded store (fjall). The record's effect and the replica's applied
//!   position are written in one atomic batch, so a replica stopped at any
//!   point applies every record exactly once when it resumes — even though
//!   the WAL delivers records at least once after a restart.
//! * A **new replica** does not replay history: it restores the newest
//!   snapshot the producer stored (the whole map as of one record) and tails
//!   from the record after it.
//!
//! The example runs two replicas, stops one abruptly mid-stream (its task
//! aborted and its handles dropped, with no close), restarts it from its
//! directory, takes a snapshot that truncates the log, bootstraps a third
//! replica from it, and checks that all three hold exactly the producer's
//! map. The bucket is in memory here; an S3 or Azure bucket is the same
//! code with another `ObjectStore`.
//!
//! Run with `cargo run -p weft --example replicated_kv`.

use std::collections::BTreeMap;
use std::path::Path as FsPath;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use weft::clock;
use weft::wal::{Applier, Cursor, CursorStore, Producer, Record, Replica, write_snapshot};
use weft::{Error, Result};

const MANIFEST: &str = "kv/manifest";
const SEGMENTS: &str = "kv/segments";

/// One change to the map, as the producer writes it into a record.
#[derive(Clone, Debug, PartialEq)]
enum Op {
    Put { key: String, value: String },
    Delete { key: String },
}

impl Op {
    /// `P key\tvalue` or `D key`: keys hold no tab.
    fn encode(&self) -> Bytes {
        match self {
            Op::Put { key, value } => Bytes::from(format!("P{key}\t{value}")),
            Op::Delete { key } => Bytes::from(format!("D{key}")),
        }
    }

    fn decode(bytes: &[u8]) -> Result<Op> {
        let text =
            std::str::from_utf8(bytes).map_err(|_| Error::corrupt("a KV record is not UTF-8"))?;
        match text.split_at_checked(1) {
            Some(("P", rest)) => {
                let (key, value) = rest
                    .split_once('\t')
                    .ok_or_else(|| Error::corrupt("a put record has no value"))?;
                Ok(Op::Put {
                    key: key.to_owned(),
                    value: value.to_owned(),
                })
            }
            Some(("D", key)) => Ok(Op::Delete {
                key: key.to_owned(),
            }),
            _ => Err(Error::corrupt("a KV record of unknown kind")),
        }
    }

    fn apply_to(&self, map: &mut BTreeMap<String, String>) {
        match self {
            Op::Put { key, value } => {
                map.insert(key.clone(), value.clone());
            }
            Op::Delete { key } => {
                map.remove(key);
            }
        }
    }
}

fn fjall_error(e: fjall::Error) -> Error {
    Error::internal(format!("the replica's local store: {e}"))
}

/// A replica's local store: the map, and in `meta` the last record applied
/// and the WAL cursor.
#[derive(Clone)]
struct LocalStore {
    db: fjall::Database,
    data: fjall::Keyspace,
    meta: fjall::Keyspace,
}

const APPLIED: &str = "applied";
const CURSOR: &str = "cursor";

impl LocalStore {
    fn open(dir: &FsPath) -> Result<LocalStore> {
        let db = fjall::Database::builder(dir).open().map_err(fjall_error)?;
        let data = db
            .keyspace("data", fjall::KeyspaceCreateOptions::default)
            .map_err(fjall_error)?;
        let meta = db
            .keyspace("meta", fjall::KeyspaceCreateOptions::default)
            .map_err(fjall_error)?;
        Ok(LocalStore { db, data, meta })
    }

    fn read_u64(&self, key: &str) -> Result<Option<u64>> {
        let Some(v) = self.meta.get(key).map_err(fjall_error)? else {
            return Ok(None);
        };
        let bytes: [u8; 8] = v
            .as_ref()
            .try_into()
            .map_err(|_| Error::corrupt("a replica position is not 8 bytes"))?;
        Ok(Some(u64::from_be_bytes(bytes)))
    }

    /// The sequence of the last record whose effect is in the map.
    fn applied(&self) -> Result<Option<u64>> {
        self.read_u64(APPLIED)
    }

    /// Commits `batch` and syncs it: what is applied survives a crash.
    fn commit(&self, batch: fjall::OwnedWriteBatch) -> Result<()> {
        batch.commit().map_err(fjall_error)?;
        self.db
            .persist(fjall::PersistMode::SyncData)
            .map_err(fjall_error)
    }

    fn map(&self) -> Result<BTreeMap<String, String>> {
        let mut map = BTreeMap::new();
        for kv in self.data.iter() {
            let (k, v) = kv.into_inner().map_err(fjall_error)?;
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            map.insert(text(&k), text(&v));
        }
        Ok(map)
    }
}

#[async_trait]
impl Applier for LocalStore {
    async fn apply(&mut self, record: &Record) -> Result<()> {
        let seq = record.sequence.ok_or_else(|| {
            Error::invalid_input("this replica needs a manifest that numbers records (v3 on)")
        })?;
        if self.applied()?.is_some_and(|applied| seq <= applied) {
            return Ok(()); // delivered again after a restart: already in the map
        }
        let mut batch = self.db.batch();
        match Op::decode(&record.data)? {
            Op::Put { key, value } => batch.insert(&self.data, key, value),
            Op::Delete { key } => batch.remove(&self.data, key),
        }
        batch.insert(&self.meta, APPLIED, seq.to_be_bytes());
        self.commit(batch)
    }

    async fn restore(&mut self, snapshot: Bytes, through_seq: u64) -> Result<()> {
        let mut batch = self.db.batch();
        for kv in self.data.iter() {
            let key = kv.key().map_err(fjall_error)?;
            batch.remove(&self.data, key);
        }
        for line in snapshot.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            match Op::decode(line)? {
                Op::Put { key, value } => batch.insert(&self.data, key, value),
                Op::Delete { .. } => return Err(Error::corrupt("a snapshot holds a delete")),
            }
        }
        batch.insert(&self.meta, APPLIED, through_seq.to_be_bytes());
        self.commit(batch)
    }
}

/// The WAL cursor, kept in the same local store.
struct LocalCursor(LocalStore);

#[async_trait]
impl CursorStore for LocalCursor {
    async fn load(&self) -> Result<Option<Cursor>> {
        let Some(v) = self.0.meta.get(CURSOR).map_err(fjall_error)? else {
            return Ok(None);
        };
        weft::format::replica_cursor::decode_cursor(&v).map(Some)
    }

    async fn save(&self, cursor: Cursor) -> Result<()> {
        let mut batch = self.0.db.batch();
        let bytes = weft::format::replica_cursor::encode_cursor(cursor);
        batch.insert(&self.0.meta, CURSOR, bytes.as_ref());
        self.0.commit(batch)
    }
}

/// A replica over the local store in `dir`, its cursor beside its data.
fn replica(store: &Arc<dyn ObjectStore>, dir: &FsPath) -> Result<Replica<LocalStore>> {
    let local = LocalStore::open(dir)?;
    Ok(Replica::builder(store.clone(), MANIFEST, local.clone())
        .with_cursor_store(LocalCursor(local))
        .with_poll_interval(Duration::from_millis(5))
        .build())
}

/// Polls until the replica has applied everything through `through`.
async fn catch_up(replica: &mut Replica<LocalStore>, through: u64) -> Result<()> {
    while replica.applier().applied()? < Some(through) {
        replica.poll().await?;
    }
    Ok(())
}

/// Appends `op` as one record, waits until it is durable, and applies it to
/// the producer's own copy of the map. Returns its sequence.
async fn write(producer: &Producer, op: Op, map: &mut BTreeMap<String, String>) -> Result<u64> {
    let seq = producer
        .append(vec![op.encode()], None)
        .await?
        .wait()
        .await?;
    op.apply_to(map);
    Ok(seq)
}

/// Runs the scenario; an assertion fails if any replica ends elsewhere.
#[tokio::main]
pub async fn main() -> Result<()> {
    let dirs = tempfile::tempdir().map_err(|e| Error::io("make a temporary directory", e))?;
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let producer = Producer::builder(store.clone(), MANIFEST, SEGMENTS)
        .with_flush_interval(Duration::from_millis(2))
        .open()
        .await?;
    let mut truth = BTreeMap::new();
    let mut last = 0;
    for i in 0..40u32 {
        let key = format!("user/{}", i % 13);
        let op = if i % 7 == 6 {
            Op::Delete { key }
        } else {
            Op::Put {
                key,
                value: format!("v{i}"),
            }
        };
        last = write(&producer, op, &mut truth).await?;
    }

    // Replica A keeps up; replica B is stopped abruptly part-way.
    let mut a = replica(&store, &dirs.path().join("a"))?;
    catch_up(&mut a, last).await?;
    let b_dir = dirs.path().join("b");
    let mut b = replica(&store, &b_dir)?;
    let stopped_at = last / 2;
    catch_up(&mut b, stopped_at).await?;
    // B tails on its own, polling every few milliseconds, until it is killed.
    let running = tokio::spawn(async move { b.run(std::future::pending()).await });
    for i in 0..20u32 {
        let op = Op::Put {
            key: format!("order/{i}"),
            value: "placed".into(),
        };
        last = write(&producer, op, &mut truth).await?;
    }
    running.abort(); // a crash at an await point: no close, nothing flushed by us
    let _ = running.await;

    // B restarts from its directory and converges without applying anything twice.
    let mut b = replica(&store, &b_dir)?;
    catch_up(&mut a, last).await?;
    catch_up(&mut b, last).await?;
    assert_eq!(a.applier().map()?, truth, "replica A converges");
    assert_eq!(
        b.applier().map()?,
        truth,
        "replica B converges after its restart"
    );

    // A snapshot of the map through `last` replaces the history before it.
    let snapshot: Vec<u8> = truth
        .iter()
        .flat_map(|(key, value)| {
            let mut line = Op::Put {
                key: key.clone(),
                value: value.clone(),
            }
            .encode()
            .to_vec();
            line.push(b'\n');
            line
        })
        .collect();
    write_snapshot(
        store.clone(),
        &producer,
        snapshot.into(),
        last,
        clock::system(),
    )
    .await?;
    last = write(
        &producer,
        Op::Delete {
            key: "user/1".into(),
        },
        &mut truth,
    )
    .await?;

    // Replica C starts with nothing: it restores the snapshot, then tails.
    let mut c = replica(&store, &dirs.path().join("c"))?;
    let first = c.poll().await?;
    assert!(
        first.restored_snapshot,
        "a new replica bootstraps from the snapshot"
    );
    for r in [&mut a, &mut b, &mut c] {
        catch_up(r, last).await?;
        assert_eq!(r.applier().map()?, truth);
    }
    println!(
        "three replicas hold the producer's {} keys through record {last}",
        truth.len()
    );
    producer.close().await
}
