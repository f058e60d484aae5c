//! The `weft` command's server tier (`--features server-tests`): SeaweedFS,
//! Azurite, PostgreSQL, headless Chromium and a Python client, as
//! `scripts/test.sh` starts them, in one binary.

#[path = "../support/mod.rs"]
mod support;

mod azure;
mod console_browser;
mod no_effect;
mod postgres;
mod python_client;
mod s3;
mod serve_failover;
