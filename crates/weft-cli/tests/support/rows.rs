//! What the table-of-rows tests (`trim_cases`, `retention_cases`) check
//! of one command's output.

use std::process::Output;

use serde_json::Value;

/// The JSON lines of a command that must have succeeded.
pub(crate) fn lines(out: &Output) -> Vec<Value> {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Checks a command's exit code and the error kind its last line names.
pub(crate) fn exit(out: &Output, code: i32, kind: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.trim_end().ends_with(&format!("({kind})")), "{err}");
}
