//! A v5 manifest's history pages with real producers, on the in-memory
//! store (SeaweedFS: `history_s3.rs`): the manifest stays bounded while the log grows,
//! nothing is lost across checkpoints (fresh replicas, replicas that tail
//! across them), truncation into the history is exact, GC collects only
//! what is dead, and logs written in v4 upgrade in place.

#![allow(clippy::disallowed_methods)]

use crate::support;

use object_store::memory::InMemory;
use support::history_cases::*;
use support::wal::manifest;

#[tokio::test]
async fn long_logs_keep_a_bounded_manifest_in_memory() {
    long_logs_keep_a_bounded_manifest(Arc::new(InMemory::new())).await;
}

#[tokio::test]
async fn truncation_into_history_is_exact_and_gc_keeps_the_live_in_memory() {
    truncation_into_history_is_exact_and_gc_keeps_the_live(Arc::new(InMemory::new())).await;
}

#[tokio::test]
async fn v4_logs_upgrade_in_place_in_memory() {
    v4_logs_upgrade_in_place(Arc::new(InMemory::new())).await;
}

/// GC keeps a page its writer stored for a checkpoint whose CAS has not
/// landed yet (until the commit window passed), whatever the grace; it
/// collects such a page of another run, which the lease says cannot
/// commit.
#[tokio::test]
async fn gc_keeps_pages_a_checkpoint_may_still_reference() {
    use weft::wal::KeepReason;
    use weft::wal::history::{PageName, page_path};
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let p = builder(store.clone()).open().await.unwrap();
    append_each(&p, texts(0..30)).await;
    let m = manifest(&store, MANIFEST).await;
    let end = m.recent_from();
    // The writer's next checkpoint would start at `end`; an older run's
    // page over the same range is a zombie's.
    let page = |run| PageName {
        level: 0,
        first: end,
        end: end + 2,
        run,
        plan: 1_000,
    };
    let pending = page_path(HISTORY, &page(p.run_id()));
    let zombie = page_path(HISTORY, &page(ulid::Ulid::from_parts(1, 1)));
    for loc in [&pending, &zombie] {
        store
            .put(
                &Path::from(loc.as_str()),
                Bytes::from_static(b"page").into(),
            )
            .await
            .unwrap();
    }
    let report = Gc::new(store.clone(), MANIFEST, SEGMENTS)
        .with_grace(Duration::from_secs(3600))
        .with_clock(later(Duration::from_secs(7200)))
        .dry_run(true)
        .run()
        .await
        .unwrap();
    let kept = |reason| -> BTreeSet<String> {
        report
            .kept
            .iter()
            .filter(|k| k.reason == reason)
            .map(|k| k.object.location.clone())
            .collect()
    };
    assert!(kept(KeepReason::InFlight).contains(&pending));
    assert!(report.deleted.iter().any(|o| o.location == zombie));
    // Nothing the tree names is ever a candidate.
    let named = list(&store, HISTORY).await;
    let candidates: BTreeSet<String> = report
        .deleted
        .iter()
        .map(|o| o.location.clone())
        .chain(report.kept.iter().map(|k| k.object.location.clone()))
        .collect();
    assert_eq!(
        named.difference(&candidates).count() as u64,
        report.referenced as u64 - 30,
        "every other page is referenced"
    );
    p.close().await.unwrap();
}
