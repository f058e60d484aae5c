//! The persistent log index against a model, across reopens, trims, and
//! every kind of damage to its files: it is derived state, so whatever
//! happens to it, a backend that checks it and replays its log gets the
//! same answers as from the log itself.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use weft::index::{Fresh, Index, IndexEntry, IndexOptions};
use weft::{ErrorKind, LogTag};

/// The log the index describes: the truth.
#[derive(Default)]
struct Model {
    entries: Vec<(Vec<LogTag>, u64)>,
    first: u64,
}

/// What a backend would take from the entry's bytes (dir: the frame's
/// checksum).
fn check_value(seqnum: u64, tags: &[LogTag], version: u64) -> u64 {
    let text: String = tags.iter().map(|t| format!("{t};")).collect();
    u64::from(crc32c::crc32c(text.as_bytes()))
        ^ seqnum.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ version
}

/// Every fourth entry carries a locator: its seqnum's bytes.
fn locator(seqnum: u64) -> Option<Bytes> {
    seqnum
        .is_multiple_of(4)
        .then(|| Bytes::copy_from_slice(&seqnum.to_le_bytes()))
}

impl Model {
    fn next(&self) -> u64 {
        self.entries.len() as u64
    }

    fn append(&mut self, rng: &mut ChaCha8Rng) -> IndexEntry {
        let primary: LogTag = format!("s:{}", rng.random_range(0..40)).parse().unwrap();
        let mut tags = vec![primary.clone()];
        if rng.random_bool(0.3) {
            tags.push(format!("cat{}", rng.random_range(0..4)).parse().unwrap());
        }
        let version = self.next_version(&primary);
        let seqnum = self.next();
        self.entries.push((tags, version));
        self.entry(seqnum)
    }

    fn entry(&self, seqnum: u64) -> IndexEntry {
        let (tags, version) = self.entries[seqnum as usize].clone();
        IndexEntry {
            seqnum,
            version,
            locator: locator(seqnum),
            check: check_value(seqnum, &tags, version),
            tags: tags.into(),
        }
    }

    fn next_version(&self, tag: &LogTag) -> u64 {
        self.entries.iter().filter(|(t, _)| &t[0] == tag).count() as u64
    }

    fn floors(&self) -> Vec<(LogTag, u64)> {
        let mut floors: Vec<(LogTag, u64)> = Vec::new();
        for (tags, version) in &self.entries[..self.first as usize] {
            match floors.iter_mut().find(|(t, _)| t == &tags[0]) {
                Some(f) => f.1 = version + 1,
                None => floors.push((tags[0].clone(), version + 1)),
            }
        }
        floors
    }

    fn seqnums(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Vec<u64> {
        (from.max(self.first)..self.next())
            .filter(|&s| tag.is_none_or(|t| self.entries[s as usize].0.contains(t)))
            .take(max)
            .collect()
    }

    fn version_seqnums(&self, tag: &LogTag, from: u64, max: usize) -> Result<Vec<u64>, ()> {
        let all: Vec<u64> = (0..self.next())
            .filter(|&s| &self.entries[s as usize].0[0] == tag)
            .collect();
        match all.get(from as usize) {
            Some(&s) if s < self.first => Err(()),
            _ => Ok(all.into_iter().skip(from as usize).take(max).collect()),
        }
    }

    fn prev(&self, tag: Option<&LogTag>, before: u64) -> Option<u64> {
        (self.first..before.min(self.next()))
            .rev()
            .find(|&s| tag.is_none_or(|t| self.entries[s as usize].0.contains(t)))
    }
}

fn options() -> IndexOptions {
    IndexOptions::default()
        .with_flush_entries(64)
        .with_flush_interval_ms(5)
        .with_sync_every(8)
}

const IDENTITY: &[u8] = b"test-log-1";

/// Opens the index the way a backend does: checks it against the log,
/// resets it when it does not match, replays what it lacks.
fn open_checked(dir: &Path, log: &Model) -> Index {
    let mut index = Index::open(dir, IDENTITY, options()).unwrap();
    check_and_replay(&mut index, log);
    index
}

fn check_and_replay(index: &mut Index, log: &Model) {
    let covered = index.covered();
    let tip_ok = match index.tip() {
        Ok(None) => true,
        Ok(Some((s, check))) => s < log.next() && check == log.entry(s).check,
        Err(_) => false,
    };
    let why = if covered > log.next() {
        Some("the index covers more than the log holds")
    } else if !tip_ok {
        Some("the index's tip does not match the log")
    } else if covered < log.first {
        Some("the index ends before the log's first entry")
    } else {
        None
    };
    if let Some(why) = why {
        index.reset(log.first, &log.floors(), why).unwrap();
    }
    if index.first() < log.first {
        index.trim(log.first, &log.floors()).unwrap();
    }
    let from = index.covered();
    let replay: Vec<IndexEntry> = (from..log.next()).map(|s| log.entry(s)).collect();
    index.push(&replay).unwrap();
}

/// A read that, like a backend, rebuilds a damaged index and asks again.
fn ask<T>(
    index: &mut Index,
    log: &Model,
    q: impl Fn(&Index) -> weft::Result<T>,
) -> weft::Result<T> {
    match q(index) {
        Err(_) if index.damaged() => {
            index.reset(log.first, &log.floors(), "damaged").unwrap();
            check_and_replay(index, log);
            q(index)
        }
        other => other,
    }
}

fn compare(index: &mut Index, log: &Model, rng: &mut ChaCha8Rng) {
    let next = log.next();
    for _ in 0..12 {
        let tag: LogTag = if rng.random_bool(0.3) {
            format!("cat{}", rng.random_range(0..5)).parse().unwrap()
        } else {
            format!("s:{}", rng.random_range(0..42)).parse().unwrap()
        };
        let from = rng.random_range(0..=next + 2);
        let max = rng.random_range(1..60);
        assert_eq!(
            ask(index, log, |i| i.seqnums(Some(&tag), from, max)).unwrap(),
            log.seqnums(Some(&tag), from, max),
            "seqnums {tag} from {from}"
        );
        assert_eq!(
            ask(index, log, |i| i.seqnums(None, from, max)).unwrap(),
            log.seqnums(None, from, max)
        );
        let v = rng.random_range(0..log.next_version(&tag) + 2);
        match (
            ask(index, log, |i| i.version_seqnums(&tag, v, max)),
            log.version_seqnums(&tag, v, max),
        ) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "versions {tag} from {v}"),
            (Err(e), Err(())) => assert_eq!(e.kind(), ErrorKind::Trimmed),
            (got, want) => panic!("versions {tag} from {v}: got {got:?}, want {want:?}"),
        }
        assert_eq!(
            ask(index, log, |i| i.prev(Some(&tag), from)).unwrap(),
            log.prev(Some(&tag), from),
            "prev {tag} before {from}"
        );
        assert_eq!(
            ask(index, log, |i| i.prev(None, from)).unwrap(),
            log.prev(None, from)
        );
        assert_eq!(
            ask(index, log, |i| i.next_version(&tag)).unwrap(),
            log.next_version(&tag),
            "next version of {tag}"
        );
        if next > 0 {
            let s = rng
                .random_range(log.first..next.max(log.first + 1))
                .min(next - 1);
            if s >= log.first {
                let (at, loc) = ask(index, log, |i| i.locate(s))
                    .unwrap()
                    .expect("a locator");
                assert_eq!(at, s - s % 4, "locator of {s}");
                assert_eq!(loc, locator(at).unwrap());
            }
        }
    }
    assert_eq!(index.next(), next);
}

#[test]
fn matches_the_log_across_appends_trims_and_reopens() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut log = Model::default();
    let mut index = open_checked(&dir, &log);
    assert_eq!(index.fresh(), Some(&Fresh::Missing));
    for step in 0..160 {
        let n = rng.random_range(1..40);
        let batch: Vec<IndexEntry> = (0..n).map(|_| log.append(&mut rng)).collect();
        index.push(&batch).unwrap();
        if step % 37 == 36 {
            let through = rng.random_range(log.first..log.next());
            log.first = through + 1;
            index.trim(log.first, &log.floors()).unwrap();
        }
        if step % 23 == 22 {
            if step % 2 == 0 {
                index.close().unwrap();
            }
            drop(index);
            index = open_checked(&dir, &log);
            assert_eq!(index.fresh(), None, "a clean reopen keeps the index");
        }
        if step % 5 == 0 {
            index.flush().unwrap();
        }
        compare(&mut index, &log, &mut rng);
    }
    index.close().unwrap();
    // Closed: pushes are refused, reads still work.
    assert_eq!(
        index.push(&[log.append(&mut rng)]).unwrap_err().kind(),
        ErrorKind::Closed
    );
}

fn build(dir: &Path, rng: &mut ChaCha8Rng) -> Model {
    let mut log = Model::default();
    let index = open_checked(dir, &log);
    for _ in 0..40 {
        let batch: Vec<IndexEntry> = (0..50).map(|_| log.append(rng)).collect();
        index.push(&batch).unwrap();
    }
    log.first = 700;
    index.trim(log.first, &log.floors()).unwrap();
    index.close().unwrap();
    log
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::metadata(&p).unwrap().len() > 0 {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Delete,
    Truncate,
    FlipBytes,
    Garbage,
}

fn damage(path: &Path, how: Damage, rng: &mut ChaCha8Rng) {
    let mut bytes = std::fs::read(path).unwrap();
    match how {
        Damage::Delete => {
            std::fs::remove_file(path).unwrap();
            return;
        }
        Damage::Truncate => bytes.truncate(rng.random_range(0..bytes.len())),
        Damage::FlipBytes => {
            for _ in 0..4 {
                let at = rng.random_range(0..bytes.len());
                bytes[at] ^= 1 << rng.random_range(0..8);
            }
        }
        Damage::Garbage => rng.fill(&mut bytes[..]),
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_damaged_deleted_or_foreign_index_is_rebuilt_and_answers_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let pristine = tmp.path().join("pristine");
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let log = build(&pristine, &mut rng);

    // The whole directory gone.
    let gone = tmp.path().join("gone");
    let mut index = open_checked(&gone, &log);
    assert!(index.fresh().is_some());
    compare(&mut index, &log, &mut rng);
    drop(index);

    // Another log's index.
    let other = tmp.path().join("other");
    copy_dir(&pristine, &other);
    let mut index = Index::open(&other, b"another-log", options()).unwrap();
    assert_eq!(index.fresh(), Some(&Fresh::OtherLog));
    check_and_replay(&mut index, &log);
    compare(&mut index, &log, &mut rng);
    drop(index);

    // The clean copy answers like the log before any damage (a store
    // that wrote wrong rows would otherwise pass as "rebuilt").
    let clean = tmp.path().join("clean");
    copy_dir(&pristine, &clean);
    let mut index = open_checked(&clean, &log);
    assert_eq!(index.fresh(), None, "a cleanly closed index is kept");
    answers_like_the_log(&mut index, &log, &mut rng);
    drop(index);

    // Every file gets one kind of damage (the full cross product takes
    // minutes on a small machine), chosen by its name: how many table and
    // version files fjall leaves depends on the flusher's timing, so a
    // kind taken by position would move from file to file between runs.
    let kinds = [
        Damage::Delete,
        Damage::Truncate,
        Damage::FlipBytes,
        Damage::Garbage,
    ];
    let mut trials: Vec<(Vec<PathBuf>, Damage)> = files(&pristine)
        .into_iter()
        .map(|file| {
            let name = file.strip_prefix(&pristine).unwrap().to_string_lossy();
            let kind = kinds[crc32c::crc32c(name.as_bytes()) as usize % kinds.len()];
            (vec![file], kind)
        })
        .collect();
    // The journal, every kind of damage, whatever the names gave it.
    let journals: Vec<PathBuf> = files(&pristine)
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "jnl"))
        .collect();
    assert!(!journals.is_empty(), "the store keeps a journal");
    trials.extend(kinds.iter().map(|&how| (journals.clone(), how)));
    for (trial, (targets, how)) in trials.into_iter().enumerate() {
        let copy = tmp.path().join(format!("trial-{trial}"));
        copy_dir(&pristine, &copy);
        for file in &targets {
            let target = copy.join(file.strip_prefix(&pristine).unwrap());
            damage(&target, how, &mut rng);
        }
        eprintln!("trial {trial}: {how:?} {targets:?}");
        let mut index = open_checked(&copy, &log);
        answers_like_the_log(&mut index, &log, &mut rng);
        drop(index);
        std::fs::remove_dir_all(&copy).unwrap();
    }
}

/// Compares the index with the log, and reads everything it holds back
/// once, so damage in any block is met.
fn answers_like_the_log(index: &mut Index, log: &Model, rng: &mut ChaCha8Rng) {
    compare(index, log, rng);
    let all = ask(index, log, |i| i.seqnums(None, 0, usize::MAX)).unwrap();
    assert_eq!(all, log.seqnums(None, 0, usize::MAX));
    for s in 0..40 {
        let tag: LogTag = format!("s:{s}").parse().unwrap();
        let got = ask(index, log, |i| i.seqnums(Some(&tag), 0, usize::MAX));
        assert_eq!(
            got.unwrap(),
            log.seqnums(Some(&tag), 0, usize::MAX),
            "{tag}"
        );
        let next = ask(index, log, |i| i.next_version(&tag));
        assert_eq!(
            next.unwrap(),
            log.next_version(&tag),
            "next version of {tag}"
        );
    }
}

#[test]
fn a_trim_while_the_flusher_writes_keeps_every_stream_version() {
    // A trim rewrites tag rows and the flusher writes them too: they must
    // not interleave (a trim that read rows before a flush committed wrote
    // them back stale, and the next flush built on them).
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let mut log = Model::default();
    let index = Index::open(tmp.path(), IDENTITY, options()).unwrap();
    for round in 0..40 {
        for _ in 0..6 {
            let batch: Vec<IndexEntry> = (0..40).map(|_| log.append(&mut rng)).collect();
            index.push(&batch).unwrap();
        }
        // Trim behind the flusher, which is still writing.
        log.first = log.next() - 100;
        index.trim(log.first, &log.floors()).unwrap();
        index.flush().unwrap();
        for s in 0..40 {
            let tag: LogTag = format!("s:{s}").parse().unwrap();
            assert_eq!(
                index.next_version(&tag).unwrap(),
                log.next_version(&tag),
                "round {round}: next version of {tag}"
            );
        }
    }
}

#[test]
fn an_index_ahead_of_its_log_or_with_a_wrong_tip_is_reset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut log = build(&dir, &mut rng);
    // The log was cut back (say, restored from an older copy).
    log.entries.truncate(1500);
    let mut index = open_checked(&dir, &log);
    assert!(matches!(index.fresh(), Some(Fresh::Reset(_))));
    compare(&mut index, &log, &mut rng);
    index.close().unwrap();
    drop(index);
    // Same length, different content: the tip check catches it.
    let mut other = Model::default();
    for _ in 0..log.next() {
        other.append(&mut rng);
    }
    other.first = log.first;
    let mut index = open_checked(&dir, &other);
    assert!(matches!(index.fresh(), Some(Fresh::Reset(_))));
    compare(&mut index, &other, &mut rng);
}

#[test]
fn bad_options_are_invalid_input() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in [
        IndexOptions::default().with_tail_bytes(10),
        IndexOptions::default().with_flush_entries(0),
        IndexOptions::default().with_sync_every(0),
        IndexOptions::default().with_flush_interval_ms(0),
    ] {
        let err = Index::open(tmp.path(), IDENTITY, bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }
}

#[test]
fn a_small_tail_budget_makes_push_wait_for_the_flusher_not_grow() {
    let tmp = tempfile::tempdir().unwrap();
    let options = IndexOptions::default()
        .with_tail_bytes(1 << 16)
        .with_flush_entries(64);
    let index = Index::open(tmp.path(), IDENTITY, options).unwrap();
    let mut log = Model::default();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut peak = 0;
    for _ in 0..200 {
        let batch: Vec<IndexEntry> = (0..20).map(|_| log.append(&mut rng)).collect();
        index.push(&batch).unwrap();
        peak = peak.max(index.tail_bytes());
    }
    // One push may overshoot the budget by its own entries, no more.
    assert!(peak < (1 << 16) + 20 * 400, "tail peaked at {peak} bytes");
    index.flush().unwrap();
    assert_eq!(index.covered(), log.next());
}

/// Set in the child process of the crash test: the index directory.
const CRASH_DIR_ENV: &str = "WEFT_TEST_INDEX_CRASH_DIR";

/// The child side of `a_process_killed_while_the_index_flushes_loses_nothing`:
/// records entries and dies mid-way without closing anything. A no-op
/// unless run by that test.
#[test]
fn crash_child() {
    let Some(dir) = std::env::var_os(CRASH_DIR_ENV) else {
        return;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let mut log = Model::default();
    let index = Index::open(Path::new(&dir), IDENTITY, options()).unwrap();
    for i in 0..400 {
        let batch: Vec<IndexEntry> = (0..25).map(|_| log.append(&mut rng)).collect();
        index.push(&batch).unwrap();
        if i == 300 {
            index.flush().unwrap();
        }
    }
    // Die with the flusher mid-way through the rest.
    std::process::abort();
}

#[test]
fn a_process_killed_while_the_index_flushes_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("index");
    // The child's test name is its path inside the tier binary.
    let child = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::crash_child"),
        None => "crash_child".to_owned(),
    };
    for attempt in 0..2 {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &child, "--nocapture", "--test-threads=1"])
            .env(CRASH_DIR_ENV, &dir)
            .stderr(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success(), "the child aborts");
        // A copy that also lost its journal: what fjall had not written
        // into table files is gone, and the index must notice.
        let lost = tmp.path().join("lost-journal");
        copy_dir(&dir, &lost);
        for file in files(&lost) {
            if file.extension().is_some_and(|e| e == "jnl") {
                std::fs::remove_file(file).unwrap();
            }
        }
        // The log the child wrote: the same seeded entries.
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        let mut log = Model::default();
        for _ in 0..400 * 25 {
            log.append(&mut rng);
        }
        let index = Index::open(&dir, IDENTITY, options()).unwrap();
        // Whatever survived is a prefix the index can prove: at least the
        // flushed part, at most what was pushed.
        let covered = index.covered();
        assert!(
            covered <= log.next(),
            "attempt {attempt}: covered {covered}"
        );
        if index.fresh().is_none() {
            assert!(covered >= 301 * 25, "attempt {attempt}: covered {covered}");
        }
        drop(index);
        for d in [&dir, &lost] {
            let mut index = open_checked(d, &log);
            answers_like_the_log(&mut index, &log, &mut rng);
            drop(index);
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
