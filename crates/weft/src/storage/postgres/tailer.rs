//! The tailer: learns what every process committed, in seqnum order, and
//! announces it on the handle's commit feed.
//!
//! It holds one connection of its own that LISTENs on the log's channel;
//! every numbering transaction NOTIFYs it at commit with the log's next
//! seqnum. Each notification also wakes this handle's appenders whose
//! groups wait staged (`writer.rs`). On a notification, or after `poll_interval` without one (the
//! fallback for a lost notification: it then reads the head row), it
//! catches up:
//!
//! * while somebody receives the feed, it reads every entry from its
//!   cursor on and publishes it. Because seqnums are assigned in commit
//!   order, what it reads is always a dense prefix: it can never see N+1
//!   before N, so it never skips an entry that committed late;
//! * while nobody does, it reads nothing: it only moves the announced tip
//!   to the notified next seqnum ([`CommitFeed::advance_unwatched`], one
//!   step with `subscribe`, so a subscriber made meanwhile still gets
//!   everything after its start from the feed or, across the jump, from
//!   the database). An idle handle costs one notification per commit.
//!
//! This handle's own commits are announced by its writer, so the cursor
//! starts each round at the announced tip. LISTEN is issued before the
//! first read, so no commit falls between the read and the subscription.
//!
//! A broken connection is replaced (with a bounded backoff); the cursor
//! stays, so the new connection resumes where the old one stopped.
//!
//! [`CommitFeed::advance_unwatched`]: crate::storage::CommitFeed::advance_unwatched

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, Client, Statement};

use super::Shared;
use super::errors::{self, Op};
use super::rows::{entry_at, i64_of, u64_of};
use crate::error::Result;
use crate::model::LogEntry;

/// Entries per read.
const CHUNK: i64 = 1024;

/// The longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Tails the log from `cursor` until the handle closes.
pub(super) async fn run(shared: Arc<Shared>, mut cursor: u64) {
    let mut backoff = Duration::from_millis(50);
    while !shared.is_closed() {
        match tail(&shared, &mut cursor).await {
            Ok(()) => return,
            Err(e) => {
                tracing::debug!(error = %e, "the PostgreSQL tailer lost its connection; reconnecting");
                tokio::select! {
                    _ = crate::clock::sleep(backoff) => {}
                    _ = shared.closing.notified() => return,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// One connection's life: LISTEN, then catch up on every wake-up. Returns
/// `Ok` when the handle closes, `Err` when the connection breaks.
async fn tail(shared: &Arc<Shared>, cursor: &mut u64) -> Result<()> {
    // Until this connection LISTENs, a told outcome would be lost.
    shared.told_heard.store(false, Ordering::Release);
    let result = tail_listening(shared, cursor).await;
    shared.told_heard.store(false, Ordering::Release);
    result
}

async fn tail_listening(shared: &Arc<Shared>, cursor: &mut u64) -> Result<()> {
    let timeout = shared.options.op_timeout();
    let connect = shared.config.connect(shared.tls.clone());
    let (client, mut connection) = tokio::time::timeout(timeout, connect)
        .await
        .map_err(|_| errors::timed_out(Op::Read, "tailer: connect", timeout))?
        .map_err(|e| errors::classify(e, Op::Read, "tailer: connect"))?;
    let heard = Arc::new(Heard::default());
    let driver = {
        let heard = Arc::clone(&heard);
        let shared = Arc::clone(shared);
        let settled = super::schema::settled_channel(&shared.schema);
        let told = super::schema::told_channel(&shared.schema);
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(n)) if n.channel() == told => {
                        // Outcomes of this build's staged groups.
                        shared.collector.told(n.payload());
                    }
                    Ok(AsyncMessage::Notification(n)) if n.channel() == settled => {
                        // The collector asks for the groups it settled.
                        shared.collector.round_heard(n.payload());
                    }
                    Ok(AsyncMessage::Notification(n)) => {
                        heard.notified(n.payload());
                        // Staged appenders of the older path ask now.
                        shared.rounds.send_modify(|r| *r = r.wrapping_add(1));
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            shared.told_heard.store(false, Ordering::Release);
            shared.collector.told_lost();
            heard.lost.store(true, Ordering::Release);
            heard.wake.notify_one();
        })
    };
    let _abort = AbortOnDrop(driver);
    let listen = format!(
        "LISTEN \"{}\"; LISTEN \"{}\"; LISTEN \"{}\"",
        super::schema::channel(&shared.schema),
        super::schema::settled_channel(&shared.schema),
        super::schema::told_channel(&shared.schema)
    );
    tokio::time::timeout(timeout, client.batch_execute(&listen))
        .await
        .map_err(|_| errors::timed_out(Op::Read, "tailer: listen", timeout))?
        .map_err(|e| errors::classify(e, Op::Read, "tailer: listen"))?;
    shared.told_heard.store(true, Ordering::Release);
    let reader = Reader::prepare(shared, &client).await?;
    // The first round reads the head: what committed before LISTEN.
    let mut polled = true;
    let mut last_sweep = crate::clock::monotonic_now();
    loop {
        if shared.is_closed() {
            return Ok(());
        }
        // This handle announces its own commits itself: nothing below the
        // announced tip needs reading.
        *cursor = (*cursor).max(*shared.feed.watch_tip().borrow());
        let heard_next = heard.next.load(Ordering::Acquire);
        // A busy log notifies all the time: sweep by the clock too.
        let sweep_due = polled || last_sweep.elapsed() >= shared.options.poll_interval();
        let idle = if sweep_due {
            last_sweep = crate::clock::monotonic_now();
            let (first, next) = reader.sweep(shared, &client).await?;
            *cursor = (*cursor).max(first);
            skip_unwatched(shared, cursor, next)
        } else {
            skip_unwatched(shared, cursor, heard_next)
        };
        if !idle {
            reader.catch_up(shared, &client, cursor).await?;
        }
        if heard.lost.load(Ordering::Acquire) {
            return Err(crate::Error::new(
                crate::ErrorKind::Unavailable,
                "the tailer's connection closed",
            ));
        }
        // Registered before the check, so a close between the two still
        // wakes this wait.
        let closing = shared.closing.notified();
        tokio::pin!(closing);
        closing.as_mut().enable();
        if shared.is_closed() {
            return Ok(());
        }
        polled = tokio::select! {
            _ = heard.wake.notified() => false,
            _ = crate::clock::sleep(shared.options.poll_interval()) => true,
            _ = closing => return Ok(()),
        };
    }
}

/// What the connection's driver heard: the highest next seqnum a NOTIFY
/// carried, and whether the connection is gone.
#[derive(Default)]
struct Heard {
    next: AtomicU64,
    lost: AtomicBool,
    wake: Notify,
}

impl Heard {
    fn notified(&self, payload: &str) {
        // The payload is the log's next seqnum after the notifying commit;
        // an unreadable one still wakes the tailer, which then reads.
        if let Ok(next) = payload.parse::<u64>() {
            self.next.fetch_max(next, Ordering::AcqRel);
        }
        self.wake.notify_one();
    }
}

/// With nobody subscribed, moves the cursor and the announced tip to `next`
/// without reading entries: true when that was allowed. (Every seqnum below
/// a committed `next` is committed: numbers are assigned in commit order.)
fn skip_unwatched(shared: &Shared, cursor: &mut u64, next: u64) -> bool {
    if !shared.feed.advance_unwatched(next.max(*cursor)) {
        return false;
    }
    *cursor = (*cursor).max(next);
    true
}

/// How long an outcome of a staged group waits for its appender before a
/// sweep drops it: past the longest operation timeout (one hour), so only
/// outcomes whose appender gave up or died go.
pub(super) const OUTCOME_WINDOW: Duration = Duration::from_secs(2 * 3600);

/// The dead rows in `staged` and `outcomes` above which a sweep vacuums
/// them. Every staged group leaves a dead row behind, and a round reads all
/// of `staged`, dead rows included; autovacuum visits a table at most once
/// per `autovacuum_naptime` (a minute by default), and meanwhile a busy
/// log's rounds slowed down several-fold (measured: 0.6 ms per round on a
/// vacuumed table, 3 ms on 2 MB of dead rows).
const VACUUM_ABOVE_DEAD_ROWS: i64 = 2000;

/// Vacuums the work tables (skipping them when another process already
/// does). Never truncates them: truncating takes an exclusive lock that
/// stalls rounds and staging, and the emptied pages are reused anyway.
/// Best effort: a role that does not own them gets a warning from the
/// server and nothing happens; a failure is only logged.
async fn vacuum(shared: &Shared, client: &Client) {
    let s = &shared.schema;
    let sql = format!(r#"VACUUM (SKIP_LOCKED, TRUNCATE false) "{s}".staged, "{s}".outcomes"#);
    match tokio::time::timeout(shared.options.op_timeout(), client.batch_execute(&sql)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "vacuuming the log's work tables failed"),
        Err(_) => tracing::debug!("vacuuming the log's work tables timed out"),
    }
}

/// The tailer's prepared statements.
struct Reader {
    read: Statement,
    head: Statement,
    sweep: Statement,
    /// False once the role turned out not to be allowed to sweep.
    may_sweep: AtomicBool,
}

impl Reader {
    async fn prepare(shared: &Shared, client: &Client) -> Result<Reader> {
        let timeout = shared.options.op_timeout();
        let prepare = async {
            Ok::<_, tokio_postgres::Error>(Reader {
                read: client.prepare(&shared.sql.read_all).await?,
                head: client.prepare(&shared.sql.tip).await?,
                sweep: client.prepare(&shared.sql.sweep).await?,
                may_sweep: AtomicBool::new(true),
            })
        };
        tokio::time::timeout(timeout, prepare)
            .await
            .map_err(|_| errors::timed_out(Op::Read, "tailer: prepare", timeout))?
            .map_err(|e| errors::classify(e, Op::Read, "tailer: prepare"))
    }

    /// Numbers groups left staged (their process died, or nobody appended
    /// since), drops outcomes nobody collected, vacuums the work tables
    /// when they have grown, and returns the log's first and next seqnum.
    /// A role that may not write only reads the head.
    async fn sweep(&self, shared: &Shared, client: &Client) -> Result<(u64, u64)> {
        if self.may_sweep.load(Ordering::Relaxed) {
            let keep = OUTCOME_WINDOW.as_millis() as i64;
            let timeout = shared.options.op_timeout();
            let swept = tokio::time::timeout(timeout, client.query_one(&self.sweep, &[&keep]))
                .await
                .map_err(|_| errors::timed_out(Op::Read, "tailer: sweep", timeout))?;
            match swept {
                Ok(row) => {
                    // (A log created by an older layout answers no count.)
                    let dead_rows: i64 = row.try_get(2).unwrap_or(0);
                    if dead_rows > VACUUM_ABOVE_DEAD_ROWS {
                        vacuum(shared, client).await;
                    }
                    return Ok((
                        u64_of(row.get(0), "first seqnum")?,
                        u64_of(row.get(1), "next seqnum")?,
                    ));
                }
                Err(e) if e.code().is_some() => {
                    let e = errors::classify(e, Op::Write, "tailer: sweep");
                    if e.kind() == crate::ErrorKind::PermissionDenied {
                        tracing::debug!(error = %e, "this role does not sweep the log");
                        self.may_sweep.store(false, Ordering::Relaxed);
                    } else {
                        return Err(e);
                    }
                }
                Err(e) => return Err(errors::classify(e, Op::Read, "tailer: sweep")),
            }
        }
        self.head(shared, client).await
    }

    /// The log's first and next seqnum now.
    async fn head(&self, shared: &Shared, client: &Client) -> Result<(u64, u64)> {
        let timeout = shared.options.op_timeout();
        let row = tokio::time::timeout(timeout, client.query_one(&self.head, &[]))
            .await
            .map_err(|_| errors::timed_out(Op::Read, "tailer: read the head", timeout))?
            .map_err(|e| errors::classify(e, Op::Read, "tailer: read the head"))?;
        Ok((
            u64_of(row.get(0), "first seqnum")?,
            u64_of(row.get(1), "next seqnum")?,
        ))
    }

    /// Reads and publishes everything from `cursor` to the end of the log.
    async fn catch_up(&self, shared: &Shared, client: &Client, cursor: &mut u64) -> Result<()> {
        let timeout = shared.options.op_timeout();
        loop {
            let from = i64_of(*cursor, "cursor")?;
            let rows = tokio::time::timeout(timeout, client.query(&self.read, &[&from, &CHUNK]))
                .await
                .map_err(|_| errors::timed_out(Op::Read, "tailer: read", timeout))?
                .map_err(|e| errors::classify(e, Op::Read, "tailer: read"))?;
            let Some(head) = rows.first() else {
                return Ok(());
            };
            let first = u64_of(head.get(0), "first seqnum")?;
            let next = u64_of(head.get(1), "next seqnum")?;
            // Entries below the trim point are gone: nobody can read them,
            // so there is nothing to announce for them.
            *cursor = (*cursor).max(first);
            let mut batch: Vec<LogEntry> = Vec::with_capacity(rows.len());
            for row in &rows {
                if let Some(entry) = entry_at(row, 2)? {
                    batch.push(entry);
                }
            }
            let full = batch.len() as i64 == CHUNK;
            if let Some(last) = batch.last() {
                *cursor = last.seqnum + 1;
                shared.publish(batch);
            }
            if !full {
                // The read saw the whole log up to `next` in one snapshot:
                // nothing below it is left to announce (entries trimmed
                // away under the cursor included).
                shared.feed.advance_to(next);
                *cursor = (*cursor).max(next);
                return Ok(());
            }
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
