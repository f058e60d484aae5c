//! A server in this test process on any free loopback port, and helpers
//! to call it.

#![allow(dead_code)]

use std::sync::Arc;

use weft::Log;
use weft_server::{Role, Running, ServerOptions, Shared};

/// Options on any free loopback port.
pub(crate) fn options() -> ServerOptions {
    ServerOptions {
        listen: "127.0.0.1:0".parse().expect("address"),
        ..ServerOptions::default()
    }
}

/// Serves `log` as `role` with `options`.
pub(crate) async fn serve_with(log: Log, role: Role, options: ServerOptions) -> Running {
    let shared: Arc<Shared> = Shared::new(log, role, "memory", options);
    weft_server::serve(shared).await.expect("serve")
}

/// Serves a fresh memory log as the leader.
pub(crate) async fn serve() -> Running {
    serve_with(Log::memory(), Role::Leader, options()).await
}

/// An HTTP client.
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder().build().expect("client")
}

/// The error kind of an answer's body.
pub(crate) async fn kind_of(response: reqwest::Response) -> String {
    let body: serde_json::Value = response.json().await.expect("a JSON error body");
    body["error"]["kind"]
        .as_str()
        .expect("an error kind")
        .to_owned()
}
