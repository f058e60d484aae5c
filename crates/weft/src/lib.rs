//! # weft — a shared log
//!
//! One append-only, totally ordered log as the source of truth for a
//! system. Many logical streams ([`LogTag`]s) are woven into it; every entry
//! has a global seqnum and a dense per-stream version; writers can append
//! conditionally on a stream's version; readers read, subscribe and fold the
//! log into state.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use futures::StreamExt;
//! use weft::{AppendRequest, Log, LogTag, Position};
//!
//! let log = Log::memory();
//! let orders = LogTag::new("orders")?;
//! let mut sub = log.subscribe(&orders, Position::Beginning);
//!
//! log.append(AppendRequest::new(orders.clone(), "placed")).await?;
//! let first = sub.next().await.unwrap()?;
//! assert_eq!(&first.data[..], b"placed");
//! # Ok(()) }
//! ```
//!
//! ## Layers
//!
//! * [`model`] — tags, entries, append requests, positions.
//! * `format` — pure encoders and decoders of the wire formats.
//! * `objects` — object-store access: outcome classification, wrappers.
//! * [`connect`] — locations users type, and building the store for one
//!   from settings and the environment.
//! * [`wal`] — the write-ahead log on a bucket: manifest, producer, replica.
//! * `index` — the persistent log index the dir and bucket backends read
//!   through, so memory and open time do not grow with the log.
//! * [`storage`] — backends of the shared log behind the [`Storage`] trait.
//! * [`log`] — the [`Log`] service, views, typed views, subscriptions.
//! * [`kv`] — per-view key-value storage with compare-and-set.
//! * [`retention`] — retention policies and named consumer positions,
//!   stored with the log and applied by its writer.
//! * [`exec`] — executors that fold the log into state.
//!
//! `format`, `objects` and `index` are the crate's internals: public only
//! with the `internals` feature, for weft's own command-line tool, fuzz
//! targets, benches and tests, and not a stable API. What a user of the
//! log needs from them is exported where it is used ([`RetryPolicy`] at
//! the root, the formats the WAL's producer and replica take in [`wal`]).
//!
//! The root exports what most programs name: the log and its views
//! ([`Log`], [`LogView`], [`TypedView`], [`ViewKv`]), the model
//! ([`AppendRequest`], [`LogEntry`], [`Position`], …), the backends and
//! their options ([`DirStorage`] with [`DirOptions`], [`BucketStorage`]
//! with [`BucketOptions`], [`BucketFollower`], [`MemoryStorage`], and
//! `PgStorage` with the `postgres` feature), a [`Location`] to open one
//! from a string, the executors ([`ExecutorEngine`], [`Executor`]), the
//! WAL's [`Producer`] and [`Replica`], and the one [`Error`]. Every option
//! struct is `#[non_exhaustive]`: build it from `Default` and its
//! `with_…` setters.
//!
//! ## Runtime
//!
//! weft runs on tokio, with its time driver: `#[tokio::main]` and
//! `Builder::enable_all` (or `enable_time`) give it. Deadlines, polls,
//! group-commit lingers and a writer's background retention task all wait
//! on tokio's timer; on a runtime built without it, tokio panics in the
//! task that waits (a writer's retention task then stops, and reports the
//! panic through tokio). With no runtime current, a log starts no
//! background task at all.
//!
//! ## Cargo features
//!
//! None is on by default. The in-memory and `dir` backends, the bucket
//! writer and follower, the WAL and every format need no feature: they work
//! on any `Arc<dyn ObjectStore>`, `object_store`'s in-memory and local-file
//! stores included. What the features add is the HTTP clients of the
//! clouds, and with them reqwest, hyper, rustls and ring: a large build and
//! a TLS stack that an embedded log on local disk has no use for. So an
//! application pays for them only when it names a cloud, and the choice
//! follows `object_store`, which leaves its clouds off by default too.
//!
//! * `aws` — S3-compatible buckets: [`connect::S3Settings`].
//! * `azure` — Azure Blob containers: [`connect::AzureSettings`].
//! * `postgres` — the PostgreSQL backend ([`storage::postgres`]): many writer
//!   processes on one log; pulls in tokio-postgres and deadpool-postgres.
//! * `internals` — the internal layers above as public modules, for
//!   weft's own tools; not a stable API.
//! * `server-tests` — this repository's test targets that need live
//!   servers (run by `scripts/test.sh`); not for applications.
//!
//! Without `aws` (or `azure`), [`connect::build_store`] answers an `s3://`
//! (or `az://`) location with [`ErrorKind::Unsupported`].
//!
//! The conformance suite every backend runs, and the fault-injecting and
//! hooked object stores weft's tests use, are in the separate
//! `weft-testkit` crate.

#![cfg_attr(docsrs, feature(doc_cfg))]
// The docs name the clouds' settings and the PostgreSQL backend, which exist
// only with their features; a build without them renders those names as
// text. CI builds the docs with every feature and `-D warnings`, where a
// broken link fails.
#![cfg_attr(
    not(all(feature = "aws", feature = "azure", feature = "postgres")),
    allow(rustdoc::broken_intra_doc_links)
)]

/// A module that is public only with the `internals` feature (weft's own
/// CLI, fuzz targets, benches and tests use it); without it the crate uses
/// it privately, so what only those users call is not dead code.
macro_rules! internal_mod {
    ($name:ident) => {
        #[cfg(feature = "internals")]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        #[allow(unreachable_pub, dead_code, unused_imports)]
        pub(crate) mod $name;
    };
}

/// Chainable `with_…` setters for an options struct's public fields. The
/// option structs are `#[non_exhaustive]` (a field added later breaks no
/// caller), so another crate starts from `Default` and sets what it needs:
/// `DirOptions::default().with_sync(SyncMode::Data)`, or assigns a field.
macro_rules! setters {
    ($ty:ident { $($setter:ident => $field:ident : $fty:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets [`", stringify!($field), "`](Self::", stringify!($field), ").")]
                #[must_use]
                pub fn $setter(mut self, $field: $fty) -> Self {
                    self.$field = $field;
                    self
                }
            )*
        }
    };
}

pub mod clock;
pub mod connect;
pub mod error;
pub mod exec;
internal_mod!(format);
internal_mod!(index);
pub mod kv;
pub mod log;
mod lru;
pub mod model;
internal_mod!(objects);
mod outage;
mod random;
pub mod retention;
pub mod storage;
pub mod wal;

pub use connect::Location;
pub use error::{Error, ErrorDetail, ErrorKind, Result};
pub use exec::{Executor, ExecutorContext, ExecutorEngine};
pub use kv::ViewKv;
pub use log::{
    Codec, Delivery, EntryStream, FilteredSubscription, JsonCodec, Log, LogView, PostcardCodec,
    StreamLifecycle, Subscription, TypedEntries, TypedSubscription, TypedView,
};
pub use model::{AppendRequest, AppendResult, Expected, LogEntry, LogTag, Position, TagFilter};
pub use objects::RetryPolicy;
pub use retention::RetentionPolicy;
pub use storage::bucket::{BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage};
pub use storage::dir::{DirOptions, SyncMode};
#[cfg(feature = "postgres")]
pub use storage::postgres::{PgOptions, PgStorage};
pub use storage::{DirStorage, Freshness, MemoryStorage, Storage, StreamInfo, Tip};
pub use wal::{Producer, Replica};

/// The `tracing` target of the one warning a bucket writer or follower
/// logs when filling in its history (the entries before the point it
/// opened at) fails for good. The same error is returned by every read
/// that needs that history, and by `filled_in`; a program that reports
/// those errors itself can mute this target, as the `weft` command does.
pub const HISTORY_FILL_LOG_TARGET: &str = "weft::history_fill";

/// The README's code runs as a doctest, so the tour cannot rot.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
