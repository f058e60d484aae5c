//! Hand-built test vectors for the formats weft writes.
//!
//! Each vector is assembled here byte by byte from the documented layouts
//! (with an independent bitwise CRC-32C), never by weft's encoders, and is
//! also committed under `tests/fixtures/formats/`. The tests check that the
//! committed files equal the hand-built bytes, that the decoders read the
//! intended values from them, and that the encoders reproduce them exactly.
//!
//! To rewrite the files (and the fuzz corpus seeds) after a deliberate
//! change: `WEFT_WRITE_FIXTURES=1 cargo test -p weft --test local format_fixtures::`.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use weft::format::{
    Compression, DecodedSegment, ManifestData, ManifestEntry, ManifestVersion, Metadata,
    SegmentVersion, SnapshotPointer, decode_manifest, decode_segment, encode_manifest,
    encode_segment,
};
use weft::wal::Manifest;

use crate::support::common;

use common::{Le, crc32c_bitwise, entry, footer, segment_block, segment_footer, snapshot_block};

fn md(start_index: u32, ingestion_ms: i64, payload: &'static [u8]) -> Metadata {
    Metadata {
        start_index,
        ingestion_ms,
        payload: Bytes::from_static(payload),
    }
}

fn e(sequence: u64, count: Option<u32>, location: &str, metadata: Vec<Metadata>) -> ManifestEntry {
    ManifestEntry {
        sequence,
        count,
        location: location.to_owned(),
        metadata,
    }
}

enum Expect {
    Manifest(ManifestData),
    Segment(DecodedSegment),
}

struct Fixture {
    name: &'static str,
    bytes: Vec<u8>,
    expect: Expect,
    /// The bytes weft's encoder writes for `expect`: `None` when that is
    /// `bytes` itself, or the name of the fixture holding them when `bytes`
    /// is an accepted but non-canonical form.
    canonical: Option<&'static str>,
}

const T0: i64 = 1_700_000_000_000;

fn fixtures() -> Vec<Fixture> {
    let mut out = Vec::new();

    // Manifest v1: two segment-numbered entries, epoch 5.
    let mut b = Le::default();
    entry(
        &mut b,
        3,
        None,
        "log/a.batch",
        &[(0, T0, b"m1"), (2, T0 + 1, b"")],
    );
    entry(&mut b, 4, None, "log/b.batch", &[]);
    footer(&mut b, 2, 5, 5, 1);
    out.push(Fixture {
        name: "manifest_v1.bin",
        bytes: b.0,
        expect: Expect::Manifest(ManifestData {
            version: ManifestVersion::V1,
            epoch: 5,
            next_sequence: 5,
            entries: vec![
                e(
                    3,
                    None,
                    "log/a.batch",
                    vec![md(0, T0, b"m1"), md(2, T0 + 1, b"")],
                ),
                e(4, None, "log/b.batch", vec![]),
            ],
            snapshot: None,
            history: None,
        }),
        canonical: None,
    });

    // Manifest v2 with a snapshot: entry 0 was truncated after the snapshot.
    let mut b = Le::default();
    entry(
        &mut b,
        1,
        None,
        "wal/seg/r1/0000000000000001",
        &[(0, T0, b"a")],
    );
    entry(&mut b, 2, None, "wal/seg/r1/0000000000000002", &[]);
    snapshot_block(&mut b, "wal/snap/0000000000000000", 0, T0 + 5_000);
    footer(&mut b, 2, 3, 7, 2);
    out.push(Fixture {
        name: "manifest_v2_snapshot.bin",
        bytes: b.0,
        expect: Expect::Manifest(ManifestData {
            version: ManifestVersion::V2,
            epoch: 7,
            next_sequence: 3,
            entries: vec![
                e(
                    1,
                    None,
                    "wal/seg/r1/0000000000000001",
                    vec![md(0, T0, b"a")],
                ),
                e(2, None, "wal/seg/r1/0000000000000002", vec![]),
            ],
            snapshot: Some(SnapshotPointer {
                location: "wal/snap/0000000000000000".into(),
                through_seq: 0,
                created_ms: T0 + 5_000,
            }),
            history: None,
        }),
        canonical: None,
    });

    // Manifest v2 without a snapshot: the block is present and all zero.
    let v2_plain = ManifestData {
        version: ManifestVersion::V2,
        epoch: 1,
        next_sequence: 1,
        entries: vec![e(
            0,
            None,
            "wal/seg/r0/0000000000000000",
            vec![md(0, T0, b"x"), md(1, -1, b"yz")],
        )],
        snapshot: None,
        history: None,
    };
    let mut entries_only = Le::default();
    entry(
        &mut entries_only,
        0,
        None,
        "wal/seg/r0/0000000000000000",
        &[(0, T0, b"x"), (1, -1, b"yz")],
    );
    let mut b = Le::default();
    b.raw(&entries_only.0);
    b.raw(&[0u8; 18]);
    footer(&mut b, 1, 1, 1, 2);
    out.push(Fixture {
        name: "manifest_v2_no_snapshot.bin",
        bytes: b.0,
        expect: Expect::Manifest(v2_plain.clone()),
        canonical: None,
    });

    // The same state with the snapshot block left out entirely: accepted on
    // read, but weft writes the zero block instead.
    let mut b = Le::default();
    b.raw(&entries_only.0);
    footer(&mut b, 1, 1, 1, 2);
    out.push(Fixture {
        name: "manifest_v2_no_block.bin",
        bytes: b.0,
        expect: Expect::Manifest(v2_plain),
        canonical: Some("manifest_v2_no_snapshot.bin"),
    });

    // Manifest v3: a legacy one-slot entry carried over from v2, then two
    // record-numbered entries; no snapshot.
    let mut b = Le::default();
    entry(&mut b, 0, Some(0), "old/seg0", &[]);
    entry(
        &mut b,
        1,
        Some(4),
        "wal/seg/r2/0000000000000000",
        &[(0, T0, b"g1"), (3, T0, b"g2")],
    );
    entry(
        &mut b,
        5,
        Some(5),
        "wal/seg/r2/0000000000000001",
        &[(0, T0 + 9, b"")],
    );
    b.raw(&[0u8; 18]);
    footer(&mut b, 3, 10, 2, 3);
    out.push(Fixture {
        name: "manifest_v3.bin",
        bytes: b.0,
        expect: Expect::Manifest(ManifestData {
            version: ManifestVersion::V3,
            epoch: 2,
            next_sequence: 10,
            entries: vec![
                e(0, Some(0), "old/seg0", vec![]),
                e(
                    1,
                    Some(4),
                    "wal/seg/r2/0000000000000000",
                    vec![md(0, T0, b"g1"), md(3, T0, b"g2")],
                ),
                e(
                    5,
                    Some(5),
                    "wal/seg/r2/0000000000000001",
                    vec![md(0, T0 + 9, b"")],
                ),
            ],
            snapshot: None,
            history: None,
        }),
        canonical: None,
    });

    // Manifest v4 with a snapshot through record 3, entries from record 4.
    let mut b = Le::default();
    entry(
        &mut b,
        4,
        Some(3),
        "wal/seg/r3/0000000000000001",
        &[(0, T0, b"p")],
    );
    entry(
        &mut b,
        7,
        Some(5),
        "wal/seg/r3/0000000000000002",
        &[(0, T0 + 1, b"q"), (2, T0 + 2, b"r")],
    );
    snapshot_block(&mut b, "wal/snap/r3-3", 3, T0 + 3);
    footer(&mut b, 2, 12, 3, 4);
    out.push(Fixture {
        name: "manifest_v4.bin",
        bytes: b.0,
        expect: Expect::Manifest(ManifestData {
            version: ManifestVersion::V4,
            epoch: 3,
            next_sequence: 12,
            entries: vec![
                e(
                    4,
                    Some(3),
                    "wal/seg/r3/0000000000000001",
                    vec![md(0, T0, b"p")],
                ),
                e(
                    7,
                    Some(5),
                    "wal/seg/r3/0000000000000002",
                    vec![md(0, T0 + 1, b"q"), md(2, T0 + 2, b"r")],
                ),
            ],
            snapshot: Some(SnapshotPointer {
                location: "wal/snap/r3-3".into(),
                through_seq: 3,
                created_ms: T0 + 3,
            }),
            history: None,
        }),
        canonical: None,
    });

    // Manifest v4, empty (a freshly created log claimed at epoch 1).
    let mut b = Le::default();
    b.raw(&[0u8; 18]);
    footer(&mut b, 0, 0, 1, 4);
    out.push(Fixture {
        name: "manifest_v4_empty.bin",
        bytes: b.0,
        expect: Expect::Manifest(ManifestData {
            version: ManifestVersion::V4,
            epoch: 1,
            next_sequence: 0,
            entries: vec![],
            snapshot: None,
            history: None,
        }),
        canonical: None,
    });

    let records: [&[u8]; 3] = [b"", b"hello", &[0, 1, 2, 255]];
    let seg = |version, compression| {
        Expect::Segment(DecodedSegment {
            version,
            compression,
            records: records.iter().map(|r| Bytes::copy_from_slice(r)).collect(),
        })
    };

    // Segment v1, uncompressed.
    let mut b = Le::default();
    b.raw(&segment_block(&records));
    segment_footer(&mut b, 0, 3, 1);
    out.push(Fixture {
        name: "segment_v1.bin",
        bytes: b.0,
        expect: seg(SegmentVersion::V1, Compression::None),
        canonical: None,
    });

    // Segment v2, uncompressed.
    let mut b = Le::default();
    b.raw(&segment_block(&records));
    segment_footer(&mut b, 0, 3, 2);
    out.push(Fixture {
        name: "segment_v2.bin",
        bytes: b.0,
        expect: seg(SegmentVersion::V2, Compression::None),
        canonical: None,
    });

    // Segment v2, zstd: one frame holding the block as a single raw block
    // (magic, frame header with single-segment flag and 1-byte content
    // size, block header last=1 type=raw size=n, the bytes). libzstd emits
    // exactly this for input too small to compress.
    let block = segment_block(&records);
    let mut b = Le::default();
    b.u32(0xFD2F_B528).u8(0x20).u8(block.len() as u8);
    let header = ((block.len() as u32) << 3) | 1;
    b.raw(&header.to_le_bytes()[..3]).raw(&block);
    segment_footer(&mut b, 1, 3, 2);
    out.push(Fixture {
        name: "segment_v2_zstd.bin",
        bytes: b.0,
        expect: seg(SegmentVersion::V2, Compression::Zstd),
        canonical: None,
    });

    out
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats")
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

#[test]
fn bitwise_crc_matches_the_reference_check_value() {
    assert_eq!(crc32c_bitwise(b"123456789"), 0xE306_9283);
    assert_eq!(crc32c_bitwise(b"123456789"), crc32c::crc32c(b"123456789"));
}

#[test]
fn committed_fixtures_equal_their_hand_built_bytes() {
    let write = std::env::var_os("WEFT_WRITE_FIXTURES").is_some();
    for f in fixtures() {
        let path = fixture_dir().join(f.name);
        if write {
            std::fs::create_dir_all(fixture_dir()).unwrap();
            std::fs::write(&path, &f.bytes).unwrap();
            let target = match f.expect {
                Expect::Manifest(_) => "manifest_decode",
                Expect::Segment(_) => "segment_decode",
            };
            std::fs::create_dir_all(corpus_dir(target)).unwrap();
            std::fs::write(corpus_dir(target).join(f.name), &f.bytes).unwrap();
        }
        let on_disk = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "fixture {} missing ({e}); regenerate with WEFT_WRITE_FIXTURES=1",
                path.display()
            )
        });
        assert_eq!(
            on_disk, f.bytes,
            "fixture {} differs from its layout",
            f.name
        );
    }
}

#[test]
fn fixtures_decode_to_their_intended_values() {
    for f in fixtures() {
        let bytes = std::fs::read(fixture_dir().join(f.name)).unwrap();
        match &f.expect {
            Expect::Manifest(want) => {
                assert_eq!(&decode_manifest(&bytes).unwrap(), want, "{}", f.name);
                let m = Manifest::from_bytes(&bytes).unwrap();
                assert_eq!(&m.to_data(), want, "{}", f.name);
            }
            Expect::Segment(want) => {
                assert_eq!(
                    &decode_segment(Bytes::from(bytes)).unwrap(),
                    want,
                    "{}",
                    f.name
                );
            }
        }
    }
}

#[test]
fn encoders_reproduce_fixture_bytes_exactly() {
    let all = fixtures();
    for f in &all {
        let want = match f.canonical {
            None => f.bytes.clone(),
            Some(name) => all.iter().find(|g| g.name == name).unwrap().bytes.clone(),
        };
        match &f.expect {
            Expect::Manifest(data) => {
                assert_eq!(encode_manifest(data).unwrap(), want, "{}", f.name);
                let m = Manifest::from_data(data.clone()).unwrap();
                assert_eq!(m.to_bytes().unwrap(), want, "{}", f.name);
            }
            Expect::Segment(seg) => {
                let bytes = encode_segment(&seg.records, seg.compression, seg.version).unwrap();
                assert_eq!(bytes, want, "{}", f.name);
            }
        }
    }
}

#[test]
fn manifest_built_by_appends_matches_the_v4_fixture() {
    // The same state reached through the producer's operations.
    let mut m = Manifest::new(ManifestVersion::V4);
    for _ in 0..3 {
        m.bump_epoch().unwrap();
    }
    m.append("wal/seg/r3/0000000000000000", vec![md(0, T0, b"old")], 4)
        .unwrap();
    m.append("wal/seg/r3/0000000000000001", vec![md(0, T0, b"p")], 3)
        .unwrap();
    m.append(
        "wal/seg/r3/0000000000000002",
        vec![md(0, T0 + 1, b"q"), md(2, T0 + 2, b"r")],
        5,
    )
    .unwrap();
    m.set_snapshot(Some(SnapshotPointer {
        location: "wal/snap/r3-3".into(),
        through_seq: 3,
        created_ms: T0 + 3,
    }))
    .unwrap();
    assert_eq!(m.truncate_through(3), 1);
    let want = std::fs::read(fixture_dir().join("manifest_v4.bin")).unwrap();
    assert_eq!(m.to_bytes().unwrap(), want);
}
