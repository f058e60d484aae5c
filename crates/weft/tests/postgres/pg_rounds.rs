//! Staged groups and the rounds that settle them, on a real server: many
//! groups of several handles settled by one round each get their own
//! outcome (a failed condition and a known append id among them), with no
//! notification to wake anyone (only the collector's recheck); a log whose
//! functions an older build installed is upgraded at open, and the older
//! per-group call still answers on it; functions of an older revision are
//! replaced at open, those of a newer one kept. (Which handle asks after a
//! round is unit-tested in `collect.rs`: it is a rule, not a timing.)

// Tests read real time and randomness (process timeouts, fresh log names).
#![allow(clippy::disallowed_methods)]

use crate::support::pg as pg_support;

use std::time::Duration;

use pg_support::{numbering_lock_key as lock_key, until_staged};
use weft::storage::postgres::{PgLocation, PgStorage};
use weft::{AppendRequest, ErrorKind, Log, LogTag};

fn tag(s: &str) -> LogTag {
    s.parse().unwrap()
}

/// Handles that sweep only once a minute, so nothing but the collector's
/// own recheck and the rounds' notifications settles a staged group here.
async fn open_quiet(location: &PgLocation) -> Log {
    let options = pg_support::test_options()
        .with_pool_size(6)
        .with_max_in_flight(4)
        .with_poll_interval_ms(60_000);
    Log::new(
        PgStorage::open_with(location.clone(), options)
            .await
            .expect("open"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_settles_many_staged_groups_each_with_its_own_outcome() {
    let location = pg_support::fresh_location("settle");
    let (h1, h2) = (open_quiet(&location).await, open_quiet(&location).await);
    let c = tag("c");
    let first = h1
        .append(AppendRequest::new(c.clone(), "first").with_id("dup-1"))
        .await
        .unwrap();
    assert_eq!((first.seqnum, first.stream_version), (0, 0));

    // Another session holds the numbering lock: every group gets staged,
    // and no round notifies anyone until it lets go.
    let holder = pg_support::raw_client().await;
    let key = lock_key(&location);
    holder
        .execute(&format!("SELECT pg_advisory_lock({key})"), &[])
        .await
        .unwrap();
    type Answer = weft::Result<Vec<weft::AppendResult>>;
    type Job = std::pin::Pin<Box<dyn std::future::Future<Output = Answer> + Send>>;
    // What each appender does, on which handle.
    type Start = fn(Log) -> Job;
    let jobs: Vec<(&Log, Start)> = vec![
        // A condition that fails (the stream's next version is 1).
        (&h1, |log| {
            Box::pin(async move {
                log.append_if(AppendRequest::new(tag("c"), "stale"), 5)
                    .await
                    .map(|r| vec![r])
            })
        }),
        (&h1, |log| {
            Box::pin(async move {
                log.append(AppendRequest::new(tag("o1"), "x1"))
                    .await
                    .map(|r| vec![r])
            })
        }),
        // A condition that holds.
        (&h2, |log| {
            Box::pin(async move {
                log.append_if(AppendRequest::new(tag("c"), "next"), 1)
                    .await
                    .map(|r| vec![r])
            })
        }),
        // An append id already in the log.
        (&h2, |log| {
            Box::pin(async move {
                log.append(AppendRequest::new(tag("c"), "again").with_id("dup-1"))
                    .await
                    .map(|r| vec![r])
            })
        }),
        (&h1, |log| {
            Box::pin(async move {
                log.append_batch(vec![
                    AppendRequest::new(tag("o2"), "b1"),
                    AppendRequest::new(tag("o2"), "b2"),
                ])
                .await
            })
        }),
        (&h2, |log| {
            Box::pin(async move {
                log.append(AppendRequest::new(tag("o3"), "x3"))
                    .await
                    .map(|r| vec![r])
            })
        }),
    ];
    let mut waits = Vec::new();
    let mut staged = 0;
    for (log, job) in jobs {
        waits.push(tokio::spawn(job(log.clone())));
        // One group at a time, so the staging order (the round's order)
        // is the order above.
        staged += 1;
        until_staged(&location, staged).await;
    }
    assert_eq!(pg_support::count_rows(&location, "outcomes").await, 0);
    holder
        .execute(&format!("SELECT pg_advisory_unlock({key})"), &[])
        .await
        .unwrap();

    let mut answers = Vec::new();
    for w in waits {
        let answer = tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .expect("every staged group is answered without a sweep")
            .unwrap();
        answers.push(answer);
    }
    let err = answers[0].as_ref().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    let numbers = |i: usize| -> Vec<(u64, u64)> {
        answers[i]
            .as_ref()
            .unwrap()
            .iter()
            .map(|r| (r.seqnum, r.stream_version))
            .collect()
    };
    assert_eq!(numbers(1), vec![(1, 0)], "o1");
    assert_eq!(numbers(2), vec![(2, 1)], "c, conditional");
    assert_eq!(
        numbers(3),
        vec![(0, 0)],
        "the known id answers the original"
    );
    assert_eq!(numbers(4), vec![(3, 0), (4, 1)], "o2, a batch");
    assert_eq!(numbers(5), vec![(5, 0)], "o3");
    assert_eq!(h2.tip().await.unwrap().next, 6, "dense");
    let c_entries = h2.read_all(&c).await.unwrap();
    let data: Vec<&[u8]> = c_entries.iter().map(|e| &e.data[..]).collect();
    assert_eq!(data, vec![&b"first"[..], &b"next"[..]]);
    assert_eq!(pg_support::count_rows(&location, "staged").await, 0);
    assert_eq!(
        pg_support::count_rows(&location, "outcomes").await,
        0,
        "every outcome collected"
    );
    h1.close().await.unwrap();
    h2.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_logs_functions_are_upgraded_and_its_old_call_still_answers() {
    let location = pg_support::fresh_location("upgrade");
    let s = location.log().to_owned();
    let first = pg_support::open(&location).await;
    weft::Storage::close(&first).await.unwrap();
    // What a log of a build before `outcomes_of` looks like.
    let raw = pg_support::raw_client().await;
    raw.batch_execute(&format!(r#"DROP FUNCTION "{s}".outcomes_of(bigint[])"#))
        .await
        .unwrap();
    let has_bulk = || pg_support::function_count(&location, "outcomes_of");
    assert_eq!(has_bulk().await, 0);

    let log = open_quiet(&location).await;
    assert_eq!(has_bulk().await, 1, "upgraded at open");

    // A staged group of this build is collected through the new call...
    let key = lock_key(&location);
    raw.execute(&format!("SELECT pg_advisory_lock({key})"), &[])
        .await
        .unwrap();
    let staged = tokio::spawn({
        let log = log.clone();
        async move { log.append(AppendRequest::new(tag("o"), "new")).await }
    });
    until_staged(&location, 1).await;
    raw.execute(&format!("SELECT pg_advisory_unlock({key})"), &[])
        .await
        .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), staged)
        .await
        .expect("answered")
        .unwrap()
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (0, 0));

    // ...and an older process's per-group call still answers on the
    // upgraded functions: it runs the round and collects its group.
    let id: i64 = raw
        .query_one(
            &format!(
                "INSERT INTO \"{s}\".staged \
                 (primary_tags, secondary, data, expected, ids, batch_len, ts) \
                 VALUES (ARRAY['o'], ARRAY[NULL::text], ARRAY['old'::bytea], \
                         ARRAY[NULL::bigint], ARRAY[NULL::text], ARRAY[1], 0) RETURNING id"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let rows = raw
        .query(&format!(r#"SELECT * FROM "{s}".outcome_of($1)"#), &[&id])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let (status, seqnum, version): (i16, Option<i64>, Option<i64>) =
        (rows[0].get(0), rows[0].get(1), rows[0].get(2));
    assert_eq!((status, seqnum, version), (0, Some(1), Some(1)));
    let all = log.read_all(&tag("o")).await.unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(&all[1].data[..], b"old");
    log.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_function_revisions_are_replaced_at_open_and_newer_ones_kept() {
    let location = pg_support::fresh_location("revision");
    let s = location.log().to_owned();
    let first = pg_support::open(&location).await;
    weft::Storage::close(&first).await.unwrap();
    let raw = pg_support::raw_client().await;
    // The revision the log says, and whether `told_now` still carries the
    // marker put into it below.
    let state = || async {
        let raw = pg_support::raw_client().await;
        let present = pg_support::function_count(&location, "functions_revision").await;
        let revision: Option<i32> = if present > 0 {
            let q = format!(r#"SELECT "{s}".functions_revision()"#);
            Some(raw.query_one(&q, &[]).await.unwrap().get(0))
        } else {
            None
        };
        let marked: bool = raw
            .query_one(
                "SELECT p.prosrc LIKE '%4242%' FROM pg_catalog.pg_proc p \
                 JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
                 WHERE n.nspname = $1 AND p.proname = 'told_now'",
                &[&s],
            )
            .await
            .unwrap()
            .get(0);
        (revision, marked)
    };
    let revision = state().await.0.expect("a new log says its revision");
    assert!(revision >= 2, "revision {revision}");
    let mark = format!(
        r#"CREATE OR REPLACE FUNCTION "{s}".told_now() RETURNS bigint[] LANGUAGE sql STABLE
           AS $fn$ SELECT '{{4242}}'::bigint[] $fn$;"#
    );

    // A log whose functions predate revisions (revision 1): replaced.
    raw.batch_execute(&format!(
        r#"{mark} DROP FUNCTION "{s}".functions_revision();"#
    ))
    .await
    .unwrap();
    assert_eq!(state().await, (None, true));
    let log = open_quiet(&location).await;
    assert_eq!(state().await, (Some(revision), false), "replaced at open");
    log.close().await.unwrap();

    // Functions of a later revision than this build's: kept as they are.
    raw.batch_execute(&format!(
        r#"{mark} CREATE OR REPLACE FUNCTION "{s}".functions_revision() RETURNS integer
           LANGUAGE sql IMMUTABLE AS $fn$ SELECT {} $fn$;"#,
        revision + 1
    ))
    .await
    .unwrap();
    let log = open_quiet(&location).await;
    assert_eq!(
        state().await,
        (Some(revision + 1), true),
        "newer functions kept"
    );
    let r = log
        .append(AppendRequest::new(tag("k"), "still"))
        .await
        .unwrap();
    assert_eq!(r.seqnum, 0);
    log.close().await.unwrap();
}
