//! The tailer: one server-sent-events subscription to the server's whole
//! log that announces every entry on the handle's commit feed, in seqnum
//! order, as a database backend's tailer does.
//!
//! It starts at the server's tip when the handle connects and, when the
//! stream breaks, resumes from the feed's announced tip, so it neither
//! skips nor repeats (the feed drops what it already announced; a
//! subscriber that finds a gap reads it from the server). An append waits
//! until the tailer announced it, bounded by `RemoteOptions::feed_wait`,
//! while the tailer is connected: a tail subscription made after an
//! append returns then starts past it, as on a local backend.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::Method;
use tokio::task::JoinHandle;
use weft::{ErrorDetail, LogEntry};
use weft_api::body::Entry;
use weft_api::fault::ErrorBody;

use crate::shared::Shared;

/// The running tailer of one handle.
pub(crate) struct Tailer {
    shared: Arc<Shared>,
    connected: Arc<AtomicBool>,
    task: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Tailer {
    /// Starts following the server's log from seqnum `from`.
    pub(crate) fn start(shared: Arc<Shared>, from: u64) -> Tailer {
        let connected = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(run(shared.clone(), connected.clone(), from));
        Tailer {
            shared,
            connected,
            task: std::sync::Mutex::new(Some(task)),
        }
    }

    /// Waits until the feed announced every seqnum below `next` (while the
    /// tailer is connected, and at most `feed_wait`).
    pub(crate) async fn wait_for(&self, next: u64) {
        if !self.connected.load(Ordering::Acquire) {
            return;
        }
        let mut tip = self.shared.feed.watch_tip();
        let wait = self.shared.api.options().feed_wait;
        let _ = tokio::time::timeout(wait, tip.wait_for(|t| *t >= next)).await;
    }

    /// Waits until the tailer's stream is open (at most `wait`).
    pub(crate) async fn connected(&self, wait: Duration) -> bool {
        let deadline = weft::clock::monotonic_now() + wait;
        while !self.connected.load(Ordering::Acquire) {
            if weft::clock::monotonic_now() >= deadline {
                return false;
            }
            weft::clock::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Stops the tailer.
    pub(crate) fn stop(&self) {
        if let Some(task) = self.task.lock().expect("tailer lock").take() {
            task.abort();
        }
        self.connected.store(false, Ordering::Release);
    }
}

async fn run(shared: Arc<Shared>, connected: Arc<AtomicBool>, mut from: u64) {
    let mut pause = Duration::from_millis(20);
    while !shared.is_closed() {
        let url = shared
            .api
            .url(&["v1", "subscribe"], &[("from", from.to_string())]);
        let response = shared
            .api
            .request(Method::GET, url)
            .header("accept", "text/event-stream")
            .send()
            .await;
        match response {
            Ok(r) if r.status().is_success() => {
                connected.store(true, Ordering::Release);
                pause = Duration::from_millis(20);
                follow(&shared, r, &mut from).await;
                connected.store(false, Ordering::Release);
            }
            Ok(r) => {
                let err = crate::http::error_of(r).await;
                tracing::debug!(error = %err, "the server refused the tailer's subscription");
            }
            Err(e) => tracing::debug!(error = %e, "the tailer could not reach the server"),
        }
        from = from.max(*shared.feed.watch_tip().borrow());
        weft::clock::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// Publishes the stream's entries until it ends; `from` follows.
async fn follow(shared: &Shared, response: reqwest::Response, from: &mut u64) {
    let mut events = response.bytes_stream().eventsource().ready_chunks(512);
    while let Some(chunk) = events.next().await {
        let mut batch: Vec<LogEntry> = Vec::with_capacity(chunk.len());
        let mut end = false;
        for event in chunk {
            let Ok(event) = event else {
                end = true;
                break;
            };
            match event.event.as_str() {
                "entry" => match serde_json::from_str::<Entry>(&event.data)
                    .ok()
                    .and_then(|e| e.into_entry().ok())
                {
                    Some(entry) => batch.push(entry),
                    None => {
                        end = true;
                        break;
                    }
                },
                "error" => {
                    // Below the trim point (the log was trimmed while the
                    // tailer was away): move on to the first live entry;
                    // subscribers read any gap from the server.
                    if let Ok(body) = serde_json::from_str::<ErrorBody>(&event.data)
                        && let Some(ErrorDetail::Trimmed {
                            first_available, ..
                        }) = body.into_error().detail()
                    {
                        *from = (*from).max(*first_available);
                    }
                    end = true;
                    break;
                }
                _ => {}
            }
        }
        if let Some(last) = batch.last() {
            *from = last.seqnum + 1;
            shared.feed.publish(batch.into());
        }
        if end {
            return;
        }
    }
}
