//! What an engine reports about its executors: each one's status, and
//! snapshots of each one's folded state.

use tokio::sync::watch;

use crate::error::{Error, Result};

/// Where an executor's task is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecutorStatus {
    /// Replaying its input or processing new entries.
    Running,
    /// Stopped by an error or a panic (the message says which); the other
    /// executors of the engine are unaffected.
    Failed(String),
    /// Stopped by shutdown, or because the log closed (the input ended, or
    /// a read or append failed with [`Closed`](crate::ErrorKind::Closed)).
    Stopped,
}

impl ExecutorStatus {
    /// True once the task has ended, for whatever reason.
    pub fn is_finished(&self) -> bool {
        !matches!(self, ExecutorStatus::Running)
    }
}

/// The state of one executor after a batch, and where in the log it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutorSnapshot<S> {
    /// The folded state.
    pub state: S,
    /// The seqnum of the last entry folded in (`None`: none yet).
    pub applied_through: Option<u64>,
    /// How many times `execute` ran in this run of the engine.
    pub executions: u64,
    /// How many entries the engine appended for this executor in this run.
    pub appended: u64,
}

/// Receives the snapshots an executor publishes after each batch.
///
/// Returned by [`ExecutorEngine::register`](super::ExecutorEngine::register).
/// Publishing clones the state, and the engine skips it once every
/// `StateWatch` of the executor has been dropped.
#[derive(Debug)]
pub struct StateWatch<S> {
    rx: watch::Receiver<Option<ExecutorSnapshot<S>>>,
}

impl<S: Clone> StateWatch<S> {
    pub(super) fn new(rx: watch::Receiver<Option<ExecutorSnapshot<S>>>) -> Self {
        StateWatch { rx }
    }

    /// The latest snapshot; `None` until the executor finished its replay.
    pub fn latest(&self) -> Option<ExecutorSnapshot<S>> {
        self.rx.borrow().clone()
    }

    /// Waits until a snapshot satisfies `pred` and returns it (at once if
    /// the latest one does). Bound it with `tokio::time::timeout`.
    ///
    /// Errors: `Closed` when the executor stopped (failed, shut down) before
    /// publishing a snapshot that satisfies `pred`.
    pub async fn wait_for(
        &mut self,
        mut pred: impl FnMut(&ExecutorSnapshot<S>) -> bool,
    ) -> Result<ExecutorSnapshot<S>> {
        let found = self
            .rx
            .wait_for(|snap| snap.as_ref().is_some_and(&mut pred))
            .await
            .map_err(|_| {
                Error::closed("the executor stopped before its state reached the condition")
            })?;
        match found.as_ref() {
            Some(snap) => Ok(snap.clone()),
            None => Err(Error::internal("a satisfied snapshot vanished")),
        }
    }
}
