//! The conformance suite on the `dir` backend: every check on a fresh,
//! really fsynced log directory.

use weft::Log;
use weft::conformance::Fixture;
use weft::storage::dir::DirStorage;

weft::conformance_suite!(dir, || async {
    let tmp = tempfile::tempdir().expect("tempdir");
    let storage = DirStorage::open(tmp.path())
        .await
        .expect("open log directory");
    Fixture::new(Log::new(storage)).with_guard(tmp)
});
