//! The middleware every request passes: sheds load over the limits,
//! applies the per-request deadline, counts, and writes the request log.
//!
//! Shedding answers at once (`503`, kind `unavailable`, `Retry-After`)
//! instead of queueing: a client that retries later costs nothing
//! meanwhile, and the server's memory stays bounded. Subscriptions and
//! sessions have no deadline (they are long by nature); a session applies
//! the deadline to each of its appends.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use weft::{Error, ErrorKind};

use crate::reply::ApiError;
use crate::state::Shared;

/// The request log's `tracing` target.
pub const REQUEST_LOG_TARGET: &str = "weft_server::request";

fn long_lived(path: &str) -> bool {
    path == "/v1/subscribe" || path == "/v1/session"
}

/// Sheds, times out, counts and logs one request.
pub async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let started = weft::clock::monotonic_now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let retry_ms = u64::try_from(shared.options.limits.retry_after.as_millis()).unwrap_or(100);
    let over_connections = request
        .extensions()
        .get::<crate::run::OverConnectionLimit>()
        .is_some();
    let admitted = if over_connections {
        Err("too many open connections")
    } else {
        admit(&shared, &request)
    };
    let response = match admitted {
        Err(why) => {
            shared.counters.shed.fetch_add(1, Ordering::Relaxed);
            let mut response = ApiError::new(Error::new(ErrorKind::Unavailable, why))
                .retry_after(retry_ms)
                .into_response();
            if over_connections {
                // The connection's slot is for refusing, not serving:
                // hand it back once this answer is written.
                response.headers_mut().insert(
                    header::CONNECTION,
                    axum::http::HeaderValue::from_static("close"),
                );
            }
            response
        }
        Ok(permits) => {
            let response = if long_lived(&path) {
                // A subscription or session holds its request slot for as
                // long as it is open, not just until its answer starts: the
                // session's socket task takes the slot from the request,
                // the subscription's body keeps it until the stream ends.
                let held = HeldSlot(Arc::new(permits));
                let mut request = request;
                request.extensions_mut().insert(held.clone());
                let response = next.run(request).await;
                return finish(
                    &shared,
                    &method,
                    &path,
                    started,
                    response.map(|body| {
                        axum::body::Body::from_stream(futures::StreamExt::map(
                            body.into_data_stream(),
                            move |chunk| {
                                let _slot = &held;
                                chunk
                            },
                        ))
                    }),
                );
            } else {
                let deadline = shared.options.limits.request_timeout;
                match tokio::time::timeout(deadline, next.run(request)).await {
                    Ok(response) => response,
                    Err(_) => past_deadline(&method).into_response(),
                }
            };
            drop(permits);
            response
        }
    };
    finish(&shared, &method, &path, started, response)
}

/// Counts and logs an answered request.
fn finish(
    shared: &Shared,
    method: &Method,
    path: &str,
    started: tokio::time::Instant,
    response: Response,
) -> Response {
    shared.counters.requests.fetch_add(1, Ordering::Relaxed);
    let kind = response.extensions().get::<ErrorKind>().copied();
    if let Some(kind) = kind {
        shared.counters.error(kind);
    }
    tracing::info!(
        target: REQUEST_LOG_TARGET,
        method = %method,
        path = %path,
        status = response.status().as_u16(),
        kind = kind.map(ErrorKind::as_str),
        micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        "request"
    );
    response
}

/// A request that ran out of time: a write's outcome is unknown
/// (`indeterminate`, retry with its id); a read can simply be retried.
fn past_deadline(method: &Method) -> ApiError {
    if method == Method::GET || method == Method::HEAD {
        ApiError::new(Error::new(
            ErrorKind::Unavailable,
            "the request did not finish within the server's deadline",
        ))
    } else {
        ApiError::new(Error::new(
            ErrorKind::Indeterminate,
            "the request did not finish within the server's deadline; it may have taken effect",
        ))
    }
}

/// The request slot of an open subscription or session; dropping the last
/// clone frees it.
#[derive(Clone)]
pub struct HeldSlot(#[allow(dead_code)] Arc<Permits>);

/// The permits a request holds while it is served.
struct Permits {
    _request: tokio::sync::OwnedSemaphorePermit,
    _bytes: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Takes a request slot and, for a request with a body, its bytes.
fn admit(shared: &Shared, request: &Request) -> Result<Permits, &'static str> {
    if shared.is_shutting_down() {
        return Err("the server is shutting down");
    }
    let slot = Arc::clone(&shared.requests)
        .try_acquire_owned()
        .map_err(|_| "too many requests in flight")?;
    let has_body = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::DELETE
    );
    let bytes = if has_body {
        let limit = shared.options.limits.max_body_bytes;
        // A body without a length may be as long as the limit.
        let len = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(limit)
            .min(limit)
            .max(1);
        let permits = u32::try_from(len).unwrap_or(u32::MAX);
        Some(
            Arc::clone(&shared.body_bytes)
                .try_acquire_many_owned(permits)
                .map_err(|_| "too many request bytes in flight")?,
        )
    } else {
        None
    };
    Ok(Permits {
        _request: slot,
        _bytes: bytes,
    })
}
