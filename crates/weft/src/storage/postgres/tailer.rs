//! The tailer: reads what every process committed, in seqnum order, and
//! publishes it on the handle's commit feed.
//!
//! It holds one connection of its own that LISTENs on the log's channel;
//! every append transaction NOTIFYs it at commit. On a notification, on a
//! wake-up from this handle's own writer, or after `poll_interval` without
//! either (the fallback for a lost notification), it reads every entry from
//! its cursor on and publishes it. Because seqnums are assigned in commit
//! order under the head lock, what it reads is always a dense prefix: it
//! can never see N+1 before N, so it never skips an entry that committed
//! late. LISTEN is issued before the first read, so no commit falls
//! between the read and the subscription.
//!
//! A broken connection is replaced (with a bounded backoff); the cursor
//! stays, so the new connection resumes where the old one stopped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, Client, NoTls};

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
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shared.closing.notified() => return,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// One connection's life: LISTEN, then read on every wake-up. Returns
/// `Ok` when the handle closes, `Err` when the connection breaks.
async fn tail(shared: &Shared, cursor: &mut u64) -> Result<()> {
    let timeout = shared.options.op_timeout();
    let connect = shared.config.connect(NoTls);
    let (client, mut connection) = tokio::time::timeout(timeout, connect)
        .await
        .map_err(|_| errors::timed_out(Op::Read, "tailer: connect", timeout))?
        .map_err(|e| errors::classify(e, Op::Read, "tailer: connect"))?;
    let notified = Arc::new(Notify::new());
    let lost = Arc::new(AtomicBool::new(false));
    let driver = {
        let notified = Arc::clone(&notified);
        let lost = Arc::clone(&lost);
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(_)) => notified.notify_one(),
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            lost.store(true, Ordering::Release);
            notified.notify_one();
        })
    };
    let _abort = AbortOnDrop(driver);
    let listen = format!("LISTEN \"{}\"", super::schema::channel(&shared.schema));
    tokio::time::timeout(timeout, client.batch_execute(&listen))
        .await
        .map_err(|_| errors::timed_out(Op::Read, "tailer: listen", timeout))?
        .map_err(|e| errors::classify(e, Op::Read, "tailer: listen"))?;
    loop {
        if shared.is_closed() {
            return Ok(());
        }
        catch_up(shared, &client, cursor).await?;
        if lost.load(Ordering::Acquire) {
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
        tokio::select! {
            _ = notified.notified() => {}
            _ = shared.wake_tailer.notified() => {}
            _ = tokio::time::sleep(shared.options.poll_interval()) => {}
            _ = closing => return Ok(()),
        }
    }
}

/// Reads and publishes everything from `cursor` to the end of the log.
async fn catch_up(shared: &Shared, client: &Client, cursor: &mut u64) -> Result<()> {
    let timeout = shared.options.op_timeout();
    let statement = tokio::time::timeout(timeout, client.prepare(&shared.sql.read_all))
        .await
        .map_err(|_| errors::timed_out(Op::Read, "tailer: prepare", timeout))?
        .map_err(|e| errors::classify(e, Op::Read, "tailer: prepare"))?;
    loop {
        let from = i64_of(*cursor, "cursor")?;
        let rows = tokio::time::timeout(timeout, client.query(&statement, &[&from, &CHUNK]))
            .await
            .map_err(|_| errors::timed_out(Op::Read, "tailer: read", timeout))?
            .map_err(|e| errors::classify(e, Op::Read, "tailer: read"))?;
        let Some(head) = rows.first() else {
            return Ok(());
        };
        let first = u64_of(head.get(0), "first seqnum")?;
        let next = u64_of(head.get(1), "next seqnum")?;
        shared.saw_first(first);
        // Entries below the trim point are gone: nobody can read them, so
        // there is nothing to announce for them.
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
            for e in &batch {
                shared.saw_version(e.primary_tag(), e.stream_version);
            }
            shared.publish(batch);
        }
        shared.saw_next(next);
        if !full {
            return Ok(());
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
