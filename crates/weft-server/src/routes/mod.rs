//! The routes: one table ([`ROUTES`]) says every route's method, path and
//! the scope a token needs for it; [`router`] wires the handlers, and the
//! OpenAPI test and the token test walk the same table.

pub mod console;
pub mod kv;
pub mod lifecycle;
pub mod log;
pub mod ops;
pub mod session;
pub mod subscribe;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use weft::{Error, ErrorKind};

use crate::auth::{Scope, Verdict};
use crate::limits;
use crate::reply::ApiError;
use crate::state::Shared;

/// One route: method, path (axum syntax, as in `openapi.yaml`) and the
/// scope a token needs (`None`: open even when tokens are configured).
#[derive(Clone, Copy, Debug)]
pub struct RouteSpec {
    /// The HTTP method.
    pub method: &'static str,
    /// The path, `{name}` for parameters.
    pub path: &'static str,
    /// The scope a token needs.
    pub scope: Option<Scope>,
}

const fn route(method: &'static str, path: &'static str, scope: Option<Scope>) -> RouteSpec {
    RouteSpec {
        method,
        path,
        scope,
    }
}

const READ: Option<Scope> = Some(Scope::Read);
const APPEND: Option<Scope> = Some(Scope::Append);
const ADMIN: Option<Scope> = Some(Scope::Admin);

/// Every route of the server.
///
/// Open routes: the console's page and assets (the page asks for a token
/// and sends it with its API calls) and the health probes (load balancers
/// carry no token; they tell nothing but up/ready and the role).
pub const ROUTES: &[RouteSpec] = &[
    route("GET", "/v1/status", READ),
    route("GET", "/v1/tip", READ),
    route("GET", "/v1/streams", READ),
    route("GET", "/v1/streams/{tag}", READ),
    route("GET", "/v1/streams/{tag}/entries", READ),
    route("GET", "/v1/streams/{tag}/lifecycle", READ),
    route("POST", "/v1/streams/{tag}/lifecycle", ADMIN),
    route("POST", "/v1/streams/{tag}/erase", ADMIN),
    route("GET", "/v1/entries", READ),
    route("GET", "/v1/entries/prev", READ),
    route("GET", "/v1/entries/{seqnum}", READ),
    route("POST", "/v1/append", APPEND),
    route("GET", "/v1/subscribe", READ),
    route("GET", "/v1/session", APPEND),
    route("POST", "/v1/trim", ADMIN),
    route("GET", "/v1/kv/{scope}/{key}", READ),
    route("PUT", "/v1/kv/{scope}/{key}", APPEND),
    route("DELETE", "/v1/kv/{scope}/{key}", APPEND),
    route("POST", "/v1/kv/{scope}/{key}/cas", APPEND),
    route("POST", "/v1/kv/{scope}/{key}/increment", APPEND),
    route("GET", "/metrics", READ),
    route("GET", "/healthz", None),
    route("GET", "/readyz", None),
    route("GET", "/", None),
    route("GET", "/console/{*path}", None),
];

/// The scope `method` on the route matched as `path` needs.
fn scope_of(method: &Method, path: &str) -> Option<Scope> {
    ROUTES
        .iter()
        .find(|r| r.method == method.as_str() && r.path == path)
        .and_then(|r| r.scope)
}

/// The router of a server sharing `shared`.
pub fn router(shared: Arc<Shared>) -> Router {
    let api = Router::new()
        .route("/v1/status", get(ops::status))
        .route("/v1/tip", get(log::tip))
        .route("/v1/streams", get(log::streams))
        .route("/v1/streams/{tag}", get(log::stream))
        .route("/v1/streams/{tag}/entries", get(log::stream_entries))
        .route(
            "/v1/streams/{tag}/lifecycle",
            get(lifecycle::show).post(lifecycle::change),
        )
        .route("/v1/streams/{tag}/erase", post(lifecycle::erase))
        .route("/v1/entries", get(log::entries))
        .route("/v1/entries/prev", get(log::prev))
        .route("/v1/entries/{seqnum}", get(log::entry))
        .route("/v1/append", post(log::append))
        .route("/v1/subscribe", get(subscribe::subscribe))
        .route("/v1/session", get(session::session))
        .route("/v1/trim", post(log::trim))
        .route(
            "/v1/kv/{scope}/{key}",
            get(kv::get).put(kv::set).delete(kv::delete),
        )
        .route("/v1/kv/{scope}/{key}/cas", post(kv::cas))
        .route("/v1/kv/{scope}/{key}/increment", post(kv::increment))
        .route("/metrics", get(ops::metrics))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/", get(console::index))
        .route("/console/{*path}", get(console::asset))
        .route_layer(middleware::from_fn_with_state(shared.clone(), authorize));
    api.fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(shared.options.limits.max_body_bytes))
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            limits::guard,
        ))
        .with_state(shared)
}

/// Lets a request in when its token has the route's scope.
async fn authorize(
    State(shared): State<Arc<Shared>>,
    matched: Option<MatchedPath>,
    request: Request,
    next: Next,
) -> Response {
    let Some(tokens) = &shared.options.tokens else {
        return next.run(request).await;
    };
    let path = matched.as_ref().map_or("", |m| m.as_str());
    let Some(mut scope) = scope_of(request.method(), path) else {
        return next.run(request).await;
    };
    if scope == Scope::Append && writes_log_settings(request.uri().path()) {
        scope = Scope::Admin;
    }
    match tokens.check(token_of(&request).as_deref(), scope) {
        Verdict::Allowed => next.run(request).await,
        Verdict::Unauthenticated => ApiError::new(Error::new(
            ErrorKind::PermissionDenied,
            "this server needs a bearer token (Authorization: Bearer TOKEN)",
        ))
        .with_status(StatusCode::UNAUTHORIZED)
        .into_response(),
        Verdict::Forbidden => ApiError::new(Error::new(
            ErrorKind::PermissionDenied,
            format!("the token lacks the {} scope", scope.as_str()),
        ))
        .into_response(),
    }
}

/// True for a KV write to the scope of a setting that changes what the log
/// keeps or shows — the retention policy (`_weft:retention`) or a stream's
/// start (`_weft:streams`) — which takes the admin scope, as `/v1/trim`
/// and the lifecycle route do, not the append scope of other KV writes.
/// Consumer positions (`_weft:consumers`) stay with append: a consumer
/// commits its own.
fn writes_log_settings(uri_path: &str) -> bool {
    let Some(rest) = uri_path.strip_prefix("/v1/kv/") else {
        return false;
    };
    let scope = percent_decode(rest.split('/').next().unwrap_or(""));
    scope == weft::retention::retention_scope().to_string()
        || scope == weft::log::lifecycle::streams_scope().to_string()
}

/// The request's token: the `Authorization: Bearer` header, else the
/// `access_token` query parameter (browsers' EventSource and WebSocket).
fn token_of(request: &Request) -> Option<String> {
    if let Some(value) = request.headers().get(axum::http::header::AUTHORIZATION) {
        let text = value.to_str().ok()?;
        let (scheme, token) = text.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_owned());
    }
    let query = request.uri().query()?;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == "access_token").then(|| percent_decode(v))
    })
}

/// Decodes `%XX` escapes (a token typed into a page may contain any
/// character); malformed escapes are kept as they are.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn not_found() -> ApiError {
    ApiError::new(Error::new(ErrorKind::NotFound, "no such route"))
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(Error::invalid_input("this route does not take that method"))
        .with_status(StatusCode::METHOD_NOT_ALLOWED)
}
