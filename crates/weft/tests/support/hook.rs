//! An object store that runs a test's hook before each `get` and `list`, so
//! a test can change the bucket at an exact point of another component's
//! work (a commit landing between a GC's listing and its decision, a
//! truncation while a replica fetches).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// Which request is about to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Get,
    List,
}

/// A hook: called with the request and its path, awaited before the
/// request runs. It gets the inner store to act on.
pub type Hook = Arc<dyn Fn(Op, Path, Arc<dyn ObjectStore>) -> BoxFuture<'static, ()> + Send + Sync>;

/// The wrapper.
pub struct HookStore {
    inner: Arc<dyn ObjectStore>,
    hook: Mutex<Option<Hook>>,
}

impl HookStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Arc<Self> {
        Arc::new(HookStore {
            inner,
            hook: Mutex::new(None),
        })
    }

    /// Installs (or with `None` removes) the hook.
    pub fn set(&self, hook: Option<Hook>) {
        *self.hook.lock().unwrap() = hook;
    }

    pub fn inner(&self) -> Arc<dyn ObjectStore> {
        self.inner.clone()
    }

    fn run(&self, op: Op, path: &Path) -> Option<BoxFuture<'static, ()>> {
        let hook = self.hook.lock().unwrap().clone()?;
        Some(hook(op, path.clone(), self.inner.clone()))
    }
}

impl std::fmt::Debug for HookStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HookStore({})", self.inner)
    }
}

impl std::fmt::Display for HookStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HookStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for HookStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if let Some(f) = self.run(Op::Get, location) {
            f.await;
        }
        self.inner.get_opts(location, options).await
    }
    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        self.inner.delete(location).await
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let path = prefix.cloned().unwrap_or_default();
        let hook = self.run(Op::List, &path);
        let inner = self.inner.clone();
        let prefix = prefix.cloned();
        futures::stream::once(async move {
            if let Some(f) = hook {
                f.await;
            }
        })
        .flat_map(move |()| inner.list(prefix.as_ref()))
        .boxed()
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy(from, to).await
    }
    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }
}
