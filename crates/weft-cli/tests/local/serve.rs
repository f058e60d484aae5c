//! `weft serve` as users run it: one OS process per server, the `weft`
//! command as its client.

#![allow(clippy::disallowed_methods)]

use crate::support::served as serve_support;

use serve_support::{serve, weft};

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// A dir log served by one process is `Locked` for a second `weft serve`;
/// SIGTERM drains and exits 0, and every acknowledged append is in the
/// log afterwards, once.
#[test]
fn a_served_dir_is_locked_and_sigterm_drains_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let log = log.to_str().unwrap();
    let served = serve(&[log, "--create"]);
    let second = weft(&["serve", log, "--listen", "127.0.0.1:0"]);
    assert_eq!(second.status.code(), Some(7), "{}", text(&second.stderr));
    assert!(
        text(&second.stderr).contains("locked"),
        "{}",
        text(&second.stderr)
    );

    // Appends from several client processes at once, each with an id;
    // the server is told to stop while they run.
    let url = served.url.clone();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut acknowledged = Vec::new();
                for i in 0..15 {
                    let id = format!("w{w}-{i}");
                    let out = weft(&[
                        "append",
                        &url,
                        "--tag",
                        "orders",
                        "--id",
                        &id,
                        "--deadline",
                        "2",
                        &id,
                    ]);
                    if out.status.success() {
                        acknowledged.push(id);
                    }
                }
                acknowledged
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    served.signal("TERM");
    let status = served.wait();
    assert!(status.success(), "weft serve exited with {status}");
    let acknowledged: Vec<String> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert!(
        !acknowledged.is_empty(),
        "no append was acknowledged before the stop"
    );

    // The log closed cleanly: it opens again, and holds every
    // acknowledged entry exactly once.
    let read = weft(&["read", log, "--json"]);
    assert!(read.status.success(), "{}", text(&read.stderr));
    let lines = text(&read.stdout);
    for id in &acknowledged {
        let needle = format!("\"{id}\"");
        let b64 = base64_of(id);
        let count = lines
            .lines()
            .filter(|l| l.contains(&needle) || l.contains(&b64))
            .count();
        assert_eq!(count, 1, "{id} appears {count} times in:\n{lines}");
    }
}

fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The served log through the command: append with an id (a retry is a
/// duplicate, nothing written), a conditional append, read, tip.
#[test]
fn the_command_works_against_a_server() {
    let served = serve(&["memory:"]);
    let url = served.url.as_str();
    let first = weft(&["append", url, "--tag", "t", "--id", "x1", "one"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let retry = weft(&["append", url, "--tag", "t", "--id", "x1", "one"]);
    assert!(retry.status.success());
    assert!(
        text(&retry.stdout).contains("already in the log"),
        "{}",
        text(&retry.stdout)
    );
    let lost = weft(&["append", url, "--tag", "t", "--if-version", "0", "two"]);
    assert_eq!(lost.status.code(), Some(5), "{}", text(&lost.stderr));
    let won = weft(&["append", url, "--tag", "t", "--if-version", "1", "two"]);
    assert!(won.status.success(), "{}", text(&won.stderr));
    let read = weft(&["read", url]);
    let out = text(&read.stdout);
    assert!(out.contains("one") && out.contains("two"), "{out}");
    assert_eq!(out.lines().count(), 2, "{out}");
    served.signal("INT");
    assert!(served.wait().success());
}

use crate::support::retention_cases;

/// The retention rows through a server: the policy and positions are the
/// served log's, and `--apply` trims through it.
#[test]
fn retention_and_consumers_through_a_server() {
    let served = serve(&["memory:"]);
    retention_cases::retention_rows(&weft, served.url.as_str(), true);
    retention_cases::stream_rows(&weft, served.url.as_str());
    served.signal("INT");
    assert!(served.wait().success());
}
