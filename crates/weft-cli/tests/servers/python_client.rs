//! The Python example client (examples/python) against a real `weft serve`
//! OS process on a `dir` log: the script's appends, reads and subscription,
//! checked against the log as the `weft` command reads it from disk.
//!
//! Needs `python3` (standard library only); without it this fails.

// Tests wait in real time.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use serde_json::Value;

use support::served::Served;

const BIN: &str = env!("CARGO_BIN_EXE_weft");

fn examples_dir() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/python"
    ))
}

/// The script's output: one JSON object per step, by step name.
fn run_script(server: &Served) -> BTreeMap<String, Value> {
    let out = Command::new("python3")
        .arg("orders.py")
        .arg(&server.url)
        .current_dir(examples_dir())
        // No bytecode cache left in the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python3 (is it installed?)");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "orders.py failed ({}):\n{stdout}\n{}\nserver:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        server.stderr()
    );
    stdout
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            (v["step"].as_str().unwrap().to_owned(), v)
        })
        .collect()
}

/// The log's entries as `weft read --json` prints them (a read-only
/// follower of the directory: no lock, the server keeps running).
fn log_entries(dir: &Path) -> Vec<Value> {
    let out = Command::new(BIN)
        .args(["read", dir.to_str().unwrap(), "--json"])
        .env_remove("RUST_LOG")
        .output()
        .expect("run weft read");
    assert!(out.status.success(), "weft read: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn payload(entry: &Value) -> Value {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(entry["data"].as_str().unwrap())
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn u64_at(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn python_client_appends_reads_and_subscribes_against_a_server() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let server = Served::start(&[dir.to_str().unwrap(), "--create"], &[], Some(tmp.path()));
    let steps = run_script(&server);
    let log = log_entries(&dir);
    let by_seqnum: BTreeMap<u64, &Value> = log.iter().map(|e| (u64_at(e, "seqnum"), e)).collect();

    assert_eq!(steps["status"]["backend"], "dir");
    assert_eq!(steps["status"]["role"], "leader");

    // The conditional append landed where its answer said.
    let placed = u64_at(&steps["append"], "seqnum");
    let entry = by_seqnum[&placed];
    assert_eq!(entry["tags"], serde_json::json!(["orders", "orders:o-1"]));
    assert_eq!(payload(entry)["event"], "placed");
    assert_eq!(entry["stream_version"], steps["append"]["stream_version"]);

    // The retry with the same id answered the original position and wrote
    // nothing: o-1 was placed exactly once.
    assert_eq!(steps["retry"]["seqnum"], steps["append"]["seqnum"]);
    assert_eq!(
        steps["retry"]["stream_version"],
        steps["append"]["stream_version"]
    );
    let o1 = log.iter().filter(|e| payload(e)["order"] == "o-1").count();
    assert_eq!(o1, 1, "o-1 placed once: {log:?}");

    // The stale condition was refused as a conflict and wrote nothing.
    assert_eq!(steps["conflict"]["kind"], "conflict");
    assert!(log.iter().all(|e| payload(e)["order"] != "o-9"), "{log:?}");

    // The batch is two adjacent entries, in order.
    let batch = u64_at(&steps["batch"], "seqnum");
    assert_eq!(u64_at(&steps["batch"], "count"), 2);
    assert_eq!(payload(by_seqnum[&batch])["event"], "placed");
    assert_eq!(payload(by_seqnum[&(batch + 1)])["event"], "paid");
    assert_eq!(payload(by_seqnum[&(batch + 1)])["order"], "o-2");

    // The stream read saw `orders` at dense versions, at the log's seqnums.
    let read = &steps["read_stream"];
    let orders_before_live: Vec<u64> = log
        .iter()
        .filter(|e| e["tags"][0] == "orders" && u64_at(e, "seqnum") < batch + 2)
        .map(|e| u64_at(e, "seqnum"))
        .collect();
    assert_eq!(u64s(&read["seqnums"]), orders_before_live);
    let versions = u64s(&read["versions"]);
    assert_eq!(versions, (0..versions.len() as u64).collect::<Vec<_>>());

    assert_eq!(steps["entry"]["seqnum"], steps["append"]["seqnum"]);
    // The entry read back carries the id it was appended with, as the log
    // itself has it.
    assert_eq!(steps["entry"]["id"], "o-1/placed");
    assert_eq!(entry["id"], "o-1/placed");
    assert_eq!(
        serde_json::from_str::<Value>(steps["entry"]["data"].as_str().unwrap()).unwrap(),
        payload(entry)
    );

    // The subscription delivered every entry from its start through the
    // live one, no gap, no duplicate.
    let sub = &steps["subscribe"];
    let live = u64_at(sub, "live_seqnum");
    assert_eq!(payload(by_seqnum[&live])["order"], "o-3");
    let want: Vec<u64> = (u64_at(sub, "from_seqnum")..=live).collect();
    assert_eq!(u64s(&sub["seqnums"]), want);

    // And what the script read back is the log, field for field.
    assert_eq!(steps["entries"]["entries"].as_array().unwrap(), &log);
    assert!(steps.contains_key("done"));
}
