//! The SeaweedFS test server, as seen by tests.
//!
//! `scripts/seaweedfs.sh start` (called by `scripts/test.sh`) writes an env
//! file with the server's endpoint, bucket and credentials; the test run
//! sources it. Every test gets its own key prefix, so tests share the server
//! without seeing each other's objects. A test that needs the server and
//! finds no env FAILS: it never skips.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use weft::connect::S3Settings;

/// The message every S3 test fails with when the server env is missing.
pub const NO_SERVER: &str = "run scripts/test.sh (it starts SeaweedFS)";

fn required(key: &str) -> String {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{key} is not set: {NO_SERVER}"),
    }
}

/// The test server's settings, rooted at a fresh prefix `weft-tests/<test>/<ulid>`.
pub fn settings(test: &str) -> S3Settings {
    let bucket = required("WEFT_TEST_S3_BUCKET");
    let endpoint = required("WEFT_TEST_S3_ENDPOINT");
    required("AWS_ACCESS_KEY_ID");
    required("AWS_SECRET_ACCESS_KEY");
    let prefix = format!("weft-tests/{test}/{}", ulid::Ulid::new());
    let mut s = S3Settings::from_env(bucket, prefix).expect("S3 env is valid");
    s.endpoint = Some(endpoint);
    s.allow_http = true;
    s.region.get_or_insert_with(|| "us-east-1".to_string());
    s
}

/// A store on the test server under a fresh prefix, plus the prefix.
pub fn store(test: &str) -> (Arc<dyn ObjectStore>, S3Settings) {
    let s = settings(test);
    (s.build().expect("build S3 store"), s)
}

/// A store at the same server and prefix as `s`, but with a wrong secret.
pub fn wrong_credentials(s: &S3Settings) -> Arc<dyn ObjectStore> {
    let mut bad = s.clone();
    bad.secret_access_key = Some("not-the-secret".to_string());
    bad.build().expect("build S3 store")
}

/// A store whose endpoint refuses connections (a closed port on 127.0.0.1),
/// with short timeouts and no HTTP-level retries.
pub fn unreachable(s: &S3Settings) -> Arc<dyn ObjectStore> {
    // Bind and drop a listener: the port is free and nothing answers on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a probe port")
        .port();
    let mut bad = s.clone();
    bad.endpoint = Some(format!("http://127.0.0.1:{port}"));
    bad.connect_timeout = Some(Duration::from_millis(500));
    bad.request_timeout = Some(Duration::from_secs(2));
    bad.http_retries = Some(0);
    bad.build().expect("build S3 store")
}
