//! The per-view KV of a remote log: the three core operations, each one
//! request; `ViewKv` builds set-if-absent, delete-if and increment on the
//! server's compare-and-set, as on every backend.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use reqwest::Method;
use weft::kv::KvStore;
use weft::{LogTag, Result};
use weft_api::body::{KvCas, KvValue, KvWritten};

use crate::http::Effect;
use crate::shared::Shared;

/// The KV of a [`RemoteStorage`](crate::RemoteStorage).
pub struct RemoteKv {
    shared: Arc<Shared>,
}

impl RemoteKv {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        RemoteKv { shared }
    }
}

#[async_trait]
impl KvStore for RemoteKv {
    async fn get(&self, scope: &LogTag, key: &str) -> Result<Option<Bytes>> {
        self.shared.check_open()?;
        let value: KvValue = self
            .shared
            .api
            .call(
                Method::GET,
                &["v1", "kv", &scope.to_string(), key],
                &[],
                None::<&()>,
                Effect::Read,
            )
            .await?;
        Ok(value.data)
    }

    async fn put(&self, scope: &LogTag, key: &str, value: Option<Bytes>) -> Result<()> {
        self.shared.check_open()?;
        let _: KvWritten = self
            .shared
            .api
            .call(
                Method::PUT,
                &["v1", "kv", &scope.to_string(), key],
                &[],
                Some(&KvValue { data: value }),
                Effect::Write,
            )
            .await?;
        Ok(())
    }

    async fn compare_and_set(
        &self,
        scope: &LogTag,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Bytes>,
    ) -> Result<bool> {
        self.shared.check_open()?;
        let body = KvCas {
            expected: expected.map(Bytes::copy_from_slice),
            data: new,
        };
        let written: KvWritten = self
            .shared
            .api
            .call(
                Method::POST,
                &["v1", "kv", &scope.to_string(), key, "cas"],
                &[],
                Some(&body),
                Effect::Write,
            )
            .await?;
        Ok(written.written)
    }
}
