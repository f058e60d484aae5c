//! The real server dies mid-write: SeaweedFS is killed with SIGKILL (by its
//! PID: the state dir's pid file, else `WEFT_TEST_S3_PID`) while two writers append, then restarted on
//! the same data directory, ports and credentials by
//! `scripts/seaweedfs.sh restart`.
//!
//! * a WAL producer with a retry budget longer than the outage continues:
//!   every append is acknowledged, and a replica that tailed throughout
//!   resumes and sees all of them;
//! * a bucket-log writer with default retries either continues or halts
//!   with a clear error (`Unavailable` / `Indeterminate` while pending,
//!   `Closed` after it halted, nothing else); a new writer then sees every
//!   acknowledged append at its seqnum and none that failed cleanly, and a
//!   follower that tailed throughout catches up to it.
//!
//! This is the only test in its binary (tests of one binary run in
//! parallel; test binaries run one after another), so no other test talks
//! to the server while it is down. A guard restarts the server if the test
//! fails after the kill, so later test binaries find it running.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

#[path = "support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::ObjectStore;
use weft::objects::RetryPolicy;
use weft::storage::bucket::{BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage};
use weft::wal::{FnApplier, Producer, Record, Replica};
use weft::{AppendRequest, ErrorKind, Log, LogTag, Position, Storage};

const RESTART_TIMEOUT: Duration = Duration::from_secs(120);

fn env(key: &str) -> String {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{key} is not set: {}", support::s3::NO_SERVER),
    }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/seaweedfs.sh")
}

/// The state directory `scripts/seaweedfs.sh start` used: where its
/// `server.conf` (ports, credentials) lives.
fn state_dir() -> String {
    match std::env::var("WEFT_TEST_S3_STATE_DIR") {
        Ok(dir) if !dir.is_empty() => dir,
        _ => PathBuf::from(env("WEFT_TEST_S3_DATA_DIR"))
            .parent()
            .expect("the data dir sits in the state dir")
            .display()
            .to_string(),
    }
}

fn kill(pid: u32) {
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL {pid} failed");
}

fn alive(pid: u32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The server's PID: the state dir's pid file (rewritten by every restart)
/// when present, else `WEFT_TEST_S3_PID` from the env file.
fn server_pid() -> u32 {
    let from_file = std::fs::read_to_string(PathBuf::from(state_dir()).join("pid"));
    let pid = match from_file {
        Ok(pid) => pid,
        Err(_) => env("WEFT_TEST_S3_PID"),
    };
    pid.trim().parse().expect("the server pid is a number")
}

/// Runs `scripts/seaweedfs.sh restart`, bounded, and returns the new PID.
fn restart() -> u32 {
    let mut child = Command::new("bash")
        .arg(script())
        .arg("restart")
        .env("WEFT_S3_STATE_DIR", state_dir())
        .spawn()
        .expect("run scripts/seaweedfs.sh restart");
    let deadline = Instant::now() + RESTART_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the restart") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("scripts/seaweedfs.sh restart took over {RESTART_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.success(),
        "scripts/seaweedfs.sh restart failed: {status}"
    );
    let pid = std::fs::read_to_string(PathBuf::from(state_dir()).join("pid"))
        .expect("the restart wrote the pid file");
    pid.trim().parse().expect("the pid file holds a pid")
}

/// Restarts the server if the test ends (even by panic) while it is down.
struct RestartGuard {
    down: Arc<AtomicBool>,
}

impl Drop for RestartGuard {
    fn drop(&mut self) {
        if self.down.swap(false, Ordering::SeqCst) {
            eprintln!("server_kill: restarting the server the test left down");
            restart();
        }
    }
}

/// A store on the test server that gives up quickly, so the outage reaches
/// weft's own retry logic instead of hiding in the HTTP client's retries.
fn impatient_store(test: &str) -> Arc<dyn ObjectStore> {
    let mut s = support::s3::settings(test);
    s.connect_timeout = Some(Duration::from_millis(500));
    s.request_timeout = Some(Duration::from_secs(3));
    s.http_retries = Some(1);
    s.http_retry_timeout = Some(Duration::from_secs(2));
    s.build().expect("build S3 store")
}

/// What the appenders saw.
#[derive(Default)]
struct Outcomes {
    /// Acknowledged: payload → sequence.
    acked: BTreeMap<String, u64>,
    /// Failed, with the kind, in the order seen.
    failed: Vec<(String, ErrorKind)>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_server_mid_write_loses_nothing_acknowledged() {
    let pid = server_pid();
    assert!(alive(pid), "the test server (pid {pid}) is not running");
    assert!(script().exists(), "{} is missing", script().display());

    // The WAL producer, patient enough to outlive the outage.
    let wal_store = impatient_store("server_kill_wal");
    let producer = Arc::new(
        Producer::builder(wal_store.clone(), "wal/manifest", "wal/seg")
            .with_flush_interval(Duration::from_millis(10))
            .with_retry_policy(
                RetryPolicy::default()
                    .with_max_attempts(60)
                    .with_base_backoff(Duration::from_millis(50))
                    .with_max_backoff(Duration::from_secs(2))
                    .with_jitter(0.5),
            )
            .open()
            .await
            .expect("open the producer"),
    );
    let replica_seen: Arc<Mutex<HashMap<u64, Bytes>>> = Arc::default();
    let sink = replica_seen.clone();
    let mut replica = Replica::builder(
        wal_store.clone(),
        "wal/manifest",
        FnApplier::new(move |r: &Record| {
            sink.lock()
                .unwrap()
                .insert(r.sequence.expect("v4 numbers records"), r.data.clone());
            Ok(())
        }),
    )
    .with_poll_interval(Duration::from_millis(20))
    .build();
    let (stop_replica, stopped) = tokio::sync::oneshot::channel::<()>();
    let replica_task = tokio::spawn(async move {
        let result = replica
            .run(async {
                let _ = stopped.await;
            })
            .await;
        (replica, result)
    });

    // The bucket-log writer with its default retries, and a follower.
    let log_store = impatient_store("server_kill_log");
    let writer = Log::new(
        BucketStorage::open(
            log_store.clone(),
            "log",
            BucketOptions::default().with_flush_interval(Duration::from_millis(10)),
        )
        .await
        .expect("open the bucket writer"),
    );
    let follower = BucketFollower::open(
        log_store.clone(),
        "log",
        BucketFollowerOptions::default()
            .with_poll_interval(Duration::from_millis(20))
            .with_prefetch(4),
    )
    .await
    .expect("open the follower");

    let wal_outcomes: Arc<Mutex<Outcomes>> = Arc::default();
    let log_outcomes: Arc<Mutex<Outcomes>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for who in 0..3 {
        let (producer, out, halt) = (producer.clone(), wal_outcomes.clone(), stop.clone());
        load.push(tokio::spawn(async move {
            let mut i = 0;
            while !halt.load(Ordering::SeqCst) {
                let data = format!("w{who}-{i}");
                i += 1;
                let result = match producer.append(vec![Bytes::from(data.clone())], None).await {
                    Ok(d) => d.wait().await,
                    Err(e) => Err(e),
                };
                {
                    let mut out = out.lock().unwrap();
                    match result {
                        Ok(seq) => {
                            out.acked.insert(data, seq);
                        }
                        Err(e) => out.failed.push((data, e.kind())),
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
        let (writer, out, halt) = (writer.clone(), log_outcomes.clone(), stop.clone());
        load.push(tokio::spawn(async move {
            let tag: LogTag = format!("acct:{who}").parse().unwrap();
            let mut i = 0;
            while !halt.load(Ordering::SeqCst) {
                let data = format!("l{who}-{i}");
                i += 1;
                let result = writer
                    .append(AppendRequest::new(tag.clone(), data.clone()))
                    .await;
                let halted = result.is_err();
                {
                    let mut out = out.lock().unwrap();
                    match result {
                        Ok(r) => {
                            out.acked.insert(data, r.seqnum);
                        }
                        Err(e) => out.failed.push((data, e.kind())),
                    }
                }
                let pause = if halted { 50 } else { 5 };
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }));
    }

    // Let both logs grow, then kill the server mid-write.
    let grown = Instant::now();
    while wal_outcomes.lock().unwrap().acked.len() < 30
        || log_outcomes.lock().unwrap().acked.len() < 30
    {
        assert!(
            grown.elapsed() < Duration::from_secs(60),
            "the logs did not grow before the kill"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let down = Arc::new(AtomicBool::new(true));
    let guard = RestartGuard { down: down.clone() };
    kill(pid);
    let killed_at = Instant::now();
    while alive(pid) && killed_at.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(pid), "the server survived SIGKILL");
    let acked_before_kill = wal_outcomes.lock().unwrap().acked.len();
    // Appends keep coming while the server is down.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let new_pid = tokio::task::spawn_blocking(restart).await.unwrap();
    down.store(false, Ordering::SeqCst);
    drop(guard);
    assert_ne!(new_pid, pid);
    assert!(alive(new_pid), "the restarted server is running");

    // Load continues against the restarted server.
    let resumed = Instant::now();
    while wal_outcomes.lock().unwrap().acked.len() < acked_before_kill + 20 {
        assert!(
            resumed.elapsed() < Duration::from_secs(90),
            "the patient producer did not continue after the restart: {:?}",
            producer.halted()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for task in load {
        task.await.unwrap();
    }

    // The patient producer continued: nothing failed, all is committed.
    let wal = std::mem::take(&mut *wal_outcomes.lock().unwrap());
    assert!(
        wal.failed.is_empty(),
        "the patient producer failed appends: {:?}",
        wal.failed
    );
    producer.close().await.expect("close the producer");
    let committed = support::wal::records(&wal_store, "wal/manifest").await;
    let by_data: HashMap<String, u64> = committed
        .iter()
        .map(|(seq, r)| (String::from_utf8(r.to_vec()).unwrap(), *seq))
        .collect();
    assert_eq!(
        by_data.len(),
        committed.len(),
        "no record is in the WAL twice"
    );
    for (data, seq) in &wal.acked {
        assert_eq!(by_data.get(data), Some(seq), "acknowledged {data} at {seq}");
    }
    // The replica resumed and saw everything.
    let end = committed.len() as u64;
    let caught_up = Instant::now();
    while replica_seen.lock().unwrap().len() < committed.len() {
        assert!(
            caught_up.elapsed() < Duration::from_secs(60),
            "the replica did not catch up after the restart"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop_replica.send(());
    let (_, replica_result) = replica_task.await.unwrap();
    replica_result.expect("the replica ran through the outage");
    let seen = replica_seen.lock().unwrap().clone();
    for (seq, data) in &committed {
        assert_eq!(seen.get(seq), Some(data), "replica record {seq} of {end}");
    }

    // The bucket-log writer continued or halted with a clear error.
    let log = std::mem::take(&mut *log_outcomes.lock().unwrap());
    for (data, kind) in &log.failed {
        assert!(
            matches!(
                kind,
                ErrorKind::Unavailable | ErrorKind::Indeterminate | ErrorKind::Closed
            ),
            "append {data} failed with {kind:?}: not a clear outage error"
        );
    }
    let halted = !log.failed.is_empty();
    eprintln!(
        "server_kill: bucket writer {} ({} acked, {} failed); WAL producer {} acked",
        if halted { "halted" } else { "continued" },
        log.acked.len(),
        log.failed.len(),
        wal.acked.len()
    );
    let _ = writer.storage().close().await;
    let reopened = Log::new(
        BucketStorage::open(log_store.clone(), "log", BucketOptions::default())
            .await
            .expect("a new writer opens after the restart"),
    );
    let entries = reopened
        .read_log(Position::Beginning, usize::MAX)
        .await
        .unwrap();
    let at: HashMap<String, u64> = entries
        .iter()
        .map(|e| (String::from_utf8(e.data.to_vec()).unwrap(), e.seqnum))
        .collect();
    assert_eq!(at.len(), entries.len(), "no entry is in the log twice");
    for (data, seq) in &log.acked {
        assert_eq!(at.get(data), Some(seq), "acknowledged {data} at {seq}");
    }
    for (data, kind) in &log.failed {
        if matches!(kind, ErrorKind::Unavailable | ErrorKind::Closed) {
            assert!(
                !at.contains_key(data),
                "{data} failed with {kind:?} (nothing committed) but is in the log"
            );
        }
    }
    // The follower resumed and sees what the new writer sees.
    let next = reopened.tip().await.unwrap().next;
    let caught_up = Instant::now();
    while follower.tip().await.unwrap().next < next {
        assert!(
            caught_up.elapsed() < Duration::from_secs(60),
            "the follower did not resume: {:?}",
            follower.stopped()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        follower.read(None, 0, usize::MAX).await.unwrap(),
        entries,
        "the follower's log equals the new writer's"
    );
    assert_eq!(follower.stopped(), None);
    follower.close().await.unwrap();
    reopened.storage().close().await.unwrap();
}
