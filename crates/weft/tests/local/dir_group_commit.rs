//! Group commit really groups: concurrent appenders share syncs. These
//! tests count syncs (a counter the backend keeps), never time.

use crate::support::dir as dir_support;

use std::sync::Arc;

use dir_support::{open_with, payload, tag};
use weft::storage::dir::{DirOptions, DirStorage};
use weft::{AppendRequest, Log, Position};

async fn hammer(log: &Log, writers: u64, each: u64) {
    let mut tasks = Vec::new();
    for w in 0..writers {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..each {
                log.append(AppendRequest::new(tag(&format!("w{w}")), payload(i)))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

fn check(storage: &Arc<DirStorage>, total: u64, at_most: u64) {
    let stats = storage.stats();
    eprintln!("{stats:?}");
    assert_eq!(stats.entries, total);
    assert_eq!(stats.appends, total);
    assert_eq!(
        stats.groups, stats.syncs,
        "durable mode syncs every group once"
    );
    assert!(
        stats.syncs <= at_most,
        "{} appends took {} syncs; expected at most {at_most}",
        total,
        stats.syncs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appenders_share_syncs() {
    let tmp = tempfile::tempdir().unwrap();
    let (storage, log) = open_with(tmp.path(), DirOptions::default()).await;
    hammer(&log, 64, 20).await;
    // 1280 appends; each sync must carry 8 of them on average at least
    // (with 64 appenders waiting it is typically close to 64).
    check(&storage, 1280, 160);
    let all = log.read_log(Position::Beginning, 2000).await.unwrap();
    assert_eq!(all.len(), 1280);
    assert!(all.iter().enumerate().all(|(i, e)| e.seqnum == i as u64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_arriving_during_a_sync_share_the_next_without_linger() {
    let tmp = tempfile::tempdir().unwrap();
    let options = DirOptions::default()
        .with_linger_micros(0)
        .with_spin_micros(0);
    let (storage, log) = open_with(tmp.path(), options).await;
    hammer(&log, 32, 20).await;
    // Without linger, groups may alternate between stragglers and the
    // rest, but never fall to one append per sync.
    check(&storage, 640, 320);
}

#[tokio::test]
async fn a_lone_appender_syncs_once_per_append() {
    let tmp = tempfile::tempdir().unwrap();
    let (storage, log) = open_with(tmp.path(), DirOptions::default()).await;
    for i in 0..20 {
        log.append(AppendRequest::new(tag("t"), payload(i)))
            .await
            .unwrap();
    }
    let stats = storage.stats();
    assert_eq!(stats.syncs, 20, "each acknowledged append was synced");
    assert_eq!(stats.groups, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_batch_entries_bounds_a_group() {
    let tmp = tempfile::tempdir().unwrap();
    let options = DirOptions::default().with_max_batch_entries(4);
    let (storage, log) = open_with(tmp.path(), options).await;
    hammer(&log, 16, 10).await;
    let stats = storage.stats();
    assert_eq!(stats.entries, 160);
    assert!(
        stats.groups >= 40,
        "groups of at most 4: {} groups",
        stats.groups
    );
}
