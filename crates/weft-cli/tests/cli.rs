//! The `weft` binary driven as a user drives it: arguments in, stdout,
//! stderr and exit code out.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use base64::Engine as _;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_weft");

fn weft(args: &[&str]) -> Output {
    weft_with_stdin(args, None)
}

fn weft_with_stdin(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
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

/// The upstream compatibility vectors, found by walking up from this crate
/// to the directory that holds `shared/`.
fn compat_a() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in here.ancestors() {
        let candidate = dir.join("shared/compat/opendata-buffer-0.3/A");
        if candidate.join("expected.json").is_file() {
            return candidate;
        }
    }
    panic!(
        "the compatibility vectors shared/compat/opendata-buffer-0.3/A were not found above {}; \
         the repository must sit next to shared/",
        here.display()
    );
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
        weft(&["wal", "dump", &file_url(&a), "--manifest", "wal/manifest"]),
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
/// encoders into `dir/wal/`.
fn write_v4_bucket(dir: &Path) {
    use weft::format::{Compression, ManifestVersion, SegmentVersion, encode_segment};
    use weft::wal::Manifest;
    std::fs::create_dir_all(dir.join("wal/run")).unwrap();
    let mut m = Manifest::new(ManifestVersion::V4);
    for (i, records) in [vec!["one", "two"], vec!["three"]].iter().enumerate() {
        let loc = format!("wal/run/{i:016x}");
        let seg = encode_segment(records, Compression::None, SegmentVersion::V2).unwrap();
        std::fs::write(dir.join(&loc), &seg).unwrap();
        m.append(loc, vec![], records.len()).unwrap();
    }
    std::fs::write(dir.join("wal/manifest"), m.to_bytes().unwrap()).unwrap();
}

#[test]
fn verify_checks_segment_checksums_of_a_v4_log() {
    let tmp = tempfile::tempdir().unwrap();
    write_v4_bucket(tmp.path());
    let url = file_url(tmp.path());
    ok(weft(&["verify", &url]));
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
        "wal/manifest",
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
    flip_byte(&tmp.path().join("wal/run/0000000000000000"), 5);
    let out = weft(&["verify", &url]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("crc32c mismatch"), "{}", stdout(&out));
}

// ---------------------------------------------------------------- unsupported

#[test]
fn buckets_cannot_be_written_yet_and_gc_snapshot_refuse() {
    fails(
        weft(&["append", "s3://logs/x", "--tag", "orders", "data"]),
        8,
        "unsupported",
    );
    fails(weft(&["read", "s3://logs/x"]), 8, "unsupported");
    fails(weft(&["gc", "s3://logs/x"]), 8, "unsupported");
    fails(weft(&["snapshot", "s3://logs/x"]), 8, "unsupported");
}
