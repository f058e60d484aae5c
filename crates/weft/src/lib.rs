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
//! * [`format`](mod@format) — pure encoders and decoders of the wire formats.
//! * [`store`] — object-store access: outcome classification, wrappers.
//! * [`wal`] — the write-ahead log on a bucket: manifest, producer, replica.
//! * [`storage`] — backends of the shared log behind the [`Storage`] trait.
//! * [`log`] — the [`Log`] service, views, typed views, subscriptions.
//! * [`kv`] — per-view key-value storage with compare-and-set.
//! * [`exec`] — executors that fold the log into state.
//!
//! The conformance suite every backend runs, and the fault-injecting and
//! hooked object stores weft's tests use, are in the separate
//! `weft-testkit` crate.

pub mod clock;
pub mod error;
pub mod exec;
pub mod format;
pub mod index;
pub mod kv;
pub mod log;
pub mod model;
mod outage;
pub mod storage;
pub mod store;
pub mod wal;

pub use error::{Error, ErrorDetail, ErrorKind, Result};
pub use kv::ViewKv;
pub use log::{
    Codec, EntryStream, JsonCodec, Log, LogView, PostcardCodec, Subscription, TypedEntries,
    TypedSubscription, TypedView,
};
pub use model::{AppendRequest, AppendResult, LogEntry, LogTag, Position};
pub use storage::{DirStorage, Freshness, MemoryStorage, Storage, Tip};

/// The README's code runs as a doctest, so the tour cannot rot.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
