//! A read-only view of any object store.
//!
//! [`ReadOnlyStore`] forwards every read (get, ranged get, head, list) to
//! the store it wraps and refuses every write — put in any mode, multipart
//! upload, delete, copy, rename — before anything reaches that store. The
//! refusal is an `object_store::Error::NotSupported` whose source is a
//! [`ReadOnlyRefusal`]; [`to_error`](super::to_error) turns it into
//! [`ErrorKind::ReadOnly`](crate::ErrorKind::ReadOnly) by that type, so
//! every caller reports the same kind, whatever it was trying to write.
//!
//! Why a wrapper rather than checks in the commands: a location that is
//! documented read-only (the `weft` command's `file://` copies of a bucket)
//! must stay unwritten whatever code path runs on it — a claim, a trim, a
//! lease, a GC delete, a KV write, or one added later. Wrapping the store
//! once makes "no write at all" a property of the handle, not of each
//! command remembering to check.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// The source of the error a [`ReadOnlyStore`] answers a write with.
#[derive(Debug, Clone)]
pub struct ReadOnlyRefusal {
    what: &'static str,
    path: String,
    store: String,
}

impl fmt::Display for ReadOnlyRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} refused: {} is read-only",
            self.what, self.path, self.store
        )
    }
}

impl std::error::Error for ReadOnlyRefusal {}

/// An `ObjectStore` that serves reads from `inner` and refuses every write.
#[derive(Debug)]
pub struct ReadOnlyStore {
    inner: Arc<dyn ObjectStore>,
    name: String,
}

impl ReadOnlyStore {
    /// Wraps `inner`; `name` says what the store is in refusals (for
    /// example the location the user gave).
    pub fn new(inner: Arc<dyn ObjectStore>, name: impl Into<String>) -> Self {
        ReadOnlyStore {
            inner,
            name: name.into(),
        }
    }

    /// Wraps `inner` as a shareable handle.
    pub fn wrap(inner: Arc<dyn ObjectStore>, name: impl Into<String>) -> Arc<dyn ObjectStore> {
        Arc::new(ReadOnlyStore::new(inner, name))
    }

    fn refuse(&self, what: &'static str, path: &Path) -> object_store::Error {
        object_store::Error::NotSupported {
            source: Box::new(ReadOnlyRefusal {
                what,
                path: path.to_string(),
                store: self.name.clone(),
            }),
        }
    }
}

impl fmt::Display for ReadOnlyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReadOnly({})", self.inner)
    }
}

/// True when `err` is a [`ReadOnlyStore`]'s refusal.
pub fn is_read_only_refusal(err: &object_store::Error) -> bool {
    match err {
        object_store::Error::NotSupported { source } => source.is::<ReadOnlyRefusal>(),
        _ => false,
    }
}

#[async_trait]
impl ObjectStore for ReadOnlyStore {
    async fn put(&self, location: &Path, _payload: PutPayload) -> object_store::Result<PutResult> {
        Err(self.refuse("put", location))
    }

    async fn put_opts(
        &self,
        location: &Path,
        _payload: PutPayload,
        _opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        Err(self.refuse("put", location))
    }

    async fn put_multipart(
        &self,
        location: &Path,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(self.refuse("multipart upload", location))
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(self.refuse("multipart upload", location))
    }

    async fn get(&self, location: &Path) -> object_store::Result<GetResult> {
        self.inner.get(location).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_range(&self, location: &Path, range: Range<u64>) -> object_store::Result<Bytes> {
        self.inner.get_range(location, range).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    async fn head(&self, location: &Path) -> object_store::Result<ObjectMeta> {
        self.inner.head(location).await
    }

    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        Err(self.refuse("delete", location))
    }

    fn delete_stream<'a>(
        &'a self,
        locations: BoxStream<'a, object_store::Result<Path>>,
    ) -> BoxStream<'a, object_store::Result<Path>> {
        use futures::StreamExt;
        locations
            .map(move |location| match location {
                Ok(path) => Err(self.refuse("delete", &path)),
                Err(e) => Err(e),
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy(&self, _from: &Path, to: &Path) -> object_store::Result<()> {
        Err(self.refuse("copy", to))
    }

    async fn rename(&self, from: &Path, _to: &Path) -> object_store::Result<()> {
        Err(self.refuse("rename", from))
    }

    async fn copy_if_not_exists(&self, _from: &Path, to: &Path) -> object_store::Result<()> {
        Err(self.refuse("copy", to))
    }

    async fn rename_if_not_exists(&self, from: &Path, _to: &Path) -> object_store::Result<()> {
        Err(self.refuse("rename", from))
    }
}

#[cfg(test)]
mod tests {
    use futures::{StreamExt, TryStreamExt};
    use object_store::memory::InMemory;
    use object_store::{PutMode, UpdateVersion};

    use super::*;
    use crate::ErrorKind;
    use crate::objects::{StoreOp, to_error};

    /// Every write the trait offers, each run against the wrapper.
    #[tokio::test]
    async fn every_write_is_refused_and_nothing_reaches_the_inner_store() {
        let inner = Arc::new(InMemory::new());
        let existing = Path::from("log/manifest");
        inner.put(&existing, "m".into()).await.unwrap();
        let before: Vec<ObjectMeta> = inner.list(None).try_collect().await.unwrap();
        let ro = ReadOnlyStore::wrap(inner.clone(), "file:///copy");
        let target = Path::from("log/new");
        let update = PutOptions::from(PutMode::Update(UpdateVersion {
            e_tag: None,
            version: None,
        }));
        let writes: Vec<(&str, object_store::Result<()>)> = vec![
            ("put", ro.put(&target, "x".into()).await.map(|_| ())),
            (
                "put overwrite",
                ro.put_opts(&existing, "x".into(), PutOptions::default())
                    .await
                    .map(|_| ()),
            ),
            (
                "put create",
                ro.put_opts(&target, "x".into(), PutMode::Create.into())
                    .await
                    .map(|_| ()),
            ),
            (
                "put update",
                ro.put_opts(&existing, "x".into(), update).await.map(|_| ()),
            ),
            ("multipart", ro.put_multipart(&target).await.map(|_| ())),
            (
                "multipart opts",
                ro.put_multipart_opts(&target, PutMultipartOptions::default())
                    .await
                    .map(|_| ()),
            ),
            ("delete", ro.delete(&existing).await),
            ("copy", ro.copy(&existing, &target).await),
            ("rename", ro.rename(&existing, &target).await),
            (
                "copy if not exists",
                ro.copy_if_not_exists(&existing, &target).await,
            ),
            (
                "rename if not exists",
                ro.rename_if_not_exists(&existing, &target).await,
            ),
        ];
        for (what, result) in writes {
            let err = result.expect_err(what);
            assert!(is_read_only_refusal(&err), "{what}: {err}");
            let weft = to_error(StoreOp::Put, "log/x", err);
            assert_eq!(weft.kind(), ErrorKind::ReadOnly, "{what}");
        }
        let streamed: Vec<object_store::Result<Path>> = ro
            .delete_stream(futures::stream::iter([Ok(existing.clone())]).boxed())
            .collect()
            .await;
        assert!(streamed.iter().all(|r| r.as_ref().is_err()));
        let after: Vec<ObjectMeta> = inner.list(None).try_collect().await.unwrap();
        assert_eq!(before, after, "the inner store is untouched");
    }

    #[tokio::test]
    async fn reads_pass_through() {
        let inner = Arc::new(InMemory::new());
        let path = Path::from("a/b");
        inner.put(&path, "hello".into()).await.unwrap();
        let ro = ReadOnlyStore::wrap(inner, "ro");
        let got = ro.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(&got[..], b"hello");
        assert_eq!(&ro.get_range(&path, 1..3).await.unwrap()[..], b"el");
        assert_eq!(ro.head(&path).await.unwrap().size, 5);
        let listed: Vec<ObjectMeta> = ro.list(Some(&Path::from("a"))).try_collect().await.unwrap();
        assert_eq!(listed.len(), 1);
        let delimited = ro.list_with_delimiter(None).await.unwrap();
        assert_eq!(delimited.common_prefixes, vec![Path::from("a")]);
    }
}
