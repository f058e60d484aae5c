//! Fetching a run of segments with a fixed number of GETs in flight,
//! handing them out in order.
//!
//! A replica applies segments strictly in manifest order, so it needs
//! them in order; the store answers in any order. An ordered window
//! (`futures`' `buffered(n)`) starts the GET for segment `i + n` only once
//! segment `i` was handed out: while one slow GET is at the head, the
//! others finish and their slots stay empty, so fewer than `n` requests are
//! in flight exactly when the store is slow. [`Prefetch`] refills a slot as
//! soon as its GET finishes, and keeps the finished segments that are not
//! next in order until their turn; to keep memory bounded, it starts no new
//! GET while `in_flight` segments already wait (so at most `2 × in_flight`
//! segments are held at once: `in_flight` arriving, `in_flight` ready).
//!
//! Each fetch runs as its own task, so downloads (and whatever the fetch
//! does with the bytes: a replica checks and splits the segment there) go
//! on, on any worker thread, while the caller applies records; a plain
//! future would only progress while polled, on the caller's thread.
//! Dropping a [`Prefetch`] aborts the GETs still running.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};

/// In-order results of fetches run `in_flight` at a time.
pub(crate) struct Prefetch<T, F, O> {
    /// Starts the fetch of one item.
    start: F,
    /// Items not started yet, in order.
    queued: VecDeque<T>,
    /// Index the next started item gets.
    next_start: usize,
    /// Index of the next result to hand out.
    next_out: usize,
    running: FuturesUnordered<JoinHandle<(usize, Result<O>)>>,
    /// Finished results waiting for their turn, by index.
    ready: BTreeMap<usize, Result<O>>,
    in_flight: usize,
}

impl<T, F, Fut, O> Prefetch<T, F, O>
where
    F: FnMut(T) -> Fut,
    Fut: Future<Output = Result<O>> + Send + 'static,
    O: Send + 'static,
{
    /// Fetches of `items` through `start`, up to `in_flight` (at least 1)
    /// running at once. Nothing starts before the first [`Self::next`].
    pub(crate) fn new(items: impl IntoIterator<Item = T>, in_flight: usize, start: F) -> Self {
        Prefetch {
            start,
            queued: items.into_iter().collect(),
            next_start: 0,
            next_out: 0,
            running: FuturesUnordered::new(),
            ready: BTreeMap::new(),
            in_flight: in_flight.max(1),
        }
    }

    /// Starts fetches while a slot is free and fewer than `in_flight`
    /// finished results wait.
    fn refill(&mut self) {
        while self.running.len() < self.in_flight && self.ready.len() < self.in_flight {
            let Some(item) = self.queued.pop_front() else {
                return;
            };
            let index = self.next_start;
            self.next_start += 1;
            let fetch = (self.start)(item);
            self.running
                .push(tokio::spawn(async move { (index, fetch.await) }));
        }
    }

    /// The next item's result, in order; `None` after the last.
    pub(crate) async fn next(&mut self) -> Option<Result<O>> {
        loop {
            self.refill();
            if let Some(result) = self.ready.remove(&self.next_out) {
                self.next_out += 1;
                // Start the GET this frees before the caller works on the
                // result.
                self.refill();
                return Some(result);
            }
            match self.running.next().await {
                Some(Ok((index, result))) => {
                    self.ready.insert(index, result);
                }
                Some(Err(join)) => {
                    // The task panicked or was aborted: the index is lost,
                    // so the order cannot go on.
                    self.queued.clear();
                    return Some(Err(Error::internal(format!(
                        "segment fetch task failed: {join}"
                    ))));
                }
                None => return None,
            }
        }
    }
}

impl<T, F, O> Drop for Prefetch<T, F, O> {
    fn drop(&mut self) {
        for task in self.running.iter() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;
    use crate::error::ErrorKind;

    /// Item `i` takes `delays[i]` ms; the window must hand them out in
    /// order and never run more than `in_flight` at once.
    #[tokio::test(start_paused = true)]
    async fn hands_out_in_order_and_refills_behind_a_slow_head() {
        let delays = [50u64, 1, 1, 1, 1, 1, 1, 1];
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let started = Arc::new(AtomicUsize::new(0));
        let (r, p, s) = (running.clone(), peak.clone(), started.clone());
        let mut window = Prefetch::new(0..delays.len(), 2, move |i: usize| {
            let (r, p) = (r.clone(), p.clone());
            s.fetch_add(1, Ordering::SeqCst);
            async move {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                crate::clock::sleep(Duration::from_millis(delays[i])).await;
                r.fetch_sub(1, Ordering::SeqCst);
                Ok(Bytes::from(vec![i as u8]))
            }
        });
        let first = window.next().await.unwrap().unwrap();
        assert_eq!(first[0], 0);
        // While item 0 took 50 ms, the second slot kept fetching until two
        // finished items waited (1 and 2), not just item 1.
        assert!(
            started.load(Ordering::SeqCst) >= 3,
            "started {}",
            started.load(Ordering::SeqCst)
        );
        for want in 1..delays.len() {
            let got = window.next().await.unwrap().unwrap();
            assert_eq!(got[0] as usize, want);
        }
        assert!(window.next().await.is_none());
        assert_eq!(
            peak.load(Ordering::SeqCst),
            2,
            "never more than 2 in flight"
        );
    }

    #[tokio::test]
    async fn an_error_comes_out_in_its_place() {
        let mut window = Prefetch::new(0..3usize, 3, |i: usize| async move {
            if i == 1 {
                Err(Error::corrupt("bad"))
            } else {
                Ok(Bytes::new())
            }
        });
        assert!(window.next().await.unwrap().is_ok());
        let err = window.next().await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(window.next().await.unwrap().is_ok());
        assert!(window.next().await.is_none());
    }
}
