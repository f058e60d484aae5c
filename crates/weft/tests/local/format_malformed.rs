//! One hand-built malformed object per rule the decoders enforce, each of
//! which must be refused as Corrupt (and the encoders' InvalidInput cases).

use crate::support::common;

use bytes::Bytes;
use common::{Le, entry, entry_body, footer, segment_block, segment_footer, snapshot_block};
use weft::ErrorKind;
use weft::format::{
    Compression, ManifestData, ManifestEntry, ManifestVersion, SegmentVersion, decode_manifest,
    decode_segment, encode_manifest, encode_segment,
};

fn corrupt_manifest(bytes: &[u8], why: &str) {
    match decode_manifest(bytes) {
        Ok(m) => panic!("{why}: decoded as {m:?}"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{why}: {e}"),
    }
}

fn corrupt_segment(bytes: Vec<u8>, why: &str) {
    match decode_segment(Bytes::from(bytes)) {
        Ok(s) => panic!("{why}: decoded as {s:?}"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{why}: {e}"),
    }
}

/// A valid two-entry manifest of `version`, optionally with a snapshot.
fn valid(version: u16, snapshot: bool) -> Vec<u8> {
    let count = |n| (version >= 3).then_some(n);
    let mut b = Le::default();
    entry(&mut b, 0, count(2), "a", &[(0, 1, b"x")]);
    entry(&mut b, if version >= 3 { 2 } else { 1 }, count(3), "b", &[]);
    if version >= 2 {
        if snapshot {
            snapshot_block(&mut b, "snap", 1, 2);
        } else {
            b.raw(&[0; 18]);
        }
    }
    footer(&mut b, 2, if version >= 3 { 5 } else { 2 }, 9, version);
    b.0
}

#[test]
fn the_baselines_are_valid() {
    for v in 1..=4 {
        decode_manifest(&valid(v, false)).unwrap();
        if v >= 2 {
            let m = decode_manifest(&valid(v, true)).unwrap();
            assert_eq!(m.snapshot.unwrap().location, "snap");
        }
    }
}

#[test]
fn short_objects_and_unknown_versions() {
    corrupt_manifest(&[], "empty");
    corrupt_manifest(&[1], "one byte");
    corrupt_manifest(&[1, 0], "version only");
    corrupt_manifest(&[0u8; 25][..], "v0 footer");
    let mut b = valid(2, false);
    let n = b.len();
    b[n - 2] = 5;
    corrupt_manifest(&b, "version 5");
    b[n - 2] = 0;
    corrupt_manifest(&b, "version 0");
    // A v4 version word on a 22-byte v1-style footer is too short for v4.
    let mut b = Le::default();
    footer(&mut b, 0, 0, 0, 1);
    let mut bytes = b.0;
    bytes[20] = 4;
    corrupt_manifest(&bytes, "v4 marker on a 22-byte object");
}

#[test]
fn bad_v4_checksum() {
    let mut b = valid(4, true);
    let n = b.len();
    b[n - 3] ^= 0x80;
    corrupt_manifest(&b, "crc byte flipped");
    let mut b = valid(4, true);
    b[0] ^= 1;
    corrupt_manifest(&b, "body byte flipped");
}

#[test]
fn entry_counts_that_do_not_add_up() {
    for v in 1..=4u16 {
        let b = valid(v, v >= 2);
        let footer_at = b.len() - if v == 4 { 26 } else { 22 };
        for count in [0u32, 1, 3, u32::MAX] {
            let mut d = b.clone();
            d[footer_at..footer_at + 4].copy_from_slice(&count.to_le_bytes());
            if v == 4 {
                // Re-seal so the checksum is not what rejects it.
                let n = d.len();
                let crc = crc32c::crc32c(&d[..n - 6]);
                d[n - 6..n - 2].copy_from_slice(&crc.to_le_bytes());
            }
            corrupt_manifest(&d, &format!("v{v} entries_count {count}"));
        }
    }
}

#[test]
fn body_len_mismatch() {
    for v in [1u16, 3] {
        let count = (v >= 3).then_some(2);
        let body = entry_body(0, count, b"loc", &[(0, 1, b"pay")]);
        for delta in [-1i64, 1, 1000] {
            let mut b = Le::default();
            b.u32((body.len() as i64 + delta) as u32).raw(&body);
            if v >= 2 {
                b.raw(&[0; 18]);
            }
            footer(&mut b, 1, 2, 0, v);
            corrupt_manifest(&b.0, &format!("v{v} body_len off by {delta}"));
        }
    }
}

#[test]
fn metadata_overruns_and_huge_counts() {
    // md_count claims more items than the body holds.
    let mut body = entry_body(0, None, b"l", &[]);
    let n = body.len();
    body[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut b = Le::default();
    b.u32(body.len() as u32).raw(&body);
    footer(&mut b, 1, 1, 0, 1);
    corrupt_manifest(&b.0, "md_count u32::MAX");
    // A payload length running past the body.
    let mut body = entry_body(0, None, b"l", &[(0, 0, b"abc")]);
    let n = body.len();
    body[n - 7..n - 3].copy_from_slice(&4u32.to_le_bytes());
    let mut b = Le::default();
    b.u32(body.len() as u32).raw(&body);
    footer(&mut b, 1, 1, 0, 1);
    corrupt_manifest(&b.0, "payload_len past the body");
    // A location length running past the body.
    let mut body = entry_body(0, None, b"l", &[]);
    body[8..10].copy_from_slice(&200u16.to_le_bytes());
    let mut b = Le::default();
    b.u32(body.len() as u32).raw(&body);
    footer(&mut b, 1, 1, 0, 1);
    corrupt_manifest(&b.0, "loc_len past the body");
}

#[test]
fn non_utf8_locations() {
    let mut b = Le::default();
    let body = entry_body(0, None, &[0x66, 0xff, 0x6f], &[]);
    b.u32(body.len() as u32).raw(&body);
    footer(&mut b, 1, 1, 0, 1);
    corrupt_manifest(&b.0, "entry location 66 ff 6f");

    let mut b = Le::default();
    b.raw(&[0xc3]).u16(1).u64(0).i64(0);
    footer(&mut b, 0, 0, 0, 2);
    corrupt_manifest(&b.0, "snapshot location c3");
}

#[test]
fn snapshot_region_must_be_exactly_one_block() {
    for v in 2..=3u16 {
        let b = valid(v, true);
        let footer_at = b.len() - 22;
        // One stray byte between the last entry and the block.
        let mut d = b[..footer_at - 22].to_vec();
        d.push(0);
        d.extend_from_slice(&b[footer_at - 22..]);
        corrupt_manifest(&d, &format!("v{v} stray byte before the block"));
        // loc_len says more or less than the region holds.
        for loc_len in [0u16, 3, 5, 400] {
            let mut d = b.clone();
            let at = footer_at - 18;
            d[at..at + 2].copy_from_slice(&loc_len.to_le_bytes());
            corrupt_manifest(&d, &format!("v{v} snapshot loc_len {loc_len}"));
        }
        // A region too short to be a block.
        let mut d = b[..footer_at - 22].to_vec();
        d.extend_from_slice(&[0; 5]);
        d.extend_from_slice(&b[footer_at..]);
        corrupt_manifest(&d, &format!("v{v} 5-byte snapshot region"));
    }
    // v1 has no snapshot block: any bytes there are stray.
    let b = valid(1, false);
    let footer_at = b.len() - 22;
    let mut d = b[..footer_at].to_vec();
    d.extend_from_slice(&[0; 18]);
    d.extend_from_slice(&b[footer_at..]);
    corrupt_manifest(&d, "v1 with a zero snapshot block");
}

#[test]
fn sequence_order_and_overflow() {
    let build = |v: u16, entries: &[(u64, Option<u32>)], next: u64| {
        let mut b = Le::default();
        for (i, (seq, count)) in entries.iter().enumerate() {
            entry(&mut b, *seq, *count, &format!("s{i}"), &[]);
        }
        if v >= 2 {
            b.raw(&[0; 18]);
        }
        footer(&mut b, entries.len() as u32, next, 0, v);
        b.0
    };
    corrupt_manifest(&build(1, &[(1, None), (0, None)], 2), "v1 decreasing");
    corrupt_manifest(&build(2, &[(1, None), (1, None)], 2), "v2 repeated");
    corrupt_manifest(
        &build(2, &[(0, None), (1, None)], 1),
        "v2 past next_sequence",
    );
    corrupt_manifest(
        &build(1, &[(u64::MAX, None)], u64::MAX),
        "v1 ordinal u64::MAX",
    );
    corrupt_manifest(&build(3, &[(0, Some(5)), (4, Some(1))], 9), "v3 overlap");
    corrupt_manifest(&build(3, &[(0, Some(5))], 4), "v3 past next_sequence");
    corrupt_manifest(
        &build(4, &[(u64::MAX - 2, Some(5))], u64::MAX),
        "v4 sequence + count overflows",
    );
    corrupt_manifest(
        &build(3, &[(3, Some(0)), (3, Some(2))], 9),
        "v3 legacy slot reused",
    );
    // The valid neighbours of those.
    decode_manifest(&build(3, &[(0, Some(5)), (5, Some(1))], 6)).unwrap();
    decode_manifest(&build(3, &[(0, Some(0)), (1, Some(2)), (7, Some(1))], 9)).unwrap();
    decode_manifest(&build(4, &[(u64::MAX - 5, Some(5))], u64::MAX)).unwrap();
}

#[test]
fn metadata_order_and_range() {
    let build = |count: Option<u32>, starts: &[u32], v: u16| {
        let md: Vec<(u32, i64, &[u8])> = starts.iter().map(|s| (*s, 0, &b""[..])).collect();
        let mut b = Le::default();
        entry(&mut b, 0, count, "s", &md);
        if v >= 2 {
            b.raw(&[0; 18]);
        }
        footer(&mut b, 1, 100, 0, v);
        b.0
    };
    corrupt_manifest(&build(None, &[2, 1], 1), "start_index decreasing");
    corrupt_manifest(&build(Some(3), &[0, 4], 3), "start_index beyond count");
    decode_manifest(&build(Some(3), &[0, 3, 3], 3)).unwrap();
    decode_manifest(&build(None, &[0, 0, 7], 1)).unwrap();
}

#[test]
fn segment_rules() {
    let records: [&[u8]; 2] = [b"ab", b"c"];
    let good = |version: u16, count: u32, block: &[u8], compression: u8| {
        let mut b = Le::default();
        b.raw(block);
        segment_footer(&mut b, compression, count, version);
        b.0
    };
    let block = segment_block(&records);
    decode_segment(Bytes::from(good(1, 2, &block, 0))).unwrap();
    decode_segment(Bytes::from(good(2, 2, &block, 0))).unwrap();

    for v in [1u16, 2] {
        corrupt_segment(good(v, 1, &block, 0), "count too low");
        corrupt_segment(good(v, 3, &block, 0), "count too high");
        corrupt_segment(good(v, u32::MAX, &block, 0), "count u32::MAX");
        corrupt_segment(good(v, 2, &block, 2), "compression 2");
        corrupt_segment(good(v, 2, &block, 1), "plain block marked zstd");
        let mut trailing = block.clone();
        trailing.push(0);
        corrupt_segment(good(v, 2, &trailing, 0), "trailing byte");
        let mut overrun = block.clone();
        overrun[6] = 9; // second record claims 9 bytes, 1 present
        corrupt_segment(good(v, 2, &overrun, 0), "record overruns");
        let zstd = zstd::bulk::compress(&block, 3).unwrap();
        decode_segment(Bytes::from(good(v, 2, &zstd, 1))).unwrap();
        let mut zstd_trailing = zstd.clone();
        zstd_trailing.push(0);
        corrupt_segment(good(v, 2, &zstd_trailing, 1), "bytes after the zstd frame");
        let twice = [zstd.clone(), zstd.clone()].concat();
        corrupt_segment(good(v, 4, &twice, 1), "two zstd frames");
        corrupt_segment(
            good(v, 2, &zstd[..zstd.len() - 1], 1),
            "truncated zstd frame",
        );
    }
    for bytes in [vec![], vec![1, 0], vec![0, 0, 0, 0, 0, 1, 0][1..].to_vec()] {
        corrupt_segment(bytes, "too short");
    }
    corrupt_segment(good(3, 0, &[], 0), "version 3");
    let mut bad_crc = good(2, 2, &block, 0);
    let n = bad_crc.len();
    bad_crc[n - 4] ^= 1;
    corrupt_segment(bad_crc, "crc");
}

#[test]
fn encoders_refuse_misuse_as_invalid_input() {
    let mut data = ManifestData::empty(ManifestVersion::V1);
    data.next_sequence = 1;
    data.entries.push(ManifestEntry {
        sequence: 0,
        count: None,
        location: "x".repeat(usize::from(u16::MAX) + 1),
        metadata: vec![],
    });
    assert_eq!(
        encode_manifest(&data).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    data.entries[0].location = "ok".into();
    encode_manifest(&data).unwrap();
    data.entries[0].count = Some(1);
    assert_eq!(
        encode_manifest(&data).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );

    // More than u32::MAX records is refused up front.
    let many = zero_sized_records(u32::MAX as usize + 1);
    let err = encode_segment(&many, Compression::None, SegmentVersion::V2).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

#[derive(Clone, Copy)]
struct Empty;

impl AsRef<[u8]> for Empty {
    fn as_ref(&self) -> &[u8] {
        &[]
    }
}

/// A slice of `n` empty records that costs no memory or time to build.
#[allow(clippy::uninit_vec)]
fn zero_sized_records(n: usize) -> Vec<Empty> {
    let mut v: Vec<Empty> = Vec::new();
    // SAFETY: `Empty` is zero-sized, has no invariants and no Drop, and a
    // Vec of a zero-sized type has unbounded capacity, so every length is
    // in bounds and every "element" is a valid `Empty`.
    unsafe { v.set_len(n) };
    v
}
