//! The object-store server tier (`--features server-tests`): the tests
//! that talk to the SeaweedFS and Azurite servers `scripts/test.sh` starts,
//! in one binary. Without the servers they fail, never skip (see
//! `support/s3.rs`). The tests that stop or kill the server are binaries
//! of their own (`server_kill.rs`, `server_pause.rs`), so no test here
//! meets it down.

#[path = "../support/mod.rs"]
mod support;

mod azure_store;
mod bucket_append_ids_azure;
mod bucket_append_ids_s3;
mod bucket_cache_s3;
mod bucket_log_azure;
mod bucket_log_s3;
mod bucket_retention_s3;
mod gc_s3;
mod history_s3;
mod producer_azure;
mod producer_s3;
mod s3_store;
mod snapshot_s3;
mod writer_lease_s3;
