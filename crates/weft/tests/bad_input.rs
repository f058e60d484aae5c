//! Regression cases: every public entry point given malformed arguments or
//! bytes returns a typed error (and writes nothing). New cases found
//! anywhere go here.

use bytes::Bytes;
use weft::format::{decode_manifest, decode_segment};
use weft::wal::cursor::decode_cursor;
use weft::{AppendRequest, ErrorKind, Log, LogTag, Position};

fn kind<T: std::fmt::Debug>(r: weft::Result<T>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

#[test]
fn malformed_tags_are_invalid_input() {
    let long = "n".repeat(300);
    for text in ["", ":key", "ns:", "a\tb", "\u{7f}", long.as_str()] {
        assert_eq!(
            kind(text.parse::<LogTag>()),
            ErrorKind::InvalidInput,
            "{text:?}"
        );
    }
    assert_eq!(kind(LogTag::with_key("ns", "k\n")), ErrorKind::InvalidInput);
    assert_eq!(kind(LogTag::new("a:b")), ErrorKind::InvalidInput);
}

#[test]
fn garbage_bytes_are_corrupt_for_every_decoder() {
    let inputs: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        vec![0xff; 7],
        vec![0xff; 26],
        b"definitely not a weft object".to_vec(),
        vec![0; 64],
    ];
    for input in &inputs {
        assert_eq!(
            kind(decode_segment(Bytes::from(input.clone()))),
            ErrorKind::Corrupt,
            "segment {input:?}"
        );
        assert_eq!(
            kind(decode_manifest(input)),
            ErrorKind::Corrupt,
            "manifest {input:?}"
        );
        assert_eq!(
            kind(decode_cursor(input)),
            ErrorKind::Corrupt,
            "cursor {input:?}"
        );
    }
}

#[tokio::test]
async fn malformed_log_calls_are_typed_errors_and_write_nothing() {
    let log = Log::memory();
    let t: LogTag = "t".parse().unwrap();
    assert_eq!(
        kind(log.append_batch(vec![]).await),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(log.append(AppendRequest::with_tags(vec![], "x")).await),
        ErrorKind::InvalidInput
    );
    let too_many: Vec<LogTag> = (0..65).map(|i| format!("t{i}").parse().unwrap()).collect();
    assert_eq!(
        kind(log.append(AppendRequest::with_tags(too_many, "x")).await),
        ErrorKind::InvalidInput
    );
    assert_eq!(kind(log.trim(0).await), ErrorKind::InvalidInput);
    assert_eq!(log.latest_seqnum(), None);
    log.append(AppendRequest::new(t.clone(), "x"))
        .await
        .unwrap();
    // Reading past the end is not an error: there is simply nothing there.
    assert!(
        log.read_from(&t, Position::At(u64::MAX), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(log.read_after(&t, u64::MAX).await.unwrap().is_empty());
    assert!(
        log.read_after_version(&t, u64::MAX)
            .await
            .unwrap()
            .is_empty()
    );
    let kv = log.kv(t.clone()).unwrap();
    let long_key = "k".repeat(256);
    for key in ["", "a\nb", long_key.as_str()] {
        assert_eq!(
            kind(kv.set(key, "v").await),
            ErrorKind::InvalidInput,
            "{key:?}"
        );
        assert_eq!(kind(kv.get(key).await), ErrorKind::InvalidInput, "{key:?}");
    }
    assert_eq!(
        kind(kv.set("big", vec![0u8; (1 << 20) + 1]).await),
        ErrorKind::InvalidInput
    );
    kv.set("text", "abc").await.unwrap();
    assert_eq!(kind(kv.increment("text", 1).await), ErrorKind::InvalidInput);
    kv.set("max", weft::kv::encode_counter(i64::MAX))
        .await
        .unwrap();
    assert_eq!(kind(kv.increment("max", 1).await), ErrorKind::InvalidInput);
    assert_eq!(log.latest_seqnum(), Some(0));
}
