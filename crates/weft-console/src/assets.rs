//! The table of embedded files and the lookup the server calls.

/// One embedded file: its path under `/console/`, content type and bytes.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
// Module scripts must come with a JavaScript MIME type or browsers refuse
// to run them.
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

macro_rules! embed {
    ($path:literal, $content_type:expr) => {
        Asset {
            path: $path,
            content_type: $content_type,
            bytes: include_bytes!(concat!("../assets/", $path)),
        }
    };
}

const ASSETS: &[Asset] = &[
    embed!("index.html", HTML),
    embed!("console.css", CSS),
    embed!("favicon.svg", SVG),
    embed!("js/main.js", JS),
    embed!("js/api.js", JS),
    embed!("js/dom.js", JS),
    embed!("js/payload.js", JS),
    embed!("js/status.js", JS),
    embed!("js/chart.js", JS),
    embed!("js/streams.js", JS),
    embed!("js/tail.js", JS),
    embed!("js/entry.js", JS),
    embed!("js/token.js", JS),
];

/// The paths of every embedded file, as [`asset`] takes them.
pub fn asset_paths() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|a| a.path)
}

/// The embedded file at `path` (relative to `/console/`, no leading
/// slash): its content type and bytes, or `None` when there is no such
/// file. `""` and `"index.html"` give the page.
///
/// Only exact names match, so a path with `..`, a query or a leading slash
/// finds nothing rather than anything outside the table.
pub fn asset(path: &str) -> Option<(&'static str, &'static [u8])> {
    let path = if path.is_empty() { "index.html" } else { path };
    ASSETS
        .iter()
        .find(|a| a.path == path)
        .map(|a| (a.content_type, a.bytes))
}

#[cfg(test)]
mod tests;
