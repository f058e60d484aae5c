//! # weft-console — the web console of `weft serve`
//!
//! Plain HTML, CSS and ES modules (no framework, no bundler, nothing from a
//! CDN), built into the binary with `include_bytes!` so the console works
//! offline and ships with the server. The server maps `GET /` to
//! [`asset("")`](asset) and `GET /console/{path}` to [`asset(path)`](asset);
//! the page talks to the server only through its public HTTP API
//! (`/v1/status`, `/v1/streams`, `/v1/entries`, `/v1/subscribe`).
//!
//! What the page shows: the writer's status (backend, leader or follower,
//! lease, tip), a throughput chart sampled from `/v1/status`, the streams
//! with their versions and entry counts, a live tail, one entry's view
//! (payload as text, JSON or hex) and jumps to a seqnum or to a stream's
//! version. A token typed into the page is sent as a bearer token.

mod assets;

pub use assets::{asset, asset_paths};
