//! `weft inspect`, `verify` and `wal dump` on a real S3-compatible server
//! (the SeaweedFS test server that `scripts/test.sh` starts), over a log
//! the real bucket `Producer` wrote and over the upstream buffer's objects.
//!
//! Every test FAILS (never skips) when the server's env is missing.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use serde_json::Value;
use weft::connect::S3Settings;
use weft::wal::Producer;

const BIN: &str = env!("CARGO_BIN_EXE_weft");
const NO_SERVER: &str = "run scripts/test.sh (it starts SeaweedFS and exports its env)";

fn required(key: &str) -> String {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{key} is not set: {NO_SERVER}"),
    }
}

/// A fresh prefix on the test server: its settings and the `s3://` URL.
fn bucket(test: &str) -> (S3Settings, String) {
    let bucket = required("WEFT_TEST_S3_BUCKET");
    let endpoint = required("WEFT_TEST_S3_ENDPOINT");
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let prefix = format!("weft-cli-tests/{test}/{}-{nanos}", std::process::id());
    let mut s = S3Settings::from_env(&bucket, &prefix).expect("S3 env");
    s.endpoint = Some(endpoint);
    s.allow_http = true;
    s.region.get_or_insert_with(|| "us-east-1".to_owned());
    let url = format!("s3://{bucket}/{prefix}");
    (s, url)
}

fn weft(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .args([
            "--endpoint",
            &required("WEFT_TEST_S3_ENDPOINT"),
            "--allow-http",
        ])
        .env_remove("RUST_LOG")
        // Never the user's own cache directory.
        .env("WEFT_CACHE_DIR", cache_dir())
        .stdin(Stdio::null())
        .output()
        .expect("run weft")
}

/// The cache directory the tests' `weft` runs keep bucket logs' numbers in.
fn cache_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("weft-cli-cache")
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

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

async fn put(store: &Arc<dyn ObjectStore>, path: &str, bytes: Vec<u8>) {
    store
        .put(&ObjectPath::parse(path).unwrap(), bytes.into())
        .await
        .expect("put to the test server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_written_log_inspects_verifies_and_dumps() {
    let (settings, url) = bucket("producer_log");
    let store = settings.build().unwrap();
    let producer = Producer::builder(store.clone(), "wal/manifest", "wal/seg")
        .with_flush_interval(Duration::from_millis(5))
        .open()
        .await
        .unwrap();
    let first = producer
        .append(
            vec![Bytes::from_static(b"one"), Bytes::from_static(b"two")],
            Some(Bytes::from_static(b"meta")),
        )
        .await
        .unwrap();
    first.wait().await.unwrap();
    let second = producer
        .append(vec![Bytes::from_static(b"three")], None)
        .await
        .unwrap();
    second.wait().await.unwrap();
    let version = producer.manifest_version().as_u16();
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
    assert_eq!(v["format_version"], version);
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{v}");
    assert_eq!(entries[0]["sequence"], 0);
    assert_eq!(entries[0]["count"], 2);
    assert_eq!(entries[0]["metadata"][0]["payload"], b64(b"meta"));
    assert!(
        entries[1]["location"]
            .as_str()
            .unwrap()
            .starts_with("wal/seg")
    );
    assert!(entries[1]["size"].as_u64().unwrap() > 0);

    let out = ok(weft(&["verify", &url, "--manifest", "wal/manifest"]));
    assert!(out.contains("no problems"), "{out}");

    let dump = ok(weft(&[
        "wal",
        "dump",
        &url,
        "--manifest",
        "wal/manifest",
        "--json",
    ]));
    let data: Vec<String> = dump
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["data"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(data, [b64(b"one"), b64(b"two"), b64(b"three")]);

    // Damage the first segment in place: verify finds it, dump refuses.
    let loc = entries[0]["location"].as_str().unwrap();
    let path = ObjectPath::parse(loc).unwrap();
    let mut bytes = store
        .get(&path)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    bytes[2] ^= 0x01;
    put(&store, loc, bytes).await;
    let out = weft(&["verify", &url, "--manifest", "wal/manifest"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("problem:"));
    one_line_error(
        &weft(&["wal", "dump", &url, "--manifest", "wal/manifest"]),
        6,
        "corrupt",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_buffer_objects_dump_from_a_bucket() {
    let a =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../weft/tests/fixtures/opendata-buffer-0.3/A");
    assert!(
        a.join("expected.json").is_file(),
        "the compatibility vectors are missing at {}",
        a.display()
    );
    let (settings, url) = bucket("upstream");
    let store = settings.build().unwrap();
    for name in [
        "manifest",
        "01M8R78R162CKXDFM04D3KMGZ1.batch",
        "01M8R78R17MPSNZRYF3VK32HQ6.batch",
    ] {
        put(
            &store,
            &format!("ingest/{name}"),
            std::fs::read(a.join("ingest").join(name)).unwrap(),
        )
        .await;
    }
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("expected.json")).unwrap()).unwrap();
    let want: Vec<(u64, String)> = expected["entries"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| {
            let seq = e["sequence"].as_u64().unwrap();
            e["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |r| (seq, r.as_str().unwrap().to_owned()))
        })
        .collect();
    let dump = ok(weft(&[
        "wal",
        "dump",
        &url,
        "--manifest",
        "ingest/manifest",
        "--json",
    ]));
    let got: Vec<(u64, String)> = dump
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["sequence"].as_u64().unwrap(),
                v["data"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(got, want);
    ok(weft(&["verify", &url, "--manifest", "ingest/manifest"]));
}

#[test]
fn store_failures_are_one_line_errors() {
    let (_, url) = bucket("failures");
    // Nothing at this prefix.
    one_line_error(&weft(&["inspect", &url]), 3, "not_found");
    // A wrong secret.
    let out = Command::new(BIN)
        .args([
            "inspect",
            &url,
            "--endpoint",
            &required("WEFT_TEST_S3_ENDPOINT"),
            "--allow-http",
        ])
        .env("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        .env("WEFT_CACHE_DIR", cache_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    one_line_error(&out, 7, "permission_denied");
    // Nobody listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(BIN)
        .args([
            "verify",
            &url,
            "--endpoint",
            &format!("http://127.0.0.1:{port}"),
            "--allow-http",
        ])
        .env("WEFT_CACHE_DIR", cache_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    one_line_error(&out, 9, "unavailable");
}

fn append(url: &str, args: &[&str]) -> Value {
    let mut all = vec!["append", url, "--json"];
    all.extend_from_slice(args);
    let out = ok(weft(&all));
    assert_eq!(out.lines().count(), 1, "{out}");
    serde_json::from_str(out.trim()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_log_is_written_read_tailed_and_checked_through_the_cli() {
    let (settings, url) = bucket("shared_log");
    one_line_error(&weft(&["read", &url]), 3, "not_found");
    one_line_error(
        &weft(&["append", &url, "-t", "orders", "x"]),
        3,
        "not_found",
    );

    let first = append(
        &url,
        &["--create", "-t", "orders", "-t", "orders:o-1", "placed"],
    );
    assert_eq!(
        (first["seqnum"].as_u64(), first["stream_version"].as_u64()),
        (Some(0), Some(0))
    );
    append(&url, &["-t", "audit", "seen"]);
    one_line_error(
        &weft(&["append", &url, "-t", "orders", "--if-version", "0", "again"]),
        5,
        "conflict",
    );
    let third = append(&url, &["-t", "orders", "--if-version", "1", "shipped"]);
    assert_eq!(
        (third["seqnum"].as_u64(), third["stream_version"].as_u64()),
        (Some(2), Some(1))
    );

    let read = ok(weft(&["read", &url, "--json"]));
    let lines: Vec<Value> = read
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{read}");
    assert_eq!(
        lines[0]["tags"],
        serde_json::json!(["orders", "orders:o-1"])
    );
    assert_eq!(lines[2]["data"], b64(b"shipped"));
    let orders = ok(weft(&["read", &url, "--tag", "orders", "--json"]));
    assert_eq!(orders.lines().count(), 2);

    // A tail follows appends made by other processes (each one a new writer).
    let tail = Command::new(BIN)
        .args([
            "tail",
            &url,
            "--json",
            "--from",
            "3",
            "--max",
            "1",
            "--timeout",
            "30",
        ])
        .args([
            "--endpoint",
            &required("WEFT_TEST_S3_ENDPOINT"),
            "--allow-http",
        ])
        .env("WEFT_CACHE_DIR", cache_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    append(&url, &["-t", "audit", "late"]);
    let out = tail.wait_with_output().unwrap();
    let tailed = ok(out);
    let v: Value = serde_json::from_str(tailed.trim()).unwrap();
    assert_eq!(
        (v["seqnum"].as_u64(), v["data"].as_str()),
        (Some(3), Some(b64(b"late").as_str()))
    );

    // The default manifest is the bucket log's own.
    let v: Value = serde_json::from_str(ok(weft(&["inspect", &url, "--json"])).trim()).unwrap();
    assert_eq!(v["format_version"], 5);
    assert_eq!(v["next_sequence"], 4);
    assert!(
        v["epoch"].as_u64().unwrap() >= 4,
        "every append claimed the log: {v}"
    );
    assert!(ok(weft(&["verify", &url])).contains("no problems"));

    // The same objects, copied to a directory, read the same through file://.
    let store = settings.build().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut listing = store.list(None);
    use futures::StreamExt;
    while let Some(meta) = listing.next().await {
        let meta = meta.unwrap();
        let bytes = store
            .get(&meta.location)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let target = tmp.path().join(meta.location.as_ref());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
    let file_url = format!("file://{}", tmp.path().canonicalize().unwrap().display());
    let from_files = ok(weft(&["read", &file_url, "--json"]));
    assert_eq!(from_files.lines().count(), 4);
    assert!(from_files.starts_with(&read), "{from_files}");
    ok(weft(&["verify", &file_url]));
}

/// Each `append` is a new writer (it claims the log): a retry with the
/// same `--id` is answered by the next one with the original.
#[test]
fn append_with_an_id_is_exactly_once_across_writers() {
    let (_settings, url) = bucket("append_id");
    let first = append(&url, &["--create", "-t", "orders", "--id", "o-1", "placed"]);
    append(&url, &["-t", "orders", "other"]);
    let again = append(&url, &["-t", "orders", "--id", "o-1", "placed"]);
    assert_eq!(again["seqnum"], first["seqnum"]);
    assert_eq!(again["duplicate"], true);
    assert_eq!(first.get("duplicate"), None);
    let read = ok(weft(&["read", &url, "--json"]));
    assert_eq!(read.lines().count(), 2, "{read}");
}

#[test]
fn snapshot_trims_and_gc_collects_what_it_superseded() {
    let (_, url) = bucket("snapshot_gc");
    for i in 0..5 {
        ok(weft(&[
            "append",
            &url,
            "--create",
            "--tag",
            "acct:1",
            &format!("op{i}"),
        ]));
    }
    let pointer: Value =
        serde_json::from_str(&ok(weft(&["snapshot", &url, "--through", "2", "--json"]))).unwrap();
    assert_eq!(pointer["through_seq"], 2);
    assert!(pointer["location"].as_str().unwrap().contains("snapshots"));
    let read = ok(weft(&["read", &url, "--json"]));
    let seqnums: Vec<u64> = read
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seqnum"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqnums, vec![3, 4]);
    // Numbering goes on where it was.
    let next: Value = serde_json::from_str(&ok(weft(&[
        "append",
        &url,
        "--tag",
        "acct:1",
        "--if-version",
        "5",
        "--json",
        "op5",
    ])))
    .unwrap();
    assert_eq!(
        (next["seqnum"].as_u64(), next["stream_version"].as_u64()),
        (Some(5), Some(5))
    );

    let dry: Value = serde_json::from_str(&ok(weft(&[
        "gc",
        &url,
        "--dry-run",
        "--grace-secs",
        "0",
        "--json",
    ])))
    .unwrap();
    let would = dry["deleted"].as_array().unwrap().len();
    assert_eq!(would, 3, "the segments of seqnums 0..=2: {dry}");
    let young: Value = serde_json::from_str(&ok(weft(&["gc", &url, "--json"]))).unwrap();
    assert!(
        young["deleted"].as_array().unwrap().is_empty(),
        "grace keeps young objects"
    );
    let done: Value =
        serde_json::from_str(&ok(weft(&["gc", &url, "--grace-secs", "0", "--json"]))).unwrap();
    assert_eq!(done["deleted"].as_array().unwrap().len(), would);
    ok(weft(&["verify", &url]));
    assert_eq!(ok(weft(&["read", &url, "--json"])).lines().count(), 3);
}

#[test]
fn append_read_and_tail_keep_the_logs_numbers_in_the_cache_dir() {
    let (_, url) = bucket("cache_dir");
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().to_str().unwrap();
    for i in 0..3 {
        let v = append(
            &url,
            &["-t", "t", &format!("e{i}"), "--create", "--cache-dir", dir],
        );
        assert_eq!(v["seqnum"], i);
    }
    let read = ok(weft(&[
        "read",
        &url,
        "--tag",
        "t",
        "--json",
        "--cache-dir",
        dir,
    ]));
    assert_eq!(read.lines().count(), 3);
    // One directory for the log, a writer's and a reader's index in it.
    let logs: Vec<_> = std::fs::read_dir(cache.path()).unwrap().flatten().collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    for role in ["writer", "reader"] {
        assert!(logs[0].path().join(role).join("index").is_dir(), "{role}");
    }
    // `none` keeps nothing.
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["read", &url, "--json", "--cache-dir", "none"])
        .args([
            "--endpoint",
            &required("WEFT_TEST_S3_ENDPOINT"),
            "--allow-http",
        ])
        .env("XDG_CACHE_HOME", empty.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(ok(out).lines().count(), 3);
    assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);
}

/// A service is writing the log (a library writer in this process, renewing
/// its lease): `weft append` refuses to fence it, naming it, and writes
/// nothing; with `--take-over` it fences it on purpose; once the writer
/// closes, appends go through at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_refuses_to_fence_a_running_writer_unless_taking_over() {
    use weft::storage::bucket::{BucketOptions, BucketStorage};
    use weft::{AppendRequest, ErrorKind, Log, LogTag};

    let (settings, url) = bucket("lease");
    let store = settings.build().unwrap();
    let tag = LogTag::new("orders").unwrap();
    let service = Log::new(
        BucketStorage::open(
            store.clone(),
            "",
            BucketOptions::default()
                .with_lease_renew_every(Duration::from_millis(500))
                .with_writer_name(Some("orders service".into())),
        )
        .await
        .unwrap(),
    );
    service
        .append(AppendRequest::new(tag.clone(), "placed"))
        .await
        .unwrap();

    let out = tokio::task::spawn_blocking({
        let url = url.clone();
        move || weft(&["append", &url, "--tag", "orders", "by hand"])
    })
    .await
    .unwrap();
    one_line_error(&out, 7, "locked");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("orders service") && err.contains("--take-over"),
        "{err}"
    );
    service
        .append(AppendRequest::new(tag.clone(), "shipped"))
        .await
        .expect("the service was not fenced");

    let out = tokio::task::spawn_blocking({
        let url = url.clone();
        move || weft(&["append", &url, "--take-over", "--tag", "orders", "by hand"])
    })
    .await
    .unwrap();
    ok(out);
    let fenced = service
        .append(AppendRequest::new(tag.clone(), "late"))
        .await
        .unwrap_err();
    assert_eq!(fenced.kind(), ErrorKind::Fenced);
    let _ = service.close().await;

    // The CLI's own writer released the lease when it closed.
    let started = std::time::Instant::now();
    let out = tokio::task::spawn_blocking({
        let url = url.clone();
        move || weft(&["append", &url, "--tag", "orders", "again"])
    })
    .await
    .unwrap();
    ok(out);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "no wait for a released lease"
    );
    let read = ok(weft(&["read", &url, "--json"]));
    assert_eq!(read.lines().count(), 4, "{read}");
}

/// `weft demo s3://...` runs the shop on that bucket (it used to make a
/// local directory named `s3:`), and a second run resumes from the bucket.
#[test]
fn demo_runs_on_a_bucket_and_resumes_there() {
    let (_, url) = bucket("demo");
    let cwd = tempfile::tempdir().unwrap();
    let run = || {
        Command::new(BIN)
            .args(["demo", &url, "--orders", "3"])
            .args([
                "--endpoint",
                &required("WEFT_TEST_S3_ENDPOINT"),
                "--allow-http",
            ])
            .current_dir(cwd.path())
            .env_remove("RUST_LOG")
            .env("WEFT_CACHE_DIR", cache_dir())
            .stdin(Stdio::null())
            .output()
            .expect("run weft demo")
    };
    let first = ok(run());
    assert!(first.contains("new log") && first.contains(&url), "{first}");
    let second = ok(run());
    assert!(second.contains("resuming"), "{second}");
    ok(weft(&["verify", &url]));
    let local: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
    assert!(local.is_empty(), "the demo made local files: {local:?}");
}

/// A log trimmed by `weft snapshot` is an expected state: with no cache
/// directory (a fresh index every time) no command on it warns, and
/// nothing on stderr carries colour codes when it is not a terminal.
#[test]
fn a_trimmed_log_without_a_cache_is_no_warning_and_stderr_has_no_colour() {
    let (_, url) = bucket("trimmed_quiet");
    for i in 0..4 {
        ok(weft(&[
            "append",
            &url,
            "--create",
            "--tag",
            "acct:1",
            &format!("op{i}"),
        ]));
    }
    ok(weft(&["snapshot", &url, "--through", "1"]));
    for args in [
        vec!["read", &url, "--cache-dir", "none"],
        vec![
            "append",
            &url,
            "--cache-dir",
            "none",
            "--tag",
            "acct:1",
            "op4",
        ],
        vec![
            "tail",
            &url,
            "--cache-dir",
            "none",
            "--from",
            "2",
            "--max",
            "1",
        ],
        vec!["verify", &url, "--cache-dir", "none"],
    ] {
        let out = weft(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?} wrote to stderr");
    }
    // Debug lines show up with -v: plain text, no escape sequences.
    let out = weft(&["-v", "read", &url, "--cache-dir", "none"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("DEBUG"), "{err}");
    assert!(!err.contains('\u{1b}'), "colour codes on a pipe: {err:?}");
}

/// A bucket writer's cache index (`--cache-dir`) whose row of stream `a`
/// is rewritten (valid fjall checksums) to continue at another version:
/// `verify` reports it (exit 1), `append` to that stream refuses with
/// `corrupt` (exit 6) instead of numbering from it, and the next `append`
/// rebuilds the index and continues where the log does.
#[test]
fn a_cache_index_that_disagrees_with_the_log_is_reported_and_not_trusted() {
    let (_, url) = bucket("tampered_cache");
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().to_str().unwrap();
    for i in 0..6 {
        let t = ["a", "b"][i % 2];
        append(
            &url,
            &["-t", t, &format!("e{i}"), "--create", "--cache-dir", dir],
        );
    }
    ok(weft(&["verify", &url, "--cache-dir", dir]));

    let index = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path().join("writer").join("index"))
        .find(|p| p.exists())
        .expect("the writer's cache index");
    {
        let db = fjall::Database::builder(index.join("store"))
            .open()
            .unwrap();
        let tags = db
            .keyspace("tags", fjall::KeyspaceCreateOptions::default)
            .unwrap();
        // The `tags` key of stream `a` (FORMATS.md, "The log index").
        let key = [1u8, 0, b'a', 0, 0];
        let mut row = tags.get(key).unwrap().unwrap().to_vec();
        let next = u64::from_le_bytes(row[8..16].try_into().unwrap());
        row[8..16].copy_from_slice(&(next + 5).to_le_bytes());
        tags.insert(key, row).unwrap();
        db.persist(fjall::PersistMode::SyncAll).unwrap();
    }

    let found = weft(&["verify", &url, "--cache-dir", dir]);
    let said = String::from_utf8_lossy(&found.stdout).into_owned();
    assert_eq!(found.status.code(), Some(1), "{said}");
    assert!(said.contains("stream a"), "{said}");
    let refused = weft(&["append", &url, "-t", "a", "x", "--cache-dir", dir]);
    assert_eq!(
        refused.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let again = append(&url, &["-t", "a", "y", "--cache-dir", dir]);
    assert_eq!(again["stream_version"], 3, "{again}");
}

/// How the CLI's forged-checkpoint table rewrites the newest stream-state
/// checkpoint (with a valid checksum), and the stream it appends to.
#[derive(Debug, Clone, Copy)]
enum Forged {
    /// Stream a five versions ahead.
    Ahead,
    /// Stream a one version behind.
    Behind,
    /// Stream b left out; the append goes to b.
    StreamMissing,
    /// A stream the log does not have.
    ExtraStream,
}

/// A one-shot `weft append --cache-dir none` opens from the newest
/// stream-state checkpoint; one rewritten with another stream version (and
/// valid checksums) makes it exit with `corrupt` before it writes
/// anything, whatever the forgery, and `verify` reports the checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_refuses_a_forged_state_checkpoint_and_writes_nothing() {
    use weft::format::{
        LogState, StateCheckpoint, decode_state_checkpoint, encode_state_checkpoint,
    };
    use weft::storage::bucket::{BucketOptions, BucketStorage};
    use weft::{AppendRequest, Log, LogTag};

    let tag = |t: &str| LogTag::new(t).unwrap();
    for forged in [
        Forged::Ahead,
        Forged::Behind,
        Forged::StreamMissing,
        Forged::ExtraStream,
    ] {
        let (settings, url) = bucket("forged_checkpoint");
        let store = settings.build().unwrap();
        let w = Log::new(
            BucketStorage::open(
                store.clone(),
                "",
                BucketOptions::default().with_state_checkpoint_entries(10),
            )
            .await
            .unwrap(),
        );
        // a, b and c, then only d: the newest checkpoint is past every
        // entry of a, b and c.
        for i in 0..45usize {
            let t = if i < 30 { ["a", "b", "c"][i % 3] } else { "d" };
            w.append(AppendRequest::new(tag(t), format!("{t}{i}")))
                .await
                .unwrap();
        }
        w.close().await.unwrap();

        let mut states: Vec<ObjectPath> = {
            use futures::TryStreamExt;
            store
                .list(Some(&ObjectPath::from("states")))
                .map_ok(|m| m.location)
                .try_collect()
                .await
                .unwrap()
        };
        states.sort();
        let newest = states.pop().expect("a state checkpoint");
        let bytes = store.get(&newest).await.unwrap().bytes().await.unwrap();
        let cp = decode_state_checkpoint(&bytes).unwrap();
        assert!(
            cp.state.through >= 29,
            "{forged:?}: through {}",
            cp.state.through
        );
        let last = cp.last_seqnums.clone().expect("a version 2 checkpoint");
        let mut rows: Vec<(LogTag, u64, u64)> = cp
            .state
            .next_versions
            .iter()
            .zip(last)
            .map(|((t, v), l)| (t.clone(), *v, l))
            .collect();
        let at = |rows: &[(LogTag, u64, u64)], t: &str| rows.iter().position(|r| r.0 == tag(t));
        let a = at(&rows, "a").unwrap();
        let mut stream = "a";
        match forged {
            Forged::Ahead => rows[a].1 += 5,
            Forged::Behind => rows[a].1 -= 1,
            Forged::StreamMissing => {
                let b = at(&rows, "b").unwrap();
                rows.remove(b);
                stream = "b";
            }
            Forged::ExtraStream => rows.push((tag("zz"), 1, 0)),
        }
        rows.sort_by_key(|r| r.0.to_string());
        let forgery = encode_state_checkpoint(&StateCheckpoint {
            state: LogState::new(
                cp.state.through,
                rows.iter().map(|(t, v, _)| (t.clone(), *v)).collect(),
            )
            .unwrap(),
            through_check: cp.through_check,
            last_seqnums: Some(rows.iter().map(|r| r.2).collect()),
        })
        .unwrap();
        store.put(&newest, forgery.into()).await.unwrap();

        let out = tokio::task::spawn_blocking({
            let url = url.clone();
            move || weft(&["append", &url, "-t", stream, "wrong", "--cache-dir", "none"])
        })
        .await
        .unwrap();
        one_line_error(&out, 6, "corrupt");

        let checked = weft::storage::bucket::check(store.clone(), "")
            .await
            .unwrap();
        assert!(
            checked.problem.is_none(),
            "{forged:?}: {:?}",
            checked.problem
        );
        assert_eq!(checked.next_seqnum, 45, "{forged:?}: nothing was appended");
        let verified = tokio::task::spawn_blocking({
            let url = url.clone();
            move || weft(&["verify", &url, "--cache-dir", "none"])
        })
        .await
        .unwrap();
        assert_eq!(
            verified.status.code(),
            Some(1),
            "{forged:?}: {}",
            String::from_utf8_lossy(&verified.stdout)
        );
    }
}

/// Damage to the history a one-shot writer does not read at open (it opens
/// from the newest stream-state checkpoint, past the damage).
#[derive(Debug, Clone, Copy, PartialEq)]
enum HistoryDamage {
    Untouched,
    FlippedSegment,
    FlippedPage,
    MissingPage,
}

/// The damaged-history rows of the damage table, on the real server and
/// writable: `verify` reports the damage (exit 1), `read` refuses it (exit
/// 6), a one-shot `weft append --cache-dir none` to a stream the
/// checkpoint does not know waits for the history and refuses it (exit 6,
/// nothing written), and one to a known stream either is refused the same
/// way or is acknowledged (it is numbered from a checked row before the
/// history was read, as `verify` says). Nothing is lost: with the damaged
/// object put back, `read` prints every entry written before and every
/// acknowledged append, and `verify` is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_history_is_judged_alike_by_append_read_and_verify() {
    use futures::TryStreamExt;
    use weft::storage::bucket::{BucketOptions, BucketStorage};
    use weft::wal::CheckpointPolicy;
    use weft::{AppendRequest, Log, LogTag};

    let run = |args: Vec<String>| async move {
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            weft(&args)
        })
        .await
        .unwrap()
    };
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for damage in [
        HistoryDamage::Untouched,
        HistoryDamage::FlippedSegment,
        HistoryDamage::FlippedPage,
        HistoryDamage::MissingPage,
    ] {
        let (settings, url) = bucket("damaged_history");
        let store = settings.build().unwrap();
        let w = Log::new(
            BucketStorage::open(
                store.clone(),
                "",
                BucketOptions::default()
                    .with_flush_interval(Duration::from_millis(2))
                    .with_state_checkpoint_entries(10)
                    .with_checkpoint(
                        CheckpointPolicy::default()
                            .with_max_recent_entries(6)
                            .with_max_recent_bytes(1 << 20)
                            .with_leaf_entries(4)
                            .with_leaf_bytes(1 << 19)
                            .with_fanout(3)
                            .with_max_pages_per_commit(4),
                    ),
            )
            .await
            .unwrap(),
        );
        for i in 0..45usize {
            let t = if i < 30 { ["a", "b", "c"][i % 3] } else { "d" };
            w.append(AppendRequest::new(
                LogTag::new(t).unwrap(),
                format!("{t}{i}"),
            ))
            .await
            .unwrap();
        }
        w.close().await.unwrap();
        let under = |dir: &'static str| {
            let store = store.clone();
            async move {
                let mut found: Vec<ObjectPath> = store
                    .list(Some(&ObjectPath::from(dir)))
                    .map_ok(|m| m.location)
                    .try_collect()
                    .await
                    .unwrap();
                found.sort();
                found
            }
        };
        assert!(
            !under("states").await.is_empty(),
            "the sample has checkpoints"
        );
        let victim = match damage {
            HistoryDamage::Untouched => None,
            HistoryDamage::FlippedSegment => Some(under("segments").await[0].clone()),
            HistoryDamage::FlippedPage | HistoryDamage::MissingPage => {
                let pages = under("history").await;
                assert!(!pages.is_empty(), "the sample has history pages");
                Some(pages[0].clone())
            }
        };
        let original = match &victim {
            Some(v) => Some(store.get(v).await.unwrap().bytes().await.unwrap()),
            None => None,
        };
        if let (Some(v), Some(bytes)) = (&victim, &original) {
            if damage == HistoryDamage::MissingPage {
                store.delete(v).await.unwrap();
            } else {
                let mut b = bytes.to_vec();
                let at = b.len() / 2;
                b[at] ^= 0x40;
                store.put(v, b.into()).await.unwrap();
            }
        }
        let damaged = damage != HistoryDamage::Untouched;

        let verify = run(args(&["verify", &url, "--cache-dir", "none"])).await;
        assert_eq!(
            verify.status.code(),
            Some(if damaged { 1 } else { 0 }),
            "{damage:?}: verify {}",
            String::from_utf8_lossy(&verify.stdout)
        );
        let read = run(args(&["read", &url, "--json", "--cache-dir", "none"])).await;
        if damaged {
            one_line_error(&read, 6, "corrupt");
        } else {
            assert_eq!(ok(read).lines().count(), 45, "{damage:?}");
        }
        // A stream the checkpoint does not name: the append waits for the
        // history, which is damaged.
        let new_stream = run(args(&[
            "append",
            &url,
            "--json",
            "-t",
            "fresh",
            "n",
            "--cache-dir",
            "none",
        ]))
        .await;
        let mut acknowledged: Vec<String> = Vec::new();
        if damaged {
            one_line_error(&new_stream, 6, "corrupt");
        } else {
            ok(new_stream);
            acknowledged.push("n".into());
        }
        // A stream it names: checked by its last entry, then taken or
        // refused, never anything else.
        let known = run(args(&[
            "append",
            &url,
            "--json",
            "-t",
            "a",
            "k",
            "--cache-dir",
            "none",
        ]))
        .await;
        match known.status.code() {
            Some(0) => acknowledged.push("k".into()),
            Some(6) if damaged => one_line_error(&known, 6, "corrupt"),
            other => panic!(
                "{damage:?}: append to a known stream exited {other:?}: {}",
                String::from_utf8_lossy(&known.stderr)
            ),
        }

        // Put the damaged object back: nothing was lost.
        if let (Some(v), Some(bytes)) = (&victim, original) {
            store.put(v, bytes.into()).await.unwrap();
        }
        let read = run(args(&["read", &url, "--json", "--cache-dir", "none"])).await;
        let lines: Vec<Value> = ok(read)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 45 + acknowledged.len(), "{damage:?}");
        for (i, line) in lines.iter().enumerate() {
            assert_eq!(
                line["seqnum"].as_u64(),
                Some(i as u64),
                "{damage:?}: {line}"
            );
        }
        let verify = run(args(&["verify", &url, "--cache-dir", "none"])).await;
        assert_eq!(
            verify.status.code(),
            Some(0),
            "{damage:?}: verify after the repair {}",
            String::from_utf8_lossy(&verify.stdout)
        );
    }
}

use crate::support::trim_cases;

#[test]
fn trim_drops_entries_through_a_seqnum_on_a_bucket() {
    let (_, url) = bucket("trim");
    trim_cases::trim_rows(&weft, &url);
}

use crate::support::retention_cases;

#[test]
fn retention_and_consumers_on_a_bucket() {
    let (_, url) = bucket("retention");
    retention_cases::retention_rows(&weft, &url, false);
    retention_cases::stream_rows(&weft, &url);
}
