//! The store layer against the real SeaweedFS test server: conditional puts
//! and their races, deletes, listing and ETags, and what wrong credentials
//! and a dead endpoint classify as. The bodies are shared with the Azure
//! tests (`support::store_cases`); what is particular to S3 is asserted
//! here.
//!
//! Needs `scripts/seaweedfs.sh start` and its env file sourced
//! (`scripts/test.sh` does both); fails otherwise.

mod support;

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
