//! The `postgres` backend: one log that any number of processes on any
//! hosts append to, with PostgreSQL assigning the numbers.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use weft::storage::postgres::PgStorage;
//! use weft::{AppendRequest, Log, LogTag};
//!
//! let log = Log::new(PgStorage::open("postgres://app@db.internal/shop?log=orders".parse()?).await?);
//! let orders = LogTag::new("orders")?;
//! log.append_if(AppendRequest::new(orders.clone(), "placed"), 0).await?;
//! # Ok(()) }
//! ```
//!
//! ## How the numbers stay dense and in commit order
//!
//! Numbers are handed out by *numbering rounds*: one transaction at a time
//! (it holds the log's numbering lock, a transaction-scoped advisory lock)
//! locks the `head` row, checks conditions and append ids, assigns seqnums
//! and versions, writes the entries, moves the counters and commits. So
//! seqnums are assigned in the order rounds commit, and an entry with
//! seqnum N+1 is never visible before N — the gap that event stores
//! numbering from a sequence before commit are known for cannot happen.
//! Conditional appends and append ids are checked inside the round.
//!
//! What a round numbers is everybody's: an append group (what one handle's
//! appenders queued meanwhile, see `writer.rs`) first tries the lock
//! without waiting. Its taker runs a round over the oldest groups other
//! processes *staged* so far (bounded in count and bytes, so a backlog
//! drains a step at a time and no round outgrows the statement timeout)
//! plus its own. Everyone else stages the group
//! (one row in `staged`, committed at once: those commits need no lock, so
//! PostgreSQL's group commit shares their WAL flushes across connections)
//! and learns its outcome when the round that numbers it commits (its
//! NOTIFY says which staged groups it settled and which is the oldest
//! left; the handle's collector fetches what was not told in one call),
//! or runs the next round itself when its group is the one named. A round costs one commit whatever it carries, so the
//! log's throughput grows with the number of writers instead of stopping
//! at one transaction per flush. The whole exchange is one call of a
//! server-side function per step (`schema.rs`), so no lock is ever held
//! across a client round trip. The layout is drawn in `docs/FORMATS.md`.
//!
//! Since layout 2 a staged group's payloads are written once, by the
//! appender's own call (`append_group`), into `payloads`; the round writes
//! each entry's numbers with a reference to its payload row and never
//! copies it, and tells the appenders of the groups it wrote whole their
//! outcome on the told channel (`collect.rs`), so the staging call is the
//! only statement on the appender's connection.
//!
//! Failure cases of the two steps (`docs/FAILURE_SEMANTICS.md` has the
//! table): a group staged by a process that then dies is numbered by the
//! next round, or by the *sweep* every handle's tailer runs at each poll
//! (so within about one poll interval while any handle is open); a group
//! whose appender gave up waiting (deadline, lost connection) lands all the
//! same — its append was `Indeterminate`, like any lost reply, and a retry
//! with the same append id lands once. A round that fails rolls back: the
//! groups stay staged for the next one.
//!
//! ## Subscriptions across processes
//!
//! A handle's writer announces its own commits on the handle's
//! [`CommitFeed`]; a tailer task per handle (`tailer.rs`) LISTENs on the
//! log's channel and reads what other processes committed, in seqnum
//! order, while anybody subscribes (otherwise it only moves the announced
//! tip); polling covers lost notifications.
//!
//! ## Failures
//!
//! Every statement runs under a deadline, and the server enforces a
//! shorter `statement_timeout`. SQLSTATE codes map to error kinds in
//! `errors.rs`; a write whose answer was lost (connection closed, deadline
//! passed after sending) is `Indeterminate`. The pool replaces broken
//! connections. `docs/FAILURE_SEMANTICS.md` has the table.

mod client;
mod collect;
mod errors;
mod inspect;
mod kv;
mod options;
mod outcome;
mod rows;
mod schema;
mod sql;
mod tailer;
mod tls;
mod writer;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::kit;
use super::{Capabilities, CommitFeed, Freshness, NewEntry, Storage, StreamInfo, Tip};
use crate::clock::{self, Clock};
use crate::error::{Error, Result};
use crate::kv::KvStore;
use crate::model::{AppendResult, LogEntry, LogTag};

use client::Connections;
use errors::Op;
use rows::{entry_at, i64_of, u64_of};
use sql::Statements;

pub use inspect::PgSummary;
pub use kv::PgKv;
// Where a log is lives with the other locations, in `connect`.
pub use crate::connect::{MAX_LOG_NAME_BYTES, PgLocation, PgSslMode, validate_log_name};
pub use options::PgOptions;

/// What the handle's tasks share.
pub(crate) struct Shared {
    schema: String,
    config: tokio_postgres::Config,
    /// How every connection of the handle speaks TLS.
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    connections: Connections,
    sql: Statements,
    options: PgOptions,
    clock: Arc<dyn Clock>,
    feed: CommitFeed,
    closed: AtomicBool,
    closing: Notify,
    /// Counts the log's notifications (each a committed numbering round)
    /// the tailer heard: appenders whose groups are staged wait on it
    /// (logs whose functions predate `outcomes_of`).
    rounds: Arc<watch::Sender<u64>>,
    /// This handle's staged groups waiting for their outcomes.
    collector: collect::Collector,
    /// What the log's functions offer.
    installed: schema::Installed,
    /// The tailer's connection LISTENs on the told channel now: only then
    /// may a group be staged through `append_group`, whose outcome comes
    /// only as a notification. (Otherwise groups are staged through
    /// `append`, whose outcomes wait in `outcomes` to be collected.)
    told_heard: AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgShared")
            .field("schema", &self.schema)
            .finish()
    }
}

impl Shared {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            return Err(Error::closed("the PostgreSQL log handle is closed"));
        }
        Ok(())
    }

    fn publish(&self, batch: Vec<LogEntry>) {
        self.feed.publish(batch.into());
    }
}

/// A log in a PostgreSQL database, shared by every process that opens it.
///
/// Open it with [`PgStorage::open`]; wrap it in a [`Log`](crate::Log).
/// Any number of handles, in any processes, may be open on one log.
pub struct PgStorage {
    shared: Arc<Shared>,
    location: PgLocation,
    queue: Mutex<Option<mpsc::UnboundedSender<writer::Pending>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    kv: Arc<PgKv>,
    retention: crate::retention::RetentionSlot,
}

impl std::fmt::Debug for PgStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStorage")
            .field("location", &self.location)
            .finish()
    }
}

impl PgStorage {
    /// Opens the log at `location`, creating its schema when absent, with
    /// default options.
    ///
    /// Errors: `Unavailable` when the server cannot be reached;
    /// `PermissionDenied` for refused credentials or a role that may not
    /// create the schema; `NotFound` for a missing database; `Corrupt`
    /// for a schema of another layout version.
    pub async fn open(location: PgLocation) -> Result<PgStorage> {
        PgStorage::open_with(location, PgOptions::default()).await
    }

    /// Opens the log at `location` with `options`.
    ///
    /// Errors: as [`PgStorage::open`]; `InvalidInput` for bad options.
    pub async fn open_with(location: PgLocation, options: PgOptions) -> Result<PgStorage> {
        PgStorage::open_with_clock(location, options, clock::system()).await
    }

    /// Opens the log at `location`, timestamping entries from `clock`.
    ///
    /// Errors: as [`PgStorage::open_with`].
    pub async fn open_with_clock(
        location: PgLocation,
        options: PgOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<PgStorage> {
        options.validate()?;
        let schema = location.log().to_owned();
        let config = client::connection_config(&location, &options);
        let tls = tls::connector(&location)?;
        let connections = Connections::new(config.clone(), tls.clone(), &options)?;
        let installed;
        {
            let mut conn = connections.get("open").await?;
            let client: &mut tokio_postgres::Client = &mut conn;
            installed = tokio::time::timeout(
                options.op_timeout(),
                schema::install(client, &schema, options.create_if_missing),
            )
            .await
            .map_err(|_| {
                errors::timed_out(Op::Read, "open: install the schema", options.op_timeout())
            })??;
        }
        let sql = Statements::new(&schema);
        let head = connections
            .query(Op::Read, "open: read the head", &sql.tip, &[])
            .await?;
        let row = head
            .first()
            .ok_or_else(|| Error::corrupt(format!("the log {schema:?} has no head row")))?;
        let next = u64_of(row.get(1), "next seqnum")?;
        let shared = Arc::new(Shared {
            schema,
            config,
            tls,
            connections,
            sql,
            options,
            clock,
            feed: CommitFeed::new(next),
            closed: AtomicBool::new(false),
            closing: Notify::new(),
            rounds: Arc::new(watch::Sender::new(0)),
            collector: collect::Collector::new(),
            installed,
            told_heard: AtomicBool::new(false),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        // Joined in this order at close: the writer's groups in flight may
        // wait on the collector, which ends after the writer. (The tailer
        // is at TAILER_TASK.)
        let tasks = vec![
            tokio::spawn(writer::run(Arc::clone(&shared), rx)),
            tokio::spawn(tailer::run(Arc::clone(&shared), next)),
            tokio::spawn(collect::run(Arc::clone(&shared))),
        ];
        Ok(PgStorage {
            kv: Arc::new(PgKv::new(Arc::clone(&shared))),
            retention: crate::retention::RetentionSlot::new(shared.clock.clone()),
            shared,
            location,
            queue: Mutex::new(Some(tx)),
            tasks: Mutex::new(tasks),
        })
    }

    /// Where the log is.
    pub fn location(&self) -> &PgLocation {
        &self.location
    }

    /// The log's live range as the database has it now (one round trip).
    async fn tip_now(&self) -> Result<Tip> {
        self.shared.check_open()?;
        let rows = self
            .shared
            .connections
            .query(Op::Read, "tip", &self.shared.sql.tip, &[])
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| Error::corrupt("the log has no head row"))?;
        Ok(Tip {
            first: u64_of(row.get(0), "first seqnum")?,
            next: u64_of(row.get(1), "next seqnum")?,
        })
    }

    /// The latest version of `tag`'s stream as the database has it now.
    async fn latest_version_now(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.shared.check_open()?;
        let tag_text = tag.to_string();
        let rows = self
            .shared
            .connections
            .query(
                Op::Read,
                "latest version",
                &self.shared.sql.next_version,
                &[&tag_text],
            )
            .await?;
        match rows.first() {
            Some(r) => Ok(u64_of(r.get(0), "next version")?.checked_sub(1)),
            None => Ok(None),
        }
    }

    async fn append_batch(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        kit::check_append(&batch, self.append_limits())?;
        self.shared.check_open()?;
        let (reply, rx) = oneshot::channel();
        let sent = self
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|q| q.send(writer::Pending { batch, reply }).is_ok())
            .unwrap_or(false);
        if !sent {
            return Err(Error::closed("the PostgreSQL log handle is closed"));
        }
        rx.await
            .map_err(|_| Error::closed("the PostgreSQL log handle closed during the append"))?
    }

    async fn read_rows(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>> {
        self.shared.check_open()?;
        self.shared
            .connections
            .query(Op::Read, what, sql, params)
            .await
    }
}

/// Where the tailer is among a handle's tasks.
const TAILER_TASK: usize = 1;

/// What close waits beyond the operation deadline for the groups in
/// flight to be answered.
const CLOSE_MARGIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Trimmed entries deleted per statement.
const TRIM_CHUNK: i64 = 10_000;

fn limit_of(max: usize) -> i64 {
    i64::try_from(max).unwrap_or(i64::MAX)
}

#[async_trait]
impl Storage for PgStorage {
    /// Entries whose append id is already in the log are not written
    /// again; their original results are returned.
    async fn append(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        self.append_batch(batch).await
    }

    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        let from_i = i64_of(from, "seqnum")?;
        let limit = limit_of(max);
        let (rows, at) = match tag {
            None => (
                self.read_rows("read", &self.shared.sql.read_all, &[&from_i, &limit])
                    .await?,
                2,
            ),
            Some(tag) => {
                let tag = tag.to_string();
                (
                    self.read_rows(
                        "read tag",
                        &self.shared.sql.read_tag,
                        &[&tag, &from_i, &limit],
                    )
                    .await?,
                    1,
                )
            }
        };
        let Some(head) = rows.first() else {
            return Err(Error::corrupt("the log has no head row"));
        };
        let first = u64_of(head.get(0), "first seqnum")?;
        if from < first {
            return Err(Error::trimmed(from, first));
        }
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            if let Some(e) = entry_at(row, at)? {
                out.push(e);
            }
        }
        Ok(out)
    }

    async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        let tag_text = tag.to_string();
        let from = i64_of(from_version, "version")?;
        let limit = limit_of(max);
        let rows = self
            .read_rows(
                "read versions",
                &self.shared.sql.read_versions,
                &[&tag_text, &from, &limit],
            )
            .await?;
        let Some(head) = rows.first() else {
            return Err(Error::corrupt("the log has no head row"));
        };
        let first_live: Option<i64> = head.get(0);
        let next: Option<i64> = head.get(1);
        let trimmed = match (first_live, next) {
            (Some(first), _) => from < first,
            (None, Some(next)) => from < next,
            (None, None) => false,
        };
        if trimmed {
            return Err(Error::new(
                crate::ErrorKind::Trimmed,
                format!("version {from_version} of {tag} was trimmed"),
            ));
        }
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            if let Some(e) = entry_at(row, 2)? {
                out.push(e);
            }
        }
        Ok(out)
    }

    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        let before_i = i64_of(before.min(i64::MAX as u64), "seqnum")?;
        let rows = match tag {
            None => {
                self.read_rows("read previous", &self.shared.sql.prev_all, &[&before_i])
                    .await?
            }
            Some(tag) => {
                let tag = tag.to_string();
                self.read_rows(
                    "read previous",
                    &self.shared.sql.prev_tag,
                    &[&tag, &before_i],
                )
                .await?
            }
        };
        match rows.first() {
            Some(row) => entry_at(row, 1),
            None => Ok(None),
        }
    }

    /// One round trip: the head row as the database has it now.
    async fn tip(&self) -> Result<Tip> {
        self.tip_now().await
    }

    /// One round trip: the stream's row as the database has it now.
    async fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.latest_version_now(tag).await
    }

    /// One statement: the streams table and the live secondary tags, in
    /// one snapshot. The database sorts every tag for the page (its top-N
    /// sort keeps `max` rows), and finding the secondary-only tags reads
    /// the live `entry_tags` rows: a page costs the database time in the
    /// log's tags, the handle memory in `max`.
    async fn streams(&self, from: Option<&LogTag>, max: usize) -> Result<Vec<StreamInfo>> {
        let from = from.map(ToString::to_string);
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
        let rows = self
            .read_rows("list streams", &self.shared.sql.streams, &[&from, &limit])
            .await?;
        rows.iter()
            .map(|row| {
                let text: String = row.get(0);
                let tag = text
                    .parse::<LogTag>()
                    .map_err(|e| Error::corrupt(format!("the log has a bad tag {text:?}: {e}")))?;
                Ok(StreamInfo {
                    tag,
                    next_version: u64_of(row.get(1), "next version")?,
                    entries: u64_of(row.get(2), "entry count")?,
                })
            })
            .collect()
    }

    async fn erase(&self, seqnums: &[u64]) -> Result<u64> {
        let tip = self.tip_now().await?;
        crate::storage::kit::check_erasable(seqnums, tip.next)?;
        let seqnums_i = seqnums
            .iter()
            .map(|&s| i64_of(s, "seqnum"))
            .collect::<Result<Vec<i64>>>()?;
        let sql = if self.shared.installed.payloads {
            &self.shared.sql.erase
        } else {
            &self.shared.sql.erase_v1
        };
        let rows = self
            .shared
            .connections
            .query(Op::Write, "erase", sql, &[&seqnums_i])
            .await?;
        let count: i64 = rows
            .first()
            .ok_or_else(|| Error::internal("the erase returned no row"))?
            .get(0);
        u64_of(count, "erased count")
    }

    async fn trim(&self, through: u64) -> Result<()> {
        self.shared.check_open()?;
        let through_i = i64_of(through, "seqnum")?;
        let rows = self
            .shared
            .connections
            .query(Op::Write, "trim", &self.shared.sql.trim, &[&through_i])
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| Error::corrupt("the log has no head row"))?;
        let first = u64_of(row.get(0), "first seqnum")?;
        let next = u64_of(row.get(1), "next seqnum")?;
        if through >= next {
            return Err(Error::invalid_input(format!(
                "cannot trim through {through}: the log ends before it (next seqnum {next})"
            )));
        }
        // The trim point moved: reads no longer see the rows below it. Drop
        // them now, outside the head lock, a bounded chunk per statement
        // (one statement over millions of rows could outlast the statement
        // timeout at every try, and never progress); a failure here leaves
        // the rest for the next trim.
        let first_i = i64_of(first, "seqnum")?;
        loop {
            match self
                .shared
                .connections
                .query(
                    Op::Write,
                    "delete trimmed entries",
                    if self.shared.installed.payloads {
                        &self.shared.sql.delete_trimmed
                    } else {
                        &self.shared.sql.delete_trimmed_v1
                    },
                    &[&first_i, &TRIM_CHUNK],
                )
                .await
            {
                // A chunk short of full was the last one.
                Ok(rows) => {
                    let deleted: i64 = rows.first().map_or(0, |r| r.get(0));
                    if deleted < TRIM_CHUNK {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "trimmed entries stay until the next trim");
                    break;
                }
            }
        }
        Ok(())
    }

    fn feed(&self) -> &CommitFeed {
        &self.shared.feed
    }

    fn kv(&self) -> Result<Arc<dyn KvStore>> {
        self.shared.check_open()?;
        Ok(self.kv.clone())
    }

    fn supports_append_ids(&self) -> bool {
        true
    }

    fn retention_slot(&self) -> Option<&crate::retention::RetentionSlot> {
        Some(&self.retention)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_only: false,
            durable: true,
            max_entry_bytes: self.shared.options.max_entry_bytes,
            freshness: Freshness::SharedDatabase,
        }
    }

    async fn close(&self) -> Result<()> {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // Appends still queued are answered `Closed` (the writer drains
        // its queue); groups already sent finish first, each within its
        // own deadline. The tailer only reads and sweeps (a sweep cut off
        // rolls back, or commits a round nobody waits for), so it is
        // stopped at once, whatever its query waits for. Past the
        // deadline the rest are stopped too: close is bounded.
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.shared.closing.notify_waiters();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        let deadline = clock::monotonic_now() + self.shared.options.op_timeout() + CLOSE_MARGIN;
        for (i, mut task) in tasks.into_iter().enumerate() {
            if i == TAILER_TASK {
                task.abort();
            }
            let left = deadline.saturating_duration_since(clock::monotonic_now());
            if tokio::time::timeout(left, &mut task).await.is_err() {
                tracing::warn!("a PostgreSQL task did not finish by the close deadline; stopped");
                task.abort();
            }
        }
        self.shared.connections.close();
        self.shared.feed.close();
        Ok(())
    }
}

impl Drop for PgStorage {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.closing.notify_waiters();
        for task in self
            .tasks
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
        self.shared.feed.close();
    }
}
