//! The S3 server stops answering without going away (SIGSTOP): the `weft`
//! command fails with `unavailable` (exit 9) at its `--deadline` instead of
//! stalling for minutes, and works again once the server resumes. Whatever
//! the deadline, every command stops on SIGINT or SIGTERM, and `tail` at
//! its `--timeout`.
//!
//! The only test in its binary, so no other test talks to the server while
//! it is paused; a guard resumes it however the test ends. Fails (never
//! skips) without the server's env.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[path = "support/mod.rs"]
mod support;

use support::pause;

use pause::{Paused, signal, wait_bounded};

const BIN: &str = env!("CARGO_BIN_EXE_weft");

fn required(key: &str) -> String {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{key} is not set: run scripts/test.sh (it starts SeaweedFS)"),
    }
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
        .stdin(Stdio::null())
        .output()
        .expect("run weft")
}

fn server_pid() -> u32 {
    let state = std::env::var("WEFT_TEST_S3_STATE_DIR").unwrap_or_default();
    let pid = std::fs::read_to_string(std::path::Path::new(&state).join("pid"))
        .unwrap_or_else(|_| required("WEFT_TEST_S3_PID"));
    pid.trim().parse().expect("the server pid is a number")
}

#[test]
fn commands_fail_at_their_deadline_when_the_server_is_paused() {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let url = format!(
        "s3://{}/weft-cli-tests/pause/{}-{nanos}",
        required("WEFT_TEST_S3_BUCKET"),
        std::process::id()
    );
    let out = weft(&["append", &url, "--create", "--tag", "orders", "before"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let pid = server_pid();
    {
        signal(pid, "-STOP");
        let _paused = Paused(pid);
        for args in [
            vec![
                "append",
                &url,
                "--deadline",
                "3",
                "--tag",
                "orders",
                "during",
            ],
            vec!["read", &url, "--deadline", "3"],
            vec!["gc", &url, "--deadline", "3", "--dry-run"],
            vec!["snapshot", &url, "--deadline", "3", "--through", "0"],
        ] {
            let started = Instant::now();
            let out = weft(&args);
            let took = started.elapsed();
            let err = String::from_utf8_lossy(&out.stderr);
            eprintln!("s3_pause: {} took {took:?}: {err}", args[0]);
            assert_eq!(out.status.code(), Some(9), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.trim_end().ends_with("(unavailable)")
                    || err.trim_end().ends_with("(indeterminate)"),
                "{err}"
            );
            // The stall this replaces lasted about four minutes.
            assert!(took < Duration::from_secs(30), "{args:?} took {took:?}");
        }
    }
    {
        signal(pid, "-STOP");
        let _paused = Paused(pid);
        every_command_stops_when_told(&url);
    }
    let out = weft(&["append", &url, "--tag", "orders", "after"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn spawn(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .args([
            "--endpoint",
            &required("WEFT_TEST_S3_ENDPOINT"),
            "--allow-http",
            // Far beyond the test: only the signal or --timeout can end it.
            "--deadline",
            "3600",
        ])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run weft")
}

/// With the server paused: every command, stuck on the store, ends on
/// SIGINT and on SIGTERM (130; `tail` 0, its normal stop), and `tail
/// --timeout` ends at its timeout (exit 9: the log could not be opened).
fn every_command_stops_when_told(url: &str) {
    let commands: Vec<Vec<&str>> = vec![
        vec!["append", url, "--tag", "orders", "during"],
        vec!["append", url, "--take-over", "--tag", "orders", "during"],
        vec!["read", url],
        vec!["tail", url],
        vec!["inspect", url],
        vec!["verify", url],
        vec!["gc", url, "--dry-run"],
        vec!["snapshot", url, "--through", "0"],
        vec!["wal", "dump", url, "--manifest", "manifest"],
    ];
    for args in &commands {
        for sig in ["-INT", "-TERM"] {
            let child = spawn(args);
            // Give it time to reach the store (and install its handler).
            std::thread::sleep(Duration::from_millis(1500));
            signal(child.id(), sig);
            let out = wait_bounded(
                child,
                &format!("{args:?} after {sig}"),
                Duration::from_secs(10),
            );
            let err = String::from_utf8_lossy(&out.stderr);
            let want = if args[0] == "tail" { 0 } else { 130 };
            assert_eq!(out.status.code(), Some(want), "{args:?} {sig}: {err}");
        }
    }
    let tail = spawn(&["tail", url, "--timeout", "2"]);
    let out = wait_bounded(tail, "tail --timeout 2", Duration::from_secs(15));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{err}");
    assert!(err.contains("--timeout"), "{err}");
}
