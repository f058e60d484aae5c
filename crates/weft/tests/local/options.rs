//! The option structs, as a user outside the crate builds and loads them:
//! from `Default` and the `with_…` setters (they are `#[non_exhaustive]`),
//! and from serde, where every one of them round-trips and refuses a field
//! it does not know (a typo in a config file is an error, not a default).

use std::fmt::Debug;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use weft::RetryPolicy;
use weft::connect::{AzureSettings, S3Settings};
use weft::retention::RetentionPolicy;
use weft::storage::bucket::{BucketFollowerOptions, BucketOptions};
use weft::storage::dir::{DirFollowerOptions, DirOptions, SyncMode};
use weft::wal::{CheckpointPolicy, ProducerOptions};

/// `value` survives JSON both ways, and a document with one unknown field
/// more is refused.
fn round_trips<T>(value: &T)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let json = serde_json::to_value(value).unwrap();
    let back: T = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(&back, value);
    let mut extra = json;
    extra
        .as_object_mut()
        .unwrap()
        .insert("no_such_option".into(), 1.into());
    let parsed = serde_json::from_value::<T>(extra);
    assert!(
        parsed.is_err(),
        "{} took an unknown field",
        std::any::type_name::<T>()
    );
}

#[test]
fn every_option_struct_round_trips_through_serde() {
    round_trips(&DirOptions::default().with_sync(SyncMode::Relaxed));
    round_trips(&DirFollowerOptions::default().with_poll_interval(Duration::from_millis(7)));
    round_trips(
        &BucketOptions::default()
            .with_take_over(true)
            .with_writer_name(Some("orders".into())),
    );
    round_trips(&BucketFollowerOptions::default().with_prefetch(3));
    round_trips(
        &RetentionPolicy::default()
            .with_max_count(Some(4))
            .with_protect_consumers(vec!["billing".into()]),
    );
    round_trips(&ProducerOptions::default().with_manifest_batch(5));
    round_trips(&RetryPolicy::default().with_max_attempts(2));
    round_trips(&CheckpointPolicy::default().with_fanout(3));
    round_trips(&S3Settings::default().with_bucket("b".into()));
    round_trips(&AzureSettings::default().with_container("c".into()));
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_options_round_trip_through_serde() {
    use weft::storage::postgres::PgOptions;
    round_trips(&PgOptions::default().with_pool_size(3));
}

#[test]
fn a_config_file_names_only_what_it_changes() {
    // Every field has a default: a document with one setting is complete.
    let dir: DirOptions = serde_json::from_str(r#"{"sync": "relaxed"}"#).unwrap();
    assert_eq!(dir, DirOptions::default().with_sync(SyncMode::Relaxed));
    let bucket: BucketOptions = serde_json::from_str(r#"{"take_over": true}"#).unwrap();
    assert_eq!(bucket, BucketOptions::default().with_take_over(true));
}

#[test]
fn setters_set_the_field_they_name_and_nothing_else() {
    let options = BucketOptions::default()
        .with_flush_bytes(1234)
        .with_retry(RetryPolicy::never());
    assert_eq!(options.flush_bytes, 1234);
    assert_eq!(options.retry, RetryPolicy::never());
    let mut expected = BucketOptions::default();
    expected.flush_bytes = 1234;
    expected.retry = RetryPolicy::never();
    assert_eq!(options, expected);
}
