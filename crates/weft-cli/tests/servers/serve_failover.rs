//! Failover of a bucket log between two `weft serve` OS processes (think:
//! two hosts) on the SeaweedFS server scripts/test.sh starts: the leader
//! is killed with SIGKILL under load; the standby takes the log when the
//! lease lapses; clients given both addresses retry with their append ids
//! and end with every acknowledged append present exactly once, at dense
//! seqnums.

#![allow(clippy::disallowed_methods)]

use crate::support::served as serve_support;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use weft::{AppendRequest, ErrorKind, Log, LogTag, Position};
use weft_client::{RemoteOptions, RemoteStorage};

fn required(key: &str) -> String {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{key} is not set: run scripts/test.sh (it starts SeaweedFS)"),
    }
}

const WRITERS: usize = 4;
const PER_WRITER: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_after_kill_9_and_retried_ids_land_once() {
    let bucket = required("WEFT_TEST_S3_BUCKET");
    let endpoint = required("WEFT_TEST_S3_ENDPOINT");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let url = format!(
        "s3://{bucket}/weft-serve-failover/{}-{nanos}",
        std::process::id()
    );
    let args = |extra: &'static str| {
        vec![
            url.clone(),
            "--lease-renew-secs".to_owned(),
            "1".to_owned(),
            "--endpoint".to_owned(),
            endpoint.clone(),
            "--allow-http".to_owned(),
            extra.to_owned(),
        ]
    };
    let a_args = args("--create");
    let leader = serve_support::serve(&a_args.iter().map(String::as_str).collect::<Vec<_>>());
    let b_args = args("--create");
    let standby = serve_support::serve(&b_args.iter().map(String::as_str).collect::<Vec<_>>());

    let both = format!("{},{}", leader.url, standby.url);
    let options = RemoteOptions {
        retry_for: Duration::from_secs(120),
        ..RemoteOptions::default()
    };
    let log = Log::new(RemoteStorage::connect(&both, options).await.unwrap());
    let status: serde_json::Value = reqwest_status(&standby.url).await;
    assert_eq!(status["role"], "follower", "{status}");

    let acknowledged = Arc::new(AtomicUsize::new(0));
    let tag: LogTag = "orders".parse().unwrap();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let log = log.clone();
            let tag = tag.clone();
            let acknowledged = acknowledged.clone();
            tokio::spawn(async move {
                let mut results = Vec::new();
                for i in 0..PER_WRITER {
                    let id = format!("w{w}-{i}");
                    // Retry with the same id until the log answers: an
                    // indeterminate append is written at most once.
                    let result = loop {
                        let request =
                            AppendRequest::new(tag.clone(), id.clone()).with_id(id.clone());
                        match log.append(request).await {
                            Ok(r) => break r,
                            Err(e) => {
                                assert!(
                                    matches!(
                                        e.kind(),
                                        ErrorKind::Indeterminate
                                            | ErrorKind::Unavailable
                                            | ErrorKind::ReadOnly
                                            | ErrorKind::Fenced
                                            | ErrorKind::Closed
                                    ),
                                    "{id}: {e}"
                                );
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                        }
                    };
                    acknowledged.fetch_add(1, Ordering::Relaxed);
                    results.push((id, result.seqnum));
                }
                results
            })
        })
        .collect();

    // Under load: kill the leader without a chance to release its lease.
    while acknowledged.load(Ordering::Relaxed) < WRITERS * PER_WRITER / 4 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    leader.signal("KILL");
    let killed = leader.wait();
    assert!(!killed.success());

    let mut by_id: HashMap<String, u64> = HashMap::new();
    for w in writers {
        for (id, seqnum) in w.await.unwrap() {
            assert!(by_id.insert(id, seqnum).is_none());
        }
    }
    assert_eq!(by_id.len(), WRITERS * PER_WRITER);
    let status = reqwest_status(&standby.url).await;
    assert_eq!(status["role"], "leader", "{status}");

    // Every acknowledged append is in the log once, where its answer
    // said, and the seqnums are dense.
    let entries = log.read_log(Position::Beginning, 100_000).await.unwrap();
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e.seqnum, i as u64, "dense seqnums");
        let id = String::from_utf8(e.data.to_vec()).unwrap();
        seen.entry(id).or_default().push(e.seqnum);
    }
    for (id, seqnum) in &by_id {
        assert_eq!(seen.get(id), Some(&vec![*seqnum]), "{id}");
    }
    assert_eq!(
        entries.len(),
        by_id.len(),
        "nothing but the acknowledged entries"
    );
    log.close().await.unwrap();
    standby.signal("TERM");
    assert!(standby.wait().success());
}

async fn reqwest_status(base: &str) -> serde_json::Value {
    // The follower's status through a plain client of its own.
    let log = weft_client::http::Api::new(base, &RemoteOptions::default()).unwrap();
    log.call(
        weft_client::http::Method::GET,
        &["v1", "status"],
        &[],
        None::<&()>,
        weft_client::http::Effect::Read,
    )
    .await
    .unwrap()
}
