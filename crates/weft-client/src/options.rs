//! How a client connects.

use std::time::Duration;

/// Options of a [`RemoteStorage`](crate::RemoteStorage).
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// A bearer token (`WEFT_TOKEN` in the command).
    pub token: Option<String>,
    /// Extra trusted root certificates, PEM (a server with a private CA
    /// or a self-signed certificate).
    pub ca_pem: Option<Vec<u8>>,
    /// How long one request may take.
    pub request_timeout: Duration,
    /// How long to wait for a TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// How long a request keeps trying other endpoints (or the same one)
    /// when it could not be sent, was shed (`unavailable`), or was a write
    /// a follower refused: a standby takes a bucket log over only once the
    /// old leader's lease lapsed.
    pub retry_for: Duration,
    /// How long an append waits for the handle's feed to announce it.
    pub feed_wait: Duration,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            token: None,
            ca_pem: None,
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            retry_for: Duration::from_secs(30),
            feed_wait: Duration::from_secs(5),
        }
    }
}
