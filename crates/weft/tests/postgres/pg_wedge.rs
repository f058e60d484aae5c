//! The serial sections of a PostgreSQL log under a backlog, on a real
//! server: a slow round (here: another session holding the numbering lock)
//! while many large appends stage, then the lock goes; every round after
//! takes a bounded share of the backlog (rounds are made small through the
//! connection's `weft.round_max_*` settings, so a small backlog needs many
//! of them), small appends land meanwhile, and the backlog drains by
//! itself. A retried append id is never staged a second time while its
//! first try waits. Trimming a long log deletes its rows in bounded chunks
//! and leaves none behind. A log made by the build before bounded rounds
//! (a fixture of its functions) opens, upgraded, and reads.

// Tests read real time and randomness (process timeouts, fresh log names).
#![allow(clippy::disallowed_methods)]

use crate::support::pg as pg_support;

use std::time::Duration;

use futures::StreamExt;
use pg_support::{HeldLock, until_staged};
use weft::storage::postgres::{PgLocation, PgOptions, PgStorage};
use weft::{AppendRequest, ErrorKind, Log, LogTag};

fn tag(s: &str) -> LogTag {
    s.parse().unwrap()
}

/// Every connection of a handle on this location takes one staged group
/// per round (at most two groups, and no payload bytes beyond the first).
fn small_rounds(location: &PgLocation) -> PgLocation {
    format!(
        "{}?log={}&options=-c%20weft.round_max_groups%3D2%20-c%20weft.round_max_bytes%3D1",
        pg_support::server_url(),
        location.log()
    )
    .parse()
    .expect("location with small rounds")
}

async fn open_with(location: &PgLocation, options: PgOptions) -> Log {
    Log::new(
        PgStorage::open_with(location.clone(), options)
            .await
            .expect("open"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_behind_a_slow_round_drains_in_bounded_rounds() {
    let location = small_rounds(&pg_support::fresh_location("wedge"));
    let options = pg_support::test_options()
        .with_pool_size(6)
        .with_max_in_flight(4)
        .with_max_group_entries(1);
    let handles = [
        open_with(&location, options.clone()).await,
        open_with(&location, options.clone()).await,
        open_with(&location, options.clone()).await,
    ];
    // Listens to the rounds' reports before anything is staged.
    let (listener, mut connection) =
        tokio_postgres::connect(&pg_support::server_url(), tokio_postgres::NoTls)
            .await
            .expect("listener");
    let (reports_tx, mut reports) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(m)) = messages.next().await {
            if let tokio_postgres::AsyncMessage::Notification(n) = m {
                let _ = reports_tx.send(n.payload().to_owned());
            }
        }
    });
    listener
        .batch_execute(&format!(r#"LISTEN "weft_settled_{}""#, location.log()))
        .await
        .unwrap();

    // The slow round: another session holds the numbering lock while
    // twelve large appends (three handles, four groups in flight each)
    // stage.
    let holder = HeldLock::take(&location).await;
    let big = vec![7u8; 256 << 10];
    let mut waits = Vec::new();
    for i in 0..12 {
        let log = handles[i % 3].clone();
        let data = big.clone();
        waits.push(tokio::spawn(async move {
            log.append(AppendRequest::new(tag("big"), data)).await
        }));
    }
    until_staged(&location, 12).await;
    holder.release().await;

    // Small appends land while the backlog drains.
    for i in 0..5 {
        let r = handles[i % 3]
            .append(AppendRequest::new(tag("small"), "x"))
            .await
            .expect("a small append after the slow round");
        assert_eq!(r.stream_version, i as u64);
    }
    let mut seqnums = Vec::new();
    for w in waits {
        let r = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("every staged group is answered")
            .unwrap()
            .expect("every staged large append lands");
        seqnums.push(r.seqnum);
    }
    seqnums.sort_unstable();
    seqnums.dedup();
    assert_eq!(seqnums.len(), 12, "twelve distinct seqnums");
    let tip = handles[0].tip().await.unwrap();
    assert_eq!(tip.next, 17, "dense: 12 large and 5 small entries");
    let all = handles[1].read_all(&tag("big")).await.unwrap();
    assert_eq!(all.len(), 12);
    assert!(all.iter().all(|e| e.data.len() == big.len()));
    assert_eq!(pg_support::count_rows(&location, "staged").await, 0);

    // What the rounds reported: none settled more than its bound, and
    // some said they left groups behind.
    let mut left_behind = 0;
    let mut settled_rounds = 0;
    while let Ok(p) = reports.try_recv() {
        if p.contains('+') {
            left_behind += 1;
        }
        if !p.is_empty() {
            settled_rounds += 1;
        }
    }
    assert!(left_behind >= 1, "no round was bounded");
    assert!(
        settled_rounds >= 12,
        "12 staged groups, one a round, take at least 12 rounds: {settled_rounds}"
    );
    for h in handles {
        h.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_append_id_is_not_staged_again_while_its_first_try_waits() {
    let location = pg_support::fresh_location("retry");
    let waiting = open_with(&location, pg_support::test_options()).await;
    // The retrier gives up soon, so it can report while the first waits.
    let impatient = open_with(
        &location,
        pg_support::test_options()
            .with_op_timeout_ms(3_000)
            .with_statement_timeout_ms(2_000),
    )
    .await;
    let holder = HeldLock::take(&location).await;
    let payload = vec![1u8; 1 << 20];
    let first = tokio::spawn({
        let log = waiting.clone();
        let payload = payload.clone();
        async move {
            log.append(AppendRequest::new(tag("r"), payload).with_id("order-17"))
                .await
        }
    });
    until_staged(&location, 1).await;
    let err = impatient
        .append(AppendRequest::new(tag("r"), payload.clone()).with_id("order-17"))
        .await
        .expect_err("the first try still waits for its round");
    assert_eq!(err.kind(), ErrorKind::Indeterminate, "{err}");
    assert_eq!(
        pg_support::count_rows(&location, "staged").await,
        1,
        "the retry staged no second copy"
    );
    holder.release().await;
    let landed = tokio::time::timeout(Duration::from_secs(30), first)
        .await
        .expect("answered")
        .unwrap()
        .expect("the first try lands");
    let again = impatient
        .append(AppendRequest::new(tag("r"), payload).with_id("order-17"))
        .await
        .expect("a retry after it landed answers the original");
    assert_eq!(again.seqnum, landed.seqnum);
    assert_eq!(
        impatient.tip().await.unwrap().next,
        1,
        "one copy in the log"
    );
    waiting.close().await.unwrap();
    impatient.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trimming_a_long_log_deletes_every_row_in_chunks() {
    let location = pg_support::fresh_location("trimchunks");
    let log = open_with(&location, pg_support::test_options()).await;
    // More entries than one delete statement takes (10,000).
    let t = tag("t");
    for _ in 0..3 {
        let batch: Vec<_> = (0..4_000)
            .map(|i| AppendRequest::new(t.clone(), format!("{i}")).with_tag(tag("also")))
            .collect();
        log.append_batch(batch).await.unwrap();
    }
    log.trim(11_993).await.unwrap();
    assert_eq!(pg_support::count_rows(&location, "entries").await, 6);
    assert_eq!(pg_support::count_rows(&location, "entry_tags").await, 6);
    assert_eq!(log.read_all(&t).await.unwrap().len(), 6);
    log.close().await.unwrap();
}

/// A log made by the build before bounded rounds (its tables and
/// functions, kept in `tests/data`), with an entry numbered and a group
/// staged by those functions: this build upgrades the functions at open,
/// numbers the staged group, reads everything, and keeps the append ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_made_before_bounded_rounds_opens_upgraded_and_reads() {
    let location = pg_support::fresh_location("before_bounded");
    let s = location.log().to_owned();
    let fixture = include_str!("../data/pg_layout1_before_bounded_rounds.sql");
    let raw = pg_support::raw_client().await;
    raw.batch_execute(&fixture.replace("__LOG__", &s))
        .await
        .unwrap();
    let append = format!(
        r#"SELECT status, seqnum FROM "{s}".append(ARRAY['a'], ARRAY[NULL::text],
             ARRAY[$1::bytea], ARRAY[NULL::bigint], ARRAY[$2::text], ARRAY[1], 0)"#
    );
    let row = raw
        .query_one(&append, &[&b"one".to_vec(), &"id-1"])
        .await
        .unwrap();
    assert_eq!((row.get::<_, i16>(0), row.get::<_, i64>(1)), (0, 0));
    // Staged by the old functions: another session holds the lock.
    let holder = HeldLock::take(&location).await;
    let row = raw
        .query_one(&append, &[&b"two".to_vec(), &"id-2"])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i16>(0), 4, "staged");
    holder.release().await;
    let has_round_ids = || pg_support::function_count(&location, "round_ids");
    assert_eq!(has_round_ids().await, 0);

    let log = open_with(&location, pg_support::test_options()).await;
    assert_eq!(has_round_ids().await, 1, "upgraded at open");
    let three = log
        .append(AppendRequest::new(tag("a"), "three").with_id("id-3"))
        .await
        .unwrap();
    // The staged group was numbered by this round (it is older) or by a
    // sweep before it: either way before "three".
    assert_eq!((three.seqnum, three.stream_version), (2, 2));
    let all = log.read_all(&tag("a")).await.unwrap();
    let data: Vec<&[u8]> = all.iter().map(|e| &e.data[..]).collect();
    assert_eq!(data, vec![&b"one"[..], &b"two"[..], &b"three"[..]]);
    for (id, seqnum) in [("id-1", 0), ("id-2", 1)] {
        let again = log
            .append(AppendRequest::new(tag("a"), "again").with_id(id))
            .await
            .unwrap();
        assert_eq!(again.seqnum, seqnum, "{id} answers the original");
    }
    assert_eq!(log.tip().await.unwrap().next, 3);
    assert_eq!(pg_support::count_rows(&location, "staged").await, 0);
    log.close().await.unwrap();
}
