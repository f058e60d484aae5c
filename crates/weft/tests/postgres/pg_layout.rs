//! Logs written by earlier builds open and read with this one: a log as
//! the last build of layout version 1 left it (entries numbered and copied
//! by rounds, one group still staged, a KV row), restored from a dump kept
//! in `tests/data`, is opened by this build, which numbers the staged group,
//! reads every entry by seqnum, by tag and by version, keeps the append ids
//! and the stream versions, and appends on after them.

// Tests read real time and randomness (fresh log names).
#![allow(clippy::disallowed_methods)]

use crate::support::pg as pg_support;

use futures::StreamExt;
use weft::storage::postgres::PgStorage;
use weft::{AppendRequest, ErrorKind, Log, LogTag, Position};

fn tag(s: &str) -> LogTag {
    s.parse().unwrap()
}

/// (seqnum, version, tags, data) of every entry `read` returned.
fn summary(entries: &[weft::LogEntry]) -> Vec<(u64, u64, Vec<String>, Vec<u8>)> {
    entries
        .iter()
        .map(|e| {
            (
                e.seqnum,
                e.stream_version,
                e.tags.iter().map(|t| t.to_string()).collect(),
                e.data.to_vec(),
            )
        })
        .collect()
}

fn entry(
    seqnum: u64,
    version: u64,
    tags: &[&str],
    data: &[u8],
) -> (u64, u64, Vec<String>, Vec<u8>) {
    (
        seqnum,
        version,
        tags.iter().map(|t| t.to_string()).collect(),
        data.to_vec(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_of_layout_1_with_a_staged_group_opens_and_reads() {
    let location = pg_support::fresh_location("layout1");
    let fixture = include_str!("../data/pg_layout1_staged_rounds.sql");
    pg_support::raw_client()
        .await
        .batch_execute(&fixture.replace("__LOG__", location.log()))
        .await
        .expect("restore the layout-1 log");
    let log = Log::new(
        PgStorage::open_with(location.clone(), pg_support::test_options())
            .await
            .expect("open a log of layout 1"),
    );

    // The staged group is numbered (by this handle's sweep, or by the
    // round of the first append below, whichever comes first), after
    // every entry numbered before it.
    let next = log
        .append(AppendRequest::new(tag("orders:1"), "shipped 1"))
        .await
        .expect("append to a log of layout 1");
    assert_eq!((next.seqnum, next.stream_version), (6, 2));

    let all = log
        .read_log(Position::Beginning, 100)
        .await
        .expect("read the whole log");
    let expected = vec![
        entry(0, 0, &["orders:1", "customers:7"], b"placed 1"),
        entry(1, 1, &["orders:1"], b"paid 1"),
        entry(2, 0, &["orders:2"], b"placed 2"),
        entry(3, 0, &["audit", "orders:2"], b"bin\x01ary"),
        entry(4, 0, &["orders:3"], b"placed 3"),
        entry(5, 1, &["orders:3", "audit", "customers:7"], b"paid 3"),
        entry(6, 2, &["orders:1"], b"shipped 1"),
    ];
    assert_eq!(summary(&all), expected);
    // The staged group keeps its appender's stamp unless an entry numbered
    // before it is stamped later: times are monotonic within the log.
    assert_eq!(
        all[4].timestamp_ms,
        all[3].timestamp_ms.max(1_764_790_000_000),
        "the staged timestamp"
    );
    assert!(
        all.windows(2)
            .all(|w| w[0].timestamp_ms <= w[1].timestamp_ms),
        "timestamps go down: {:?}",
        all.iter().map(|e| e.timestamp_ms).collect::<Vec<_>>()
    );

    // By tag, primary and secondary.
    let customers = log.read_all(&tag("customers:7")).await.unwrap();
    assert_eq!(
        customers.iter().map(|e| e.seqnum).collect::<Vec<_>>(),
        vec![0, 5]
    );
    let orders2 = log.read_all(&tag("orders:2")).await.unwrap();
    assert_eq!(
        orders2.iter().map(|e| e.seqnum).collect::<Vec<_>>(),
        vec![2, 3]
    );
    // By version.
    let versions = log.read_after_version(&tag("orders:1"), 0).await.unwrap();
    assert_eq!(
        versions.iter().map(|e| e.seqnum).collect::<Vec<_>>(),
        vec![1, 6]
    );
    assert_eq!(log.latest_version(&tag("orders:3")).await.unwrap(), Some(1));

    // Append ids of both kinds answer their originals.
    for (id, seqnum) in [("order-1", 0), ("order-2", 2), ("order-3", 4)] {
        let again = log
            .append(AppendRequest::new(tag("orders:9"), "again").with_id(id))
            .await
            .unwrap();
        assert_eq!(again.seqnum, seqnum, "{id} answers the original");
    }
    // Conditions see the versions written before.
    let err = log
        .append_if(AppendRequest::new(tag("orders:2"), "late"), 0)
        .await
        .expect_err("orders:2 is at version 1");
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    log.append_if(AppendRequest::new(tag("orders:2"), "shipped 2"), 1)
        .await
        .expect("the right version lands");

    // The KV written before.
    let kv = log.kv(tag("views:orders")).expect("kv");
    assert_eq!(
        kv.get("cursor").await.unwrap().as_deref(),
        Some(&b"\x2a"[..])
    );
    assert_eq!(log.tip().await.unwrap().next, 8);
    assert_eq!(pg_support::count_rows(&location, "staged").await, 0);

    // A hard delete reaches both places a payload lives: the rows layout 1
    // numbered (their own `data`) and this build's (`payloads`).
    let o1 = tag("orders:1");
    log.delete_stream(&o1).await.unwrap();
    assert_eq!(log.erase_stream(&o1).await.unwrap(), 3);
    let client = pg_support::raw_client().await;
    for secret in ["placed 1", "paid 1", "shipped 1"] {
        let found: i64 = client
            .query_one(
                &format!(
                    "SELECT (SELECT count(*) FROM \"{s}\".numbered \
                       WHERE position($1::bytea in coalesce(data, '')) > 0) \
                     + (SELECT count(*) FROM \"{s}\".payloads WHERE position($1::bytea in data) > 0)",
                    s = location.log()
                ),
                &[&secret.as_bytes()],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(found, 0, "{secret:?} is still stored");
    }
    let after = log.read_log(Position::Beginning, 100).await.unwrap();
    for e in &after {
        assert_eq!(
            e.data.is_empty(),
            e.primary_tag() == &o1,
            "entry {}",
            e.seqnum
        );
    }
    assert_eq!(after[3].data, &b"bin\x01ary"[..]);
    log.close().await.unwrap();
}

/// The current layout's own promises: a group staged while another round
/// holds the lock has its payloads on disk before any round numbers it;
/// the round writes each entry's numbers with a reference to the payload,
/// never a copy; a group whose condition fails is never visible, and its
/// payload rows go with the round that refused it; trimming deletes the
/// payloads of the trimmed entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_payloads_are_written_once_and_refused_ones_reclaimed() {
    let location = pg_support::fresh_location("written_once");
    // Two groups in flight at once, so both stage while the lock is held.
    let options = pg_support::test_options().with_max_in_flight(4);
    let log = Log::new(
        PgStorage::open_with(location.clone(), options)
            .await
            .unwrap(),
    );
    let other = Log::new(pg_support::open(&location).await);
    // Once the handle's subscription sees another handle's entry, its
    // tailer listens: its staged groups are told their outcomes.
    let warm = tag("warm");
    let mut sub = log.subscribe(&warm, Position::Beginning);
    other
        .append(AppendRequest::new(warm.clone(), "w"))
        .await
        .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(20), sub.next())
        .await
        .expect("the tailer hears the log")
        .unwrap()
        .unwrap();

    let holder = pg_support::HeldLock::take(&location).await;
    let refused = tokio::spawn({
        let log = log.clone();
        async move {
            log.append_if(AppendRequest::new(tag("c"), vec![1u8; 1000]), 5)
                .await
        }
    });
    pg_support::until_staged(&location, 1).await;
    let kept = tokio::spawn({
        let log = log.clone();
        async move {
            log.append_batch(vec![
                AppendRequest::new(tag("c"), vec![2u8; 1000]),
                AppendRequest::new(tag("d"), vec![3u8; 1000]).with_tag(tag("c")),
            ])
            .await
        }
    });
    pg_support::until_staged(&location, 2).await;
    assert_eq!(
        pg_support::count_rows(&location, "payloads").await,
        3,
        "payloads are written by the appenders, before any round"
    );
    holder.release().await;

    let err = refused
        .await
        .unwrap()
        .expect_err("version 5 of c is not next");
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    let kept = kept.await.unwrap().expect("the second group lands");
    assert_eq!(
        kept.iter()
            .map(|r| (r.seqnum, r.stream_version))
            .collect::<Vec<_>>(),
        vec![(1, 0), (2, 0)]
    );
    assert_eq!(
        pg_support::count_rows(&location, "payloads").await,
        2,
        "the refused group's payload went with its round"
    );
    let raw = pg_support::raw_client().await;
    let s = location.log();
    let row = raw
        .query_one(
            &format!(
                r#"SELECT count(*) FILTER (WHERE data IS NULL AND group_id IS NOT NULL),
                          count(*) FILTER (WHERE data IS NOT NULL)
                     FROM "{s}".numbered"#
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, i64>(0), row.get::<_, i64>(1)),
        (2, 1),
        "the staged entries point at their payloads; the first was numbered by its own call"
    );
    let c = other.read_all(&tag("c")).await.unwrap();
    let data: Vec<Vec<u8>> = c.iter().map(|e| e.data.to_vec()).collect();
    assert_eq!(data, vec![vec![2u8; 1000], vec![3u8; 1000]]);
    assert_eq!(other.tip().await.unwrap().next, 3);

    log.trim(1).await.unwrap();
    assert_eq!(pg_support::count_rows(&location, "payloads").await, 1);
    assert_eq!(pg_support::count_rows(&location, "entries").await, 1);
    let rest = other.read_all(&tag("d")).await.unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(&rest[0].data[..], &[3u8; 1000][..]);
    log.close().await.unwrap();
    other.close().await.unwrap();
}

/// Expected-version states and append ids on groups that are staged (their
/// payloads written by their appenders) and numbered by a later round: each
/// state is decided by that round against the stream's next version, a
/// refused group leaves no payload, reads return each entry's append id,
/// a retry of a staged id answers its original, and a stream whose every
/// entry was trimmed still exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_groups_keep_expected_states_and_append_ids() {
    use weft::{AppendResult, Expected};

    let location = pg_support::fresh_location("staged_states");
    let options = pg_support::test_options()
        .with_max_in_flight(8)
        .with_pool_size(10);
    let log = Log::new(
        PgStorage::open_with(location.clone(), options)
            .await
            .unwrap(),
    );
    let other = Log::new(pg_support::open(&location).await);
    let warm = tag("warm");
    let mut sub = log.subscribe(&warm, Position::Beginning);
    other
        .append(AppendRequest::new(warm.clone(), "w"))
        .await
        .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(20), sub.next())
        .await
        .expect("the tailer hears the log")
        .unwrap()
        .unwrap();
    // seqnum 1: stream e exists before the staged groups.
    log.append(AppendRequest::new(tag("e"), "e0"))
        .await
        .unwrap();

    // Each group staged in turn behind the held lock (so the round numbers
    // them in this order), then one round for all.
    async fn staged_one(
        location: &weft::storage::postgres::PgLocation,
        cases: &[(&str, &str, Expected, Option<&str>)],
        log: &Log,
    ) -> Vec<tokio::task::JoinHandle<weft::Result<AppendResult>>> {
        let mut calls = Vec::new();
        for (n, (stream, data, expected, id)) in cases.iter().enumerate() {
            let mut request = AppendRequest::new(tag(stream), data.to_string());
            if let Some(id) = id {
                request = request.with_id(*id);
            }
            let (log, expected) = (log.clone(), *expected);
            calls.push(tokio::spawn(async move {
                log.append_if(request, expected).await
            }));
            pg_support::until_staged(location, n as i64 + 1).await;
        }
        calls
    }

    let holder = pg_support::HeldLock::take(&location).await;
    let calls = staged_one(
        &location,
        &[
            ("n", "n0", Expected::NoStream, Some("id-1")),
            ("e", "e1", Expected::StreamExists, Some("id-2")),
            ("m", "m0", Expected::StreamExists, None),
            ("e", "late", Expected::NoStream, None),
            ("e", "e2", Expected::Any, Some("id-3")),
        ],
        &log,
    )
    .await;
    assert_eq!(
        pg_support::count_rows(&location, "payloads").await,
        5,
        "every staged group's payload is written before the round"
    );
    // A retry of a staged id, sent while its first try waits (it may reach
    // the server just after the release: either way it answers the
    // original).
    let retry = tokio::spawn({
        let log = log.clone();
        async move {
            log.append(AppendRequest::new(tag("n"), "n0").with_id("id-1"))
                .await
        }
    });
    holder.release().await;

    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(call.await.unwrap());
    }
    let landed = |r: &weft::Result<AppendResult>| {
        r.as_ref()
            .map(|r| (r.seqnum, r.stream_version))
            .map_err(|e| e.kind())
    };
    assert_eq!(
        outcomes.iter().map(landed).collect::<Vec<_>>(),
        vec![
            Ok((2, 0)),
            Ok((3, 1)),
            Err(ErrorKind::Conflict),
            Err(ErrorKind::Conflict),
            Ok((4, 2)),
        ],
        "no stream on a new stream, stream exists on e, refused on m and on e, any"
    );
    let retried = retry.await.unwrap().expect("the retry answers");
    assert_eq!(
        (retried.seqnum, retried.stream_version),
        (2, 0),
        "the original"
    );
    assert_eq!(
        pg_support::count_rows(&location, "payloads").await,
        3,
        "the refused groups' payloads went with their round"
    );
    let all = other.read_log(Position::Beginning, 100).await.unwrap();
    assert_eq!(
        all.iter()
            .map(|e| (e.seqnum, e.append_id.as_deref()))
            .collect::<Vec<_>>(),
        vec![
            (0, None),
            (1, None),
            (2, Some("id-1")),
            (3, Some("id-2")),
            (4, Some("id-3")),
        ],
        "reads return the append ids of staged entries"
    );
    assert_eq!(
        all.iter().map(|e| e.data.to_vec()).collect::<Vec<_>>(),
        vec![
            b"w".to_vec(),
            b"e0".to_vec(),
            b"n0".to_vec(),
            b"e1".to_vec(),
            b"e2".to_vec()
        ]
    );

    // Stream n's only entry trimmed: it still exists, for staged groups too.
    log.trim(3).await.unwrap();
    assert_eq!(pg_support::count_rows(&location, "payloads").await, 1);
    let holder = pg_support::HeldLock::take(&location).await;
    let calls = staged_one(
        &location,
        &[
            ("n", "late", Expected::NoStream, None),
            ("n", "n1", Expected::StreamExists, None),
        ],
        &log,
    )
    .await;
    holder.release().await;
    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(call.await.unwrap());
    }
    assert_eq!(
        outcomes.iter().map(landed).collect::<Vec<_>>(),
        vec![Err(ErrorKind::Conflict), Ok((5, 1))],
        "a trimmed stream exists"
    );
    let n = other.read_all(&tag("n")).await.unwrap();
    assert_eq!(
        n.iter()
            .map(|e| (e.seqnum, e.data.to_vec()))
            .collect::<Vec<_>>(),
        vec![(5, b"n1".to_vec())]
    );
    log.close().await.unwrap();
    other.close().await.unwrap();
}

/// A role that may use a layout-1 log but not alter its tables keeps it at
/// layout 1 (its handle works as layout 1 did); a hard delete there
/// empties the payloads in `entries` itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_kept_at_layout_1_erases_in_place() {
    let location = pg_support::fresh_location("layout1_erase");
    let schema = location.log().to_owned();
    let admin = pg_support::raw_client().await;
    let fixture = include_str!("../data/pg_layout1_staged_rounds.sql");
    admin
        .batch_execute(&fixture.replace("__LOG__", &schema))
        .await
        .expect("restore the layout-1 log");
    let role = format!("{schema}_user");
    admin
        .batch_execute(&format!(
            r#"CREATE ROLE "{role}" LOGIN;
               GRANT CREATE ON DATABASE weft TO "{role}";
               GRANT USAGE, CREATE ON SCHEMA "{schema}" TO "{role}";
               GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO "{role}";
               GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}";
               GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "{schema}" TO "{role}";"#
        ))
        .await
        .expect("a role that does not own the log");
    let as_role: weft::storage::postgres::PgLocation = format!(
        "postgres://{role}@{}/weft?log={schema}",
        pg_support::server_addr()
    )
    .parse()
    .unwrap();
    let log = Log::new(
        PgStorage::open_with(as_role, pg_support::test_options())
            .await
            .expect("open a log it may not alter"),
    );
    let layout: i32 = admin
        .query_one(&format!(r#"SELECT layout FROM "{schema}".head"#), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(layout, 1, "the log stays at layout 1");
    // The first append numbers the staged group too.
    log.append(AppendRequest::new(tag("orders:1"), "shipped 1"))
        .await
        .unwrap();
    let o3 = tag("orders:3");
    log.delete_stream(&o3).await.unwrap();
    assert_eq!(log.erase_stream(&o3).await.unwrap(), 2);
    assert_eq!(log.erase_stream(&o3).await.unwrap(), 0);
    let stored: Vec<(i64, Vec<u8>)> = admin
        .query(
            &format!(r#"SELECT seqnum, data FROM "{schema}".entries ORDER BY seqnum"#),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        stored,
        vec![
            (0, b"placed 1".to_vec()),
            (1, b"paid 1".to_vec()),
            (2, b"placed 2".to_vec()),
            (3, b"bin\x01ary".to_vec()),
            (4, Vec::new()),
            (5, Vec::new()),
            (6, b"shipped 1".to_vec()),
        ]
    );
    log.close().await.unwrap();
    admin
        .batch_execute(&format!(
            r#"DROP SCHEMA "{schema}" CASCADE; REVOKE ALL ON DATABASE weft FROM "{role}"; DROP ROLE "{role}";"#
        ))
        .await
        .unwrap();
}
