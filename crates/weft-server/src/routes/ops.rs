//! Operations: status, health, readiness, metrics.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use weft_api::body::{Capabilities, Lease, Status};

use crate::reply::ApiResult;
use crate::state::{Role, Shared};

/// `GET /v1/status`: backend, role, tip, lease, counters.
pub async fn status(State(shared): State<Arc<Shared>>) -> ApiResult<Json<Status>> {
    let current = shared.current();
    let tip = current.log.tip().await?;
    let caps = current.log.storage().capabilities();
    let kv = current.log.storage().kv().is_ok();
    let lease = (shared.backend == "s3" || shared.backend == "az").then(|| Lease {
        holder: current.lease_holder.clone(),
        held_here: current.role == Role::Leader,
    });
    Ok(Json(Status {
        backend: shared.backend.clone(),
        role: current.role.as_str().to_owned(),
        tip: tip.next,
        first: tip.first,
        lease,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        appends_total: shared.counters.appends_total(),
        capabilities: Capabilities {
            read_only: caps.read_only || current.role == Role::Follower,
            durable: caps.durable,
            max_entry_bytes: caps.max_entry_bytes,
            append_ids: current.log.storage().supports_append_ids(),
            kv,
        },
        leader: current.leader.clone(),
    }))
}

/// `GET /healthz`: 200 while the process serves.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// Query of `GET /readyz`.
#[derive(Debug, Deserialize)]
pub struct ReadyQuery {
    role: Option<String>,
}

/// `GET /readyz[?role=leader]`: 200 with the role while the server serves
/// (with `role=leader`, only while it takes appends: a load balancer that
/// sends writes uses that); 503 while it drains or is not in that role.
pub async fn readyz(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<ReadyQuery>, QueryRejection>,
) -> Response {
    let role = shared.current().role;
    let wanted = query.ok().and_then(|Query(q)| q.role);
    let ready = !shared.is_shutting_down() && wanted.as_deref().is_none_or(|w| w == role.as_str());
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body =
        json!({"ready": ready, "role": role.as_str(), "draining": shared.is_shutting_down()});
    (status, Json(body)).into_response()
}

/// `GET /metrics`: Prometheus text.
pub async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let current = shared.current();
    let tip = current.log.tip().await.ok().map(|t| t.next);
    let mut text = shared.counters.render(current.role == Role::Leader, tip);
    if let Some(extra) = shared.extra_metrics() {
        text.push_str(&extra);
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
