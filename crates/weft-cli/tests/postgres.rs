//! The `weft` command on a PostgreSQL log (the server from
//! `scripts/postgres.sh`, env `WEFT_TEST_PG_URL`; without it this fails).

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
    assert_eq!(again, first);
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
