//! The unchanged conformance suite, on a client of a server in this
//! process, with the memory and dir backends behind the server.

mod support;

weft_testkit::conformance_suite!(memory, || async {
    support::served(weft::Log::memory(), "memory", ()).await
});

weft_testkit::conformance_suite!(dir, || async {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = weft::DirStorage::open(dir.path())
        .await
        .expect("open dir log");
    support::served(weft::Log::new(storage), "dir", dir).await
});
