//! Object-store access: the one place that classifies store outcomes, and
//! stackable wrappers over any `ObjectStore`.
//!
//! * [`outcome`] — what a result of an object-store request means
//!   (committed, conflict, transient, ambiguous, ...), and its weft error.
//! * [`retry`] — bounded retries with seeded, jittered backoff.
//! * [`prefix`] — rooting a store at a key prefix.
//! * [`fault`] — a seeded fault-injecting wrapper for tests and simulation.

pub mod fault;
pub mod outcome;
pub mod prefix;
pub mod retry;

pub use fault::{DEFAULT_HANG, FaultConfig, FaultStats, FaultStore, OpFaults};
pub use outcome::{
    Outcome, StoreOp, classify, classify_result, etag_value, etags_match, settle, to_error,
};
pub use prefix::with_prefix;
pub use retry::{Backoff, GaveUp, RetryPolicy, retry_store};
