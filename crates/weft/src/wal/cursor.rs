//! Where a replica is in the log, and where it keeps that between runs.
//! The cursor's byte layout is `crate::format::replica_cursor`.
//!
//! A [`Cursor`] names the next record to apply: the manifest entry (by its
//! sequence) and the record's index inside that entry's segment. It works
//! for both numbering schemes of the manifest (per-entry sequences in v1/v2,
//! per-record sequences in v3/v4) and is exact to the record, so a replica
//! whose applier failed in the middle of a segment resumes at the failed
//! record, not at the start of the segment.
//!
//! Cursor stores: [`MemoryCursorStore`], [`FileCursorStore`] (a local file,
//! atomically replaced and fsynced) and [`ObjectCursorStore`] (an object in
//! the bucket, owned by one replica).

use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use object_store::ObjectStore;
use object_store::path::Path;

use crate::error::{Error, ErrorKind, Result};
pub use crate::format::replica_cursor::Cursor;
use crate::format::replica_cursor::{decode_cursor, encode_cursor};
use crate::objects::outcome::{self, StoreOp};

/// Keeps a replica's cursor between runs.
#[async_trait]
pub trait CursorStore: Send + Sync + 'static {
    /// The saved cursor, `None` when the replica never committed one.
    async fn load(&self) -> Result<Option<Cursor>>;

    /// Saves `cursor` durably (for this store's notion of durable).
    async fn save(&self, cursor: Cursor) -> Result<()>;
}

/// A cursor in memory: lost with the process.
#[derive(Debug, Default, Clone)]
pub struct MemoryCursorStore {
    cursor: Arc<Mutex<Option<Cursor>>>,
}

impl MemoryCursorStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryCursorStore::default()
    }
}

#[async_trait]
impl CursorStore for MemoryCursorStore {
    async fn load(&self) -> Result<Option<Cursor>> {
        Ok(*self.cursor.lock().expect("cursor lock"))
    }

    async fn save(&self, cursor: Cursor) -> Result<()> {
        *self.cursor.lock().expect("cursor lock") = Some(cursor);
        Ok(())
    }
}

/// A cursor in a local file, replaced atomically: written to a temporary
/// file, fsynced, renamed over the old one, and the directory fsynced, so a
/// crash leaves either the old or the new cursor, never a torn one.
#[derive(Debug, Clone)]
pub struct FileCursorStore {
    path: PathBuf,
}

impl FileCursorStore {
    /// A store at `path` (its directory must exist).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileCursorStore { path: path.into() }
    }
}

/// Writes `bytes` to `path` atomically (temp file, fsync, rename, fsync dir).
pub(crate) fn atomic_write(path: &FsPath, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(FsPath::new("."));
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = dir.join(tmp_name);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

#[async_trait]
impl CursorStore for FileCursorStore {
    async fn load(&self) -> Result<Option<Cursor>> {
        let path = self.path.clone();
        let read = tokio::task::spawn_blocking(move || std::fs::read(path))
            .await
            .map_err(|e| Error::internal(format!("cursor read task failed: {e}")))?;
        match read {
            Ok(bytes) => decode_cursor(&bytes)
                .map(Some)
                .map_err(|e| e.context(format!("cursor file {}", self.path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(
                format!("reading cursor {}", self.path.display()),
                e,
            )),
        }
    }

    async fn save(&self, cursor: Cursor) -> Result<()> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || atomic_write(&path, &encode_cursor(cursor)))
            .await
            .map_err(|e| Error::internal(format!("cursor write task failed: {e}")))?
            .map_err(|e| Error::io(format!("writing cursor {}", self.path.display()), e))
    }
}

/// A cursor kept as an object in the bucket. Each replica must use its own
/// path: the object is overwritten without a condition.
#[derive(Debug, Clone)]
pub struct ObjectCursorStore {
    store: Arc<dyn ObjectStore>,
    path: Path,
}

impl ObjectCursorStore {
    /// A store at `path` in `store`.
    pub fn new(store: Arc<dyn ObjectStore>, path: Path) -> Self {
        ObjectCursorStore { store, path }
    }
}

#[async_trait]
impl CursorStore for ObjectCursorStore {
    async fn load(&self) -> Result<Option<Cursor>> {
        match self.store.get(&self.path).await {
            Ok(got) => {
                let bytes = got
                    .bytes()
                    .await
                    .map_err(|e| outcome::to_error(StoreOp::Read, self.path.as_ref(), e))?;
                decode_cursor(&bytes).map(Some)
            }
            Err(e) => {
                let err = outcome::to_error(StoreOp::Read, self.path.as_ref(), e);
                if err.kind() == ErrorKind::NotFound {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }

    async fn save(&self, cursor: Cursor) -> Result<()> {
        self.store
            .put(&self.path, encode_cursor(cursor).into())
            .await
            .map(|_| ())
            .map_err(|e| outcome::to_error(StoreOp::Put, self.path.as_ref(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn file_store_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("replica.cursor");
        let store = FileCursorStore::new(&path);
        assert_eq!(store.load().await.unwrap(), None);
        store.save(Cursor::at_entry(5)).await.unwrap();
        let again = FileCursorStore::new(&path);
        assert_eq!(again.load().await.unwrap(), Some(Cursor::at_entry(5)));
        std::fs::write(&path, b"garbage").unwrap();
        assert_eq!(again.load().await.unwrap_err().kind(), ErrorKind::Corrupt);
    }
}
