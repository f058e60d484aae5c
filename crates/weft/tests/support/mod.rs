//! Helpers shared by weft's integration tests (included with `mod support;`).

#![allow(dead_code, unreachable_pub)]

pub mod azure;
pub mod producer_cases;
pub mod s3;
pub mod stamped;
pub mod store_cases;
pub mod wal;
