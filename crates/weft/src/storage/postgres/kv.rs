//! The per-view KV in the log's `kv` table.
//!
//! Every operation is one statement in its own transaction, and each
//! conditional one decides on the row under its row lock: `INSERT ... ON
//! CONFLICT DO NOTHING` for "only if absent", `UPDATE`/`DELETE ... WHERE
//! value = expected` for "only if it still holds". Under READ COMMITTED a
//! statement that waited for another writer's row lock re-checks its
//! condition on the row that writer left, so of N processes racing on one
//! key exactly one wins, wherever they run.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use super::Shared;
use super::errors::Op;
use crate::error::Result;
use crate::kv::KvStore;
use crate::model::LogTag;

/// The KV of a [`PgStorage`](super::PgStorage).
#[derive(Debug)]
pub struct PgKv {
    shared: Arc<Shared>,
}

impl PgKv {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        PgKv { shared }
    }

    async fn changed(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<bool> {
        self.shared.check_open()?;
        let rows = self
            .shared
            .connections
            .query(Op::Write, what, sql, params)
            .await?;
        Ok(!rows.is_empty())
    }
}

#[async_trait]
impl KvStore for PgKv {
    async fn get(&self, scope: &LogTag, key: &str) -> Result<Option<Bytes>> {
        self.shared.check_open()?;
        let scope = scope.to_string();
        let rows = self
            .shared
            .connections
            .query(Op::Read, "kv get", &self.shared.sql.kv_get, &[&scope, &key])
            .await?;
        Ok(rows.first().map(|r| Bytes::from(r.get::<_, Vec<u8>>(0))))
    }

    async fn put(&self, scope: &LogTag, key: &str, value: Option<Bytes>) -> Result<()> {
        let scope = scope.to_string();
        let sql = &self.shared.sql;
        match value {
            Some(v) => {
                let v: &[u8] = &v;
                self.changed("kv put", &sql.kv_upsert, &[&scope, &key, &v])
                    .await?;
            }
            None => {
                self.changed("kv delete", &sql.kv_delete, &[&scope, &key])
                    .await?;
            }
        }
        Ok(())
    }

    async fn compare_and_set(
        &self,
        scope: &LogTag,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Bytes>,
    ) -> Result<bool> {
        let scope = scope.to_string();
        let sql = &self.shared.sql;
        let new = new.as_deref();
        match (expected, new) {
            (None, Some(new)) => {
                self.changed(
                    "kv set if absent",
                    &sql.kv_insert_new,
                    &[&scope, &key, &new],
                )
                .await
            }
            (Some(old), Some(new)) => {
                self.changed(
                    "kv compare and set",
                    &sql.kv_replace,
                    &[&scope, &key, &new, &old],
                )
                .await
            }
            (Some(old), None) => {
                self.changed("kv delete if", &sql.kv_delete_if, &[&scope, &key, &old])
                    .await
            }
            (None, None) => {
                self.shared.check_open()?;
                let rows = self
                    .shared
                    .connections
                    .query(Op::Read, "kv check absent", &sql.kv_absent, &[&scope, &key])
                    .await?;
                Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
            }
        }
    }
}
