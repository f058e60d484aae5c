//! The web console at `/`: the `weft-console` crate's page and assets,
//! built into the binary.

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::reply::ApiError;

/// `GET /`: the console's page.
pub async fn index() -> Response {
    asset_response("")
}

/// `GET /console/{*path}`: the page's stylesheet, modules and icon.
pub async fn asset(Path(path): Path<String>) -> Response {
    asset_response(&path)
}

fn asset_response(path: &str) -> Response {
    match weft_console::asset(path) {
        // no-cache: the browser revalidates, so a new binary's console is
        // never mixed with an old one's cached modules.
        Some((content_type, bytes)) => (
            [
                (header::CONTENT_TYPE, content_type),
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
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
