//! [`ExecutorEngine`]: registers executors and runs each on its own task;
//! [`EngineHandle`]: statuses and shutdown of the running executors.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::executor::Executor;
use super::runner::{self, Ending};
use super::status::{ExecutorStatus, StateWatch};
use crate::error::{Error, ErrorKind, Result};
use crate::log::Log;

type SpawnRun =
    Box<dyn FnOnce(Log, watch::Receiver<bool>) -> BoxFuture<'static, Result<Ending>> + Send>;

struct Registered {
    name: String,
    spawn: SpawnRun,
}

/// Collects executors, then runs them over one log.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> weft::Result<()> {
/// use weft::exec::{Executor, ExecutorContext, ExecutorEngine, ExecutorStatus};
/// use weft::{AppendRequest, Log, LogEntry, LogTag, Result};
///
/// /// Sums the little numbers written to `numbers`.
/// struct Sum(LogTag);
/// impl Executor for Sum {
///     type State = u64;
///     fn name(&self) -> &str { "sum" }
///     fn input_tag(&self) -> LogTag { self.0.clone() }
///     fn initial_state(&self) -> u64 { 0 }
///     fn apply(&self, s: &mut u64, e: &LogEntry) -> Result<()> {
///         *s += e.data.first().copied().unwrap_or(0) as u64;
///         Ok(())
///     }
///     async fn execute(&self, _: &u64, _: &mut ExecutorContext) -> Result<Vec<AppendRequest>> {
///         Ok(vec![])
///     }
/// }
///
/// let log = Log::memory();
/// let numbers = log.view(LogTag::new("numbers")?);
/// numbers.append(vec![2u8]).await?;
///
/// let mut engine = ExecutorEngine::new(log.clone());
/// let mut sum = engine.register(Sum(numbers.tag().clone()))?;
/// let handle = engine.start()?;
/// numbers.append(vec![3u8]).await?;
///
/// let snap = sum.wait_for(|s| s.state == 5).await?;
/// assert_eq!(snap.applied_through, Some(1));
/// assert_eq!(handle.status("sum"), Some(ExecutorStatus::Running));
/// let finals = handle.shutdown().await;
/// assert_eq!(finals, vec![("sum".to_string(), ExecutorStatus::Stopped)]);
/// # Ok(()) }
/// ```
pub struct ExecutorEngine {
    log: Log,
    registered: Vec<Registered>,
    names: HashSet<String>,
}

impl std::fmt::Debug for ExecutorEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorEngine")
            .field("executors", &self.names)
            .finish()
    }
}

impl ExecutorEngine {
    /// An engine with no executors over `log`.
    pub fn new(log: Log) -> Self {
        ExecutorEngine {
            log,
            registered: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// Adds `executor`; it starts with [`start`](ExecutorEngine::start).
    /// The returned watch receives a snapshot of its state after each batch.
    ///
    /// Errors: `InvalidInput` when the name is empty or already registered.
    pub fn register<E: Executor>(&mut self, executor: E) -> Result<StateWatch<E::State>> {
        let name = executor.name().to_owned();
        if name.is_empty() {
            return Err(Error::invalid_input("an executor needs a non-empty name"));
        }
        if !self.names.insert(name.clone()) {
            return Err(Error::invalid_input(format!(
                "an executor named {name:?} is already registered"
            )));
        }
        let (snapshots, rx) = watch::channel(None);
        let spawn: SpawnRun =
            Box::new(move |log, stop| runner::run(executor, log, stop, snapshots).boxed());
        self.registered.push(Registered { name, spawn });
        Ok(StateWatch::new(rx))
    }

    /// Spawns one task per executor on the current tokio runtime.
    ///
    /// Errors: `InvalidInput` when called outside a tokio runtime.
    pub fn start(self) -> Result<EngineHandle> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| {
            Error::invalid_input("ExecutorEngine::start needs a tokio runtime").with_source(e)
        })?;
        let (stop, stop_rx) = watch::channel(false);
        let executors = self
            .registered
            .into_iter()
            .map(|reg| {
                let status = Arc::new(watch::Sender::new(ExecutorStatus::Running));
                let run = (reg.spawn)(self.log.clone(), stop_rx.clone());
                let span = tracing::info_span!("executor", name = %reg.name);
                let task = runtime.spawn(supervise(run, status.clone()).instrument(span));
                RunningExecutor {
                    name: reg.name,
                    status,
                    task,
                }
            })
            .collect();
        Ok(EngineHandle { stop, executors })
    }
}

/// Drives one run and records how it ended, panics included.
async fn supervise(
    run: BoxFuture<'static, Result<Ending>>,
    status: Arc<watch::Sender<ExecutorStatus>>,
) {
    tracing::info!("executor started");
    // The run owns all of its state and nothing outlives a panic but the
    // status channel, so observing a half-updated run is impossible.
    let outcome = AssertUnwindSafe(run).catch_unwind().await;
    let last = match outcome {
        Ok(Ok(Ending::Shutdown)) => {
            tracing::info!("executor stopped");
            ExecutorStatus::Stopped
        }
        Ok(Ok(Ending::InputEnded)) => {
            tracing::info!("executor stopped: the log closed");
            ExecutorStatus::Stopped
        }
        Ok(Err(err)) if err.kind() == ErrorKind::Closed => {
            // The log closed under the run (a read or an append failed with
            // Closed): nothing the executor did wrong, and whatever it did
            // not get to append is redone by the next run's replay.
            tracing::info!(error = %err, "executor stopped: the log closed");
            ExecutorStatus::Stopped
        }
        Ok(Err(err)) => {
            tracing::error!(error = %err, kind = %err.kind(), "executor failed");
            ExecutorStatus::Failed(err.to_string())
        }
        Err(panic) => {
            let message = panic_message(panic.as_ref());
            tracing::error!(panic = %message, "executor panicked");
            ExecutorStatus::Failed(format!("panicked: {message}"))
        }
    };
    status.send_replace(last);
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

struct RunningExecutor {
    name: String,
    status: Arc<watch::Sender<ExecutorStatus>>,
    task: JoinHandle<()>,
}

/// The running executors of a started engine.
///
/// Dropping the handle asks every executor to stop without waiting; call
/// [`shutdown`](EngineHandle::shutdown) to wait for them.
pub struct EngineHandle {
    stop: watch::Sender<bool>,
    executors: Vec<RunningExecutor>,
}

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineHandle")
            .field("statuses", &self.statuses())
            .finish()
    }
}

impl EngineHandle {
    fn find(&self, name: &str) -> Option<&RunningExecutor> {
        self.executors.iter().find(|e| e.name == name)
    }

    /// The names of the executors, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.executors.iter().map(|e| e.name.clone()).collect()
    }

    /// The status of the executor called `name`.
    pub fn status(&self, name: &str) -> Option<ExecutorStatus> {
        self.find(name).map(|e| e.status.borrow().clone())
    }

    /// Every executor's name and status, in registration order.
    pub fn statuses(&self) -> Vec<(String, ExecutorStatus)> {
        self.executors
            .iter()
            .map(|e| (e.name.clone(), e.status.borrow().clone()))
            .collect()
    }

    /// Waits until the status of `name` satisfies `pred` and returns it.
    /// Bound it with `tokio::time::timeout`.
    ///
    /// Errors: `NotFound` when no executor is called `name`.
    pub async fn wait_for_status(
        &self,
        name: &str,
        pred: impl FnMut(&ExecutorStatus) -> bool,
    ) -> Result<ExecutorStatus> {
        let mut rx = self
            .find(name)
            .ok_or_else(|| Error::new(ErrorKind::NotFound, format!("no executor named {name:?}")))?
            .status
            .subscribe();
        // The handle keeps the sender alive, so the channel cannot close
        // while we wait.
        let status = rx
            .wait_for(pred)
            .await
            .map_err(|_| Error::internal("executor status channel closed"))?;
        Ok(status.clone())
    }

    /// Asks every executor to stop and waits for all of them; returns each
    /// one's final status. An executor stops between batches: the batch it
    /// is folding or executing (and appending) completes first.
    pub async fn shutdown(mut self) -> Vec<(String, ExecutorStatus)> {
        self.stop.send_replace(true);
        let mut finals = Vec::with_capacity(self.executors.len());
        for exec in std::mem::take(&mut self.executors) {
            if let Err(err) = exec.task.await {
                // The supervisor catches panics, so only a cancelled task
                // (the runtime shutting down) ends up here.
                tracing::warn!(executor = %exec.name, error = %err, "executor task did not finish");
                if !exec.status.borrow().is_finished() {
                    exec.status.send_replace(ExecutorStatus::Stopped);
                }
            }
            let last = exec.status.borrow().clone();
            finals.push((exec.name, last));
        }
        finals
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}
