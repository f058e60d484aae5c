//! The server's tests, in one binary: each runs `weft serve`'s router in
//! this process on a free loopback port (`support/`), so none needs an
//! outside server.

#[path = "../support/mod.rs"]
mod support;

mod api;
mod malformed;
mod overload;
mod routes;
