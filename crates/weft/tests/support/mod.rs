//! Helpers shared by weft's integration tests (included with `mod support;`).

#![allow(dead_code, unreachable_pub)]

pub mod append_id_cases;
pub mod azure;
pub mod bucket_cache_cases;
pub mod bucket_log_cases;
pub mod bucket_retention_cases;
pub mod bucket_states_cases;
pub mod common;
pub mod dir;
pub mod gc_cases;
pub mod history_cases;
#[cfg(feature = "server-tests")]
pub mod pg;
pub mod producer_cases;
pub mod s3;
pub mod snapshot_cases;
pub mod stamped;
pub mod store_cases;
pub mod wal;
pub mod writer_lease_cases;
