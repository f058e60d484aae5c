//! The single-writer lock: an OS advisory lock on `<dir>/LOCK`.
//!
//! The lock is `flock(2)`, held by the open file description, so it
//! conflicts with a second open in the same process as well as in another
//! one, and the OS drops it when the process dies: a `LOCK` file left
//! behind by a crash never blocks a reopen. It is the lock, not the file's
//! existence, that guards the directory.

use std::fs::{File, OpenOptions};
use std::path::Path;

use fs4::fs_std::FileExt;

use crate::error::{Error, ErrorKind, Result};

/// The lock file's name inside the log directory.
pub(super) const FILE_NAME: &str = "LOCK";

/// Holds the directory lock until dropped.
#[derive(Debug)]
pub(super) struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock of `dir` without waiting.
    ///
    /// Errors: `Locked` when another handle holds it; I/O kinds.
    pub(super) fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(FILE_NAME);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(format!("open lock file {}", path.display()), e))?;
        let locked = file
            .try_lock_exclusive()
            .map_err(|e| Error::io(format!("lock {}", path.display()), e))?;
        if !locked {
            return Err(Error::new(
                ErrorKind::Locked,
                format!(
                    "the log directory {} is already open for writing",
                    dir.display()
                ),
            ));
        }
        Ok(DirLock { _file: file })
    }
}
