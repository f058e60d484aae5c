//! The Azurite test server, as seen by tests.
//!
//! `scripts/azurite.sh start` (called by `scripts/test.sh`) writes an env
//! file with the blob endpoint, container and account credentials; the test
//! run sources it. Every test gets its own blob-name prefix, so tests share
//! the server without seeing each other's blobs. A test that needs the
//! server and finds no env FAILS: it never skips.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use weft::connect::AzureSettings;

/// The message every Azure test fails with when the server env is missing.
pub const NO_SERVER: &str = "run scripts/test.sh (it starts Azurite)";

fn required(key: &str) -> String {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{key} is not set: {NO_SERVER}"),
    }
}

/// The test server's settings, rooted at a fresh prefix `weft-tests/<test>/<ulid>`.
pub fn settings(test: &str) -> AzureSettings {
    let container = required("WEFT_TEST_AZURE_CONTAINER");
    let endpoint = required("WEFT_TEST_AZURE_ENDPOINT");
    required("AZURE_STORAGE_ACCOUNT_NAME");
    required("AZURE_STORAGE_ACCOUNT_KEY");
    let prefix = format!("weft-tests/{test}/{}", ulid::Ulid::new());
    let mut s = AzureSettings::from_env(container, prefix).expect("Azure env is valid");
    s.endpoint = Some(endpoint);
    s.allow_http = true;
    s
}

/// A store on the test server under a fresh prefix, plus its settings.
pub fn store(test: &str) -> (Arc<dyn ObjectStore>, AzureSettings) {
    let s = settings(test);
    (s.build().expect("build Azure store"), s)
}

/// A store at the same server and prefix as `s`, but with a wrong key (a
/// valid base64 key that is not the account's).
pub fn wrong_credentials(s: &AzureSettings) -> Arc<dyn ObjectStore> {
    let mut bad = s.clone();
    bad.access_key = Some(weft::connect::EMULATOR_ACCOUNT_KEY.to_string());
    assert_ne!(
        bad.access_key, s.access_key,
        "the test server must not use the emulator's published key"
    );
    bad.build().expect("build Azure store")
}

/// A store whose endpoint refuses connections (a closed port on 127.0.0.1),
/// with short timeouts and no HTTP-level retries.
pub fn unreachable(s: &AzureSettings) -> Arc<dyn ObjectStore> {
    // Bind and drop a listener: the port is free and nothing answers on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a probe port")
        .port();
    let account = s.account.as_deref().expect("the test env names an account");
    let mut bad = s.clone();
    bad.endpoint = Some(format!("http://127.0.0.1:{port}/{account}"));
    bad.connect_timeout = Some(Duration::from_millis(500));
    bad.request_timeout = Some(Duration::from_secs(2));
    bad.http_retries = Some(0);
    bad.build().expect("build Azure store")
}
