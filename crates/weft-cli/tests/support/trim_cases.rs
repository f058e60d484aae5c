//! `weft trim LOG --through N`, the same rows on every backend (run by
//! `cli.rs` on a directory, `s3.rs` on SeaweedFS, `postgres.rs` on the
//! PostgreSQL test server): entries through N are gone (`read` from below
//! is `trimmed`, exit 4), the rest read as before, a stream's numbering
//! continues, a seqnum at or past the end is `invalid_input` and changes
//! nothing, and a trim point at or below the current start changes
//! nothing.

use std::process::Output;

// The test file declares `rows` (support/rows.rs) once for both tables.
use super::rows::{exit, lines};

/// Runs the rows on the empty log at `log`, through `weft` (the test
/// file's way to run the binary against its backend).
pub(crate) fn trim_rows(weft: &dyn Fn(&[&str]) -> Output, log: &str) {
    for i in 0..5 {
        let t = ["a", "b"][i % 2];
        let out = weft(&[
            "append",
            log,
            "--create",
            "--json",
            "-t",
            t,
            &format!("e{i}"),
        ]);
        lines(&out);
    }
    let trimmed = lines(&weft(&["trim", log, "--through", "1", "--json"]));
    assert_eq!(trimmed[0]["trimmed"], true, "{trimmed:?}");
    exit(&weft(&["read", log, "--from", "0", "--json"]), 4, "trimmed");
    let rest = lines(&weft(&["read", log, "--json"]));
    let seqnums: Vec<u64> = rest.iter().map(|l| l["seqnum"].as_u64().unwrap()).collect();
    assert_eq!(seqnums, vec![2, 3, 4]);

    // Past the end: refused, nothing changed.
    exit(&weft(&["trim", log, "--through", "5"]), 4, "invalid_input");
    assert_eq!(lines(&weft(&["read", log, "--json"])).len(), 3);
    // At or below the start: nothing to do.
    let again = lines(&weft(&["trim", log, "--through", "0", "--json"]));
    assert_eq!(again[0]["trimmed"], false, "{again:?}");
    assert_eq!(lines(&weft(&["read", log, "--json"])).len(), 3);

    // Streams keep their numbering: a had versions 0, 1, 2 (seqnums 0, 2,
    // 4), b had 0, 1 (1, 3); the next entry of each continues.
    let a = lines(&weft(&["append", log, "--json", "-t", "a", "after"]));
    assert_eq!(
        (a[0]["seqnum"].as_u64(), a[0]["stream_version"].as_u64()),
        (Some(5), Some(3))
    );
    let b = lines(&weft(&["append", log, "--json", "-t", "b", "after"]));
    assert_eq!(
        (b[0]["seqnum"].as_u64(), b[0]["stream_version"].as_u64()),
        (Some(6), Some(2))
    );
    // Up to the last entry but one.
    lines(&weft(&["trim", log, "--through", "5", "--json"]));
    let left = lines(&weft(&["read", log, "--json"]));
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["seqnum"].as_u64(), Some(6));
}
