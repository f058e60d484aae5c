//! Runs the fuzz targets' bodies (shared with `fuzz/`) over the committed
//! corpus, so their checks are part of `cargo test` on stable.
//!
//! Corpus files named `bad_*` must be rejected; other named files (`*.bin`)
//! are valid objects and must decode, re-encode and decode to the same
//! value; files a fuzz run added (40-hex-digit names, libFuzzer's own) only
//! have to pass the body's checks, whichever way they decode.

use crate::fuzz_bodies;

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} missing: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    assert!(files.len() >= 3, "corpus {} is nearly empty", dir.display());
    files
}

fn run(target: &str, body: fn(&[u8]) -> bool) {
    for (name, bytes) in corpus(target) {
        let decoded = body(&bytes);
        let found_by_fuzzer = name.len() == 40 && name.bytes().all(|b| b.is_ascii_hexdigit());
        if !found_by_fuzzer {
            assert!(
                name.ends_with(".bin"),
                "{target}/{name}: unexpected corpus file name"
            );
            assert_eq!(decoded, !name.starts_with("bad_"), "{target}/{name}");
        }
        // Every prefix too: the cheapest slice of what the fuzzer explores.
        for len in 0..bytes.len() {
            body(&bytes[..len]);
        }
    }
}

#[test]
fn segment_decode_target_over_its_corpus() {
    run("segment_decode", fuzz_bodies::segment_decode);
}

#[test]
fn manifest_decode_target_over_its_corpus() {
    run("manifest_decode", fuzz_bodies::manifest_decode);
}

#[test]
fn frame_decode_target_over_its_corpus() {
    run("frame_decode", fuzz_bodies::frame_decode);
}

#[test]
fn cursor_decode_target_over_its_corpus() {
    run("cursor_decode", fuzz_bodies::cursor_decode);
}

#[test]
fn history_page_decode_target_over_its_corpus() {
    run("history_page_decode", fuzz_bodies::history_page_decode);
}

#[test]
fn dir_segment_header_decode_target_over_its_corpus() {
    run(
        "dir_segment_header_decode",
        fuzz_bodies::dir_segment_header_decode,
    );
}

#[test]
fn trim_point_decode_target_over_its_corpus() {
    run("trim_point_decode", fuzz_bodies::trim_point_decode);
}

#[test]
fn kv_bucket_decode_target_over_its_corpus() {
    run("kv_bucket_decode", fuzz_bodies::kv_bucket_decode);
}

#[test]
fn log_state_decode_target_over_its_corpus() {
    run("log_state_decode", fuzz_bodies::log_state_decode);
}

#[test]
fn state_checkpoint_decode_target_over_its_corpus() {
    run(
        "state_checkpoint_decode",
        fuzz_bodies::state_checkpoint_decode,
    );
}

#[test]
fn kv_object_decode_target_over_its_corpus() {
    run("kv_object_decode", fuzz_bodies::kv_object_decode);
}

#[test]
fn writer_lease_decode_target_over_its_corpus() {
    run("writer_lease_decode", fuzz_bodies::writer_lease_decode);
}

#[test]
fn index_decode_target_over_its_corpus() {
    run("index_decode", fuzz_bodies::index_decode);
}

#[test]
fn connect_settings_target_over_its_corpus() {
    run("connect_settings", fuzz_bodies::connect_settings);
}

// ---------- seed inputs generated in code ----------
//
// The frame and cursor corpora start from these inputs, so a change to
// either layout shows up here first. `WEFT_WRITE_CORPUS=1 cargo test -p weft
// --test local fuzz_corpus::` (re)writes them.

use weft::LogEntry;
use weft::format::frame;
use weft::format::replica_cursor::encode_cursor;
use weft::wal::Cursor;

fn frame_of(seqnum: u64, tags: &[&str], data: &[u8], offset: u32, end: bool) -> Vec<u8> {
    let e = LogEntry {
        seqnum,
        stream_version: seqnum / 2,
        tags: tags.iter().map(|t| t.parse().unwrap()).collect(),
        data: bytes::Bytes::copy_from_slice(data),
        timestamp_ms: 1_700_000_000_000,
        append_id: None,
    };
    let mut out = Vec::new();
    frame::encode(&mut out, &e, offset, end).unwrap();
    out
}

/// [`frame_of`] with an append id.
fn frame_with_id(seqnum: u64, tags: &[&str], id: &str, data: &[u8]) -> Vec<u8> {
    let e = LogEntry {
        seqnum,
        stream_version: seqnum / 2,
        tags: tags.iter().map(|t| t.parse().unwrap()).collect(),
        data: bytes::Bytes::copy_from_slice(data),
        timestamp_ms: 1_700_000_000_000,
        append_id: None,
    };
    let mut out = Vec::new();
    frame::encode_with_id(&mut out, &e, Some(id), 0, true).unwrap();
    out
}

/// Recomputes a frame's CRC after a deliberate edit, so the edit is what
/// the decoder must reject, not the checksum.
fn reseal_frame(mut f: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&f[..4]), &f[8..]);
    f[4..8].copy_from_slice(&crc.to_le_bytes());
    f
}

fn frame_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let tags = frame_of(41, &["orders:o-1", "all"], b"placed", 2, false);
    let long_tag = format!("{}:{}", "n".repeat(255), "k".repeat(255));
    let many: Vec<String> = (0..12).map(|i| format!("t{i}:k{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let mut flipped = tags.clone();
    flipped[45] ^= 0x04;
    let mut reserved = tags.clone();
    reserved[36] |= 0x80;
    let mut no_tags = tags.clone();
    no_tags[37] = 0;
    let mut bad_offset = frame_of(1, &["a"], b"x", 0, true);
    bad_offset[32] = 5;
    let mut tiny = tags.clone();
    tiny[..4].copy_from_slice(&3u32.to_le_bytes());
    // The one tag "a" ends at byte 43, where the id's length byte is.
    let with_id = frame_with_id(9, &["a"], "order-42/placed", b"x");
    let mut empty_id = frame_with_id(9, &["a"], "i", b"x");
    empty_id[43] = 0;
    let mut control_id = with_id.clone();
    control_id[44] = 0x1b;
    let mut long_id = with_id.clone();
    long_id[43] = 0xff;
    let mut erased = with_id.clone();
    assert!(frame::erase_in_place(&mut erased).unwrap());
    let mut erased_with_data = tags.clone();
    erased_with_data[36] |= frame::FLAG_ERASED;
    vec![
        ("frame_erased.bin", erased),
        (
            "bad_frame_erased_with_data.bin",
            reseal_frame(erased_with_data),
        ),
        ("frame_append_id.bin", with_id.clone()),
        (
            "frame_append_id_longest.bin",
            frame_with_id(3, &["a", "b:c"], &"i".repeat(255), b"payload"),
        ),
        ("bad_frame_empty_append_id.bin", reseal_frame(empty_id)),
        ("bad_frame_control_append_id.bin", reseal_frame(control_id)),
        ("bad_frame_append_id_overrun.bin", reseal_frame(long_id)),
        ("frame_min.bin", frame_of(0, &["a"], b"", 0, true)),
        ("frame_tags.bin", tags.clone()),
        ("frame_many_tags.bin", frame_of(7, &many, b"x", 7, true)),
        (
            "frame_long_tag.bin",
            frame_of(1 << 40, &[long_tag.as_str()], &[0xAB; 300], 0, true),
        ),
        (
            "frame_then_next.bin",
            [tags.clone(), frame_of(42, &["all"], b"next", 3, true)].concat(),
        ),
        ("bad_frame_truncated.bin", tags[..tags.len() - 1].to_vec()),
        ("bad_frame_flipped.bin", flipped),
        ("bad_frame_reserved_flag.bin", reseal_frame(reserved)),
        ("bad_frame_zero_tags.bin", reseal_frame(no_tags)),
        ("bad_frame_offset_past_seqnum.bin", reseal_frame(bad_offset)),
        ("bad_frame_tiny_length.bin", tiny),
    ]
}

fn reseal_cursor(mut c: Vec<u8>) -> Vec<u8> {
    let n = c.len() - 4;
    let crc = crc32c::crc32c(&c[..n]);
    c[n..].copy_from_slice(&crc.to_le_bytes());
    c
}

fn cursor_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mid = encode_cursor(Cursor {
        entry: 7,
        record: 3,
    })
    .to_vec();
    let mut flipped = mid.clone();
    flipped[9] ^= 0x01;
    let mut version = mid.clone();
    version[4] = 2;
    let mut magic = mid.clone();
    magic[0] = b'X';
    vec![
        (
            "cursor_zero.bin",
            encode_cursor(Cursor::at_entry(0)).to_vec(),
        ),
        ("cursor_mid.bin", mid.clone()),
        (
            "cursor_max.bin",
            encode_cursor(Cursor {
                entry: u64::MAX,
                record: u32::MAX,
            })
            .to_vec(),
        ),
        ("bad_cursor_short.bin", mid[..mid.len() - 1].to_vec()),
        ("bad_cursor_long.bin", [mid.as_slice(), &[0]].concat()),
        ("bad_cursor_flipped.bin", flipped),
        ("bad_cursor_version.bin", reseal_cursor(version)),
        ("bad_cursor_magic.bin", reseal_cursor(magic)),
    ]
}

/// Named corpus inputs.
type Seeds = Vec<(&'static str, Vec<u8>)>;

/// Flips one bit of `bytes` at byte `at`.
fn flipped(mut bytes: Vec<u8>, at: usize) -> Vec<u8> {
    bytes[at] ^= 0x10;
    bytes
}

/// Recomputes a trailing CRC-32C over everything before it.
fn reseal_trailing_crc(mut b: Vec<u8>) -> Vec<u8> {
    let n = b.len() - 4;
    let crc = crc32c::crc32c(&b[..n]);
    b[n..].copy_from_slice(&crc.to_le_bytes());
    b
}

fn dir_header_seeds() -> Seeds {
    use weft::format::dir_segment::SegmentHeader;
    let durable = SegmentHeader::new(0, false).encode();
    let relaxed = SegmentHeader::new(175, true).encode();
    let v1 = SegmentHeader {
        version: weft::format::dir_segment::SEGMENT_V1,
        ..SegmentHeader::new(0, false)
    }
    .encode();
    let mut reserved = durable.clone();
    reserved[5] |= 0x80;
    let mut version = durable.clone();
    version[4] = 4;
    let mut erased_v3 = durable.clone();
    erased_v3[4] = 3;
    let mut with_frame = relaxed.clone();
    with_frame.extend(frame_of(175, &["a"], b"x", 0, true));
    vec![
        ("dir_header_durable.bin", durable.clone()),
        ("dir_header_relaxed.bin", relaxed.clone()),
        ("dir_header_v1.bin", v1),
        ("dir_header_v3.bin", reseal_trailing_crc(erased_v3)),
        ("dir_header_then_frame.bin", with_frame),
        ("bad_dir_header_short.bin", durable[..19].to_vec()),
        ("bad_dir_header_flipped.bin", flipped(durable.clone(), 9)),
        ("bad_dir_header_reserved.bin", reseal_trailing_crc(reserved)),
        ("bad_dir_header_version.bin", reseal_trailing_crc(version)),
        ("bad_dir_header_zeros.bin", vec![0; 20]),
    ]
}

fn trim_point_seeds() -> Seeds {
    use weft::format::trim_point::TrimPoint;
    let empty = TrimPoint {
        through: 0,
        next_versions: vec![],
    }
    .encode();
    let streams = TrimPoint {
        through: 174,
        next_versions: vec![
            ("orders".parse().unwrap(), 90),
            ("orders:o-1".parse().unwrap(), 3),
        ],
    }
    .encode();
    let mut count = streams.clone();
    count[16] = 0xff;
    // Written before the log index: the same bytes with version 1.
    let mut version_1 = streams.clone();
    version_1[4] = 1;
    vec![
        ("trim_empty.bin", empty),
        ("trim_streams.bin", streams.clone()),
        ("trim_version_1.bin", reseal_trailing_crc(version_1)),
        ("bad_trim_flipped.bin", flipped(streams.clone(), 12)),
        (
            "bad_trim_truncated.bin",
            streams[..streams.len() - 1].to_vec(),
        ),
        ("bad_trim_count.bin", reseal_trailing_crc(count)),
        ("bad_trim_zeros.bin", vec![0; 24]),
    ]
}

fn kv_bucket_seeds() -> Seeds {
    use weft::format::dir_kv::encode_kv_bucket;
    let one = encode_kv_bucket(&vec![(
        "view".parse().unwrap(),
        "owner".into(),
        bytes::Bytes::from_static(b"node-a"),
    )]);
    let two = encode_kv_bucket(&vec![
        (
            "a:b".parse().unwrap(),
            "k".into(),
            bytes::Bytes::from_static(b"v"),
        ),
        (
            "c".parse().unwrap(),
            "empty value".into(),
            bytes::Bytes::new(),
        ),
    ]);
    vec![
        ("kv_empty.bin", encode_kv_bucket(&vec![])),
        ("kv_one.bin", one.clone()),
        ("kv_two.bin", two.clone()),
        ("bad_kv_flipped.bin", flipped(two.clone(), 20)),
        ("bad_kv_truncated.bin", one[..one.len() - 3].to_vec()),
        ("bad_kv_zeros.bin", vec![0; 16]),
    ]
}

/// A log state's body (no CRC) listing `tags` in the order given.
fn log_state_body(through: u64, tags: &[(&str, u64)]) -> Vec<u8> {
    let mut b = b"WLS1".to_vec();
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&through.to_le_bytes());
    b.extend_from_slice(&(tags.len() as u32).to_le_bytes());
    for (tag, next) in tags {
        b.extend_from_slice(&(tag.len() as u16).to_le_bytes());
        b.extend_from_slice(tag.as_bytes());
        b.extend_from_slice(&next.to_le_bytes());
    }
    b
}

/// Appends the CRC-32C of everything in `body`.
fn sealed(mut body: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

fn log_state() -> weft::format::LogState {
    let long = format!("{}:{}", "n".repeat(255), "k".repeat(255));
    weft::format::LogState::new(
        174,
        vec![
            ("orders".parse().unwrap(), 90),
            ("orders:o-1".parse().unwrap(), 3),
            ("acct:a:b".parse().unwrap(), u64::MAX),
            (long.parse().unwrap(), 0),
        ],
    )
    .unwrap()
}

fn log_state_seeds() -> Seeds {
    use weft::format::{LogState, encode_log_state};
    let empty = encode_log_state(&LogState::new(0, vec![]).unwrap())
        .unwrap()
        .to_vec();
    let streams = encode_log_state(&log_state()).unwrap().to_vec();
    let mut count = streams[..streams.len() - 4].to_vec();
    count[14..18].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut version = streams[..streams.len() - 4].to_vec();
    version[4] = 2;
    vec![
        ("log_state_empty.bin", empty),
        ("log_state_streams.bin", streams.clone()),
        ("bad_log_state_flipped.bin", flipped(streams.clone(), 12)),
        (
            "bad_log_state_truncated.bin",
            streams[..streams.len() - 1].to_vec(),
        ),
        ("bad_log_state_count.bin", sealed(count)),
        ("bad_log_state_version.bin", sealed(version)),
        (
            "bad_log_state_unsorted.bin",
            sealed(log_state_body(5, &[("b", 1), ("a", 1)])),
        ),
        (
            "bad_log_state_repeated.bin",
            sealed(log_state_body(5, &[("a", 1), ("a", 2)])),
        ),
        (
            "bad_log_state_bad_tag.bin",
            sealed(log_state_body(5, &[("a:", 1)])),
        ),
        (
            "bad_log_state_trailing.bin",
            sealed([log_state_body(5, &[("a", 1)]), vec![0]].concat()),
        ),
        ("bad_log_state_zeros.bin", vec![0; 24]),
    ]
}

fn state_checkpoint_seeds() -> Seeds {
    use weft::format::{LogState, StateCheckpoint, encode_state_checkpoint};
    let empty = encode_state_checkpoint(&StateCheckpoint {
        state: LogState::new(0, vec![]).unwrap(),
        through_check: 0,
        last_seqnums: None,
    })
    .unwrap()
    .to_vec();
    let streams = encode_state_checkpoint(&StateCheckpoint {
        state: log_state(),
        through_check: 0xdead_beef,
        last_seqnums: None,
    })
    .unwrap()
    .to_vec();
    // Version 2: each stream's last entry too.
    let state = log_state();
    let last: Vec<u64> = (0..state.next_versions.len() as u64).collect();
    let v2 = encode_state_checkpoint(&StateCheckpoint {
        state,
        through_check: 0xdead_beef,
        last_seqnums: Some(last),
    })
    .unwrap()
    .to_vec();
    // One last seqnum short: the count says one less than the streams.
    let short = v2[..v2.len() - 4 - 8].to_vec();
    // Magic, version and check value: the log state starts at byte 14.
    let body = streams[..streams.len() - 4].to_vec();
    let mut version = body.clone();
    version[4] = 2;
    vec![
        ("checkpoint_empty.bin", empty),
        ("checkpoint_streams.bin", streams.clone()),
        ("bad_checkpoint_flipped.bin", flipped(streams.clone(), 8)),
        (
            "bad_checkpoint_truncated.bin",
            streams[..streams.len() - 1].to_vec(),
        ),
        ("bad_checkpoint_version.bin", sealed(version)),
        // A well-sealed wrapper around a damaged state.
        (
            "bad_checkpoint_inner_flipped.bin",
            sealed(flipped(body, 30)),
        ),
        // A bare log state is not a checkpoint.
        (
            "bad_checkpoint_bare_state.bin",
            weft::format::encode_log_state(&log_state())
                .unwrap()
                .to_vec(),
        ),
        ("bad_checkpoint_zeros.bin", vec![0; 32]),
        ("checkpoint_v2_streams.bin", v2.clone()),
        ("bad_checkpoint_v2_short.bin", sealed(short)),
        (
            "bad_checkpoint_v2_truncated.bin",
            v2[..v2.len() - 3].to_vec(),
        ),
    ]
}

fn kv_object_seeds() -> Seeds {
    use weft::format::{KvObject, MAX_WRITERS, WRITER_TOKEN_LEN, encode_kv_object};
    let token = |b: u8| [b; WRITER_TOKEN_LEN];
    let value = encode_kv_object(&KvObject {
        value: Some(bytes::Bytes::from_static(b"node-a")),
        writers: vec![token(1)],
        complete: true,
    })
    .unwrap()
    .to_vec();
    let tombstone = encode_kv_object(&KvObject {
        value: None,
        writers: vec![token(9), token(8)],
        complete: false,
    })
    .unwrap()
    .to_vec();
    let full = encode_kv_object(&KvObject {
        value: Some(bytes::Bytes::new()),
        writers: (0..MAX_WRITERS as u8).map(token).collect(),
        complete: false,
    })
    .unwrap()
    .to_vec();
    let mut flags = value.clone();
    flags[4] |= 0x04;
    let mut no_writers = tombstone.clone();
    no_writers[5] = 0;
    let mut too_many = full.clone();
    too_many[5] = MAX_WRITERS as u8 + 1;
    too_many.extend_from_slice(&token(0xff));
    let mut tombstone_value = value.clone();
    tombstone_value[4] &= !0x01;
    vec![
        ("kv_object_value.bin", value.clone()),
        ("kv_object_tombstone.bin", tombstone.clone()),
        ("kv_object_full_history.bin", full),
        ("kv_object_v1.bin", b"WKV1\x01abc".to_vec()),
        ("kv_object_v1_tombstone.bin", b"WKV1\x00".to_vec()),
        ("bad_kv_object_flipped.bin", flipped(value.clone(), 3)),
        (
            "bad_kv_object_truncated.bin",
            tombstone[..tombstone.len() - 1].to_vec(),
        ),
        ("bad_kv_object_flags.bin", flags),
        ("bad_kv_object_no_writers.bin", no_writers),
        ("bad_kv_object_too_many_writers.bin", too_many),
        ("bad_kv_object_tombstone_value.bin", tombstone_value),
        ("bad_kv_object_v1_flag.bin", b"WKV1\x02abc".to_vec()),
        (
            "bad_kv_object_v1_tombstone_value.bin",
            b"WKV1\x00x".to_vec(),
        ),
        ("bad_kv_object_zeros.bin", vec![0; 16]),
    ]
}

fn writer_lease_seeds() -> Seeds {
    use weft::format::{WriterLease, encode_lease};
    let run = ulid::Ulid::from_parts(1_700_000_000_000, 5);
    let lease = WriterLease {
        renewals: 12,
        ..WriterLease::new(run, 7, "weft append (pid 4242)", 5_000, 1_733_050_000_000)
    };
    let released = WriterLease {
        released: true,
        ..WriterLease::new(run, u64::MAX, &"é".repeat(200), 1, 0)
    };
    let text = String::from_utf8(encode_lease(&lease).unwrap().to_vec()).unwrap();
    vec![
        ("lease.bin", text.clone().into_bytes()),
        (
            "lease_released.bin",
            encode_lease(&released).unwrap().to_vec(),
        ),
        // Another spelling of the same lease.
        (
            "lease_pretty.bin",
            serde_json::to_vec_pretty(&lease).unwrap(),
        ),
        (
            "bad_lease_flipped.bin",
            flipped(text.clone().into_bytes(), 0),
        ),
        (
            "bad_lease_truncated.bin",
            text.as_bytes()[..text.len() - 1].to_vec(),
        ),
        (
            "bad_lease_version.bin",
            text.replace("\"version\":1", "\"version\":2").into_bytes(),
        ),
        (
            "bad_lease_format.bin",
            text.replace("weft-writer-lease", "other").into_bytes(),
        ),
        (
            "bad_lease_run.bin",
            text.replace(&run.to_string(), "not-a-ulid").into_bytes(),
        ),
        (
            "bad_lease_negative_epoch.bin",
            text.replace("\"epoch\":7", "\"epoch\":-7").into_bytes(),
        ),
        ("bad_lease_empty_object.bin", b"{}".to_vec()),
        ("bad_lease_zeros.bin", vec![0; 16]),
    ]
}

/// Index rows behind the selector byte of their decoder (the order of
/// `INDEX_DECODERS` in `fuzz/src/lib.rs`).
fn index_seeds() -> Seeds {
    use weft::format::index_rows::{self as index, TagRow};
    let with = |selector: u8, bytes: &[u8]| [&[selector][..], bytes].concat();
    let tag_key = index::tag_key(&"orders:o-1".parse().unwrap());
    let row = TagRow {
        id: 3,
        next_version: 10,
        floor: 2,
        last: 99,
    };
    let gaps = index::encode_chunk(&[1, 2, 130, 130 + (1 << 20), u64::MAX]).unwrap();
    let chunk_head =
        |count: u32, first: u64| [count.to_le_bytes().as_slice(), &first.to_le_bytes()].concat();
    let mut bad_floor = row.encode();
    bad_floor[16..24].copy_from_slice(&11u64.to_le_bytes());
    vec![
        ("index_tag_key.bin", with(0, &tag_key)),
        (
            "index_tag_key_namespace.bin",
            with(0, &index::tag_key(&"orders".parse().unwrap())),
        ),
        ("index_tag_row.bin", with(1, &row.encode())),
        (
            "index_chunk_one.bin",
            with(2, &index::encode_chunk(&[5]).unwrap()),
        ),
        ("index_chunk_gaps.bin", with(2, &gaps)),
        // Gap 1 spelt in two bytes: accepted, re-encoded in one.
        (
            "index_chunk_padded_gap.bin",
            with(2, &[chunk_head(2, 1), vec![0x81, 0x00]].concat()),
        ),
        ("index_pair_key.bin", with(3, &index::pair_key(7, 1 << 40))),
        ("index_seqnum_key.bin", with(4, &index::seqnum_key(42))),
        ("index_tip.bin", with(5, &index::tip_value(99, 0xdead_beef))),
        ("index_u64.bin", with(6, &index::u64_value(2))),
        ("bad_index_empty.bin", vec![]),
        (
            "bad_index_tag_key_flipped.bin",
            flipped(with(0, &tag_key), 2),
        ),
        (
            "bad_index_tag_key_truncated.bin",
            with(0, &tag_key[..tag_key.len() - 1]),
        ),
        (
            "bad_index_tag_key_colon.bin",
            with(0, &[&3u16.to_le_bytes()[..], b"a:b", &[0, 0]].concat()),
        ),
        ("bad_index_tag_row_floor.bin", with(1, &bad_floor)),
        ("bad_index_tag_row_short.bin", with(1, &row.encode()[..31])),
        ("bad_index_chunk_count.bin", with(2, &chunk_head(0, 1))),
        (
            "bad_index_chunk_too_many.bin",
            with(2, &[chunk_head(513, 1), vec![1; 512]].concat()),
        ),
        (
            "bad_index_chunk_truncated.bin",
            with(2, &gaps[..gaps.len() - 1]),
        ),
        (
            "bad_index_chunk_zero_gap.bin",
            with(2, &[chunk_head(2, 1), vec![0]].concat()),
        ),
        (
            "bad_index_chunk_overflow.bin",
            with(2, &[chunk_head(2, u64::MAX), vec![1]].concat()),
        ),
        (
            "bad_index_chunk_trailing.bin",
            with(2, &[chunk_head(1, 1), vec![1]].concat()),
        ),
        ("bad_index_pair_key_short.bin", with(3, &[0; 15])),
        ("bad_index_seqnum_key_long.bin", with(4, &[0; 9])),
        ("bad_index_tip_long.bin", with(5, &[0; 17])),
        ("bad_index_u64_short.bin", with(6, &[0; 7])),
        ("bad_index_zeros.bin", vec![0; 9]),
    ]
}

/// Objects shaped like a bucket log's: a v4 manifest with metadata and a
/// snapshot pointer, and segments whose records are entry frames.
fn bucket_log_seeds() -> (Seeds, Seeds) {
    use weft::format::{
        Compression, ManifestVersion, Metadata, SegmentVersion, SnapshotPointer, encode_segment,
    };
    use weft::wal::Manifest;
    let mut m = Manifest::new(ManifestVersion::V4);
    m.bump_epoch().unwrap();
    m.bump_epoch().unwrap();
    let meta = |start_index| Metadata {
        start_index,
        ingestion_ms: 1_700_000_000_000,
        payload: bytes::Bytes::from_static(b"group"),
    };
    let run = "log/segments/01J00000000000000000000000";
    m.append(format!("{run}/0000000000000000"), vec![meta(0), meta(2)], 3)
        .unwrap();
    m.append(format!("{run}/0000000000000001"), vec![], 1)
        .unwrap();
    m.set_snapshot(Some(SnapshotPointer {
        location: "log/snapshots/2".into(),
        through_seq: 2,
        created_ms: 1_700_000_000_500,
    }))
    .unwrap();
    let manifest = m.to_bytes().unwrap().to_vec();
    let mut flipped_manifest = manifest.clone();
    flipped_manifest[10] ^= 0x20;
    let frames = vec![
        frame_of(0, &["acct:1", "all"], b"opened", 0, false),
        frame_of(1, &["acct:2"], b"opened", 1, true),
        frame_of(2, &["acct:1"], b"deposit", 0, true),
    ];
    let segment = encode_segment(&frames, Compression::None, SegmentVersion::V2)
        .unwrap()
        .to_vec();
    let zstd = encode_segment(&frames, Compression::Zstd, SegmentVersion::V2)
        .unwrap()
        .to_vec();
    let mut flipped_segment = segment.clone();
    flipped_segment[6] ^= 0x01;
    (
        vec![
            ("manifest_v4_bucket_log.bin", manifest),
            ("bad_manifest_v4_flipped.bin", flipped_manifest),
        ],
        vec![
            ("segment_v2_frames.bin", segment),
            ("segment_v2_zstd_frames.bin", zstd),
            ("bad_segment_v2_flipped.bin", flipped_segment),
        ],
    )
}

/// A v5 manifest whose older entries moved into history pages (three
/// levels), the pages themselves, and damaged copies of both.
fn history_seeds() -> (Seeds, Seeds) {
    use weft::format::{ManifestVersion, Metadata};
    use weft::wal::{CheckpointPolicy, Manifest};
    let policy = CheckpointPolicy::default()
        .with_max_recent_entries(3)
        .with_max_recent_bytes(1 << 20)
        .with_leaf_entries(2)
        .with_leaf_bytes(1 << 19)
        .with_fanout(2)
        .with_max_pages_per_commit(8);
    let mut m = Manifest::new(ManifestVersion::V5);
    m.bump_epoch().unwrap();
    let run = "log/segments/01J00000000000000000000000";
    let mut leaf = Vec::new();
    let mut inner = Vec::new();
    for i in 0..12u64 {
        let meta = (i % 3 == 0).then(|| Metadata {
            start_index: 0,
            ingestion_ms: 1_700_000_000_000,
            payload: bytes::Bytes::from_static(b"g"),
        });
        let committed = m.next_sequence();
        m.append(format!("{run}/{i:016x}"), meta.into_iter().collect(), 2)
            .unwrap();
        for up in m
            .checkpoint(&policy, committed, |l, f, e| {
                format!("log/history/{l:02x}-{f:016x}-{e:016x}-01J00000000000000000000000")
            })
            .unwrap()
        {
            if up.location.contains("/00-") && leaf.is_empty() {
                leaf = up.bytes.to_vec();
            } else if up.location.contains("/01-") && inner.is_empty() {
                inner = up.bytes.to_vec();
            }
        }
    }
    m.truncate_through(2);
    assert!(m.history().is_some_and(|h| h.levels.len() >= 2));
    let manifest = m.to_bytes().unwrap().to_vec();
    let mut flipped_manifest = manifest.clone();
    flipped_manifest[manifest.len() - 40] ^= 0x10;
    let mut flipped_leaf = leaf.clone();
    flipped_leaf[12] ^= 0x01;
    (
        vec![
            ("manifest_v5_history.bin", manifest),
            ("bad_manifest_v5_flipped.bin", flipped_manifest),
        ],
        vec![
            ("page_leaf.bin", leaf.clone()),
            ("page_interior.bin", inner.clone()),
            ("bad_page_flipped.bin", flipped_leaf),
            ("bad_page_truncated.bin", inner[..inner.len() - 1].to_vec()),
        ],
    )
}

#[test]
fn generated_seed_inputs_are_in_the_corpus() {
    let write = std::env::var("WEFT_WRITE_CORPUS").is_ok_and(|v| v == "1");
    let (manifests, segments) = bucket_log_seeds();
    let (v5_manifests, pages) = history_seeds();
    for (target, seeds) in [
        ("frame_decode", frame_seeds()),
        ("cursor_decode", cursor_seeds()),
        ("dir_segment_header_decode", dir_header_seeds()),
        ("trim_point_decode", trim_point_seeds()),
        ("kv_bucket_decode", kv_bucket_seeds()),
        ("log_state_decode", log_state_seeds()),
        ("state_checkpoint_decode", state_checkpoint_seeds()),
        ("kv_object_decode", kv_object_seeds()),
        ("writer_lease_decode", writer_lease_seeds()),
        ("index_decode", index_seeds()),
        ("manifest_decode", manifests),
        ("manifest_decode", v5_manifests),
        ("segment_decode", segments),
        ("history_page_decode", pages),
    ] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus")
            .join(target);
        for (name, bytes) in seeds {
            let path = dir.join(name);
            if write {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &bytes).unwrap();
            }
            let stored = std::fs::read(&path).unwrap_or_else(|e| {
                panic!(
                    "{} missing ({e}); run with WEFT_WRITE_CORPUS=1",
                    path.display()
                )
            });
            assert_eq!(
                stored,
                bytes,
                "{}: regenerate with WEFT_WRITE_CORPUS=1",
                path.display()
            );
        }
    }
}
