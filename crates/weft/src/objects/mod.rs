//! Object-store access: the one place that classifies store outcomes, and
//! stackable wrappers over any `ObjectStore`.
//!
//! * [`outcome`] — what a result of an object-store request means
//!   (committed, conflict, transient, ambiguous, ...), and its weft error.
//! * [`retry`] — bounded retries with seeded, jittered backoff.
//! * [`prefix`] — rooting a store at a key prefix.
//! * [`readonly`] — a wrapper that refuses every write.
//!
//! Test wrappers (fault injection, hooks) live in the `weft-testkit` crate.

pub mod outcome;
pub mod prefix;
pub mod readonly;
pub mod retry;

pub(crate) use outcome::read_whole;
pub use outcome::{
    Outcome, StoreOp, classify, classify_result, etag_value, etags_match, settle, to_error,
};
pub use prefix::with_prefix;
pub use readonly::{ReadOnlyRefusal, ReadOnlyStore, is_read_only_refusal};
pub use retry::{Backoff, DEFAULT_DEADLINE, DeadlinePassed, GaveUp, RetryPolicy, retry_store};
