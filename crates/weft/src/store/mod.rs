//! Object-store access: the one place that classifies store outcomes, and
//! stackable wrappers over any `ObjectStore`.
//!
//! * [`outcome`] — what a result of an object-store request means
//!   (committed, conflict, transient, ambiguous, ...), and its weft error.
//! * [`retry`] — bounded retries with seeded, jittered backoff.
//! * [`config`] — parsing a log location and building the store for it.
//! * [`azure`] — connection settings of an Azure Blob container.
//! * [`readonly`] — a wrapper that refuses every write.
//!
//! Test wrappers (fault injection, hooks) live in the `weft-testkit` crate.

pub mod azure;
pub mod config;
pub mod outcome;
pub mod readonly;
pub mod retry;

pub use azure::AzureSettings;
pub use config::{Location, S3Settings, StoreSettings, build_store, with_prefix};
pub use outcome::{
    Outcome, StoreOp, classify, classify_result, etag_value, etags_match, settle, to_error,
};
pub use readonly::{ReadOnlyRefusal, ReadOnlyStore, is_read_only_refusal};
pub use retry::{Backoff, DEFAULT_DEADLINE, DeadlinePassed, GaveUp, RetryPolicy, retry_store};
