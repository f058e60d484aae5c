//! A weft storage backend that talks to a `weft serve` server.
//!
//! [`RemoteStorage`] implements weft's [`Storage`](weft::Storage) seam over
//! the server's HTTP API, so a [`Log`](weft::Log) on it — views, typed
//! views, subscriptions, KV, executors, the `weft` command — works as it
//! does on a local backend:
//!
//! ```no_run
//! # async fn demo() -> weft::Result<()> {
//! use weft::{AppendRequest, LogTag};
//!
//! let log = weft_client::connect("http://127.0.0.1:7070").await?;
//! let orders = LogTag::new("orders")?;
//! log.append(AppendRequest::new(orders, "placed").with_id("order-1/placed")).await?;
//! # Ok(()) }
//! ```
//!
//! * Numbers come from the server's backend, so tip and version answers are
//!   one round trip each ([`Freshness::SharedDatabase`](weft::Freshness)).
//! * The handle's commit feed is filled by one server-sent-events
//!   subscription to the server ([`tailer`]), as a database backend's is by
//!   its tailer; an append returns once the feed announced it, so a tail
//!   subscription made after an append starts past it.
//! * Several endpoints (`http://a:7070,http://b:7070`: a leader and its
//!   standby) are tried in turn: a request that could not be sent, or a
//!   write a follower refused, goes to the next one until
//!   [`RemoteOptions::retry_for`] runs out. A write whose connection broke
//!   after it was sent is `Indeterminate`: retry it with its append id.
//!
//! Layout: [`options`], [`http`] (requests, endpoints, error mapping),
//! [`storage`] (the seam), [`kv`], [`tailer`].

pub mod http;
pub mod kv;
pub mod options;
mod shared;
pub mod storage;
pub mod tailer;

pub use options::RemoteOptions;
pub use storage::RemoteStorage;

/// True when `text` names a server (`http://` or `https://`, or a list of
/// them separated by commas).
pub fn is_remote(text: &str) -> bool {
    let t = text.trim();
    t.starts_with("http://") || t.starts_with("https://")
}

/// A [`Log`](weft::Log) on the server(s) at `url` with default options.
///
/// Errors: as [`RemoteStorage::connect`].
pub async fn connect(url: &str) -> weft::Result<weft::Log> {
    Ok(weft::Log::new(
        RemoteStorage::connect(url, RemoteOptions::default()).await?,
    ))
}
