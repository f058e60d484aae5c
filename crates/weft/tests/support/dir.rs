//! Helpers shared by the `dir_*` integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use weft::storage::dir::{DirOptions, DirStorage};
use weft::{Log, LogTag};

pub fn tag(s: &str) -> LogTag {
    s.parse().expect("valid tag")
}

/// Opens `dir` and returns the typed handle and a `Log` over it.
pub async fn open(dir: &Path) -> (Arc<DirStorage>, Log) {
    open_with(dir, DirOptions::default()).await
}

pub async fn open_with(dir: &Path, options: DirOptions) -> (Arc<DirStorage>, Log) {
    let storage = Arc::new(
        DirStorage::open_with(dir, options)
            .await
            .expect("open log directory"),
    );
    let log = Log::from_arc(storage.clone());
    (storage, log)
}

/// Options with small segments, so a test crosses segment boundaries.
pub fn small_segments() -> DirOptions {
    DirOptions::default().with_segment_bytes(4096)
}

/// The segment files of `dir`, in log order.
pub fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    out.sort();
    out
}

pub fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).expect("stat").len()
}

/// Copies every regular file of `from` (not subdirectories other than
/// `kv`) into a fresh temporary directory.
pub fn copy_dir(from: &Path) -> tempfile::TempDir {
    let to = tempfile::tempdir().expect("tempdir");
    copy_into(from, to.path());
    to
}

fn copy_into(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_into(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// A payload that differs per `i` and has a length that varies with it.
pub fn payload(i: u64) -> Vec<u8> {
    let len = 1 + (i * 37 % 200) as usize;
    (0..len).map(|j| (i as usize * 31 + j * 7) as u8).collect()
}
