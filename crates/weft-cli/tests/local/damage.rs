//! One judgement of damaged data, seen from the command line: for each kind
//! of damage, `weft append` (which opens the log for writing), `weft read`
//! and `weft verify` agree — what opening refuses, reading refuses (exit 6)
//! and verify reports (exit 1); what opening would cut, reading leaves out
//! and verify reports; `read` never prints fewer entries than opening
//! keeps. Also the error kinds (and so the exit codes) of paths that cannot
//! be a log, and of a read-only filesystem.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use object_store::memory::InMemory;
use weft::storage::bucket::{BucketOptions, BucketStorage};
use weft::storage::dir::{DirOptions, DirStorage};
use weft::{AppendRequest, Log, LogTag};

const BIN: &str = env!("CARGO_BIN_EXE_weft");
/// The command's cache of `dir` log indexes, under the build's temporary
/// directory (never the user's).
const INDEX_CACHE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/weft-index-cache");

fn weft(args: &[&str]) -> Output {
    Command::new(BIN)
        .env("WEFT_INDEX_CACHE", INDEX_CACHE)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run weft")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The exit code, and the last word of a one-line error (its kind).
fn outcome(out: &Output) -> (i32, String) {
    let err = text(&out.stderr);
    let kind = err
        .trim()
        .rsplit_once('(')
        .map(|(_, k)| k.trim_end_matches(')').to_owned())
        .unwrap_or_default();
    (out.status.code().unwrap_or(-1), kind)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn tag(i: u64) -> LogTag {
    LogTag::new(format!("s{}", i % 3)).unwrap()
}

fn payload(i: u64) -> Vec<u8> {
    format!("entry {i} {}", "x".repeat((i * 37 % 150) as usize)).into_bytes()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for item in std::fs::read_dir(from).unwrap() {
        let item = item.unwrap();
        let target = to.join(item.file_name());
        if item.file_type().unwrap().is_dir() {
            copy_dir(&item.path(), &target);
        } else {
            std::fs::copy(item.path(), &target).unwrap();
        }
    }
}

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

// ------------------------------------------------------------------ dir

const ENTRIES: u64 = 90;

fn dir_segments(dir: &Path) -> Vec<PathBuf> {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segs.sort();
    segs
}

/// A `dir` log of [`ENTRIES`] entries over several small segments,
/// trimmed through `trim` when given.
fn dir_sample(dir: &Path, trim: Option<u64>) {
    runtime().block_on(async {
        let options = DirOptions::default().with_segment_bytes(4096);
        let log = Log::new(DirStorage::open_with(dir, options).await.unwrap());
        for i in 0..ENTRIES {
            log.append(AppendRequest::new(tag(i), payload(i)))
                .await
                .unwrap();
        }
        assert!(dir_segments(dir).len() >= 3, "several segments");
        if let Some(t) = trim {
            log.trim(t).await.unwrap();
        }
        log.close().await.unwrap();
    });
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Whole(u64),
    Cut(u64),
    Corrupt,
    /// Damage before the point the writer's log index covers: opening for
    /// writing does not read it again (its cost does not grow with the
    /// log), so `append` goes in; reading, `inspect` and `verify` refuse.
    CorruptWhenRead,
}

struct DirCase {
    name: &'static str,
    trim: Option<u64>,
    damage: fn(&Path),
    expect: Expect,
}

fn dir_cases() -> Vec<DirCase> {
    vec![
        DirCase {
            name: "untouched",
            trim: None,
            damage: |_| {},
            expect: Expect::Whole(ENTRIES),
        },
        DirCase {
            name: "a torn tail",
            trim: None,
            damage: |dir| {
                let last = dir_segments(dir).pop().unwrap();
                let len = std::fs::metadata(&last).unwrap().len();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&last)
                    .unwrap()
                    .set_len(len - 3)
                    .unwrap();
            },
            expect: Expect::Cut(ENTRIES - 1),
        },
        DirCase {
            // A crashed writer's preallocated space: a note, not a problem.
            name: "an all-zero tail",
            trim: None,
            damage: |dir| append_bytes(&dir_segments(dir).pop().unwrap(), &[0; 512]),
            expect: Expect::Whole(ENTRIES),
        },
        DirCase {
            name: "a damaged length field mid-log",
            trim: None,
            damage: |dir| {
                let last = dir_segments(dir).pop().unwrap();
                let mut b = std::fs::read(&last).unwrap();
                b[21] = 0x7f;
                std::fs::write(&last, b).unwrap();
            },
            expect: Expect::Corrupt,
        },
        DirCase {
            name: "a flipped byte in a sealed segment",
            trim: None,
            damage: |dir| flip(&dir_segments(dir)[0], 80),
            expect: Expect::CorruptWhenRead,
        },
        DirCase {
            name: "the first segment missing",
            trim: None,
            damage: |dir| std::fs::remove_file(&dir_segments(dir)[0]).unwrap(),
            expect: Expect::Corrupt,
        },
        DirCase {
            name: "the trim file removed after its trim",
            trim: Some(ENTRIES / 2),
            damage: |dir| std::fs::remove_file(dir.join("trim")).unwrap(),
            expect: Expect::Corrupt,
        },
        DirCase {
            name: "a second writer's frame after the log's",
            trim: None,
            damage: |dir| {
                let first = std::fs::read(&dir_segments(dir)[0]).unwrap();
                let len = weft::format::frame::claimed_len(&first[20..]).unwrap();
                append_bytes(&dir_segments(dir).pop().unwrap(), &first[20..20 + len]);
            },
            expect: Expect::Corrupt,
        },
    ]
}

#[test]
fn dir_damage_is_judged_alike_by_append_read_and_verify() {
    for case in dir_cases() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("log");
        dir_sample(&log, case.trim);
        (case.damage)(&log);
        let name = case.name;
        let path = log.display().to_string();

        let before = weft_testkit::files::snapshot(&log);
        let read = weft(&["read", &path, "--json"]);
        let verify = weft(&["verify", &path]);
        let inspect = weft(&["inspect", &path]);
        assert_eq!(
            weft_testkit::files::snapshot(&log),
            before,
            "{name}: read, verify or inspect wrote"
        );
        let writer_copy = tmp.path().join("writer");
        copy_dir(&log, &writer_copy);
        let writer = writer_copy.display().to_string();
        let append = weft(&["append", &writer, "-t", "s0", "late"]);

        let lines = text(&read.stdout).lines().count() as u64;
        let verify_text = text(&verify.stdout);
        match case.expect {
            Expect::Whole(n) | Expect::Cut(n) => {
                assert_eq!(outcome(&append).0, 0, "{name}: append {append:?}");
                assert_eq!(outcome(&read).0, 0, "{name}: read {read:?}");
                assert_eq!(lines, n, "{name}: read prints what opening keeps");
                assert_eq!(outcome(&inspect).0, 0, "{name}: inspect");
                let after = weft(&["read", &writer, "--json"]);
                let kept = text(&after.stdout).lines().count() as u64;
                assert_eq!(kept, n + 1, "{name}: the writer kept {n} and appended one");
            }
            Expect::Corrupt => {
                assert_eq!(outcome(&append), (6, "corrupt".into()), "{name}: append");
                assert_eq!(outcome(&read), (6, "corrupt".into()), "{name}: read");
                assert_eq!(outcome(&inspect), (6, "corrupt".into()), "{name}: inspect");
            }
            Expect::CorruptWhenRead => {
                assert_eq!(outcome(&append).0, 0, "{name}: append {append:?}");
                let after = weft(&["read", &writer, "--json"]);
                assert_eq!(outcome(&after), (6, "corrupt".into()), "{name}: read after");
                assert_eq!(outcome(&read), (6, "corrupt".into()), "{name}: read");
                assert_eq!(outcome(&inspect), (6, "corrupt".into()), "{name}: inspect");
            }
        }
        let whole = matches!(case.expect, Expect::Whole(_));
        let code = if whole { 0 } else { 1 };
        assert_eq!(
            verify.status.code(),
            Some(code),
            "{name}: verify {verify_text}"
        );
        assert!(
            !verify_text.contains("0x00000000, computed 0x00000000"),
            "{name}: {verify_text}"
        );
    }
}

// ------------------------------------------------------------------ bucket

/// A weft bucket log of a few batches, written into memory by the writer
/// and copied out into `dir` as files (a `file://` store).
fn bucket_sample(dir: &Path) {
    runtime().block_on(async {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let log = Log::new(
            BucketStorage::open(store.clone(), "", BucketOptions::default())
                .await
                .unwrap(),
        );
        for b in 0..4u64 {
            let batch = (0..3)
                .map(|i| AppendRequest::new(tag(b * 3 + i), payload(b * 3 + i)))
                .collect();
            log.append_batch(batch).await.unwrap();
        }
        log.close().await.unwrap();
        use futures::TryStreamExt;
        let objects: Vec<_> = store.list(None).try_collect().await.unwrap();
        for meta in objects {
            let bytes = store
                .get(&meta.location)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            let path = dir.join(meta.location.as_ref());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
    });
}

fn bucket_segments(dir: &Path) -> Vec<PathBuf> {
    weft_testkit::files::files_under(&dir.join("segments"))
}

#[test]
fn bucket_damage_is_judged_alike_by_read_verify_and_wal_dump() {
    type Damage = fn(&Path);
    let cases: [(&str, Damage, bool); 5] = [
        ("untouched", |_| {}, false),
        (
            "a segment overwritten by another segment's bytes",
            |dir| {
                let segs = bucket_segments(dir);
                std::fs::copy(&segs[0], &segs[1]).unwrap();
            },
            true,
        ),
        (
            "a segment missing",
            |dir| std::fs::remove_file(&bucket_segments(dir)[1]).unwrap(),
            true,
        ),
        (
            "a flipped byte in a segment",
            |dir| flip(&bucket_segments(dir)[2], 30),
            true,
        ),
        (
            "a segment cut short",
            |dir| {
                let seg = bucket_segments(dir)[0].clone();
                let len = std::fs::metadata(&seg).unwrap().len();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&seg)
                    .unwrap()
                    .set_len(len - 4)
                    .unwrap();
            },
            true,
        ),
    ];
    for (name, damage, damaged) in cases {
        let tmp = tempfile::tempdir().unwrap();
        bucket_sample(tmp.path());
        damage(tmp.path());
        let url = format!("file://{}", tmp.path().canonicalize().unwrap().display());
        let read = weft(&["read", &url, "--json"]);
        let verify = weft(&["verify", &url]);
        let dump = weft(&["wal", "dump", &url, "--manifest", "manifest"]);
        if damaged {
            assert_eq!(outcome(&read), (6, "corrupt".into()), "{name}: read");
            assert_eq!(verify.status.code(), Some(1), "{name}: verify {verify:?}");
            if name != "a segment overwritten by another segment's bytes" {
                // The raw WAL tool agrees wherever the WAL itself is damaged
                // (the overwritten segment is a valid segment of other
                // records: only the entry frames tell).
                assert_eq!(outcome(&dump), (6, "corrupt".into()), "{name}: wal dump");
            }
        } else {
            assert_eq!(outcome(&read).0, 0, "{name}: read");
            assert_eq!(text(&read.stdout).lines().count(), 12);
            assert_eq!(verify.status.code(), Some(0), "{name}: verify {verify:?}");
            assert_eq!(outcome(&dump).0, 0, "{name}: wal dump");
        }
    }
}

// ------------------------------------------------------------------ error kinds

#[test]
fn paths_that_cannot_be_a_log_are_invalid_input_for_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, b"not a log").unwrap();
    let below = file.join("log");
    for path in [&file, &below] {
        let p = path.display().to_string();
        for args in [
            vec!["append", &p, "--create", "-t", "t", "x"],
            vec!["append", &p, "-t", "t", "x"],
            vec!["read", &p],
            vec!["tail", &p, "--timeout", "1"],
            vec!["inspect", &p],
            vec!["verify", &p],
        ] {
            let out = weft(&args);
            assert_eq!(
                outcome(&out),
                (4, "invalid_input".into()),
                "{args:?}: {out:?}"
            );
        }
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"not a log");
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| text(&o.stdout).trim() == "0")
}

/// As root: a tmpfs remounted read-only (unmounted at the end); as another
/// user: a log whose files may not be written. Writing is refused with
/// exit 7 either way; reading and verifying work.
#[test]
fn a_log_that_cannot_be_written_is_refused_with_exit_7_and_still_read() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let log = mnt.join("log");
    let root = is_root();
    let mounted = root
        && Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
            .arg(&mnt)
            .output()
            .is_ok_and(|o| o.status.success());
    if root && !mounted {
        eprintln!(
            "a_log_that_cannot_be_written...: root without the right to mount; no read-only \
             filesystem can be made here (the errno table in weft's error::os checks EROFS)"
        );
        return;
    }
    let p = log.display().to_string();
    assert_eq!(
        outcome(&weft(&["append", &p, "--create", "-t", "t", "x"])).0,
        0
    );
    let expected_kind = if mounted {
        let out = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&mnt)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        "read_only"
    } else {
        use std::os::unix::fs::PermissionsExt;
        for e in std::fs::read_dir(&log).unwrap() {
            let path = e.unwrap().path();
            if path.is_file() {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
            }
        }
        "permission_denied"
    };
    let append = weft(&["append", &p, "-t", "t", "y"]);
    let read = weft(&["read", &p, "--json"]);
    let verify = weft(&["verify", &p]);
    if mounted {
        let _ = Command::new("umount").arg(&mnt).output();
    }
    assert_eq!(outcome(&append), (7, expected_kind.into()), "{append:?}");
    assert_eq!(text(&read.stdout).lines().count(), 1, "{read:?}");
    assert_eq!(verify.status.code(), Some(0), "{verify:?}");
}

// ------------------------------------------------------------------ small ones

#[test]
fn tail_max_0_exits_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log").display().to_string();
    assert_eq!(
        outcome(&weft(&["append", &log, "--create", "-t", "t", "x"])).0,
        0
    );
    let started = Instant::now();
    let mut child = Command::new(BIN)
        .env("WEFT_INDEX_CACHE", INDEX_CACHE)
        .args(["tail", &log, "--max", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("tail --max 0 did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.stdout.is_empty(), "{out:?}");
    // And on a missing log it still says so.
    let missing = tmp.path().join("missing").display().to_string();
    assert_eq!(
        outcome(&weft(&["tail", &missing, "--max", "0"])),
        (3, "not_found".into())
    );
}

#[test]
fn demo_on_a_location_that_is_not_a_directory_never_makes_one() {
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("file://{}", tmp.path().join("b").display());
    let out = Command::new(BIN)
        .env("WEFT_INDEX_CACHE", INDEX_CACHE)
        .args(["demo", &url])
        .current_dir(tmp.path())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    // A file:// location is a read-only copy of a bucket: a missing one is
    // not found, an existing one refuses the demo's writes.
    assert_eq!(outcome(&out), (3, "not_found".into()), "{out:?}");
    assert!(!tmp.path().join("file:").exists());
    std::fs::create_dir(tmp.path().join("b")).unwrap();
    let out = Command::new(BIN)
        .env("WEFT_INDEX_CACHE", INDEX_CACHE)
        .args(["demo", &url])
        .current_dir(tmp.path())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(outcome(&out), (7, "read_only".into()), "{out:?}");
    assert_eq!(std::fs::read_dir(tmp.path().join("b")).unwrap().count(), 0);
    assert!(!tmp.path().join("file:").exists());
    // A bucket that cannot be reached is unavailable, and nothing local
    // named after it appears.
    let out = Command::new(BIN)
        .env("WEFT_INDEX_CACHE", INDEX_CACHE)
        .args([
            "demo",
            "s3://bucket/demo",
            "--endpoint",
            "http://127.0.0.1:9",
            "--allow-http",
        ])
        .current_dir(tmp.path())
        .env_remove("RUST_LOG")
        .env("AWS_ACCESS_KEY_ID", "k")
        .env("AWS_SECRET_ACCESS_KEY", "s")
        .output()
        .unwrap();
    assert_eq!(outcome(&out).1, "unavailable", "{out:?}");
    assert!(!tmp.path().join("s3:").exists());
}
