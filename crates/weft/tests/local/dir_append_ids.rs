//! Exactly-once appends on the `dir` backend: append ids survive a reopen,
//! are remembered within `DirOptions::append_id_window` and until trimmed,
//! make an `Indeterminate` append safe to retry, and a log written before
//! append ids existed (segment format 1, frames without ids) still reads
//! and takes ids in a new segment.

use crate::support::dir as dir_support;

use bytes::Bytes;
use dir_support::{open, open_with, segments, small_segments, tag};
use weft::format::dir_segment::{SEGMENT_HEADER_LEN, SEGMENT_V1, SEGMENT_V2, SegmentHeader};
use weft::format::frame;
use weft::storage::dir::DirOptions;
use weft::{AppendRequest, ErrorKind, LogEntry, Position};

fn placed(i: u64) -> AppendRequest {
    AppendRequest::new(tag("orders"), format!("placed {i}")).with_id(format!("order-{i}"))
}

fn header_version(path: &std::path::Path) -> u8 {
    let bytes = std::fs::read(path).unwrap();
    SegmentHeader::decode(&bytes[..SEGMENT_HEADER_LEN])
        .unwrap()
        .version
}

#[tokio::test]
async fn ids_are_remembered_across_a_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let first = {
        let (_, log) = open(tmp.path()).await;
        let first = log.append(placed(1)).await.unwrap();
        log.append(AppendRequest::new(tag("orders"), "no id"))
            .await
            .unwrap();
        log.append_if(placed(2), 2).await.unwrap();
        log.close().await.unwrap();
        first
    };
    let (_, log) = open(tmp.path()).await;
    // Entries read from the segment files carry their ids.
    let ids: Vec<Option<String>> = log
        .read_log(Position::Beginning, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.append_id)
        .collect();
    let id = |s: &str| Some(s.to_owned());
    assert_eq!(ids, [id("order-1"), None, id("order-2")]);
    assert_eq!(log.append(placed(1)).await.unwrap(), first);
    // The retried conditional append is stale now, and still answered.
    let again = log.append_if(placed(2), 2).await.unwrap();
    assert_eq!((again.seqnum, again.stream_version), (2, 2));
    assert_eq!(log.tip().await.unwrap().next, 3);
    // Every segment written holds format 2.
    for seg in segments(tmp.path()) {
        assert_eq!(header_version(&seg), SEGMENT_V2);
    }
}

#[tokio::test]
async fn the_window_holds_the_newest_ids_after_a_reopen_too() {
    let tmp = tempfile::tempdir().unwrap();
    let options = DirOptions::default().with_append_id_window(3);
    let (_, log) = open_with(tmp.path(), options.clone()).await;
    for i in 0..5 {
        log.append(placed(i)).await.unwrap();
    }
    log.close().await.unwrap();
    let (_, log) = open_with(tmp.path(), options).await;
    // Ids 2..5 are in the window: answered. Ids 0 and 1 fell out of it,
    // so their retries are appended again (as documented).
    for i in 2..5 {
        assert_eq!(log.append(placed(i)).await.unwrap().seqnum, i);
    }
    assert_eq!(log.tip().await.unwrap().next, 5);
    assert_eq!(log.append(placed(0)).await.unwrap().seqnum, 5);
    // ...and the window moved on: 2 is the oldest id now, and out.
    assert_eq!(log.append(placed(2)).await.unwrap().seqnum, 6);
    assert_eq!(
        DirOptions::default()
            .with_append_id_window(0)
            .validate()
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
}

#[tokio::test]
async fn a_reopen_finds_ids_in_older_segments_than_the_index_covers() {
    // The index covers the whole log after a close, so the open scans
    // nothing and the window comes from walking the newest segments
    // backward: over several segments, past entries without ids, and
    // bounded by the window's size in entries.
    let tmp = tempfile::tempdir().unwrap();
    let options = small_segments().with_append_id_window(40);
    let (_, log) = open_with(tmp.path(), options.clone()).await;
    let other = || AppendRequest::new(tag("other"), vec![b'x'; 300]);
    let mut originals = Vec::new();
    for i in 0..5 {
        originals.push(log.append(placed(i)).await.unwrap());
    }
    for _ in 0..60 {
        log.append(other()).await.unwrap();
    }
    for i in 5..10 {
        originals.push(log.append(placed(i)).await.unwrap());
        log.append(other()).await.unwrap();
    }
    // Entries without ids after the newest id: the window (40 entries,
    // rounded up to whole segments of about 11) reaches back past
    // entries 65..75, the originals of ids 5..9, but not to ids 0..4.
    for _ in 0..20 {
        log.append(other()).await.unwrap();
    }
    log.close().await.unwrap();
    assert!(segments(tmp.path()).len() > 3, "the log spans segments");
    let (_, log) = open_with(tmp.path(), options).await;
    for i in 5..10 {
        assert_eq!(log.append(placed(i)).await.unwrap(), originals[i as usize]);
    }
    assert_eq!(log.tip().await.unwrap().next, 95);
    // Ids older than the window's reach are appended again (documented).
    assert_eq!(log.append(placed(0)).await.unwrap().seqnum, 95);
}

#[tokio::test]
async fn a_trim_forgets_the_ids_it_drops() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, log) = open(tmp.path()).await;
    for i in 0..4 {
        log.append(placed(i)).await.unwrap();
    }
    log.trim(1).await.unwrap();
    // The entry of order-1 is gone, so is its id; order-2 is live.
    assert_eq!(log.append(placed(1)).await.unwrap().seqnum, 4);
    assert_eq!(log.append(placed(2)).await.unwrap().seqnum, 2);
    log.close().await.unwrap();
    let (_, log) = open(tmp.path()).await;
    assert_eq!(log.append(placed(0)).await.unwrap().seqnum, 5);
    assert_eq!(log.append(placed(3)).await.unwrap().seqnum, 3);
    assert_eq!(log.append(placed(1)).await.unwrap().seqnum, 4);
}

#[tokio::test]
async fn an_indeterminate_append_is_retried_safely_after_a_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let (storage, log) = open(tmp.path()).await;
    log.append(placed(0)).await.unwrap();
    storage.inject_sync_failure();
    let err = log.append(placed(1)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Indeterminate);
    // The writer stopped; the same handle refuses the retry.
    assert_eq!(
        log.append(placed(1)).await.unwrap_err().kind(),
        ErrorKind::Closed
    );
    log.close().await.unwrap();
    drop((storage, log));
    // The bytes reached the file (only the sync "failed"), so the entry is
    // in the log after the reopen, and the retry answers with it.
    let (_, log) = open(tmp.path()).await;
    let retried = log.append(placed(1)).await.unwrap();
    assert_eq!((retried.seqnum, retried.stream_version), (1, 1));
    let all = log.read_log(Position::Beginning, 10).await.unwrap();
    let data: Vec<&[u8]> = all.iter().map(|e| &e.data[..]).collect();
    assert_eq!(data, [&b"placed 0"[..], b"placed 1"]);
}

/// Writes a log as a build before append ids did: one format-1 segment of
/// `n` entries, each its own batch.
fn write_old_log(dir: &std::path::Path, n: u64) {
    let header = SegmentHeader {
        version: SEGMENT_V1,
        ..SegmentHeader::new(0, false)
    };
    let mut bytes = header.encode();
    for i in 0..n {
        let entry = LogEntry {
            seqnum: i,
            stream_version: i,
            tags: vec![tag("orders")],
            data: Bytes::from(format!("old {i}")),
            timestamp_ms: 1_600_000_000_000,
            append_id: None,
        };
        frame::encode(&mut bytes, &entry, 0, true).unwrap();
    }
    std::fs::write(dir.join(format!("{:020}.seg", 0)), bytes).unwrap();
}

#[tokio::test]
async fn a_log_from_before_append_ids_reads_and_takes_ids_in_a_new_segment() {
    let tmp = tempfile::tempdir().unwrap();
    write_old_log(tmp.path(), 3);
    let old_segment = segments(tmp.path()).pop().unwrap();
    let old_bytes = std::fs::read(&old_segment).unwrap();
    let (_, log) = open(tmp.path()).await;
    assert_eq!(log.read_all(&tag("orders")).await.unwrap().len(), 3);
    // Without an id, the writer goes on in the old segment.
    log.append(AppendRequest::new(tag("orders"), "plain"))
        .await
        .unwrap();
    assert_eq!(segments(tmp.path()).len(), 1);
    // The first id goes into a new, format-2 segment; the old segment
    // keeps format 1 and only frames without ids.
    let first = log.append(placed(7)).await.unwrap();
    assert_eq!(first.seqnum, 4);
    let segs = segments(tmp.path());
    assert_eq!(segs.len(), 2);
    assert_eq!(header_version(&segs[0]), SEGMENT_V1);
    assert_eq!(header_version(&segs[1]), SEGMENT_V2);
    assert!(std::fs::read(&segs[0]).unwrap().starts_with(&old_bytes));
    log.close().await.unwrap();

    let (_, log) = open(tmp.path()).await;
    assert_eq!(log.append(placed(7)).await.unwrap(), first);
    let data: Vec<String> = log
        .read_all(&tag("orders"))
        .await
        .unwrap()
        .iter()
        .map(|e| String::from_utf8_lossy(&e.data).into_owned())
        .collect();
    assert_eq!(data, ["old 0", "old 1", "old 2", "plain", "placed 7"]);
    // Read back from the files: the old frames have no id, the new one its own.
    let ids: Vec<Option<String>> = log
        .read_log(Position::Beginning, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.append_id)
        .collect();
    assert_eq!(ids, [None, None, None, None, Some("order-7".to_owned())]);
}

#[tokio::test]
async fn a_retry_in_the_same_write_group_as_its_original_is_answered_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (storage, log) = open(tmp.path()).await;
    // Many appenders, each sending the same id twice at once, so
    // originals and retries share write groups.
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let log = log.clone();
            tokio::spawn(async move {
                let (a, b) = futures::join!(log.append(placed(i)), log.append(placed(i)));
                (a.unwrap(), b.unwrap())
            })
        })
        .collect();
    for task in tasks {
        let (a, b) = task.await.unwrap();
        assert_eq!(a, b);
    }
    assert_eq!(log.tip().await.unwrap().next, 16);
    assert_eq!(storage.stats().entries, 16);
}
