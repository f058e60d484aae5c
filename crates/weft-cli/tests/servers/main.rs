//! The `weft` command's server tier (`--features server-tests`): SeaweedFS,
//! Azurite, PostgreSQL, headless Chromium and a Python client, as
//! `scripts/test.sh` starts them, in one binary.

#[path = "../support/mod.rs"]
mod support;

mod azure;
mod console_browser;
mod no_effect;
mod pg_pause;
mod postgres;
mod python_client;
mod s3;
mod s3_pause;
mod serve_failover;
