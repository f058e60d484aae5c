//! State shared by the producer's handle and its background tasks: the
//! append buffer, the in-flight byte budget, and the halt reason.
//!
//! An append becomes a [`Group`] in the buffer; the flusher moves groups into
//! segments, where each becomes a [`Waiter`] that the committer resolves with
//! the group's sequence. A waiter's sender lives in exactly one place at a
//! time, so every waiter is resolved exactly once: with a sequence, with an
//! error, or (if its holder is dropped) by [`Durability`](super::Durability)
//! reading the halt reason.

use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, oneshot};

use crate::error::{Error, ErrorKind, Result};

/// The channel a waiter is resolved through.
pub(crate) type Reply = oneshot::Sender<Result<u64>>;

/// One append call, buffered.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) records: Vec<Bytes>,
    pub(crate) meta: Option<Bytes>,
    /// Bytes the group occupies in a record block (4-byte length prefixes
    /// included); also its share of the in-flight budget.
    pub(crate) bytes: usize,
    pub(crate) ingestion_ms: i64,
    /// When the append must be settled (committed or failed).
    pub(crate) deadline: tokio::time::Instant,
    pub(crate) reply: Reply,
    pub(crate) permit: OwnedSemaphorePermit,
}

/// A group after it was packed into a segment.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// Index, within the segment, of the group's first record.
    pub(crate) start_index: u32,
    pub(crate) reply: Reply,
    /// Returned to the budget when the waiter is resolved.
    pub(crate) permit: OwnedSemaphorePermit,
}

impl Waiter {
    /// Resolves the waiter and gives its bytes back to the budget.
    pub(crate) fn resolve(self, result: Result<u64>) {
        // The caller may have dropped its Durability; nobody to tell then.
        let _ = self.reply.send(result);
        drop(self.permit);
    }
}

/// Why the producer stopped: the error that stopped it, handed (cloned) to
/// every pending and future caller.
#[derive(Debug, Clone)]
pub(crate) struct Halt(Error);

impl Halt {
    pub(crate) fn from_error(err: &Error) -> Self {
        Halt(err.clone())
    }

    pub(crate) fn closed() -> Self {
        Halt(Error::closed("producer is closed"))
    }

    /// The error for an append that was pending when the producer halted:
    /// the halting error itself.
    pub(crate) fn pending_error(&self) -> Error {
        self.0.clone()
    }

    /// The error for an append made after the producer halted (see
    /// [`Error::after_stop`]: fenced stays fenced, anything else is closed).
    pub(crate) fn future_error(&self) -> Error {
        match self.0.kind() {
            ErrorKind::Closed => self.0.clone(),
            _ => self.0.after_stop("the producer"),
        }
    }

    pub(crate) fn kind(&self) -> ErrorKind {
        self.0.kind()
    }
}

#[derive(Debug, Default)]
struct State {
    buffer: Vec<Group>,
    buffered_bytes: usize,
    halt: Option<Halt>,
    closing: bool,
}

/// The state the handle and the tasks share.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    budget: std::sync::Arc<Semaphore>,
    flush_now: Notify,
    flush_threshold: usize,
}

impl Shared {
    pub(crate) fn new(max_inflight_bytes: usize, flush_threshold: usize) -> Self {
        Shared {
            state: Mutex::new(State::default()),
            budget: std::sync::Arc::new(Semaphore::new(max_inflight_bytes)),
            flush_now: Notify::new(),
            flush_threshold,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves State consistent, so a panic in one
        // does not make the state unusable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `bytes` from the in-flight budget, waiting while it is spent.
    pub(crate) async fn reserve(&self, bytes: usize) -> Result<OwnedSemaphorePermit> {
        self.check_open()?;
        let n = u32::try_from(bytes)
            .map_err(|_| Error::invalid_input("an append may hold at most 4 GiB"))?;
        match self.budget.clone().acquire_many_owned(n).await {
            Ok(permit) => Ok(permit),
            // The budget is closed only by `halt`.
            Err(_) => Err(self
                .check_open()
                .err()
                .unwrap_or_else(|| self.stopped_error())),
        }
    }

    /// Buffers a group unless the producer stopped (checked under the same
    /// lock `halt` takes, so no group slips in after the buffer was failed).
    pub(crate) fn push(&self, group: Group) -> Result<()> {
        let mut state = self.lock();
        if let Some(h) = &state.halt {
            return Err(h.future_error());
        }
        if state.closing {
            return Err(Error::closed("producer is closing"));
        }
        state.buffered_bytes += group.bytes;
        state.buffer.push(group);
        let full = state.buffered_bytes >= self.flush_threshold;
        drop(state);
        if full {
            self.flush_now.notify_one();
        }
        Ok(())
    }

    /// Takes every buffered group, in append order.
    pub(crate) fn take_buffer(&self) -> Vec<Group> {
        let mut state = self.lock();
        state.buffered_bytes = 0;
        std::mem::take(&mut state.buffer)
    }

    /// Resolves when an append filled the buffer to the flush threshold.
    pub(crate) async fn flush_requested(&self) {
        self.flush_now.notified().await
    }

    /// Refuses new appends from now on; buffered ones are still flushed.
    pub(crate) fn start_closing(&self) {
        self.lock().closing = true;
    }

    /// Stops the producer: records the reason (the first one wins), fails
    /// every buffered group and every append waiting for budget.
    pub(crate) fn halt(&self, halt: Halt) {
        let groups = {
            let mut state = self.lock();
            if state.halt.is_none() {
                state.halt = Some(halt);
            }
            state.buffered_bytes = 0;
            std::mem::take(&mut state.buffer)
        };
        self.budget.close();
        let reason = self.halt_reason().unwrap_or_else(Halt::closed);
        for g in groups {
            let _ = g.reply.send(Err(reason.pending_error()));
        }
    }

    pub(crate) fn halt_reason(&self) -> Option<Halt> {
        self.lock().halt.clone()
    }

    pub(crate) fn is_halted(&self) -> bool {
        self.lock().halt.is_some()
    }

    /// The error for an append made now, if the producer is not accepting.
    pub(crate) fn check_open(&self) -> Result<()> {
        let state = self.lock();
        if let Some(h) = &state.halt {
            return Err(h.future_error());
        }
        if state.closing {
            return Err(Error::closed("producer is closing"));
        }
        Ok(())
    }

    /// The error for a caller whose waiter vanished or whose budget wait was
    /// cut short.
    pub(crate) fn stopped_error(&self) -> Error {
        match self.halt_reason() {
            Some(h) => h.pending_error(),
            None => Error::closed("producer stopped"),
        }
    }
}
