//! The `weft` command on a PostgreSQL log (the server from
//! `scripts/postgres.sh`, env `WEFT_TEST_PG_URL`; without it this fails).

// Tests read real time and randomness (process timeouts, fresh log names).
#![allow(clippy::disallowed_methods)]

use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_weft");

fn weft(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run weft")
}

fn location() -> String {
    let url = std::env::var("WEFT_TEST_PG_URL").unwrap_or_else(|_| {
        panic!("WEFT_TEST_PG_URL is not set: run scripts/postgres.sh start and source its env file")
    });
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}log=cli_{}_{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish() % 1_000_000
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn append_read_inspect_verify_on_postgres() {
    let log = location();
    let missing = weft(&["append", &log, "--tag", "orders", "x"]);
    assert_eq!(missing.status.code(), Some(3), "a missing log is not_found");

    let first = weft(&[
        "append",
        &log,
        "--create",
        "--json",
        "--tag",
        "orders",
        "--tag",
        "orders:o-1",
        "--id",
        "o-1",
        "placed",
    ]);
    assert!(first.status.success(), "{first:?}");
    let first: Value = serde_json::from_str(stdout(&first).trim()).unwrap();
    assert_eq!(first["seqnum"], 0);
    weft(&["append", &log, "--tag", "orders", "paid"]);
    // The same id again: nothing written, the original seqnum printed.
    let again = weft(&[
        "append", &log, "--json", "--tag", "orders", "--id", "o-1", "placed",
    ]);
    let again: Value = serde_json::from_str(stdout(&again).trim()).unwrap();
    assert_eq!(again["seqnum"], first["seqnum"]);
    assert_eq!(again["duplicate"], true);
    assert_eq!(
        first.get("duplicate"),
        None,
        "a first append is no duplicate"
    );
    let text = weft(&["append", &log, "--tag", "orders", "--id", "o-1", "placed"]);
    assert!(text.status.success(), "{text:?}");
    assert_eq!(
        stdout(&text).trim(),
        "already in the log: append id \"o-1\" is seqnum 0 (orders v0); nothing written"
    );
    let conflict = weft(&[
        "append",
        &log,
        "--tag",
        "orders",
        "--if-version",
        "0",
        "late",
    ]);
    assert_eq!(conflict.status.code(), Some(5));

    let read = weft(&["read", &log, "--json"]);
    assert!(read.status.success());
    let lines: Vec<Value> = stdout(&read)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["stream_version"], 1);
    let by_tag = weft(&["read", &log, "--tag", "orders:o-1", "--json"]);
    assert_eq!(stdout(&by_tag).lines().count(), 1);
    let tail = weft(&["tail", &log, "--from", "0", "--max", "2"]);
    assert!(tail.status.success(), "{tail:?}");
    assert_eq!(
        stdout(&tail).lines().filter(|l| l.starts_with('#')).count(),
        2
    );

    let inspect = weft(&["inspect", &log, "--json"]);
    let report: Value = serde_json::from_str(stdout(&inspect).trim()).unwrap();
    assert_eq!(report["kind"], "postgres");
    assert_eq!(report["next_seqnum"], 2);
    assert_eq!(report["append_ids"], 1);
    let verify = weft(&["verify", &log]);
    assert!(verify.status.success(), "{verify:?}");

    let bad = weft(&["read", "postgres://weft@127.0.0.1:1/weft?log=Bad"]);
    assert_eq!(
        bad.status.code(),
        Some(4),
        "a bad log name is invalid input"
    );
}

/// The pid a demo line names after `marker`, e.g. "in this process (123)".
fn pid_after(text: &str, marker: &str) -> u32 {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker:?} in:\n{text}"));
    text[at + marker.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no pid after {marker:?} in:\n{text}"))
}

#[test]
fn demo_splits_its_executors_across_two_processes_and_resumes() {
    let log = location();
    let first = weft(&["demo", &log, "--orders", "6"]);
    let text = stdout(&first);
    assert!(first.status.success(), "{first:?}");
    let here = pid_after(&text, "inventory runs in this process (");
    let there = pid_after(&text, "[shipping pid ");
    assert_ne!(here, there, "shipping ran in a second process:\n{text}");
    assert!(text.contains("  orders     6 placed, "), "{text}");
    let again = weft(&["demo", &log, "--orders", "4"]);
    let text = stdout(&again);
    assert!(again.status.success(), "{again:?}");
    assert!(text.contains("resuming:"), "{text}");
    assert!(text.contains("  orders     10 placed, "), "{text}");

    // Across both runs and both processes: every reserved order shipped
    // exactly once, and nothing shipped that was not reserved.
    let read = weft(&["read", &log, "--json"]);
    assert!(read.status.success(), "{read:?}");
    let mut reserved = std::collections::BTreeMap::new();
    let mut shipped = std::collections::BTreeMap::new();
    for line in stdout(&read).lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD
            .decode(entry["data"].as_str().unwrap())
            .unwrap();
        let event: Value = serde_json::from_slice(&data).unwrap();
        let order = event["order"].as_str().unwrap_or_default().to_owned();
        match event["event"].as_str() {
            Some("reserved") => *reserved.entry(order).or_insert(0) += 1,
            Some("shipped") => *shipped.entry(order).or_insert(0) += 1,
            _ => {}
        }
    }
    assert!(!reserved.is_empty());
    assert_eq!(reserved, shipped, "each reserved order shipped once");
    assert!(shipped.values().all(|&n| n == 1));
}

use crate::support::trim_cases;

#[test]
fn trim_drops_entries_through_a_seqnum_on_postgres() {
    trim_cases::trim_rows(&weft, &location());
}

use crate::support::retention_cases;

#[test]
fn retention_and_consumers_on_postgres() {
    let log = location();
    retention_cases::retention_rows(&weft, &log, true);
    retention_cases::stream_rows(&weft, &log);
}
