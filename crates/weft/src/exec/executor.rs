//! The [`Executor`] trait and the [`ExecutorContext`] handed to `execute`.

use std::future::Future;

use crate::error::Result;
use crate::log::{Log, LogView};
use crate::model::{AppendRequest, LogEntry, LogTag};

/// A worker whose whole state is a fold of one tag of the log.
///
/// The engine rebuilds the state on every start by folding the input tag
/// from the beginning with [`apply`](Executor::apply), then keeps folding
/// new entries as they commit and calls [`execute`](Executor::execute)
/// after each batch; the requests `execute` returns are appended to the log.
///
/// # Rules an executor follows
///
/// * **`apply` is a deterministic fold.** It may look only at the state and
///   the entry: no clock, no randomness, no I/O. That is what makes a
///   restart land on exactly the state the previous run had.
/// * **All state lives in `State`.** Fields of the executor itself are
///   configuration; anything mutable kept there is lost on restart.
/// * **Outputs are folded back.** An executor must not emit the same request
///   twice just because it restarted. The robust way is for the state to
///   remember what was already emitted by folding the executor's own
///   outputs: give each output the input tag (as primary or secondary tag),
///   and have `apply` record it. The engine helps: after appending outputs
///   that carry the input tag, it does not call `execute` again until those
///   outputs have been folded, so `execute` never sees a state that lacks
///   its own earlier outputs.
///
/// # Why a generic trait
///
/// `State` is an associated type so `apply` and `execute` work on the
/// executor's own type, with no downcasting and no serialization between
/// them. That makes the trait not object-safe; the engine erases the type
/// once, at [`register`](super::ExecutorEngine::register), by turning the
/// executor into a spawnable task. `execute` returns a `Send` future (write
/// it as `async fn`) so each executor can run on a multi-threaded runtime.
///
/// ```
/// use weft::exec::{Executor, ExecutorContext};
/// use weft::{AppendRequest, LogEntry, LogTag, Result};
///
/// /// Counts `ping`s and answers each with a `pong` on the same tag.
/// struct PingPong { tag: LogTag }
///
/// #[derive(Clone, Default)]
/// struct Counts { pings: u64, pongs: u64 }
///
/// impl Executor for PingPong {
///     type State = Counts;
///     fn name(&self) -> &str { "ping-pong" }
///     fn input_tag(&self) -> LogTag { self.tag.clone() }
///     fn initial_state(&self) -> Counts { Counts::default() }
///     fn apply(&self, s: &mut Counts, e: &LogEntry) -> Result<()> {
///         match &e.data[..] {
///             b"ping" => s.pings += 1,
///             b"pong" => s.pongs += 1,
///             _ => {}
///         }
///         Ok(())
///     }
///     async fn execute(&self, s: &Counts, _: &mut ExecutorContext) -> Result<Vec<AppendRequest>> {
///         // The pongs are folded back, so a restart emits only what is missing.
///         let missing = s.pings.saturating_sub(s.pongs);
///         Ok((0..missing).map(|_| AppendRequest::new(self.tag.clone(), "pong")).collect())
///     }
/// }
/// ```
pub trait Executor: Send + Sync + 'static {
    /// The folded state. `Clone` so the engine can publish snapshots of it.
    type State: Clone + Send + Sync + 'static;

    /// A name, unique within one engine (used in statuses and traces).
    fn name(&self) -> &str;

    /// The tag whose entries are folded into the state.
    fn input_tag(&self) -> LogTag;

    /// The state before any entry.
    fn initial_state(&self) -> Self::State;

    /// Folds one entry of the input tag into the state.
    ///
    /// An error stops this executor (its status becomes
    /// [`Failed`](super::ExecutorStatus::Failed)); others keep running.
    fn apply(&self, state: &mut Self::State, entry: &LogEntry) -> Result<()>;

    /// Decides what to append, given the state after a batch of entries.
    ///
    /// Called once after the replay on start and then after each batch of
    /// new entries. The returned requests are appended atomically, as one
    /// batch. An error stops this executor.
    fn execute(
        &self,
        state: &Self::State,
        ctx: &mut ExecutorContext,
    ) -> impl Future<Output = Result<Vec<AppendRequest>>> + Send;
}

/// What `execute` can reach beyond its state: the log and views of any tag.
///
/// One context lives as long as its executor's run and is reused across
/// calls. Appends made through it are not part of the executor's atomic
/// output batch and are not awaited by the engine; prefer returning
/// requests from `execute`, and use the context for reads and for side
/// streams (audit trails) that need no folding.
#[derive(Debug)]
pub struct ExecutorContext {
    log: Log,
    name: String,
    input_tag: LogTag,
    applied_through: Option<u64>,
    executions: u64,
}

impl ExecutorContext {
    pub(super) fn new(log: Log, name: String, input_tag: LogTag) -> Self {
        ExecutorContext {
            log,
            name,
            input_tag,
            applied_through: None,
            executions: 0,
        }
    }

    pub(super) fn advance(&mut self, applied_through: Option<u64>) {
        self.applied_through = applied_through;
        self.executions += 1;
    }

    /// The log the executor runs over.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// A view of `tag`, for cross-tag reads and appends.
    pub fn view(&self, tag: LogTag) -> LogView {
        self.log.view(tag)
    }

    /// A view of the executor's input tag.
    pub fn input_view(&self) -> LogView {
        self.log.view(self.input_tag.clone())
    }

    /// The executor's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The executor's input tag.
    pub fn input_tag(&self) -> &LogTag {
        &self.input_tag
    }

    /// The seqnum of the last entry folded into the state this call sees
    /// (`None` if no entry has been folded yet).
    pub fn applied_through(&self) -> Option<u64> {
        self.applied_through
    }

    /// How many times `execute` has been called in this run, this call
    /// included (1 on the call that follows the replay).
    pub fn executions(&self) -> u64 {
        self.executions
    }
}
