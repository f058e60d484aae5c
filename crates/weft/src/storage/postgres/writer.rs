//! Group commit: concurrent appends of one handle share an append group.
//!
//! Appends queue on a channel. The writer task takes a slot (at most
//! `max_in_flight` groups at once), then everything queued up to the
//! group limits, and sends that group to the log's `append` function.
//! While every slot is busy the queue fills, so the batching delay is
//! bounded by one group's latency and needs no timer: a lone appender
//! never waits, and under load each group carries what arrived during the
//! previous one.
//!
//! `append` either numbers the group at once (this process got the
//! numbering lock: the group's outcome comes back in the same call) or
//! stages it; a staged group waits for the handle's collector
//! (`collect.rs`): a told outcome answers it; otherwise the collector asks
//! `outcomes_of` in one call for the groups a round may have settled, and
//! starts the next round when a round names this handle's group as the
//! oldest left staged. (On a log whose functions predate `outcomes_of`, each
//! staged group asks `outcome_of` at every round's NOTIFY instead.)
//! Whatever fails after staging leaves the outcome unknown — the staged
//! group may still be numbered — so it is `Indeterminate`.
//!
//! A batch's conditions are checked in the round against the stream
//! versions at that moment, including earlier batches of the round; a
//! batch that fails is left out and gets `Conflict`, and the rest of the
//! group is written. When the call itself fails, every appender of the
//! group gets the same error.

use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc, oneshot};

use super::Shared;
use super::errors::{self, Op};
use super::outcome::{
    Outcome, PENDING_RECHECK, STATUS_ID_PENDING, STATUS_PENDING, STATUS_STAGED, STATUS_UNKNOWN,
    Shape,
};
use super::rows::{i64_of, u64_of};
use crate::error::{Error, ErrorKind, Result};
use crate::model::{AppendResult, Expected, LogEntry};
use crate::storage::NewEntry;

/// One append call waiting for its group.
pub(super) struct Pending {
    pub(super) batch: Vec<NewEntry>,
    pub(super) reply: oneshot::Sender<Result<Vec<AppendResult>>>,
}

impl Pending {
    fn bytes(&self) -> usize {
        self.batch.iter().map(|e| e.data.len()).sum()
    }
}

/// Runs until every sender is gone, then waits for the groups in flight.
pub(super) async fn run(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let options = &shared.options;
    let slots = Arc::new(Semaphore::new(options.max_in_flight));
    let mut carry: Option<Pending> = None;
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let first = match carry.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => break,
            },
        };
        let (mut entries, mut bytes) = (first.batch.len(), first.bytes());
        let mut group = vec![first];
        while entries < options.max_group_entries && bytes < options.max_group_bytes {
            let Ok(next) = rx.try_recv() else { break };
            if entries + next.batch.len() > options.max_group_entries
                || bytes + next.bytes() > options.max_group_bytes
            {
                carry = Some(next);
                break;
            }
            entries += next.batch.len();
            bytes += next.bytes();
            group.push(next);
        }
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            commit(&shared, group).await;
            drop(permit);
        });
    }
    // Wait for the groups still in flight.
    let _ = slots.acquire_many(options.max_in_flight as u32).await;
    shared.collector.writer_done();
}

async fn commit(shared: &Shared, group: Vec<Pending>) {
    if let Err(e) = shared.check_open() {
        for p in group {
            let _ = p.reply.send(Err(e.clone()));
        }
        return;
    }
    match call(shared, &group).await {
        Ok(outcomes) => {
            let mut outcomes = outcomes.into_iter();
            let mut fresh = Vec::new();
            let answers: Vec<_> = group
                .into_iter()
                .map(|p| {
                    let mine: Vec<Outcome> = outcomes.by_ref().take(p.batch.len()).collect();
                    fresh.extend(written(&p.batch, &mine));
                    (p.reply, resolve(&p.batch, mine))
                })
                .collect();
            // Announced before any appender hears back, so a subscription
            // made after an append returns starts past it. Entries of other
            // processes below these are left to the tailer; the feed skips
            // what it already announced, and subscribers fill gaps from
            // the database.
            fresh.sort_by_key(|e| e.seqnum);
            shared.publish(fresh);
            for (reply, result) in answers {
                let _ = reply.send(result);
            }
        }
        Err(e) => {
            tracing::debug!(error = %e, entries = group.len(), "append group failed");
            for p in group {
                let _ = p.reply.send(Err(e.clone()));
            }
        }
    }
}

/// The function's spelling of a condition: a version as itself, no
/// condition as NULL, "no stream" as version 0 (the same test), and
/// "stream exists" as -1, which the function reads as "next version > 0".
/// (An older function, which knows only versions, compares -1 with the
/// next version and reports a conflict: it refuses rather than writes.)
fn expected_arg(expected: Option<Expected>) -> Result<Option<i64>> {
    Ok(match expected {
        None | Some(Expected::Any) => None,
        Some(Expected::NoStream) => Some(0),
        Some(Expected::StreamExists) => Some(STREAM_EXISTS),
        Some(Expected::Exact(v)) => Some(i64_of(v, "expected version")?),
    })
}

async fn call(shared: &Shared, group: &[Pending]) -> Result<Vec<Outcome>> {
    let n: usize = group.iter().map(|p| p.batch.len()).sum();
    let mut primary = Vec::with_capacity(n);
    let mut secondary: Vec<Option<String>> = Vec::with_capacity(n);
    let mut data: Vec<&[u8]> = Vec::with_capacity(n);
    let mut expected: Vec<Option<i64>> = Vec::with_capacity(n);
    let mut ids: Vec<Option<&str>> = Vec::with_capacity(n);
    let mut batch_len: Vec<i32> = Vec::with_capacity(group.len());
    for p in group {
        batch_len.push(p.batch.len() as i32);
        for entry in &p.batch {
            primary.push(entry.tags[0].to_string());
            secondary.push(if entry.tags.len() > 1 {
                let rest: Vec<String> = entry.tags[1..].iter().map(|t| t.to_string()).collect();
                Some(rest.join("\n"))
            } else {
                None
            });
            data.push(&entry.data);
            expected.push(expected_arg(entry.expected_version)?);
            ids.push(entry.append_id.as_deref());
        }
    }
    let ts = i64_of(shared.clock.now_ms(), "timestamp")?;
    let deadline = crate::clock::monotonic_now() + shared.options.op_timeout();
    // A group staged through append_group learns its outcome only from the
    // round's notification, so only while the tailer hears them.
    let told =
        shared.installed.payloads && shared.told_heard.load(std::sync::atomic::Ordering::Acquire);
    let (rows, seen, guard) = loop {
        // Subscribed before the call, so a round committing between the
        // answer and the wait still wakes it.
        let mut rounds = shared.rounds.subscribe();
        // Before the call: a round heard while it stages the group counts,
        // and its told outcome is kept until the group waits.
        let guard = shared.collector.call_started();
        let seen = shared.collector.heard_now();
        let rows = shared
            .connections
            .query(
                Op::Write,
                "append",
                if told {
                    &shared.sql.append_group
                } else {
                    &shared.sql.append
                },
                &[
                    &primary, &secondary, &data, &expected, &ids, &batch_len, &ts,
                ],
            )
            .await?;
        if !matches!(rows.as_slice(), [row] if row.get::<_, i16>(0) == STATUS_ID_PENDING) {
            break (rows, seen, guard);
        }
        // An append id of the group waits staged (an earlier try of this
        // append): nothing was staged; ask again once a round has run.
        if crate::clock::monotonic_now() >= deadline {
            return Err(Error::new(
                ErrorKind::Indeterminate,
                "append: an earlier try of this append id is still waiting for its number",
            ));
        }
        let wait = PENDING_RECHECK.min(deadline - crate::clock::monotonic_now());
        let _ = tokio::time::timeout(wait, rounds.changed()).await;
    };
    let outcomes = match staged_id(&rows) {
        Some(id) if shared.installed.bulk_outcomes => {
            let shape = told.then(|| Shape {
                primary: primary.clone(),
                ts,
            });
            let waiting = shared.collector.wait_for(id, seen, shape);
            drop(guard);
            collected(shared, waiting)
                .await
                .map_err(|e| staged_and_unknown(&e))?
        }
        Some(id) => outcome_of(shared, id)
            .await
            .map_err(|e| staged_and_unknown(&e))?
            .iter()
            .map(|r| Outcome::from_row(r, 0))
            .collect(),
        None => rows.iter().map(|r| Outcome::from_row(r, 0)).collect(),
    };
    if outcomes.first().map(|o| o.status) == Some(STATUS_UNKNOWN) {
        return Err(Error::new(
            ErrorKind::Indeterminate,
            "the append group was staged, and its outcome is no longer known",
        ));
    }
    if outcomes.len() != n {
        return Err(Error::internal(format!(
            "the append function answered {} rows for {n} entries",
            outcomes.len()
        )));
    }
    Ok(outcomes)
}

/// The outcome of the staged group `id`, from the handle's collector
/// (`collect.rs`), bounded by the operation deadline.
async fn collected(
    shared: &Shared,
    waiting: tokio::sync::oneshot::Receiver<Result<Vec<Outcome>>>,
) -> Result<Vec<Outcome>> {
    match tokio::time::timeout(shared.options.op_timeout(), waiting).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(_)) => Err(Error::closed(
            "the PostgreSQL log handle closed while a staged group waited",
        )),
        Err(_) => Err(errors::timed_out(
            Op::Write,
            "append: wait for the round numbering a staged group",
            shared.options.op_timeout(),
        )),
    }
}

/// The append function's argument for [`Expected::StreamExists`].
const STREAM_EXISTS: i64 = -1;

/// The outcome rows of the staged group `id` on a log whose functions
/// predate `outcomes_of`: asks `outcome_of`, and while
/// a round of another process runs, waits for the next notification of a
/// committed round (or [`PENDING_RECHECK`]) and asks again — each ask
/// either collects the outcome, or runs a round itself when none runs.
/// Bounded by the operation deadline.
async fn outcome_of(shared: &Shared, id: i64) -> Result<Vec<tokio_postgres::Row>> {
    let deadline = crate::clock::monotonic_now() + shared.options.op_timeout();
    loop {
        // Subscribed before asking, so a round committing between the
        // answer and the wait still wakes it.
        let mut rounds = shared.rounds.subscribe();
        let rows = shared
            .connections
            .query(
                Op::Write,
                "append: the outcome of a staged group",
                &shared.sql.outcome_of,
                &[&id],
            )
            .await?;
        if !matches!(rows.as_slice(), [row] if row.get::<_, i16>(0) == STATUS_PENDING) {
            return Ok(rows);
        }
        if crate::clock::monotonic_now() >= deadline {
            return Err(errors::timed_out(
                Op::Write,
                "append: wait for the round numbering a staged group",
                shared.options.op_timeout(),
            ));
        }
        let wait = PENDING_RECHECK.min(deadline - crate::clock::monotonic_now());
        let _ = tokio::time::timeout(wait, rounds.changed()).await;
    }
}

fn staged_id(rows: &[tokio_postgres::Row]) -> Option<i64> {
    match rows {
        [row] if row.get::<_, i16>(0) == STATUS_STAGED => row.get(1),
        _ => None,
    }
}

/// Whatever failed after a group was staged (committed), the group may
/// still be numbered by whoever numbers next: the outcome is unknown.
fn staged_and_unknown(e: &Error) -> Error {
    if e.kind() == ErrorKind::Indeterminate {
        return e.clone();
    }
    Error::new(
        ErrorKind::Indeterminate,
        format!("the append group was staged, then waiting for its number failed: {e}"),
    )
}

/// The entries of `batch` this transaction wrote (not those whose append
/// id was already in the log), as readers will see them.
fn written(batch: &[NewEntry], outcomes: &[Outcome]) -> Vec<LogEntry> {
    batch
        .iter()
        .zip(outcomes)
        .filter(|(_, o)| o.status == 0)
        .filter_map(|(entry, o)| {
            Some(LogEntry {
                seqnum: u64::try_from(o.seqnum?).ok()?,
                stream_version: u64::try_from(o.version?).ok()?,
                tags: entry.tags.clone(),
                data: entry.data.clone(),
                timestamp_ms: u64::try_from(o.ts?).ok()?,
                append_id: entry.append_id.clone(),
            })
        })
        .collect()
}

/// The answer to one append call from its entries' outcomes.
fn resolve(batch: &[NewEntry], outcomes: Vec<Outcome>) -> Result<Vec<crate::model::AppendResult>> {
    if let Some((entry, o)) = batch.iter().zip(&outcomes).find(|(_, o)| o.status == 2) {
        let next = u64_of(o.next.unwrap_or_default(), "next version")?;
        // The condition is the entry's own; the function only says it failed.
        let expected = match entry.expected_version {
            Some(e) => e,
            None => Expected::Exact(u64_of(o.version.unwrap_or_default(), "expected version")?),
        };
        return expected
            .check(&entry.tags[0], next)
            .and(Err(Error::internal(
                "the append function reported a condition that holds as failed",
            )));
    }
    batch
        .iter()
        .zip(outcomes)
        .map(|(entry, o)| {
            let missing = || Error::internal("the append function left out a result");
            let primary_tag = match (o.status, o.tag) {
                (1, Some(tag)) => tag.parse().map_err(|e: Error| {
                    Error::new(ErrorKind::Corrupt, format!("stored tag {tag:?}: {e}"))
                })?,
                (0 | 1, _) => entry.tags[0].clone(),
                (s, _) => {
                    return Err(Error::internal(format!(
                        "the append function answered status {s} for a batch without conflict"
                    )));
                }
            };
            Ok(AppendResult {
                seqnum: u64_of(o.seqnum.ok_or_else(missing)?, "seqnum")?,
                stream_version: u64_of(o.version.ok_or_else(missing)?, "version")?,
                primary_tag,
                timestamp_ms: u64_of(o.ts.ok_or_else(missing)?, "timestamp")?,
            })
        })
        .collect()
}
