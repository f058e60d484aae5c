//! A server on 127.0.0.1 (any free port) in this test process, and a
//! client of it.

#![allow(dead_code)]

use std::time::Duration;

use weft::Log;
use weft_client::{RemoteOptions, RemoteStorage};
use weft_server::{Role, ServerOptions, Shared};
use weft_testkit::conformance::Fixture;

/// Options for a test server: any free loopback port.
pub(crate) fn options() -> ServerOptions {
    ServerOptions {
        listen: "127.0.0.1:0".parse().expect("address"),
        ..ServerOptions::default()
    }
}

/// Client options for tests: a dead server is noticed in seconds.
pub(crate) fn client_options() -> RemoteOptions {
    RemoteOptions {
        retry_for: Duration::from_secs(5),
        ..RemoteOptions::default()
    }
}

/// Serves `log` and returns a fixture whose log is a client of it.
pub(crate) async fn served(log: Log, backend: &str, guard: impl Send + Sync + 'static) -> Fixture {
    let shared = Shared::new(log, Role::Leader, backend, options());
    let running = weft_server::serve(shared).await.expect("serve");
    let remote = RemoteStorage::connect(&running.url(), client_options())
        .await
        .expect("connect");
    Fixture::new(Log::new(remote)).with_guard((running, guard))
}
