//! The conformance suite on the `dir` backend: every check on a fresh,
//! really fsynced log directory.

use weft::Log;
use weft::storage::dir::DirStorage;
use weft_testkit::conformance::Fixture;

weft_testkit::conformance_suite!(dir, || async {
    let tmp = tempfile::tempdir().expect("tempdir");
    let storage = DirStorage::open(tmp.path())
        .await
        .expect("open log directory");
    Fixture::new(Log::new(storage)).with_guard(tmp)
});
