//! The durable per-view KV of the `dir` backend.
//!
//! Keys live in small *bucket* files under `<dir>/kv/`, named by a 64-bit
//! FNV-1a hash of scope and key: `<hash as 16 hex digits>.kv`. A bucket
//! holds every (scope, key) whose hash collides, normally just one, so no
//! key length or character ever reaches a file name. A write rewrites its
//! bucket atomically (temporary file, fsync, rename, fsync of the
//! directory): after a crash a bucket holds its old or its new content.
//! Compare-and-set is atomic under one mutex, which is sound because the
//! directory lock admits a single process.
//!
//! The bucket file's byte layout is [`crate::format::dir_kv`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;

use super::fsutil::{self, TEMP_SUFFIX};
use super::lock::DirIdentity;
use crate::error::{Error, ErrorKind, Result};
use crate::format::dir_kv::{
    KvBucket as Bucket, decode_kv_bucket as decode, encode_kv_bucket as encode,
};
use crate::kv::{self, KvStore};
use crate::model::LogTag;

/// A KV whose keys are files in a directory (see the module docs).
#[derive(Debug, Clone)]
pub struct DirKv {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    /// The log directory this KV lives in, checked before every write so
    /// a directory swapped under the lock is never written (see
    /// [`super::lock`]).
    log_dir: Option<DirIdentity>,
    /// A follower's view: every write is refused.
    read_only: bool,
    /// Serialises every read-modify-write.
    write: Mutex<()>,
}

impl DirKv {
    /// Opens (creating it if needed) the KV directory `dir`, removing
    /// temporary files a crash left behind. The caller must hold the log
    /// directory's lock.
    ///
    /// Errors: I/O kinds.
    pub(super) fn open(dir: &Path, log_dir: DirIdentity) -> Result<DirKv> {
        DirKv::open_in(dir, Some(log_dir))
    }

    fn open_in(dir: &Path, log_dir: Option<DirIdentity>) -> Result<DirKv> {
        let created = !dir.exists();
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        if created && let Some(parent) = dir.parent() {
            fsutil::sync_dir(parent)?;
        }
        let listing =
            std::fs::read_dir(dir).map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
        let mut removed = false;
        for entry in listing {
            let entry = entry.map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
            if entry.file_name().to_string_lossy().ends_with(TEMP_SUFFIX) {
                fsutil::remove_file(&entry.path())?;
                removed = true;
            }
        }
        if removed {
            fsutil::sync_dir(dir)?;
        }
        Ok(DirKv {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                log_dir,
                read_only: false,
                write: Mutex::new(()),
            }),
        })
    }

    /// A read-only view of the KV directory `dir`, for a follower: reads
    /// see what the writer last stored (a missing directory reads as
    /// empty); writes fail with `ReadOnly`. Touches nothing.
    pub(super) fn open_read_only(dir: &Path) -> DirKv {
        DirKv {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                log_dir: None,
                read_only: true,
                write: Mutex::new(()),
            }),
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| Error::internal(format!("kv task failed: {e}")))?
    }
}

/// FNV-1a, 64 bits: stable across builds and platforms, which file names
/// must be.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Then a 0 byte, which no tag or key contains (they exclude control
        // characters), so the parts cannot run into each other.
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn bucket_name(scope: &LogTag, key: &str) -> String {
    let scope = scope.to_string();
    format!("{:016x}.kv", fnv1a(&[scope.as_bytes(), key.as_bytes()]))
}

impl Inner {
    fn load(&self, name: &str) -> Result<Bucket> {
        let path = self.dir.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => decode(&bytes).map_err(|e| e.context(path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(Error::io(format!("read {}", path.display()), e)),
        }
    }

    fn get(&self, scope: &LogTag, key: &str) -> Result<Option<Bytes>> {
        let bucket = self.load(&bucket_name(scope, key))?;
        Ok(bucket
            .into_iter()
            .find(|(s, k, _)| s == scope && k == key)
            .map(|(_, _, v)| v))
    }

    /// Sets `key` to `new` if its value is `expected` (or unconditionally
    /// when `check` is false). True when it wrote.
    fn update(
        &self,
        scope: &LogTag,
        key: &str,
        check: bool,
        expected: Option<&[u8]>,
        new: Option<Bytes>,
    ) -> Result<bool> {
        if self.read_only {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                "this is a follower's read-only view of the KV; write through the log's writer",
            ));
        }
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(log_dir) = &self.log_dir {
            log_dir.check()?;
        }
        let name = bucket_name(scope, key);
        let mut bucket = self.load(&name)?;
        let at = bucket.iter().position(|(s, k, _)| s == scope && k == key);
        let current = at.map(|i| bucket[i].2.as_ref());
        if check && current != expected {
            return Ok(false);
        }
        match (at, new) {
            (Some(i), Some(v)) => bucket[i].2 = v,
            (None, Some(v)) => bucket.push((scope.clone(), key.to_owned(), v)),
            (Some(i), None) => {
                bucket.swap_remove(i);
            }
            (None, None) => return Ok(true),
        }
        if bucket.is_empty() {
            fsutil::remove_file(&self.dir.join(&name))?;
            fsutil::sync_dir(&self.dir)?;
        } else {
            fsutil::replace_atomically(&self.dir, &name, &encode(&bucket))?;
        }
        Ok(true)
    }
}

#[async_trait]
impl KvStore for DirKv {
    async fn get(&self, scope: &LogTag, key: &str) -> Result<Option<Bytes>> {
        kv::validate(key, None)?;
        let (scope, key) = (scope.clone(), key.to_owned());
        self.blocking(move |inner| inner.get(&scope, &key)).await
    }

    async fn put(&self, scope: &LogTag, key: &str, value: Option<Bytes>) -> Result<()> {
        kv::validate(key, value.as_deref())?;
        let (scope, key) = (scope.clone(), key.to_owned());
        self.blocking(move |inner| inner.update(&scope, &key, false, None, value).map(|_| ()))
            .await
    }

    async fn compare_and_set(
        &self,
        scope: &LogTag,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Bytes>,
    ) -> Result<bool> {
        kv::validate(key, new.as_deref())?;
        let (scope, key) = (scope.clone(), key.to_owned());
        let expected = expected.map(Bytes::copy_from_slice);
        self.blocking(move |inner| inner.update(&scope, &key, true, expected.as_deref(), new))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_and_separate_scope_from_key() {
        let t: LogTag = "view".parse().unwrap();
        assert_eq!(bucket_name(&t, "k"), bucket_name(&t, "k"));
        assert_ne!(bucket_name(&t, "k1"), bucket_name(&t, "k2"));
        // "view" + "ab" must not hash like "viewa" + "b".
        let t2: LogTag = "viewa".parse().unwrap();
        assert_ne!(bucket_name(&t, "ab"), bucket_name(&t2, "b"));
        // Pinned: the name is part of the on-disk format.
        assert_eq!(fnv1a(&[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(&[b"a"]), {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            h ^= u64::from(b'a');
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
            h.wrapping_mul(0x0000_0100_0000_01b3)
        });
    }

    #[test]
    fn colliding_keys_share_a_bucket_without_interfering() {
        let dir = tempfile::tempdir().unwrap();
        let kv = DirKv::open_in(&dir.path().join("kv"), None).unwrap();
        let scope: LogTag = "s".parse().unwrap();
        // Force two keys into one bucket by writing it by hand.
        let name = bucket_name(&scope, "one");
        let bucket: Bucket = vec![
            (scope.clone(), "one".into(), Bytes::from_static(b"1")),
            (scope.clone(), "two".into(), Bytes::from_static(b"2")),
        ];
        std::fs::write(kv.inner.dir.join(&name), encode(&bucket)).unwrap();
        assert_eq!(
            kv.inner.get(&scope, "one").unwrap().as_deref(),
            Some(&b"1"[..])
        );
        assert!(
            kv.inner
                .update(&scope, "one", true, Some(b"1"), None)
                .unwrap()
        );
        assert_eq!(kv.inner.get(&scope, "one").unwrap(), None);
        let left = decode(&std::fs::read(kv.inner.dir.join(&name)).unwrap()).unwrap();
        assert_eq!(
            left,
            vec![(scope.clone(), "two".into(), Bytes::from_static(b"2"))]
        );
    }
}
