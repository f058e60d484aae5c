//! Live compatibility between weft and the real upstream buffer crate
//! (`opendata-buffer` 0.3, library name `buffer`).
//!
//! The tests in `tests/` run the upstream producer against the SeaweedFS
//! test server and tail what it writes with a weft [`Replica`]
//! (manifest v1, `<prefix>/<ULID>.batch` segments). This library holds the
//! two store builders they share: one for upstream, one for weft, each its
//! own S3 client, both rooted at the same fresh key prefix.
//!
//! The server comes from `scripts/seaweedfs.sh start`, whose env file the
//! run must source; without it every test fails with a message saying so.
//!
//! [`Replica`]: weft::wal::Replica

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::prefix::PrefixStore;

/// What every test fails with when the server env is missing.
pub const NO_SERVER: &str = "source the SeaweedFS env first: scripts/test.sh does \
     (or scripts/seaweedfs.sh start and `. .tmp/seaweedfs/env`)";

fn required(key: &str) -> String {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{key} is not set: {NO_SERVER}"),
    }
}

/// A fresh key prefix for one test: `weft-upstream/<test>/<ULID>`.
pub fn fresh_prefix(test: &str) -> String {
    format!("weft-upstream/{test}/{}", ulid::Ulid::new())
}

/// The store the upstream producer and consumer write through: object
/// store 0.12's S3 client (the version slatedb 0.13, and so
/// opendata-buffer, is built on), path-style, plain HTTP to the local
/// server, rooted at `prefix`.
pub fn upstream_store(prefix: &str) -> Arc<dyn ObjectStore> {
    let s3 = AmazonS3Builder::new()
        .with_endpoint(required("WEFT_TEST_S3_ENDPOINT"))
        .with_bucket_name(required("WEFT_TEST_S3_BUCKET"))
        .with_access_key_id(required("AWS_ACCESS_KEY_ID"))
        .with_secret_access_key(required("AWS_SECRET_ACCESS_KEY"))
        .with_region(std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()))
        .with_virtual_hosted_style_request(false)
        // Last: `with_client_options` would reset it.
        .with_allow_http(true)
        .build()
        .expect("build the upstream S3 store");
    Arc::new(PrefixStore::new(s3, Path::from(prefix)))
}

/// The store weft reads through: weft's own S3 settings, rooted at
/// `prefix`.
pub fn weft_store(prefix: &str) -> Arc<dyn ObjectStore> {
    let mut s = weft::connect::S3Settings::from_env(required("WEFT_TEST_S3_BUCKET"), prefix)
        .expect("S3 env is valid");
    s.endpoint = Some(required("WEFT_TEST_S3_ENDPOINT"));
    s.allow_http = true;
    s.region.get_or_insert_with(|| "us-east-1".to_string());
    s.build().expect("build the weft S3 store")
}
