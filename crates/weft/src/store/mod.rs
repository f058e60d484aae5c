//! Object-store access: the one place that classifies store outcomes, and
//! stackable wrappers over any `ObjectStore`.
//!
//! * [`outcome`] — what a result of an object-store request means
//!   (committed, conflict, transient, ambiguous, ...), and its weft error.
//! * [`retry`] — bounded retries with seeded, jittered backoff.
//! * [`prefix`] — rooting a store at a key prefix.
//!
//! Test wrappers (fault injection, hooks) live in the `weft-testkit` crate.

pub mod outcome;
pub mod prefix;
pub mod retry;

pub use outcome::{
    Outcome, StoreOp, classify, classify_result, etag_value, etags_match, settle, to_error,
};
pub use prefix::with_prefix;
pub use retry::{Backoff, GaveUp, RetryPolicy, retry_store};
