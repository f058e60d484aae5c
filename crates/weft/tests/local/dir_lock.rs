//! The single-writer lock of the `dir` backend (in-process cases; the
//! cross-process and crashed-process cases run in `dir_crash`).

use crate::support::dir as dir_support;

use dir_support::tag;
use weft::storage::Storage;
use weft::storage::dir::DirStorage;
use weft::{AppendRequest, ErrorKind, Log};

#[tokio::test]
async fn a_second_open_in_the_same_process_is_locked() {
    let tmp = tempfile::tempdir().unwrap();
    let first = DirStorage::open(tmp.path()).await.unwrap();
    let err = DirStorage::open(tmp.path()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Locked);
    // The refused open did not disturb the holder.
    let log = Log::new(first);
    log.append(AppendRequest::new(tag("t"), "x")).await.unwrap();
}

#[tokio::test]
async fn drop_releases_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..5u64 {
        let storage = DirStorage::open(tmp.path()).await.unwrap();
        assert_eq!(storage.tip().await.unwrap().next, round);
        let log = Log::new(storage);
        log.append(AppendRequest::new(tag("t"), "x")).await.unwrap();
        drop(log);
    }
}

#[tokio::test]
async fn close_releases_the_lock_even_while_the_handle_lives() {
    let tmp = tempfile::tempdir().unwrap();
    let first = DirStorage::open(tmp.path()).await.unwrap();
    first.close().await.unwrap();
    let second = DirStorage::open(tmp.path()).await.unwrap();
    assert_eq!(
        DirStorage::open(tmp.path()).await.unwrap_err().kind(),
        ErrorKind::Locked
    );
    drop(first);
    // Dropping the closed first handle must not free the second's lock.
    assert_eq!(
        DirStorage::open(tmp.path()).await.unwrap_err().kind(),
        ErrorKind::Locked
    );
    drop(second);
}

#[tokio::test]
async fn a_leftover_lock_file_does_not_block() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("LOCK"), b"pid 12345 was here").unwrap();
    let storage = DirStorage::open(tmp.path()).await.unwrap();
    assert_eq!(storage.tip().await.unwrap().next, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_opens_admit_exactly_one() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().to_path_buf();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let path = path.clone();
        tasks.push(tokio::spawn(async move { DirStorage::open(&path).await }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(s) => winners.push(s),
            Err(e) => assert_eq!(e.kind(), ErrorKind::Locked),
        }
    }
    assert_eq!(winners.len(), 1);
}

/// The background retention task holds the backend only while a step
/// runs, and a step in flight goes with the last log: dropping the log
/// frees the lock at once, whatever the task was doing.
#[tokio::test]
async fn drop_releases_the_lock_while_retention_steps() {
    drop_while_retention_steps().await;
}

/// The same on a runtime whose other thread may be polling the task when
/// the log is dropped (the drop waits for that poll, then ends the task).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_releases_the_lock_while_retention_steps_on_another_thread() {
    drop_while_retention_steps().await;
}

async fn drop_while_retention_steps() {
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..8u64 {
        let log = Log::new(DirStorage::open(tmp.path()).await.unwrap());
        let batch = (0..64).map(|i| AppendRequest::new(tag("t"), format!("{round}.{i}")));
        log.append_batch(batch.collect()).await.unwrap();
        // Setting the policy wakes the task; yielding lets its step start
        // (it waits on a blocking read when the log is dropped).
        log.set_retention_policy(Some(
            weft::retention::RetentionPolicy::default().with_max_count(Some(8)),
        ))
        .await
        .unwrap();
        for _ in 0..=round {
            tokio::task::yield_now().await;
        }
        drop(log);
    }
    let log = Log::new(DirStorage::open(tmp.path()).await.unwrap());
    let tip = log.tip().await.unwrap();
    assert_eq!(tip.next, 8 * 64);
    // Whatever the task managed, one step now leaves the policy's count.
    weft::retention::Retention::new(weft::clock::system())
        .step(&log)
        .await
        .unwrap();
    assert_eq!(log.tip().await.unwrap().first, 8 * 64 - 8);
}
