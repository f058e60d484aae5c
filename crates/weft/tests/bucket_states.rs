//! Stream-state checkpoints on the in-memory store (SeaweedFS:
//! `bucket_cache_s3.rs`): a writer with no local state opens from the
//! newest checkpoint, reading only the entries after it before it takes
//! appends; a damaged checkpoint, or one of another log, is passed over.

#![allow(clippy::disallowed_methods)]

mod support;

use object_store::memory::InMemory;
use support::bucket_states_cases::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_writer_opens_from_the_newest_checkpoint_in_memory() {
    a_stateless_writer_opens_from_the_newest_checkpoint(Arc::new(InMemory::new()), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_on_an_empty_cache_dir_opens_from_the_newest_checkpoint_in_memory() {
    a_stateless_writer_opens_from_the_newest_checkpoint(Arc::new(InMemory::new()), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_or_foreign_checkpoints_are_passed_over_in_memory() {
    damaged_or_foreign_checkpoints_are_passed_over(Arc::new(InMemory::new())).await;
}

/// How a test rewrites a stream-state checkpoint, keeping it well formed
/// (its checksum is recomputed): every way its versions can disagree with
/// the log.
#[derive(Debug, Clone, Copy)]
enum Tamper {
    /// One stream continues at another version.
    OtherVersion,
    /// One stream is left out.
    LeftOut,
    /// A stream the log does not have is added.
    Foreign,
}

/// A checkpoint rewritten with versions the log does not have, with a
/// valid checksum: `check` (what `weft verify` runs) reports it as
/// `Corrupt`, and a writer that opens from it stops with `Corrupt` once
/// its history reaches the checkpoint — never `Internal`, and it takes no
/// append after that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_that_disagrees_with_the_log_is_reported_and_stops_the_writer() {
    use weft::format::{
        LogState, StateCheckpoint, decode_state_checkpoint, encode_state_checkpoint,
    };
    for tamper in [Tamper::OtherVersion, Tamper::LeftOut, Tamper::Foreign] {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let w = Log::new(
            BucketStorage::open(store.clone(), PREFIX, checkpointing())
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
        let clean = weft::storage::bucket::check(store.clone(), PREFIX)
            .await
            .unwrap();
        assert!(clean.problem.is_none() && clean.checkpoint_problems.is_empty());

        let through = checkpoints_stored(&store).await[0];
        let path = checkpoint_path(&store, through).await;
        let bytes = store.get(&path).await.unwrap().bytes().await.unwrap();
        let cp = decode_state_checkpoint(&bytes).unwrap();
        let mut rows = cp.state.next_versions.clone();
        match tamper {
            Tamper::OtherVersion => rows[0].1 += 5,
            Tamper::LeftOut => {
                rows.remove(0);
            }
            Tamper::Foreign => rows.push((tag("zz"), 1)),
        }
        let forged = encode_state_checkpoint(&StateCheckpoint {
            state: LogState::new(cp.state.through, rows).unwrap(),
            through_check: cp.through_check,
        })
        .unwrap();
        store.put(&path, forged.into()).await.unwrap();

        let check = weft::storage::bucket::check(store.clone(), PREFIX)
            .await
            .unwrap();
        assert!(
            check.problem.is_none(),
            "{tamper:?}: the log itself is sound"
        );
        assert_eq!(check.checkpoint_problems.len(), 1, "{tamper:?}");
        assert_eq!(check.checkpoint_problems[0].kind(), ErrorKind::Corrupt);

        let storage = BucketStorage::open(store.clone(), PREFIX, checkpointing())
            .await
            .unwrap();
        let filled = storage.filled_in().await.unwrap_err();
        assert_eq!(filled.kind(), ErrorKind::Corrupt, "{tamper:?}: {filled}");
        let stopped = storage.stop_error().expect("the writer stopped");
        assert_eq!(stopped.kind(), ErrorKind::Corrupt, "{tamper:?}: {stopped}");
        let log = Log::new(storage);
        let refused = log
            .append(AppendRequest::new(tag("a"), "after"))
            .await
            .unwrap_err();
        assert_ne!(refused.kind(), ErrorKind::Internal, "{refused}");
        let _ = log.close().await;
    }
}

/// Damage where a writer that opens from a state checkpoint does not read
/// at open: the history before the checkpoint (a segment, a history page).
#[derive(Debug, Clone, Copy)]
enum HistoryDamage {
    FlippedSegment,
    FlippedPage,
    MissingPage,
}

/// One judgement for damaged history: `check` (`weft verify`) reports it,
/// and a writer that opens from a state checkpoint past it stops with
/// `Corrupt` once its history fill meets it, taking no append after that
/// (a writer that reads the whole log refuses it at open).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_history_before_a_checkpoint_stops_the_writer_that_opened_from_it() {
    use futures::TryStreamExt;
    use object_store::path::Path;
    let mut stopped_later = 0;
    for damage in [
        HistoryDamage::FlippedSegment,
        HistoryDamage::FlippedPage,
        HistoryDamage::MissingPage,
    ] {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let w = Log::new(
            BucketStorage::open(store.clone(), PREFIX, checkpointing())
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
        let under = |dir: &'static str| {
            let store = store.clone();
            async move {
                let mut found: Vec<Path> = store
                    .list(Some(&Path::from(format!("{PREFIX}/{dir}"))))
                    .map_ok(|m| m.location)
                    .try_collect()
                    .await
                    .unwrap();
                found.sort();
                found
            }
        };
        let victim = match damage {
            HistoryDamage::FlippedSegment => under("segments").await[0].clone(),
            HistoryDamage::FlippedPage | HistoryDamage::MissingPage => {
                let pages = under("history").await;
                assert!(!pages.is_empty(), "the sample has history pages");
                pages[0].clone()
            }
        };
        match damage {
            HistoryDamage::MissingPage => store.delete(&victim).await.unwrap(),
            _ => {
                let mut b = store
                    .get(&victim)
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap()
                    .to_vec();
                let at = b.len() / 2;
                b[at] ^= 0x40;
                store.put(&victim, b.into()).await.unwrap();
            }
        }

        let checked = weft::storage::bucket::check(store.clone(), PREFIX)
            .await
            .unwrap();
        let problem = checked.problem.expect("check reports the damage");
        assert_eq!(problem.kind(), ErrorKind::Corrupt, "{damage:?}: {problem}");

        match BucketStorage::open(store.clone(), PREFIX, checkpointing()).await {
            // Refused at open (the damage lies where the open reads): the
            // same judgement.
            Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{damage:?}: {e}"),
            Ok(storage) => {
                let filled = storage.filled_in().await.unwrap_err();
                assert_eq!(filled.kind(), ErrorKind::Corrupt, "{damage:?}: {filled}");
                let stopped = storage.stop_error().expect("the writer stopped");
                assert_eq!(stopped.kind(), ErrorKind::Corrupt, "{damage:?}");
                let log = Log::new(storage);
                let refused = log
                    .append(AppendRequest::new(tag("a"), "after"))
                    .await
                    .unwrap_err();
                assert_ne!(refused.kind(), ErrorKind::Internal, "{refused}");
                let _ = log.close().await;
                stopped_later += 1;
            }
        }
    }
    // The case of the report: the writer opened from the checkpoint.
    assert!(stopped_later > 0, "no writer opened from a checkpoint");
}
