//! A hostile operator against the `dir` backend's single-writer guarantee,
//! with two processes: the test binary runs itself again as the second
//! writer (`WEFT_WRITER_CHILD_DIR`).
//!
//! Each attack removes or swaps something under a running writer and then
//! lets a second process try to write the log. The guarantee is that the
//! second writer is refused (`Locked`) while the first lives, or — when the
//! directory itself was swapped, which no lock can prevent — that the first
//! writer stops (`Closed`) instead of spreading one log over two
//! directories. Afterwards every directory holds one writer's entries,
//! densely numbered.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use weft::storage::dir::DirStorage;
use weft::{AppendRequest, ErrorKind, Log, LogTag};

const CHILD_DIR: &str = "WEFT_WRITER_CHILD_DIR";
/// Entries the second writer appends once it has opened the log.
const CHILD_ENTRIES: u64 = 5;

fn tag() -> LogTag {
    LogTag::new("w").expect("tag")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// One attack, run against a fresh log directory path.
type Attack = fn(&Path);

fn main() {
    if let Ok(dir) = std::env::var(CHILD_DIR) {
        child(Path::new(&dir));
        return;
    }
    let attacks: [(&str, Attack); 5] = [
        (
            "the LOCK file of an earlier build is deleted",
            lock_file_deleted,
        ),
        (
            "every file but the segments is deleted",
            everything_but_segments_deleted,
        ),
        ("the first writer is the other process", other_process_holds),
        ("the directory is renamed and recreated", directory_replaced),
        ("the directory is removed", directory_removed),
    ];
    for (name, attack) in attacks {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("log");
        attack(&dir);
        println!("ok: {name}");
    }
}

/// The second writer: opens the log, reports `opened` or `refused <kind>`,
/// and once opened appends [`CHILD_ENTRIES`] entries, reports `appended`,
/// and holds the log until its stdin closes.
fn child(dir: &Path) {
    runtime().block_on(async {
        let storage = match DirStorage::open(dir).await {
            Ok(s) => s,
            Err(e) => {
                println!("refused {}", e.kind());
                return;
            }
        };
        println!("opened");
        let log = Log::new(storage);
        for i in 0..CHILD_ENTRIES {
            log.append(AppendRequest::new(tag(), format!("child {i}")))
                .await
                .expect("child append");
        }
        println!("appended");
        std::io::stdout().flush().expect("flush");
        let mut rest = String::new();
        let _ = std::io::stdin().read_line(&mut rest);
        log.close().await.expect("child close");
    });
}

struct SecondWriter {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl SecondWriter {
    fn start(dir: &Path) -> SecondWriter {
        let mut child = Command::new(std::env::current_exe().expect("own path"))
            .env(CHILD_DIR, dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the second writer");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        SecondWriter { child, out }
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.out.read_line(&mut line).expect("read the child");
        line.trim().to_owned()
    }

    /// Closes its stdin and waits for it to exit cleanly.
    fn finish(mut self) {
        drop(self.child.stdin.take());
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "second writer exited with {status}");
    }
}

/// Appends `n` entries through `log`, expecting success.
async fn append(log: &Log, n: u64, who: &str) {
    for i in 0..n {
        log.append(AppendRequest::new(tag(), format!("{who} {i}")))
            .await
            .expect("append");
    }
}

/// Opens `dir` after every writer is gone and returns each entry's payload
/// prefix (who wrote it), checking that seqnums and versions are dense.
fn writers_of(dir: &Path) -> Vec<String> {
    runtime().block_on(async {
        let log = Log::new(DirStorage::open(dir).await.expect("reopen"));
        let entries = log.read_all(&tag()).await.expect("read");
        for (i, e) in entries.iter().enumerate() {
            assert_eq!((e.seqnum, e.stream_version), (i as u64, i as u64));
        }
        let who = entries
            .iter()
            .map(|e| {
                let text = std::str::from_utf8(&e.data).expect("text");
                text.split(' ').next().unwrap_or_default().to_owned()
            })
            .collect();
        log.close().await.expect("close");
        who
    })
}

/// The parent writes, the named files vanish, the second writer must be
/// refused, and the parent keeps writing.
fn refused_after(dir: &Path, remove: impl Fn(&Path)) {
    let rt = runtime();
    let log = rt.block_on(async {
        let log = Log::new(DirStorage::open(dir).await.expect("open"));
        append(&log, 3, "parent").await;
        log
    });
    remove(dir);
    let mut second = SecondWriter::start(dir);
    assert_eq!(second.line(), "refused locked");
    second.finish();
    rt.block_on(async {
        append(&log, 3, "parent").await;
        log.close().await.expect("close");
    });
    assert_eq!(writers_of(dir), vec!["parent"; 6]);
}

fn lock_file_deleted(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    // The lock file an earlier build locked: its absence must not matter.
    std::fs::write(dir.join("LOCK"), b"").expect("write LOCK");
    refused_after(dir, |dir| {
        std::fs::remove_file(dir.join("LOCK")).expect("remove LOCK");
    });
}

fn everything_but_segments_deleted(dir: &Path) {
    refused_after(dir, |dir| {
        for entry in std::fs::read_dir(dir).expect("list") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "seg") {
                continue;
            }
            if path.is_dir() {
                std::fs::remove_dir_all(&path).expect("remove dir");
            } else {
                std::fs::remove_file(&path).expect("remove file");
            }
        }
    });
}

fn other_process_holds(dir: &Path) {
    let mut first = SecondWriter::start(dir);
    assert_eq!(first.line(), "opened");
    assert_eq!(first.line(), "appended");
    let _ = std::fs::remove_file(dir.join("LOCK"));
    let err = runtime()
        .block_on(DirStorage::open(dir))
        .expect_err("the log is open in the other process");
    assert_eq!(err.kind(), ErrorKind::Locked);
    first.finish();
    assert_eq!(writers_of(dir), vec!["child"; CHILD_ENTRIES as usize]);
}

fn directory_replaced(dir: &Path) {
    let rt = runtime();
    let log = rt.block_on(async {
        let log = Log::new(DirStorage::open(dir).await.expect("open"));
        append(&log, 3, "parent").await;
        log
    });
    let moved = dir.with_file_name("moved");
    std::fs::rename(dir, &moved).expect("rename");
    std::fs::create_dir(dir).expect("recreate");
    // A second writer gets the new, empty directory: nothing can stop it.
    let mut second = SecondWriter::start(dir);
    assert_eq!(second.line(), "opened");
    assert_eq!(second.line(), "appended");
    // The first writer must notice and stop rather than write on.
    rt.block_on(async {
        let err = log
            .append(AppendRequest::new(tag(), "parent late"))
            .await
            .expect_err("the directory was swapped");
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
        assert_eq!(log.tip().await.unwrap().next, 3);
        let err = log.trim(1).await.expect_err("no trim either");
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
        let _ = log.close().await;
    });
    second.finish();
    assert_eq!(writers_of(dir), vec!["child"; CHILD_ENTRIES as usize]);
    assert_eq!(writers_of(&moved), vec!["parent"; 3]);
}

fn directory_removed(dir: &Path) {
    let rt = runtime();
    rt.block_on(async {
        let log = Log::new(DirStorage::open(dir).await.expect("open"));
        append(&log, 3, "parent").await;
        std::fs::remove_dir_all(dir).expect("remove");
        let err = log
            .append(AppendRequest::new(tag(), "parent late"))
            .await
            .expect_err("the directory is gone");
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
        let kv = log.view(tag()).kv().expect("kv");
        let err = kv.set("k", "v").await.expect_err("kv writes stop too");
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
        let _ = log.close().await;
    });
    assert!(!dir.exists(), "nothing recreated the removed directory");
}
