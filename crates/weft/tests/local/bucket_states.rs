//! Stream-state checkpoints on the in-memory store (SeaweedFS:
//! `bucket_cache_s3.rs`): a writer with no local state opens from the
//! newest checkpoint, reading only the entries after it before it takes
//! appends; a damaged checkpoint, or one of another log, is passed over.

#![allow(clippy::disallowed_methods)]

use crate::support;

use std::sync::Mutex;

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
        let mut rows = checkpoint_rows(&store, through).await;
        match tamper {
            Tamper::OtherVersion => rows[0].1 += 5,
            Tamper::LeftOut => {
                rows.remove(0);
            }
            Tamper::Foreign => rows.push((tag("zz"), 1, Some(0))),
        }
        forge_checkpoint(&store, through, rows).await;

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

/// How a row of the forged-checkpoint table rewrites the checkpoint (with
/// a valid checksum), and which stream it then appends to.
#[derive(Debug, Clone, Copy)]
enum Forge {
    /// Stream a continues 5 versions later (its last entry unchanged).
    Ahead,
    /// Stream a continues one version earlier.
    Behind,
    /// Stream b is left out; the append goes to b (new, says the
    /// checkpoint).
    LeftOut,
    /// A stream the log does not have is added.
    Extra,
    /// a one ahead, b one behind: the total still adds up; append to a.
    AheadBehindA,
    /// The same; append to b.
    AheadBehindB,
    /// a and b name each other's last entry.
    SwappedEntries,
    /// a says its last entry was trimmed (the log has no trim).
    ClaimsTrimmed,
    /// a names an entry past the checkpoint.
    PastTheCheckpoint,
    /// A version 1 checkpoint (no last entries) with a moved ahead.
    OldFormatAhead,
    /// d (with entries after the checkpoint) one behind, c one ahead;
    /// append to d.
    LiveStreamBehind,
}

/// The forged-checkpoint table: a writer opened from a checkpoint whose
/// versions disagree with the log refuses the first append that would be
/// numbered from it with `Corrupt`, while its history fill is still held
/// back (so the refusal is the per-stream check, not the fill), stops, and
/// writes nothing: the log is what it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_checkpoint_is_refused_before_the_writer_numbers_from_it() {
    use weft::format::state_checkpoint::TRIMMED;
    for forge in [
        Forge::Ahead,
        Forge::Behind,
        Forge::LeftOut,
        Forge::Extra,
        Forge::AheadBehindA,
        Forge::AheadBehindB,
        Forge::SwappedEntries,
        Forge::ClaimsTrimmed,
        Forge::PastTheCheckpoint,
        Forge::OldFormatAhead,
        Forge::LiveStreamBehind,
    ] {
        let (store, segments, through) = thirty_entries().await;
        let mut rows = checkpoint_rows(&store, through).await;
        let at = |rows: &[(LogTag, u64, Option<u64>)], t: &str| {
            rows.iter().position(|r| r.0 == tag(t)).unwrap()
        };
        let (a, b) = (at(&rows, "a"), at(&rows, "b"));
        let mut stream = "a";
        match forge {
            Forge::Ahead => rows[a].1 += 5,
            Forge::Behind => rows[a].1 -= 1,
            Forge::LeftOut => {
                rows.remove(b);
                stream = "b";
            }
            Forge::Extra => rows.push((tag("zz"), 1, Some(0))),
            Forge::AheadBehindA | Forge::AheadBehindB => {
                rows[a].1 += 1;
                rows[b].1 -= 1;
                if matches!(forge, Forge::AheadBehindB) {
                    stream = "b";
                }
            }
            Forge::SwappedEntries => {
                let (la, lb) = (rows[a].2, rows[b].2);
                rows[a].2 = lb;
                rows[b].2 = la;
            }
            Forge::ClaimsTrimmed => rows[a].2 = Some(TRIMMED),
            Forge::PastTheCheckpoint => rows[a].2 = Some(through + 1),
            Forge::LiveStreamBehind => {
                let (c, d) = (at(&rows, "c"), at(&rows, "d"));
                rows[c].1 += 1;
                rows[d].1 -= 1;
                stream = "d";
            }
            Forge::OldFormatAhead => {
                rows[a].1 += 5;
                for r in &mut rows {
                    r.2 = None;
                }
            }
        }
        forge_checkpoint(&store, through, rows).await;

        // The fill is stuck on the first segment for the whole row.
        let held = Arc::new(Mutex::new(vec![segments[0].clone()]));
        let (slow, release, _) = holding(store.clone(), held);
        let storage = BucketStorage::open(slow, PREFIX, checkpointing())
            .await
            .unwrap();
        assert!(storage.filling_in(), "{forge:?}: the history is held back");
        let log = Log::new(storage);
        let refused = match log.append(AppendRequest::new(tag(stream), "wrong")).await {
            Err(e) => e,
            Ok(r) => panic!("{forge:?} (through {through}): appended {r:?}"),
        };
        assert_eq!(refused.kind(), ErrorKind::Corrupt, "{forge:?}: {refused}");
        assert!(log.storage().tip().await.is_ok());
        let again = log
            .append(AppendRequest::new(tag("c"), "after"))
            .await
            .unwrap_err();
        assert_ne!(again.kind(), ErrorKind::Internal, "{forge:?}: {again}");
        let _ = release.send(true);
        let _ = log.close().await;

        let check = weft::storage::bucket::check(store.clone(), PREFIX)
            .await
            .unwrap();
        assert!(check.problem.is_none(), "{forge:?}: {:?}", check.problem);
        assert_eq!(check.next_seqnum, 45, "{forge:?}: nothing was appended");
        assert_eq!(check.checkpoint_problems.len(), 1, "{forge:?}");
    }
}

/// Thirty entries over streams a, b, c, then fifteen of d (one commit, one
/// segment each), with checkpoints; the segments in order and the newest
/// checkpoint's seqnum (past every entry of a, b and c).
async fn thirty_entries() -> (Arc<dyn ObjectStore>, Vec<String>, u64) {
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let (recorded, segments) = recording(store.clone());
    let w = Log::new(
        BucketStorage::open(recorded, PREFIX, checkpointing())
            .await
            .unwrap(),
    );
    for i in 0..45usize {
        let t = if i < 30 { ["a", "b", "c"][i % 3] } else { "d" };
        w.append(AppendRequest::new(tag(t), format!("{t}{i}")))
            .await
            .unwrap();
    }
    w.close().await.unwrap();
    let segments = segments.lock().unwrap().clone();
    let through = checkpoints_stored(&store).await[0];
    assert!(through >= 29, "newest checkpoint through {through}");
    (store, segments, through)
}

/// The sound side of the same checks: with the history held back, a
/// stream the checkpoint names (with its last entry) is appended to at
/// once, at its version; a stream it does not name, and any stream of a
/// version 1 checkpoint, waits for the fill and then gets the log's
/// version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sound_checkpoint_numbers_checked_streams_at_once_and_others_after_the_fill() {
    for old_format in [false, true] {
        let (store, segments, through) = thirty_entries().await;
        if old_format {
            let rows = checkpoint_rows(&store, through).await;
            let rows = rows.into_iter().map(|(t, v, _)| (t, v, None)).collect();
            forge_checkpoint(&store, through, rows).await;
        }
        let held = Arc::new(Mutex::new(vec![segments[0].clone()]));
        let (slow, release, _) = holding(store.clone(), held);
        let storage = BucketStorage::open(slow, PREFIX, checkpointing())
            .await
            .unwrap();
        assert!(storage.filling_in());
        let log = Arc::new(Log::new(storage));
        // b has entries 1, 4, ..., 28: ten of them.
        let waiting_new = {
            let log = log.clone();
            tokio::spawn(async move { log.append(AppendRequest::new(tag("new"), "n")).await })
        };
        if old_format {
            let waiting_b = {
                let log = log.clone();
                tokio::spawn(
                    async move { log.append_if(AppendRequest::new(tag("b"), "b"), 10).await },
                )
            };
            // Neither can be numbered before the fill: the store still
            // holds the first segment.
            tokio::task::yield_now().await;
            assert!(log.storage().read(None, 29, 1).await.is_ok());
            assert!(!waiting_b.is_finished() && !waiting_new.is_finished());
            let _ = release.send(true);
            let r = waiting_b.await.unwrap().unwrap();
            assert_eq!(r.stream_version, 10);
        } else {
            let r = log
                .append_if(AppendRequest::new(tag("b"), "b"), 10)
                .await
                .unwrap();
            assert_eq!((r.seqnum, r.stream_version), (45, 10));
            assert!(log.storage().read(None, 29, 1).await.is_ok());
            assert!(
                !waiting_new.is_finished(),
                "a new stream waits for the fill"
            );
            let _ = release.send(true);
        }
        let r = waiting_new.await.unwrap().unwrap();
        assert_eq!(r.stream_version, 0, "old format {old_format}");
        Arc::into_inner(log).unwrap().close().await.unwrap();
        let check = weft::storage::bucket::check(store.clone(), PREFIX)
            .await
            .unwrap();
        assert!(check.problem.is_none() && check.checkpoint_problems.is_empty());
        assert_eq!(check.next_seqnum, 47);
    }
}
