//! Store-level test bodies shared by every real object store weft is tested
//! on (SeaweedFS for S3, Azurite for Azure Blob). Each takes the store(s) to
//! test, so `tests/servers/s3_store.rs` and `tests/servers/azure_store.rs` run the same
//! assertions; what differs between stores is asserted in those files.

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, UpdateVersion};
use weft::ErrorKind;
use weft::objects::{Outcome, StoreOp, classify_result, etags_match, settle, to_error};

/// Create-if-absent and update-if-match work, and losing either is a
/// `Conflict`; a missing object reads as `NotFound`.
pub async fn conditional_puts(store: Arc<dyn ObjectStore>) {
    let path = Path::from("manifest");
    let create = || PutOptions::from(PutMode::Create);

    let first = store.put_opts(&path, "v1".into(), create()).await.unwrap();
    assert!(first.e_tag.is_some(), "the store returns an ETag");
    let again = store.put_opts(&path, "v1b".into(), create()).await;
    assert_eq!(
        classify_result(StoreOp::CreateIfAbsent, &again),
        Outcome::Conflict,
        "{again:?}"
    );

    let v1 = UpdateVersion::from(first);
    let second = store
        .put_opts(&path, "v2".into(), PutMode::Update(v1.clone()).into())
        .await
        .unwrap();
    let stale = store
        .put_opts(&path, "v3".into(), PutMode::Update(v1.clone()).into())
        .await;
    assert_eq!(
        classify_result(StoreOp::UpdateIfMatch, &stale),
        Outcome::Conflict,
        "{stale:?}"
    );
    let got = store.get(&path).await.unwrap();
    assert_eq!(got.meta.e_tag, second.e_tag);
    assert_eq!(&got.bytes().await.unwrap()[..], b"v2");

    // An `If-Match` on an object that does not exist loses like a stale
    // one (412 on both stores), not as `NotFound`.
    let absent = store
        .put_opts(
            &Path::from("absent"),
            "x".into(),
            PutMode::Update(v1).into(),
        )
        .await;
    assert_eq!(
        classify_result(StoreOp::UpdateIfMatch, &absent),
        Outcome::Conflict,
        "{absent:?}"
    );

    let missing = store.get(&Path::from("nothing-here")).await;
    assert_eq!(classify_result(StoreOp::Read, &missing), Outcome::NotFound);
}

/// Of `writers` concurrent creates of one object exactly one wins and every
/// other one is a `Conflict`; the same holds for concurrent `If-Match`
/// updates from one version. The winner's bytes are what is stored.
pub async fn conditional_races(store: Arc<dyn ObjectStore>, writers: usize) {
    async fn race(
        store: &Arc<dyn ObjectStore>,
        path: &Path,
        writers: usize,
        mode: impl Fn() -> PutMode,
        op: StoreOp,
    ) {
        let tasks: Vec<_> = (0..writers)
            .map(|i| {
                let store = Arc::clone(store);
                let path = path.clone();
                let opts = PutOptions::from(mode());
                tokio::spawn(async move {
                    let r = store.put_opts(&path, format!("w{i}").into(), opts).await;
                    (i, r)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (i, result) = task.await.expect("writer task");
            match classify_result(op, &result) {
                Outcome::Committed => winners.push(i),
                Outcome::Conflict => {}
                other => panic!("writer {i} of a {op:?} race: {other:?}: {result:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "{op:?} race winners: {winners:?}");
        let stored = store.get(path).await.unwrap().bytes().await.unwrap();
        assert_eq!(&stored[..], format!("w{}", winners[0]).as_bytes());
    }

    let created = Path::from("race/create");
    race(
        &store,
        &created,
        writers,
        || PutMode::Create,
        StoreOp::CreateIfAbsent,
    )
    .await;

    let updated = Path::from("race/update");
    let base = UpdateVersion::from(store.put(&updated, "base".into()).await.unwrap());
    race(
        &store,
        &updated,
        writers,
        || PutMode::Update(base.clone()),
        StoreOp::UpdateIfMatch,
    )
    .await;
}

/// A delete of a missing object settles as success (S3 answers 204, Azure
/// 404), a delete of a present one removes it.
pub async fn deletes_settle(store: Arc<dyn ObjectStore>) {
    let path = Path::from("segment");
    store.put(&path, "bytes".into()).await.unwrap();
    settle(StoreOp::Delete, store.delete(&path).await).unwrap();
    let gone = store.get(&path).await;
    assert_eq!(classify_result(StoreOp::Read, &gone), Outcome::NotFound);
    let again = store.delete(&path).await;
    assert_eq!(
        classify_result(StoreOp::Delete, &again),
        Outcome::Committed,
        "{again:?}"
    );
    settle(StoreOp::Delete, again).unwrap();
}

/// Listed ETags name the same version as head/put ETags (compared with
/// `etags_match`; Azure lists drop the quotes), a listed ETag works as an
/// `If-Match` version, and listing is lexicographic with prefix and offset.
pub async fn listing_and_etags(store: Arc<dyn ObjectStore>) {
    for key in ["d/b", "d/a", "d/c/x", "dd"] {
        store.put(&Path::from(key), key.into()).await.unwrap();
    }
    let put = store.put(&Path::from("d/a"), "a2".into()).await.unwrap();
    let listed: Vec<_> = store
        .list(Some(&Path::from("d")))
        .try_collect()
        .await
        .unwrap();
    let names: Vec<_> = listed.iter().map(|m| m.location.to_string()).collect();
    assert_eq!(names, ["d/a", "d/b", "d/c/x"]);
    let head = store.head(&Path::from("d/a")).await.unwrap();
    let listed_tag = listed[0].e_tag.clone().expect("listed ETag");
    let head_tag = head.e_tag.clone().expect("head ETag");
    assert!(
        etags_match(&listed_tag, &head_tag),
        "{listed_tag} vs {head_tag}"
    );
    assert!(etags_match(&head_tag, put.e_tag.as_deref().unwrap()));
    assert_eq!(listed[0].size, 2);

    let after: Vec<_> = store
        .list_with_offset(Some(&Path::from("d")), &Path::from("d/a"))
        .try_collect()
        .await
        .unwrap();
    let after: Vec<_> = after.iter().map(|m| m.location.to_string()).collect();
    assert_eq!(after, ["d/b", "d/c/x"]);
    let shallow = store
        .list_with_delimiter(Some(&Path::from("d")))
        .await
        .unwrap();
    assert_eq!(shallow.common_prefixes, [Path::from("d/c")]);
    assert_eq!(shallow.objects.len(), 2);

    // The listed spelling is accepted as an `If-Match` version.
    let from_list = UpdateVersion {
        e_tag: Some(listed_tag),
        version: None,
    };
    store
        .put_opts(
            &Path::from("d/a"),
            "a3".into(),
            PutMode::Update(from_list).into(),
        )
        .await
        .unwrap();
}

/// `bad` points at the right server and prefix with a wrong secret: reads
/// and writes are `PermissionDenied`.
pub async fn wrong_credentials(bad: Arc<dyn ObjectStore>) {
    let path = Path::from("manifest");
    let read = bad.get(&path).await;
    assert_eq!(
        classify_result(StoreOp::Read, &read),
        Outcome::PermissionDenied,
        "{read:?}"
    );
    let write = bad
        .put_opts(&path, "x".into(), PutMode::Create.into())
        .await;
    let err = to_error(StoreOp::CreateIfAbsent, "manifest", write.unwrap_err());
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
}

/// `dead` points at a closed port: reads and writes are transient, and the
/// error a caller reports is `Unavailable`.
pub async fn unreachable(dead: Arc<dyn ObjectStore>) {
    let read = dead.get(&Path::from("manifest")).await;
    assert_eq!(classify_result(StoreOp::Read, &read), Outcome::Transient);
    let write = dead
        .put_opts(&Path::from("manifest"), "x".into(), PutMode::Create.into())
        .await;
    let err = to_error(StoreOp::CreateIfAbsent, "manifest", write.unwrap_err());
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
}

/// Writes the same bytes twice and reports whether the ETag stayed.
pub async fn same_bytes_keep_etag(store: &Arc<dyn ObjectStore>) -> bool {
    let path = Path::from("same-bytes");
    let a = store.put(&path, "abc".into()).await.unwrap();
    let b = store.put(&path, "abc".into()).await.unwrap();
    etags_match(a.e_tag.as_deref().unwrap(), b.e_tag.as_deref().unwrap())
}
