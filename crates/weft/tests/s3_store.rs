//! The store layer against the real SeaweedFS test server: conditional puts,
//! and what wrong credentials and a dead endpoint classify as.
//!
//! Needs `scripts/seaweedfs.sh start` and its env file sourced
//! (`scripts/test.sh` does both); fails otherwise.

mod support;

use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, UpdateVersion};
use weft::ErrorKind;
use weft::store::{Outcome, StoreOp, classify_result, to_error};

#[tokio::test]
async fn conditional_puts_work_on_seaweedfs() {
    let (store, _) = support::s3::store("conditional_puts");
    let path = Path::from("manifest");
    let create = || PutOptions::from(PutMode::Create);

    let first = store.put_opts(&path, "v1".into(), create()).await.unwrap();
    assert!(first.e_tag.is_some(), "SeaweedFS returns an ETag");
    let again = store.put_opts(&path, "v1b".into(), create()).await;
    assert_eq!(
        classify_result(StoreOp::CreateIfAbsent, &again),
        Outcome::Conflict
    );

    let v1 = UpdateVersion::from(first);
    let second = store
        .put_opts(&path, "v2".into(), PutMode::Update(v1.clone()).into())
        .await
        .unwrap();
    let stale = store
        .put_opts(&path, "v3".into(), PutMode::Update(v1).into())
        .await;
    assert_eq!(
        classify_result(StoreOp::UpdateIfMatch, &stale),
        Outcome::Conflict
    );
    let got = store.get(&path).await.unwrap();
    assert_eq!(got.meta.e_tag, second.e_tag);
    assert_eq!(&got.bytes().await.unwrap()[..], b"v2");

    let missing = store.get(&Path::from("nothing-here")).await;
    assert_eq!(classify_result(StoreOp::Read, &missing), Outcome::NotFound);
}

#[tokio::test]
async fn wrong_credentials_are_permission_denied() {
    let (_, settings) = support::s3::store("wrong_credentials");
    let bad = support::s3::wrong_credentials(&settings);
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

#[tokio::test]
async fn unreachable_endpoint_is_transient() {
    let (_, settings) = support::s3::store("unreachable");
    let dead = support::s3::unreachable(&settings);
    let read = dead.get(&Path::from("manifest")).await;
    assert_eq!(classify_result(StoreOp::Read, &read), Outcome::Transient);
    let write = dead
        .put_opts(&Path::from("manifest"), "x".into(), PutMode::Create.into())
        .await;
    let err = to_error(StoreOp::CreateIfAbsent, "manifest", write.unwrap_err());
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
}
