//! The web console: `GET /` is its page and `GET /console/{path}` its
//! assets, all built into the binary by the `weft-console` crate, so the
//! console works offline and always matches the server it ships with.

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::reply::ApiError;

/// `GET /`.
pub async fn index() -> Response {
    serve("")
}

/// `GET /console/{*path}`.
pub async fn asset(Path(path): Path<String>) -> Response {
    serve(&path)
}

fn serve(path: &str) -> Response {
    match weft_console::asset(path) {
        // no-cache: the browser revalidates, so a new server's console is
        // never mixed with an old one's modules.
        Some((content_type, bytes)) => (
            [
                (header::CONTENT_TYPE, content_type),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            bytes,
        )
            .into_response(),
        None => ApiError::new(weft::Error::new(
            weft::ErrorKind::NotFound,
            format!("no console asset {path}"),
        ))
        .into_response(),
    }
}
