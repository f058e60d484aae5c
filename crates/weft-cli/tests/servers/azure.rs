//! The `weft` command on `az://` locations, against the real Azurite test
//! server that `scripts/test.sh` starts: `inspect` and `verify` over a log
//! the real bucket `Producer` wrote, `append` and `read` of a bucket log,
//! and the one-line errors of a missing log, a wrong key and a dead
//! endpoint.
//!
//! Every test FAILS (never skips) when the server's env is missing.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::Value;
use weft::connect::AzureSettings;
use weft::wal::Producer;

const BIN: &str = env!("CARGO_BIN_EXE_weft");
const NO_SERVER: &str = "run scripts/test.sh (it starts Azurite and exports its env)";

fn required(key: &str) -> String {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{key} is not set: {NO_SERVER}"),
    }
}

/// A fresh prefix on the test server: its settings and the `az://` URL.
fn container(test: &str) -> (AzureSettings, String) {
    let container = required("WEFT_TEST_AZURE_CONTAINER");
    let endpoint = required("WEFT_TEST_AZURE_ENDPOINT");
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let prefix = format!("weft-cli-tests/{test}/{}-{nanos}", std::process::id());
    let mut s = AzureSettings::from_env(&container, &prefix).expect("Azure env");
    s.endpoint = Some(endpoint);
    s.allow_http = true;
    (s, format!("az://{container}/{prefix}"))
}

fn weft_at(endpoint: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .args(["--endpoint", endpoint, "--allow-http"])
        .envs(env.iter().copied())
        .env_remove("RUST_LOG")
        // Never the user's own cache directory.
        .env(
            "WEFT_CACHE_DIR",
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("weft-cli-cache"),
        )
        .stdin(Stdio::null())
        .output()
        .expect("run weft")
}

fn weft(args: &[&str]) -> Output {
    weft_at(&required("WEFT_TEST_AZURE_ENDPOINT"), args, &[])
}

fn ok(out: Output) -> String {
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "weft failed ({:?}): {text} {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn one_line_error(out: &Output, code: i32, kind: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("weft: ") && err.trim_end().ends_with(&format!("({kind})")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_written_log_on_azurite_inspects_and_verifies() {
    let (settings, url) = container("producer_log");
    let store = settings.build().unwrap();
    let producer = Producer::builder(store, "wal/manifest", "wal/seg")
        .with_flush_interval(Duration::from_millis(5))
        .open()
        .await
        .unwrap();
    let first = producer
        .append(
            vec![Bytes::from_static(b"one"), Bytes::from_static(b"two")],
            None,
        )
        .await
        .unwrap();
    first.wait().await.unwrap();
    producer.close().await.unwrap();

    let v: Value = serde_json::from_str(
        ok(weft(&[
            "inspect",
            &url,
            "--manifest",
            "wal/manifest",
            "--json",
        ]))
        .trim(),
    )
    .unwrap();
    assert_eq!(v["epoch"], 1);
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{v}");
    assert_eq!(entries[0]["count"], 2);
    let out = ok(weft(&["verify", &url, "--manifest", "wal/manifest"]));
    assert!(out.contains("no problems"), "{out}");
}

#[test]
fn azure_store_failures_are_one_line_errors() {
    let (_, url) = container("failures");
    let endpoint = required("WEFT_TEST_AZURE_ENDPOINT");
    one_line_error(&weft(&["inspect", &url]), 3, "not_found");
    // A valid key that is not the account's (the test server's is random).
    let wrong = [(
        "AZURE_STORAGE_ACCOUNT_KEY",
        weft::connect::EMULATOR_ACCOUNT_KEY,
    )];
    one_line_error(
        &weft_at(&endpoint, &["inspect", &url], &wrong),
        7,
        "permission_denied",
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let account = required("AZURE_STORAGE_ACCOUNT_NAME");
    let dead = format!("http://127.0.0.1:{port}/{account}");
    one_line_error(&weft_at(&dead, &["verify", &url], &[]), 9, "unavailable");
}

fn append(url: &str, args: &[&str]) -> Value {
    let mut all = vec!["append", url, "--json"];
    all.extend_from_slice(args);
    let out = ok(weft(&all));
    assert_eq!(out.lines().count(), 1, "{out}");
    serde_json::from_str(out.trim()).unwrap()
}

#[test]
fn an_az_log_is_written_and_read_through_the_cli() {
    let (_, url) = container("shared_log");
    one_line_error(&weft(&["read", &url]), 3, "not_found");
    let first = append(&url, &["--create", "-t", "orders", "placed"]);
    assert_eq!(
        (first["seqnum"].as_u64(), first["stream_version"].as_u64()),
        (Some(0), Some(0))
    );
    // Each `weft append` is a new writer: it fences the previous one and
    // rebuilds the stream versions from the container.
    one_line_error(
        &weft(&["append", &url, "-t", "orders", "--if-version", "0", "again"]),
        5,
        "conflict",
    );
    let second = append(&url, &["-t", "orders", "--if-version", "1", "shipped"]);
    assert_eq!(
        (second["seqnum"].as_u64(), second["stream_version"].as_u64()),
        (Some(1), Some(1))
    );
    let read = ok(weft(&["read", &url, "--json"]));
    let data: Vec<String> = read
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["data"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(data, [b64(b"placed"), b64(b"shipped")]);
}

fn b64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}
