//! The conformance suite every storage backend runs unchanged.
//!
//! Each check is a public async function taking a fresh [`Fixture`]; the
//! [`conformance_suite!`](crate::conformance_suite) macro turns all of them
//! into `#[tokio::test]`s for one backend (the crate using it needs `tokio`
//! with the `macros` and `rt-multi-thread` features):
//!
//! ```
//! weft_testkit::conformance_suite!(memory, || async {
//!     weft_testkit::conformance::Fixture::new(weft::Log::memory())
//! });
//! # fn main() {}
//! ```
//!
//! The factory is called once per test and must return an empty log. A
//! fixture can hold a guard (a temporary directory, a server prefix) that
//! lives as long as the test.
//!
//! The checks cover what every backend must guarantee: dense seqnums and
//! versions under concurrent appenders, exactly one winner among concurrent
//! conditional appends, atomic batches, multi-tag reads, trim, subscription
//! hand-over from backlog to live under concurrent appends, lagging
//! subscribers, views, typed views, input validation, the KV,
//! exactly-once appends with append ids (or their refusal), retention
//! policies (stored with the log, applied by count, age and size, held
//! back by protected consumers), named consumer positions, and streams
//! truncated or deleted softly, then erased for good.

use std::any::Any;
use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;

use weft::error::{ErrorDetail, ErrorKind};
use weft::log::Delivery;
use weft::log::{JsonCodec, Log, StreamLifecycle};
use weft::model::{AppendRequest, Expected, LogEntry, LogTag, Position, TagFilter};
use weft::retention::{Retention, RetentionPolicy, RetentionStep};
use weft::storage::NewEntry;
use weft::storage::kit::FEED_CAPACITY;

/// A fresh log for one check, with whatever must outlive it.
pub struct Fixture {
    /// The log under test (empty).
    pub log: Log,
    _guard: Option<Box<dyn Any + Send + Sync>>,
}

impl Fixture {
    /// A fixture holding only the log.
    pub fn new(log: Log) -> Self {
        Fixture { log, _guard: None }
    }

    /// Keeps `guard` alive as long as the fixture (dropped after the log).
    pub fn with_guard(mut self, guard: impl Any + Send + Sync) -> Self {
        self._guard = Some(Box::new(guard));
        self
    }
}

/// Generates one `#[tokio::test]` per conformance check for a backend.
///
/// `$factory` is an expression callable as `$factory().await` that yields a
/// [`Fixture`] over an empty log.
#[macro_export]
macro_rules! conformance_suite {
    ($name:ident, $factory:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $crate::conformance_suite!(@tests $factory;
                empty_log_reports_nothing,
                append_assigns_dense_seqnums_and_versions,
                reads_by_tag_and_position,
                multi_tag_entries_are_visible_from_every_tag,
                conditional_append_checks_primary_version,
                expected_states_hold_on_every_kind_of_stream,
                batch_conditions_apply_per_stream,
                concurrent_conditional_appends_have_one_winner,
                concurrent_appenders_get_dense_unique_numbers,
                batches_are_atomic,
                trim_makes_old_reads_fail_clearly,
                streams_list_every_stream_in_order,
                streams_truncate_and_delete_softly,
                streams_erase_hard,
                subscription_hands_over_from_backlog_to_live,
                tail_subscription_sees_only_new_entries,
                filtered_subscriptions_pass_sparse_stretches,
                reads_and_subscriptions_start_at_a_time,
                lagging_subscriber_never_blocks_appends,
                views_scope_reads_and_appends,
                typed_view_decode_failure_names_seqnum,
                invalid_input_writes_nothing,
                kv_compare_and_set_is_atomic,
                append_ids_make_retries_exactly_once,
                concurrent_retries_of_one_id_write_it_once,
                reads_return_append_ids,
                retention_policy_round_trips,
                count_retention_keeps_the_newest,
                age_retention_follows_the_appliers_clock,
                size_retention_keeps_the_newest_bytes,
                retention_never_passes_a_protected_consumer,
                consumer_positions_are_named_monotonic_and_listed,
                closed_log_refuses_work,
            );
        }
    };
    (@tests $factory:expr; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let fixture = ($factory)().await;
                $crate::conformance::$check(fixture).await;
            }
        )*
    };
}

fn tag(s: &str) -> LogTag {
    s.parse().expect("valid test tag")
}

fn seqnums(entries: &[LogEntry]) -> Vec<u64> {
    entries.iter().map(|e| e.seqnum).collect()
}

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within 60 s"))
}

/// An empty log has no latest seqnum, no versions and no entries.
pub async fn empty_log_reports_nothing(f: Fixture) {
    let log = f.log;
    let t = tag("orders");
    assert_eq!(log.latest_seqnum().await.unwrap(), None);
    assert_eq!(log.latest_version(&t).await.unwrap(), None);
    assert_eq!(log.next_version(&t).await.unwrap(), 0);
    assert!(log.read_all(&t).await.unwrap().is_empty());
    assert!(
        log.read_log(Position::Beginning, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Seqnums are global and dense; versions are dense per primary tag.
pub async fn append_assigns_dense_seqnums_and_versions(f: Fixture) {
    let log = f.log;
    let (orders, inv) = (tag("orders"), tag("inventory"));
    let plan = [&orders, &inv, &orders, &inv, &orders];
    let mut got = Vec::new();
    for (i, t) in plan.iter().enumerate() {
        let r = log
            .append(AppendRequest::new((*t).clone(), format!("e{i}")))
            .await
            .unwrap();
        assert_eq!(&r.primary_tag, *t);
        got.push((r.seqnum, r.stream_version));
    }
    assert_eq!(got, vec![(0, 0), (1, 0), (2, 1), (3, 1), (4, 2)]);
    assert_eq!(log.latest_seqnum().await.unwrap(), Some(4));
    assert_eq!(log.latest_version(&orders).await.unwrap(), Some(2));
    assert_eq!(log.latest_version(&inv).await.unwrap(), Some(1));
    let all = log.read_log(Position::Beginning, 100).await.unwrap();
    assert_eq!(seqnums(&all), vec![0, 1, 2, 3, 4]);
    assert_eq!(&all[3].data[..], b"e3");
    assert!(
        all.windows(2)
            .all(|w| w[0].timestamp_ms <= w[1].timestamp_ms + 1000)
    );
}

/// Reads by tag honour positions, limits and both numbering schemes.
pub async fn reads_by_tag_and_position(f: Fixture) {
    let log = f.log;
    let (orders, inv) = (tag("orders"), tag("inventory"));
    for i in 0..10u64 {
        let t = if i % 2 == 0 { &orders } else { &inv };
        log.append(AppendRequest::new(t.clone(), format!("{i}")))
            .await
            .unwrap();
    }
    let all = log.read_all(&orders).await.unwrap();
    assert_eq!(seqnums(&all), vec![0, 2, 4, 6, 8]);
    let from = log.read_from(&orders, Position::At(3), 2).await.unwrap();
    assert_eq!(seqnums(&from), vec![4, 6]);
    let end = log.read_from(&orders, Position::End, 10).await.unwrap();
    assert!(end.is_empty());
    // Seqnum-keyed: after seqnum 4. Version-keyed: after version 1 (= seqnum 2).
    assert_eq!(
        seqnums(&log.read_after(&orders, 4).await.unwrap()),
        vec![6, 8]
    );
    let by_version = log.read_after_version(&orders, 1).await.unwrap();
    assert_eq!(seqnums(&by_version), vec![4, 6, 8]);
    assert_eq!(
        by_version
            .iter()
            .map(|e| e.stream_version)
            .collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    assert!(log.read_after_version(&orders, 4).await.unwrap().is_empty());
    let whole = log.read_log(Position::At(7), 100).await.unwrap();
    assert_eq!(seqnums(&whole), vec![7, 8, 9]);
    assert!(log.read_all(&tag("nobody")).await.unwrap().is_empty());
}

/// A multi-tag entry shows up in every tag's reads and carries its primary
/// tag's version; a secondary-only tag has no version stream.
pub async fn multi_tag_entries_are_visible_from_every_tag(f: Fixture) {
    let log = f.log;
    let (orders, one, audit) = (tag("orders"), tag("orders:o-1"), tag("audit"));
    log.append(AppendRequest::new(orders.clone(), "a"))
        .await
        .unwrap();
    let r = log
        .append(AppendRequest::with_tags(
            [orders.clone(), one.clone(), audit.clone()],
            "b",
        ))
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (1, 1));
    for t in [&orders, &one, &audit] {
        let entries = log.read_all(t).await.unwrap();
        assert!(
            entries.iter().any(|e| e.seqnum == 1),
            "{t} misses the entry"
        );
        let e = entries.iter().find(|e| e.seqnum == 1).unwrap();
        assert_eq!(e.tags, vec![orders.clone(), one.clone(), audit.clone()]);
        assert_eq!(e.stream_version, 1);
    }
    assert_eq!(log.latest_version(&one).await.unwrap(), None);
    assert_eq!(log.latest_version(&audit).await.unwrap(), None);
    assert!(log.read_after_version(&one, 0).await.unwrap().is_empty());
    // A later entry with `one` as primary starts that tag's own stream at 0.
    let r = log
        .append(AppendRequest::new(one.clone(), "c"))
        .await
        .unwrap();
    assert_eq!(r.stream_version, 0);
    assert_eq!(seqnums(&log.read_all(&one).await.unwrap()), vec![1, 2]);
}

/// `append_if` writes only at the expected version and reports the current
/// one on conflict.
pub async fn conditional_append_checks_primary_version(f: Fixture) {
    let log = f.log;
    let t = tag("account:42");
    let r = log
        .append_if(AppendRequest::new(t.clone(), "open"), 0)
        .await
        .unwrap();
    assert_eq!(r.stream_version, 0);
    let err = log
        .append_if(AppendRequest::new(t.clone(), "stale"), 0)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(
        err.detail(),
        Some(&ErrorDetail::VersionConflict {
            expected: 0,
            next: 1
        })
    );
    let ahead = log
        .append_if(AppendRequest::new(t.clone(), "ahead"), 5)
        .await
        .unwrap_err();
    assert_eq!(ahead.conflict_next_version(), Some(1));
    // The secondary tag does not take part in the condition.
    let r = log
        .append_if(
            AppendRequest::new(t.clone(), "deposit").with_tag(tag("audit")),
            1,
        )
        .await
        .unwrap();
    assert_eq!(r.stream_version, 1);
    assert_eq!(log.read_all(&t).await.unwrap().len(), 2);
}

/// Every condition against every kind of stream: one that never had an
/// entry, one with two live entries, and one whose two entries were both
/// trimmed away (it still exists: its numbering continues at 2). Each
/// condition runs on a stream of its own, so a success changes nothing
/// the next row sees.
pub async fn expected_states_hold_on_every_kind_of_stream(f: Fixture) {
    let log = f.log;
    // (condition, writes on fresh, on written, on trimmed)
    let table = [
        (Expected::Any, true, true, true),
        (Expected::NoStream, true, false, false),
        (Expected::StreamExists, false, true, true),
        (Expected::Exact(0), true, false, false),
        (Expected::Exact(2), false, true, true),
        (Expected::Exact(3), false, false, false),
    ];
    let kinds = ["fresh", "written", "trimmed"];
    for (i, _) in table.iter().enumerate() {
        for kind in ["written", "trimmed"] {
            for n in 0..2 {
                log.append(AppendRequest::new(
                    tag(&format!("{kind}:{i}")),
                    format!("{n}"),
                ))
                .await
                .unwrap();
            }
        }
    }
    // Trim every `trimmed:*` entry: the last one is the newest of them,
    // so keep one later entry to trim below.
    let last_trimmed = log
        .read_all(&tag(&format!("trimmed:{}", table.len() - 1)))
        .await
        .unwrap()
        .last()
        .unwrap()
        .seqnum;
    log.append(AppendRequest::new(tag("keeper"), "k"))
        .await
        .unwrap();
    log.trim(last_trimmed).await.unwrap();
    for (i, (expected, fresh, written, trimmed)) in table.into_iter().enumerate() {
        for (kind, writes) in kinds.into_iter().zip([fresh, written, trimmed]) {
            let t = tag(&format!("{kind}:{i}"));
            let next = if kind == "fresh" { 0 } else { 2 };
            let got = log
                .append_if(AppendRequest::new(t.clone(), "x"), expected)
                .await;
            match got {
                Ok(r) => {
                    assert!(writes, "{expected} on a {kind} stream wrote");
                    assert_eq!(r.stream_version, next, "{expected} on {kind}");
                    assert_eq!(log.latest_version(&t).await.unwrap(), Some(next));
                }
                Err(e) => {
                    assert!(!writes, "{expected} on a {kind} stream failed: {e}");
                    assert_eq!(e.kind(), ErrorKind::Conflict, "{expected} on {kind}");
                    assert_eq!(
                        e.conflict_next_version(),
                        Some(next),
                        "{expected} on {kind}"
                    );
                    let detail_names_it = match (expected, e.detail()) {
                        (
                            Expected::Exact(v),
                            Some(ErrorDetail::VersionConflict { expected, next: n }),
                        ) => *expected == v && *n == next,
                        (state, Some(ErrorDetail::StreamStateConflict { expected, next: n })) => {
                            *expected == state && *n == next
                        }
                        _ => false,
                    };
                    assert!(detail_names_it, "{expected} on {kind}: {:?}", e.detail());
                    assert_eq!(
                        log.latest_version(&t).await.unwrap(),
                        next.checked_sub(1),
                        "a failed {expected} on {kind} wrote nothing"
                    );
                }
            }
        }
    }
}

/// An atomic batch with one condition per stream: every condition is
/// checked, one failing state condition refuses the whole batch, and
/// conditions on later entries of a stream see the earlier ones.
pub async fn batch_conditions_apply_per_stream(f: Fixture) {
    let log = f.log;
    let (cart, user, audit) = (tag("cart:1"), tag("user:1"), tag("audit"));
    log.append(AppendRequest::new(user.clone(), "signed up"))
        .await
        .unwrap();
    let tip = log.tip().await.unwrap();
    // `cart` must be new, `user` must exist, `audit` is unconditioned.
    let ok = log
        .append_batch_if(vec![
            (
                AppendRequest::new(cart.clone(), "created"),
                Some(Expected::NoStream),
            ),
            (
                AppendRequest::new(user.clone(), "has cart"),
                Some(Expected::StreamExists),
            ),
            (AppendRequest::new(audit.clone(), "a"), Some(Expected::Any)),
            (
                AppendRequest::new(cart.clone(), "item"),
                Some(Expected::StreamExists),
            ),
        ])
        .await
        .unwrap();
    let nums: Vec<_> = ok.iter().map(|r| (r.seqnum, r.stream_version)).collect();
    assert_eq!(
        nums,
        vec![
            (tip.next, 0),
            (tip.next + 1, 1),
            (tip.next + 2, 0),
            (tip.next + 3, 1)
        ]
    );
    // Each failing member alone refuses the batch; nothing is written.
    let failing = [
        (Expected::NoStream, tag("cart:1"), 2),
        (Expected::StreamExists, tag("cart:2"), 0),
        (Expected::Exact(5), tag("user:1"), 2),
    ];
    for (bad, bad_tag, next) in failing {
        let before = log.tip().await.unwrap();
        let err = log
            .append_batch_if(vec![
                (
                    AppendRequest::new(tag("other"), "fine"),
                    Some(Expected::NoStream),
                ),
                (AppendRequest::new(bad_tag.clone(), "refused"), Some(bad)),
            ])
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict, "{bad} on {bad_tag}");
        assert_eq!(
            err.conflict_next_version(),
            Some(next),
            "{bad} on {bad_tag}"
        );
        assert_eq!(log.tip().await.unwrap(), before, "{bad}: nothing written");
        assert_eq!(log.latest_version(&tag("other")).await.unwrap(), None);
    }
}

/// Of many concurrent `append_if` at the same version, exactly one wins.
pub async fn concurrent_conditional_appends_have_one_winner(f: Fixture) {
    let log = f.log;
    let t = tag("stream");
    for round in 0..20u64 {
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let log = log.clone();
                let t = t.clone();
                tokio::spawn(async move {
                    log.append_if(AppendRequest::new(t, format!("r{round}w{i}")), round)
                        .await
                })
            })
            .collect();
        let mut wins = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(r) => {
                    assert_eq!(r.stream_version, round);
                    wins += 1;
                }
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Conflict);
                    assert_eq!(e.conflict_next_version(), Some(round + 1));
                }
            }
        }
        assert_eq!(wins, 1, "round {round}");
    }
    assert_eq!(log.read_all(&t).await.unwrap().len(), 20);
}

/// Concurrent appenders never share or skip a seqnum, and versions stay
/// dense per tag.
pub async fn concurrent_appenders_get_dense_unique_numbers(f: Fixture) {
    let log = f.log;
    let (writers, each) = (8u64, 40u64);
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let log = log.clone();
            tokio::spawn(async move {
                let t = tag(if w % 2 == 0 { "even" } else { "odd" });
                let mut out = Vec::new();
                for i in 0..each {
                    let r = log
                        .append(AppendRequest::new(t.clone(), format!("{w}/{i}")))
                        .await
                        .unwrap();
                    // Read-your-writes: acknowledged means readable now,
                    // even while earlier appends of others are in flight.
                    let back = log.read_log(Position::At(r.seqnum), 1).await.unwrap();
                    assert_eq!(back.first().map(|e| e.seqnum), Some(r.seqnum));
                    out.push((r.seqnum, r.stream_version, t.clone(), format!("{w}/{i}")));
                }
                out
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.extend(task.await.unwrap());
    }
    let mut seen: Vec<u64> = results.iter().map(|r| r.0).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..writers * each).collect::<Vec<_>>());
    let mut versions: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (_, v, t, _) in &results {
        versions.entry(t.to_string()).or_default().push(*v);
    }
    for (t, mut vs) in versions {
        vs.sort_unstable();
        assert_eq!(vs, (0..vs.len() as u64).collect::<Vec<_>>(), "{t}");
    }
    let all = log
        .read_log(Position::Beginning, (writers * each) as usize + 10)
        .await
        .unwrap();
    assert_eq!(all.len() as u64, writers * each);
    for (seqnum, version, t, data) in &results {
        let e = &all[*seqnum as usize];
        assert_eq!(
            (e.stream_version, &e.tags[0], &e.data[..]),
            (*version, t, data.as_bytes())
        );
    }
}

/// A batch is written whole with contiguous seqnums, or not at all.
pub async fn batches_are_atomic(f: Fixture) {
    let log = f.log;
    let (a, b) = (tag("a"), tag("b"));
    let results = log
        .append_batch(vec![
            AppendRequest::new(a.clone(), "1"),
            AppendRequest::new(b.clone(), "2"),
            AppendRequest::new(a.clone(), "3"),
        ])
        .await
        .unwrap();
    let nums: Vec<_> = results
        .iter()
        .map(|r| (r.seqnum, r.stream_version))
        .collect();
    assert_eq!(nums, vec![(0, 0), (1, 0), (2, 1)]);
    // One failing condition rejects the whole batch.
    let err = log
        .append_batch_if(vec![
            (AppendRequest::new(b.clone(), "ok"), Some(1)),
            (AppendRequest::new(a.clone(), "stale"), Some(0)),
        ])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(log.latest_seqnum().await.unwrap(), Some(2));
    assert_eq!(log.latest_version(&b).await.unwrap(), Some(0));
    // Conditions see the batch's own earlier entries.
    log.append_batch_if(vec![
        (AppendRequest::new(a.clone(), "4"), Some(2)),
        (AppendRequest::new(a.clone(), "5"), Some(3)),
    ])
    .await
    .unwrap();
    // Concurrent batches never interleave.
    let tasks: Vec<_> = (0..6)
        .map(|w| {
            let log = log.clone();
            tokio::spawn(async move {
                let reqs = (0..5)
                    .map(|i| AppendRequest::new(tag("c"), format!("{w}:{i}")))
                    .collect();
                log.append_batch(reqs).await.unwrap()
            })
        })
        .collect();
    for task in tasks {
        let rs = task.await.unwrap();
        let first = rs[0].seqnum;
        assert!(
            rs.iter()
                .enumerate()
                .all(|(i, r)| r.seqnum == first + i as u64)
        );
        let entries = log.read_log(Position::At(first), 5).await.unwrap();
        let writer = std::str::from_utf8(&entries[0].data).unwrap()[..1].to_owned();
        assert!(
            entries
                .iter()
                .all(|e| std::str::from_utf8(&e.data).unwrap().starts_with(&writer))
        );
    }
}

/// Reads below the trim point fail with `Trimmed`; the rest stays readable
/// and numbering continues.
pub async fn trim_makes_old_reads_fail_clearly(f: Fixture) {
    let log = f.log;
    let t = tag("t");
    for i in 0..10 {
        log.append(AppendRequest::new(t.clone(), format!("{i}")))
            .await
            .unwrap();
    }
    log.trim(4).await.unwrap();
    let err = log.read_from(&t, Position::At(2), 10).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    assert_eq!(
        err.detail(),
        Some(&ErrorDetail::Trimmed {
            requested: 2,
            first_available: 5
        })
    );
    assert_eq!(
        seqnums(&log.read_all(&t).await.unwrap()),
        vec![5, 6, 7, 8, 9]
    );
    assert_eq!(
        seqnums(&log.read_from(&t, Position::Beginning, 2).await.unwrap()),
        vec![5, 6]
    );
    assert_eq!(
        log.read_after_version(&t, 1).await.unwrap_err().kind(),
        ErrorKind::Trimmed
    );
    assert_eq!(log.read_after_version(&t, 6).await.unwrap().len(), 3);
    assert_eq!(log.latest_version(&t).await.unwrap(), Some(9));
    let r = log
        .append(AppendRequest::new(t.clone(), "10"))
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (10, 10));
    assert_eq!(
        log.trim(11).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let mut sub = log.subscribe(&t, Position::At(0));
    let first = within("trimmed subscription", sub.next()).await.unwrap();
    assert_eq!(first.unwrap_err().kind(), ErrorKind::Trimmed);
}

/// Every stream as `(tag, next version, live entries)`, walked in pages
/// of `page` (each page from the last tag of the one before, dropping it).
async fn stream_list(log: &Log, page: usize) -> Vec<(String, u64, u64)> {
    let mut out: Vec<(String, u64, u64)> = Vec::new();
    let mut from: Option<LogTag> = None;
    loop {
        let rows = log.streams(from.as_ref(), page + 1).await.unwrap();
        let more = rows.len() == page + 1;
        let rows: Vec<_> = match &from {
            Some(f) => {
                assert_eq!(
                    rows.first().map(|r| &r.tag),
                    Some(f),
                    "a page starts at `from`"
                );
                rows.into_iter().skip(1).collect()
            }
            None => rows,
        };
        for r in &rows {
            out.push((r.tag.to_string(), r.next_version, r.entries));
        }
        match rows.last() {
            Some(last) if more => from = Some(last.tag.clone()),
            _ => return out,
        }
    }
}

/// The stream list names every stream of the log (primary and secondary
/// tags), in the seam's stream order (shorter namespaces first, then
/// bytes; shorter keys first), with next versions and live entry counts;
/// pages join up; a trim lowers the counts, drops tags left without live
/// entries and keeps streams' next versions.
pub async fn streams_list_every_stream_in_order(f: Fixture) {
    let log = f.log;
    assert!(log.streams(None, 10).await.unwrap().is_empty());
    let appends: [(&str, &[&str]); 6] = [
        ("b", &[]),
        ("b", &["b:k1"]),
        ("aa", &["b:k2"]),
        ("audit", &["b:k1", "zz"]),
        ("z:q", &[]),
        ("b", &[]),
    ];
    for (primary, secondary) in appends {
        let mut req = AppendRequest::new(tag(primary), "x");
        for s in secondary {
            req = req.with_tag(tag(s));
        }
        log.append(req).await.unwrap();
    }
    let row = |t: &str, v: u64, n: u64| (t.to_owned(), v, n);
    let want = vec![
        row("b", 3, 3),
        row("b:k1", 0, 2),
        row("b:k2", 0, 1),
        row("z:q", 1, 1),
        row("aa", 1, 1),
        row("zz", 0, 1),
        row("audit", 1, 1),
    ];
    assert_eq!(stream_list(&log, 100).await, want);
    assert_eq!(stream_list(&log, 2).await, want, "pages of two");
    assert_eq!(stream_list(&log, 1).await, want, "pages of one");
    // From a tag that is not in the log: the next one in order.
    let from = log.streams(Some(&tag("b:k")), 2).await.unwrap();
    let from: Vec<String> = from.iter().map(|r| r.tag.to_string()).collect();
    assert_eq!(from, ["b:k1", "b:k2"]);
    assert!(log.streams(None, 0).await.unwrap().is_empty());

    log.trim(2).await.unwrap();
    let want = vec![
        row("b", 3, 1),
        row("b:k1", 0, 1),
        row("z:q", 1, 1),
        row("aa", 1, 0),
        row("zz", 0, 1),
        row("audit", 1, 1),
    ];
    assert_eq!(stream_list(&log, 100).await, want, "after a trim");
    assert_eq!(
        stream_list(&log, 2).await,
        want,
        "after a trim, pages of two"
    );
}

/// A hard delete ([`Log::erase_stream`]) erases the payloads of the
/// entries a stream's start hides, for every reader: each keeps its
/// seqnum, tags, version, time and append id and reads with an empty
/// payload, in whole-log reads too. Entries at or above the start, other
/// streams' entries (one carrying the tag as a secondary tag included)
/// and the numbering are untouched; a second erase erases nothing; a
/// retried append id still answers with its original entry; trimmed
/// entries are skipped.
pub async fn streams_erase_hard(f: Fixture) {
    let log = f.log;
    let (t, other) = (tag("user:7"), tag("orders"));
    let ids = log.storage().supports_append_ids();
    let mut appended = Vec::new();
    for i in 0..4 {
        let mut req = AppendRequest::new(t.clone(), format!("secret-{i}"));
        if ids && i == 1 {
            req = req.with_id("user-7/1");
        }
        appended.push(log.append(req).await.unwrap());
    }
    // Seqnum 4: another stream's entry that carries `t` as well.
    log.append(AppendRequest::new(other.clone(), "order of user 7").with_tag(t.clone()))
        .await
        .unwrap();
    let before = log.read_log(Position::Beginning, 100).await.unwrap();
    assert_eq!(before.len(), 5);
    // Nothing hidden yet: nothing to erase.
    assert_eq!(log.erase_stream(&t).await.unwrap(), 0);
    assert_eq!(
        log.read_log(Position::Beginning, 100).await.unwrap(),
        before
    );

    let kept_in_place = |after: &[LogEntry], erased: &dyn Fn(&LogEntry) -> bool| {
        assert_eq!(after.len(), before.len());
        for (old, new) in before.iter().zip(after) {
            assert_eq!(
                (
                    new.seqnum,
                    new.stream_version,
                    &new.tags,
                    new.timestamp_ms,
                    &new.append_id
                ),
                (
                    old.seqnum,
                    old.stream_version,
                    &old.tags,
                    old.timestamp_ms,
                    &old.append_id
                ),
                "entry {} keeps its place",
                old.seqnum
            );
            if erased(old) {
                assert!(new.data.is_empty(), "entry {} is erased", old.seqnum);
            } else {
                assert_eq!(new.data, old.data, "entry {} is untouched", old.seqnum);
            }
        }
    };

    // Truncated before version 2: versions 0 and 1 go.
    log.truncate_stream(&t, 2).await.unwrap();
    assert_eq!(log.erase_stream(&t).await.unwrap(), 2);
    let own_below = |v: u64| {
        let t = t.clone();
        move |e: &LogEntry| e.primary_tag() == &t && e.stream_version < v
    };
    kept_in_place(
        &log.read_log(Position::Beginning, 100).await.unwrap(),
        &own_below(2),
    );
    let visible = log.read_all(&t).await.unwrap();
    assert_eq!(seqnums(&visible), [2, 3, 4]);
    assert_eq!(visible[0].data, "secret-2");
    assert_eq!(log.erase_stream(&t).await.unwrap(), 0, "erased once only");

    // Deleted: the rest of its own entries go; the other stream's entry
    // that carries the tag stays whole.
    log.delete_stream(&t).await.unwrap();
    assert_eq!(log.erase_stream(&t).await.unwrap(), 2);
    kept_in_place(
        &log.read_log(Position::Beginning, 100).await.unwrap(),
        &own_below(4),
    );
    let one = log.read_log(Position::At(3), 1).await.unwrap();
    assert!(one[0].data.is_empty(), "a read by seqnum sees it erased");
    assert_eq!(
        log.read_all(&other).await.unwrap()[0].data,
        "order of user 7"
    );

    // The numbering goes on, and a new life is not erased.
    let next = log
        .append(AppendRequest::new(t.clone(), "new life"))
        .await
        .unwrap();
    assert_eq!(next.stream_version, 4);
    assert_eq!(log.erase_stream(&t).await.unwrap(), 0);
    assert_eq!(log.read_all(&t).await.unwrap()[0].data, "new life");
    if ids {
        let retried = AppendRequest::new(t.clone(), "secret-1").with_id("user-7/1");
        assert_eq!(log.append(retried).await.unwrap(), appended[1]);
    }

    // What is not committed, or not in order, is refused and changes
    // nothing (a server's client erases only whole streams).
    let tip = log.storage().tip().await.unwrap();
    let whole = log.read_log(Position::Beginning, 100).await.unwrap();
    for bad in [vec![tip.next], vec![5, 2], vec![5, 5]] {
        let err = log.storage().erase(&bad).await.unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::InvalidInput | ErrorKind::Unsupported),
            "{bad:?}: {err}"
        );
    }
    assert_eq!(log.read_log(Position::Beginning, 100).await.unwrap(), whole);

    // Trimmed entries are skipped.
    log.trim(1).await.unwrap();
    let u = tag("user:8");
    log.append(AppendRequest::new(u.clone(), "x"))
        .await
        .unwrap();
    log.delete_stream(&u).await.unwrap();
    assert_eq!(log.erase_stream(&u).await.unwrap(), 1);
    assert_eq!(log.erase_stream(&t).await.unwrap(), 0);
}

/// Truncating a stream before a version makes every read by tag (pages,
/// versions, the previous entry, subscriptions, views) start there — by
/// seqnum at that version's entry, so entries of other streams carrying
/// the tag below it go too — and keeps its numbering and conditions;
/// whole-log reads keep everything. A soft delete hides all that carried
/// the tag so far, and the next append starts a new life at the next
/// version. The start only moves forward; past the next version is
/// refused.
pub async fn streams_truncate_and_delete_softly(f: Fixture) {
    let log = f.log;
    let (t, other) = (tag("cart:1"), tag("audit"));
    for i in 0..5 {
        log.append(AppendRequest::new(t.clone(), format!("{i}")))
            .await
            .unwrap();
    }
    // Seqnum 5: another stream's entry that also carries `t`.
    log.append(AppendRequest::new(other.clone(), "x").with_tag(t.clone()))
        .await
        .unwrap();
    assert_eq!(
        log.stream_lifecycle(&t).await.unwrap(),
        StreamLifecycle::default()
    );
    let truncated = log.truncate_stream(&t, 3).await.unwrap();
    assert_eq!(
        (
            truncated.start_version,
            truncated.start_seqnum,
            truncated.deleted
        ),
        (3, 3, false)
    );
    assert_eq!(log.stream_lifecycle(&t).await.unwrap(), truncated);

    assert_eq!(seqnums(&log.read_all(&t).await.unwrap()), [3, 4, 5]);
    let page = log.read_from(&t, Position::Beginning, 2).await.unwrap();
    assert_eq!(
        seqnums(&page),
        [3, 4],
        "a page is filled past hidden entries"
    );
    assert_eq!(seqnums(&log.read_after(&t, 0).await.unwrap()), [3, 4, 5]);
    let versions: Vec<u64> = log
        .stream_versions(&t, 0)
        .map(|e| e.unwrap().stream_version)
        .collect()
        .await;
    assert_eq!(versions, [3, 4]);
    assert_eq!(
        seqnums(&log.read_after_version(&t, 1).await.unwrap()),
        [3, 4]
    );
    let view = log.view(t.clone());
    assert_eq!(view.read_prev_before(3).await.unwrap(), None);
    assert_eq!(view.check_tail().await.unwrap(), Some(5));
    assert_eq!(view.read_all().await.unwrap().len(), 3);
    let mut sub = log.subscribe(&t, Position::Beginning);
    for want in [3, 4, 5] {
        let e = within("a subscription's backlog", sub.next()).await;
        assert_eq!(e.unwrap().unwrap().seqnum, want);
    }
    let whole = log.read_log(Position::Beginning, 100).await.unwrap();
    assert_eq!(seqnums(&whole), [0, 1, 2, 3, 4, 5], "the log keeps them");
    assert_eq!(log.streams(Some(&t), 1).await.unwrap()[0].next_version, 5);

    // Forward only; never past the next version.
    assert_eq!(log.truncate_stream(&t, 1).await.unwrap(), truncated);
    let past = log.truncate_stream(&t, 6).await.unwrap_err();
    assert_eq!(past.kind(), ErrorKind::InvalidInput);
    assert_eq!(log.next_version(&t).await.unwrap(), 5);

    // A soft delete: nothing of its own is left; it is not a new stream.
    let deleted = log.delete_stream(&t).await.unwrap();
    assert_eq!(
        (deleted.start_version, deleted.start_seqnum, deleted.deleted),
        (5, 6, true)
    );
    assert!(log.read_all(&t).await.unwrap().is_empty());
    assert_eq!(view.check_tail().await.unwrap(), None);
    assert!(log.read_after_version(&t, 0).await.unwrap().is_empty());
    let fresh = log
        .append_if(AppendRequest::new(t.clone(), "new"), Expected::NoStream)
        .await
        .unwrap_err();
    assert_eq!(fresh.kind(), ErrorKind::Conflict);
    let again = log
        .append_if(AppendRequest::new(t.clone(), "again"), Expected::Exact(5))
        .await
        .unwrap();
    assert_eq!((again.seqnum, again.stream_version), (6, 5));
    assert_eq!(seqnums(&log.read_all(&t).await.unwrap()), [6]);
    let live = within("a live entry after the delete", sub.next()).await;
    assert_eq!(live.unwrap().unwrap().seqnum, again.seqnum);
    let mut later = log.subscribe(&t, Position::At(0));
    let first = within("a new subscription's backlog", later.next()).await;
    assert_eq!(first.unwrap().unwrap().seqnum, 6);
    // A truncate after the delete is a truncate.
    let moved = log.truncate_stream(&t, 6).await.unwrap();
    assert_eq!(
        (moved.start_version, moved.start_seqnum, moved.deleted),
        (6, 7, false)
    );
    assert!(log.read_all(&t).await.unwrap().is_empty());
    // Another stream is untouched.
    assert_eq!(seqnums(&log.read_all(&other).await.unwrap()), [5]);

    // Racing truncates: each compare-and-set either lands or retries, and
    // the start ends at the furthest one asked for.
    let racer = tag("cart:race");
    for i in 0..8 {
        log.append(AppendRequest::new(racer.clone(), format!("{i}")))
            .await
            .unwrap();
    }
    let tasks: Vec<_> = (1..=8u64)
        .map(|v| {
            let (log, racer) = (log.clone(), racer.clone());
            tokio::spawn(async move { log.truncate_stream(&racer, v).await.unwrap() })
        })
        .collect();
    for task in tasks {
        let set = within("a racing truncate", task).await.unwrap();
        assert!(set.start_version >= 1, "{set:?}");
    }
    let end = log.stream_lifecycle(&racer).await.unwrap();
    assert_eq!(end.start_version, 8);
    assert!(log.read_all(&racer).await.unwrap().is_empty());
}

/// A subscription delivers the backlog, then live entries, with no gap and
/// no duplicate, while appends run concurrently.
pub async fn subscription_hands_over_from_backlog_to_live(f: Fixture) {
    let log = f.log;
    let (t, other) = (tag("feed"), tag("other"));
    for i in 0..30 {
        let which = if i % 3 == 0 { &other } else { &t };
        log.append(AppendRequest::new(which.clone(), format!("{i}")))
            .await
            .unwrap();
    }
    let mut sub = log.subscribe(&t, Position::Beginning);
    let writer = {
        let log = log.clone();
        let (t, other) = (t.clone(), other.clone());
        tokio::spawn(async move {
            for i in 30..330 {
                let which = if i % 3 == 0 { &other } else { &t };
                log.append(AppendRequest::new(which.clone(), format!("{i}")))
                    .await
                    .unwrap();
                if i % 50 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    let expected_count = (0..330).filter(|i| i % 3 != 0).count();
    let mut got = Vec::new();
    while got.len() < expected_count {
        let e = within("subscription", sub.next())
            .await
            .expect("stream ended early")
            .unwrap();
        got.push(e);
    }
    writer.await.unwrap();
    let want = log.read_all(&t).await.unwrap();
    assert_eq!(seqnums(&got), seqnums(&want));
    assert_eq!(got, want);
}

/// Filtered whole-log subscriptions (a namespace, a key prefix, a set of
/// tags) deliver exactly the matching entries, backlog then live, and mark
/// their progress through a long stretch of entries that do not match, so
/// a subscriber resumed at the last mark reads nothing below it (the log
/// is trimmed below the mark first, which a rescan would run into).
pub async fn filtered_subscriptions_pass_sparse_stretches(f: Fixture) {
    let log = f.log;
    let names = [
        "orders:eu-1",
        "orders:us-1",
        "orders",
        "audit",
        "user:7",
        "user:8",
    ];
    for i in 0..30 {
        let mut r = AppendRequest::new(tag(names[i % names.len()]), format!("{i}"));
        if i % 7 == 0 {
            r = r.with_tag(tag("audit"));
        }
        log.append(r).await.unwrap();
    }
    // A stretch longer than any one catch-up read, matching no filter.
    for b in 0..7 {
        let batch = (0..300)
            .map(|i| AppendRequest::new(tag("noise"), format!("{b}/{i}")))
            .collect();
        log.append_batch(batch).await.unwrap();
    }
    let backlog_end = log.tip().await.unwrap().next;
    type Pred = fn(&str) -> bool;
    // (filter, the same set written as a test on a tag's text, a tag to
    // append live that it matches)
    let table: [(TagFilter, Pred, &str); 3] = [
        (
            TagFilter::namespace("orders").unwrap(),
            |t| t == "orders" || t.starts_with("orders:"),
            "orders:new",
        ),
        (
            TagFilter::key_prefix("orders", "eu-").unwrap(),
            |t| t.starts_with("orders:eu-"),
            "orders:eu-9",
        ),
        (
            TagFilter::tags([tag("audit"), tag("user:7")]).unwrap(),
            |t| t == "audit" || t == "user:7",
            "user:7",
        ),
    ];
    let everything: Vec<LogEntry> = log
        .stream_log(Position::Beginning)
        .map(|e| e.unwrap())
        .collect()
        .await;
    let mut last_mark = 0;
    for (filter, pred, live_tag) in table {
        let want: Vec<u64> = everything
            .iter()
            .filter(|e| e.tags.iter().any(|t| pred(&t.to_string())))
            .map(|e| e.seqnum)
            .collect();
        let mut sub = log.subscribe_filtered(filter.clone(), Position::Beginning);
        let (mut got, mut resume) = (Vec::new(), 0);
        loop {
            let item = within("filtered backlog", sub.next())
                .await
                .unwrap()
                .unwrap();
            assert!(
                item.resume_at() > resume,
                "{filter}: {item:?} after {resume}"
            );
            resume = item.resume_at();
            match item {
                Delivery::Entry(e) => got.push(e.seqnum),
                Delivery::Passed(n) if n >= backlog_end => {
                    assert_eq!(n, log.tip().await.unwrap().next, "{filter}");
                    break;
                }
                Delivery::Passed(_) => {}
            }
        }
        assert_eq!(got, want, "{filter}");
        // Live: a match, then a stretch of noise, which the mark covers.
        let hit = log
            .append(AppendRequest::new(tag(live_tag), "live"))
            .await
            .unwrap();
        let miss = log
            .append(AppendRequest::new(tag("noise"), "n"))
            .await
            .unwrap();
        let a = within("filtered live", sub.next()).await.unwrap().unwrap();
        assert!(
            matches!(&a, Delivery::Entry(e) if e.seqnum == hit.seqnum),
            "{filter}: {a:?}"
        );
        let b = within("filtered mark", sub.next()).await.unwrap().unwrap();
        assert_eq!(b, Delivery::Passed(miss.seqnum + 1), "{filter}");
        last_mark = miss.seqnum + 1;
    }
    // Resume at the last mark with everything below it trimmed away.
    log.trim(last_mark - 1).await.unwrap();
    let filter = TagFilter::key_prefix("orders", "eu-").unwrap();
    let mut resumed = log.subscribe_filtered(filter, Position::At(last_mark));
    let hit = log
        .append(AppendRequest::new(tag("orders:eu-2"), "after"))
        .await
        .unwrap();
    let first = within("resumed", resumed.next()).await.unwrap().unwrap();
    assert!(
        matches!(&first, Delivery::Entry(e) if e.seqnum == hit.seqnum),
        "{first:?}"
    );
}

/// Timestamps never go down along the log, and `Position::Since(t)`
/// (for reads, subscriptions and `seek_time`) starts at the first entry
/// stamped `t` or later, for every stamp in the log and for times before
/// the first and after the last entry. (The writer's clock is the system
/// clock here; tests with a clock that goes back are per backend.)
pub async fn reads_and_subscriptions_start_at_a_time(f: Fixture) {
    let log = f.log;
    for round in 0..6 {
        let batch = (0..5)
            .map(|i| {
                AppendRequest::new(
                    tag(if i % 2 == 0 { "a" } else { "b" }),
                    format!("{round}/{i}"),
                )
            })
            .collect();
        log.append_batch(batch).await.unwrap();
        // Bounded: a few distinct stamps for the search to tell apart.
        weft::clock::sleep(Duration::from_millis(3)).await;
    }
    let entries: Vec<LogEntry> = log
        .stream_log(Position::Beginning)
        .map(|e| e.unwrap())
        .collect()
        .await;
    let stamps: Vec<u64> = entries.iter().map(|e| e.timestamp_ms).collect();
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
    let next = log.tip().await.unwrap().next;
    let mut times: Vec<u64> = stamps.iter().flat_map(|&t| [t, t + 1]).collect();
    times.extend([0, stamps[0].saturating_sub(1), u64::MAX]);
    times.sort();
    times.dedup();
    for t in times {
        let want = entries
            .iter()
            .find(|e| e.timestamp_ms >= t)
            .map_or(next, |e| e.seqnum);
        assert_eq!(log.storage().seek_time(t).await.unwrap(), want, "seek {t}");
        let page = log.read_log(Position::Since(t), 2).await.unwrap();
        assert_eq!(
            page.first().map(|e| e.seqnum),
            (want < next).then_some(want),
            "read {t}"
        );
        let tagged = log
            .read_from(&tag("b"), Position::Since(t), 1)
            .await
            .unwrap();
        let want_b = entries
            .iter()
            .find(|e| e.seqnum >= want && e.has_tag(&tag("b")))
            .map(|e| e.seqnum);
        assert_eq!(tagged.first().map(|e| e.seqnum), want_b, "read b {t}");
        if want < next {
            let mut sub = log.subscribe_log(Position::Since(t));
            let first = within("since", sub.next()).await.unwrap().unwrap();
            assert_eq!(first.seqnum, want, "subscribe {t}");
        }
    }
}

/// A tail subscription sees only entries appended after it was made.
pub async fn tail_subscription_sees_only_new_entries(f: Fixture) {
    let log = f.log;
    let t = tag("tail");
    log.append(AppendRequest::new(t.clone(), "old"))
        .await
        .unwrap();
    let mut sub = log.subscribe_tail(&t);
    let mut view_sub = log.view(t.clone()).subscribe_tail();
    let r = log
        .append(AppendRequest::new(t.clone(), "new"))
        .await
        .unwrap();
    let e = within("tail", sub.next()).await.unwrap().unwrap();
    assert_eq!((e.seqnum, &e.data[..]), (r.seqnum, &b"new"[..]));
    let e = within("view tail", view_sub.next()).await.unwrap().unwrap();
    assert_eq!(e.seqnum, r.seqnum);
    drop(sub);
    // Appends go on after a subscriber is dropped.
    log.append(AppendRequest::new(t.clone(), "after"))
        .await
        .unwrap();
}

/// A subscriber that is never polled does not hold up appends, and when it
/// resumes it still gets every entry, in order.
pub async fn lagging_subscriber_never_blocks_appends(f: Fixture) {
    let log = f.log;
    let t = tag("lag");
    let mut sub = log.subscribe(&t, Position::Beginning);
    let total = FEED_CAPACITY as u64 + 300;
    within("appends past a stalled subscriber", async {
        for i in 0..total {
            log.append(AppendRequest::new(t.clone(), format!("{i}")))
                .await
                .unwrap();
        }
    })
    .await;
    let mut next = 0;
    while next < total {
        let e = within("lagging subscriber", sub.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(e.seqnum, next);
        next += 1;
    }
    let r = log
        .append(AppendRequest::new(t.clone(), "live"))
        .await
        .unwrap();
    let e = within("after catching up", sub.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.seqnum, r.seqnum);
}

/// Views add their tag to appends and scope every read to it.
pub async fn views_scope_reads_and_appends(f: Fixture) {
    let log = f.log;
    let view = log.view(tag("orders"));
    let a = view.append("a").await.unwrap();
    log.append(AppendRequest::new(tag("noise"), "n"))
        .await
        .unwrap();
    let b = view
        .append_request(AppendRequest::new(tag("orders:o-7"), "b"))
        .await
        .unwrap();
    assert_eq!(b.primary_tag, tag("orders:o-7"));
    let c = view.append("c").await.unwrap();
    assert_eq!(seqnums(&view.read_all().await.unwrap()), vec![0, 2, 3]);
    let next = view.read_next_after(a.seqnum).await.unwrap().unwrap();
    assert_eq!(next.seqnum, b.seqnum);
    assert!(next.has_tag(&tag("orders")));
    let prev = view.read_prev_before(c.seqnum).await.unwrap().unwrap();
    assert_eq!(prev.seqnum, b.seqnum);
    assert!(view.read_prev_before(a.seqnum).await.unwrap().is_none());
    assert!(view.read_next_after(c.seqnum).await.unwrap().is_none());
    assert_eq!(view.check_tail().await.unwrap(), Some(c.seqnum));
    assert_eq!(view.latest_version().await.unwrap(), Some(1));
    assert_eq!(view.next_version().await.unwrap(), 2);
    assert!(view.append_if("x", 1).await.is_err());
    view.append_if("x", 2).await.unwrap();
    let empty = log.view(tag("empty"));
    assert_eq!(empty.check_tail().await.unwrap(), None);
}

/// A typed view round-trips values and names the seqnum it cannot decode.
pub async fn typed_view_decode_failure_names_seqnum(f: Fixture) {
    let log = f.log;
    let t = tag("typed");
    let typed = log.typed_view(t.clone(), JsonCodec::<Vec<u32>>::new());
    typed.append(&vec![1, 2, 3]).await.unwrap();
    let bad = log
        .append(AppendRequest::new(t.clone(), "not json"))
        .await
        .unwrap();
    let err = typed.read_all().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert_eq!(
        err.detail(),
        Some(&ErrorDetail::Decode { seqnum: bad.seqnum })
    );
    let ok = typed.read_from(Position::Beginning, 1).await.unwrap();
    assert_eq!(ok[0].1, vec![1, 2, 3]);
}

/// Malformed requests are typed errors and write nothing.
pub async fn invalid_input_writes_nothing(f: Fixture) {
    let log = f.log;
    let max = log.storage().capabilities().max_entry_bytes;
    let t = tag("t");
    let oversize = AppendRequest::new(t.clone(), vec![0u8; max + 1]);
    assert_eq!(
        log.append(oversize.clone()).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        log.append_batch(vec![]).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let no_tags = AppendRequest::with_tags(Vec::<LogTag>::new(), "x");
    assert_eq!(
        log.append(no_tags).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        log.append_batch(vec![AppendRequest::new(t.clone(), "ok"), oversize])
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
    // The same through the trait, with no `Log` in front: the backend
    // itself refuses, whoever calls it.
    let entry = |tags: &[&str], data: Vec<u8>, id: Option<&str>| NewEntry {
        tags: tags.iter().map(|t| tag(t)).collect(),
        data: data.into(),
        expected_version: None,
        append_id: id.map(str::to_owned),
    };
    let storage = log.storage();
    let ids = storage.supports_append_ids();
    let mut refused = vec![
        vec![],
        vec![entry(&[], b"x".to_vec(), None)],
        vec![entry(&["t"], vec![0u8; max + 1], None)],
        vec![entry(&["t", "u", "t"], b"x".to_vec(), None)],
        vec![
            entry(&["t"], b"ok".to_vec(), None),
            entry(&["t"], vec![0u8; max + 1], None),
        ],
    ];
    if ids {
        refused.push(vec![entry(&["t"], b"x".to_vec(), Some(""))]);
        refused.push(vec![
            entry(&["t"], b"x".to_vec(), Some("same")),
            entry(&["u"], b"y".to_vec(), Some("same")),
        ]);
    }
    for batch in refused {
        let shown = format!("{} entries", batch.len());
        let err = storage.append(batch).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{shown}: {err}");
    }
    let err = storage
        .append_one(entry(&["t"], vec![0u8; max + 1], None))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(log.latest_seqnum().await.unwrap(), None);
    let r = log.append(AppendRequest::new(t, "fine")).await.unwrap();
    assert_eq!(r.seqnum, 0);
}

/// The KV's compare-and-set is atomic: one winner among contenders, no lost
/// increments, stale holders cannot release. A backend without a KV must
/// say `Unsupported`.
pub async fn kv_compare_and_set_is_atomic(f: Fixture) {
    let log = f.log;
    let kv = match log.kv(tag("exec:1")) {
        Ok(kv) => kv,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Unsupported);
            return;
        }
    };
    for round in 0..10 {
        let key = format!("owner-{round}");
        let tasks: Vec<_> = (0..6)
            .map(|i| {
                let kv = kv.clone();
                let key = key.clone();
                tokio::spawn(async move { kv.set_if_absent(&key, format!("n{i}")).await.unwrap() })
            })
            .collect();
        let mut wins = 0;
        for task in tasks {
            wins += task.await.unwrap() as u32;
        }
        assert_eq!(wins, 1, "round {round}");
    }
    let holder = kv.get("owner-0").await.unwrap().unwrap();
    assert!(!kv.delete_if("owner-0", b"someone-else").await.unwrap());
    assert!(
        kv.compare_and_set("owner-0", Some(&holder), Some("next".into()))
            .await
            .unwrap()
    );
    assert!(
        kv.compare_and_set("owner-0", None, Some("x".into()))
            .await
            .is_ok_and(|w| !w)
    );
    assert!(kv.delete_if("owner-0", b"next").await.unwrap());
    assert_eq!(kv.get("owner-0").await.unwrap(), None);
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let kv = kv.clone();
            tokio::spawn(async move {
                for _ in 0..25 {
                    kv.increment("count", 1).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(kv.increment("count", 0).await.unwrap(), 100);
    kv.set("blob", "not a counter").await.unwrap();
    assert_eq!(
        kv.increment("blob", 1).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kv.get("").await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let other = log.kv(tag("exec:2")).unwrap();
    assert_eq!(
        other.get("count").await.unwrap(),
        None,
        "scopes are separate"
    );
}

/// An append whose id is already in the log writes nothing and answers
/// with the original result: also as a conditional append that would now
/// conflict, and inside a batch with new entries. A repeated id within one
/// batch, and a malformed id, are `InvalidInput`. A backend that does not
/// support ids refuses them with `Unsupported` and writes nothing.
pub async fn append_ids_make_retries_exactly_once(f: Fixture) {
    let log = f.log;
    let (t, u) = (tag("orders"), tag("orders:o-42"));
    let placed = || AppendRequest::new(t.clone(), "placed").with_id("order-42/placed");
    if !log.storage().supports_append_ids() {
        let err = log.append(placed()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        assert_eq!(log.latest_seqnum().await.unwrap(), None);
        return;
    }
    let first = log.append(placed().with_tag(u.clone())).await.unwrap();
    assert_eq!((first.seqnum, first.stream_version), (0, 0));
    log.append(AppendRequest::new(t.clone(), "no id"))
        .await
        .unwrap();
    // The retry, and a retry whose request differs (another tag and
    // payload): the original answer, nothing written.
    assert_eq!(log.append(placed()).await.unwrap(), first);
    let other = AppendRequest::new(u.clone(), "else").with_id("order-42/placed");
    assert_eq!(log.append(other).await.unwrap(), first);
    assert_eq!(log.latest_seqnum().await.unwrap(), Some(1));
    assert_eq!(log.read_all(&u).await.unwrap().len(), 1);

    // A winning conditional append, retried once it is stale.
    let confirm = || AppendRequest::new(t.clone(), "confirmed").with_id("order-42/confirmed");
    let won = log.append_if(confirm(), 2).await.unwrap();
    assert_eq!((won.seqnum, won.stream_version), (2, 2));
    assert_eq!(log.append_if(confirm(), 2).await.unwrap(), won);
    // A losing one with a new id still conflicts, and writes nothing.
    let lose = AppendRequest::new(t.clone(), "late").with_id("order-42/late");
    let err = log.append_if(lose, 2).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(err.conflict_next_version(), Some(3));

    // A batch mixing a known id, a new id and no id: only the new entries
    // are written, contiguously; the known one answers with its original.
    let mixed = log
        .append_batch(vec![
            AppendRequest::new(t.clone(), "shipped").with_id("order-42/shipped"),
            placed(),
            AppendRequest::new(t.clone(), "note"),
        ])
        .await
        .unwrap();
    let nums: Vec<_> = mixed.iter().map(|r| (r.seqnum, r.stream_version)).collect();
    assert_eq!(nums, vec![(3, 3), (0, 0), (4, 4)]);
    assert_eq!(mixed[1], first);
    // The whole batch again: every answer is an original.
    let again = log
        .append_batch(vec![
            AppendRequest::new(t.clone(), "shipped").with_id("order-42/shipped"),
            placed(),
        ])
        .await
        .unwrap();
    assert_eq!(again, mixed[..2].to_vec());
    assert_eq!(log.latest_seqnum().await.unwrap(), Some(4));

    // Refused before anything is written.
    let twice = log
        .append_batch(vec![
            AppendRequest::new(t.clone(), "a").with_id("dup"),
            AppendRequest::new(t.clone(), "b").with_id("dup"),
        ])
        .await
        .unwrap_err();
    assert_eq!(twice.kind(), ErrorKind::InvalidInput, "{twice}");
    let long = "i".repeat(weft::model::MAX_APPEND_ID_BYTES + 1);
    for bad in ["", "line\nbreak", long.as_str()] {
        let err = log
            .append(AppendRequest::new(t.clone(), "x").with_id(bad))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}: {err}");
    }
    assert_eq!(log.latest_seqnum().await.unwrap(), Some(4));
    let data: Vec<_> = log
        .read_all(&t)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.data)
        .collect();
    assert_eq!(data, ["placed", "no id", "confirmed", "shipped", "note"]);
}

/// Many concurrent appends with one id (a retry racing its original and
/// each other) write one entry, and all get its result.
pub async fn concurrent_retries_of_one_id_write_it_once(f: Fixture) {
    let log = f.log;
    if !log.storage().supports_append_ids() {
        return append_ids_make_retries_exactly_once(Fixture::new(log)).await;
    }
    let t = tag("t");
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let log = log.clone();
            let t = t.clone();
            tokio::spawn(async move {
                let noise = log.append(AppendRequest::new(t.clone(), format!("noise {i}")));
                let once = log.append(AppendRequest::new(t.clone(), "once").with_id("the-id"));
                let (noise, once) = futures::join!(noise, once);
                noise.unwrap();
                once.unwrap()
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(within("concurrent retries", task).await.unwrap());
    }
    assert!(results.iter().all(|r| *r == results[0]), "{results:?}");
    let all = log.read_all(&t).await.unwrap();
    assert_eq!(all.len(), 9);
    let once: Vec<_> = all.iter().filter(|e| e.data == "once").collect();
    assert_eq!(once.len(), 1);
    assert_eq!(once[0].seqnum, results[0].seqnum);
}

/// Every way of reading an entry returns the append id it was appended
/// with (`None` for an entry appended without one): reads by tag, by
/// position, by version, the previous entry, a subscription's backlog and
/// its live part, and the entries of a batch and of a retry.
pub async fn reads_return_append_ids(f: Fixture) {
    let log = f.log;
    let (t, u) = (tag("orders"), tag("orders:o-7"));
    let ids_of = |entries: &[LogEntry]| -> Vec<Option<String>> {
        entries.iter().map(|e| e.append_id.clone()).collect()
    };
    if !log.storage().supports_append_ids() {
        log.append(AppendRequest::new(t.clone(), "plain"))
            .await
            .unwrap();
        assert_eq!(ids_of(&log.read_all(&t).await.unwrap()), vec![None]);
        return;
    }
    let mut live = log.subscribe_log(Position::Beginning);
    log.append(
        AppendRequest::new(t.clone(), "placed")
            .with_id("o-7/placed")
            .with_tag(u.clone()),
    )
    .await
    .unwrap();
    log.append(AppendRequest::new(t.clone(), "note"))
        .await
        .unwrap();
    log.append_batch(vec![
        AppendRequest::new(t.clone(), "paid").with_id("o-7/paid"),
        AppendRequest::new(t.clone(), "packed"),
        AppendRequest::new(u.clone(), "shipped").with_id("o-7/shipped"),
    ])
    .await
    .unwrap();
    // A retry writes nothing, and the original keeps its id.
    log.append(AppendRequest::new(t.clone(), "placed").with_id("o-7/placed"))
        .await
        .unwrap();
    let some = |s: &str| Some(s.to_owned());
    let all = vec![
        some("o-7/placed"),
        None,
        some("o-7/paid"),
        None,
        some("o-7/shipped"),
    ];
    assert_eq!(
        ids_of(&log.read_log(Position::Beginning, 100).await.unwrap()),
        all
    );
    assert_eq!(
        ids_of(&log.read_log(Position::At(2), 2).await.unwrap()),
        all[2..4].to_vec()
    );
    let prev = log.storage().read_prev(Some(&t), 3).await.unwrap();
    assert_eq!(prev.and_then(|e| e.append_id), some("o-7/paid"));
    assert_eq!(ids_of(&log.read_all(&t).await.unwrap()), all[..4].to_vec());
    assert_eq!(
        ids_of(&log.read_all(&u).await.unwrap()),
        vec![some("o-7/placed"), some("o-7/shipped")]
    );
    assert_eq!(
        ids_of(&log.read_after_version(&t, 1).await.unwrap()),
        all[2..4].to_vec()
    );
    let got: Vec<LogEntry> = within("the subscription", async {
        let mut got = Vec::new();
        while got.len() < all.len() {
            got.push(live.next().await.expect("open").expect("entry"));
        }
        got
    })
    .await;
    assert_eq!(ids_of(&got), all);
    let mut backlog = log.subscribe_log(Position::Beginning);
    let first = within("the backlog", backlog.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.append_id, some("o-7/placed"));
}

/// After `close`, appends and reads fail with `Closed` and subscriptions end.
pub async fn closed_log_refuses_work(f: Fixture) {
    let log = f.log;
    let t = tag("t");
    log.append(AppendRequest::new(t.clone(), "x"))
        .await
        .unwrap();
    let mut sub = log.subscribe_tail(&t);
    log.close().await.unwrap();
    assert_eq!(
        log.append(AppendRequest::new(t.clone(), "y"))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Closed
    );
    assert_eq!(
        log.read_all(&t).await.unwrap_err().kind(),
        ErrorKind::Closed
    );
    let end = within("subscription end", sub.next()).await;
    assert!(end.is_none_or(|r| r.is_err()));
}

/// Steps `retention` on `log` until a step says there is no more to do
/// (bounded: a check that never settles fails).
async fn settle(retention: &mut Retention, log: &Log) -> RetentionStep {
    for _ in 0..1000 {
        let step = retention.step(log).await.unwrap();
        if !step.more {
            return step;
        }
    }
    panic!("retention did not settle in 1000 steps");
}

async fn append_n(log: &Log, t: &LogTag, n: usize, size: usize) -> Vec<LogEntry> {
    for i in 0..n {
        let mut data = format!("{i:>size$}").into_bytes();
        data.truncate(size);
        log.append(AppendRequest::new(t.clone(), data))
            .await
            .unwrap();
    }
    log.read_log(Position::Beginning, n + 10).await.unwrap()
}

/// A log has no retention policy until one is set; a set policy reads back
/// exactly, an invalid one is refused, and clearing it leaves none.
pub async fn retention_policy_round_trips(f: Fixture) {
    let log = f.log;
    assert_eq!(log.retention_policy().await.unwrap(), None);
    let policy = RetentionPolicy::default()
        .with_max_age_ms(Some(7 * 86_400_000))
        .with_max_count(Some(1_000_000))
        .with_max_bytes(Some(10 << 30))
        .with_protect_consumers(vec!["billing".into(), "replica-1".into()]);
    log.set_retention_policy(Some(policy.clone()))
        .await
        .unwrap();
    assert_eq!(log.retention_policy().await.unwrap(), Some(policy.clone()));
    let bad = RetentionPolicy::default().with_max_count(Some(0));
    assert_eq!(
        log.set_retention_policy(Some(bad))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(log.retention_policy().await.unwrap(), Some(policy));
    log.set_retention_policy(None).await.unwrap();
    assert_eq!(log.retention_policy().await.unwrap(), None);
    // A log without a policy keeps everything.
    let t = tag("t");
    append_n(&log, &t, 3, 1).await;
    let step = Retention::new(weft::clock::system())
        .step(&log)
        .await
        .unwrap();
    assert_eq!(step.trimmed_through, None);
    assert_eq!(log.tip().await.unwrap().first, 0);
}

/// `max_count` keeps the newest entries; older reads get `Trimmed`, and
/// streams go on numbering.
pub async fn count_retention_keeps_the_newest(f: Fixture) {
    let log = f.log;
    let t = tag("t");
    append_n(&log, &t, 10, 1).await;
    log.set_retention_policy(Some(RetentionPolicy::default().with_max_count(Some(4))))
        .await
        .unwrap();
    let mut retention = Retention::new(weft::clock::system()).with_step_entries(3);
    let step = settle(&mut retention, &log).await;
    assert_eq!(step.held_by, None);
    assert_eq!(log.tip().await.unwrap().first, 6);
    let err = log.read_log(Position::At(5), 10).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    assert_eq!(seqnums(&log.read_all(&t).await.unwrap()), vec![6, 7, 8, 9]);
    let r = log
        .append(AppendRequest::new(t.clone(), "next"))
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (10, 10));
    settle(&mut retention, &log).await;
    assert_eq!(log.tip().await.unwrap().first, 7);
}

/// `max_age_ms` drops the entries older than the applier's clock minus the
/// age, by their timestamps, and nothing newer.
pub async fn age_retention_follows_the_appliers_clock(f: Fixture) {
    let log = f.log;
    let t = tag("t");
    let entries = append_n(&log, &t, 12, 1).await;
    let day = 86_400_000;
    // The writer's own task (on the real clock) finds nothing a day old.
    log.set_retention_policy(Some(RetentionPolicy::default().with_max_age_ms(Some(day))))
        .await
        .unwrap();
    let pivot = entries[5].timestamp_ms;
    // An applier whose clock reads a day after entry 5 (+1 ms): every entry
    // stamped at or before entry 5's millisecond is older than a day.
    let clock = weft::clock::ManualClock::new(pivot + day + 1);
    let mut retention = Retention::new(clock.clone());
    settle(&mut retention, &log).await;
    let kept_from = entries
        .iter()
        .find(|e| e.timestamp_ms > pivot)
        .map_or(12, |e| e.seqnum);
    assert!(kept_from >= 6);
    assert_eq!(log.tip().await.unwrap().first, kept_from);
    // A clock that moves on past every entry's age drops them all.
    clock.advance(entries[11].timestamp_ms - pivot + 1);
    settle(&mut retention, &log).await;
    assert_eq!(log.tip().await.unwrap().first, 12);
    assert!(log.read_all(&t).await.unwrap().is_empty());
}

/// `max_bytes` keeps the newest entries whose payloads fit the limit.
pub async fn size_retention_keeps_the_newest_bytes(f: Fixture) {
    let log = f.log;
    let t = tag("t");
    append_n(&log, &t, 10, 10).await;
    log.set_retention_policy(Some(RetentionPolicy::default().with_max_bytes(Some(35))))
        .await
        .unwrap();
    let mut retention = Retention::new(weft::clock::system()).with_step_entries(4);
    settle(&mut retention, &log).await;
    assert_eq!(log.tip().await.unwrap().first, 7);
    append_n(&log, &t, 2, 10).await;
    settle(&mut retention, &log).await;
    assert_eq!(log.tip().await.unwrap().first, 9);
}

/// A policy that protects a consumer never trims at or past its position:
/// it waits for the consumer (and for one that never committed), and
/// catches up when the consumer moves on.
pub async fn retention_never_passes_a_protected_consumer(f: Fixture) {
    let log = f.log;
    let t = tag("t");
    append_n(&log, &t, 10, 1).await;
    let billing = log.consumer("billing").unwrap();
    assert_eq!(billing.commit(3).await.unwrap(), 3);
    // Under another filter, the same name is behind: that position holds.
    let by_tag = log
        .consumer_for("billing", &TagFilter::from(t.clone()))
        .unwrap();
    assert_eq!(by_tag.commit(2).await.unwrap(), 2);
    log.set_retention_policy(Some(
        RetentionPolicy::default()
            .with_max_count(Some(2))
            .with_protect_consumers(vec!["billing".into()]),
    ))
    .await
    .unwrap();
    let mut retention = Retention::new(weft::clock::system());
    let step = settle(&mut retention, &log).await;
    assert_eq!(step.wanted_through, Some(7));
    assert_eq!(step.held_by, Some(("billing".to_owned(), 2)));
    assert_eq!(log.tip().await.unwrap().first, 2);
    by_tag.commit(5).await.unwrap();
    settle(&mut retention, &log).await;
    assert_eq!(log.tip().await.unwrap().first, 3);
    billing.commit(9).await.unwrap();
    by_tag.commit(9).await.unwrap();
    let step = settle(&mut retention, &log).await;
    assert_eq!(step.held_by, None);
    assert_eq!(log.tip().await.unwrap().first, 8);
    // A protected consumer that never committed holds everything.
    log.set_retention_policy(Some(
        RetentionPolicy::default()
            .with_max_count(Some(1))
            .with_protect_consumers(vec!["billing".into(), "ghost".into()]),
    ))
    .await
    .unwrap();
    let step = settle(&mut retention, &log).await;
    assert_eq!(step.held_by, Some(("ghost".to_owned(), 0)));
    assert_eq!(log.tip().await.unwrap().first, 8);
}

/// Consumer positions start absent, only move forward, cannot pass the
/// log's end, are kept apart per filter and are listed for operators.
pub async fn consumer_positions_are_named_monotonic_and_listed(f: Fixture) {
    let log = f.log;
    let t = tag("orders");
    append_n(&log, &t, 5, 1).await;
    assert!(log.consumers().await.unwrap().is_empty());
    let a = log.consumer("indexer").unwrap();
    assert_eq!(a.position().await.unwrap(), None);
    assert_eq!(a.commit(2).await.unwrap(), 2);
    assert_eq!(a.commit(1).await.unwrap(), 2);
    assert_eq!(a.position().await.unwrap(), Some(2));
    assert_eq!(a.commit(5).await.unwrap(), 5);
    assert_eq!(
        a.commit(6).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let eu = log
        .consumer_for("indexer", &TagFilter::namespace("orders").unwrap())
        .unwrap();
    assert_eq!(eu.position().await.unwrap(), None);
    eu.commit(1).await.unwrap();
    assert_eq!(a.position().await.unwrap(), Some(5));
    // `All` is the whole log: the unfiltered position.
    let all = log.consumer_for("indexer", &TagFilter::All).unwrap();
    assert_eq!(all.position().await.unwrap(), Some(5));
    let b = log.consumer("audit").unwrap();
    b.commit(0).await.unwrap();
    let listed: Vec<(String, Option<String>, u64)> = log
        .consumers()
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.name, c.filter, c.position))
        .collect();
    assert_eq!(
        listed,
        vec![
            ("audit".to_owned(), None, 0),
            ("indexer".to_owned(), None, 5),
            ("indexer".to_owned(), Some("namespace orders".to_owned()), 1),
        ]
    );
    for bad in ["", "has space", "slash/y", &"x".repeat(65)] {
        assert_eq!(
            log.consumer(bad).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    }
    // Concurrent commits of one consumer: the highest wins.
    let mut tasks = Vec::new();
    for p in 0..=5u64 {
        let c = log.consumer("racer").unwrap();
        tasks.push(tokio::spawn(async move { c.commit(p).await }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(
        log.consumer("racer").unwrap().position().await.unwrap(),
        Some(5)
    );
}
