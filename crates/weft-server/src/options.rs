//! What a server is configured with: plain settings, no components.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::auth::Tokens;

/// How a server listens and what it allows.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Where to listen (default `127.0.0.1:7070`: never a wider address
    /// unless asked).
    pub listen: SocketAddr,
    /// Bearer tokens; `None` lets every request in (the default, on a
    /// loopback address).
    pub tokens: Option<Tokens>,
    /// Serve HTTPS with these PEM files.
    pub tls: Option<TlsFiles>,
    /// Limits and deadlines.
    pub limits: Limits,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            tokens: None,
            tls: None,
            limits: Limits::default(),
        }
    }
}

/// A certificate chain and its private key, PEM.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The certificate chain (leaf first).
    pub cert: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Limits that keep a server's memory bounded whatever its clients do.
///
/// Over a limit, a request is answered `503` with kind `unavailable` and a
/// retry hint (`Retry-After`, `retry_after_ms`), never queued without
/// bound. Connections over `max_connections` wait in the kernel's accept
/// queue.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The largest request body, in bytes (a 16 MiB payload is about
    /// 22 MiB of base64).
    pub max_body_bytes: usize,
    /// Open connections at most.
    pub max_connections: usize,
    /// Requests being served at once (subscriptions and sessions count as
    /// one each while they are open).
    pub max_requests: usize,
    /// Request bodies being processed at once, in bytes.
    pub max_in_flight_bytes: usize,
    /// How long one request may take (subscriptions and sessions excepted;
    /// a session's appends each have it).
    pub request_timeout: Duration,
    /// Appends one session may have in flight before the server stops
    /// reading its socket.
    pub session_window: usize,
    /// The retry hint of a shed request.
    pub retry_after: Duration,
    /// How long a draining server waits for requests in flight.
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 32 << 20,
            max_connections: 4096,
            max_requests: 8192,
            max_in_flight_bytes: 256 << 20,
            request_timeout: Duration::from_secs(30),
            session_window: 1024,
            retry_after: Duration::from_millis(100),
            drain_timeout: Duration::from_secs(30),
        }
    }
}
