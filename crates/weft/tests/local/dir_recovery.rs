//! Crash recovery of the `dir` backend: torn tails are cut back to the last
//! whole batch; damage to synced data is a `Corrupt` error (on open, or
//! when read if the log index covered it) that changes no file.

use crate::support::dir as dir_support;

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use dir_support::{copy_dir, file_len, open, open_with, payload, segments, small_segments, tag};
use weft::format::dir_segment::SEGMENT_HEADER_LEN;
use weft::format::frame;
use weft::storage::Storage;
use weft::storage::dir::{DirOptions, DirStorage, check};
use weft::{AppendRequest, ErrorKind, LogEntry, Position};

/// Appends `n` entries one by one (one group each) to a fresh log in `dir`
/// and returns where the segment's data ends after each, preceded by the
/// length of the empty segment. (The file of an open log is longer: its
/// writer sets space aside ahead of the data; closing cuts it off.)
async fn build(dir: &Path, n: u64) -> (PathBuf, Vec<u64>) {
    let (storage, log) = open(dir).await;
    let mut ends = vec![SEGMENT_HEADER_LEN as u64];
    for i in 0..n {
        log.append(AppendRequest::new(tag(&format!("s{}", i % 2)), payload(i)))
            .await
            .unwrap();
        let end = ends[ends.len() - 1] + frame_len_of(i);
        let seg = segments(dir).pop().unwrap();
        assert!(file_len(&seg) >= end, "the data is in the file");
        ends.push(end);
    }
    storage.close().await.unwrap();
    let seg = segments(dir).pop().unwrap();
    assert_eq!(file_len(&seg), ends[ends.len() - 1], "closed: data only");
    (seg, ends)
}

fn frame_len_of(i: u64) -> u64 {
    frame::encoded_len(&[tag(&format!("s{}", i % 2))], payload(i).len()) as u64
}

fn entry_of(i: u64) -> (String, Vec<u8>) {
    (format!("s{}", i % 2), payload(i))
}

/// Opens `dir` and checks it holds exactly entries `0..n` as built.
async fn assert_holds(dir: &Path, n: u64) -> DirStorage {
    let storage = DirStorage::open(dir).await.expect("reopen");
    let all = storage.read(None, 0, 1000).await.unwrap();
    assert_eq!(all.len() as u64, n, "entries after recovery");
    for (i, e) in all.iter().enumerate() {
        let (t, data) = entry_of(i as u64);
        assert_eq!(e.seqnum, i as u64);
        assert_eq!(e.tags[0].to_string(), t);
        assert_eq!(e.stream_version, i as u64 / 2);
        assert_eq!(&e.data[..], &data[..]);
    }
    assert_eq!(storage.tip().await.unwrap().next, n);
    storage
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Damage to synced data: opening refuses it without changing a file, or
/// — when it lies before the point the log index covered, which opening
/// does not read again — opening succeeds and reading it is `Corrupt`.
/// Either way `check` (`weft verify`, which reads everything) refuses it.
async fn assert_corrupt(dir: &Path) {
    let before = snapshot(dir);
    match DirStorage::open(dir).await {
        Err(err) => assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}"),
        Ok(storage) => {
            let err = read_all(&storage)
                .await
                .expect_err("reading the damaged entries must refuse");
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
            storage.close().await.unwrap();
        }
    }
    assert_eq!(
        snapshot(dir),
        before,
        "damage that is not a torn tail must not change files"
    );
    let report = check(dir).await.unwrap();
    assert_eq!(
        report.refusal().map(|e| e.kind()),
        Some(ErrorKind::Corrupt),
        "check: {:?}",
        report.problems
    );
}

/// Every live entry, read in pages.
async fn read_all(storage: &DirStorage) -> weft::Result<Vec<LogEntry>> {
    let tip = storage.tip().await?;
    let mut out = Vec::new();
    let mut from = tip.first;
    while from < tip.next {
        let page = storage.read(None, from, 1000).await?;
        let Some(last) = page.last() else { break };
        from = last.seqnum + 1;
        out.extend(page);
    }
    Ok(out)
}

fn truncate(path: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn flip(path: &Path, at: u64, bit: u8) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 1 << bit;
    std::fs::write(path, bytes).unwrap();
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

fn seg_in(dir: &Path, seg: &Path) -> PathBuf {
    dir.join(seg.file_name().unwrap())
}

#[tokio::test]
async fn truncation_at_every_byte_of_the_last_entry_drops_only_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (seg, ends) = build(tmp.path(), 6).await;
    let (start, end) = (ends[5], ends[6]);
    for cut in start..end {
        let copy = copy_dir(tmp.path());
        truncate(&seg_in(copy.path(), &seg), cut);
        let storage = assert_holds(copy.path(), 5).await;
        assert_eq!(file_len(&seg_in(copy.path(), &seg)), start, "cut {cut}");
        // Writing resumes cleanly after the cut.
        let r = storage
            .append(vec![weft::storage::NewEntry {
                tags: vec![tag("s1")],
                data: Bytes::from(payload(5)),
                expected_version: Some(2.into()),
                append_id: None,
            }])
            .await
            .unwrap();
        assert_eq!((r[0].seqnum, r[0].stream_version), (5, 2));
        storage.close().await.unwrap();
        drop(storage);
        assert_holds(copy.path(), 6).await;
    }
    assert_holds(tmp.path(), 6).await;
}

#[tokio::test]
async fn flipped_bits_in_the_last_entry_truncate_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (seg, ends) = build(tmp.path(), 6).await;
    for at in ends[5]..ends[6] {
        let copy = copy_dir(tmp.path());
        flip(&seg_in(copy.path(), &seg), at, (at % 8) as u8);
        assert_holds(copy.path(), 5).await;
        assert_eq!(
            file_len(&seg_in(copy.path(), &seg)),
            ends[5],
            "flip at {at}"
        );
    }
}

#[tokio::test]
async fn a_flipped_bit_in_a_middle_entry_is_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let (seg, ends) = build(tmp.path(), 6).await;
    for at in ends[2]..ends[3] {
        let copy = copy_dir(tmp.path());
        flip(&seg_in(copy.path(), &seg), at, (at % 8) as u8);
        assert_corrupt(copy.path()).await;
    }
    // The first entry too, right after the header.
    let copy = copy_dir(tmp.path());
    flip(&seg_in(copy.path(), &seg), ends[0] + 9, 0);
    assert_corrupt(copy.path()).await;
}

#[tokio::test]
async fn damage_in_a_sealed_segment_is_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (s, log) = open_with(tmp.path(), small_segments()).await;
        for i in 0..100u64 {
            log.append(AppendRequest::new(tag("t"), payload(i)))
                .await
                .unwrap();
        }
        s.close().await.unwrap();
    }
    let segs = segments(tmp.path());
    assert!(segs.len() >= 3);
    // Its last byte (the tail of its last frame).
    let copy = copy_dir(tmp.path());
    let first = seg_in(copy.path(), &segs[0]);
    flip(&first, file_len(&first) - 1, 3);
    assert_corrupt(copy.path()).await;
    // A truncated sealed segment.
    let copy = copy_dir(tmp.path());
    let first = seg_in(copy.path(), &segs[1]);
    truncate(&first, file_len(&first) - 5);
    assert_corrupt(copy.path()).await;
    // A missing middle segment, and a missing first segment.
    let copy = copy_dir(tmp.path());
    std::fs::remove_file(seg_in(copy.path(), &segs[1])).unwrap();
    assert_corrupt(copy.path()).await;
    let copy = copy_dir(tmp.path());
    std::fs::remove_file(seg_in(copy.path(), &segs[0])).unwrap();
    assert_corrupt(copy.path()).await;
    // A damaged header with frames behind it.
    let copy = copy_dir(tmp.path());
    flip(&seg_in(copy.path(), segs.last().unwrap()), 2, 1);
    assert_corrupt(copy.path()).await;
    // The intact original still opens.
    let (_s, log) = open_with(tmp.path(), small_segments()).await;
    assert_eq!(
        log.read_log(Position::Beginning, 1000).await.unwrap().len(),
        100
    );
}

#[tokio::test]
async fn a_torn_batch_is_dropped_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let (seg, ends) = build(tmp.path(), 3).await;
    {
        let (s, log) = open(tmp.path()).await;
        let reqs = (3..7u64)
            .map(|i| AppendRequest::new(tag(&format!("s{}", i % 2)), payload(i)))
            .collect();
        log.append_batch(reqs).await.unwrap();
        s.close().await.unwrap();
    }
    let full = file_len(&seg);
    // Cut anywhere inside the batch, including exactly between its frames.
    for cut in ends[3] + 1..full {
        let copy = copy_dir(tmp.path());
        truncate(&seg_in(copy.path(), &seg), cut);
        assert_holds(copy.path(), 3).await;
    }
    assert_holds(tmp.path(), 7).await;
}

#[tokio::test]
async fn zeroed_and_garbage_tails_are_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let (seg, ends) = build(tmp.path(), 4).await;
    let copy = copy_dir(tmp.path());
    append_bytes(&seg_in(copy.path(), &seg), &[0; 8192]);
    assert_holds(copy.path(), 4).await;
    assert_eq!(file_len(&seg_in(copy.path(), &seg)), ends[4]);

    let copy = copy_dir(tmp.path());
    let garbage: Vec<u8> = (0..5000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    append_bytes(&seg_in(copy.path(), &seg), &garbage);
    assert_holds(copy.path(), 4).await;
}

fn frame_bytes(seqnum: u64, version: u64, group_offset: u32, end: bool, t: &str) -> Vec<u8> {
    let entry = LogEntry {
        seqnum,
        stream_version: version,
        tags: vec![tag(t)],
        data: Bytes::from(payload(seqnum)),
        timestamp_ms: 1,
        append_id: None,
    };
    let mut out = Vec::new();
    frame::encode(&mut out, &entry, group_offset, end).unwrap();
    out
}

#[tokio::test]
async fn torn_group_versus_later_group_behind_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let (seg, _) = build(tmp.path(), 4).await;
    // Entries 4 and 5 form one group; 4's bytes never made it to disk but
    // 5's did (pages persisted out of order). Nothing after 4 was
    // acknowledged: torn.
    let copy = copy_dir(tmp.path());
    let mut lost = frame_bytes(4, 2, 0, true, "s0");
    lost.iter_mut().for_each(|b| *b = 0);
    let mut tail = lost;
    tail.extend(frame_bytes(5, 2, 1, true, "s1"));
    append_bytes(&seg_in(copy.path(), &seg), &tail);
    assert_holds(copy.path(), 4).await;

    // The same bytes, but 5 starts its own group: 4 was synced before 5
    // was written, so its damage is corruption.
    let copy = copy_dir(tmp.path());
    let mut lost = frame_bytes(4, 2, 0, true, "s0");
    lost.iter_mut().for_each(|b| *b = 0);
    let mut tail = lost;
    tail.extend(frame_bytes(5, 2, 0, true, "s1"));
    append_bytes(&seg_in(copy.path(), &seg), &tail);
    assert_corrupt(copy.path()).await;
}

#[tokio::test]
async fn checksummed_frames_out_of_sequence_are_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let (seg, _) = build(tmp.path(), 4).await;
    let copy = copy_dir(tmp.path());
    append_bytes(
        &seg_in(copy.path(), &seg),
        &frame_bytes(9, 2, 0, true, "s0"),
    );
    assert_corrupt(copy.path()).await;
    let copy = copy_dir(tmp.path());
    append_bytes(
        &seg_in(copy.path(), &seg),
        &frame_bytes(4, 7, 0, true, "s0"),
    );
    assert_corrupt(copy.path()).await;
    // The right frame is accepted.
    let copy = copy_dir(tmp.path());
    append_bytes(
        &seg_in(copy.path(), &seg),
        &frame_bytes(4, 2, 0, true, "s0"),
    );
    assert_holds(copy.path(), 5).await;
}

#[tokio::test]
async fn an_interrupted_segment_creation_is_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path(), 4).await;
    for len in [0usize, 7, 20] {
        let copy = copy_dir(tmp.path());
        let name = copy.path().join(format!("{:020}.seg", 4));
        std::fs::write(&name, vec![0u8; len]).unwrap();
        // No longer than a header and no valid header: removed, whether
        // empty, partly written or zero-filled.
        let storage = assert_holds(copy.path(), 4).await;
        assert!(!name.exists(), "leftover of length {len} was kept");
        let r = storage
            .append(vec![weft::storage::NewEntry {
                tags: vec![tag("s0")],
                data: Bytes::from(payload(4)),
                expected_version: None,
                append_id: None,
            }])
            .await
            .unwrap();
        assert_eq!(r[0].seqnum, 4);
    }
}

#[tokio::test]
async fn the_trim_file_is_checked_and_temporaries_are_removed() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (s, log) = open_with(tmp.path(), small_segments()).await;
        for i in 0..50u64 {
            log.append(AppendRequest::new(tag("t"), payload(i)))
                .await
                .unwrap();
        }
        log.trim(20).await.unwrap();
        s.close().await.unwrap();
    }
    let copy = copy_dir(tmp.path());
    flip(&copy.path().join("trim"), 10, 0);
    assert_corrupt(copy.path()).await;

    let copy = copy_dir(tmp.path());
    std::fs::write(copy.path().join("trim.tmp"), b"half a trim file").unwrap();
    std::fs::write(copy.path().join("kv").join("0123.kv.tmp"), b"half a bucket").unwrap();
    let (_s, log) = open_with(copy.path(), small_segments()).await;
    assert!(!copy.path().join("trim.tmp").exists());
    assert!(!copy.path().join("kv").join("0123.kv.tmp").exists());
    assert_eq!(log.tip().await.unwrap().first, 21);
}

#[tokio::test]
async fn relaxed_segments_are_cut_at_the_first_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let options = DirOptions::default().with_sync(weft::storage::dir::SyncMode::Relaxed);
    let mut ends = Vec::new();
    {
        let (s, log) = open_with(tmp.path(), options.clone()).await;
        let mut end = SEGMENT_HEADER_LEN as u64;
        for i in 0..6u64 {
            log.append(AppendRequest::new(tag(&format!("s{}", i % 2)), payload(i)))
                .await
                .unwrap();
            end += frame_len_of(i);
            ends.push(end);
        }
        s.close().await.unwrap();
    }
    // In a durable segment this would be corruption (later groups follow);
    // a relaxed segment may hold many unsynced groups, so it is a cut.
    let seg = segments(tmp.path())[0].clone();
    flip(&seg, ends[2] + 12, 2);
    let storage = assert_holds(tmp.path(), 3).await;
    drop(storage);
}

#[tokio::test]
async fn random_damage_never_yields_anything_but_a_prefix_or_corrupt() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    let tmp = tempfile::tempdir().unwrap();
    {
        let (s, log) = open_with(tmp.path(), small_segments()).await;
        for i in 0..60u64 {
            if i % 7 == 0 {
                let reqs = (0..3)
                    .map(|k| AppendRequest::new(tag("b"), payload(i * 10 + k)))
                    .collect();
                log.append_batch(reqs).await.unwrap();
            } else {
                log.append(AppendRequest::new(tag(&format!("s{}", i % 3)), payload(i)))
                    .await
                    .unwrap();
            }
        }
        s.close().await.unwrap();
    }
    let original = {
        let s = DirStorage::open(tmp.path()).await.unwrap();
        s.read(None, 0, 1000).await.unwrap()
    };
    let segs = segments(tmp.path());
    let mut rng = StdRng::seed_from_u64(0xd1_5ea5e);
    let (mut prefixes, mut corrupt) = (0, 0);
    for round in 0..80 {
        let copy = copy_dir(tmp.path());
        let seg = seg_in(copy.path(), &segs[rng.random_range(0..segs.len())]);
        let mut bytes = std::fs::read(&seg).unwrap();
        match rng.random_range(0..3) {
            0 => {
                for _ in 0..rng.random_range(1..4) {
                    let at = rng.random_range(0..bytes.len());
                    bytes[at] = rng.random();
                }
            }
            1 => bytes.truncate(rng.random_range(0..bytes.len())),
            _ => bytes.extend((0..rng.random_range(1..300)).map(|_| rng.random::<u8>())),
        }
        std::fs::write(&seg, &bytes).unwrap();
        // Damage before the log index's covered point is found when read.
        let opened = match DirStorage::open(copy.path()).await {
            Ok(s) => read_all(&s).await,
            Err(e) => Err(e),
        };
        match opened {
            Ok(got) => {
                assert!(
                    got.len() <= original.len() && got[..] == original[..got.len()],
                    "round {round}: recovery produced entries that are not a prefix"
                );
                prefixes += 1;
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Corrupt, "round {round}: {e}");
                corrupt += 1;
            }
        }
    }
    // Both outcomes occurred, so the test exercised both paths.
    assert!(
        prefixes > 0 && corrupt > 0,
        "{prefixes} prefixes, {corrupt} corrupt"
    );
}

/// The writer sets space aside ahead of its data (`preallocate_bytes`),
/// as written zeros after a small group and as a hole after a large one:
/// for each, while it runs only the last segment is longer than its data,
/// a copy taken then (what a crash leaves) is judged whole by `check` (a
/// note, no problem) and opens with every entry, the space cut; closing
/// cuts it too; with the setting at 0 the file never outgrows its data.
#[tokio::test]
async fn preallocated_space_is_only_ever_at_the_end_and_loses_nothing() {
    // (payload of entry i, segment bytes, entries): small groups, extended
    // with zeros; groups of 300 KiB, above the writer's 256 KiB limit for
    // zeros, extended with a hole.
    let small: Payloads = payload;
    let large: Payloads = |i| vec![(i % 251) as u8 + 1; 300 << 10];
    let cases: [(&str, Payloads, u64, u64); 2] = [
        ("small groups", small, 4096, 120),
        ("large groups", large, 1 << 20, 12),
    ];
    for (name, make, segment_bytes, n) in cases {
        preallocated_space_case(name, make, segment_bytes, n).await;
    }
}

/// The payload of entry `i`.
type Payloads = fn(u64) -> Vec<u8>;

async fn preallocated_space_case(name: &str, make: Payloads, segment_bytes: u64, n: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let step = 64 << 10;
    let options = DirOptions::default()
        .with_preallocate_bytes(step)
        .with_segment_bytes(segment_bytes);
    let frame_len =
        |i: u64| frame::encoded_len(&[tag(&format!("s{}", i % 2))], make(i).len()) as u64;
    let (s, log) = open_with(tmp.path(), options.clone()).await;
    let mut data_end = SEGMENT_HEADER_LEN as u64;
    let mut rolls = 0;
    let mut ahead = false;
    for i in 0..n {
        log.append(AppendRequest::new(tag(&format!("s{}", i % 2)), make(i)))
            .await
            .unwrap();
        let segs = segments(tmp.path());
        if segs.len() > rolls + 1 {
            rolls += 1;
            data_end = SEGMENT_HEADER_LEN as u64;
        }
        data_end += frame_len(i);
        let (last, sealed) = segs.split_last().unwrap();
        let len = file_len(last);
        assert!(
            (data_end..=data_end + step).contains(&len),
            "{name}, entry {i}: {len} bytes for {data_end} of data"
        );
        ahead |= len > data_end;
        // Sealed segments hold their data and nothing else.
        let report = check(tmp.path()).await.unwrap();
        assert!(report.is_ok(), "{name}, entry {i}: {:?}", report.problems);
        assert_eq!(report.entries, i + 1, "{name}");
        assert!(
            sealed
                .iter()
                .all(|p| file_len(p) < options.segment_bytes + (310 << 10)),
            "{name}: a sealed segment kept space past its data"
        );
    }
    assert!(rolls >= 3, "{name}: the test rolled {rolls} segments");
    assert!(ahead, "{name}: space was set aside");

    let crashed = copy_dir(tmp.path());
    let report = check(crashed.path()).await.unwrap();
    assert!(report.is_ok(), "{name}: {:?}", report.problems);
    assert!(
        report.notes.iter().any(|n| n.contains("never written")),
        "{name}: {:?}",
        report.notes
    );
    let reopened = DirStorage::open(crashed.path()).await.expect("reopen");
    let entries = reopened.read(None, 0, n as usize + 1).await.unwrap();
    assert_eq!(
        entries.len() as u64,
        n,
        "{name}: every entry after the crash"
    );
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(&e.data[..], &make(i as u64)[..], "{name}: entry {i}");
    }
    let last = segments(crashed.path()).pop().unwrap();
    assert_eq!(file_len(&last), data_end, "{name}: the open cut the space");
    reopened.close().await.unwrap();

    s.close().await.unwrap();
    assert_eq!(
        file_len(&segments(tmp.path()).pop().unwrap()),
        data_end,
        "{name}: closing cut the space"
    );
}

/// With `preallocate_bytes` at 0 the file holds its data and nothing else
/// at every step, and a setting above the limit is refused.
#[tokio::test]
async fn no_preallocation_writes_exactly_the_data() {
    let plain = tempfile::tempdir().unwrap();
    let (s, log) = open_with(
        plain.path(),
        DirOptions::default().with_preallocate_bytes(0),
    )
    .await;
    let mut end = SEGMENT_HEADER_LEN as u64;
    for i in 0..5u64 {
        log.append(AppendRequest::new(tag(&format!("s{}", i % 2)), payload(i)))
            .await
            .unwrap();
        end += frame_len_of(i);
        assert_eq!(file_len(&segments(plain.path())[0]), end);
    }
    s.close().await.unwrap();

    let too_much = DirOptions::default().with_preallocate_bytes((64 << 20) + 1);
    assert_eq!(
        too_much.validate().unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
}
