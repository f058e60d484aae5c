//! The trim file on disk: loading it and replacing it atomically. Its byte
//! layout is [`crate::format::trim_point`].

use std::path::Path;

use super::fsutil;
use crate::error::{Error, Result};
pub(super) use crate::format::trim_point::TrimPoint;

/// The trim file's name inside the log directory.
pub(super) const FILE_NAME: &str = "trim";

/// Reads the trim point of `dir`; `None` when the log was never trimmed.
///
/// Errors: `Corrupt` for a damaged file; I/O kinds.
pub(super) fn load(dir: &Path) -> Result<Option<TrimPoint>> {
    let path = dir.join(FILE_NAME);
    match std::fs::read(&path) {
        Ok(bytes) => TrimPoint::decode(&bytes)
            .map(Some)
            .map_err(|e| e.context(path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("read {}", path.display()), e)),
    }
}

/// Makes `point` durable, replacing the previous trim point atomically.
///
/// Errors: I/O kinds.
pub(super) fn store(dir: &Path, point: &TrimPoint) -> Result<()> {
    fsutil::replace_atomically(dir, FILE_NAME, &point.encode())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_and_load() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
        let t = TrimPoint {
            through: 5,
            next_versions: vec![("x".parse().unwrap(), 6)],
        };
        store(dir.path(), &t).unwrap();
        assert_eq!(load(dir.path()).unwrap(), Some(t));
        assert!(!dir.path().join("trim.tmp").exists());
    }
}
