//! Per-view KV on a bucket: one small object per key, changed only by
//! conditional PUT, so claims and counters hold across processes and
//! machines.
//!
//! Object: `<kv prefix>/<hex scope>/<hex key>` holding
//! `"WKV1" | present u8 | value`. A delete writes a tombstone
//! (`present = 0`) with a conditional update instead of deleting the object,
//! because a conditional delete is not portable across object stores; a
//! tombstone reads as absent.
//!
//! `compare_and_set` reads the object with its version (ETag), compares, and
//! writes with `If-Match` (or `If-None-Match: *` when the object does not
//! exist). Losing that race re-reads and compares again; a store that
//! answers nothing (the write may have landed) yields `Indeterminate`
//! rather than a guess.

use std::fmt::Write;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, UpdateVersion};

use crate::error::{Error, ErrorKind, Result};
use crate::kv::KvStore;
use crate::model::LogTag;
use crate::store::outcome::{self, StoreOp};

const MAGIC: &[u8; 4] = b"WKV1";
const MAX_CAS_ROUNDS: usize = 64;

/// The bucket KV of one log.
#[derive(Debug, Clone)]
pub struct BucketKv {
    store: Arc<dyn ObjectStore>,
    prefix: String,
}

fn hex(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn encode(value: Option<&[u8]>) -> Bytes {
    let mut buf = BytesMut::with_capacity(5 + value.map_or(0, <[u8]>::len));
    buf.put_slice(MAGIC);
    buf.put_u8(value.is_some() as u8);
    if let Some(v) = value {
        buf.put_slice(v);
    }
    buf.freeze()
}

fn decode(path: &Path, bytes: Bytes) -> Result<Option<Bytes>> {
    if bytes.len() < 5 || &bytes[..4] != MAGIC {
        return Err(Error::corrupt(format!("{path} is not a weft KV object")));
    }
    match bytes[4] {
        0 => Ok(None),
        1 => Ok(Some(bytes.slice(5..))),
        other => Err(Error::corrupt(format!(
            "{path} has unknown KV flag {other}"
        ))),
    }
}

/// The current state of a key: its value and the object's version.
struct Current {
    value: Option<Bytes>,
    version: Option<UpdateVersion>,
}

impl BucketKv {
    /// The KV whose objects live under `prefix` in `store`.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: impl Into<String>) -> Self {
        BucketKv {
            store,
            prefix: prefix.into(),
        }
    }

    fn path(&self, scope: &LogTag, key: &str) -> Path {
        Path::from(format!(
            "{}/{}/{}",
            self.prefix,
            hex(&scope.to_string()),
            hex(key)
        ))
    }

    async fn current(&self, path: &Path) -> Result<Current> {
        match self.store.get(path).await {
            Ok(got) => {
                let version = UpdateVersion {
                    e_tag: got.meta.e_tag.clone(),
                    version: got.meta.version.clone(),
                };
                let bytes = got
                    .bytes()
                    .await
                    .map_err(|e| outcome::to_error(StoreOp::Read, path.as_ref(), e))?;
                Ok(Current {
                    value: decode(path, bytes)?,
                    version: Some(version),
                })
            }
            Err(e) => {
                let err = outcome::to_error(StoreOp::Read, path.as_ref(), e);
                if err.kind() == ErrorKind::NotFound {
                    Ok(Current {
                        value: None,
                        version: None,
                    })
                } else {
                    Err(err)
                }
            }
        }
    }
}

#[async_trait]
impl KvStore for BucketKv {
    async fn get(&self, scope: &LogTag, key: &str) -> Result<Option<Bytes>> {
        Ok(self.current(&self.path(scope, key)).await?.value)
    }

    async fn put(&self, scope: &LogTag, key: &str, value: Option<Bytes>) -> Result<()> {
        let path = self.path(scope, key);
        self.store
            .put(&path, encode(value.as_deref()).into())
            .await
            .map(|_| ())
            .map_err(|e| outcome::to_error(StoreOp::Put, path.as_ref(), e))
    }

    async fn compare_and_set(
        &self,
        scope: &LogTag,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Bytes>,
    ) -> Result<bool> {
        let path = self.path(scope, key);
        for _ in 0..MAX_CAS_ROUNDS {
            let current = self.current(&path).await?;
            if current.value.as_deref() != expected {
                return Ok(false);
            }
            let (mode, op) = match current.version {
                Some(v) => (PutMode::Update(v), StoreOp::UpdateIfMatch),
                None => (PutMode::Create, StoreOp::CreateIfAbsent),
            };
            let opts = PutOptions {
                mode,
                ..PutOptions::default()
            };
            match self
                .store
                .put_opts(&path, encode(new.as_deref()).into(), opts)
                .await
            {
                Ok(_) => return Ok(true),
                Err(e) => {
                    let err = outcome::to_error(op, path.as_ref(), e);
                    match err.kind() {
                        // Someone changed the key between our read and write:
                        // compare again against what is there now.
                        ErrorKind::Conflict => continue,
                        _ => return Err(err),
                    }
                }
            }
        }
        Err(Error::new(
            ErrorKind::Unavailable,
            format!("compare-and-set on {path} kept losing races; try again"),
        ))
    }
}
