//! A pass-through `ObjectStore` wrapper with hooks before and after each
//! request.
//!
//! Tests keep needing a store that behaves like the real one except at one
//! chosen point: record every manifest that lands, answer one put with a
//! timeout after it landed, refuse everything as a missing bucket, delete a
//! segment just before a replica fetches it. [`HookedStore`] is that store
//! once: it forwards every request to the inner store and runs its
//! [`StoreHook`]s around it. A hook sees the request ([`Call`]) and the
//! inner store, and decides:
//!
//! * **before** the request: go on ([`Before::Proceed`]), or answer with an
//!   error instead of the inner store ([`Before::Answer`]) — after doing
//!   whatever it likes to the inner store itself (perform the request
//!   later, in a spawned task, for a write that lands after its timeout);
//! * **after** it: keep the inner store's answer ([`After::Keep`]) or
//!   replace it with an error ([`After::Replace`]), after waiting as long as
//!   it likes (an answer that never comes in time).
//!
//! Hooks run in the order they were added: the first `Answer` skips the
//! request and the later before-hooks; every after-hook runs, each seeing
//! whether the answer so far is a success. Hooks can be added and cleared
//! while the store is in use, and a `HookedStore` wraps any store,
//! including another `HookedStore` or a
//! [`FaultStore`](crate::fault::FaultStore).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::sync::{Arc, Mutex};
//! use object_store::{ObjectStore, memory::InMemory, path::Path};
//! use weft_testkit::hooked::{After, HookedStore, Op, after};
//!
//! let landed = Arc::new(Mutex::new(Vec::new()));
//! let seen = landed.clone();
//! let store = HookedStore::new(Arc::new(InMemory::new())).with_hook(after(
//!     move |call, ok, _inner| {
//!         if call.op == Op::Put && ok {
//!             seen.lock().unwrap().push(call.path.to_string());
//!         }
//!         async { After::Keep }
//!     },
//! ));
//! store.put(&Path::from("a/1"), "x".into()).await.unwrap();
//! assert_eq!(*landed.lock().unwrap(), vec!["a/1".to_string()]);
//! # }
//! ```

use std::future::Future;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// Which request a hook is looking at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `put_opts` (every put mode).
    Put,
    /// `put_multipart_opts` (the start of a multipart upload).
    PutMultipart,
    /// `get_opts`, and so `get`, `get_range` and `head`.
    Get,
    /// `delete`.
    Delete,
    /// `list` (hooks run when the listing is first polled).
    List,
    /// `list_with_delimiter`.
    ListWithDelimiter,
    /// `copy`.
    Copy,
    /// `copy_if_not_exists`.
    CopyIfNotExists,
}

/// One request, as hooks see it.
#[derive(Debug, Clone)]
pub struct Call {
    /// The request.
    pub op: Op,
    /// Its path: the destination of a copy, the prefix of a listing
    /// (empty for none).
    pub path: Path,
    /// The source of a copy.
    pub from: Option<Path>,
    /// A put's payload and options (cheap clones of the caller's).
    pub put: Option<(PutPayload, PutOptions)>,
}

/// What a hook decides before a request.
#[derive(Debug)]
pub enum Before {
    /// Let the request reach the inner store.
    Proceed,
    /// Answer with this error; the inner store never sees the request.
    Answer(object_store::Error),
}

/// What a hook decides after a request.
#[derive(Debug)]
pub enum After {
    /// Keep the answer.
    Keep,
    /// Answer with this error instead.
    Replace(object_store::Error),
}

/// Code a [`HookedStore`] runs around each request.
#[async_trait]
pub trait StoreHook: Send + Sync + 'static {
    /// Runs before the request. The default lets it through.
    async fn before(&self, call: &Call, inner: &Arc<dyn ObjectStore>) -> Before {
        let _ = (call, inner);
        Before::Proceed
    }

    /// Runs after the request (or after an earlier hook answered it); `ok`
    /// tells whether the answer so far is a success. The default keeps it.
    async fn after(&self, call: &Call, ok: bool, inner: &Arc<dyn ObjectStore>) -> After {
        let _ = (call, ok, inner);
        After::Keep
    }
}

type BeforeFn = dyn Fn(Call, Arc<dyn ObjectStore>) -> BoxFuture<'static, Before> + Send + Sync;
type AfterFn = dyn Fn(Call, bool, Arc<dyn ObjectStore>) -> BoxFuture<'static, After> + Send + Sync;

struct BeforeHook(Box<BeforeFn>);
struct AfterHook(Box<AfterFn>);

#[async_trait]
impl StoreHook for BeforeHook {
    async fn before(&self, call: &Call, inner: &Arc<dyn ObjectStore>) -> Before {
        (self.0)(call.clone(), inner.clone()).await
    }
}

#[async_trait]
impl StoreHook for AfterHook {
    async fn after(&self, call: &Call, ok: bool, inner: &Arc<dyn ObjectStore>) -> After {
        (self.0)(call.clone(), ok, inner.clone()).await
    }
}

/// A hook from a closure run before each request.
pub fn before<F, Fut>(f: F) -> impl StoreHook
where
    F: Fn(Call, Arc<dyn ObjectStore>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Before> + Send + 'static,
{
    BeforeHook(Box::new(move |call, inner| Box::pin(f(call, inner))))
}

/// A hook from a closure run after each request.
pub fn after<F, Fut>(f: F) -> impl StoreHook
where
    F: Fn(Call, bool, Arc<dyn ObjectStore>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = After> + Send + 'static,
{
    AfterHook(Box::new(move |call, ok, inner| {
        Box::pin(f(call, ok, inner))
    }))
}

/// The wrapper; see the [module docs](self).
pub struct HookedStore {
    inner: Arc<dyn ObjectStore>,
    hooks: RwLock<Vec<Arc<dyn StoreHook>>>,
}

impl std::fmt::Debug for HookedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HookedStore({})", self.inner)
    }
}

impl std::fmt::Display for HookedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HookedStore({})", self.inner)
    }
}

/// The hooks of one request and the inner store, detached from the
/// wrapper so a listing can run them later.
struct Round {
    hooks: Vec<Arc<dyn StoreHook>>,
    inner: Arc<dyn ObjectStore>,
    call: Call,
}

impl Round {
    async fn before(&self) -> Option<object_store::Error> {
        for hook in &self.hooks {
            if let Before::Answer(e) = hook.before(&self.call, &self.inner).await {
                return Some(e);
            }
        }
        None
    }

    /// Runs every after-hook; the last replacement, if any hook made one.
    async fn after_hooks(&self, mut ok: bool) -> Option<object_store::Error> {
        let mut replaced = None;
        for hook in &self.hooks {
            if let After::Replace(e) = hook.after(&self.call, ok, &self.inner).await {
                ok = false;
                replaced = Some(e);
            }
        }
        replaced
    }

    async fn after<T>(&self, answer: object_store::Result<T>) -> object_store::Result<T> {
        match self.after_hooks(answer.is_ok()).await {
            Some(e) => Err(e),
            None => answer,
        }
    }

    /// Runs the request between the hooks.
    async fn run<T>(
        &self,
        request: impl Future<Output = object_store::Result<T>>,
    ) -> object_store::Result<T> {
        let answer = match self.before().await {
            Some(e) => Err(e),
            None => request.await,
        };
        self.after(answer).await
    }
}

impl HookedStore {
    /// A wrapper over `inner` with no hooks yet.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        HookedStore {
            inner,
            hooks: RwLock::new(Vec::new()),
        }
    }

    /// Adds `hook` after the hooks already there.
    pub fn with_hook(self, hook: impl StoreHook) -> Self {
        self.add(hook);
        self
    }

    /// Adds `hook` after the hooks already there, while in use.
    pub fn add(&self, hook: impl StoreHook) {
        self.hooks
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::new(hook));
    }

    /// Removes every hook: from now on the wrapper only passes requests on.
    pub fn clear(&self) {
        self.hooks
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    fn round(&self, op: Op, path: &Path) -> Round {
        Round {
            hooks: self.hooks.read().unwrap_or_else(|p| p.into_inner()).clone(),
            inner: self.inner.clone(),
            call: Call {
                op,
                path: path.clone(),
                from: None,
                put: None,
            },
        }
    }
}

#[async_trait]
impl ObjectStore for HookedStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let mut round = self.round(Op::Put, location);
        round.call.put = Some((payload.clone(), opts.clone()));
        round
            .run(self.inner.put_opts(location, payload, opts))
            .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.round(Op::PutMultipart, location)
            .run(self.inner.put_multipart_opts(location, opts))
            .await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.round(Op::Get, location)
            .run(self.inner.get_opts(location, options))
            .await
    }

    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        self.round(Op::Delete, location)
            .run(self.inner.delete(location))
            .await
    }

    /// Runs the hooks when first polled; the listing is gathered whole
    /// before the after-hooks see whether it succeeded, and a replacement
    /// ends it with the hook's error.
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let round = self.round(Op::List, &prefix.cloned().unwrap_or_default());
        let prefix = prefix.cloned();
        futures::stream::once(async move {
            let mut items: Vec<_> = match round.before().await {
                Some(e) => vec![Err(e)],
                None => round.inner.list(prefix.as_ref()).collect().await,
            };
            let ok = items.iter().all(Result::is_ok);
            if let Some(e) = round.after_hooks(ok).await {
                items.push(Err(e));
            }
            items
        })
        .flat_map(futures::stream::iter)
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.round(Op::ListWithDelimiter, &prefix.cloned().unwrap_or_default())
            .run(self.inner.list_with_delimiter(prefix))
            .await
    }

    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        let mut round = self.round(Op::Copy, to);
        round.call.from = Some(from.clone());
        round.run(self.inner.copy(from, to)).await
    }

    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        let mut round = self.round(Op::CopyIfNotExists, to);
        round.call.from = Some(from.clone());
        round.run(self.inner.copy_if_not_exists(from, to)).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::TryStreamExt;
    use object_store::memory::InMemory;

    use super::*;

    fn refused(path: &Path) -> object_store::Error {
        object_store::Error::NotFound {
            path: path.to_string(),
            source: "refused by a hook".into(),
        }
    }

    #[tokio::test]
    async fn an_answer_skips_the_store_and_later_before_hooks() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (first, second) = (calls.clone(), calls.clone());
        let store = HookedStore::new(inner.clone())
            .with_hook(before(move |call, _| {
                first.lock().unwrap().push(format!("first {:?}", call.op));
                let answer = call.path.as_ref().starts_with("deny");
                async move {
                    if answer {
                        Before::Answer(refused(&call.path))
                    } else {
                        Before::Proceed
                    }
                }
            }))
            .with_hook(before(move |call, _| {
                second.lock().unwrap().push(format!("second {:?}", call.op));
                async { Before::Proceed }
            }));
        store.put(&Path::from("ok/1"), "x".into()).await.unwrap();
        let denied = store.put(&Path::from("deny/1"), "x".into()).await;
        assert!(matches!(denied, Err(object_store::Error::NotFound { .. })));
        assert!(
            inner.head(&Path::from("deny/1")).await.is_err(),
            "not written"
        );
        assert_eq!(
            *calls.lock().unwrap(),
            ["first Put", "second Put", "first Put"]
        );
    }

    #[tokio::test]
    async fn after_hooks_see_the_outcome_and_may_replace_it() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let store = HookedStore::new(inner.clone())
            .with_hook(after(|call, _ok, _| async move {
                if call.op == Op::Put {
                    After::Replace(refused(&call.path))
                } else {
                    After::Keep
                }
            }))
            .with_hook(after(move |call, ok, _| {
                log.lock().unwrap().push((call.op, ok));
                async { After::Keep }
            }));
        let path = Path::from("a/1");
        assert!(store.put(&path, "x".into()).await.is_err());
        // The put landed; only its answer was replaced.
        assert_eq!(
            &store.get(&path).await.unwrap().bytes().await.unwrap()[..],
            b"x"
        );
        assert_eq!(*seen.lock().unwrap(), [(Op::Put, false), (Op::Get, true)]);
    }

    #[tokio::test]
    async fn listings_run_hooks_when_polled_and_wrappers_stack() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        inner.put(&Path::from("p/1"), "x".into()).await.unwrap();
        let lower = Arc::new(HookedStore::new(inner.clone()));
        // The outer wrapper adds an object just before the listing runs.
        let outer = HookedStore::new(lower.clone()).with_hook(before(|call, inner| async move {
            if call.op == Op::List {
                inner.put(&Path::from("p/2"), "y".into()).await.unwrap();
            }
            Before::Proceed
        }));
        let listing = outer.list(Some(&Path::from("p")));
        assert!(inner.head(&Path::from("p/2")).await.is_err(), "lazy");
        let mut names: Vec<String> = listing
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        names.sort();
        assert_eq!(names, ["p/1", "p/2"]);
        lower.add(before(|call, _| async move {
            Before::Answer(refused(&call.path))
        }));
        assert!(outer.get(&Path::from("p/1")).await.is_err());
        lower.clear();
        assert!(outer.get(&Path::from("p/1")).await.is_ok());
    }
}
