//! The stream table: every tag the served log has carried since the
//! server started reading it, with its next version and entry count, for
//! `GET /v1/streams` (the console's list).
//!
//! The storage seam has no "list tags" query, so the server builds the
//! table itself: one subscription from the log's first live entry, kept
//! for as long as the log is served. Counts are of live entries seen by
//! that subscription; a trim does not lower them. The table holds at most
//! [`MAX_STREAMS`] tags (later new tags are left out and `complete` says
//! so), so its memory is bounded whatever the log holds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use weft::{Log, Position};

/// The most tags the table keeps.
pub const MAX_STREAMS: usize = 100_000;

/// One stream's row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// The version the stream's next entry gets, as far as seen.
    pub next_version: u64,
    /// Entries carrying the tag.
    pub entries: u64,
}

#[derive(Default)]
struct Inner {
    rows: BTreeMap<String, Row>,
    complete: bool,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// The table, filled by a background subscription.
#[derive(Clone, Default)]
pub struct StreamTable {
    inner: Arc<Mutex<Inner>>,
}

impl StreamTable {
    /// Starts over on `log` (the server serves a new log).
    pub fn follow(&self, log: Log) {
        let mut inner = self.inner.lock().expect("stream table lock");
        if let Some(task) = inner.task.take() {
            task.abort();
        }
        inner.rows.clear();
        inner.complete = true;
        // Weak: a table nobody holds stops its task (see Drop).
        let table = Arc::downgrade(&self.inner);
        inner.task = Some(tokio::spawn(async move {
            let mut sub = log.subscribe_log(Position::Beginning);
            while let Some(Ok(entry)) = sub.next().await {
                let Some(table) = table.upgrade() else { break };
                let mut inner = table.lock().expect("stream table lock");
                for (i, tag) in entry.tags.iter().enumerate() {
                    let name = tag.to_string();
                    let full = inner.rows.len() >= MAX_STREAMS;
                    let row = match inner.rows.get_mut(&name) {
                        Some(row) => row,
                        None if full => {
                            inner.complete = false;
                            continue;
                        }
                        None => inner.rows.entry(name).or_default(),
                    };
                    row.entries += 1;
                    if i == 0 {
                        row.next_version = row.next_version.max(entry.stream_version + 1);
                    }
                }
            }
        }));
    }

    /// Up to `limit` rows with tags after `after`, and the tag to continue
    /// after when there are more.
    pub fn page(&self, after: Option<&str>, limit: usize) -> (Vec<(String, Row)>, Option<String>) {
        let inner = self.inner.lock().expect("stream table lock");
        let range = match after {
            Some(a) => inner
                .rows
                .range::<str, _>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded)),
            None => inner.rows.range::<str, _>(..),
        };
        let mut rows: Vec<(String, Row)> = range
            .take(limit.saturating_add(1))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(|(k, _)| k.clone())
        } else {
            None
        };
        (rows, next)
    }

    /// One tag's row, if the table has it.
    pub fn get(&self, tag: &str) -> Option<Row> {
        self.inner
            .lock()
            .expect("stream table lock")
            .rows
            .get(tag)
            .copied()
    }

    /// False when tags were left out (the table is full).
    pub fn complete(&self) -> bool {
        self.inner.lock().expect("stream table lock").complete
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
