//! Derived state rewritten with valid checksums, on the `dir` backend: the
//! writer's log index (`<dir>/index/`) given rows that disagree with the
//! log. `check` (what `weft verify` runs) reports each, and a writer that
//! reopens the log either stops with `Corrupt` or answers what the log
//! says — never `Internal`, never a number the log contradicts.

use crate::support::dir as dir_support;

use std::path::Path;

use dir_support::{open, tag};
use weft::{AppendRequest, ErrorKind};

/// How a test rewrites the index, through fjall (so every checksum fjall
/// keeps is valid).
#[derive(Debug, Clone, Copy)]
enum Tamper {
    /// Stream `a`'s next version moved ahead.
    NextVersionAhead,
    /// Stream `a`'s next version moved back (a version would repeat).
    NextVersionBehind,
    /// An append id mapped to an entry that does not carry it.
    ForeignAppendId,
}

const ROWS: [Tamper; 3] = [
    Tamper::NextVersionAhead,
    Tamper::NextVersionBehind,
    Tamper::ForeignAppendId,
];

fn tag_key(ns: &str) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(ns.len() as u16).to_le_bytes());
    out.extend_from_slice(ns.as_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// Rewrites `index` (a closed log index directory) as `tamper` says.
fn tamper_index(index: &Path, tamper: Tamper) {
    let db = fjall::Database::builder(index.join("store"))
        .open()
        .unwrap();
    let ks = |name: &str| {
        db.keyspace(name, fjall::KeyspaceCreateOptions::default)
            .unwrap()
    };
    match tamper {
        Tamper::NextVersionAhead | Tamper::NextVersionBehind => {
            let tags = ks("tags");
            let key = tag_key("a");
            let mut row = tags
                .get(&key)
                .unwrap()
                .expect("a row for stream a")
                .to_vec();
            let next = u64::from_le_bytes(row[8..16].try_into().unwrap());
            let forged = match tamper {
                Tamper::NextVersionAhead => next + 5,
                _ => next - 2,
            };
            row[8..16].copy_from_slice(&forged.to_le_bytes());
            tags.insert(key, row).unwrap();
        }
        Tamper::ForeignAppendId => {
            let ids = ks("append_ids");
            let mut key = vec![0x01];
            key.extend_from_slice(b"id-3");
            ids.insert(key, 1u64.to_le_bytes().to_vec()).unwrap();
        }
    }
    db.persist(fjall::PersistMode::SyncAll).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_that_disagrees_with_the_log_is_reported_and_not_trusted() {
    for tamper in ROWS {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        let mut truth = Vec::new();
        {
            let (_s, log) = open(&dir).await;
            for i in 0..12usize {
                let t = ["a", "b", "c"][i % 3];
                let r = log
                    .append(
                        AppendRequest::new(tag(t), format!("{t}{i}")).with_id(format!("id-{i}")),
                    )
                    .await
                    .unwrap();
                truth.push(r);
            }
            log.close().await.unwrap();
        }
        let clean = weft::storage::dir::check(&dir).await.unwrap();
        assert!(clean.is_ok(), "{:?}", clean.problems);

        tamper_index(&dir.join("index"), tamper);

        let checked = weft::storage::dir::check(&dir).await.unwrap();
        match tamper {
            // The index's id table is not read by the writer (ids come
            // from the frames), so there is nothing to report.
            Tamper::ForeignAppendId => assert!(checked.is_ok(), "{:?}", checked.problems),
            _ => assert!(
                !checked.is_ok(),
                "{tamper:?}: check reports the index: {:?}",
                checked.notes
            ),
        }

        let (_s, log) = open(&dir).await;
        match tamper {
            Tamper::NextVersionAhead | Tamper::NextVersionBehind => {
                // `check` left the index as it was: the writer meets the
                // row and refuses to number from it.
                let e = log
                    .append(AppendRequest::new(tag("a"), "after"))
                    .await
                    .unwrap_err();
                assert_eq!(e.kind(), ErrorKind::Corrupt, "{tamper:?}: {e}");
            }
            Tamper::ForeignAppendId => {
                match log
                    .append(AppendRequest::new(tag("a"), "a3").with_id("id-3"))
                    .await
                {
                    Ok(r) => assert_eq!(r, truth[3], "{tamper:?}: the original result"),
                    Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{tamper:?}: {e}"),
                }
            }
        }
        let _ = log.close().await;
        drop(_s);

        // The index is not trusted again: the next open rebuilds it from
        // the log, and the stream continues where the log says.
        let (_s, log) = open(&dir).await;
        let r = log
            .append(AppendRequest::new(tag("a"), "again"))
            .await
            .unwrap();
        assert_eq!(r.stream_version, 4, "{tamper:?}: {r:?}");
        log.close().await.unwrap();
        let after = weft::storage::dir::check(&dir).await.unwrap();
        assert!(after.is_ok(), "{tamper:?}: {:?}", after.problems);
    }
}
