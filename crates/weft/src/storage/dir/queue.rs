//! The queue from appenders to the writer thread.
//!
//! A plain channel wakes its receiver on every send. With many concurrent
//! appenders that is one futex wake (and one sleep) of the writer per
//! append while it gathers a group, which costs more than the group's
//! sync. This queue lets the writer say how many items it is waiting for;
//! a sender only wakes it when that many are queued, so gathering a group
//! costs one wake.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Debug)]
struct State<T> {
    items: VecDeque<T>,
    /// Wake the writer once this many items are queued; 0 while it is not
    /// waiting.
    want: usize,
    senders_gone: bool,
    receiver_gone: bool,
}

/// A multi-producer, single-consumer queue with batched wake-ups.
#[derive(Debug)]
pub(super) struct Queue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    /// `state.items.len()`, readable without the lock (for spinning).
    queued: AtomicUsize,
}

impl<T> Queue<T> {
    pub(super) fn new() -> Self {
        Queue {
            state: Mutex::new(State {
                items: VecDeque::new(),
                want: 0,
                senders_gone: false,
                receiver_gone: false,
            }),
            ready: Condvar::new(),
            queued: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `item`; gives it back when the receiver is gone.
    pub(super) fn send(&self, item: T) -> Result<(), T> {
        let mut state = self.lock();
        if state.receiver_gone {
            return Err(item);
        }
        state.items.push_back(item);
        self.queued.store(state.items.len(), Ordering::Release);
        if state.want > 0 && state.items.len() >= state.want {
            state.want = 0;
            self.ready.notify_one();
        }
        Ok(())
    }

    /// Tells the receiver no more items will come.
    pub(super) fn close_senders(&self) {
        self.lock().senders_gone = true;
        self.ready.notify_one();
    }

    /// Refuses later sends and returns what is still queued.
    pub(super) fn close_receiver(&self) -> VecDeque<T> {
        let mut state = self.lock();
        state.receiver_gone = true;
        self.queued.store(0, Ordering::Release);
        std::mem::take(&mut state.items)
    }

    /// Moves every queued item to `out`, waiting for at least one. False
    /// once the senders are gone and nothing is left.
    pub(super) fn recv_all(&self, out: &mut VecDeque<T>) -> bool {
        let mut state = self.lock();
        while state.items.is_empty() {
            if state.senders_gone {
                return false;
            }
            state.want = 1;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.want = 0;
        out.append(&mut state.items);
        self.queued.store(0, Ordering::Release);
        true
    }

    /// Waits until `n` items are queued or `deadline` passes, then moves
    /// whatever is queued to `out`.
    ///
    /// It first spins for up to `spin` (bounded by the deadline) watching
    /// the queue length: the items it waits for typically arrive within
    /// microseconds, and sleeping on the condition variable would add a
    /// wake-up to every group.
    pub(super) fn recv_until(
        &self,
        n: usize,
        deadline: Instant,
        spin: Duration,
        out: &mut VecDeque<T>,
    ) {
        let spin_until = deadline.min(crate::clock::os_monotonic_now() + spin);
        while self.queued.load(Ordering::Acquire) < n
            && crate::clock::os_monotonic_now() < spin_until
        {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
        }
        let mut state = self.lock();
        while state.items.len() < n && !state.senders_gone {
            let now = crate::clock::os_monotonic_now();
            if now >= deadline {
                break;
            }
            state.want = n;
            state = self
                .ready
                .wait_timeout(state, deadline - now)
                .map(|(s, _)| s)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        state.want = 0;
        out.append(&mut state.items);
        self.queued.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn batches_arrive_in_order_and_close_is_seen() {
        let q = Arc::new(Queue::new());
        let producer = {
            let q = q.clone();
            std::thread::spawn(move || {
                for i in 0..1000 {
                    q.send(i).unwrap();
                }
                q.close_senders();
            })
        };
        let mut got = Vec::new();
        let mut buf = VecDeque::new();
        while q.recv_all(&mut buf) {
            got.extend(buf.drain(..));
        }
        producer.join().unwrap();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
        assert!(q.close_receiver().is_empty());
        assert_eq!(q.send(7), Err(7));
    }

    #[test]
    fn recv_until_returns_at_the_deadline_with_what_it_has() {
        let q = Queue::new();
        q.send(1).unwrap();
        let mut buf = VecDeque::new();
        let start = crate::clock::os_monotonic_now();
        q.recv_until(
            3,
            start + Duration::from_millis(20),
            Duration::from_millis(5),
            &mut buf,
        );
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert_eq!(buf, VecDeque::from([1]));
    }

    #[test]
    fn recv_until_wakes_once_enough_are_queued() {
        let q = Arc::new(Queue::new());
        let producer = {
            let q = q.clone();
            std::thread::spawn(move || {
                for i in 0..3 {
                    std::thread::sleep(Duration::from_millis(2));
                    q.send(i).unwrap();
                }
            })
        };
        let mut buf = VecDeque::new();
        q.recv_until(
            3,
            crate::clock::os_monotonic_now() + Duration::from_secs(30),
            Duration::ZERO,
            &mut buf,
        );
        producer.join().unwrap();
        assert_eq!(buf, VecDeque::from([0, 1, 2]));
    }
}
