//! The store layer against the real SeaweedFS test server: conditional puts
//! and their races, deletes, listing and ETags, and what wrong credentials
//! and a dead endpoint classify as. The bodies are shared with the Azure
//! tests (`support::store_cases`); what is particular to S3 is asserted
//! here.
//!
//! Needs `scripts/seaweedfs.sh start` and its env file sourced
//! (`scripts/test.sh` does both); fails otherwise.

use crate::support;

use support::{s3, store_cases};

#[tokio::test]
async fn conditional_puts_work_on_seaweedfs() {
    store_cases::conditional_puts(s3::store("conditional_puts").0).await;
}

#[tokio::test]
async fn conditional_races_have_one_winner_on_seaweedfs() {
    store_cases::conditional_races(s3::store("conditional_races").0, 8).await;
}

#[tokio::test]
async fn deletes_settle_on_seaweedfs() {
    store_cases::deletes_settle(s3::store("deletes").0).await;
}

#[tokio::test]
async fn listing_and_etags_on_seaweedfs() {
    store_cases::listing_and_etags(s3::store("listing").0).await;
}

#[tokio::test]
async fn seaweedfs_etags_are_content_hashes() {
    let (store, _) = s3::store("etag_hash");
    assert!(store_cases::same_bytes_keep_etag(&store).await);
}

#[tokio::test]
async fn wrong_credentials_are_permission_denied() {
    let (_, settings) = s3::store("wrong_credentials");
    store_cases::wrong_credentials(s3::wrong_credentials(&settings)).await;
}

#[tokio::test]
async fn unreachable_endpoint_is_transient() {
    let (_, settings) = s3::store("unreachable");
    store_cases::unreachable(s3::unreachable(&settings)).await;
}

/// A store that signs without hashing bodies writes segments and manifests
/// the server accepts and reads back byte for byte (whether the option
/// reaches the request is checked offline in `connect_settings`).
#[tokio::test]
async fn unsigned_payload_writes_and_reads_back_on_seaweedfs() {
    use bytes::Bytes;
    use object_store::path::Path;
    use object_store::{PutMode, PutOptions, PutPayload, UpdateVersion};

    let mut settings = s3::settings("unsigned_payload");
    settings.unsigned_payload = true;
    let store = settings.build().expect("build S3 store");
    // A segment-sized body, several MiB, not all one byte.
    let body: Bytes = (0..(3 << 20) + 17)
        .map(|i: u32| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    let seg = Path::from("wal/seg/one");
    store
        .put(&seg, PutPayload::from(body.clone()))
        .await
        .expect("unsigned PUT");
    let got = store.get(&seg).await.unwrap().bytes().await.unwrap();
    assert_eq!(got, body, "read back as written");
    // Conditional puts (the manifest CAS) work unsigned too.
    let manifest = Path::from("wal/manifest");
    let created = store
        .put_opts(
            &manifest,
            PutPayload::from_static(b"v1"),
            PutOptions::from(PutMode::Create),
        )
        .await
        .expect("create");
    store
        .put_opts(
            &manifest,
            PutPayload::from_static(b"v2"),
            PutOptions::from(PutMode::Update(UpdateVersion {
                e_tag: created.e_tag,
                version: None,
            })),
        )
        .await
        .expect("update at the version just written");
    let got = store.get(&manifest).await.unwrap().bytes().await.unwrap();
    assert_eq!(&got[..], b"v2");
}
