//! The web console at `/`.
//!
//! The console's page and assets come from the `weft-console` crate when
//! it is part of the build; until then `/` is a short page that says what
//! the server is and points at the API.

use axum::extract::Path;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

use crate::reply::ApiError;

const PLACEHOLDER: &str = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>weft</title></head><body><h1>weft</h1>\
<p>This is a weft log server. The API is under <code>/v1</code> \
(<a href=\"/v1/status\">status</a>, <a href=\"/v1/streams\">streams</a>, \
<a href=\"/v1/entries\">entries</a>); health at <a href=\"/healthz\">/healthz</a>, \
metrics at <a href=\"/metrics\">/metrics</a>.</p></body></html>\n";

/// `GET /`.
pub async fn index() -> Response {
    ([(header::CACHE_CONTROL, "no-cache")], Html(PLACEHOLDER)).into_response()
}

/// `GET /console/{*path}`.
pub async fn asset(Path(path): Path<String>) -> Response {
    ApiError::new(weft::Error::new(
        weft::ErrorKind::NotFound,
        format!("no console asset {path}"),
    ))
    .into_response()
}
