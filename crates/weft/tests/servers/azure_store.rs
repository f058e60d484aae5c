//! The store layer against the real Azurite test server (Azure Blob):
//! the same cases as `tests/servers/s3_store.rs` (shared bodies in
//! `support::store_cases`), plus what is particular to Azure.
//!
//! Needs `scripts/azurite.sh start` and its env file sourced
//! (`scripts/test.sh` does both); fails otherwise.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support;

use object_store::path::Path;
use object_store::{ObjectStore, PutMode};
use support::{azure, store_cases};
use weft::ErrorKind;
use weft::connect::{Location, build_store};
use weft::objects::{Outcome, StoreOp, classify_result, to_error};

#[tokio::test]
async fn conditional_puts_work_on_azurite() {
    store_cases::conditional_puts(azure::store("conditional_puts").0).await;
}

#[tokio::test]
async fn conditional_races_have_one_winner_on_azurite() {
    store_cases::conditional_races(azure::store("conditional_races").0, 8).await;
}

#[tokio::test]
async fn deletes_settle_on_azurite() {
    store_cases::deletes_settle(azure::store("deletes").0).await;
}

#[tokio::test]
async fn listing_and_etags_on_azurite() {
    store_cases::listing_and_etags(azure::store("listing").0).await;
}

#[tokio::test]
async fn azurite_etags_are_not_content_hashes() {
    let (store, _) = azure::store("etag_hash");
    assert!(!store_cases::same_bytes_keep_etag(&store).await);
}

#[tokio::test]
async fn wrong_credentials_are_permission_denied() {
    let (_, settings) = azure::store("wrong_credentials");
    store_cases::wrong_credentials(azure::wrong_credentials(&settings)).await;
}

#[tokio::test]
async fn unreachable_endpoint_is_transient() {
    let (_, settings) = azure::store("unreachable");
    store_cases::unreachable(azure::unreachable(&settings)).await;
}

#[tokio::test]
async fn az_locations_build_a_working_store() {
    let settings = azure::settings("az_location");
    let text = format!("az://{}/{}", settings.container, settings.prefix);
    let location = Location::parse(&text).unwrap();
    let store = build_store(&location, &settings).unwrap();
    let path = Path::from("manifest");
    store.put(&path, "via location".into()).await.unwrap();
    // The location's prefix roots the store: the same blob is reachable
    // through the settings' own store.
    let direct = settings.build().unwrap();
    let got = direct.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(&got[..], b"via location");
}

#[tokio::test]
async fn a_missing_container_is_not_found_not_transient() {
    let mut settings = azure::settings("missing_container");
    settings.container = format!("no-such-{}", ulid::Ulid::new().to_string().to_lowercase());
    let store = settings.build().unwrap();
    let path = Path::from("manifest");
    let read = store.get(&path).await;
    assert_eq!(classify_result(StoreOp::Read, &read), Outcome::NotFound);
    let write = store
        .put_opts(&path, "x".into(), PutMode::Create.into())
        .await;
    let err = to_error(StoreOp::CreateIfAbsent, "manifest", write.unwrap_err());
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}
