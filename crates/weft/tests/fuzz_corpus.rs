//! Runs the fuzz targets' bodies (shared with `fuzz/`) over the committed
//! corpus, so their checks are part of `cargo test` on stable.
//!
//! Corpus files named `bad_*` must be rejected; every other file is a valid
//! object and must decode, re-encode and decode to the same value.

#[path = "../../../fuzz/src/lib.rs"]
#[allow(unreachable_pub)]
mod fuzz_bodies;

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} missing: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    assert!(files.len() >= 3, "corpus {} is nearly empty", dir.display());
    files
}

fn run(target: &str, body: fn(&[u8]) -> bool) {
    for (name, bytes) in corpus(target) {
        let decoded = body(&bytes);
        assert_eq!(decoded, !name.starts_with("bad_"), "{target}/{name}");
        // Every prefix too: the cheapest slice of what the fuzzer explores.
        for len in 0..bytes.len() {
            body(&bytes[..len]);
        }
    }
}

#[test]
fn segment_decode_target_over_its_corpus() {
    run("segment_decode", fuzz_bodies::segment_decode);
}

#[test]
fn manifest_decode_target_over_its_corpus() {
    run("manifest_decode", fuzz_bodies::manifest_decode);
}
