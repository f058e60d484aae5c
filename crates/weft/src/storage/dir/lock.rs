//! The single-writer lock: an OS advisory lock (`flock(2)`) on the log
//! directory itself, and a check that the path still names that directory.
//!
//! The lock is held by the open file description of the directory (opened
//! `O_RDONLY | O_DIRECTORY`), so it conflicts with a second open in the same
//! process as well as in another one, and the OS drops it when the process
//! dies: nothing left behind by a crash ever blocks a reopen. It guards
//! the directory's inode, which no file operation inside the directory can
//! swap: deleting or replacing any file in it (earlier builds locked a
//! `LOCK` file, which deleting let a second writer in) does not release it.
//!
//! What can still happen underneath is the directory itself being renamed
//! or removed and another one created at its path; a second writer then
//! locks the new inode. So before every write the writer checks that the
//! path still resolves to the locked directory ([`DirLock::check`]), and
//! stops writing when it does not, rather than spread one log over two
//! directories.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use fs4::fs_std::FileExt;

use crate::error::{Error, ErrorKind, Result};

/// Holds the directory lock until dropped.
#[derive(Debug)]
pub(super) struct DirLock {
    _handle: File,
    identity: DirIdentity,
}

/// Which directory a path named when it was locked (device and inode).
#[derive(Debug, Clone)]
pub(super) struct DirIdentity {
    dir: PathBuf,
    dev: u64,
    ino: u64,
}

impl DirLock {
    /// Takes the lock of `dir` without waiting.
    ///
    /// Errors: `Locked` when another handle holds it; `InvalidInput` when
    /// `dir` is not a directory; I/O kinds.
    pub(super) fn acquire(dir: &Path) -> Result<DirLock> {
        let handle = open_dir(dir)?;
        let meta = handle
            .metadata()
            .map_err(|e| Error::io(format!("stat {}", dir.display()), e))?;
        let locked = handle
            .try_lock_exclusive()
            .map_err(|e| Error::io(format!("lock {}", dir.display()), e))?;
        if !locked {
            return Err(Error::new(
                ErrorKind::Locked,
                format!(
                    "the log directory {} is already open for writing",
                    dir.display()
                ),
            ));
        }
        Ok(DirLock {
            _handle: handle,
            identity: DirIdentity {
                dir: dir.to_path_buf(),
                dev: meta.dev(),
                ino: meta.ino(),
            },
        })
    }

    /// The locked directory's identity, to check from elsewhere.
    pub(super) fn identity(&self) -> &DirIdentity {
        &self.identity
    }
}

impl DirIdentity {
    /// `Ok` while the directory's path still names the locked directory.
    ///
    /// Errors: `Closed` when it was moved, removed or replaced (the writer
    /// must stop); I/O kinds when it cannot be looked at.
    pub(super) fn check(&self) -> Result<()> {
        let now = match std::fs::metadata(&self.dir) {
            Ok(meta) => Some((meta.dev(), meta.ino())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(format!("stat {}", self.dir.display()), e)),
        };
        if now == Some((self.dev, self.ino)) {
            return Ok(());
        }
        Err(Error::closed(format!(
            "the log directory {} was moved, removed or replaced while this handle had it \
             open; it stops writing so the log does not continue in another directory",
            self.dir.display()
        )))
    }
}

/// Opens `dir` as a directory (`O_DIRECTORY`: a file there is refused).
///
/// Errors: `InvalidInput` (not a directory), `NotFound`, I/O kinds.
pub(super) fn open_dir(dir: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)
        .map_err(|e| {
            let err = Error::io(format!("open {}", dir.display()), e);
            if err.kind() == ErrorKind::InvalidInput {
                Error::invalid_input(format!(
                    "{} is not a directory; a dir log is a directory",
                    dir.display()
                ))
                .with_source(err)
            } else {
                err
            }
        })
}
