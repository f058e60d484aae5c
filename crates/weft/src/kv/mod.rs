//! Per-view durable key-value storage: checkpoints, claims and counters.
//!
//! Every backend offers a tiny core, [`KvStore`]: read, write, and one
//! atomic compare-and-set. [`ViewKv`] builds the conveniences on it
//! (`set_if_absent`, `delete_if`, `increment`), so their atomicity is
//! exactly that of the backend's compare-and-set. A backend that cannot
//! compare-and-set atomically returns [`Unsupported`](crate::ErrorKind::Unsupported).
//!
//! Keys live in a scope: the tag of the view they belong to.
//!
//! [`lease`] builds time-limited claims (acquire, renew, release) on the
//! same compare-and-set.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use weft::{Log, LogTag};
//!
//! let log = Log::memory();
//! let view = log.view(LogTag::with_key("execution", "exec-1")?);
//! let kv = view.kv()?;
//! assert!(kv.set_if_absent("owner", "node-a").await?);
//! assert!(!kv.set_if_absent("owner", "node-b").await?);
//! assert_eq!(kv.increment("attempts", 2).await?, 2);
//! # Ok(()) }
//! ```

pub mod lease;
pub mod memory;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::model::LogTag;

pub use lease::{Lease, LeaseRecord};
pub use memory::MemoryKv;

/// The longest KV key, in bytes.
pub const MAX_KEY_BYTES: usize = 255;

/// The largest KV value, in bytes.
pub const MAX_VALUE_BYTES: usize = 1 << 20;

/// The core a backend implements. All operations are atomic per key.
#[async_trait]
pub trait KvStore: Send + Sync + 'static {
    /// The value of `key` in `scope`.
    async fn get(&self, scope: &LogTag, key: &str) -> Result<Option<Bytes>>;

    /// Writes (or with `None`, deletes) `key` unconditionally.
    async fn put(&self, scope: &LogTag, key: &str, value: Option<Bytes>) -> Result<()>;

    /// Writes `new` (or deletes, with `None`) only if the current value is
    /// `expected` (`None`: the key must be absent). True when it wrote.
    async fn compare_and_set(
        &self,
        scope: &LogTag,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Bytes>,
    ) -> Result<bool>;
}

/// Checks a key and value against the limits every backend enforces.
///
/// Errors: `InvalidInput` for an empty, over-long or control-character key
/// and for an over-large value.
pub fn validate(key: &str, value: Option<&[u8]>) -> Result<()> {
    if key.is_empty() {
        return Err(Error::invalid_input("kv key is empty"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::invalid_input(format!(
            "kv key is {} bytes; the limit is {MAX_KEY_BYTES}",
            key.len()
        )));
    }
    if key.chars().any(char::is_control) {
        return Err(Error::invalid_input(format!(
            "kv key {key:?} contains a control character"
        )));
    }
    if let Some(v) = value
        && v.len() > MAX_VALUE_BYTES
    {
        return Err(Error::invalid_input(format!(
            "kv value is {} bytes; the limit is {MAX_VALUE_BYTES}",
            v.len()
        )));
    }
    Ok(())
}

/// Decodes a counter value: a little-endian `i64` of exactly 8 bytes.
///
/// Errors: `InvalidInput` when the stored value is not a counter.
pub fn decode_counter(key: &str, bytes: &[u8]) -> Result<i64> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| {
        Error::invalid_input(format!(
            "kv key {key:?} holds {} bytes, not an 8-byte counter",
            bytes.len()
        ))
    })?;
    Ok(i64::from_le_bytes(arr))
}

/// Encodes a counter value (little-endian `i64`).
pub fn encode_counter(value: i64) -> Bytes {
    Bytes::copy_from_slice(&value.to_le_bytes())
}

/// The KV of one view: keys scoped to the view's tag, with the conditional
/// helpers built on compare-and-set.
#[derive(Clone)]
pub struct ViewKv {
    store: Arc<dyn KvStore>,
    scope: LogTag,
}

impl std::fmt::Debug for ViewKv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewKv")
            .field("scope", &self.scope)
            .finish()
    }
}

impl ViewKv {
    /// The KV of `store` scoped to `scope`.
    pub fn new(store: Arc<dyn KvStore>, scope: LogTag) -> Self {
        ViewKv { store, scope }
    }

    /// The scope (the view's tag) every key of this KV lives in.
    pub fn scope(&self) -> &LogTag {
        &self.scope
    }

    /// The value of `key`.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>> {
        validate(key, None)?;
        self.store.get(&self.scope, key).await
    }

    /// Writes `key` unconditionally.
    pub async fn set(&self, key: &str, value: impl Into<Bytes>) -> Result<()> {
        let value = value.into();
        validate(key, Some(&value))?;
        self.store.put(&self.scope, key, Some(value)).await
    }

    /// Deletes `key` unconditionally.
    pub async fn delete(&self, key: &str) -> Result<()> {
        validate(key, None)?;
        self.store.put(&self.scope, key, None).await
    }

    /// Writes `key` only if it is absent. Of N concurrent contenders exactly
    /// one gets `true`.
    pub async fn set_if_absent(&self, key: &str, value: impl Into<Bytes>) -> Result<bool> {
        let value = value.into();
        validate(key, Some(&value))?;
        self.store
            .compare_and_set(&self.scope, key, None, Some(value))
            .await
    }

    /// Replaces `expected` by `new`; `expected = None` requires absence and
    /// `new = None` deletes. True when it wrote.
    pub async fn compare_and_set(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Bytes>,
    ) -> Result<bool> {
        validate(key, new.as_deref())?;
        self.store
            .compare_and_set(&self.scope, key, expected, new)
            .await
    }

    /// Deletes `key` only if it still holds `expected` (a release that
    /// cannot free another holder's claim).
    pub async fn delete_if(&self, key: &str, expected: &[u8]) -> Result<bool> {
        validate(key, None)?;
        self.store
            .compare_and_set(&self.scope, key, Some(expected), None)
            .await
    }

    /// Adds `delta` to the counter at `key` (absent reads as 0) and returns
    /// the new value. Concurrent increments lose nothing: this retries the
    /// compare-and-set until it wins.
    ///
    /// Errors: `InvalidInput` when the key holds something other than a
    /// counter or the sum overflows.
    pub async fn increment(&self, key: &str, delta: i64) -> Result<i64> {
        validate(key, None)?;
        loop {
            let current = self.store.get(&self.scope, key).await?;
            let value = match &current {
                Some(bytes) => decode_counter(key, bytes)?,
                None => 0,
            };
            let next = value.checked_add(delta).ok_or_else(|| {
                Error::invalid_input(format!("counter {key:?} overflows: {value} + {delta}"))
            })?;
            if self
                .store
                .compare_and_set(
                    &self.scope,
                    key,
                    current.as_deref(),
                    Some(encode_counter(next)),
                )
                .await?
            {
                return Ok(next);
            }
        }
    }
}
