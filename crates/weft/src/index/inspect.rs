//! Looking at an index without touching it: [`inspect`] copies the index
//! directory (while holding fjall's own lock, so no handle writes it
//! meanwhile) and opens the copy. Opening a fjall database writes to it
//! (its journal, table files on close), and a check of a log promises to
//! change no file; the copy costs the index's size, less than the log a
//! check reads anyway.

use std::fs::{File, TryLockError};
use std::path::Path;

use super::{Index, IndexOptions, store::STORE_DIR};
use crate::error::{Error, Result};

/// Runs `f` on a copy of the index in `dir` when it is there and sound for
/// the log `identity` (`None`: missing, or one [`Index::open`] would start
/// afresh). Changes nothing in `dir`.
///
/// Errors: `Locked` when a handle has the index open; `f`'s; I/O kinds.
pub fn inspect<T>(
    dir: &Path,
    identity: &[u8],
    f: impl FnOnce(&Index) -> Result<T>,
) -> Result<Option<T>> {
    let store = dir.join(STORE_DIR);
    if !store.is_dir() {
        return Ok(None);
    }
    let lock_path = store.join("lock");
    let lock = File::open(&lock_path)
        .map_err(|e| Error::io(format!("open {}", lock_path.display()), e))?;
    match lock.try_lock_shared() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(Error::new(
                crate::error::ErrorKind::Locked,
                format!("the log index in {} is in use", dir.display()),
            ));
        }
        Err(TryLockError::Error(e)) => {
            return Err(Error::io(format!("lock {}", lock_path.display()), e));
        }
    }
    let copy = tempfile::Builder::new()
        .prefix("weft-index-check-")
        .tempdir()
        .map_err(|e| Error::io("make a directory for a copy of the log index", e))?;
    copy_tree(dir, copy.path())?;
    drop(lock);
    let Some(index) = Index::open_if_sound(copy.path(), identity, IndexOptions::for_inspection())?
    else {
        return Ok(None);
    };
    let outcome = f(&index);
    index.discard();
    outcome.map(Some)
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let entries =
        std::fs::read_dir(from).map_err(|e| Error::io(format!("list {}", from.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("list {}", from.display()), e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry
            .file_type()
            .map_err(|e| Error::io(format!("stat {}", src.display()), e))?;
        if kind.is_dir() {
            std::fs::create_dir(&dst)
                .map_err(|e| Error::io(format!("create {}", dst.display()), e))?;
            copy_tree(&src, &dst)?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst)
                .map_err(|e| Error::io(format!("copy {}", src.display()), e))?;
        }
    }
    Ok(())
}
