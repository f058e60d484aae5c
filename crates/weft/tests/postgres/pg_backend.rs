//! The PostgreSQL backend beyond the conformance suite, on a real server:
//! exactly-once appends (also through a proxy that cuts connections before
//! and after COMMIT), conditional appends sharing a transaction, statement
//! timeouts, terminated connections, handles that see each other's
//! appends.

// Tests read real time and randomness (process timeouts, fresh log names).
#![allow(clippy::disallowed_methods)]

use crate::support::pg as pg_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use pg_support::proxy::Proxy;
use weft::storage::postgres::PgStorage;
use weft::{AppendRequest, ErrorKind, Log, LogTag, Position};

fn tag(s: &str) -> LogTag {
    s.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_ids_return_the_original_result() {
    let location = pg_support::fresh_location("ids");
    let log = Log::new(pg_support::open(&location).await);
    let t = tag("orders");
    let first = log
        .append(AppendRequest::new(t.clone(), "a").with_id("order-1"))
        .await
        .unwrap();
    log.append(AppendRequest::new(t.clone(), "b"))
        .await
        .unwrap();
    // The same id again, even with another payload, tag or condition:
    // nothing is written, the original result comes back.
    let again = log
        .append_if(
            AppendRequest::new(tag("other"), "a-again").with_id("order-1"),
            7,
        )
        .await
        .unwrap();
    assert_eq!(again, first);
    // From another handle (another process, for the database).
    let other = Log::new(pg_support::open(&location).await);
    let from_other = other
        .append(AppendRequest::new(t.clone(), "a").with_id("order-1"))
        .await
        .unwrap();
    assert_eq!(from_other, first);
    // In a batch: the known id is answered, the new one written.
    let results = other
        .append_batch(vec![
            AppendRequest::new(t.clone(), "c").with_id("order-2"),
            AppendRequest::new(t.clone(), "a").with_id("order-1"),
        ])
        .await
        .unwrap();
    assert_eq!(results[1], first);
    assert_eq!(results[0].seqnum, 2);
    assert_eq!(log.read_all(&t).await.unwrap().len(), 3);
    // An id twice in one batch is a caller error.
    let err = log
        .append_batch(vec![
            AppendRequest::new(t.clone(), "x").with_id("dup"),
            AppendRequest::new(t.clone(), "y").with_id("dup"),
        ])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = log
        .append(AppendRequest::new(t.clone(), "x").with_id("bad\nid"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(log.read_all(&t).await.unwrap().len(), 3);
}

/// With one transaction in flight, concurrent appends share transactions;
/// the conditional ones that lose get `Conflict` and their neighbours are
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_losing_conditional_append_does_not_fail_its_group() {
    let location = pg_support::fresh_location("group");
    let options = pg_support::test_options().with_max_in_flight(1);
    let log = Log::new(PgStorage::open_with(location, options).await.unwrap());
    for round in 0..5u64 {
        let tasks: Vec<_> = (0..24)
            .map(|i| {
                let log = log.clone();
                tokio::spawn(async move {
                    if i % 2 == 0 {
                        log.append(AppendRequest::new(tag("plain"), format!("{round}/{i}")))
                            .await
                            .map(|_| false)
                    } else {
                        log.append_if(
                            AppendRequest::new(tag("race"), format!("{round}/{i}")),
                            round,
                        )
                        .await
                        .map(|_| true)
                    }
                })
            })
            .collect();
        let mut wins = 0;
        for (i, task) in tasks.into_iter().enumerate() {
            match task.await.unwrap() {
                Ok(true) => wins += 1,
                Ok(false) => {}
                Err(e) => {
                    assert_eq!(i % 2, 1, "an unconditional append failed: {e}");
                    assert_eq!(e.kind(), ErrorKind::Conflict);
                    assert_eq!(e.conflict_next_version(), Some(round + 1));
                }
            }
        }
        assert_eq!(wins, 1, "round {round}");
    }
    assert_eq!(log.read_all(&tag("plain")).await.unwrap().len(), 60);
    assert_eq!(log.read_all(&tag("race")).await.unwrap().len(), 5);
}

/// A statement that waits past the server's `statement_timeout` is
/// cancelled there: `Unavailable`, and nothing was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_timeout_is_unavailable_and_writes_nothing() {
    let location = pg_support::fresh_location("stmt_timeout");
    let options = pg_support::test_options().with_statement_timeout_ms(300);
    let log = Log::new(
        PgStorage::open_with(location.clone(), options)
            .await
            .unwrap(),
    );
    // Another session holds the head lock.
    let mut blocker = pg_support::raw_client().await;
    let tx = blocker.transaction().await.unwrap();
    tx.execute(
        &format!("SELECT * FROM \"{}\".head FOR UPDATE", location.log()),
        &[],
    )
    .await
    .unwrap();
    let err = log
        .append(AppendRequest::new(tag("t"), "x"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    tx.rollback().await.unwrap();
    assert!(
        log.read_log(Position::Beginning, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let r = log.append(AppendRequest::new(tag("t"), "y")).await.unwrap();
    assert_eq!(r.seqnum, 0);
}

/// Backends terminated by the server mid-load: each append fails with a
/// retry kind or succeeds, none hangs, and the pool replaces the
/// connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_connections_fail_cleanly_and_the_pool_reconnects() {
    let base = pg_support::fresh_location("terminate");
    let app = format!("weft_{}", base.log());
    let location = pg_support::via(
        &base,
        pg_support::server_addr(),
        &format!("application_name={app}"),
    );
    let log = Log::new(pg_support::open(&location).await);
    let admin = pg_support::raw_client().await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let log = log.clone();
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let (mut ok, mut failed) = (Vec::new(), 0u64);
                let mut i = 0u64;
                while !stop.load(Ordering::Acquire) {
                    i += 1;
                    let payload = format!("{w}/{i}");
                    match log
                        .append(AppendRequest::new(tag("t"), payload.clone()))
                        .await
                    {
                        Ok(r) => ok.push((r.seqnum, payload)),
                        Err(e) => {
                            assert!(
                                matches!(
                                    e.kind(),
                                    ErrorKind::Unavailable | ErrorKind::Indeterminate
                                ),
                                "unexpected {e}"
                            );
                            failed += 1;
                        }
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    let mut terminated = 0i64;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let row = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .await
            .unwrap();
        terminated += row.get::<_, i64>(0);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Release);
    let mut acked = Vec::new();
    let mut failures = 0;
    for w in writers {
        let (ok, failed) = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("no append hangs")
            .unwrap();
        acked.extend(ok);
        failures += failed;
    }
    assert!(terminated > 0, "the test terminated no backend");
    eprintln!(
        "terminated {terminated} backends; {failures} appends failed, {} acknowledged",
        acked.len()
    );
    // After the storm: the handle works, and every acknowledged append is there.
    log.append(AppendRequest::new(tag("t"), "after"))
        .await
        .unwrap();
    let all = log.read_log(Position::Beginning, 100_000).await.unwrap();
    let by_seq: BTreeMap<u64, &[u8]> = all.iter().map(|e| (e.seqnum, &e.data[..])).collect();
    for (seqnum, payload) in &acked {
        assert_eq!(by_seq.get(seqnum).copied(), Some(payload.as_bytes()));
    }
    let seqnums: Vec<u64> = all.iter().map(|e| e.seqnum).collect();
    assert_eq!(seqnums, (0..all.len() as u64).collect::<Vec<_>>());
}

/// Appends with ids through a proxy that cuts connections before the
/// server sees a statement and after it answered (a COMMIT whose
/// acknowledgement is lost). Every `Indeterminate` and `Unavailable` is
/// retried with the same id; in the end each id is in the log exactly
/// once, with the result its appender was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_appends_with_ids_land_exactly_once_across_cuts() {
    let base = pg_support::fresh_location("exactly_once");
    let proxy = Proxy::start(pg_support::server_addr(), 0x5eed).await;
    let location = pg_support::via(&base, proxy.addr, "");
    let options = pg_support::test_options()
        .with_op_timeout_ms(5_000)
        .with_statement_timeout_ms(4_000);
    let log = Log::new(PgStorage::open_with(location, options).await.unwrap());
    let direct = Log::new(pg_support::open(&base).await);
    proxy.faults.cut_per_mille.store(60, Ordering::Relaxed);
    let landed_unacked = Arc::new(AtomicU64::new(0));
    let never_landed = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..6)
        .map(|w| {
            let (log, direct) = (log.clone(), direct.clone());
            let (landed_unacked, never_landed) =
                (Arc::clone(&landed_unacked), Arc::clone(&never_landed));
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for i in 0..40 {
                    let id = format!("w{w}-i{i}");
                    let mut attempts = 0;
                    loop {
                        attempts += 1;
                        assert!(attempts < 200, "{id}: no success in 200 attempts");
                        let req = AppendRequest::new(tag(&format!("w{w}")), id.clone())
                            .with_id(id.clone());
                        match log.append(req).await {
                            Ok(r) => {
                                acked.push((id, r));
                                break;
                            }
                            Err(e) if e.kind() == ErrorKind::Indeterminate => {
                                // Did it land? Ask the database directly,
                                // only to count both cases.
                                let t = tag(&format!("w{w}"));
                                let there = direct
                                    .read_all(&t)
                                    .await
                                    .unwrap()
                                    .iter()
                                    .any(|e| e.data == id.as_bytes());
                                let counter = if there {
                                    &landed_unacked
                                } else {
                                    &never_landed
                                };
                                counter.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) if e.kind() == ErrorKind::Unavailable => {}
                            Err(e) => panic!("{id}: unexpected {e}"),
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                acked
            })
        })
        .collect();
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    proxy.faults.cut_per_mille.store(0, Ordering::Relaxed);
    let all = direct.read_log(Position::Beginning, 100_000).await.unwrap();
    let mut ids = BTreeSet::new();
    for e in &all {
        assert!(
            ids.insert(e.data.clone()),
            "id {:?} is in the log twice",
            e.data
        );
    }
    assert_eq!(all.len(), 6 * 40);
    for (id, r) in &acked {
        let e = &all[r.seqnum as usize];
        assert_eq!(
            &e.data[..],
            id.as_bytes(),
            "the acknowledged seqnum holds the id"
        );
        assert_eq!(e.stream_version, r.stream_version);
    }
    let (cut_req, cut_ans) = (
        proxy.faults.cut_requests.load(Ordering::Relaxed),
        proxy.faults.cut_answers.load(Ordering::Relaxed),
    );
    let (landed, lost) = (
        landed_unacked.load(Ordering::Relaxed),
        never_landed.load(Ordering::Relaxed),
    );
    eprintln!(
        "cuts: {cut_req} requests, {cut_ans} answers; indeterminate appends: {landed} had landed, {lost} had not"
    );
    assert!(cut_req > 0 && cut_ans > 0, "the proxy cut nothing");
    assert!(
        landed > 0,
        "no lost acknowledgement of a landed append was exercised"
    );
    assert!(
        lost > 0,
        "no indeterminate append that never landed was exercised"
    );
}

/// Two handles on one log (as two processes would be): a subscriber on
/// one sees the other's appends, backlog then live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_sees_another_handles_appends() {
    let location = pg_support::fresh_location("two_handles");
    let a = Log::new(pg_support::open(&location).await);
    let b = Log::new(pg_support::open(&location).await);
    let t = tag("t");
    a.append(AppendRequest::new(t.clone(), "0")).await.unwrap();
    let mut sub = b.subscribe(&t, Position::Beginning);
    for i in 1..50 {
        a.append(AppendRequest::new(t.clone(), format!("{i}")))
            .await
            .unwrap();
    }
    for i in 0..50u64 {
        let e = tokio::time::timeout(Duration::from_secs(20), sub.next())
            .await
            .expect("the subscriber keeps up")
            .unwrap()
            .unwrap();
        assert_eq!((e.seqnum, &e.data[..]), (i, format!("{i}").as_bytes()));
    }
}

/// Stages one group the way a process that then died would have left it:
/// committed in `staged`, never numbered.
async fn stage_directly(
    location: &weft::storage::postgres::PgLocation,
    data: &str,
    id: Option<&str>,
) {
    let client = pg_support::raw_client().await;
    let s = location.log();
    let ids: Vec<Option<&str>> = vec![id];
    client
        .execute(
            &format!(
                "INSERT INTO \"{s}\".staged \
                 (primary_tags, secondary, data, expected, ids, batch_len, ts) \
                 VALUES (ARRAY['orders'], ARRAY[NULL::text], ARRAY[$1::bytea], \
                         ARRAY[NULL::bigint], $2, ARRAY[1], 0)"
            ),
            &[&data.as_bytes(), &ids],
        )
        .await
        .expect("stage a group");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_staged_by_a_process_that_died_is_numbered_by_a_sweep() {
    let location = pg_support::fresh_location("orphan");
    // The log exists; then "a process" stages a group and dies.
    let first = pg_support::open(&location).await;
    weft::Storage::close(&first).await.unwrap();
    stage_directly(&location, "left behind", None).await;
    assert_eq!(pg_support::count_rows(&location, "staged").await, 1);
    // Nobody appends again: a handle's tailer sweeps at its first poll.
    let log = Log::new(pg_support::open(&location).await);
    let mut sub = log.subscribe(&tag("orders"), Position::Beginning);
    let e = tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .expect("the orphaned group was numbered")
        .unwrap()
        .unwrap();
    assert_eq!(
        (e.seqnum, e.stream_version, &e.data[..]),
        (0, 0, &b"left behind"[..])
    );
    assert_eq!(pg_support::count_rows(&location, "staged").await, 0);
    // Nobody collects its outcome; it stays until the outcome window ends.
    assert_eq!(pg_support::count_rows(&location, "outcomes").await, 1);
    log.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_of_a_staged_group_lands_once() {
    // An appender staged a group with an id and gave up (its outcome was
    // Indeterminate); its retry, with the same id, is numbered in the same
    // round or a later one: either way the id lands once, and the retry
    // gets the original's numbers.
    let location = pg_support::fresh_location("restage");
    let log = Log::new(pg_support::open(&location).await);
    log.append(AppendRequest::new(tag("orders"), "before"))
        .await
        .unwrap();
    stage_directly(&location, "first try", Some("order-9")).await;
    let retry = log
        .append(AppendRequest::new(tag("orders"), "second try").with_id("order-9"))
        .await
        .unwrap();
    let all = log.read_all(&tag("orders")).await.unwrap();
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[1].seqnum, retry.seqnum);
    assert_eq!(&all[1].data[..], b"first try", "the staged original won");
    log.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_handles_leave_nothing_staged_and_no_outcome_behind() {
    let location = pg_support::fresh_location("rounds");
    let mut handles = Vec::new();
    for _ in 0..4 {
        handles.push(Log::new(pg_support::open(&location).await));
    }
    let mut tasks = Vec::new();
    for (h, log) in handles.iter().enumerate() {
        for a in 0..8 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                let own = tag(&format!("s:h{h}a{a}"));
                let mut out = Vec::new();
                for i in 0..25u64 {
                    // Conditional on the appender's own stream: never a
                    // conflict, always a check.
                    let r = log
                        .append_if(AppendRequest::new(own.clone(), format!("{i}")), i)
                        .await
                        .unwrap();
                    assert_eq!(r.stream_version, i);
                    out.push(r.seqnum);
                }
                out
            }));
        }
    }
    let mut seqnums = BTreeSet::new();
    for t in tasks {
        for s in t.await.unwrap() {
            assert!(seqnums.insert(s), "seqnum {s} twice");
        }
    }
    assert_eq!(seqnums.len(), 4 * 8 * 25);
    assert_eq!(
        *seqnums.last().unwrap() as usize,
        seqnums.len() - 1,
        "dense"
    );
    assert_eq!(pg_support::count_rows(&location, "staged").await, 0);
    assert_eq!(
        pg_support::count_rows(&location, "outcomes").await,
        0,
        "every outcome collected"
    );
    for log in handles {
        log.close().await.unwrap();
    }
}

/// A handle nobody subscribes on only moves its tip past other handles'
/// commits (it reads no entries); subscriptions made on it afterwards, from
/// before the jump, from inside it and from its end, still get every entry
/// once, in order, backlog then live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_handle_skips_ahead_and_later_subscriptions_miss_nothing() {
    let location = pg_support::fresh_location("idle_tailer");
    let writer = Log::new(pg_support::open(&location).await);
    let idle = Log::new(pg_support::open(&location).await);
    let t = tag("t");
    for i in 0..40u64 {
        writer
            .append(AppendRequest::new(t.clone(), format!("{i}")))
            .await
            .unwrap();
    }
    // The idle handle's tip follows the other's commits without anybody
    // subscribed (notifications, or the poll fallback).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while idle.tip().await.unwrap().next < 40 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the idle tip never moved"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut from_start = idle.subscribe_log(Position::Beginning);
    let mut from_middle = idle.subscribe_log(Position::At(25));
    let mut from_end = idle.subscribe_log(Position::End);
    for i in 40..60u64 {
        writer
            .append(AppendRequest::new(t.clone(), format!("{i}")))
            .await
            .unwrap();
    }
    // "End" is the end as this handle has heard of it (the announced tip
    // may trail the database by a notification): never after the entries
    // appended once it was made.
    let first_from_end = next_entry(&mut from_end).await;
    assert!(first_from_end.seqnum <= 40, "{}", first_from_end.seqnum);
    for (sub, first) in [
        (&mut from_start, 0u64),
        (&mut from_middle, 25),
        (&mut from_end, first_from_end.seqnum + 1),
    ] {
        for want in first..60 {
            let e = next_entry(sub).await;
            assert_eq!(
                (e.seqnum, &e.data[..]),
                (want, format!("{want}").as_bytes())
            );
        }
    }
    writer.close().await.unwrap();
    idle.close().await.unwrap();
}

async fn next_entry(sub: &mut weft::Subscription) -> weft::LogEntry {
    tokio::time::timeout(Duration::from_secs(20), sub.next())
        .await
        .expect("the subscription keeps up")
        .unwrap()
        .unwrap()
}

/// Two appenders whose clocks disagree (one a second behind the other, as
/// if stepped back): the log's timestamps still never go down, entries
/// stamped while behind take the newest stamp, and reads from a time find
/// the first entry at or after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_stay_monotonic_across_appenders_whose_clocks_disagree() {
    use weft::clock::ManualClock;
    let location = pg_support::fresh_location("clock");
    let (ahead, behind) = (ManualClock::new(2_000_000), ManualClock::new(1_000_000));
    let open = |clock: Arc<ManualClock>| {
        let location = location.clone();
        async move {
            Log::new(
                PgStorage::open_with_clock(location, pg_support::test_options(), clock)
                    .await
                    .unwrap(),
            )
        }
    };
    let (a, b) = (open(ahead.clone()).await, open(behind.clone()).await);
    let t = LogTag::new("t").unwrap();
    // (which appender, its clock then, the stamp the entry must get)
    let steps = [
        (&b, &behind, 1_000_000, 1_000_000),
        (&a, &ahead, 2_000_000, 2_000_000),
        (&b, &behind, 1_000_500, 2_000_000),
        (&b, &behind, 2_000_100, 2_000_100),
        (&a, &ahead, 2_000_050, 2_000_100),
        (&a, &ahead, 2_000_200, 2_000_200),
    ];
    for (i, (log, clock, now, want)) in steps.into_iter().enumerate() {
        clock.set(now);
        let r = log
            .append(AppendRequest::new(t.clone(), format!("{i}")))
            .await
            .unwrap();
        assert_eq!(r.timestamp_ms, want, "step {i}");
    }
    let entries = a.read_log(Position::Beginning, 100).await.unwrap();
    let stamps: Vec<u64> = entries.iter().map(|e| e.timestamp_ms).collect();
    assert_eq!(stamps, steps.map(|s| s.3));
    for (time, first) in [
        (0, 0),
        (1_000_001, 1),
        (2_000_000, 1),
        (2_000_100, 3),
        (2_000_101, 5),
        (2_000_201, 6),
    ] {
        assert_eq!(
            a.storage().seek_time(time).await.unwrap(),
            first,
            "seek {time}"
        );
    }
}
