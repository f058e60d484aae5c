//! The unchanged conformance suite on a client of a server whose log is
//! on the SeaweedFS bucket and on PostgreSQL that scripts/test.sh starts
//! (feature `server-tests`; without the servers' env these fail, naming
//! the script, rather than skip).

#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};

use weft::storage::bucket::{BucketOptions, BucketStorage};
use weft::storage::postgres::{PgOptions, PgStorage};

fn required(key: &str) -> String {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{key} is not set: run scripts/test.sh (it starts SeaweedFS and PostgreSQL)"),
    }
}

/// A name no other test (or earlier run) uses.
fn fresh(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{prefix}_{}_{nanos}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

weft_testkit::conformance_suite!(s3, || async {
    let bucket = required("WEFT_TEST_S3_BUCKET");
    let endpoint = required("WEFT_TEST_S3_ENDPOINT");
    let prefix = format!("weft-client-tests/{}", fresh("conf"));
    let mut settings = weft::connect::S3Settings::from_env(bucket, prefix).expect("S3 env");
    settings.endpoint = Some(endpoint);
    settings.allow_http = true;
    settings
        .region
        .get_or_insert_with(|| "us-east-1".to_owned());
    let store = settings.build().expect("S3 store");
    let options = BucketOptions::default().with_numbers_in_memory(true);
    let storage = BucketStorage::open(store, "", options)
        .await
        .expect("open the bucket log");
    support::served(weft::Log::new(storage), "s3", ()).await
});

weft_testkit::conformance_suite!(postgres, || async {
    let url = required("WEFT_TEST_PG_URL");
    let sep = if url.contains('?') { '&' } else { '?' };
    let location = format!("{url}{sep}log={}", fresh("srv"))
        .parse()
        .expect("the test server's URL parses");
    let options = PgOptions::default()
        .with_pool_size(4)
        .with_poll_interval_ms(200);
    let storage = PgStorage::open_with(location, options)
        .await
        .expect("open the PostgreSQL log");
    support::served(weft::Log::new(storage), "postgres", ()).await
});
