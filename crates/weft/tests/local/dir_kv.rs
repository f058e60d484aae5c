//! The durable per-view KV of the `dir` backend.

use crate::support::dir as dir_support;

use std::sync::Arc;

use dir_support::{open, tag};
use weft::storage::Storage;
use weft::{ErrorKind, Log};

#[tokio::test]
async fn values_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let long_key: String = "k/../\\:*?\"<>|".repeat(19);
    assert!(long_key.len() <= 255);
    {
        let (s, log) = open(tmp.path()).await;
        let kv = log.kv(tag("exec:1")).unwrap();
        kv.set("checkpoint", "seq=41").await.unwrap();
        kv.set(&long_key, "odd key").await.unwrap();
        assert_eq!(kv.increment("runs", 3).await.unwrap(), 3);
        kv.set("gone", "soon").await.unwrap();
        kv.delete("gone").await.unwrap();
        s.close().await.unwrap();
    }
    let (_s, log) = open(tmp.path()).await;
    let kv = log.kv(tag("exec:1")).unwrap();
    assert_eq!(
        kv.get("checkpoint").await.unwrap().as_deref(),
        Some(&b"seq=41"[..])
    );
    assert_eq!(
        kv.get(&long_key).await.unwrap().as_deref(),
        Some(&b"odd key"[..])
    );
    assert_eq!(kv.increment("runs", 1).await.unwrap(), 4);
    assert_eq!(kv.get("gone").await.unwrap(), None);
    assert_eq!(
        log.kv(tag("exec:2"))
            .unwrap()
            .get("checkpoint")
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn compare_and_set_semantics() {
    let tmp = tempfile::tempdir().unwrap();
    let (_s, log) = open(tmp.path()).await;
    let kv = log.kv(tag("v")).unwrap();
    assert!(
        kv.compare_and_set("k", None, Some("a".into()))
            .await
            .unwrap()
    );
    assert!(
        !kv.compare_and_set("k", None, Some("b".into()))
            .await
            .unwrap()
    );
    assert!(
        !kv.compare_and_set("k", Some(b"x"), Some("b".into()))
            .await
            .unwrap()
    );
    assert!(
        kv.compare_and_set("k", Some(b"a"), Some("b".into()))
            .await
            .unwrap()
    );
    assert!(!kv.delete_if("k", b"a").await.unwrap());
    assert!(kv.delete_if("k", b"b").await.unwrap());
    assert_eq!(kv.get("k").await.unwrap(), None);
    kv.set("n", "not a counter").await.unwrap();
    assert_eq!(
        kv.increment("n", 1).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kv.set("", "x").await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kv.set(&"x".repeat(256), "x").await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert!(kv.compare_and_set("k2", None, None).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_increments_and_claims_are_atomic() {
    let tmp = tempfile::tempdir().unwrap();
    let (_s, log) = open(tmp.path()).await;
    let log = Arc::new(log);
    let mut tasks = Vec::new();
    for w in 0..8 {
        let log: Arc<Log> = log.clone();
        tasks.push(tokio::spawn(async move {
            let kv = log.kv(tag("shared")).unwrap();
            let won = kv.set_if_absent("leader", format!("w{w}")).await.unwrap();
            for _ in 0..10 {
                kv.increment("count", 1).await.unwrap();
            }
            won
        }));
    }
    let mut winners = 0;
    for t in tasks {
        winners += t.await.unwrap() as usize;
    }
    assert_eq!(winners, 1);
    let kv = log.kv(tag("shared")).unwrap();
    assert_eq!(kv.increment("count", 0).await.unwrap(), 80);
}

#[tokio::test]
async fn kv_files_hold_no_key_text_in_their_names() {
    let tmp = tempfile::tempdir().unwrap();
    let (s, log) = open(tmp.path()).await;
    log.kv(tag("scope"))
        .unwrap()
        .set("secret/name", "v")
        .await
        .unwrap();
    let names: Vec<String> = std::fs::read_dir(tmp.path().join("kv"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1);
    assert!(
        names[0].ends_with(".kv") && names[0].len() == 19,
        "{names:?}"
    );
    log.kv(tag("scope"))
        .unwrap()
        .delete("secret/name")
        .await
        .unwrap();
    assert_eq!(std::fs::read_dir(tmp.path().join("kv")).unwrap().count(), 0);
    s.close().await.unwrap();
}
