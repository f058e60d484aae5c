//! Property tests for the segment and manifest codecs: round trips for
//! every version, the in-memory manifest against a plain model, and damage
//! (truncation, bit and byte flips, appended garbage) that must never panic
//! and must be reported as Corrupt wherever the bytes no longer say the
//! same thing. For the checksummed layouts (segment v2, manifest v4) every
//! single-bit flip must be detected; two tests sweep every bit of a sample.

use bytes::Bytes;
use proptest::prelude::*;
use weft::ErrorKind;
use weft::format::{
    Compression, DecodedSegment, ManifestData, ManifestEntry, ManifestVersion, Metadata,
    SegmentVersion, SnapshotPointer, decode_manifest, decode_segment, encode_manifest,
    encode_segment,
};
use weft::wal::Manifest;

// ---------- strategies ----------

fn segment_version() -> impl Strategy<Value = SegmentVersion> {
    prop_oneof![Just(SegmentVersion::V1), Just(SegmentVersion::V2)]
}

fn compression() -> impl Strategy<Value = Compression> {
    prop_oneof![Just(Compression::None), Just(Compression::Zstd)]
}

fn records() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let record = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..48),
        // Compressible records, so zstd really compresses sometimes.
        (any::<u8>(), 0usize..200).prop_map(|(b, n)| vec![b; n]),
    ];
    prop::collection::vec(record, 0..10)
}

fn manifest_version() -> impl Strategy<Value = ManifestVersion> {
    prop::sample::select(ManifestVersion::ALL.to_vec())
}

fn location() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9/._-]{1,40}", "\\PC{0,12}",]
}

/// Raw material for one entry: the gap before it, its record count (0 =
/// legacy slot in v3/v4), location, and metadata (start index, time, payload).
type EntrySeed = (u64, u32, String, Vec<(u32, i64, Vec<u8>)>);

fn entry_seed() -> impl Strategy<Value = EntrySeed> {
    (
        prop_oneof![3 => Just(0u64), 1 => 0u64..5],
        prop_oneof![1 => Just(0u32), 6 => 1u32..50, 1 => Just(u32::MAX)],
        location(),
        prop::collection::vec(
            (
                0u32..60,
                any::<i64>(),
                prop::collection::vec(any::<u8>(), 0..6),
            ),
            0..4,
        ),
    )
}

fn manifest_data() -> impl Strategy<Value = ManifestData> {
    (
        manifest_version(),
        any::<u64>(),
        prop_oneof![4 => 0u64..1000, 1 => (u64::MAX - (1 << 40))..=u64::MAX],
        prop::collection::vec(entry_seed(), 0..6),
        0u64..3,
        prop::option::of(("[a-z0-9/]{1,20}", any::<u64>(), any::<i64>())),
    )
        .prop_map(|(version, epoch, start, seeds, tail_gap, snap)| {
            build_manifest(version, epoch, start, seeds, tail_gap, snap)
        })
}

/// Lay out seeds as a valid manifest of `version`, dropping entries that
/// would run out of sequence space.
fn build_manifest(
    version: ManifestVersion,
    epoch: u64,
    start: u64,
    seeds: Vec<EntrySeed>,
    tail_gap: u64,
    snap: Option<(String, u64, i64)>,
) -> ManifestData {
    let mut next = start;
    let mut entries = Vec::new();
    for (gap, count, location, md) in seeds {
        let count = version.has_record_counts().then_some(count);
        let Some(sequence) = next.checked_add(gap) else {
            break;
        };
        let slots = match count {
            Some(n) if n > 0 => u64::from(n),
            _ => 1,
        };
        let Some(end) = sequence.checked_add(slots) else {
            break;
        };
        let mut starts: Vec<u32> = md.iter().map(|m| m.0).collect();
        starts.sort_unstable();
        if let Some(n) = count.filter(|n| *n > 0) {
            for s in &mut starts {
                *s = (*s).min(n);
            }
        }
        let metadata = md
            .into_iter()
            .zip(starts)
            .map(|((_, ms, payload), start_index)| Metadata {
                start_index,
                ingestion_ms: ms,
                payload: Bytes::from(payload),
            })
            .collect();
        entries.push(ManifestEntry {
            sequence,
            count,
            location,
            metadata,
        });
        next = end;
    }
    let snapshot = if version.has_snapshot_block() {
        snap.map(|(location, through_seq, created_ms)| SnapshotPointer {
            location,
            through_seq,
            created_ms,
        })
    } else {
        None
    };
    ManifestData {
        version,
        epoch,
        next_sequence: next.saturating_add(tail_gap),
        entries,
        snapshot,
        history: None,
    }
}

// ---------- damage helpers ----------

fn expect_corrupt<T: std::fmt::Debug>(r: &weft::Result<T>, what: &str) {
    if let Err(e) = r {
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: {e}");
    }
}

/// A damaged segment must fail as Corrupt or decode to something else;
/// an unchecksummed zstd segment may even decode to the same records (zstd
/// frames have bits a decoder ignores), but never panics and stays stable.
fn check_damaged_segment(damaged: &[u8], original: &DecodedSegment, what: &str) {
    let r = decode_segment(Bytes::copy_from_slice(damaged));
    expect_corrupt(&r, what);
    if let Ok(seg) = r {
        let again = encode_segment(&seg.records, seg.compression, seg.version).unwrap();
        assert_eq!(decode_segment(again).unwrap(), seg, "{what}: unstable");
        let lenient =
            original.version == SegmentVersion::V1 && original.compression == Compression::Zstd;
        assert!(lenient || seg != *original, "{what}: damage went unnoticed");
    }
}

fn check_damaged_manifest(damaged: &[u8], original: &ManifestData, what: &str) {
    let r = decode_manifest(damaged);
    expect_corrupt(&r, what);
    if let Ok(m) = r {
        assert_ne!(&m, original, "{what}: damage went unnoticed");
        let again = encode_manifest(&m).unwrap();
        assert_eq!(decode_manifest(&again).unwrap(), m, "{what}: unstable");
    }
}

fn strict_sweep_segment(bytes: &[u8]) {
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut d = bytes.to_vec();
            d[i] ^= 1 << bit;
            let err = decode_segment(Bytes::from(d))
                .expect_err(&format!("flip of byte {i} bit {bit} went undetected"));
            assert_eq!(err.kind(), ErrorKind::Corrupt);
        }
    }
}

fn strict_sweep_manifest(bytes: &[u8]) {
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut d = bytes.to_vec();
            d[i] ^= 1 << bit;
            let err = decode_manifest(&d)
                .expect_err(&format!("flip of byte {i} bit {bit} went undetected"));
            assert_eq!(err.kind(), ErrorKind::Corrupt);
        }
    }
}

// ---------- exhaustive sweeps ----------

#[test]
fn every_bit_flip_of_a_v2_segment_is_corrupt() {
    let records: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"alpha".to_vec(),
        vec![9; 300],
        (0..=255).collect(),
    ];
    for compression in [Compression::None, Compression::Zstd] {
        let bytes = encode_segment(&records, compression, SegmentVersion::V2).unwrap();
        strict_sweep_segment(&bytes);
    }
}

#[test]
fn every_bit_flip_of_a_v4_manifest_is_corrupt() {
    let mut m = Manifest::new(ManifestVersion::V4);
    m.bump_epoch().unwrap();
    m.append(
        "wal/seg/run/0000000000000000",
        vec![Metadata {
            start_index: 0,
            ingestion_ms: 1_700_000_000_000,
            payload: Bytes::from_static(b"meta"),
        }],
        7,
    )
    .unwrap();
    m.append("wal/seg/run/0000000000000001", vec![], 2).unwrap();
    m.set_snapshot(Some(SnapshotPointer {
        location: "wal/snap/1".into(),
        through_seq: 6,
        created_ms: 5,
    }))
    .unwrap();
    strict_sweep_manifest(&m.to_bytes().unwrap());
    strict_sweep_manifest(&Manifest::new(ManifestVersion::V4).to_bytes().unwrap());
}

// ---------- properties ----------

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn segments_round_trip(records in records(), c in compression(), v in segment_version()) {
        let bytes = encode_segment(&records, c, v).unwrap();
        let seg = decode_segment(bytes.clone()).unwrap();
        prop_assert_eq!(seg.version, v);
        prop_assert_eq!(seg.compression, c);
        let got: Vec<Vec<u8>> = seg.records.iter().map(|r| r.to_vec()).collect();
        prop_assert_eq!(got, records);
        // Encoding is deterministic.
        prop_assert_eq!(encode_segment(&seg.records, c, v).unwrap(), bytes);
    }

    #[test]
    fn manifests_round_trip(data in manifest_data()) {
        let bytes = encode_manifest(&data).unwrap();
        let back = decode_manifest(&bytes).unwrap();
        prop_assert_eq!(&back, &data);
        prop_assert_eq!(encode_manifest(&back).unwrap(), bytes.clone());
        let m = Manifest::from_data(data).unwrap();
        prop_assert_eq!(m.to_bytes().unwrap(), bytes.clone());
        prop_assert_eq!(Manifest::from_bytes(&bytes).unwrap(), m);
    }

    #[test]
    fn damaged_segments_never_panic(
        records in records(),
        c in compression(),
        v in segment_version(),
        flip_at in any::<prop::sample::Index>(),
        flip_with in 1u8..=255,
        garbage in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        let bytes = encode_segment(&records, c, v).unwrap();
        let original = decode_segment(bytes.clone()).unwrap();
        for len in 0..bytes.len() {
            check_damaged_segment(&bytes[..len], &original, &format!("truncated to {len}"));
        }
        let i = flip_at.index(bytes.len());
        let mut flipped = bytes.to_vec();
        flipped[i] ^= flip_with;
        if v == SegmentVersion::V2 && flip_with.count_ones() == 1 {
            let err = decode_segment(Bytes::from(flipped)).unwrap_err();
            prop_assert_eq!(err.kind(), ErrorKind::Corrupt);
        } else {
            check_damaged_segment(&flipped, &original, &format!("byte {i} ^ {flip_with:#04x}"));
        }
        let mut longer = bytes.to_vec();
        longer.extend_from_slice(&garbage);
        check_damaged_segment(&longer, &original, "garbage appended");
    }

    #[test]
    fn damaged_manifests_never_panic(
        data in manifest_data(),
        flip_at in any::<prop::sample::Index>(),
        flip_with in 1u8..=255,
        garbage in prop::collection::vec(any::<u8>(), 1..30),
    ) {
        let bytes = encode_manifest(&data).unwrap();
        for len in 0..bytes.len() {
            check_damaged_manifest(&bytes[..len], &data, &format!("truncated to {len}"));
        }
        let i = flip_at.index(bytes.len());
        let mut flipped = bytes.to_vec();
        flipped[i] ^= flip_with;
        if data.version == ManifestVersion::V4 && flip_with.count_ones() == 1 {
            let err = decode_manifest(&flipped).unwrap_err();
            prop_assert_eq!(err.kind(), ErrorKind::Corrupt);
        } else {
            check_damaged_manifest(&flipped, &data, &format!("byte {i} ^ {flip_with:#04x}"));
        }
        let mut longer = bytes.to_vec();
        longer.extend_from_slice(&garbage);
        check_damaged_manifest(&longer, &data, "garbage appended");
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        expect_corrupt(&decode_segment(Bytes::from(bytes.clone())), "segment");
        expect_corrupt(&decode_manifest(&bytes), "manifest");
    }
}

// ---------- the in-memory manifest against a model ----------

#[derive(Debug, Clone)]
enum Op {
    Append(u32, String),
    Truncate(u64),
    BumpEpoch,
    Snapshot(Option<(String, u64)>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1u32..20, "[a-z]{1,8}").prop_map(|(n, l)| Op::Append(n, l)),
        1 => (0u64..120).prop_map(Op::Truncate),
        1 => Just(Op::BumpEpoch),
        1 => prop::option::of(("[a-z]{1,8}", 0u64..100)).prop_map(Op::Snapshot),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn manifest_operations_match_a_plain_model(
        version in manifest_version(),
        ops in prop::collection::vec(op(), 0..40),
        probe in 0u64..150,
    ) {
        let mut m = Manifest::new(version);
        let mut model = ManifestData::empty(version);
        for op in ops {
            match op {
                Op::Append(n, location) => {
                    let seq = m.append(location.clone(), vec![], n as usize).unwrap();
                    prop_assert_eq!(seq, model.next_sequence);
                    let count = version.has_record_counts().then_some(n);
                    model.entries.push(ManifestEntry { sequence: seq, count, location, metadata: vec![] });
                    model.next_sequence += if count.is_some() { u64::from(n) } else { 1 };
                }
                Op::Truncate(through) => {
                    let before = model.entries.len();
                    model.entries.retain(|e| e.end_sequence() - 1 > through);
                    prop_assert_eq!(m.truncate_through(through), before - model.entries.len());
                }
                Op::BumpEpoch => {
                    model.epoch += 1;
                    prop_assert_eq!(m.bump_epoch().unwrap(), model.epoch);
                }
                Op::Snapshot(s) => {
                    let s = s.map(|(location, through_seq)| SnapshotPointer { location, through_seq, created_ms: 1 });
                    let r = m.set_snapshot(s.clone());
                    if version == ManifestVersion::V1 && s.is_some() {
                        prop_assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidInput);
                    } else {
                        r.unwrap();
                        model.snapshot = s;
                    }
                }
            }
            prop_assert_eq!(m.to_bytes().unwrap(), encode_manifest(&model).unwrap());
        }
        prop_assert_eq!(m.to_data(), model.clone());
        // entries_from: exactly the entries that end after the probe.
        let want: Vec<&ManifestEntry> = model.entries.iter().filter(|e| e.end_sequence() > probe).collect();
        let got: Vec<&ManifestEntry> = m.entries_from(probe).iter().collect();
        prop_assert_eq!(got, want);
        match m.locate(probe) {
            Some((e, off)) => {
                prop_assert!(e.contains(probe));
                let expect_off = if version.has_record_counts() { probe - e.sequence } else { 0 };
                prop_assert_eq!(off, expect_off);
            }
            None => prop_assert!(model.entries.iter().all(|e| !e.contains(probe))),
        }
    }
}
