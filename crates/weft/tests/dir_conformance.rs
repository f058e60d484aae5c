//! The conformance suite on the dir backend, each test in its own
//! temporary directory (really fsynced).

use weft::conformance::Fixture;
use weft::{DirStorage, Log};

weft::conformance_suite!(dir, || async {
    let dir = tempfile::tempdir().expect("temp dir");
    let storage = DirStorage::open(dir.path()).await.expect("open dir log");
    Fixture::new(Log::new(storage)).with_guard(dir)
});
