//! The producer against the real Azurite (Azure Blob) test server. The test bodies
//! are shared with the other stores' producer tests
//! (`support::producer_cases`).
//!
//! Needs `scripts/azurite.sh start` and its env file sourced
//! (`scripts/test.sh` does both); every test fails otherwise. Each test
//! works under its own key prefix.

use crate::support;

use support::{azure, producer_cases};

#[tokio::test]
async fn appends_round_trip_through_the_bucket() {
    producer_cases::appends_round_trip_through_the_bucket(azure::store("producer_round_trip").0)
        .await;
}

#[tokio::test]
async fn a_second_producer_fences_the_first() {
    producer_cases::a_second_producer_fences_the_first(azure::store("producer_fencing").0).await;
}

#[tokio::test]
async fn racing_opens_get_distinct_epochs_and_only_the_last_commits() {
    producer_cases::racing_opens_get_distinct_epochs_and_only_the_last_commits(
        azure::store("producer_race").0,
    )
    .await;
}

#[tokio::test]
async fn concurrent_appends_coalesce_with_correct_sequences() {
    producer_cases::concurrent_appends_coalesce_with_correct_sequences(
        azure::store("producer_concurrent").0,
    )
    .await;
}

#[tokio::test]
async fn slow_uploads_commit_in_order_and_conflicts_are_retried() {
    producer_cases::slow_uploads_commit_in_order_and_conflicts_are_retried(
        azure::store("producer_faults").0,
    )
    .await;
}

#[tokio::test]
async fn exhausted_retries_halt_and_every_waiter_errors() {
    producer_cases::exhausted_retries_halt_and_every_waiter_errors(
        azure::store("producer_exhausted").0,
    )
    .await;
}

#[tokio::test]
async fn empty_and_oversized_appends_are_refused() {
    producer_cases::empty_and_oversized_appends_are_refused(azure::store("producer_bad_appends").0)
        .await;
}

#[tokio::test]
async fn wrong_credentials_fail_open_with_permission_denied() {
    let (_, settings) = azure::store("producer_wrong_credentials");
    producer_cases::wrong_credentials_fail_open_with_permission_denied(azure::wrong_credentials(
        &settings,
    ))
    .await;
}

#[tokio::test]
async fn an_unreachable_endpoint_fails_open_with_unavailable() {
    let (_, settings) = azure::store("producer_unreachable");
    producer_cases::an_unreachable_endpoint_fails_open_with_unavailable(azure::unreachable(
        &settings,
    ))
    .await;
}
