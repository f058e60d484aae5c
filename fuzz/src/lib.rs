//! The bodies of weft's fuzz targets, kept apart from the libFuzzer entry
//! points so that `cargo test -p weft --test fuzz_corpus` runs the very same
//! checks over the committed corpus without nightly or libFuzzer.
//!
//! Each body decodes arbitrary bytes; on success it re-encodes the value,
//! decodes that again and requires the same value back. Any panic, and any
//! error that is not Corrupt, is a finding.

use bytes::Bytes;
use weft::ErrorKind;
use weft::format::{
    decode_manifest, decode_segment, decode_segment_with_limit, encode_manifest, encode_segment,
};
use weft::wal::Manifest;

/// Decompression limit while fuzzing: small, so that zstd bombs cost
/// little time; the limit logic itself is what gets exercised.
pub const FUZZ_MAX_BLOCK_LEN: usize = 1 << 20;

/// Fuzz body for segment decoding. Returns whether `data` decoded.
pub fn segment_decode(data: &[u8]) -> bool {
    let seg = match decode_segment_with_limit(Bytes::copy_from_slice(data), FUZZ_MAX_BLOCK_LEN) {
        Ok(seg) => seg,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            return false;
        }
    };
    assert_eq!(seg.records.len(), seg.record_count());
    let again = encode_segment(&seg.records, seg.compression, seg.version)
        .expect("a decoded segment must re-encode");
    let back = decode_segment(again).expect("a re-encoded segment must decode");
    assert_eq!(back, seg);
    true
}

/// Fuzz body for manifest decoding. Returns whether `data` decoded.
pub fn manifest_decode(data: &[u8]) -> bool {
    let m = match decode_manifest(data) {
        Ok(m) => m,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            assert!(Manifest::from_bytes(data).is_err());
            return false;
        }
    };
    let again = encode_manifest(&m).expect("a decoded manifest must re-encode");
    let back = decode_manifest(&again).expect("a re-encoded manifest must decode");
    assert_eq!(back, m);
    // The in-memory manifest agrees with the whole-object encoder.
    let mem = Manifest::from_bytes(data).expect("the in-memory manifest must load it too");
    assert_eq!(mem.to_data(), m);
    assert_eq!(
        mem.to_bytes().expect("a loaded manifest must serialize"),
        again
    );
    true
}
