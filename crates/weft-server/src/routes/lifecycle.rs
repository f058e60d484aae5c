//! A stream's lifecycle: `GET` and `POST /v1/streams/{tag}/lifecycle`.
//!
//! A stream truncated before a version, or deleted softly, reads from its
//! start through every by-tag route (see `weft::log::lifecycle`); its
//! numbering goes on and its entries stay in the log until retention or a
//! trim drops them. Changing it takes the admin scope, as a trim does.
//!
//! `POST /v1/streams/{tag}/erase` is the hard delete: it erases the
//! payloads of the entries the start hides (`weft::Log::erase_stream`),
//! also with the admin scope.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};
use weft::{Error, LogTag, StreamLifecycle};

use crate::reply::{ApiResult, rejection};
use crate::routes::log::{tag, writable};
use crate::state::Shared;

/// Body of `POST /v1/streams/{tag}/lifecycle`: exactly one change.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LifecycleChange {
    /// Hide the stream's entries below this version.
    truncate_before: Option<u64>,
    /// Hide every entry the stream has so far.
    #[serde(default)]
    delete: bool,
}

fn body(t: &LogTag, lifecycle: StreamLifecycle, next_version: u64) -> Value {
    json!({
        "tag": t.to_string(),
        "start_version": lifecycle.start_version,
        "start_seqnum": lifecycle.start_seqnum,
        "deleted": lifecycle.deleted,
        "next_version": next_version,
    })
}

/// `GET /v1/streams/{tag}/lifecycle`.
pub async fn show(
    State(shared): State<Arc<Shared>>,
    name: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let Path(name) = name.map_err(rejection)?;
    let t = tag(&name)?;
    let log = shared.log();
    let lifecycle = log.stream_lifecycle(&t).await?;
    Ok(Json(body(&t, lifecycle, log.next_version(&t).await?)))
}

/// `POST /v1/streams/{tag}/lifecycle` with `{"truncate_before": N}` or
/// `{"delete": true}`.
pub async fn change(
    State(shared): State<Arc<Shared>>,
    name: Result<Path<String>, PathRejection>,
    change: Result<Json<LifecycleChange>, JsonRejection>,
) -> ApiResult<Json<Value>> {
    let Path(name) = name.map_err(rejection)?;
    let Json(change) = change.map_err(rejection)?;
    let t = tag(&name)?;
    let log = writable(&shared)?;
    let lifecycle = match (change.truncate_before, change.delete) {
        (Some(before), false) => log.truncate_stream(&t, before).await?,
        (None, true) => log.delete_stream(&t).await?,
        _ => {
            return Err(Error::invalid_input(
                "give one change: {\"truncate_before\": N} or {\"delete\": true}",
            )
            .into());
        }
    };
    Ok(Json(body(&t, lifecycle, log.next_version(&t).await?)))
}

/// `POST /v1/streams/{tag}/erase` (any JSON object as the body, `{}`):
/// erases the payloads of the entries the stream's start hides.
pub async fn erase(
    State(shared): State<Arc<Shared>>,
    name: Result<Path<String>, PathRejection>,
    request: Result<Json<serde_json::Map<String, Value>>, JsonRejection>,
) -> ApiResult<Json<weft_api::body::Erased>> {
    let Path(name) = name.map_err(rejection)?;
    let Json(request) = request.map_err(rejection)?;
    if let Some(field) = request.keys().next() {
        return Err(Error::invalid_input(format!(
            "an erase takes no field (got {field:?}): it erases what the stream's start hides"
        ))
        .into());
    }
    let t = tag(&name)?;
    let log = writable(&shared)?;
    let erased = log.erase_stream(&t).await;
    // Even after an error: some entries may be erased, and the cached
    // events of entries must not outlive their payloads.
    shared.events.clear();
    let erased = erased?;
    Ok(Json(weft_api::body::Erased {
        tag: t.to_string(),
        erased,
    }))
}
