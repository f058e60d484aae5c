//! The shared log service: appends, reads, subscriptions, views.
//!
//! [`Log`] is a cheap, cloneable handle over one [`Storage`] backend. All
//! its behaviour beyond storing entries (validation, positions, paged
//! streams, views, subscriptions, typed access) lives here, so every
//! backend behaves alike.
//!
//! Reads come in three shapes: one bounded page (`read_from`, `read_log`),
//! a stream of pages fetched lazily to the end of the log
//! ([`Log::stream`], [`Log::stream_versions`]: fold a long tag with these),
//! and, as conveniences built on the streams, whole `Vec`s (`read_all`,
//! `read_after`, `read_after_version`) whose size is the caller's to bound.
//! Tip queries (`tip`, `latest_seqnum`, `latest_version`, `next_version`)
//! ask the backend and are as fresh as its
//! [`Freshness`](crate::storage::Freshness).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> weft::Result<()> {
//! use weft::{AppendRequest, Log, LogTag, Position};
//!
//! let log = Log::memory();
//! let orders = LogTag::new("orders")?;
//! let r = log.append(AppendRequest::new(orders.clone(), "placed")).await?;
//! assert_eq!((r.seqnum, r.stream_version), (0, 0));
//!
//! // Conditional append: only if `orders` is still at version 1.
//! log.append_if(AppendRequest::new(orders.clone(), "confirmed"), 1).await?;
//! let stale = log.append_if(AppendRequest::new(orders.clone(), "again"), 1).await;
//! assert_eq!(stale.unwrap_err().conflict_next_version(), Some(2));
//!
//! let all = log.read_from(&orders, Position::Beginning, 10).await?;
//! assert_eq!(all.len(), 2);
//! # Ok(()) }
//! ```

pub mod lifecycle;
mod paged;
mod subscribe;
mod typed;
mod view;

use std::sync::Arc;

use futures::TryStreamExt;

use crate::error::Result;
use crate::kv::ViewKv;
use crate::model::{AppendRequest, AppendResult, Expected, LogEntry, LogTag, Position, TagFilter};
use crate::retention::{Consumer, ConsumerPosition, RetentionPolicy};
use crate::storage::{MemoryStorage, NewEntry, Storage, StreamInfo, Tip};

pub use lifecycle::StreamLifecycle;
pub use paged::{EntryStream, PAGE_ENTRIES};
pub use subscribe::{Delivery, FilteredSubscription, Subscription};
pub use typed::{Codec, JsonCodec, PostcardCodec, TypedEntries, TypedSubscription, TypedView};
pub use view::LogView;

use paged::Walk;

/// A handle to one shared log.
#[derive(Clone)]
pub struct Log {
    storage: Arc<dyn Storage>,
    /// The backend's background retention task, shared by every log over
    /// it (`None` for a backend without one, or a log made outside a
    /// runtime, or the task's own log): the last log dropped ends it.
    #[expect(dead_code, reason = "held for its drop, never read")]
    retention: Option<Arc<crate::retention::TaskOwner>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("announced_tip", &*self.storage.feed().watch_tip().borrow())
            .finish()
    }
}

impl Log {
    /// A log over `storage`.
    pub fn new(storage: impl Storage) -> Self {
        Log::from_arc(Arc::new(storage))
    }

    /// A log over a shared storage handle. A writer backend's background
    /// retention task starts here, with the first log over it made inside
    /// a tokio runtime (see [`crate::retention`]).
    pub fn from_arc(storage: Arc<dyn Storage>) -> Self {
        let retention = crate::retention::start(&storage);
        Log { storage, retention }
    }

    /// A log over `storage` that starts nothing (the retention task's own).
    /// It holds no `retention::TaskOwner`, and must not: the
    /// task's future would then own itself, and the last such log dropped
    /// inside the task's own poll would wait on the lock that poll holds.
    pub(crate) fn from_arc_unstarted(storage: Arc<dyn Storage>) -> Self {
        Log {
            storage,
            retention: None,
        }
    }

    /// A fresh, empty in-memory log.
    pub fn memory() -> Self {
        Log::new(MemoryStorage::new())
    }

    /// The storage backend.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    fn prepare(request: AppendRequest, expected: Option<Expected>) -> NewEntry {
        // The backend checks the entry (kit::check_append) against its own
        // limits, whoever calls it: nothing is checked twice.
        let (tags, data, append_id) = request.into_parts_with_id();
        NewEntry {
            tags,
            data,
            // `Any` is no condition at all: backends see one spelling of it.
            expected_version: expected.filter(|e| *e != Expected::Any),
            append_id,
        }
    }

    /// Appends one entry; returns once it is durable.
    ///
    /// Errors: `InvalidInput` (no tag, payload too large), `ReadOnly`,
    /// `Closed`, `Fenced`, and the backend's I/O kinds.
    pub async fn append(&self, request: AppendRequest) -> Result<AppendResult> {
        let entry = Self::prepare(request, None);
        self.storage.append_one(entry).await
    }

    /// Appends one entry only if its primary tag's stream satisfies
    /// `expected`: a version (`u64` converts: 0 for a stream that never had
    /// an entry, otherwise the latest version plus one) or a state
    /// ([`Expected::NoStream`], [`Expected::StreamExists`],
    /// [`Expected::Any`]). A stream whose entries were all trimmed still
    /// exists (see [`Expected`]).
    ///
    /// Errors: `Conflict` with the stream's current next version
    /// ([`Error::conflict_next_version`](crate::Error::conflict_next_version)); otherwise as [`Log::append`].
    pub async fn append_if(
        &self,
        request: AppendRequest,
        expected: impl Into<Expected>,
    ) -> Result<AppendResult> {
        let entry = Self::prepare(request, Some(expected.into()));
        self.storage.append_one(entry).await
    }

    /// Appends several entries atomically: all of them, with contiguous
    /// seqnums in request order, or none.
    ///
    /// Errors: as [`Log::append`]; `InvalidInput` for an empty batch.
    pub async fn append_batch(&self, requests: Vec<AppendRequest>) -> Result<Vec<AppendResult>> {
        let batch = requests
            .into_iter()
            .map(|r| Self::prepare(r, None))
            .collect();
        self.storage.append(batch).await
    }

    /// Appends several entries atomically, each with an optional condition
    /// on its primary tag's stream (a version — `Some(3)` — or an
    /// [`Expected`] state); if any condition fails, nothing is written.
    /// Each condition is checked against the stream as the batch's earlier
    /// entries leave it, so one condition per stream is normally given on
    /// the stream's first entry in the batch.
    ///
    /// Errors: as [`Log::append_if`]; `InvalidInput` for an empty batch.
    pub async fn append_batch_if<E: Into<Expected>>(
        &self,
        requests: Vec<(AppendRequest, Option<E>)>,
    ) -> Result<Vec<AppendResult>> {
        let batch = requests
            .into_iter()
            .map(|(r, v)| Self::prepare(r, v.map(Into::into)))
            .collect();
        self.storage.append(batch).await
    }

    /// The seqnum `position` stands for now.
    ///
    /// Errors: as [`Log::tip`].
    pub(crate) async fn resolve(&self, position: Position) -> Result<u64> {
        paged::resolve(self.storage.as_ref(), position).await
    }

    /// The live range of the log: first readable and next seqnum. As fresh
    /// as the backend's [`Freshness`](crate::storage::Freshness); for the
    /// last state this handle announced, without asking the backend, see
    /// [`CommitFeed::watch_tip`](crate::storage::CommitFeed::watch_tip).
    ///
    /// Errors: `Closed`; the backend's I/O kinds.
    pub async fn tip(&self) -> Result<Tip> {
        self.storage.tip().await
    }

    /// The entries carrying `tag` from `position` to the end of the log,
    /// fetched in pages of [`PAGE_ENTRIES`] as the stream is polled.
    ///
    /// Errors (as items): `Trimmed` when the position is, or a concurrent
    /// trim moved, below the trim point; the backend's read kinds.
    pub fn stream(&self, tag: &LogTag, position: Position) -> EntryStream {
        EntryStream::new(
            self.storage.clone(),
            Walk::Seqnums(Some(tag.clone()), position),
        )
    }

    /// Every entry of the log from `position` to its end, in pages.
    ///
    /// Errors (as items): as [`Log::stream`].
    pub fn stream_log(&self, position: Position) -> EntryStream {
        EntryStream::new(self.storage.clone(), Walk::Seqnums(None, position))
    }

    /// The entries of `tag`'s own stream (entries whose primary tag it is)
    /// from version `from_version` to the end, in pages.
    ///
    /// Errors (as items): `Trimmed` (its detail in versions) when
    /// `from_version` was trimmed away; the backend's read kinds.
    pub fn stream_versions(&self, tag: &LogTag, from_version: u64) -> EntryStream {
        EntryStream::new(
            self.storage.clone(),
            Walk::Versions(tag.clone(), from_version),
        )
    }

    /// Every live entry carrying `tag`, in seqnum order: [`Log::stream`]
    /// from the beginning, collected.
    ///
    /// Errors: as [`Log::stream`].
    pub async fn read_all(&self, tag: &LogTag) -> Result<Vec<LogEntry>> {
        self.stream(tag, Position::Beginning).try_collect().await
    }

    /// Up to `max` entries carrying `tag`, starting at `position`.
    ///
    /// Errors: `Trimmed` when the position is below the trim point.
    pub async fn read_from(
        &self,
        tag: &LogTag,
        position: Position,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        // A truncated stream is read from its start.
        let start = self.stream_lifecycle(tag).await?.start_seqnum;
        let from = self.resolve(position).await?.max(start);
        self.storage.read(Some(tag), from, max).await
    }

    /// Up to `max` entries of any tag, starting at `position`.
    ///
    /// Errors: as [`Log::read_from`].
    pub async fn read_log(&self, position: Position, max: usize) -> Result<Vec<LogEntry>> {
        let from = self.resolve(position).await?;
        self.storage.read(None, from, max).await
    }

    /// Every entry carrying `tag` with seqnum greater than `seqnum`:
    /// [`Log::stream`], collected.
    ///
    /// Errors: as [`Log::stream`].
    pub async fn read_after(&self, tag: &LogTag, seqnum: u64) -> Result<Vec<LogEntry>> {
        self.stream(tag, Position::At(seqnum.saturating_add(1)))
            .try_collect()
            .await
    }

    /// Every entry of `tag`'s own stream (entries whose primary tag it is)
    /// with version greater than `version`: [`Log::stream_versions`],
    /// collected.
    ///
    /// Errors: as [`Log::stream_versions`].
    pub async fn read_after_version(&self, tag: &LogTag, version: u64) -> Result<Vec<LogEntry>> {
        self.stream_versions(tag, version.saturating_add(1))
            .try_collect()
            .await
    }

    /// The seqnum of the last live entry, or `None` when none is live.
    ///
    /// Errors: as [`Log::tip`].
    pub async fn latest_seqnum(&self) -> Result<Option<u64>> {
        Ok(self.storage.tip().await?.last())
    }

    /// The latest version of `tag`'s own stream, or `None` if no entry has
    /// `tag` as its primary tag. As fresh as the backend's
    /// [`Freshness`](crate::storage::Freshness).
    ///
    /// Errors: as [`Log::tip`].
    pub async fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.storage.latest_version(tag).await
    }

    /// Up to `max` of the log's streams, from `from` on (inclusive), in
    /// [`stream_order`](crate::storage::stream_order): each with its next
    /// version and its live entries (see [`Storage::streams`]). Page on
    /// with `from` the last tag of a page and drop that first row.
    ///
    /// Errors: as [`Log::tip`].
    pub async fn streams(&self, from: Option<&LogTag>, max: usize) -> Result<Vec<StreamInfo>> {
        self.storage.streams(from, max).await
    }

    /// The version the next entry with primary tag `tag` will get: the
    /// value to pass to [`Log::append_if`] (which checks it again).
    ///
    /// Errors: as [`Log::tip`].
    pub async fn next_version(&self, tag: &LogTag) -> Result<u64> {
        Ok(self.latest_version(tag).await?.map_or(0, |v| v + 1))
    }

    /// Drops every entry with seqnum `<= through_seqnum`. Reads below the
    /// trim point then fail with `Trimmed`.
    ///
    /// Errors: `InvalidInput` when `through_seqnum` is not a written seqnum.
    pub async fn trim(&self, through_seqnum: u64) -> Result<()> {
        self.storage.trim(through_seqnum).await
    }

    /// Entries carrying `tag` from `position` on: first the backlog, then
    /// live entries, in seqnum order with no gap and no duplicate.
    pub fn subscribe(&self, tag: &LogTag, position: Position) -> Subscription {
        Subscription::new(self.clone(), tag.clone().into(), position)
    }

    /// Only entries carrying `tag` appended from now on.
    pub fn subscribe_tail(&self, tag: &LogTag) -> Subscription {
        Subscription::new(self.clone(), tag.clone().into(), Position::End)
    }

    /// Every entry of the log from `position` on, backlog then live.
    pub fn subscribe_log(&self, position: Position) -> Subscription {
        Subscription::new(self.clone(), TagFilter::All, position)
    }

    /// The entries of the whole log that `filter` matches (a namespace, a
    /// set of tags, a key prefix), from `position` on, backlog then live,
    /// with [`Delivery::Passed`] marks whenever the subscription moved past
    /// entries that did not match. Store the last item's
    /// [`Delivery::resume_at`] and resume with `Position::At(it)`: nothing
    /// below it is read again, however sparse the matches were.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> weft::Result<()> {
    /// use futures::StreamExt;
    /// use weft::{AppendRequest, Delivery, Log, LogTag, Position, TagFilter};
    ///
    /// let log = Log::memory();
    /// for key in ["us-1", "eu-1", "us-2"] {
    ///     log.append(AppendRequest::new(LogTag::with_key("orders", key)?, "x")).await?;
    /// }
    /// let eu = TagFilter::key_prefix("orders", "eu-")?;
    /// let mut sub = log.subscribe_filtered(eu, Position::Beginning);
    /// let Some(Ok(Delivery::Entry(e))) = sub.next().await else { panic!() };
    /// assert_eq!(e.seqnum, 1);
    /// // The entry after it did not match: the cursor passed it anyway.
    /// assert_eq!(sub.next().await.unwrap()?, Delivery::Passed(3));
    /// # Ok(()) }
    /// ```
    ///
    /// Errors (as items): as [`Log::subscribe`].
    pub fn subscribe_filtered(
        &self,
        filter: TagFilter,
        position: Position,
    ) -> FilteredSubscription {
        FilteredSubscription::new(self.clone(), filter, position)
    }

    /// A view of the log scoped to `tag`.
    pub fn view(&self, tag: LogTag) -> LogView {
        LogView::new(self.clone(), tag)
    }

    /// A typed view of `tag` whose payloads `codec` encodes.
    pub fn typed_view<T, C: Codec<T>>(&self, tag: LogTag, codec: C) -> TypedView<T, C> {
        TypedView::new(self.view(tag), codec)
    }

    /// The per-view KV for `scope`.
    ///
    /// Errors: `Unsupported` when the backend has no KV.
    pub fn kv(&self, scope: LogTag) -> Result<ViewKv> {
        Ok(ViewKv::new(self.storage.kv()?, scope))
    }

    /// The log's stored retention policy, `None` when it has none (it keeps
    /// everything).
    ///
    /// Errors: `Corrupt` for a stored policy this build cannot read; the
    /// KV's kinds.
    pub async fn retention_policy(&self) -> Result<Option<RetentionPolicy>> {
        let kv = self.kv(crate::retention::retention_scope())?;
        match kv.get(crate::retention::POLICY_KEY).await? {
            None => Ok(None),
            Some(bytes) => RetentionPolicy::decode(&bytes).map(Some),
        }
    }

    /// Stores `policy` with the log (`None` removes it: keep everything).
    /// The log's writer applies it in the background (see
    /// [`crate::retention`]); one in this process is woken at once.
    ///
    /// Errors: `InvalidInput` for a policy that does not
    /// [`validate`](RetentionPolicy::validate); the KV's kinds.
    pub async fn set_retention_policy(&self, policy: Option<RetentionPolicy>) -> Result<()> {
        let kv = self.kv(crate::retention::retention_scope())?;
        match policy {
            Some(p) => kv.set(crate::retention::POLICY_KEY, p.encode()?).await?,
            None => kv.delete(crate::retention::POLICY_KEY).await?,
        }
        if let Some(slot) = self.storage.retention_slot() {
            slot.nudge();
        }
        Ok(())
    }

    /// The named consumer `name` of the whole log: a durable position it
    /// commits as it goes, which a retention policy can protect.
    ///
    /// Errors: `InvalidInput` for a bad name; `Unsupported` when the
    /// backend has no KV.
    pub fn consumer(&self, name: &str) -> Result<Consumer> {
        Consumer::new(self, name, None)
    }

    /// The named consumer `name` for `filter`: a position of its own, apart
    /// from the same name's other filters (a policy protecting `name`
    /// protects the lowest of them).
    ///
    /// Errors: as [`Log::consumer`].
    pub fn consumer_for(&self, name: &str, filter: &TagFilter) -> Result<Consumer> {
        Consumer::new(self, name, Some(filter))
    }

    /// Every committed consumer position, sorted by name (then filter).
    ///
    /// Errors: `Corrupt` for stored positions this build cannot read; the
    /// KV's kinds.
    pub async fn consumers(&self) -> Result<Vec<ConsumerPosition>> {
        crate::retention::list_consumers(self).await
    }

    /// Flushes and closes the backend; other handles then fail with `Closed`.
    pub async fn close(&self) -> Result<()> {
        self.storage.close().await
    }
}
