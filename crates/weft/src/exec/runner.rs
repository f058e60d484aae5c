//! One executor's run: replay its input tag, then fold and execute live.
//!
//! The run is a plain future; the engine spawns it and turns its outcome
//! (or its panic) into a status.

use futures::{FutureExt, StreamExt, TryStreamExt};
use tokio::sync::watch;

use super::executor::{Executor, ExecutorContext};
use super::status::ExecutorSnapshot;
use crate::error::Result;
use crate::log::{Log, PAGE_ENTRIES};
use crate::model::{LogEntry, LogTag, Position};

/// The most entries folded before `execute` runs, when more are ready.
const MAX_BATCH: usize = 1024;

/// Why a run ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// The engine asked it to stop.
    Shutdown,
    /// The subscription ended: the log closed.
    InputEnded,
}

/// The folding loop of one executor.
struct Run<E: Executor> {
    executor: E,
    log: Log,
    tag: LogTag,
    state: E::State,
    applied_through: Option<u64>,
    /// The highest seqnum of an output of ours that carries the input tag.
    /// `execute` waits until it has been folded.
    own_output_through: Option<u64>,
    appended: u64,
    ctx: ExecutorContext,
    snapshots: watch::Sender<Option<ExecutorSnapshot<E::State>>>,
}

impl<E: Executor> Run<E> {
    fn apply(&mut self, entry: &LogEntry) -> Result<()> {
        self.executor
            .apply(&mut self.state, entry)
            .map_err(|e| e.context(format!("apply of entry {}", entry.seqnum)))?;
        self.applied_through = Some(entry.seqnum);
        Ok(())
    }

    /// True when every output of ours that carries the input tag has been
    /// folded back into the state.
    fn has_folded_own_outputs(&self) -> bool {
        match (self.own_output_through, self.applied_through) {
            (None, _) => true,
            (Some(own), Some(applied)) => applied >= own,
            (Some(_), None) => false,
        }
    }

    async fn execute(&mut self) -> Result<()> {
        self.ctx.advance(self.applied_through);
        let requests = self
            .executor
            .execute(&self.state, &mut self.ctx)
            .await
            .map_err(|e| e.context("execute"))?;
        if requests.is_empty() {
            return Ok(());
        }
        let folds_back: Vec<bool> = requests
            .iter()
            .map(|r| r.tags().contains(&self.tag))
            .collect();
        // One atomic batch: after a crash either every output of this call
        // is in the log (and will be folded on replay) or none is.
        let results = self
            .log
            .append_batch(requests)
            .await
            .map_err(|e| e.context("append of executor outputs"))?;
        for (result, folds_back) in results.iter().zip(folds_back) {
            if folds_back {
                self.own_output_through = self.own_output_through.max(Some(result.seqnum));
            }
        }
        self.appended += results.len() as u64;
        tracing::debug!(
            appended = results.len(),
            through = results.last().map(|r| r.seqnum),
            "executor outputs appended"
        );
        Ok(())
    }

    fn publish(&self) {
        // Cloning the state is the cost of a snapshot; skip it when nobody
        // holds a StateWatch any more.
        if self.snapshots.receiver_count() == 0 {
            return;
        }
        self.snapshots.send_replace(Some(ExecutorSnapshot {
            state: self.state.clone(),
            applied_through: self.applied_through,
            executions: self.ctx.executions(),
            appended: self.appended,
        }));
    }

    /// Folds the input tag from the beginning, without executing: a paged
    /// stream, so only one page of entries is held at a time.
    async fn replay(&mut self, stop: &watch::Receiver<bool>) -> Result<Option<Ending>> {
        let mut input = self.log.stream(&self.tag, Position::Beginning);
        let mut replayed = 0usize;
        loop {
            if replayed.is_multiple_of(PAGE_ENTRIES) {
                if *stop.borrow() {
                    return Ok(Some(Ending::Shutdown));
                }
                // Reads from memory complete without suspending; give the
                // other tasks on this worker a turn between pages.
                tokio::task::yield_now().await;
            }
            let next = input
                .try_next()
                .await
                .map_err(|e| e.context("replay of the input tag"))?;
            let Some(entry) = next else { break };
            self.apply(&entry)?;
            replayed += 1;
        }
        tracing::debug!(replayed, through = self.applied_through, "replay done");
        Ok(None)
    }

    async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<Ending> {
        if let Some(ending) = self.replay(&stop).await? {
            return Ok(ending);
        }
        self.execute().await?;
        self.publish();

        // The subscription starts right after the last replayed entry: the
        // entries committed during the replay come first, then live ones,
        // with no gap and no repeat.
        let resume = match self.applied_through {
            Some(s) => Position::At(s + 1),
            None => Position::Beginning,
        };
        let mut input = self.log.subscribe(&self.tag, resume);
        loop {
            let next = tokio::select! {
                biased;
                () = stopped(&mut stop) => return Ok(Ending::Shutdown),
                next = input.next() => next,
            };
            let Some(first) = input_entry(next)? else {
                return Ok(Ending::InputEnded);
            };
            self.apply(&first)?;
            // Fold whatever else is already available, so one execute call
            // covers a burst of entries.
            let mut ended = false;
            for _ in 1..MAX_BATCH {
                let Some(next) = input.next().now_or_never() else {
                    break;
                };
                match input_entry(next)? {
                    Some(entry) => self.apply(&entry)?,
                    None => {
                        ended = true;
                        break;
                    }
                }
            }
            if ended {
                // The log closed: outputs could not be appended any more.
                self.publish();
                return Ok(Ending::InputEnded);
            }
            if self.has_folded_own_outputs() {
                self.execute().await?;
            }
            self.publish();
        }
    }
}

/// An item of the input subscription; `None` when the subscription ended
/// (the log closed).
fn input_entry(item: Option<Result<LogEntry>>) -> Result<Option<LogEntry>> {
    item.transpose()
        .map_err(|e| e.context("read of the input tag"))
}

/// Resolves once the engine asks for a stop (or the engine is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // An error means the sender was dropped: the engine is gone, stop too.
    let _ = stop.wait_for(|s| *s).await;
}

/// Runs `executor` over `log` until `stop` turns true, the log closes, or
/// the executor fails.
pub(super) async fn run<E: Executor>(
    executor: E,
    log: Log,
    stop: watch::Receiver<bool>,
    snapshots: watch::Sender<Option<ExecutorSnapshot<E::State>>>,
) -> Result<Ending> {
    let tag = executor.input_tag();
    let ctx = ExecutorContext::new(log.clone(), executor.name().to_owned(), tag.clone());
    let run = Run {
        state: executor.initial_state(),
        executor,
        log,
        tag,
        applied_through: None,
        own_output_through: None,
        appended: 0,
        ctx,
        snapshots,
    };
    run.run(stop).await
}
