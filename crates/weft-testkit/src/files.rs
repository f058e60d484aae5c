//! The files under a directory, for tests that damage a log's files or
//! check that a command left them untouched.

use std::path::{Path, PathBuf};

/// Every file under `dir`, at any depth, sorted.
///
/// Panics (it is test code) when a directory cannot be listed.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let listing = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("list {}: {e}", d.display()));
        for entry in listing {
            let path = entry
                .unwrap_or_else(|e| panic!("list {}: {e}", d.display()))
                .path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Every file under `dir` with its bytes, sorted by path: a snapshot to
/// compare before and after something that must not write.
///
/// Panics (it is test code) when a file cannot be read.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    files_under(dir)
        .into_iter()
        .map(|path| {
            let bytes =
                std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            (path, bytes)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_files_are_found_and_read() {
        let tmp = std::env::temp_dir().join(format!("weft-testkit-files-{}", std::process::id()));
        std::fs::create_dir_all(tmp.join("a/b")).unwrap();
        std::fs::write(tmp.join("top"), b"1").unwrap();
        std::fs::write(tmp.join("a/b/deep"), b"22").unwrap();
        let snap = snapshot(&tmp);
        assert_eq!(
            snap,
            vec![
                (tmp.join("a/b/deep"), b"22".to_vec()),
                (tmp.join("top"), b"1".to_vec())
            ]
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
