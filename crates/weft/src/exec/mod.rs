//! Executors: fold the log into state, emit appends, resume by replay.
//!
//! An [`Executor`] owns no durable state of its own. Its state is a fold of
//! one input tag; the [`ExecutorEngine`] rebuilds it on every start by
//! replaying that tag, then keeps it current from a subscription and lets
//! the executor append whatever the state calls for. Kill the process at
//! any point, start a new engine over the same log, and the executor is
//! back where it was.
//!
//! * [`executor`] — the [`Executor`] trait and its [`ExecutorContext`].
//! * [`engine`] — [`ExecutorEngine`] and the running [`EngineHandle`].
//! * [`status`] — [`ExecutorStatus`] and state snapshots ([`StateWatch`]).
//! * [`checkpoint`] — the actor pattern: a [`Checkpoint`] in the view's KV,
//!   resume after it, backlog then live.
//! * [`fence`] — the ownership pattern: a lease plus a version fence
//!   ([`FencedWriter`]); the lease itself is [`crate::kv::Lease`].
//!
//! # The run of one executor
//!
//! 1. Fold the input tag from the beginning (chunked reads), no execute.
//! 2. Call `execute` once on the rebuilt state; append what it returns.
//! 3. Subscribe right after the last folded entry. For each burst of new
//!    entries: fold them all, call `execute`, append its requests as one
//!    atomic batch, publish a snapshot.
//!
//! Each executor runs on its own tokio task. An error or a panic stops that
//! executor only: its status becomes [`ExecutorStatus::Failed`] (also logged
//! through `tracing`), and the others keep running. An error of kind
//! `Closed` means the log closed under it and ends it as
//! [`ExecutorStatus::Stopped`] instead. There is no automatic
//! restart: a failure usually means the fold met an entry it cannot handle,
//! and replaying into the same entry would fail again.
//!
//! # Not emitting twice after a restart
//!
//! Replaying rebuilds the state, and `execute` runs on it again; whatever
//! `execute` decided before the restart it will decide again, unless the
//! state knows the decision was already carried out. Keeping an "already
//! emitted" set in the executor's memory does not survive the restart. What
//! does is the log: every output an executor appends is durable, so it
//! should be folded back into the state.
//!
//! * An output that carries the input tag (as primary or secondary tag)
//!   comes back through the subscription; `apply` records it (an order
//!   moves from pending to fulfilled), and a restarted executor sees it in
//!   the replay. The engine also waits, after appending such outputs, until
//!   they have been folded before it calls `execute` again, so a burst of
//!   unrelated entries cannot trigger a second copy.
//! * An output meant for another stream can still carry the input tag as a
//!   secondary tag, acknowledging in the input stream what was done with it.
//!   (Or `execute` reads the other stream through the context before
//!   emitting; that costs a read per call.)
//! * The outputs of one `execute` are appended as one atomic batch, so a
//!   crash leaves all of them or none in the log; a replay then either sees
//!   them or redoes them.
//!
//! The ported examples (`examples/order_fulfilment.rs`, `workflow.rs`) do
//! exactly this, and `tests/local/exec_engine.rs` restarts engines over the same
//! log to check that nothing is appended twice.
//!
//! An output whose append failed with `Indeterminate` may or may not be in
//! the log; the executor fails, and the next run's replay settles it.

pub mod checkpoint;
pub mod engine;
pub mod executor;
pub mod fence;
mod runner;
pub mod status;

pub use checkpoint::{Checkpoint, Resumed};
pub use engine::{EngineHandle, ExecutorEngine};
pub use executor::{Executor, ExecutorContext};
pub use fence::FencedWriter;
pub use status::{ExecutorSnapshot, ExecutorStatus, StateWatch};
