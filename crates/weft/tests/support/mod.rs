//! Helpers shared by weft's integration tests (included with `mod support;`).

#![allow(dead_code, unreachable_pub)]

pub mod s3;
pub mod wal;
