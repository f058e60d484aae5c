//! One judgement of a bucket log's data, three consumers: opening its
//! writer (`BucketStorage::open`), reading it (`BucketFollower`) and
//! checking it (`storage::bucket::check`, what `weft verify` runs). A table
//! of damage kinds runs against all three on an in-memory store: whatever
//! the writer's open refuses, the follower refuses and `check` reports.

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};
use weft::storage::bucket::{
    BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage, check,
};
use weft::{AppendRequest, ErrorKind, Log, LogTag};

fn tag(i: u64) -> LogTag {
    LogTag::new(format!("s{}", i % 3)).unwrap()
}

/// Four batches of three entries.
async fn sample(store: &Arc<dyn ObjectStore>) {
    let log = Log::new(
        BucketStorage::open(store.clone(), "", BucketOptions::default())
            .await
            .unwrap(),
    );
    for b in 0..4u64 {
        let batch = (0..3)
            .map(|i| AppendRequest::new(tag(b * 3 + i), format!("entry {}", b * 3 + i)))
            .collect();
        log.append_batch(batch).await.unwrap();
    }
    log.close().await.unwrap();
}

async fn segments(store: &Arc<dyn ObjectStore>) -> Vec<Path> {
    let prefix = Path::from("segments");
    let mut out: Vec<Path> = store
        .list(Some(&prefix))
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .unwrap();
    out.sort();
    out
}

async fn get(store: &Arc<dyn ObjectStore>, path: &Path) -> Bytes {
    store.get(path).await.unwrap().bytes().await.unwrap()
}

async fn put(store: &Arc<dyn ObjectStore>, path: &Path, bytes: Bytes) {
    store.put(path, PutPayload::from(bytes)).await.unwrap();
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    None,
    OverwrittenByAnother,
    Missing,
    FlippedByte,
    CutShort,
    ManifestFlipped,
}

async fn apply(store: &Arc<dyn ObjectStore>, damage: Damage) {
    let segs = segments(store).await;
    match damage {
        Damage::None => {}
        Damage::OverwrittenByAnother => {
            let other = get(store, &segs[0]).await;
            put(store, &segs[1], other).await;
        }
        Damage::Missing => store.delete(&segs[1]).await.unwrap(),
        Damage::FlippedByte => {
            let mut b = get(store, &segs[2]).await.to_vec();
            b[30] ^= 0x40;
            put(store, &segs[2], b.into()).await;
        }
        Damage::CutShort => {
            let b = get(store, &segs[0]).await;
            put(store, &segs[0], b.slice(..b.len() - 4)).await;
        }
        Damage::ManifestFlipped => {
            let path = Path::from("manifest");
            let mut b = get(store, &path).await.to_vec();
            b[5] ^= 0x01;
            put(store, &path, b.into()).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_damage_is_judged_alike_by_open_read_and_check() {
    for damage in [
        Damage::None,
        Damage::OverwrittenByAnother,
        Damage::Missing,
        Damage::FlippedByte,
        Damage::CutShort,
        Damage::ManifestFlipped,
    ] {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        sample(&store).await;
        apply(&store, damage).await;

        let checked = check(store.clone(), "").await.unwrap();
        // A follower opens on the manifest alone and reads the rest in the
        // background: its judgement is its open's, or else its fill's
        // (which reads every segment, as the writer's open does).
        let followed =
            BucketFollower::open(store.clone(), "", BucketFollowerOptions::default()).await;
        let follower_kind = match &followed {
            Err(e) => Some(e.kind()),
            Ok(f) => f.filled_in().await.err().map(|e| e.kind()),
        };
        // The writer's open claims the log: run it last.
        let opened = BucketStorage::open(store.clone(), "", BucketOptions::default()).await;

        let kinds = [
            checked.problem.as_ref().map(|e| e.kind()),
            follower_kind,
            opened.as_ref().err().map(|e| e.kind()),
        ];
        match damage {
            Damage::None => {
                assert_eq!(kinds, [None; 3], "{damage:?}");
                assert_eq!(checked.entries, 12);
                let follower = followed.unwrap();
                assert_eq!(
                    weft::storage::Storage::tip(&follower).await.unwrap().next,
                    checked.next_seqnum
                );
            }
            _ => assert_eq!(kinds, [Some(ErrorKind::Corrupt); 3], "{damage:?}"),
        }
    }
}
