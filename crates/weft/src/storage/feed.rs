//! The commit feed: how a backend tells subscribers that entries committed.
//!
//! A bounded broadcast of committed batches plus a watch of the next seqnum.
//! A subscriber that falls more than [`FEED_CAPACITY`] batches behind gets a
//! `Lagged` signal from the broadcast and re-reads from storage; appends
//! never wait for subscribers.

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
    /// the same lock that made the batch visible).
    pub fn publish(&self, batch: CommittedBatch) {
        let Some(last) = batch.last().map(|e| e.seqnum) else {
            return;
        };
        if let Some(tx) = self.tx.lock().expect("feed lock").as_ref() {
            // An error only means nobody is listening.
            let _ = tx.send(batch);
        }
        self.tip.send_replace(last + 1);
    }

    /// Receives batches committed from now on. `None` once the feed closed.
    pub fn subscribe(&self) -> Option<broadcast::Receiver<CommittedBatch>> {
        self.tx
            .lock()
            .expect("feed lock")
            .as_ref()
            .map(|tx| tx.subscribe())
    }

    /// Watches the next seqnum.
    pub fn watch_tip(&self) -> watch::Receiver<u64> {
        self.tip.subscribe()
    }

    /// Ends every subscription: receivers see the channel closed.
    pub fn close(&self) {
        self.tx.lock().expect("feed lock").take();
    }
}
