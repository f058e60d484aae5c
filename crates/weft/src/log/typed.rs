//! Typed views: domain values in, domain values out, through a [`Codec`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use serde::{Deserialize, Serialize};
//! use weft::{JsonCodec, Log, LogTag};
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Placed { order: String, qty: u32 }
//!
//! let log = Log::memory();
//! let orders = log.typed_view(LogTag::new("orders")?, JsonCodec::<Placed>::new());
//! orders.append(&Placed { order: "o-1".into(), qty: 2 }).await?;
//! let all = orders.read_all().await?;
//! assert_eq!(all[0].1, Placed { order: "o-1".into(), qty: 2 });
//! # Ok(()) }
//! ```

use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{EntryStream, LogView, Subscription};
use crate::error::{Error, ErrorDetail, ErrorKind, Result};
use crate::model::{AppendResult, LogEntry, Position};

/// Turns values into payload bytes and back.
pub trait Codec<T>: Send + Sync + 'static {
    /// Encodes `value`.
    ///
    /// Errors: `InvalidInput` when the value cannot be encoded.
    fn encode(&self, value: &T) -> Result<Bytes>;

    /// Decodes a payload. The typed view adds the seqnum to the error.
    fn decode(&self, bytes: &[u8]) -> Result<T>;
}

/// JSON through `serde_json`: readable, self-describing, larger.
pub struct JsonCodec<T>(PhantomData<fn() -> T>);

/// Postcard through `postcard`: a compact binary encoding (varints, no field
/// names). Field order is the schema: append fields at the end only.
pub struct PostcardCodec<T>(PhantomData<fn() -> T>);

macro_rules! codec_common {
    ($name:ident) => {
        impl<T> $name<T> {
            /// The codec.
            pub fn new() -> Self {
                $name(PhantomData)
            }
        }
        impl<T> Default for $name<T> {
            fn default() -> Self {
                $name::new()
            }
        }
        impl<T> Clone for $name<T> {
            fn clone(&self) -> Self {
                $name::new()
            }
        }
        impl<T> std::fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(stringify!($name))
            }
        }
    };
}
codec_common!(JsonCodec);
codec_common!(PostcardCodec);

impl<T: Serialize + DeserializeOwned + 'static> Codec<T> for JsonCodec<T> {
    fn encode(&self, value: &T) -> Result<Bytes> {
        serde_json::to_vec(value)
            .map(Bytes::from)
            .map_err(|e| Error::invalid_input("value cannot be encoded as JSON").with_source(e))
    }

    fn decode(&self, bytes: &[u8]) -> Result<T> {
        serde_json::from_slice(bytes)
            .map_err(|e| Error::corrupt("payload is not valid JSON for this type").with_source(e))
    }
}

impl<T: Serialize + DeserializeOwned + 'static> Codec<T> for PostcardCodec<T> {
    fn encode(&self, value: &T) -> Result<Bytes> {
        postcard::to_allocvec(value)
            .map(Bytes::from)
            .map_err(|e| Error::invalid_input("value cannot be encoded as postcard").with_source(e))
    }

    fn decode(&self, bytes: &[u8]) -> Result<T> {
        postcard::from_bytes(bytes).map_err(|e| {
            Error::corrupt("payload is not valid postcard for this type").with_source(e)
        })
    }
}

fn decode_entry<T, C: Codec<T>>(codec: &C, entry: LogEntry) -> Result<(LogEntry, T)> {
    match codec.decode(&entry.data) {
        Ok(value) => Ok((entry, value)),
        Err(err) => Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "entry {} could not be decoded: {}",
                entry.seqnum,
                err.message()
            ),
        )
        .with_detail(ErrorDetail::Decode {
            seqnum: entry.seqnum,
        })
        .with_source(err)),
    }
}

/// A [`LogView`] whose payloads are values of `T`.
///
/// Reads return `(entry, value)` pairs, so the seqnum and version stay at
/// hand. A payload that does not decode is a `Corrupt` error with
/// [`ErrorDetail::Decode`] naming the seqnum.
pub struct TypedView<T, C> {
    view: LogView,
    codec: std::sync::Arc<C>,
    _marker: PhantomData<fn() -> T>,
}

impl<T, C> Clone for TypedView<T, C> {
    fn clone(&self) -> Self {
        TypedView {
            view: self.view.clone(),
            codec: self.codec.clone(),
            _marker: PhantomData,
        }
    }
}

impl<T, C: Codec<T>> TypedView<T, C> {
    pub(crate) fn new(view: LogView, codec: C) -> Self {
        TypedView {
            view,
            codec: std::sync::Arc::new(codec),
            _marker: PhantomData,
        }
    }

    /// The untyped view underneath.
    pub fn view(&self) -> &LogView {
        &self.view
    }

    /// Appends `value`.
    pub async fn append(&self, value: &T) -> Result<AppendResult> {
        self.view.append(self.codec.encode(value)?).await
    }

    /// Appends `value` only if the stream is at `expected_version`.
    pub async fn append_if(&self, value: &T, expected_version: u64) -> Result<AppendResult> {
        self.view
            .append_if(self.codec.encode(value)?, expected_version)
            .await
    }

    fn decode_all(&self, entries: Vec<LogEntry>) -> Result<Vec<(LogEntry, T)>> {
        entries
            .into_iter()
            .map(|e| decode_entry(&*self.codec, e))
            .collect()
    }

    /// The entries from `position` to the end of the log, decoded as the
    /// pages arrive (see [`Log::stream`](super::Log::stream)).
    pub fn stream(&self, position: Position) -> TypedEntries<T, C> {
        TypedEntries {
            inner: self.view.stream(position),
            codec: self.codec.clone(),
            _marker: PhantomData,
        }
    }

    /// The stream's entries from version `from_version` on, decoded (see
    /// [`Log::stream_versions`](super::Log::stream_versions)).
    pub fn stream_versions(&self, from_version: u64) -> TypedEntries<T, C> {
        TypedEntries {
            inner: self.view.stream_versions(from_version),
            codec: self.codec.clone(),
            _marker: PhantomData,
        }
    }

    /// Every live entry, decoded.
    pub async fn read_all(&self) -> Result<Vec<(LogEntry, T)>> {
        self.decode_all(self.view.read_all().await?)
    }

    /// Up to `max` entries from `position`, decoded.
    pub async fn read_from(&self, position: Position, max: usize) -> Result<Vec<(LogEntry, T)>> {
        self.decode_all(self.view.read_from(position, max).await?)
    }

    /// Entries with seqnum greater than `seqnum`, decoded.
    pub async fn read_after(&self, seqnum: u64) -> Result<Vec<(LogEntry, T)>> {
        self.decode_all(self.view.read_after(seqnum).await?)
    }

    /// Entries of the stream with version greater than `version`, decoded.
    pub async fn read_after_version(&self, version: u64) -> Result<Vec<(LogEntry, T)>> {
        self.decode_all(self.view.read_after_version(version).await?)
    }

    /// Backlog from `position`, then live entries, decoded.
    pub fn subscribe(&self, position: Position) -> TypedSubscription<T, C> {
        TypedSubscription {
            inner: self.view.subscribe(position),
            codec: self.codec.clone(),
            _marker: PhantomData,
        }
    }

    /// Only entries appended from now on, decoded.
    pub fn subscribe_tail(&self) -> TypedSubscription<T, C> {
        self.subscribe(Position::End)
    }
}

/// A [`Subscription`] that decodes each entry.
pub struct TypedSubscription<T, C> {
    inner: Subscription,
    codec: std::sync::Arc<C>,
    _marker: PhantomData<fn() -> T>,
}

/// An [`EntryStream`] that decodes each entry.
pub struct TypedEntries<T, C> {
    inner: EntryStream,
    codec: std::sync::Arc<C>,
    _marker: PhantomData<fn() -> T>,
}

/// Polls `inner` and decodes what it yields.
fn poll_decoded<S, T, C>(
    inner: &mut S,
    codec: &C,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<(LogEntry, T)>>>
where
    S: Stream<Item = Result<LogEntry>> + Unpin,
    C: Codec<T>,
{
    inner
        .poll_next_unpin(cx)
        .map(|item| item.map(|entry| entry.and_then(|e| decode_entry(codec, e))))
}

impl<T, C: Codec<T>> Stream for TypedSubscription<T, C> {
    type Item = Result<(LogEntry, T)>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        poll_decoded(&mut this.inner, &*this.codec, cx)
    }
}

impl<T, C: Codec<T>> Stream for TypedEntries<T, C> {
    type Item = Result<(LogEntry, T)>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        poll_decoded(&mut this.inner, &*this.codec, cx)
    }
}
