//! The PostgreSQL server stops answering without going away (its
//! postmaster SIGSTOPped, so no new session starts): every `weft` command
//! on a PostgreSQL log stops on SIGINT and on SIGTERM, and `tail` at its
//! `--timeout`, instead of waiting for the server.
//!
//! The only test in its binary, so no other test talks to the server while
//! it is paused; a guard resumes it however the test ends. Fails (never
//! skips) without the server's env (`scripts/postgres.sh`).

// Tests wait and measure in real time: the determinism rules of
// clippy.toml are for library code.
#![allow(clippy::disallowed_methods)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[path = "support/mod.rs"]
mod support;

use support::pause;

use pause::{Paused, signal, wait_bounded};

const BIN: &str = env!("CARGO_BIN_EXE_weft");

fn required(key: &str) -> String {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{key} is not set: run scripts/postgres.sh start and source its env file"),
    }
}

fn spawn(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run weft")
}

#[test]
fn every_command_on_a_paused_postgres_stops_when_told() {
    let url = required("WEFT_TEST_PG_URL");
    let sep = if url.contains('?') { '&' } else { '?' };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let log = format!(
        "{url}{sep}log=pause_{}_{}",
        std::process::id(),
        nanos % 1_000_000_000
    );
    let first = spawn(&["append", &log, "--create", "--tag", "orders", "before"]);
    let out = wait_bounded(first, "the first append", Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The postmaster's PID now: a test before this one may have restarted
    // the server, which leaves $WEFT_TEST_PG_PID stale.
    let script = required("WEFT_TEST_PG_RESTART");
    let out = Command::new(&script)
        .arg("pid")
        .output()
        .expect("run postgres.sh pid");
    assert!(
        out.status.success(),
        "{script} pid: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    {
        signal(pid, "-STOP");
        let _paused = Paused(pid);
        let commands: Vec<Vec<&str>> = vec![
            vec!["append", &log, "--tag", "orders", "during"],
            vec!["read", &log],
            vec!["tail", &log],
            vec!["inspect", &log],
            vec!["verify", &log],
        ];
        for args in &commands {
            for sig in ["-INT", "-TERM"] {
                let child = spawn(args);
                std::thread::sleep(Duration::from_millis(1500));
                signal(child.id(), sig);
                // Well below the command's own 10 s operation deadline.
                let out = wait_bounded(
                    child,
                    &format!("{args:?} after {sig}"),
                    Duration::from_secs(5),
                );
                let err = String::from_utf8_lossy(&out.stderr);
                let want = if args[0] == "tail" { 0 } else { 130 };
                assert_eq!(out.status.code(), Some(want), "{args:?} {sig}: {err}");
            }
        }
        let tail = spawn(&["tail", &log, "--timeout", "1"]);
        let out = wait_bounded(tail, "tail --timeout 1", Duration::from_secs(5));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(9), "{err}");
        assert!(err.contains("--timeout"), "{err}");
    }
    let after = spawn(&["append", &log, "--tag", "orders", "after"]);
    let out = wait_bounded(after, "the append after", Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
