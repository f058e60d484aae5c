//! Retention beyond the conformance suite: the writer's background task
//! applies a policy on its own, and a policy and consumer positions survive
//! reopening a directory log.

// Tests sleep on tokio's (paused) clock.
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

use weft::retention::RetentionPolicy;
use weft::{AppendRequest, DirStorage, Log, LogTag};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_writers_task_applies_a_policy_without_being_asked() {
    let log = Log::memory();
    let t = LogTag::new("t").unwrap();
    log.set_retention_policy(Some(RetentionPolicy::default().with_max_count(Some(3))))
        .await
        .unwrap();
    for i in 0..10 {
        log.append(AppendRequest::new(t.clone(), format!("{i}")))
            .await
            .unwrap();
    }
    // Nobody steps: the memory writer's task does, after the commits.
    let mut first = 0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        first = log.tip().await.unwrap().first;
        if first == 7 {
            break;
        }
    }
    assert_eq!(first, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_and_positions_survive_reopening_a_directory_log() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = RetentionPolicy::default()
        .with_max_age_ms(Some(86_400_000))
        .with_protect_consumers(vec!["billing".into()]);
    {
        let log = Log::new(DirStorage::open(tmp.path()).await.unwrap());
        let t = LogTag::new("t").unwrap();
        for i in 0..4 {
            log.append(AppendRequest::new(t.clone(), format!("{i}")))
                .await
                .unwrap();
        }
        log.set_retention_policy(Some(policy.clone()))
            .await
            .unwrap();
        assert_eq!(log.consumer("billing").unwrap().commit(3).await.unwrap(), 3);
        log.close().await.unwrap();
    }
    let log = Log::new(DirStorage::open(tmp.path()).await.unwrap());
    assert_eq!(log.retention_policy().await.unwrap(), Some(policy));
    let billing = log.consumer("billing").unwrap();
    assert_eq!(billing.position().await.unwrap(), Some(3));
    assert_eq!(billing.commit(2).await.unwrap(), 3);
    assert_eq!(log.consumers().await.unwrap().len(), 1);
    log.close().await.unwrap();
}
