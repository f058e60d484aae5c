//! Small filesystem steps the backend relies on for crash safety: syncing a
//! directory, and replacing a file atomically.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Suffix of files being written before an atomic rename; any left over
/// from a crash are removed on open.
pub(super) const TEMP_SUFFIX: &str = ".tmp";

/// Makes the creation, rename or removal of entries of `dir` durable.
///
/// Errors: the I/O error's kind (see [`Error::io`]).
pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("sync directory {}", dir.display()), e))
}

/// Replaces `dir/name` with `bytes` so that after a crash the file holds
/// either its old content or `bytes`, never a mix: write a temporary file,
/// sync it, rename it over the target, sync the directory.
///
/// Errors: the I/O error's kind.
pub(super) fn replace_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let target = dir.join(name);
    let temp = dir.join(format!("{name}{TEMP_SUFFIX}"));
    let io = |what: &str, e| Error::io(format!("{what} {}", temp.display()), e);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)
        .map_err(|e| io("create", e))?;
    file.write_all(bytes).map_err(|e| io("write", e))?;
    file.sync_data().map_err(|e| io("sync", e))?;
    drop(file);
    fs::rename(&temp, &target)
        .map_err(|e| Error::io(format!("rename into {}", target.display()), e))?;
    sync_dir(dir)
}

/// Removes `path`, treating an already missing file as removed.
///
/// Errors: the I/O error's kind.
pub(super) fn remove_file(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("remove {}", path.display()), e)),
    }
}
