//! Logs served by `weft serve` (`http://HOST:PORT`, `https://...`, or
//! several such addresses separated by commas): the commands that work on
//! a shared log (append, read, tail) reach them through the
//! `weft-client` backend, as any other log.

use weft::{Error, Log, Result};
use weft_client::{RemoteOptions, RemoteStorage};

/// True when `text` names a server.
pub(crate) fn is_remote(text: &str) -> bool {
    weft_client::is_remote(text)
}

/// Connects to the server(s) `text` names, with the token in
/// `$WEFT_TOKEN` and extra trusted roots from the PEM file in
/// `$WEFT_CA_CERT`; requests keep retrying for `retry_for` (the
/// command's `--deadline`).
///
/// Errors: `InvalidInput` (bad address, unreadable CA file),
/// `Unavailable` (no server answered), `PermissionDenied` (token).
pub(crate) async fn open(text: &str, retry_for: std::time::Duration) -> Result<Log> {
    let ca_pem = match std::env::var_os("WEFT_CA_CERT").filter(|v| !v.is_empty()) {
        Some(path) => Some(std::fs::read(&path).map_err(|e| {
            Error::io(
                format!(
                    "read $WEFT_CA_CERT {}",
                    std::path::Path::new(&path).display()
                ),
                e,
            )
        })?),
        None => None,
    };
    let options = RemoteOptions {
        token: std::env::var("WEFT_TOKEN").ok().filter(|t| !t.is_empty()),
        ca_pem,
        retry_for,
        ..RemoteOptions::default()
    };
    Ok(Log::new(RemoteStorage::connect(text, options).await?))
}
