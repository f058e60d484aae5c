//! The local tier: every test of the crate that needs no server, in one
//! binary, so the crate is linked into one test executable instead of one
//! per file. Each module is one file of scenarios; `support/` is the one
//! helper tree every tier shares.

#[path = "../support/mod.rs"]
mod support;

/// The fuzz targets' bodies (`fuzz/src/lib.rs`), which the corpus replay
/// and the settings properties run on stable.
#[path = "../../../../fuzz/src/lib.rs"]
#[allow(unreachable_pub, dead_code)]
mod fuzz_bodies;

mod bad_input;
mod bit_flips;
mod bucket_append_ids;
mod bucket_cache;
mod bucket_judgement;
mod bucket_kv;
mod bucket_log;
mod bucket_retention;
mod bucket_states;
mod bucket_tamper;
mod conformance_memory;
mod connect_settings;
mod deadlines;
mod dir_append_ids;
mod dir_backend;
mod dir_conformance;
mod dir_errors;
mod dir_follower;
mod dir_group_commit;
mod dir_index;
mod dir_judgement;
mod dir_kv;
mod dir_lock;
mod dir_recovery;
mod dir_reopen;
mod dir_tamper;
mod examples;
mod exec_checkpoint;
mod exec_engine;
mod format_compat;
mod format_fixtures;
mod format_malformed;
mod format_props;
mod fuzz_corpus;
mod gc;
mod history;
mod kv_claims;
mod kv_lease;
mod log_index;
mod options;
mod producer;
mod replica;
mod retention;
mod simulation;
mod snapshot;
mod storage_seam;
mod time_seek;
mod writer_lease;
