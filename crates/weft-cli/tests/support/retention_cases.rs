//! `weft retention` and `weft consumers`, the same rows on every backend
//! (run by `cli.rs` on a directory and through `weft serve`, `s3.rs` on
//! SeaweedFS, `postgres.rs` on the PostgreSQL test server): a log starts
//! with no policy; a policy set is stored with the log and shown back;
//! consumer positions are committed, only move forward and are listed with
//! how far behind they are; `--apply` drops what the policy says and no
//! more than a protected consumer allows; `--clear` removes the policy.
//! `weft stream` (the same four places): a stream truncated before a
//! version or deleted softly reads from its start, keeps its numbering,
//! and refuses a start past its next version; `--erase` empties, in place,
//! the payloads its start hides.

use std::process::Output;

use serde_json::Value;

// The test file declares `rows` (support/rows.rs) once for both tables.
use super::rows::{exit, lines};

fn first_seqnum(weft: &dyn Fn(&[&str]) -> Output, log: &str) -> u64 {
    lines(&weft(&["read", log, "--json", "--limit", "1"]))[0]["seqnum"]
        .as_u64()
        .unwrap()
}

/// Runs the rows on the empty log at `log`. `can_apply`: the command may
/// trim this log itself (not a bucket log, whose writer does).
pub(crate) fn retention_rows(weft: &dyn Fn(&[&str]) -> Output, log: &str, can_apply: bool) {
    for i in 0..10 {
        lines(&weft(&[
            "append",
            log,
            "--create",
            "--json",
            "-t",
            "a",
            &format!("e{i}"),
        ]));
    }
    let shown = lines(&weft(&["retention", log, "--json"]));
    assert_eq!(shown[0]["policy"], Value::Null, "{shown:?}");
    let set = lines(&weft(&[
        "retention",
        log,
        "--max-count",
        "4",
        "--max-age",
        "30d",
        "--max-bytes",
        "10GiB",
        "--protect-consumer",
        "billing",
        "--json",
    ]));
    let policy = &set[0]["policy"];
    assert_eq!(policy["max_count"].as_u64(), Some(4));
    assert_eq!(policy["max_age_ms"].as_u64(), Some(30 * 86_400_000));
    assert_eq!(policy["max_bytes"].as_u64(), Some(10 << 30));
    assert_eq!(policy["protect_consumers"][0], "billing");
    assert_eq!(
        lines(&weft(&["retention", log, "--json"]))[0]["policy"],
        *policy
    );
    // Bad values are usage errors (exit 2) and change nothing.
    assert_eq!(
        weft(&["retention", log, "--max-age", "7"]).status.code(),
        Some(2)
    );
    assert_eq!(
        weft(&["retention", log, "--max-count", "4", "--clear"])
            .status
            .code(),
        Some(2)
    );
    exit(
        &weft(&["retention", log, "--protect-consumer", "no spaces"]),
        4,
        "invalid_input",
    );
    assert_eq!(
        lines(&weft(&["retention", log, "--json"]))[0]["policy"],
        *policy
    );

    assert!(lines(&weft(&["consumers", log, "--json"])).is_empty());
    let listed = lines(&weft(&[
        "consumers",
        log,
        "--json",
        "--commit",
        "billing",
        "--to",
        "3",
    ]));
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["name"], "billing");
    assert_eq!(listed[0]["filter"], Value::Null);
    assert_eq!(listed[0]["position"].as_u64(), Some(3));
    assert_eq!(listed[0]["behind"].as_u64(), Some(7));
    // Never backwards; never past the end.
    let listed = lines(&weft(&[
        "consumers",
        log,
        "--json",
        "--commit",
        "billing",
        "--to",
        "1",
    ]));
    assert_eq!(listed[0]["position"].as_u64(), Some(3));
    exit(
        &weft(&["consumers", log, "--commit", "billing", "--to", "11"]),
        4,
        "invalid_input",
    );

    if can_apply {
        let applied = lines(&weft(&["retention", log, "--apply", "--json"]));
        let applied = &applied[0]["applied"];
        assert_eq!(applied["held_by"]["consumer"], "billing", "{applied:?}");
        assert_eq!(applied["held_by"]["position"].as_u64(), Some(3));
        assert_eq!(first_seqnum(weft, log), 3);
        exit(&weft(&["read", log, "--from", "2", "--json"]), 4, "trimmed");
        lines(&weft(&[
            "consumers",
            log,
            "--json",
            "--commit",
            "billing",
            "--to",
            "10",
        ]));
        let applied = lines(&weft(&["retention", log, "--apply", "--json"]));
        assert_eq!(applied[0]["applied"]["held_by"], Value::Null, "{applied:?}");
        assert_eq!(first_seqnum(weft, log), 6);
    } else {
        exit(&weft(&["retention", log, "--apply"]), 8, "unsupported");
    }

    let cleared = lines(&weft(&["retention", log, "--clear", "--json"]));
    assert_eq!(cleared[0]["policy"], Value::Null);
    assert_eq!(
        lines(&weft(&["retention", log, "--json"]))[0]["policy"],
        Value::Null
    );
    // The positions stay.
    let listed = lines(&weft(&["consumers", log, "--json"]));
    assert_eq!(listed.len(), 1);
}

/// `weft stream` rows on the log at `log` (any state: they use their own
/// stream).
pub(crate) fn stream_rows(weft: &dyn Fn(&[&str]) -> Output, log: &str) {
    let t = "cart:rows";
    for i in 0..4 {
        lines(&weft(&["append", log, "--json", "-t", t, &format!("c{i}")]));
    }
    let versions = || -> Vec<u64> {
        lines(&weft(&["read", log, "--tag", t, "--json"]))
            .iter()
            .map(|e| e["stream_version"].as_u64().unwrap())
            .collect()
    };
    let shown = lines(&weft(&["stream", log, t, "--json"]));
    assert_eq!(shown[0]["start_version"], 0, "{shown:?}");
    assert_eq!(shown[0]["next_version"], 4, "{shown:?}");
    assert_eq!(shown[0]["deleted"], false, "{shown:?}");
    let set = lines(&weft(&[
        "stream",
        log,
        t,
        "--truncate-before",
        "2",
        "--json",
    ]));
    assert_eq!(set[0]["start_version"], 2, "{set:?}");
    assert_eq!(versions(), [2, 3]);
    exit(
        &weft(&["stream", log, t, "--truncate-before", "9"]),
        4,
        "invalid_input",
    );
    assert_eq!(
        lines(&weft(&["stream", log, t, "--json"]))[0]["start_version"],
        2
    );
    let deleted = lines(&weft(&["stream", log, t, "--delete", "--json"]));
    assert_eq!(deleted[0]["start_version"], 4, "{deleted:?}");
    assert_eq!(deleted[0]["deleted"], true, "{deleted:?}");
    assert!(versions().is_empty());
    lines(&weft(&["append", log, "--json", "-t", t, "again"]));
    assert_eq!(versions(), [4]);
    let text = weft(&["stream", log, t]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("deleted; reads start at version 4"),
        "{text:?}"
    );

    // The hard delete: the payloads of versions 0..4 are erased, in place;
    // the new life (version 4) keeps its own.
    let erased = lines(&weft(&["stream", log, t, "--erase", "--json"]));
    assert_eq!(erased[0]["erased"], 4, "{erased:?}");
    assert_eq!(erased[0]["start_version"], 4, "{erased:?}");
    let mine: Vec<Value> = lines(&weft(&["read", log, "--json"]))
        .into_iter()
        .filter(|e| e["tags"][0] == t)
        .collect();
    let summary: Vec<(u64, &str)> = mine
        .iter()
        .map(|e| {
            (
                e["stream_version"].as_u64().unwrap(),
                e["data"].as_str().unwrap(),
            )
        })
        .collect();
    // "again" in base64.
    assert_eq!(
        summary,
        [(0, ""), (1, ""), (2, ""), (3, ""), (4, "YWdhaW4=")],
        "{mine:?}"
    );
    let text = weft(&["stream", log, t, "--erase"]);
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .contains("erased the payloads of 0 entries below version 4"),
        "{text:?}"
    );
}
