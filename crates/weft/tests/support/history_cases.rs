//! The scenarios of `tests/local/history.rs` (in-memory) and
//! `tests/servers/history_s3.rs` (SeaweedFS): a v5 manifest's history pages with
//! real producers.

#![allow(clippy::disallowed_methods)]

pub use std::collections::BTreeSet;
pub use std::sync::Arc;
pub use std::time::Duration;

pub use super::wal::manifest;
pub use bytes::Bytes;
pub use futures::TryStreamExt;
pub use object_store::ObjectStore;
pub use object_store::path::Path;
pub use weft::ErrorKind;
pub use weft::clock::{Clock, ManualClock, SystemClock};
pub use weft::format::{ManifestVersion, decode_page};
pub use weft::objects::RetryPolicy;
pub use weft::wal::{
    CheckpointPolicy, Cursor, FnApplier, Gc, Producer, ProducerBuilder, Record, Replica,
};

pub const MANIFEST: &str = "wal/manifest";
pub const SEGMENTS: &str = "wal/seg";
pub const HISTORY: &str = "wal/history";

pub fn policy() -> CheckpointPolicy {
    CheckpointPolicy::default()
        .with_max_recent_entries(8)
        .with_max_recent_bytes(1 << 20)
        .with_leaf_entries(4)
        .with_leaf_bytes(1 << 19)
        .with_fanout(3)
        .with_max_pages_per_commit(4)
}

pub fn builder(store: Arc<dyn ObjectStore>) -> ProducerBuilder {
    Producer::builder(store, MANIFEST, SEGMENTS)
        .with_flush_interval(Duration::from_millis(2))
        .with_checkpoint_policy(policy())
        .with_retry_policy(
            RetryPolicy::default()
                .with_max_attempts(6)
                .with_base_backoff(Duration::from_millis(2))
                .with_max_backoff(Duration::from_millis(50))
                .with_jitter(0.5),
        )
}

/// Appends `texts` one commit each (one segment per record).
pub async fn append_each(p: &Producer, texts: impl IntoIterator<Item = String>) -> Vec<u64> {
    let mut out = Vec::new();
    for t in texts {
        let d = p.append(vec![Bytes::from(t)], None).await.unwrap();
        out.push(d.wait().await.unwrap());
    }
    out
}

pub fn texts(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("r{i}")).collect()
}

pub type Seen = Arc<std::sync::Mutex<Vec<(u64, String)>>>;

pub fn replica(store: &Arc<dyn ObjectStore>) -> (Seen, Replica<impl weft::wal::Applier>) {
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let applier = FnApplier::new(move |r: &Record| {
        let text = String::from_utf8(r.data.to_vec()).unwrap();
        sink.lock()
            .unwrap()
            .push((r.sequence.expect("record-numbered"), text));
        Ok(())
    });
    let r = Replica::builder(store.clone(), MANIFEST, applier)
        .with_page_cache_bytes(4 << 10)
        .build();
    (seen, r)
}

pub fn seen_texts(seen: &Seen) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|(_, t)| t.clone())
        .collect()
}

pub async fn list(store: &Arc<dyn ObjectStore>, prefix: &str) -> BTreeSet<String> {
    store
        .list(Some(&Path::from(prefix)))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap()
}

pub fn later(ahead: Duration) -> Arc<dyn Clock> {
    ManualClock::new(SystemClock.now_ms() + ahead.as_millis() as u64)
}

pub async fn long_logs_keep_a_bounded_manifest(store: Arc<dyn ObjectStore>) {
    let p = builder(store.clone()).open().await.unwrap();
    // A replica that tails while checkpoints move what it has not read
    // yet into pages, and one that starts when the log is long.
    let (tailed, mut tail) = replica(&store);
    let mut largest = 0;
    for chunk in 0..10 {
        let seqs = append_each(&p, texts(chunk * 20..(chunk + 1) * 20)).await;
        assert_eq!(
            seqs,
            (chunk as u64 * 20..(chunk as u64 + 1) * 20).collect::<Vec<_>>()
        );
        let m = manifest(&store, MANIFEST).await;
        largest = largest.max(m.to_bytes().unwrap().len());
        assert!(m.len() <= 8 + 1, "{} recent entries", m.len());
        if chunk % 3 == 0 {
            tail.poll().await.unwrap();
        }
    }
    let m = manifest(&store, MANIFEST).await;
    let h = m.history().expect("a long log has history pages");
    assert!(h.levels.len() >= 3, "{} levels", h.levels.len());
    assert_eq!(h.entries() + m.len() as u64, 200);
    // The manifest did not grow with the log: 200 segments, each entry
    // ~60 bytes, yet the object stayed within a few recent entries and
    // the frontier.
    assert!(largest < 2_500, "largest manifest {largest} bytes");
    // Every stored page decodes and is named by the tree (none left over).
    let pages = list(&store, HISTORY).await;
    for loc in &pages {
        let bytes = store.get(&Path::from(loc.as_str())).await.unwrap();
        decode_page(&bytes.bytes().await.unwrap()).unwrap();
    }
    assert!(pages.len() >= 200 / 4, "{} pages", pages.len());

    tail.poll().await.unwrap();
    assert_eq!(seen_texts(&tailed), texts(0..200));
    let (fresh_seen, mut fresh) = replica(&store);
    fresh.poll().await.unwrap();
    assert_eq!(seen_texts(&fresh_seen), texts(0..200));
    let seqs: Vec<u64> = fresh_seen.lock().unwrap().iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (0..200).collect::<Vec<_>>());
    p.close().await.unwrap();

    // A new writer goes on after the history.
    let p = builder(store.clone()).open().await.unwrap();
    assert_eq!(append_each(&p, texts(200..201)).await, vec![200]);
    p.close().await.unwrap();
    fresh.poll().await.unwrap();
    assert_eq!(seen_texts(&fresh_seen), texts(0..201));
}

pub async fn truncation_into_history_is_exact_and_gc_keeps_the_live(store: Arc<dyn ObjectStore>) {
    let p = builder(store.clone()).open().await.unwrap();
    append_each(&p, texts(0..120)).await;
    // A replica that read part of the log, to find it trimmed later.
    let (_, mut behind) = replica(&store);
    behind.poll().await.unwrap();
    let end = manifest(&store, MANIFEST).await.recent_from();
    assert!(end > 60, "the history ends at {end}");

    // Through 41: inside the history. The straddling entry is 41..42 (one
    // record per segment), so the first live sequence is exactly 42.
    p.truncate_through(41).await.unwrap();
    let m = manifest(&store, MANIFEST).await;
    assert_eq!(m.first_sequence(), 42);
    assert_eq!(m.next_sequence(), 120);
    let (seen, mut fresh) = replica(&store);
    fresh.poll().await.unwrap();
    assert_eq!(seen_texts(&seen), texts(42..120));
    // A replica positioned before the truncation point is told so.
    {
        let cursors = weft::wal::MemoryCursorStore::new();
        weft::wal::CursorStore::save(&cursors, Cursor::at_entry(10))
            .await
            .unwrap();
        let applier = FnApplier::new(|_: &Record| Ok(()));
        let mut positioned = Replica::builder(store.clone(), MANIFEST, applier)
            .with_cursor_store(cursors)
            .build();
        let err = positioned.poll().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Trimmed);
    }

    // GC, hours later: the pages and segments wholly before 42 go; every
    // page and segment a live entry needs stays; readers still read.
    let before = list(&store, HISTORY).await;
    let report = Gc::new(store.clone(), MANIFEST, SEGMENTS)
        .with_grace(Duration::from_secs(3600))
        .with_clock(later(Duration::from_secs(7200)))
        .run()
        .await
        .unwrap();
    let deleted: BTreeSet<String> = report.deleted.iter().map(|o| o.location.clone()).collect();
    let after = list(&store, HISTORY).await;
    assert!(after.len() < before.len(), "no dead page was collected");
    assert!(deleted.iter().any(|d| d.starts_with(SEGMENTS)));
    for d in &deleted {
        if let Some(name) = d.strip_prefix(&format!("{HISTORY}/")) {
            let page_end = weft::wal::history::parse_page_name(name).unwrap().end;
            assert!(page_end <= 42, "GC deleted the live page {d}");
        }
    }
    let (seen, mut fresh) = replica(&store);
    fresh.poll().await.unwrap();
    assert_eq!(seen_texts(&seen), texts(42..120));
    // A replica that had read everything before the truncation goes on.
    append_each(&p, texts(120..121)).await;
    behind.poll().await.unwrap();
    p.close().await.unwrap();
}

pub async fn v4_logs_upgrade_in_place(store: Arc<dyn ObjectStore>) {
    // Today's code wrote a v4 log, long enough to exceed the policy.
    let p = builder(store.clone())
        .with_manifest_version(ManifestVersion::V4)
        .open()
        .await
        .unwrap();
    append_each(&p, texts(0..40)).await;
    p.close().await.unwrap();
    let m = manifest(&store, MANIFEST).await;
    assert_eq!((m.version(), m.len()), (ManifestVersion::V4, 40));
    assert!(m.history().is_none(), "v4 never checkpoints");

    // A writer that does not ask for a version keeps v4 and reads on.
    let p = builder(store.clone()).open().await.unwrap();
    assert_eq!(p.manifest_version(), ManifestVersion::V4);
    append_each(&p, texts(40..41)).await;
    p.close().await.unwrap();

    // One that asks for v5 converts it when it claims; its commits then
    // shrink the manifest a few pages at a time.
    let p = builder(store.clone())
        .with_manifest_version(ManifestVersion::V5)
        .open()
        .await
        .unwrap();
    assert_eq!(
        manifest(&store, MANIFEST).await.version(),
        ManifestVersion::V5
    );
    append_each(&p, texts(41..50)).await;
    let m = manifest(&store, MANIFEST).await;
    assert!(m.len() <= 9, "{} recent entries after the upgrade", m.len());
    assert_eq!(m.history().unwrap().entries() + m.len() as u64, 50);
    p.close().await.unwrap();
    let (seen, mut fresh) = replica(&store);
    fresh.poll().await.unwrap();
    assert_eq!(seen_texts(&seen), texts(0..50));
    // Asking for v4 again is refused: the pages have no v4 form.
    let err = builder(store.clone())
        .with_manifest_version(ManifestVersion::V4)
        .open()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}
