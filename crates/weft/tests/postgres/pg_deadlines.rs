//! Waits with a deadline, on a real server behind a proxy that can stall
//! (forward nothing, close nothing: the server looks SIGSTOPped): an
//! append fails by its deadline, a read too, and `close` returns although
//! the tailer is in the middle of its sweep — the tailer's queries and the
//! groups in flight all have deadlines, and close does not wait past them.

// Tests read real time and randomness (process timeouts, fresh log names).
#![allow(clippy::disallowed_methods)]

use crate::support::pg as pg_support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use weft::storage::postgres::PgStorage;
use weft::{AppendRequest, ErrorKind, Log, LogTag};

/// Far above every deadline below: only a wait without one reaches it.
const NEVER: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_server_fails_calls_by_their_deadline_and_close_returns() {
    let proxy = pg_support::proxy::Proxy::start(pg_support::server_addr(), 7).await;
    let location = pg_support::via(
        &pg_support::fresh_location("stall"),
        proxy.addr,
        "sslmode=disable",
    );
    let options = pg_support::test_options()
        .with_op_timeout_ms(2_000)
        .with_statement_timeout_ms(1_000)
        .with_poll_interval_ms(100);
    let storage = PgStorage::open_with(location, options).await.unwrap();
    let log = Log::new(storage);
    let tag: LogTag = "s".parse().unwrap();
    log.append(AppendRequest::new(tag.clone(), "before"))
        .await
        .unwrap();
    // Nobody subscribes: the tailer's only query is its sweep, every poll
    // interval, so within one interval of the stall it sends a sweep the
    // stalled server never answers.
    proxy.faults.stalled.store(true, Ordering::Release);
    let err = tokio::time::timeout(NEVER, log.append(AppendRequest::new(tag.clone(), "during")))
        .await
        .expect("an append to a stalled server ends by its deadline")
        .expect_err("nothing answers");
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Indeterminate | ErrorKind::Unavailable
        ),
        "{err}"
    );
    let err = tokio::time::timeout(NEVER, log.tip())
        .await
        .expect("a read ends by its deadline")
        .expect_err("nothing answers");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    tokio::time::timeout(NEVER, log.close())
        .await
        .expect("close returns while the server is stalled")
        .unwrap();
    proxy.faults.stalled.store(false, Ordering::Release);
}
