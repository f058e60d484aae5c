//! The actor-checkpoint pattern: resume after the checkpoint, backlog then
//! live, nothing skipped and nothing repeated across restarts.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Barrier;
use weft::exec::Checkpoint;
use weft::{AppendRequest, ErrorKind, Log, LogTag, LogView, Position};

const WAIT: Duration = Duration::from_secs(20);

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

fn inbox(log: &Log) -> LogView {
    log.view(LogTag::with_key("actor", "orders").unwrap())
}

/// One run of the actor: resume, process (and checkpoint) `count` entries,
/// return what it processed, then "crash" by dropping everything.
async fn run_actor(view: &LogView, count: usize) -> Vec<String> {
    let checkpoint = Checkpoint::for_view(view, "checkpoint").unwrap();
    let mut resumed = checkpoint.resume(view).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < count {
        let entry = within("inbox entry", resumed.subscription.next())
            .await
            .expect("subscription ended")
            .unwrap();
        seen.push(String::from_utf8(entry.data.to_vec()).unwrap());
        assert!(checkpoint.advance(entry.seqnum).await.unwrap());
    }
    seen
}

async fn send(view: &LogView, range: std::ops::Range<u32>) {
    for i in range {
        view.append(format!("m{i}")).await.unwrap();
    }
}

fn expected(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("m{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_resume_after_the_checkpoint_with_no_gap_and_no_repeat() {
    let log = Log::memory();
    let view = inbox(&log);
    let noise = LogTag::new("other").unwrap();
    // Interleave another tag, so inbox seqnums are not dense.
    for i in 0..10 {
        view.append(format!("m{i}")).await.unwrap();
        log.append(AppendRequest::new(noise.clone(), "x"))
            .await
            .unwrap();
    }

    let mut processed = run_actor(&view, 4).await;
    assert_eq!(processed, expected(0..4));

    send(&view, 10..15).await; // while the actor is down

    // Second run: a writer keeps appending while the actor replays its
    // backlog; the hand-over to live delivery must not drop or repeat one.
    let writer = {
        let view = view.clone();
        tokio::spawn(async move { send(&view, 15..40).await })
    };
    processed.extend(run_actor(&view, 36).await);
    writer.await.unwrap();
    assert_eq!(processed, expected(0..40));

    // Third run with nothing new: the checkpoint is at the last entry.
    let checkpoint = Checkpoint::for_view(&view, "checkpoint").unwrap();
    let last = view.check_tail().await.unwrap().unwrap();
    assert_eq!(checkpoint.load().await.unwrap(), Some(last));
    assert_eq!(
        checkpoint.resume_position().await.unwrap(),
        Position::At(last + 1)
    );
    send(&view, 40..41).await;
    assert_eq!(run_actor(&view, 1).await, expected(40..41));
}

#[tokio::test]
async fn backlog_through_splits_backlog_from_live() {
    let log = Log::memory();
    let view = inbox(&log);
    send(&view, 0..3).await;
    let checkpoint = Checkpoint::for_view(&view, "checkpoint").unwrap();
    assert_eq!(
        checkpoint.resume_position().await.unwrap(),
        Position::Beginning
    );
    let mut resumed = checkpoint.resume(&view).await.unwrap();
    assert_eq!(resumed.from, Position::Beginning);
    let backlog_end = resumed.backlog_through.unwrap();
    send(&view, 3..5).await;
    let mut backlog = Vec::new();
    let mut live = Vec::new();
    for _ in 0..5 {
        let e = within("entry", resumed.subscription.next())
            .await
            .unwrap()
            .unwrap();
        let text = String::from_utf8(e.data.to_vec()).unwrap();
        if e.seqnum <= backlog_end {
            backlog.push(text);
        } else {
            live.push(text);
        }
    }
    assert_eq!(backlog, expected(0..3));
    assert_eq!(live, expected(3..5));
}

#[tokio::test]
async fn an_entry_processed_but_not_checkpointed_is_delivered_again() {
    let log = Log::memory();
    let view = inbox(&log);
    send(&view, 0..3).await;
    let checkpoint = Checkpoint::for_view(&view, "checkpoint").unwrap();
    {
        let mut resumed = checkpoint.resume(&view).await.unwrap();
        let first = resumed.subscription.next().await.unwrap().unwrap();
        checkpoint.advance(first.seqnum).await.unwrap();
        // The second is processed, then the process dies before the
        // checkpoint is written.
        let _second = resumed.subscription.next().await.unwrap().unwrap();
    }
    let mut resumed = checkpoint.resume(&view).await.unwrap();
    let again = resumed.subscription.next().await.unwrap().unwrap();
    assert_eq!(&again.data[..], b"m1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_checkpoint_only_moves_forward() {
    let log = Log::memory();
    let view = inbox(&log);
    let checkpoint = Checkpoint::for_view(&view, "checkpoint").unwrap();
    assert!(checkpoint.advance(10).await.unwrap());
    assert!(!checkpoint.advance(10).await.unwrap());
    assert!(!checkpoint.advance(3).await.unwrap());
    assert_eq!(checkpoint.load().await.unwrap(), Some(10));

    // Concurrent processors racing to record different positions: the
    // highest one wins, whatever the interleaving.
    let barrier = Arc::new(Barrier::new(8));
    let tasks: Vec<_> = (0..8u64)
        .map(|t| {
            let (checkpoint, barrier) = (checkpoint.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                for i in 0..50 {
                    checkpoint.advance(11 + t * 50 + i).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(checkpoint.load().await.unwrap(), Some(11 + 7 * 50 + 49));

    checkpoint.reset().await.unwrap();
    assert_eq!(checkpoint.load().await.unwrap(), None);
}

#[tokio::test]
async fn a_checkpoint_below_the_trim_point_is_a_trimmed_error() {
    let log = Log::memory();
    let view = inbox(&log);
    send(&view, 0..5).await;
    let checkpoint = Checkpoint::for_view(&view, "checkpoint").unwrap();
    checkpoint.advance(0).await.unwrap();
    log.trim(2).await.unwrap();
    let mut resumed = checkpoint.resume(&view).await.unwrap();
    let err = resumed.subscription.next().await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
}

#[tokio::test]
async fn a_corrupt_checkpoint_is_reported() {
    let log = Log::memory();
    let view = inbox(&log);
    view.kv().unwrap().set("checkpoint", "seven").await.unwrap();
    let checkpoint = Checkpoint::for_view(&view, "checkpoint").unwrap();
    assert_eq!(
        checkpoint.load().await.unwrap_err().kind(),
        ErrorKind::Corrupt
    );
    assert_eq!(
        checkpoint.advance(3).await.unwrap_err().kind(),
        ErrorKind::Corrupt
    );
    assert_eq!(
        Checkpoint::for_view(&view, "").unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
}
