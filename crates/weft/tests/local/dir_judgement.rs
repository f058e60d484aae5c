//! One judgement of a log directory's data, three consumers: opening the
//! log for writing (`DirStorage::open`), reading it (`DirFollower`) and
//! checking it (`dir::check`, what `weft verify` prints). A table of damage
//! kinds runs against all three: whatever opening refuses (or, for damage
//! before the point the log index covers, reading after opening refuses),
//! reading refuses and `check` reports; whatever opening cuts, reading leaves out and
//! `check` reports; reading never returns fewer entries than opening keeps.

use crate::support::dir as dir_support;

use std::path::{Path, PathBuf};

use dir_support::{copy_dir, payload, segments, small_segments, tag};
use weft::format::dir_segment::SegmentHeader;
use weft::format::frame;
use weft::storage::dir::{DirFollower, DirStorage, check};
use weft::{AppendRequest, ErrorKind, Log, LogTag};

/// Where the trimmed samples are trimmed through: past the first segments.
const TRIM: u64 = ENTRIES / 2 - 1;

/// Entries the sample log holds (batches of two).
const ENTRIES: u64 = 120;

/// What every consumer must make of a damaged directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Opened and read whole: this many entries, no problem.
    Whole(u64),
    /// Opening cuts a torn tail: this many entries stay; `check` reports
    /// the cut.
    Cut(u64),
    /// Opening and reading refuse it; `check` reports the refusal.
    Corrupt,
    /// The log is whole, but a KV bucket is damaged: a get refuses,
    /// `check` reports it.
    KvCorrupt(u64),
}

fn view() -> LogTag {
    tag("accounts")
}

/// A log of [`ENTRIES`] entries in three or more small segments, with a
/// KV key, trimmed through `trim` when given.
async fn sample(dir: &Path, trim: Option<u64>) {
    let storage = DirStorage::open_with(dir, small_segments()).await.unwrap();
    let log = Log::new(storage);
    for i in (0..ENTRIES).step_by(2) {
        let t = tag(&format!("s{}", i % 4));
        log.append_batch(vec![
            AppendRequest::new(t.clone(), payload(i)),
            AppendRequest::new(t, payload(i + 1)).with_tag(tag("all")),
        ])
        .await
        .unwrap();
    }
    log.view(view())
        .kv()
        .unwrap()
        .set("owner", "a")
        .await
        .unwrap();
    if let Some(t) = trim {
        log.trim(t).await.unwrap();
    }
    log.close().await.unwrap();
    assert!(
        segments(dir).len() >= 3,
        "the sample spans several segments"
    );
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

fn last_segment(dir: &Path) -> PathBuf {
    segments(dir).pop().unwrap()
}

fn kv_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir.join("kv"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    out.sort();
    out
}

/// A damage: what it does to a sample log, and what must come of it.
struct Case {
    name: &'static str,
    trim: Option<u64>,
    damage: fn(&Path),
    expect: Expect,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "untouched",
            trim: None,
            damage: |_| {},
            expect: Expect::Whole(ENTRIES),
        },
        Case {
            name: "torn tail: the last frame cut short",
            trim: None,
            damage: |dir| {
                let seg = last_segment(dir);
                let len = std::fs::metadata(&seg).unwrap().len();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&seg)
                    .unwrap()
                    .set_len(len - 5)
                    .unwrap();
            },
            expect: Expect::Cut(ENTRIES - 2),
        },
        Case {
            // What a writer that crashed leaves after its last group: the
            // space it set aside ahead of its data. Nothing is lost, so
            // `check` notes it and finds no problem; opening cuts it.
            name: "zeroed tail: space allocated, data never written",
            trim: None,
            damage: |dir| {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(last_segment(dir))
                    .unwrap();
                f.write_all(&[0; 300]).unwrap();
            },
            expect: Expect::Whole(ENTRIES),
        },
        Case {
            name: "a length field damaged mid-segment, later groups behind it",
            trim: None,
            damage: |dir| {
                // The first frame of the last segment: its length now
                // claims more than the file holds.
                let seg = last_segment(dir);
                let mut bytes = std::fs::read(&seg).unwrap();
                bytes[22] ^= 0x7f;
                std::fs::write(&seg, bytes).unwrap();
            },
            expect: Expect::Corrupt,
        },
        Case {
            name: "a flipped payload byte in a sealed segment",
            trim: None,
            damage: |dir| flip(&segments(dir)[0], 100),
            expect: Expect::Corrupt,
        },
        Case {
            name: "a flipped byte in the last segment's first group",
            trim: None,
            damage: |dir| flip(&last_segment(dir), 60),
            expect: Expect::Corrupt,
        },
        Case {
            name: "the first segment missing, no trim record",
            trim: None,
            damage: |dir| std::fs::remove_file(&segments(dir)[0]).unwrap(),
            expect: Expect::Corrupt,
        },
        Case {
            name: "a middle segment missing",
            trim: None,
            damage: |dir| std::fs::remove_file(&segments(dir)[1]).unwrap(),
            expect: Expect::Corrupt,
        },
        Case {
            name: "a segment header damaged",
            trim: None,
            damage: |dir| flip(&segments(dir)[1], 3),
            expect: Expect::Corrupt,
        },
        Case {
            name: "a segment renamed: its header names another seqnum",
            trim: None,
            damage: |dir| {
                let last = last_segment(dir);
                let name = last.file_name().unwrap().to_str().unwrap();
                let first: u64 = name.trim_end_matches(".seg").parse().unwrap();
                std::fs::rename(&last, dir.join(format!("{:020}.seg", first + 1))).unwrap();
            },
            expect: Expect::Corrupt,
        },
        Case {
            name: "a second writer's frames after the log's (valid checksums, wrong seqnums)",
            trim: None,
            damage: |dir| {
                use std::io::Write;
                let first = std::fs::read(&segments(dir)[0]).unwrap();
                let len = frame::claimed_len(&first[20..]).unwrap();
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(last_segment(dir))
                    .unwrap();
                f.write_all(&first[20..20 + len]).unwrap();
            },
            expect: Expect::Corrupt,
        },
        Case {
            name: "the trim file damaged",
            trim: Some(TRIM),
            damage: |dir| flip(&dir.join("trim"), 9),
            expect: Expect::Corrupt,
        },
        Case {
            name: "the trim file deleted after its trim removed segments",
            trim: Some(TRIM),
            damage: |dir| std::fs::remove_file(dir.join("trim")).unwrap(),
            expect: Expect::Corrupt,
        },
        Case {
            name: "a trimmed log, untouched",
            trim: Some(TRIM),
            damage: |_| {},
            expect: Expect::Whole(ENTRIES - TRIM - 1),
        },
        Case {
            name: "a segment an interrupted trim left below the trim point",
            trim: Some(TRIM),
            damage: |dir| {
                let header = SegmentHeader::new(0, false);
                std::fs::write(dir.join(format!("{:020}.seg", 0)), header.encode()).unwrap();
            },
            expect: Expect::Whole(ENTRIES - TRIM - 1),
        },
        Case {
            name: "a KV bucket damaged",
            trim: None,
            damage: |dir| flip(&kv_files(dir)[0], 12),
            expect: Expect::KvCorrupt(ENTRIES),
        },
        Case {
            name: "a temporary file left behind",
            trim: None,
            damage: |dir| std::fs::write(dir.join("trim.tmp"), b"half").unwrap(),
            expect: Expect::Whole(ENTRIES),
        },
        Case {
            name: "a last segment whose creation was interrupted",
            trim: None,
            damage: |dir| {
                std::fs::write(dir.join(format!("{:020}.seg", ENTRIES)), b"WFTS").unwrap()
            },
            expect: Expect::Whole(ENTRIES),
        },
    ]
}

/// What opening for writing makes of `dir` (a copy: it repairs).
async fn by_open(dir: &Path) -> Result<(u64, Option<ErrorKind>), ErrorKind> {
    let log = Log::new(DirStorage::open(dir).await.map_err(|e| e.kind())?);
    let first = log.tip().await.unwrap().first;
    // Damage before the point the log index covers is not read again on
    // open: it is refused when read.
    let read = log.storage().read(None, first, 1000).await;
    let kv = log.view(view()).kv().unwrap().get("owner").await.err();
    log.close().await.unwrap();
    let n = read.map_err(|e| e.kind())?.len() as u64;
    Ok((n, kv.map(|e| e.kind())))
}

/// What a follower makes of `dir`; it must change nothing.
async fn by_follower(dir: &Path) -> Result<(u64, Option<ErrorKind>), ErrorKind> {
    let before = weft_testkit::files::snapshot(dir);
    let outcome = async {
        let log = Log::new(DirFollower::open(dir).await.map_err(|e| e.kind())?);
        let first = log.tip().await.unwrap().first;
        let n = log
            .storage()
            .read(None, first, 1000)
            .await
            .map_err(|e| e.kind())?;
        let kv = log.view(view()).kv().unwrap().get("owner").await.err();
        log.close().await.unwrap();
        Ok((n.len() as u64, kv.map(|e| e.kind())))
    }
    .await;
    assert_eq!(
        weft_testkit::files::snapshot(dir),
        before,
        "a follower changed files"
    );
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_damage_is_judged_alike_by_open_read_and_check() {
    for case in cases() {
        let built = tempfile::tempdir().unwrap();
        sample(built.path(), case.trim).await;
        (case.damage)(built.path());
        let name = case.name;

        let opened = by_open(copy_dir(built.path()).path()).await;
        let followed = by_follower(built.path()).await;
        let before = weft_testkit::files::snapshot(built.path());
        let report = check(built.path()).await.unwrap();
        assert_eq!(
            weft_testkit::files::snapshot(built.path()),
            before,
            "{name}: check changed files"
        );

        match case.expect {
            Expect::Whole(n) | Expect::Cut(n) => {
                assert_eq!(opened, Ok((n, None)), "{name}: open");
                assert_eq!(followed, Ok((n, None)), "{name}: read");
                assert_eq!(report.entries, n, "{name}: check");
            }
            Expect::Corrupt => {
                assert_eq!(opened, Err(ErrorKind::Corrupt), "{name}: open");
                assert_eq!(followed, Err(ErrorKind::Corrupt), "{name}: read");
                let refusal = report.refusal().map(|e| e.kind());
                assert_eq!(refusal, Some(ErrorKind::Corrupt), "{name}: check");
            }
            Expect::KvCorrupt(n) => {
                assert_eq!(opened, Ok((n, Some(ErrorKind::Corrupt))), "{name}: open");
                assert_eq!(followed, Ok((n, Some(ErrorKind::Corrupt))), "{name}: read");
                assert_eq!(report.entries, n, "{name}: check");
            }
        }
        let ok = matches!(case.expect, Expect::Whole(_));
        assert_eq!(report.is_ok(), ok, "{name}: {:?}", report.problems);
        for p in &report.problems {
            assert!(
                !p.contains("stored 0x00000000, computed 0x00000000"),
                "{name}: a self-contradicting message: {p}"
            );
        }
        println!("ok: {name}: {:?} {:?}", report.problems, report.notes);
    }
}
