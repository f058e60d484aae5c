//! The bodies of weft's fuzz targets, kept apart from the libFuzzer entry
//! points so that `cargo test -p weft --test local fuzz_corpus::` runs the very same
//! checks over the committed corpus without nightly or libFuzzer.
//!
//! Each body decodes arbitrary bytes; on success it re-encodes the value,
//! decodes that again and requires the same value back. Any panic, and any
//! error that is not Corrupt, is a finding.

use bytes::Bytes;
use weft::format::bucket_kv::{KvObject, MAX_WRITERS, WRITER_TOKEN_LEN};
use weft::format::dir_kv::{decode_kv_bucket, encode_kv_bucket};
use weft::format::dir_segment::SegmentHeader;
use weft::format::frame::{self, FrameError};
use weft::format::replica_cursor::{decode_cursor, encode_cursor};
use weft::format::trim_point::TrimPoint;
use weft::format::{
    decode_kv_object, decode_lease, decode_log_state, decode_manifest, decode_page, decode_segment,
    decode_segment_with_limit, decode_state_checkpoint, encode_kv_object, encode_lease,
    encode_log_state, encode_manifest, encode_page, encode_segment, encode_state_checkpoint,
};
use weft::wal::Manifest;
use weft::{Error, ErrorKind};

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

/// Fuzz body for a v5 manifest's history pages. Returns whether `data`
/// decoded.
pub fn history_page_decode(data: &[u8]) -> bool {
    let page = match decode_page(data) {
        Ok(page) => page,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            return false;
        }
    };
    assert!(page.range().is_some(), "a decoded page has items");
    let again = encode_page(&page).expect("a decoded page must re-encode");
    // The layout has one spelling per page.
    assert_eq!(&again[..], data);
    true
}

/// Fuzz body for the entry frame (the `dir` backend's unit on disk, and
/// each record of a bucket log). Returns whether `data` starts with a
/// valid frame.
///
/// A frame that decodes must re-encode to exactly its own bytes (the
/// layout has one spelling per entry), and an error must be `Corrupt` once
/// converted; `Incomplete` must name more bytes than were given.
pub fn frame_decode(data: &[u8]) -> bool {
    let f = match frame::decode(data) {
        Ok(f) => f,
        Err(FrameError::Incomplete { needed }) => {
            assert!(
                needed > data.len(),
                "incomplete, yet {needed} <= {}",
                data.len()
            );
            assert_eq!(
                Error::from(FrameError::Incomplete { needed }).kind(),
                ErrorKind::Corrupt
            );
            return false;
        }
        Err(e) => {
            assert_eq!(Error::from(e).kind(), ErrorKind::Corrupt);
            return false;
        }
    };
    assert!(f.frame_len <= data.len());
    assert_eq!(frame::claimed_len(data), Some(f.frame_len));
    let entry = f.to_entry();
    assert_eq!(&entry.data[..], f.data);
    // An erased frame is its original with the data zeroed: re-encode it
    // with that many zeros and erase it again.
    let padding = if f.meta.erased {
        assert!(entry.data.is_empty(), "an erased frame has no payload");
        f.frame_len - frame::encoded_len_with_id(&entry.tags, f.append_id, 0)
    } else {
        0
    };
    let mut original = entry.clone();
    if f.meta.erased {
        original.data = vec![0u8; padding].into();
    }
    let mut again = Vec::new();
    frame::encode_with_id(
        &mut again,
        &original,
        f.append_id,
        f.meta.group_offset,
        f.meta.batch_end,
    )
    .expect("a decoded frame must re-encode");
    if f.meta.erased {
        assert!(frame::erase_in_place(&mut again).expect("erase a re-encoded frame"));
    }
    assert_eq!(again, &data[..f.frame_len], "re-encoding changed the bytes");
    assert_eq!(
        again.len(),
        frame::encoded_len_with_id(&entry.tags, f.append_id, original.data.len())
    );
    let back = frame::decode(&again).expect("a re-encoded frame must decode");
    assert_eq!(back.to_entry(), entry);
    assert_eq!(back.meta, f.meta);
    assert_eq!(back.append_id, f.append_id);
    // Erasing is idempotent and keeps the frame's place.
    let mut erased = again.clone();
    frame::erase_in_place(&mut erased).expect("a decoded frame can be erased");
    let e = frame::decode(&erased).expect("an erased frame decodes");
    assert!(e.meta.erased && e.data.is_empty());
    assert_eq!((e.frame_len, e.append_id), (f.frame_len, f.append_id));
    assert_eq!(e.tags, f.tags);
    true
}

/// Fuzz body for a replica's saved cursor. Returns whether `data` decoded;
/// a decoded cursor must re-encode to exactly `data`.
pub fn cursor_decode(data: &[u8]) -> bool {
    match decode_cursor(data) {
        Ok(c) => {
            assert_eq!(&encode_cursor(c)[..], data, "re-encoding changed the bytes");
            true
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            false
        }
    }
}

/// Fuzz body for a `dir` segment header. Returns whether `data` starts
/// with a valid header; a decoded header must re-encode to exactly the
/// bytes it was read from.
pub fn dir_segment_header_decode(data: &[u8]) -> bool {
    match SegmentHeader::decode(data) {
        Ok(h) => {
            let again = h.encode();
            assert_eq!(
                &again[..],
                &data[..again.len()],
                "re-encoding changed the bytes"
            );
            true
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            false
        }
    }
}

/// Fuzz body for the `dir` trim file. Returns whether `data` decoded; a
/// decoded trim point must re-encode to exactly `data`, except that a
/// version 1 file is written back as version 2 (the same fields, so only
/// the version byte and the checksum differ).
pub fn trim_point_decode(data: &[u8]) -> bool {
    match TrimPoint::decode(data) {
        Ok(t) => {
            let encoded = t.encode();
            if data.get(4) == Some(&1) {
                assert_eq!(encoded.len(), data.len(), "re-encoding changed the length");
                assert_eq!(encoded[4], 2, "a version 1 file re-encodes as version 2");
                let body = 5..data.len() - 4;
                assert_eq!(encoded[..4], data[..4], "re-encoding changed the magic");
                assert_eq!(
                    encoded[body.clone()],
                    data[body],
                    "re-encoding changed the fields"
                );
            } else {
                assert_eq!(encoded, data, "re-encoding changed the bytes");
            }
            true
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            false
        }
    }
}

/// Fuzz body for a `dir` KV bucket file. Returns whether `data` decoded; a
/// decoded bucket must re-encode to exactly `data`.
pub fn kv_bucket_decode(data: &[u8]) -> bool {
    match decode_kv_bucket(data) {
        Ok(b) => {
            assert_eq!(encode_kv_bucket(&b), data, "re-encoding changed the bytes");
            true
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            false
        }
    }
}

/// Fuzz body for a bucket log's log-state snapshot (`WLS1`). Returns
/// whether `data` decoded; a decoded state must re-encode to exactly
/// `data` (tags sorted and unique: one spelling per state).
pub fn log_state_decode(data: &[u8]) -> bool {
    match decode_log_state(data) {
        Ok(s) => {
            let again = encode_log_state(&s).expect("a decoded log state must re-encode");
            assert_eq!(&again[..], data, "re-encoding changed the bytes");
            let back = decode_log_state(&again).expect("a re-encoded log state must decode");
            assert_eq!(back, s);
            true
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            false
        }
    }
}

/// Fuzz body for a bucket log's stream-state checkpoint (`WSC1`, a log
/// state inside). Returns whether `data` decoded; a decoded checkpoint
/// must re-encode to exactly `data`.
pub fn state_checkpoint_decode(data: &[u8]) -> bool {
    match decode_state_checkpoint(data) {
        Ok(c) => {
            let again =
                encode_state_checkpoint(&c).expect("a decoded state checkpoint must re-encode");
            assert_eq!(&again[..], data, "re-encoding changed the bytes");
            let back =
                decode_state_checkpoint(&again).expect("a re-encoded state checkpoint must decode");
            assert_eq!(back, c);
            true
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            false
        }
    }
}

/// Fuzz body for one key of a bucket log's KV (`WKV1`, `WKV2`). Returns
/// whether `data` decoded. A v2 object must re-encode to exactly `data`; a
/// v1 object (no writer tokens, so weft cannot write it back as v1) must
/// hold the bytes after its flag as its value, and written as v2 with a
/// token it must read back with the same value.
pub fn kv_object_decode(data: &[u8]) -> bool {
    let o = match decode_kv_object(Bytes::copy_from_slice(data)) {
        Ok(o) => o,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            return false;
        }
    };
    if data.starts_with(b"WKV1") {
        assert!(o.writers.is_empty() && !o.complete, "{o:?}");
        match &o.value {
            Some(v) => assert_eq!(&v[..], &data[5..]),
            None => assert_eq!(data.len(), 5),
        }
        let v2 = KvObject {
            writers: vec![[7; WRITER_TOKEN_LEN]],
            ..o.clone()
        };
        let again = encode_kv_object(&v2).expect("a v1 object must re-encode as v2");
        let back = decode_kv_object(again).expect("a re-encoded KV object must decode");
        assert_eq!(back, v2);
    } else {
        assert!(!o.writers.is_empty() && o.writers.len() <= MAX_WRITERS);
        let again = encode_kv_object(&o).expect("a decoded v2 object must re-encode");
        assert_eq!(&again[..], data, "re-encoding changed the bytes");
        let back = decode_kv_object(again).expect("a re-encoded KV object must decode");
        assert_eq!(back, o);
    }
    true
}

/// Fuzz body for a bucket log's writer lease (JSON). Returns whether
/// `data` decoded. JSON has many spellings of one value, so the check is
/// on values: the re-encoded lease must decode to the same lease, and
/// encoding that again must give the same bytes.
pub fn writer_lease_decode(data: &[u8]) -> bool {
    let lease = match decode_lease(data) {
        Ok(lease) => lease,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            return false;
        }
    };
    let again = encode_lease(&lease).expect("a decoded lease must re-encode");
    let back = decode_lease(&again).expect("a re-encoded lease must decode");
    assert_eq!(back, lease);
    assert_eq!(
        encode_lease(&back).expect("a decoded lease must re-encode"),
        again,
        "encoding one lease gave two spellings"
    );
    true
}

/// The persistent log index's decoders, in the order of the selector byte
/// [`index_decode`] reads.
pub const INDEX_DECODERS: &[&str] = &[
    "tag key",
    "tag row",
    "chunk",
    "pair key",
    "seqnum key",
    "tip value",
    "u64 value",
];

/// Fuzz body for the keys and values of the persistent log index: the
/// first byte (modulo the length of [`INDEX_DECODERS`]) picks the decoder,
/// the rest is its input. Returns whether the input decoded; a decoded key
/// or value must re-encode to exactly the input, except that a chunk may
/// spell a gap with padding (a varint with trailing zero groups), which
/// the decoder accepts and the encoder never writes.
pub fn index_decode(data: &[u8]) -> bool {
    use weft::format::index_rows as index;

    let Some((&selector, input)) = data.split_first() else {
        return false;
    };
    let decoded = match usize::from(selector) % INDEX_DECODERS.len() {
        0 => index::decode_tag_key(input).map(|tag| {
            assert_eq!(index::tag_key(&tag), input, "re-encoding changed the bytes");
        }),
        1 => index::TagRow::decode(input).map(|row| {
            assert!(row.floor <= row.next_version, "{row:?}");
            assert_eq!(row.encode(), input, "re-encoding changed the bytes");
        }),
        2 => index::decode_chunk(input).map(|seqnums| {
            assert!(!seqnums.is_empty() && seqnums.len() <= index::CHUNK_MAX);
            assert!(seqnums.windows(2).all(|w| w[0] < w[1]), "{seqnums:?}");
            let again = index::encode_chunk(&seqnums).expect("a decoded chunk must re-encode");
            if again != input {
                assert!(chunk_has_padded_gap(input), "re-encoding changed the bytes");
                assert!(again.len() < input.len());
                assert_eq!(again[..12], input[..12], "re-encoding changed the header");
            }
            let back = index::decode_chunk(&again).expect("a re-encoded chunk must decode");
            assert_eq!(back, seqnums);
        }),
        3 => index::decode_pair_key(input).map(|(a, b)| {
            assert_eq!(
                index::pair_key(a, b),
                input,
                "re-encoding changed the bytes"
            );
        }),
        4 => index::decode_seqnum_key(input).map(|s| {
            assert_eq!(index::seqnum_key(s), input, "re-encoding changed the bytes");
        }),
        5 => index::decode_tip_value(input).map(|(s, check)| {
            assert_eq!(
                index::tip_value(s, check),
                input,
                "re-encoding changed the bytes"
            );
        }),
        _ => index::decode_u64_value(input, "fuzz").map(|v| {
            assert_eq!(index::u64_value(v), input, "re-encoding changed the bytes");
        }),
    };
    match decoded {
        Ok(()) => true,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            false
        }
    }
}

/// Whether a chunk that decoded spells some gap with more varint bytes
/// than it needs (its last byte zero after a continuation).
fn chunk_has_padded_gap(chunk: &[u8]) -> bool {
    let mut previous_continued = false;
    for &byte in &chunk[12..] {
        if byte == 0 && previous_continued {
            return true;
        }
        previous_continued = byte & 0x80 != 0;
    }
    false
}

/// The variables [`connect_settings`] assigns values to, in input order:
/// those the settings read. Left out on purpose: `AZURE_USE_AZURE_CLI`
/// (would start the `az` program) and `AZURE_FEDERATED_TOKEN_FILE` (would
/// read an arbitrary file); they are passed to object_store untouched.
pub const SETTINGS_ENV_KEYS: &[&str] = &[
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ALLOW_HTTP",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ENDPOINT",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_TOKEN",
    "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_TENANT_ID",
    "AZURE_ALLOW_HTTP",
    "AZURE_STORAGE_USE_EMULATOR",
    "AZURITE_BLOB_STORAGE_URL",
    "AZURE_AUTHORITY_HOST",
    "AZURE_MSI_ENDPOINT",
    "AZURE_OBJECT_ID",
    "AZURE_MSI_RESOURCE_ID",
];

/// Fuzz body for configuration: `data` is a location and then one value
/// per [`SETTINGS_ENV_KEYS`] entry, separated by NUL bytes (lossy UTF-8).
/// Returns whether a store was built (and its request refused offline).
pub fn connect_settings(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\0');
    let location = parts.next().unwrap_or_default();
    let env: Vec<(&str, &str)> = SETTINGS_ENV_KEYS.iter().copied().zip(parts).collect();
    check_settings(location, &env)
}

/// Parses `location`, reads settings for it from `env` and, when they are
/// accepted, builds the store on an HTTP client that answers nothing and
/// sends it one request, which signs it: nothing may panic on the way,
/// and every refusal must be a typed error (`InvalidInput` for what the
/// user passed). Returns whether a store was built.
pub fn check_settings(location: &str, env: &[(&str, &str)]) -> bool {
    use weft::connect::{AzureSettings, Location, S3Settings};

    let lookup = |key: &str| {
        env.iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.to_string())
    };
    let invalid = |e: Error| {
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        false
    };
    let (built, prefix) = match Location::parse(location) {
        Err(e) => return invalid(e),
        Ok(Location::S3 { bucket, prefix }) => {
            let mut s = match S3Settings::from_lookup(bucket, prefix.clone(), lookup) {
                Ok(s) => s,
                Err(e) => return invalid(e),
            };
            s.http_retries = Some(0);
            match s.to_builder() {
                Ok(b) => (
                    b.with_http_connector(offline::Offline).build().map(arc),
                    prefix,
                ),
                Err(e) => return invalid(e),
            }
        }
        Ok(Location::Azure { container, prefix }) => {
            let mut s = match AzureSettings::from_lookup(container, prefix.clone(), lookup) {
                Ok(s) => s,
                Err(e) => return invalid(e),
            };
            s.http_retries = Some(0);
            match s.to_builder() {
                Ok(b) => (
                    b.with_http_connector(offline::Offline).build().map(arc),
                    prefix,
                ),
                Err(e) => return invalid(e),
            }
        }
        // Local paths: nothing is parsed further without touching the disk.
        Ok(_) => return false,
    };
    // object_store may still refuse a value it checks itself (an account
    // key that is not base64); `build` reports that as InvalidInput.
    let Ok(store) = built else {
        return false;
    };
    let store = weft::objects::with_prefix(store, &prefix);
    let path = object_store::path::Path::from("manifest");
    let got = offline::runtime().block_on(store.head(&path));
    assert!(got.is_err(), "the offline client answered");
    true
}

fn arc<S: object_store::ObjectStore>(store: S) -> std::sync::Arc<dyn object_store::ObjectStore> {
    std::sync::Arc::new(store)
}

/// An HTTP client for object_store that sends nothing: every request
/// fails as a refused connection, after object_store has signed it.
pub mod offline {
    use std::sync::OnceLock;

    use object_store::ClientOptions;
    use object_store::client::{
        HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
    };

    /// Connects every store to [`Refuse`].
    #[derive(Debug, Default, Clone, Copy)]
    pub struct Offline;

    impl HttpConnector for Offline {
        fn connect(&self, _: &ClientOptions) -> object_store::Result<HttpClient> {
            Ok(HttpClient::new(Refuse))
        }
    }

    /// Refuses every request.
    #[derive(Debug, Default, Clone, Copy)]
    pub struct Refuse;

    #[async_trait::async_trait]
    impl HttpService for Refuse {
        async fn call(&self, _: HttpRequest) -> Result<HttpResponse, HttpError> {
            Err(HttpError::new(
                HttpErrorKind::Connect,
                std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
            ))
        }
    }

    /// One single-threaded runtime for all inputs (object_store's client
    /// needs tokio's timer).
    pub fn runtime() -> &'static tokio::runtime::Runtime {
        static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
        RUNTIME.get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime")
        })
    }
}
