//! The `weft` binary driven as a user drives it: arguments in, stdout,
//! stderr and exit code out.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_weft");
/// The command's cache of `dir` log indexes, under the build's temporary
/// directory (never the user's).
const INDEX_CACHE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/weft-index-cache");

fn weft(args: &[&str]) -> Output {
    weft_with_stdin(args, None)
}

fn weft_with_stdin(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(BIN)
        .env("WEFT_INDEX_CACHE", INDEX_CACHE)
        .args(args)
        .env_remove("RUST_LOG")
        // Never the user's own cache directory.
        .env("WEFT_CACHE_DIR", cache_dir())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start weft");
    if let Some(data) = stdin {
        let mut pipe = child.stdin.take().expect("stdin pipe");
        pipe.write_all(data).expect("write stdin");
    }
    child.wait_with_output().expect("wait for weft")
}

/// The cache directory the tests' `weft` runs keep bucket logs' numbers in.
fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("weft-cli-cache")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("utf-8 stderr")
}

/// Asserts success and returns stdout.
fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "weft failed ({:?}): stdout {:?} stderr {:?}",
        out.status.code(),
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// Asserts a failure with `code` and exactly one stderr line
/// `weft: ... (<kind>)`; returns that line.
fn fails(out: Output, code: i32, kind: &str) -> String {
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(code),
        "exit code; stdout {:?} stderr {err:?}",
        stdout(&out)
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one stderr line, got {err:?}");
    let line = lines[0];
    assert!(line.starts_with("weft: "), "{line:?}");
    assert!(
        line.ends_with(&format!("({kind})")),
        "kind {kind} in {line:?}"
    );
    line.to_owned()
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not JSON: {e}")))
        .collect()
}

/// The keys of a JSON object line, in the order they appear in the text.
fn keys_in_order(line: &str) -> Vec<String> {
    // serde_json's Map sorts keys, so read the order off the text: every
    // key of these flat objects is a string followed by ':'.
    let mut keys = Vec::new();
    let mut depth = 0i32;
    let mut in_str = false;
    let mut start = 0usize;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
                if depth == 1 && line[i + 1..].starts_with(':') {
                    keys.push(line[start..i].to_owned());
                }
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                start = i + 1;
            }
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            _ => {}
        }
    }
    keys
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// The upstream compatibility vectors: the weft crate's test fixtures, in
/// this repository.
fn compat_a() -> PathBuf {
    let a =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../weft/tests/fixtures/opendata-buffer-0.3/A");
    assert!(
        a.join("expected.json").is_file(),
        "the compatibility vectors are missing at {}",
        a.display()
    );
    a
}

fn file_url(path: &Path) -> String {
    format!(
        "file://{}",
        path.canonicalize().expect("canonical path").display()
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for item in std::fs::read_dir(from).unwrap() {
        let item = item.unwrap();
        let target = to.join(item.file_name());
        if item.file_type().unwrap().is_dir() {
            copy_dir(&item.path(), &target);
        } else {
            std::fs::copy(item.path(), &target).unwrap();
        }
    }
}

fn flip_byte(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    assert!(
        at < bytes.len(),
        "{} has only {} bytes",
        path.display(),
        bytes.len()
    );
    bytes[at] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

// ---------------------------------------------------------------- help

#[test]
fn every_command_has_help() {
    for cmd in [
        vec![],
        vec!["demo"],
        vec!["append"],
        vec!["read"],
        vec!["tail"],
        vec!["inspect"],
        vec!["wal"],
        vec!["wal", "dump"],
        vec!["verify"],
        vec!["gc"],
        vec!["snapshot"],
    ] {
        let mut args = cmd.clone();
        args.push("--help");
        let out = ok(weft(&args));
        assert!(out.contains("Usage: weft"), "{cmd:?}: {out}");
    }
    let top = ok(weft(&["--help"]));
    assert!(
        top.contains("Exit codes:") && top.contains("s3://bucket/prefix"),
        "{top}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let out = weft(&["append"]);
    assert_eq!(out.status.code(), Some(2));
    let out = weft(&["no-such-command"]);
    assert_eq!(out.status.code(), Some(2));
}

// ---------------------------------------------------------------- wal dump

#[test]
fn wal_dump_reads_the_upstream_buffer_vectors() {
    let a = compat_a();
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("expected.json")).unwrap()).unwrap();
    let out = ok(weft(&[
        "wal",
        "dump",
        &file_url(&a),
        "--manifest",
        expected["manifest_path"].as_str().unwrap(),
        "--json",
    ]));
    let mut want = Vec::new();
    for entry in expected["entries"].as_array().unwrap() {
        for (index, record) in entry["records"].as_array().unwrap().iter().enumerate() {
            want.push((
                entry["sequence"].as_u64().unwrap(),
                index as u64,
                record.as_str().unwrap().to_owned(),
            ));
        }
    }
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), want.len(), "{out}");
    for (line, (sequence, index, data)) in lines.iter().zip(&want) {
        assert_eq!(keys_in_order(line), ["sequence", "index", "data"], "{line}");
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["sequence"], *sequence, "{line}");
        assert_eq!(v["index"], *index, "{line}");
        assert_eq!(v["data"], data.as_str(), "{line}");
    }
    // The text form names every entry and shows the records.
    let text = ok(weft(&[
        "wal",
        "dump",
        &file_url(&a),
        "--manifest",
        "ingest/manifest",
    ]));
    assert!(text.contains("01M8R78R162CKXDFM04D3KMGZ1.batch"), "{text}");
    assert!(
        text.contains("5 bytes alpha") && text.contains("Zstd"),
        "{text}"
    );
}

#[test]
fn wal_dump_of_a_missing_manifest_or_store_fails_in_one_line() {
    let a = compat_a();
    fails(
        weft(&["wal", "dump", &file_url(&a), "--manifest", "manifest"]),
        3,
        "not_found",
    );
    let tmp = tempfile::tempdir().unwrap();
    let missing = format!("file://{}/nothing-here", tmp.path().display());
    fails(
        weft(&["wal", "dump", &missing, "--manifest", "m"]),
        3,
        "not_found",
    );
    fails(
        weft(&["wal", "dump", "gs://b/x", "--manifest", "m"]),
        4,
        "invalid_input",
    );
    assert!(
        !tmp.path().join("nothing-here").exists(),
        "read-only: nothing created"
    );
}

// ---------------------------------------------------------------- inspect bucket

#[test]
fn inspect_a_bucket_reports_the_manifest() {
    let a = compat_a();
    let out = ok(weft(&[
        "inspect",
        &file_url(&a),
        "--manifest",
        "ingest/manifest",
        "--json",
    ]));
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(out.trim().lines().count(), 1);
    assert_eq!(v["epoch"], 0);
    assert_eq!(v["next_sequence"], 2);
    assert_eq!(v["format_version"], 1);
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["sequence"], 0);
    assert_eq!(entries[0]["count"], 4);
    assert_eq!(entries[0]["size"], 37);
    assert_eq!(
        entries[0]["location"],
        "ingest/01M8R78R162CKXDFM04D3KMGZ1.batch"
    );
    assert_eq!(entries[0]["metadata"][1]["payload"], b64(b"m2"));
    assert_eq!(entries[0]["metadata"][2]["start_index"], 3);
    assert_eq!(entries[1]["sequence"], 1);
    assert_eq!(entries[1]["count"], 2);
    assert_eq!(entries[1]["size"], 64);
    assert!(v["snapshot"].is_null());

    let text = ok(weft(&[
        "inspect",
        &file_url(&a),
        "--manifest",
        "ingest/manifest",
    ]));
    assert!(
        text.contains("format v1") && text.contains("epoch      0"),
        "{text}"
    );
}

// ---------------------------------------------------------------- verify bucket

#[test]
fn verify_passes_on_the_upstream_vectors() {
    let a = compat_a();
    let out = ok(weft(&[
        "verify",
        &file_url(&a),
        "--manifest",
        "ingest/manifest",
    ]));
    assert!(out.contains("no problems"), "{out}");
    let out = ok(weft(&[
        "verify",
        &file_url(&a),
        "--manifest",
        "ingest/manifest",
        "--json",
    ]));
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["units"], 2);
    assert_eq!(v["records"], 6);
}

#[test]
fn verify_finds_a_corrupt_upstream_segment() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&compat_a(), tmp.path());
    // Byte 0 is the length of the first (empty) record of the uncompressed
    // batch: the block no longer splits into its records.
    flip_byte(
        &tmp.path().join("ingest/01M8R78R162CKXDFM04D3KMGZ1.batch"),
        0,
    );
    let out = weft(&[
        "verify",
        &file_url(tmp.path()),
        "--manifest",
        "ingest/manifest",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("problem:") && text.contains("01M8R78R162CKXDFM04D3KMGZ1"),
        "{text}"
    );
    // Dumping it is an error, in one line.
    fails(
        weft(&[
            "wal",
            "dump",
            &file_url(tmp.path()),
            "--manifest",
            "ingest/manifest",
        ]),
        6,
        "corrupt",
    );
}

#[test]
fn verify_finds_a_missing_segment() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&compat_a(), tmp.path());
    std::fs::remove_file(tmp.path().join("ingest/01M8R78R17MPSNZRYF3VK32HQ6.batch")).unwrap();
    let out = weft(&[
        "verify",
        &file_url(tmp.path()),
        "--manifest",
        "ingest/manifest",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["ok"], false);
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].as_str().unwrap().contains("does not exist"));
}

/// A v4 manifest over v2 (checksummed) segments, written with weft's own
/// encoders into `dir`, laid out as a weft bucket log (`manifest`,
/// `segments/...`).
fn write_v4_bucket(dir: &Path) {
    use weft::format::{Compression, ManifestVersion, SegmentVersion, encode_segment};
    use weft::wal::Manifest;
    std::fs::create_dir_all(dir.join("segments/run")).unwrap();
    let mut m = Manifest::new(ManifestVersion::V4);
    for (i, records) in [vec!["one", "two"], vec!["three"]].iter().enumerate() {
        let loc = format!("segments/run/{i:016x}");
        let seg = encode_segment(records, Compression::None, SegmentVersion::V2).unwrap();
        std::fs::write(dir.join(&loc), &seg).unwrap();
        m.append(loc, vec![], records.len()).unwrap();
    }
    std::fs::write(dir.join("manifest"), m.to_bytes().unwrap()).unwrap();
}

/// A v5 manifest whose older entries moved into history pages (tiny
/// checkpoint policy), one record per segment, written with weft's own
/// encoders into `dir`: `records` entries in all.
fn write_v5_bucket_with_history(dir: &Path, records: usize) {
    use weft::format::{Compression, ManifestVersion, SegmentVersion, encode_segment};
    use weft::wal::{CheckpointPolicy, Manifest};
    let policy = CheckpointPolicy::default()
        .with_max_recent_entries(4)
        .with_max_recent_bytes(1 << 20)
        .with_leaf_entries(3)
        .with_leaf_bytes(1 << 19)
        .with_fanout(2)
        .with_max_pages_per_commit(4);
    std::fs::create_dir_all(dir.join("segments/run")).unwrap();
    std::fs::create_dir_all(dir.join("history")).unwrap();
    let mut m = Manifest::new(ManifestVersion::V5);
    for i in 0..records {
        let loc = format!("segments/run/{i:016x}");
        let text = format!("r{i}");
        let seg =
            encode_segment(&[text.as_bytes()], Compression::None, SegmentVersion::V2).unwrap();
        std::fs::write(dir.join(&loc), &seg).unwrap();
        let committed = m.next_sequence();
        m.append(loc, vec![], 1).unwrap();
        let pages = m
            .checkpoint(&policy, committed, |l, f, e| {
                format!("history/{l:02x}-{f:016x}-{e:016x}-01J00000000000000000000000")
            })
            .unwrap();
        for p in pages {
            std::fs::write(dir.join(&p.location), &p.bytes).unwrap();
        }
    }
    std::fs::write(dir.join("manifest"), m.to_bytes().unwrap()).unwrap();
}

#[test]
fn inspect_verify_and_dump_read_a_v5_history() {
    let tmp = tempfile::tempdir().unwrap();
    write_v5_bucket_with_history(tmp.path(), 40);
    let url = file_url(tmp.path());
    let v: Value = serde_json::from_str(ok(weft(&["inspect", &url, "--json"])).trim()).unwrap();
    assert_eq!(v["format_version"], 5);
    assert_eq!(
        (v["first_sequence"].as_u64(), v["next_sequence"].as_u64()),
        (Some(0), Some(40))
    );
    // Inspect lists only what the manifest holds itself, and sums up the
    // pages: its cost does not grow with the log.
    let listed = v["entries"].as_array().unwrap().len() as u64;
    assert!(listed <= 5, "{listed} entries listed");
    assert_eq!(v["history"]["entries"].as_u64().unwrap() + listed, 40);
    assert_eq!(v["history"]["first_sequence"], 0);
    // Verify and dump walk every entry, pages included (its records are
    // opaque bytes, not entry frames: a WAL, so --manifest).
    let out = ok(weft(&["verify", &url, "--manifest", "manifest"]));
    assert!(out.contains("40 segments, 40 records"), "{out}");
    let dump = ok(weft(&[
        "wal",
        "dump",
        &url,
        "--manifest",
        "manifest",
        "--json",
    ]));
    let lines = json_lines(&dump);
    assert_eq!(lines.len(), 40);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["sequence"].as_u64(), Some(i as u64));
        assert_eq!(l["data"], b64(format!("r{i}").as_bytes()));
    }
    // A page that is gone is a problem verify reports (and goes on).
    let page = std::fs::read_dir(tmp.path().join("history"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(&page).unwrap();
    let out = weft(&["verify", &url, "--manifest", "manifest"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("history cannot be read"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn verify_checks_segment_checksums_of_a_v4_log() {
    let tmp = tempfile::tempdir().unwrap();
    write_v4_bucket(tmp.path());
    let url = file_url(tmp.path());
    // As a WAL of opaque records it is sound...
    ok(weft(&["verify", &url, "--manifest", "manifest"]));
    // ...but its records are not entry frames, so as the weft log `read`
    // reads it is not: both say so.
    let out = weft(&["verify", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("frame"), "{}", stdout(&out));
    fails(weft(&["read", &url]), 6, "corrupt");
    let v: Value = serde_json::from_str(ok(weft(&["inspect", &url, "--json"])).trim()).unwrap();
    assert_eq!(v["format_version"], 4);
    assert_eq!(v["next_sequence"], 3);
    assert_eq!(v["entries"][1]["sequence"], 2);
    assert_eq!(v["entries"][1]["count"], 1);
    let dump = ok(weft(&[
        "wal",
        "dump",
        &url,
        "--manifest",
        "manifest",
        "--json",
    ]));
    let lines = json_lines(&dump);
    assert_eq!(lines.len(), 3);
    assert_eq!(
        (lines[2]["sequence"].as_u64(), lines[2]["index"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(lines[2]["data"], b64(b"three"));

    // A flipped payload byte: only the segment checksum can tell.
    flip_byte(&tmp.path().join("segments/run/0000000000000000"), 5);
    let out = weft(&["verify", &url, "--manifest", "manifest"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("crc32c mismatch"), "{}", stdout(&out));
}

// ---------------------------------------------------------------- read-only file://

/// Every file under `dir` with its bytes and modification time: what "the
/// directory was not written" compares.
fn snapshot_tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for item in std::fs::read_dir(&d).unwrap() {
            let item = item.unwrap();
            let meta = item.metadata().unwrap();
            if meta.is_dir() {
                out.push((item.path(), Vec::new(), meta.modified().unwrap()));
                stack.push(item.path());
            } else {
                let bytes = std::fs::read(item.path()).unwrap();
                out.push((item.path(), bytes, meta.modified().unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A weft bucket log (written by the library's bucket writer on an
/// in-memory store) laid out as files, with garbage GC would delete: the
/// segments of the entries a trim dropped.
fn write_bucket_with_garbage(dir: &Path) {
    use futures::TryStreamExt;
    use object_store::ObjectStore;
    use weft::storage::bucket::{BucketOptions, BucketStorage};
    use weft::{AppendRequest, Log, LogTag};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let memory = std::sync::Arc::new(object_store::memory::InMemory::new());
        let storage = BucketStorage::open(memory.clone(), "", BucketOptions::default())
            .await
            .unwrap();
        let log = Log::new(storage);
        let tag = LogTag::new("orders").unwrap();
        for i in 0..3 {
            log.append(AppendRequest::new(tag.clone(), format!("op{i}")))
                .await
                .unwrap();
        }
        log.trim(0).await.unwrap();
        log.close().await.unwrap();
        let objects: Vec<_> = memory.list(None).try_collect().await.unwrap();
        for meta in objects {
            let bytes = memory
                .get(&meta.location)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            let target = dir.join(meta.location.as_ref());
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::write(target, bytes).unwrap();
        }
    });
}

/// A `file://` location is read-only: every command that would write —
/// whatever it writes (a claim, a segment, a snapshot, a lease, a GC
/// delete) — fails with `ReadOnly` (exit 7), and the directory is
/// byte-for-byte and time-for-time what it was. Reads keep working.
#[test]
fn file_stores_refuse_every_write_and_stay_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    write_bucket_with_garbage(tmp.path());
    let url = file_url(tmp.path());
    let before = snapshot_tree(tmp.path());
    let writes: &[&[&str]] = &[
        &["append", &url, "--tag", "orders", "data"],
        &["append", &url, "--create", "--tag", "orders", "data"],
        &["append", &url, "--take-over", "--tag", "orders", "data"],
        &["snapshot", &url, "--through", "1"],
        &["gc", &url, "--grace-secs", "0"],
    ];
    for args in writes {
        let line = fails(weft(args), 7, "read_only");
        assert!(line.contains("read-only"), "{args:?}: {line}");
        assert_eq!(snapshot_tree(tmp.path()), before, "{args:?} wrote");
    }
    // What only reads still works on the same copy.
    assert_eq!(ok(weft(&["read", &url, "--json"])).lines().count(), 2);
    ok(weft(&["verify", &url]));
    let dry: Value = serde_json::from_str(&ok(weft(&[
        "gc",
        &url,
        "--dry-run",
        "--grace-secs",
        "0",
        "--json",
    ])))
    .unwrap();
    assert_eq!(dry["deleted"].as_array().unwrap().len(), 1, "{dry}");
    assert_eq!(snapshot_tree(tmp.path()), before);

    // An empty directory: creating a log there is a write too.
    let empty = tempfile::tempdir().unwrap();
    let empty_url = file_url(empty.path());
    fails(
        weft(&["append", &empty_url, "--create", "--tag", "orders", "data"]),
        7,
        "read_only",
    );
    assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);
    fails(weft(&["read", &empty_url]), 3, "not_found");
    fails(
        weft(&["tail", &empty_url, "--timeout", "1"]),
        3,
        "not_found",
    );
    fails(
        weft(&["snapshot", &empty_url, "--through", "0"]),
        3,
        "not_found",
    );
}

// ---------------------------------------------------------------- dir logs

fn tmp_log() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log").display().to_string();
    (tmp, log)
}

fn append_json(log: &str, args: &[&str]) -> Value {
    let mut all = vec!["append", log, "--create", "--json"];
    all.extend_from_slice(args);
    let out = ok(weft(&all));
    assert_eq!(out.lines().count(), 1, "{out:?}");
    serde_json::from_str(out.trim()).unwrap()
}

#[test]
fn append_prints_exactly_one_json_line() {
    let (_tmp, log) = tmp_log();
    let out = ok(weft(&[
        "append", &log, "--create", "--tag", "orders", "--json", "placed",
    ]));
    assert_eq!(out, "{\"seqnum\":0,\"stream_version\":0}\n");
    let out = ok(weft(&[
        "append",
        &log,
        "-t",
        "orders:o-1",
        "-t",
        "orders",
        "--json",
        "x",
    ]));
    assert_eq!(out, "{\"seqnum\":1,\"stream_version\":0}\n");
    let text = ok(weft(&["append", &log, "-t", "orders", "again"]));
    assert!(
        text.contains("seqnum 2") && text.contains("orders v1"),
        "{text}"
    );
}

#[test]
fn append_with_an_id_is_exactly_once() {
    let (_tmp, log) = tmp_log();
    let first = append_json(&log, &["-t", "orders", "--id", "order-1/placed", "placed"]);
    append_json(&log, &["-t", "orders", "other"]);
    // The retry, even as a stale conditional append: the original.
    let again = append_json(
        &log,
        &[
            "-t",
            "orders",
            "--id",
            "order-1/placed",
            "--if-version",
            "0",
            "placed",
        ],
    );
    assert_eq!(first, serde_json::json!({"seqnum": 0, "stream_version": 0}));
    assert_eq!(
        again,
        serde_json::json!({"seqnum": 0, "stream_version": 0, "duplicate": true})
    );
    // Without --json it says so too, with the original seqnum.
    let text = ok(weft(&[
        "append",
        &log,
        "-t",
        "orders",
        "--id",
        "order-1/placed",
        "placed",
    ]));
    assert!(
        text.contains("already in the log") && text.contains("seqnum 0"),
        "{text}"
    );
    let out = ok(weft(&["read", &log, "--json"]));
    assert_eq!(out.lines().count(), 2, "{out}");
    // A malformed id is refused, nothing written.
    fails(
        weft(&["append", &log, "-t", "orders", "--id", "", "x"]),
        4,
        "invalid_input",
    );
    assert_eq!(ok(weft(&["read", &log, "--json"])).lines().count(), 2);
}

#[test]
fn read_prints_entries_as_json_lines_in_seqnum_order() {
    let (_tmp, log) = tmp_log();
    append_json(&log, &["-t", "orders", "-t", "orders:o-1", "placed"]);
    append_json(&log, &["-t", "audit", "seen"]);
    append_json(&log, &["-t", "orders", "shipped"]);
    let out = ok(weft(&["read", &log, "--json"]));
    for line in out.lines() {
        assert_eq!(
            keys_in_order(line),
            [
                "seqnum",
                "stream_version",
                "tags",
                "timestamp_ms",
                "id",
                "data"
            ],
            "{line}"
        );
    }
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[0]["tags"],
        serde_json::json!(["orders", "orders:o-1"])
    );
    assert_eq!(lines[0]["data"], b64(b"placed"));
    assert_eq!(lines[1]["stream_version"], 0);
    assert_eq!(lines[2]["seqnum"], 2);
    assert_eq!(lines[2]["stream_version"], 1);
    assert!(
        lines[2]["timestamp_ms"].as_u64().unwrap() >= lines[0]["timestamp_ms"].as_u64().unwrap()
    );

    let orders = json_lines(&ok(weft(&["read", &log, "--tag", "orders", "--json"])));
    let seqnums: Vec<u64> = orders
        .iter()
        .map(|v| v["seqnum"].as_u64().unwrap())
        .collect();
    assert_eq!(seqnums, [0, 2]);
    let one = json_lines(&ok(weft(&[
        "read", &log, "--from", "1", "--limit", "1", "--json",
    ])));
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["data"], b64(b"seen"));
    let text = ok(weft(&["read", &log, "--tag", "orders:o-1"]));
    assert!(
        text.contains("placed") && !text.contains("shipped"),
        "{text}"
    );
}

#[test]
fn append_reads_binary_data_from_stdin() {
    let (_tmp, log) = tmp_log();
    let data = [0u8, 255, 10, 13, 7];
    let out = ok(weft_with_stdin(
        &["append", &log, "--create", "-t", "blobs", "--json", "-"],
        Some(&data),
    ));
    assert_eq!(out, "{\"seqnum\":0,\"stream_version\":0}\n");
    // No DATA at all reads stdin too, when it is not a terminal.
    ok(weft_with_stdin(
        &["append", &log, "-t", "blobs"],
        Some(b"second"),
    ));
    let lines = json_lines(&ok(weft(&["read", &log, "--json"])));
    assert_eq!(lines[0]["data"], b64(&data));
    assert_eq!(lines[1]["data"], b64(b"second"));
}

#[test]
fn bad_tags_are_one_line_invalid_input_errors() {
    let (_tmp, log) = tmp_log();
    for bad in [":key", "", "ns:", "a\u{1}b", "orders:o\n1"] {
        let line = fails(
            weft(&["append", &log, "--create", "--tag", bad, "data"]),
            4,
            "invalid_input",
        );
        assert!(line.contains("bad tag"), "{line}");
    }
    fails(weft(&["read", &log, "--tag", ":x"]), 4, "invalid_input");
    assert!(
        !Path::new(&log).exists(),
        "nothing was created for a bad request"
    );
}

#[test]
fn if_version_conflicts_write_nothing() {
    let (_tmp, log) = tmp_log();
    assert_eq!(
        append_json(&log, &["-t", "orders", "--if-version", "0", "a"])["stream_version"],
        0
    );
    let line = fails(
        weft(&["append", &log, "-t", "orders", "--if-version", "0", "b"]),
        5,
        "conflict",
    );
    assert!(line.contains("orders"), "{line}");
    fails(
        weft(&["append", &log, "-t", "orders", "--if-version", "5", "b"]),
        5,
        "conflict",
    );
    assert_eq!(json_lines(&ok(weft(&["read", &log, "--json"]))).len(), 1);
    let next = append_json(&log, &["-t", "orders", "--if-version", "1", "b"]);
    assert_eq!(
        (next["seqnum"].as_u64(), next["stream_version"].as_u64()),
        (Some(1), Some(1))
    );
}

#[test]
fn expect_states_write_only_when_they_hold() {
    let (_tmp, log) = tmp_log();
    append_json(&log, &["-t", "written", "w"]);
    // (stream, --expect, writes?) in order; each row sees the rows before.
    let table = [
        ("fresh", "stream-exists", false),
        ("fresh", "no-stream", true),
        ("fresh", "no-stream", false),
        ("fresh", "stream-exists", true),
        ("written", "no_stream", false),
        ("written", "any", true),
        ("written", "2", true),
        ("written", "2", false),
    ];
    let mut written = 1;
    for (stream, expect, writes) in table {
        let args = ["append", &log, "-t", stream, "--expect", expect, "x"];
        if writes {
            ok(weft(&args));
            written += 1;
        } else {
            let line = fails(weft(&args), 5, "conflict");
            assert!(line.contains(stream), "{expect} on {stream}: {line}");
        }
        let lines = json_lines(&ok(weft(&["read", &log, "--json"])));
        assert_eq!(lines.len(), written, "after {expect} on {stream}");
    }
    // A state it does not know, and both flags at once: refused before
    // anything is written.
    let bad = weft(&["append", &log, "-t", "fresh", "--expect", "maybe", "x"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("no-stream"), "{}", stderr(&bad));
    let both = weft(&[
        "append",
        &log,
        "-t",
        "fresh",
        "--expect",
        "any",
        "--if-version",
        "2",
        "x",
    ]);
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));
    assert_eq!(
        json_lines(&ok(weft(&["read", &log, "--json"]))).len(),
        written
    );
}

#[test]
fn tail_filters_by_namespace_tags_and_key_prefix_and_marks_progress() {
    let (_tmp, log) = tmp_log();
    let names = [
        "orders:eu-1",
        "orders:us-1",
        "orders",
        "audit",
        "noise",
        "noise",
    ];
    for (i, name) in names.iter().enumerate() {
        let args = [
            "append",
            log.as_str(),
            "-t",
            name,
            "--create",
            &i.to_string(),
        ];
        ok(weft(&args));
    }
    // (filter arguments, seqnums it selects)
    let table: [(&[&str], &[u64]); 4] = [
        (&["--namespace", "orders"], &[0, 1, 2]),
        (&["--tag-prefix", "orders:eu-"], &[0]),
        (&["-t", "audit", "-t", "orders:us-1"], &[1, 3]),
        (&["--tag-prefix", "orders:"], &[0, 1]),
    ];
    for (filter, want) in table {
        let mut args = vec![
            "tail",
            log.as_str(),
            "--from",
            "0",
            "--json",
            "--marks",
            "--timeout",
            "1",
        ];
        args.extend_from_slice(filter);
        let lines = json_lines(&ok(weft(&args)));
        let got: Vec<u64> = lines.iter().filter_map(|l| l["seqnum"].as_u64()).collect();
        assert_eq!(got, want, "{filter:?}");
        // The last line is the mark past the two unmatched entries at the end.
        assert_eq!(
            lines.last().unwrap()["passed"].as_u64(),
            Some(6),
            "{filter:?}: {lines:?}"
        );
    }
    let bad = weft(&["tail", &log, "--tag-prefix", "no-colon", "--timeout", "1"]);
    assert_eq!(bad.status.code(), Some(4), "{}", stderr(&bad));
}

#[test]
fn read_and_tail_since_a_time_or_an_age() {
    let (_tmp, log) = tmp_log();
    for i in 0..4 {
        ok(weft(&[
            "append",
            &log,
            "-t",
            "t",
            "--create",
            &i.to_string(),
        ]));
    }
    // (--since, how many of the four entries it selects)
    let table = [
        ("1970-01-01T00:00:00Z", 4),
        ("1h", 4),
        ("2d", 4),
        ("2999-01-01T00:00:00Z", 0),
        ("2999-01-01T02:00:00+02:00", 0),
    ];
    for (since, want) in table {
        let read = json_lines(&ok(weft(&["read", &log, "--json", "--since", since])));
        assert_eq!(read.len(), want, "read --since {since}");
        let tail = json_lines(&ok(weft(&[
            "tail",
            &log,
            "--json",
            "--since",
            since,
            "--timeout",
            "1",
        ])));
        assert_eq!(tail.len(), want, "tail --since {since}");
    }
    for bad in ["yesterday", "2026-12-01", "1y"] {
        let out = weft(&["read", &log, "--since", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
    }
    let both = weft(&["read", &log, "--since", "1h", "--from", "0"]);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn a_missing_log_is_a_one_line_not_found() {
    let (_tmp, log) = tmp_log();
    fails(weft(&["append", &log, "-t", "orders", "x"]), 3, "not_found");
    fails(weft(&["read", &log]), 3, "not_found");
    fails(weft(&["tail", &log, "--timeout", "1"]), 3, "not_found");
    fails(weft(&["inspect", &log]), 3, "not_found");
    fails(weft(&["verify", &log]), 3, "not_found");
    assert!(!Path::new(&log).exists());
    // An existing directory that holds no log is not a log either.
    std::fs::create_dir_all(&log).unwrap();
    fails(weft(&["read", &log]), 3, "not_found");
}

#[test]
fn a_log_open_elsewhere_is_locked_for_writers_but_readable() {
    let (_tmp, log) = tmp_log();
    append_json(&log, &["-t", "orders", "first"]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let held = rt.block_on(weft::DirStorage::open(&log)).unwrap();
    fails(weft(&["append", &log, "-t", "orders", "x"]), 7, "locked");
    // Readers take no lock.
    assert_eq!(json_lines(&ok(weft(&["read", &log, "--json"]))).len(), 1);
    ok(weft(&["inspect", &log]));
    ok(weft(&["verify", &log]));
    rt.block_on(weft::Storage::close(&held)).unwrap();
}

#[test]
fn read_below_the_first_entry_or_past_the_end() {
    let (_tmp, log) = tmp_log();
    append_json(&log, &["-t", "orders", "a"]);
    assert_eq!(ok(weft(&["read", &log, "--from", "5"])), "");
}

/// Waits for `child` at most `limit`; kills it and fails the test if it
/// does not end.
fn wait_bounded(mut child: std::process::Child, limit: Duration) -> Output {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "weft did not end within {limit:?}: stderr {:?}",
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn spawn(args: &[&str]) -> std::process::Child {
    Command::new(BIN)
        .env("WEFT_INDEX_CACHE", INDEX_CACHE)
        .args(args)
        .env_remove("RUST_LOG")
        .env("WEFT_CACHE_DIR", cache_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn tail_follows_appends_from_other_processes() {
    let (_tmp, log) = tmp_log();
    append_json(&log, &["-t", "orders", "before"]);
    let tail = spawn(&[
        "tail",
        &log,
        "--json",
        "--from",
        "1",
        "--max",
        "2",
        "--timeout",
        "30",
    ]);
    std::thread::sleep(Duration::from_millis(200));
    // The tail holds no lock: appends go through while it runs.
    append_json(&log, &["-t", "audit", "one"]);
    append_json(&log, &["-t", "orders", "two"]);
    let out = wait_bounded(tail, Duration::from_secs(40));
    let text = ok(out);
    let lines = json_lines(&text);
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["seqnum"], 1);
    assert_eq!(lines[0]["data"], b64(b"one"));
    assert_eq!(lines[1]["tags"], serde_json::json!(["orders"]));
    for line in text.lines() {
        assert_eq!(
            keys_in_order(line),
            [
                "seqnum",
                "stream_version",
                "tags",
                "timestamp_ms",
                "id",
                "data"
            ]
        );
    }
}

#[test]
fn tail_with_a_tag_skips_other_entries() {
    let (_tmp, log) = tmp_log();
    append_json(&log, &["-t", "orders", "a"]);
    append_json(&log, &["-t", "audit", "b"]);
    append_json(&log, &["-t", "orders", "c"]);
    let out = ok(weft(&[
        "tail",
        &log,
        "--tag",
        "orders",
        "--from",
        "0",
        "--max",
        "2",
        "--json",
        "--timeout",
        "30",
    ]));
    let seqnums: Vec<u64> = json_lines(&out)
        .iter()
        .map(|v| v["seqnum"].as_u64().unwrap())
        .collect();
    assert_eq!(seqnums, [0, 2]);
}

#[test]
fn tail_stops_at_its_timeout_and_on_sigterm() {
    let (_tmp, log) = tmp_log();
    append_json(&log, &["-t", "orders", "old"]);
    // From the end: the old entry is not shown. `--timeout` bounds the
    // open too, so it leaves room for a slow open on a loaded machine (0.3 s
    // made the open itself time out, exit 9, under a load average of 10).
    let out = wait_bounded(
        spawn(&["tail", &log, "--timeout", "3"]),
        Duration::from_secs(20),
    );
    assert_eq!(ok(out), "");

    let tail = spawn(&["tail", &log]);
    std::thread::sleep(Duration::from_millis(300));
    let status = Command::new("kill")
        .args(["-TERM", &tail.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = wait_bounded(tail, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn tail_serves_prometheus_metrics_when_asked() {
    use std::io::Read;
    let (_tmp, log) = tmp_log();
    append_json(&log, &["-t", "orders", "a"]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let tail = spawn(&[
        "tail",
        &log,
        "--from",
        "0",
        "--metrics-addr",
        &addr,
        "--timeout",
        "30",
    ]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let body = loop {
        let attempt = std::net::TcpStream::connect(&addr).and_then(|mut s| {
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
            let mut body = String::new();
            s.read_to_string(&mut body)?;
            Ok(body)
        });
        match attempt {
            Ok(body) if body.contains("weft_cli_tail_entries_total") => break body,
            _ if std::time::Instant::now() > deadline => panic!("no metrics on {addr}"),
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("weft_cli_tail_entries_total 1"), "{body}");
    let mut tail = tail;
    let _ = tail.kill();
    let _ = tail.wait();
}

/// The offset of `needle` in the file at `path`.
fn find(path: &Path, needle: &[u8]) -> usize {
    let bytes = std::fs::read(path).unwrap();
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{needle:?} not in {}", path.display()))
}

fn only_segment(log: &str) -> PathBuf {
    let segs: Vec<PathBuf> = std::fs::read_dir(log)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    assert_eq!(segs.len(), 1, "{segs:?}");
    segs[0].clone()
}

#[test]
fn a_flipped_byte_in_a_dir_segment_is_found() {
    let (_tmp, log) = tmp_log();
    append_json(&log, &["-t", "orders", "PAYLOAD-ONE"]);
    append_json(&log, &["-t", "orders", "PAYLOAD-TWO"]);
    append_json(&log, &["-t", "orders", "PAYLOAD-THREE"]);
    ok(weft(&["verify", &log]));
    let seg = only_segment(&log);
    flip_byte(&seg, find(&seg, b"PAYLOAD-ONE") + 3);

    let out = weft(&["verify", &log]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("problem:") && text.contains("checksum"),
        "{text}"
    );
    let out = weft(&["verify", &log, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"].as_array().unwrap().len(), 1);

    fails(weft(&["read", &log]), 6, "corrupt");
    fails(weft(&["inspect", &log]), 6, "corrupt");
    // Opening it for writing does not read again what the writer's log
    // index covers (its cost does not grow with the log), so it appends;
    // the damaged entry stays refused to readers and to `verify`.
    ok(weft(&["append", &log, "-t", "orders", "x"]));
    fails(weft(&["read", &log]), 6, "corrupt");
    let out = weft(&["verify", &log]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn inspect_a_dir_log() {
    let (_tmp, log) = tmp_log();
    append_json(&log, &["-t", "orders", "-t", "orders:o-1", "a"]);
    append_json(&log, &["-t", "orders", "b"]);
    append_json(&log, &["-t", "audit", "c"]);
    let out = ok(weft(&["inspect", &log, "--json"]));
    assert_eq!(out.lines().count(), 1);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["kind"], "dir");
    assert_eq!(v["first_seqnum"], 0);
    assert_eq!(v["next_seqnum"], 3);
    assert_eq!(v["entries"], 3);
    assert!(v["trimmed_through"].is_null());
    assert_eq!(v["segments"][0]["first_seqnum"], 0);
    let tags = v["tags"].as_array().unwrap();
    let find_tag = |name: &str| tags.iter().find(|t| t["tag"] == name).unwrap().clone();
    assert_eq!(find_tag("orders")["latest_version"], 1);
    assert_eq!(find_tag("orders")["entries"], 2);
    assert!(find_tag("orders:o-1")["latest_version"].is_null());
    assert_eq!(find_tag("audit")["latest_version"], 0);
    let text = ok(weft(&["inspect", &log]));
    assert!(
        text.contains("0..=2") && text.contains("latest version 1"),
        "{text}"
    );
}

// ---------------------------------------------------------------- demo

#[test]
fn demo_runs_end_to_end_and_resumes_from_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo").display().to_string();
    let first = ok(wait_bounded(
        spawn(&["demo", &dir]),
        Duration::from_secs(60),
    ));
    assert!(first.contains("new log"), "{first}");
    assert!(
        first.contains("o-1 placed") && first.contains("shipped as parcel-1"),
        "{first}"
    );
    assert!(
        first.contains("8 placed, 6 reserved and shipped, 2 rejected"),
        "{first}"
    );
    assert!(
        first.contains("summary") && first.contains("elapsed"),
        "{first}"
    );
    let v: Value = serde_json::from_str(ok(weft(&["inspect", &dir, "--json"])).trim()).unwrap();
    let after_first = v["next_seqnum"].as_u64().unwrap();
    assert_eq!(after_first, 23, "the outcome is deterministic");

    let second = ok(wait_bounded(
        spawn(&["demo", &dir]),
        Duration::from_secs(60),
    ));
    assert!(
        second.contains(&format!(
            "resuming: {after_first} entries already in the log, continuing from seqnum {after_first}"
        )),
        "{second}"
    );
    assert!(
        second.contains("o-9 placed") && !second.contains("o-1 placed"),
        "{second}"
    );
    assert!(
        second.contains("16 placed, 12 reserved and shipped, 4 rejected"),
        "{second}"
    );
    ok(weft(&["verify", &dir]));
    let v: Value = serde_json::from_str(ok(weft(&["inspect", &dir, "--json"])).trim()).unwrap();
    assert_eq!(v["next_seqnum"], 46);
}

#[test]
fn a_trimmed_multi_segment_log_reads_from_its_trim_point() {
    use weft::storage::dir::DirOptions;
    use weft::{AppendRequest, Log, LogTag};
    let (_tmp, log) = tmp_log();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let options = DirOptions::default().with_segment_bytes(4096);
        let storage = weft::DirStorage::open_with(&log, options).await.unwrap();
        let l = Log::new(storage);
        let even = LogTag::new("even").unwrap();
        let odd = LogTag::new("odd").unwrap();
        for i in 0..60u64 {
            let tag = if i % 2 == 0 {
                even.clone()
            } else {
                odd.clone()
            };
            l.append(AppendRequest::new(tag, vec![b'x'; 200]))
                .await
                .unwrap();
        }
        l.trim(30).await.unwrap();
        l.close().await.unwrap();
    });
    let v: Value = serde_json::from_str(ok(weft(&["inspect", &log, "--json"])).trim()).unwrap();
    assert_eq!(v["trimmed_through"], 30);
    assert_eq!(v["first_seqnum"], 31);
    assert_eq!(v["next_seqnum"], 60);
    assert_eq!(v["entries"], 29);
    let segments = v["segments"].as_array().unwrap();
    assert!(segments.len() >= 2, "{v}");
    assert!(segments[0]["first_seqnum"].as_u64().unwrap() <= 31, "{v}");
    let even = v["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == "even")
        .unwrap()
        .clone();
    assert_eq!(even["latest_version"], 29);

    let all = json_lines(&ok(weft(&["read", &log, "--json"])));
    assert_eq!(all.len(), 29);
    assert_eq!(all[0]["seqnum"], 31);
    assert_eq!(all[28]["seqnum"], 59);
    // Across segment boundaries, in chunks.
    let page = json_lines(&ok(weft(&[
        "read", &log, "--from", "40", "--limit", "15", "--tag", "odd", "--json",
    ])));
    let seqnums: Vec<u64> = page.iter().map(|e| e["seqnum"].as_u64().unwrap()).collect();
    assert_eq!(seqnums, (41..60).step_by(2).collect::<Vec<_>>());
    let line = fails(weft(&["read", &log, "--from", "3"]), 4, "trimmed");
    assert!(line.contains("31"), "{line}");
    ok(weft(&["verify", &log]));
}

#[test]
fn dir_reads_keep_their_index_in_the_cache_named() {
    let (tmp, log) = tmp_log();
    append_json(&log, &["-t", "orders", "a"]);
    let cache = tmp.path().join("cache");
    let read = |cache_setting: &str| {
        let out = Command::new(BIN)
            .env("WEFT_INDEX_CACHE", cache_setting)
            .env_remove("RUST_LOG")
            .args(["read", &log, "--json"])
            .output()
            .unwrap();
        ok(out)
    };
    let off = read("off");
    assert_eq!(off.lines().count(), 1);
    assert!(!cache.exists(), "`off` keeps no cache");
    let first = read(cache.to_str().unwrap());
    let kept: Vec<_> = std::fs::read_dir(&cache).unwrap().collect();
    assert_eq!(kept.len(), 1, "one index directory per log");
    append_json(&log, &["-t", "orders", "b"]);
    // The next command reads on from the cached index.
    let second = read(cache.to_str().unwrap());
    assert_eq!(first, off);
    assert_eq!(second.lines().count(), 2);
    assert!(second.starts_with(first.trim_end()), "{second}");
}

use crate::support::trim_cases;

#[test]
fn trim_drops_entries_through_a_seqnum_on_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log");
    trim_cases::trim_rows(&weft, log.to_str().unwrap());
}

use crate::support::retention_cases;

#[test]
fn retention_and_consumers_on_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log");
    retention_cases::retention_rows(&weft, log.to_str().unwrap(), true);
    retention_cases::stream_rows(&weft, log.to_str().unwrap());
}
