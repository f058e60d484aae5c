//! The commit feed: how a backend tells subscribers that entries committed.
//!
//! A bounded broadcast of committed batches plus a watch of the next seqnum.
//! A subscriber that falls more than [`FEED_CAPACITY`] batches behind gets a
//! `Lagged` signal from the broadcast and re-reads from storage; appends
//! never wait for subscribers.
//!
//! Publishers announce batches in seqnum order. A gap is allowed (a
//! subscriber fills it from storage); entries below what was already
//! announced are dropped, so a tailer that reads back commits it may
//! already have announced (its own appends, an overlapping poll) can
//! publish whatever it reads.
//!
//! [`CommitFeed::watch_tip`] is the cheap, last-observed state of the log:
//! the seqnum after the last announced entry. It lags
//! [`Storage::tip`](crate::storage::Storage::tip) whenever commits are announced
//! after they become readable (a tailer behind its database).

use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, watch};

use crate::model::LogEntry;

/// How many committed batches the feed buffers for slow subscribers.
pub const FEED_CAPACITY: usize = 1024;

/// A batch of entries committed together, in seqnum order.
pub type CommittedBatch = Arc<[LogEntry]>;

/// Broadcasts committed batches in seqnum order.
#[derive(Debug)]
pub struct CommitFeed {
    tx: Mutex<Option<broadcast::Sender<CommittedBatch>>>,
    tip: watch::Sender<u64>,
}

impl CommitFeed {
    /// A feed whose log's next seqnum is `next_seqnum`.
    pub fn new(next_seqnum: u64) -> Self {
        let (tx, _) = broadcast::channel(FEED_CAPACITY);
        CommitFeed {
            tx: Mutex::new(Some(tx)),
            tip: watch::Sender::new(next_seqnum),
        }
    }

    /// Publishes a committed batch. Callers publish in seqnum order (under
    /// the same lock that made the batch visible, or from one tailer);
    /// entries below the tip already announced are dropped.
    pub fn publish(&self, batch: CommittedBatch) {
        let tip = *self.tip.borrow();
        let batch = match batch.first() {
            Some(first) if first.seqnum < tip => {
                let fresh: Vec<LogEntry> =
                    batch.iter().filter(|e| e.seqnum >= tip).cloned().collect();
                CommittedBatch::from(fresh)
            }
            _ => batch,
        };
        let Some(last) = batch.last().map(|e| e.seqnum) else {
            return;
        };
        if let Some(tx) = self.tx.lock().expect("feed lock").as_ref() {
            // An error only means nobody is listening.
            let _ = tx.send(batch);
        }
        self.tip.send_replace(last + 1);
    }

    /// Moves the announced tip forward to `next` without announcing
    /// entries: the log's numbering moved past entries no one will read (a
    /// replica restored a trimmed log's state).
    pub fn advance_to(&self, next: u64) {
        self.tip.send_if_modified(|tip| {
            let moved = next > *tip;
            *tip = (*tip).max(next);
            moved
        });
    }

    /// Moves the announced tip forward to `next` only if nobody receives
    /// the feed, as one step with [`subscribe`](CommitFeed::subscribe):
    /// a tailer can skip reading entries no subscriber waits for, and a
    /// subscriber made right after still starts at or past `next`. True
    /// when nobody was receiving.
    pub fn advance_unwatched(&self, next: u64) -> bool {
        let tx = self.tx.lock().expect("feed lock");
        if tx.as_ref().is_some_and(|tx| tx.receiver_count() > 0) {
            return false;
        }
        self.advance_to(next);
        true
    }

    /// Receives batches committed from now on. `None` once the feed closed.
    pub fn subscribe(&self) -> Option<broadcast::Receiver<CommittedBatch>> {
        self.tx
            .lock()
            .expect("feed lock")
            .as_ref()
            .map(|tx| tx.subscribe())
    }

    /// Watches the seqnum after the last announced entry.
    pub fn watch_tip(&self) -> watch::Receiver<u64> {
        self.tip.subscribe()
    }

    /// Ends every subscription: receivers see the channel closed.
    pub fn close(&self) {
        self.tx.lock().expect("feed lock").take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(seqnums: std::ops::Range<u64>) -> CommittedBatch {
        seqnums
            .map(|s| LogEntry {
                seqnum: s,
                stream_version: s,
                tags: vec!["t".parse().unwrap()],
                data: Default::default(),
                timestamp_ms: 0,
                append_id: None,
            })
            .collect::<Vec<_>>()
            .into()
    }

    #[test]
    fn entries_already_announced_are_dropped() {
        let feed = CommitFeed::new(0);
        let mut rx = feed.subscribe().unwrap();
        feed.publish(batch(0..3));
        feed.publish(batch(1..5));
        feed.publish(batch(2..4));
        feed.publish(batch(7..8));
        let got: Vec<Vec<u64>> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|b| b.iter().map(|e| e.seqnum).collect())
            .collect();
        assert_eq!(got, vec![vec![0, 1, 2], vec![3, 4], vec![7]]);
        assert_eq!(*feed.watch_tip().borrow(), 8);
    }

    #[test]
    fn the_tip_skips_ahead_only_while_nobody_receives() {
        let feed = CommitFeed::new(0);
        assert!(feed.advance_unwatched(5));
        assert_eq!(*feed.watch_tip().borrow(), 5);
        let rx = feed.subscribe().unwrap();
        assert!(!feed.advance_unwatched(9));
        assert_eq!(*feed.watch_tip().borrow(), 5);
        drop(rx);
        assert!(feed.advance_unwatched(9));
        assert_eq!(*feed.watch_tip().borrow(), 9);
    }
}
