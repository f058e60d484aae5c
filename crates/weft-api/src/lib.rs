//! The wire types of weft's network API (`weft serve`), shared by the
//! server (`weft-server`) and the Rust client (`weft-client`), so the two
//! cannot drift apart.
//!
//! * [`body`] — the JSON bodies of every route (payloads are base64,
//!   standard alphabet, padded, in fields named `data`).
//! * [`expected`] — a condition on a stream (a version or a state), as
//!   appends and conflict errors carry it.
//! * [`fault`] — the error body every non-2xx answer carries, and the one
//!   map between a [`weft::ErrorKind`] and an HTTP status.
//!
//! The routes themselves are described in the repository's `openapi.yaml`
//! (`crates/weft-server/openapi.yaml`) and in `docs/SERVER.md`.

pub mod b64;
pub mod body;
pub mod expected;
pub mod fault;

/// The version prefix of every API route.
pub const API_PREFIX: &str = "/v1";
