//! Derived state of a bucket log rewritten with valid checksums, on the
//! in-memory store: the writer's local log index (its cache directory)
//! given rows that disagree with the log, and a history page that names
//! the wrong segments. `check` / `check_cache` (what `weft verify` runs)
//! report each, and a writer using it stops with `Corrupt` (never
//! `Internal`, never a number the log contradicts) or rebuilds it.

#![allow(clippy::disallowed_methods)]

use crate::support;

use object_store::memory::InMemory;
use object_store::path::Path;
use support::bucket_states_cases::*;
use weft::storage::bucket::CacheCheck;

/// How a test rewrites the index, through fjall (so every checksum fjall
/// keeps is valid).
#[derive(Debug, Clone, Copy)]
enum IndexTamper {
    /// Stream `a`'s next version moved ahead.
    NextVersionAhead,
    /// Stream `a`'s next version moved back (a version would repeat).
    NextVersionBehind,
}

fn tamper_index(index: &std::path::Path, tamper: IndexTamper) {
    let db = fjall::Database::builder(index.join("store"))
        .open()
        .unwrap();
    let tags = db
        .keyspace("tags", fjall::KeyspaceCreateOptions::default)
        .unwrap();
    // The `tags` key of stream `a` (FORMATS.md, "The log index").
    let key = [1u8, 0, b'a', 0, 0];
    let mut row = tags.get(key).unwrap().expect("a row for stream a").to_vec();
    let next = u64::from_le_bytes(row[8..16].try_into().unwrap());
    let forged = match tamper {
        IndexTamper::NextVersionAhead => next + 5,
        IndexTamper::NextVersionBehind => next - 2,
    };
    row[8..16].copy_from_slice(&forged.to_le_bytes());
    tags.insert(key, row).unwrap();
    db.persist(fjall::PersistMode::SyncAll).unwrap();
}

async fn thirty(store: &Arc<dyn ObjectStore>, options: BucketOptions) {
    let w = Log::new(
        BucketStorage::open(store.clone(), PREFIX, options)
            .await
            .unwrap(),
    );
    for i in 0..30usize {
        let t = ["a", "b", "c"][i % 3];
        w.append(AppendRequest::new(tag(t), format!("{t}{i}")))
            .await
            .unwrap();
    }
    w.close().await.unwrap();
}

/// The writer's cache index with a stream row that disagrees with the
/// log: `check_cache` reports it, the writer refuses to number that
/// stream from it (`Corrupt`), and the next open rebuilds the index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_index_that_disagrees_with_the_log_is_reported_and_not_trusted() {
    for tamper in [
        IndexTamper::NextVersionAhead,
        IndexTamper::NextVersionBehind,
    ] {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let cache = tempfile::tempdir().unwrap();
        thirty(&store, options(Some(cache.path()))).await;
        match weft::storage::bucket::check_cache(store.clone(), PREFIX, cache.path())
            .await
            .unwrap()
        {
            CacheCheck::Compared(p) => assert!(p.is_empty(), "{p:?}"),
            other => panic!("the clean index was not compared: {other:?}"),
        }

        tamper_index(&cache.path().join("index"), tamper);

        match weft::storage::bucket::check_cache(store.clone(), PREFIX, cache.path())
            .await
            .unwrap()
        {
            CacheCheck::Compared(p) => {
                assert_eq!(p.len(), 1, "{tamper:?}: {p:?}");
                assert_eq!(p[0].kind(), ErrorKind::Corrupt);
            }
            other => panic!("{tamper:?}: not compared: {other:?}"),
        }

        let log = Log::new(
            BucketStorage::open(store.clone(), PREFIX, options(Some(cache.path())))
                .await
                .unwrap(),
        );
        let e = log
            .append(AppendRequest::new(tag("a"), "after"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{tamper:?}: {e}");
        let _ = log.close().await;

        let log = Log::new(
            BucketStorage::open(store.clone(), PREFIX, options(Some(cache.path())))
                .await
                .unwrap(),
        );
        let r = log
            .append(AppendRequest::new(tag("a"), "again"))
            .await
            .unwrap();
        assert_eq!(r.stream_version, 10, "{tamper:?}: {r:?}");
        log.close().await.unwrap();
        let clean = weft::storage::bucket::check(store.clone(), PREFIX)
            .await
            .unwrap();
        assert!(clean.problem.is_none(), "{tamper:?}: {:?}", clean.problem);
    }
}

/// How a test rewrites a history page, keeping it well formed (its CRC
/// recomputed).
#[derive(Debug, Clone, Copy)]
enum PageTamper {
    /// Two entries' segments swapped.
    SwappedSegments,
    /// An entry names the segment of the one before it.
    RepeatedSegment,
}

/// A leaf history page naming the wrong segments, with a valid CRC:
/// `check` reports it as `Corrupt`, and a writer either refuses the log
/// at open or, opened from a state checkpoint past it, stops with
/// `Corrupt` once its history fill reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_page_that_names_the_wrong_segments_is_reported_and_stops_the_writer() {
    use futures::TryStreamExt;
    use weft::format::{PageItems, decode_page, encode_page};
    for tamper in [PageTamper::SwappedSegments, PageTamper::RepeatedSegment] {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        thirty(&store, checkpointing()).await;
        let mut pages: Vec<Path> = store
            .list(Some(&Path::from(format!("{PREFIX}/history"))))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .unwrap();
        pages.sort();
        let leaf = pages
            .iter()
            .find(|p| p.filename().unwrap().starts_with("00-"))
            .expect("the sample has a leaf page")
            .clone();
        let bytes = store.get(&leaf).await.unwrap().bytes().await.unwrap();
        let mut page = decode_page(&bytes).unwrap();
        let PageItems::Entries(entries) = &mut page.items else {
            panic!("a leaf holds entries");
        };
        assert!(entries.len() >= 2);
        match tamper {
            PageTamper::SwappedSegments => {
                let first = entries[0].location.clone();
                entries[0].location = entries[1].location.clone();
                entries[1].location = first;
            }
            PageTamper::RepeatedSegment => entries[1].location = entries[0].location.clone(),
        }
        store
            .put(&leaf, encode_page(&page).unwrap().into())
            .await
            .unwrap();

        let checked = weft::storage::bucket::check(store.clone(), PREFIX)
            .await
            .unwrap();
        let problem = checked.problem.expect("check reports the page");
        assert_eq!(problem.kind(), ErrorKind::Corrupt, "{tamper:?}: {problem}");

        match BucketStorage::open(store.clone(), PREFIX, checkpointing()).await {
            Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{tamper:?}: {e}"),
            Ok(storage) => {
                let filled = storage.filled_in().await.unwrap_err();
                assert_eq!(filled.kind(), ErrorKind::Corrupt, "{tamper:?}: {filled}");
                let log = Log::new(storage);
                let refused = log
                    .append(AppendRequest::new(tag("a"), "after"))
                    .await
                    .unwrap_err();
                assert_ne!(refused.kind(), ErrorKind::Internal, "{refused}");
                let _ = log.close().await;
            }
        }
    }
}
