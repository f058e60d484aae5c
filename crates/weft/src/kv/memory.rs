//! The in-memory KV: a map under a mutex (atomic within the process).

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;

use super::KvStore;
use crate::error::Result;
use crate::model::LogTag;

/// A KV held in memory; lost when the process exits.
#[derive(Debug, Default)]
pub struct MemoryKv {
    map: Mutex<HashMap<(LogTag, String), Bytes>>,
}

impl MemoryKv {
    /// An empty KV.
    pub fn new() -> Self {
        MemoryKv::default()
    }
}

#[async_trait]
impl KvStore for MemoryKv {
    async fn get(&self, scope: &LogTag, key: &str) -> Result<Option<Bytes>> {
        let map = self.map.lock().expect("kv lock");
        Ok(map.get(&(scope.clone(), key.to_owned())).cloned())
    }

    async fn put(&self, scope: &LogTag, key: &str, value: Option<Bytes>) -> Result<()> {
        let mut map = self.map.lock().expect("kv lock");
        let k = (scope.clone(), key.to_owned());
        match value {
            Some(v) => map.insert(k, v),
            None => map.remove(&k),
        };
        Ok(())
    }

    async fn compare_and_set(
        &self,
        scope: &LogTag,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Bytes>,
    ) -> Result<bool> {
        let mut map = self.map.lock().expect("kv lock");
        let k = (scope.clone(), key.to_owned());
        if map.get(&k).map(|b| b.as_ref()) != expected {
            return Ok(false);
        }
        match new {
            Some(v) => map.insert(k, v),
            None => map.remove(&k),
        };
        Ok(true)
    }
}
