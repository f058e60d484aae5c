//! Per-view KV: get, set, delete, compare-and-set (set-if-absent and
//! delete-if are its two special cases) and increment, scoped by a view's
//! tag.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use weft::ViewKv;
use weft_api::body::{KvCas, KvCounter, KvIncrement, KvValue, KvWritten};

use crate::reply::{ApiResult, rejection};
use crate::routes::log::writable;
use crate::state::Shared;

type KeyPath = Result<Path<(String, String)>, PathRejection>;

fn view_kv(shared: &Shared, path: KeyPath, write: bool) -> ApiResult<(ViewKv, String)> {
    let Path((scope, key)) = path.map_err(rejection)?;
    let log = if write {
        writable(shared)?
    } else {
        shared.log()
    };
    Ok((log.kv(scope.parse()?)?, key))
}

/// `GET /v1/kv/{scope}/{key}`.
pub async fn get(State(shared): State<Arc<Shared>>, path: KeyPath) -> ApiResult<Json<KvValue>> {
    let (kv, key) = view_kv(&shared, path, false)?;
    Ok(Json(KvValue {
        data: kv.get(&key).await?,
    }))
}

/// `PUT /v1/kv/{scope}/{key}`: writes unconditionally (`data: null`
/// deletes).
pub async fn set(
    State(shared): State<Arc<Shared>>,
    path: KeyPath,
    body: Result<Json<KvValue>, JsonRejection>,
) -> ApiResult<Json<KvWritten>> {
    let Json(body) = body.map_err(rejection)?;
    let (kv, key) = view_kv(&shared, path, true)?;
    match body.data {
        Some(data) => kv.set(&key, data).await?,
        None => kv.delete(&key).await?,
    }
    Ok(Json(KvWritten { written: true }))
}

/// `DELETE /v1/kv/{scope}/{key}`: deletes unconditionally.
pub async fn delete(
    State(shared): State<Arc<Shared>>,
    path: KeyPath,
) -> ApiResult<Json<KvWritten>> {
    let (kv, key) = view_kv(&shared, path, true)?;
    kv.delete(&key).await?;
    Ok(Json(KvWritten { written: true }))
}

/// `POST /v1/kv/{scope}/{key}/cas`.
pub async fn cas(
    State(shared): State<Arc<Shared>>,
    path: KeyPath,
    body: Result<Json<KvCas>, JsonRejection>,
) -> ApiResult<Json<KvWritten>> {
    let Json(body) = body.map_err(rejection)?;
    let (kv, key) = view_kv(&shared, path, true)?;
    let written = kv
        .compare_and_set(&key, body.expected.as_deref(), body.data)
        .await?;
    Ok(Json(KvWritten { written }))
}

/// `POST /v1/kv/{scope}/{key}/increment`.
pub async fn increment(
    State(shared): State<Arc<Shared>>,
    path: KeyPath,
    body: Result<Json<KvIncrement>, JsonRejection>,
) -> ApiResult<Json<KvCounter>> {
    let Json(body) = body.map_err(rejection)?;
    let (kv, key) = view_kv(&shared, path, true)?;
    Ok(Json(KvCounter {
        value: kv.increment(&key, body.delta).await?,
    }))
}
