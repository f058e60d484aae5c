//! The real server stops answering without going away: SeaweedFS is paused
//! with SIGSTOP (by its PID: the state dir's pid file, else
//! `WEFT_TEST_S3_PID`), so connections are accepted and requests never
//! answered — the case that used to stall a writer for minutes (eight
//! 30-second retries) where a dead server fails at once.
//!
//! With a 3-second deadline, every operation must end with `Unavailable`
//! (or `Indeterminate` for a write whose outcome is unknown) long before
//! such a stall; after SIGCONT the log is intact and writable.
//!
//! The only test in its binary, so no other test talks to the server while
//! it is paused; a guard resumes the server if the test fails.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

#[path = "support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::ObjectStore;
use weft::kv::KvStore;
use weft::objects::RetryPolicy;
use weft::storage::bucket::{
    self, BucketFollower, BucketFollowerOptions, BucketKv, BucketOptions, BucketStorage,
};
use weft::{AppendRequest, ErrorKind, Log, LogTag};

const DEADLINE: Duration = Duration::from_secs(3);

/// The bound each operation is held to: its deadline, the one read that
/// settles a write's outcome, and slack for a loaded machine. (The stall
/// this replaces lasted about four minutes.)
const BOUND: Duration = Duration::from_secs(25);

fn server_pid() -> u32 {
    let state = std::env::var("WEFT_TEST_S3_STATE_DIR").unwrap_or_default();
    let from_file = std::fs::read_to_string(PathBuf::from(state).join("pid"));
    let pid = match from_file {
        Ok(pid) => pid,
        Err(_) => match std::env::var("WEFT_TEST_S3_PID") {
            Ok(pid) if !pid.is_empty() => pid,
            _ => panic!("WEFT_TEST_S3_PID is not set: {}", support::s3::NO_SERVER),
        },
    };
    pid.trim().parse().expect("the server pid is a number")
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {sig} {pid} failed");
}

/// Resumes the server however the test ends.
struct Paused(u32);

impl Paused {
    fn new(pid: u32) -> Self {
        signal(pid, "-STOP");
        Paused(pid)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

fn retry() -> RetryPolicy {
    RetryPolicy::default().with_deadline(DEADLINE)
}

/// What one operation did while the server was paused.
async fn timed<T>(
    name: &str,
    op: impl std::future::Future<Output = weft::Result<T>>,
    kinds: &[ErrorKind],
) {
    let started = Instant::now();
    let err = match op.await {
        Ok(_) => panic!("{name} succeeded against a paused server"),
        Err(e) => e,
    };
    let took = started.elapsed();
    eprintln!("server_pause: {name}: {:?} after {took:?}", err.kind());
    assert!(kinds.contains(&err.kind()), "{name}: {err}");
    assert!(took < BOUND, "{name} took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_server_fails_every_operation_at_its_deadline() {
    let pid = server_pid();
    let store: Arc<dyn ObjectStore> = {
        let mut s = support::s3::settings("server_pause");
        // As the CLI does: no request outlives the deadline in the client.
        s.request_timeout = Some(DEADLINE);
        s.http_retries = Some(1);
        s.http_retry_timeout = Some(DEADLINE);
        s.build().expect("build S3 store")
    };
    let options = |take_over| {
        BucketOptions::default()
            .with_retry(retry())
            .with_take_over(take_over)
            .with_flush_interval(Duration::from_millis(5))
    };
    let tag = LogTag::new("orders").unwrap();
    let writer = Log::new(
        BucketStorage::open(store.clone(), "log", options(false))
            .await
            .unwrap(),
    );
    for i in 0..3 {
        writer
            .append(AppendRequest::new(tag.clone(), format!("e{i}")))
            .await
            .unwrap();
    }

    {
        let _paused = Paused::new(pid);
        let outcome = [ErrorKind::Unavailable, ErrorKind::Indeterminate];
        timed(
            "append",
            writer.append(AppendRequest::new(tag.clone(), "during")),
            &outcome,
        )
        .await;
        timed(
            "writer open",
            BucketStorage::open(store.clone(), "log", options(true)),
            &outcome,
        )
        .await;
        timed(
            "follower open",
            BucketFollower::open(
                store.clone(),
                "log",
                BucketFollowerOptions::default().with_retry(retry()),
            ),
            &[ErrorKind::Unavailable],
        )
        .await;
        let kv = BucketKv::new(store.clone(), "log/kv").with_retry_policy(retry());
        timed(
            "kv compare-and-set",
            kv.compare_and_set(&tag, "k", None, Some(Bytes::from("v"))),
            &outcome,
        )
        .await;
        timed(
            "gc",
            bucket::gc(store.clone(), "log")
                .with_retry_policy(retry())
                .run(),
            &[ErrorKind::Unavailable],
        )
        .await;
        timed(
            "tool trim",
            bucket::trim_unowned(store.clone(), "log", 0, weft::clock::system(), &retry()),
            &[ErrorKind::Unavailable],
        )
        .await;
    }

    // Resumed: the log holds what was acknowledged, and a new writer (the
    // old one stopped after its failure) goes on.
    let _ = writer.storage().close().await;
    let reopened = Log::new(
        BucketStorage::open(store.clone(), "log", options(true))
            .await
            .unwrap(),
    );
    let all = reopened.read_all(&tag).await.unwrap();
    assert!(all.len() == 3 || all.len() == 4, "{} entries", all.len());
    reopened
        .append(AppendRequest::new(tag.clone(), "after"))
        .await
        .unwrap();
    reopened.close().await.unwrap();
}
