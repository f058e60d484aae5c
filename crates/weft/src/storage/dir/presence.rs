//! Whether a directory holds a log, for callers that must not create one
//! by opening it (a follower, a check, the CLI's read-only commands).

use std::path::Path;

use super::{recovery, scan, trim};
use crate::error::{Error, ErrorKind, Result};

/// `Ok` when `dir` is a directory holding a log: a segment, the trim file,
/// the KV directory the writer creates on open, or the `LOCK` file of an
/// earlier build. For callers that must not create a log by opening one.
///
/// Errors: `NotFound` when there is no such directory or it holds no log;
/// `InvalidInput` when `dir` is not a directory; I/O kinds.
pub fn require_log(dir: &Path) -> Result<()> {
    let handle = super::lock::open_dir(dir).map_err(|e| {
        if e.kind() == ErrorKind::NotFound {
            Error::new(
                ErrorKind::NotFound,
                format!("no log at {}: the directory does not exist", dir.display()),
            )
        } else {
            e
        }
    })?;
    drop(handle);
    let (firsts, _) = scan::list(dir)?;
    let marked = ["kv", trim::FILE_NAME, "LOCK", recovery::INDEX_DIR]
        .iter()
        .any(|name| dir.join(name).exists());
    if firsts.is_empty() && !marked {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "no log at {}: the directory holds no weft log",
                dir.display()
            ),
        ));
    }
    Ok(())
}
