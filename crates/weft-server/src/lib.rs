//! `weft serve`: a weft [`Log`](weft::Log) as a network service.
//!
//! * HTTP with JSON for every operation of the log (append, batches,
//!   conditional appends, append ids, reads by seqnum and by version, tip,
//!   streams, per-view KV, trim, status), usable from curl and a browser;
//! * `GET /v1/subscribe`: server-sent events, backlog then live, resumable
//!   from a seqnum (`Last-Event-ID`);
//! * `GET /v1/session`: a WebSocket on which appends are pipelined (many in
//!   flight on one connection, answers in order);
//! * `/healthz`, `/readyz`, `/metrics`, request logs (`tracing`);
//! * bearer tokens with scopes, TLS from PEM files, limits on bodies,
//!   connections, requests and in-flight bytes, per-request deadlines.
//!
//! The routes and bodies are in `openapi.yaml` beside this crate's
//! manifest, the behaviour in `docs/SERVER.md`. The wire types are the
//! `weft-api` crate's, shared with the Rust client (`weft-client`).
//!
//! Layout: [`options`] (what a server is configured with), [`auth`]
//! (tokens and scopes), [`state`] (what handlers share), [`reply`] (errors
//! as answers), [`routes`] (one module per group of routes), [`limits`]
//! (the middleware that sheds load and applies deadlines), [`metrics`],
//! [`run`] (listening, TLS, draining).

pub mod auth;
pub mod events;
pub mod limits;
pub mod metrics;
pub mod options;
pub mod reply;
pub mod routes;
pub mod run;
pub mod state;

pub use auth::{Scope, Tokens};
pub use options::{Limits, ServerOptions, TlsFiles};
pub use routes::router;
pub use run::{Running, serve};
pub use state::{Role, Shared};
