//! Retention policies and consumer positions, stored with the log.
//!
//! A log's [`RetentionPolicy`] (drop entries by age, count and size, but
//! never what a protected consumer has not read) is stored in the log's
//! own per-view KV, under the reserved scope `_weft:retention`, key
//! `policy`; named [`Consumer`] positions under the scope
//! `_weft:consumers`. So every backend that has a KV (every one: memory,
//! dir, bucket, PostgreSQL, and a `weft serve` client) stores both durably
//! with the log, any process can read and set them, and a log without them
//! keeps everything, as before. The stored forms are in docs/FORMATS.md;
//! the namespace `_weft` of KV scopes is reserved for them.
//!
//! The log's writer applies the policy in the background
//! ([`RetentionSlot`], [`Retention`]): memory, dir and bucket writers, and
//! every PostgreSQL handle that may write. A reader below the new start
//! gets `Trimmed`, as after any trim.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use weft::retention::{Retention, RetentionPolicy};
//! use weft::{AppendRequest, Log, LogTag, clock};
//!
//! let log = Log::memory();
//! for i in 0..10 {
//!     log.append(AppendRequest::new(LogTag::new("orders")?, format!("{i}"))).await?;
//! }
//! log.set_retention_policy(Some(RetentionPolicy::default().with_max_count(Some(4))))
//!     .await?;
//! // The writer's task applies it soon; a step applies it now.
//! Retention::new(clock::system()).step(&log).await?;
//! assert_eq!(log.tip().await?.first, 6);
//! # Ok(()) }
//! ```

mod apply;
mod consumer;
mod policy;

pub use apply::{Retention, RetentionSlot, RetentionStep, STEP_ENTRIES, STEP_INTERVAL};
pub use consumer::{Consumer, ConsumerPosition, MAX_CONSUMER_NAME_BYTES, validate_name};
pub use policy::RetentionPolicy;

pub(crate) use apply::{TaskOwner, start};
pub(crate) use consumer::list as list_consumers;

use crate::model::LogTag;

/// The reserved namespace of the KV scopes below.
pub const RESERVED_NAMESPACE: &str = "_weft";

/// The KV key of the policy in [`retention_scope`].
pub const POLICY_KEY: &str = "policy";

/// The KV scope of the retention policy: `_weft:retention`.
pub fn retention_scope() -> LogTag {
    LogTag::with_key(RESERVED_NAMESPACE, "retention").expect("a valid reserved tag")
}

/// The KV scope of consumer positions: `_weft:consumers`.
pub fn consumers_scope() -> LogTag {
    LogTag::with_key(RESERVED_NAMESPACE, "consumers").expect("a valid reserved tag")
}
