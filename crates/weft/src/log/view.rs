//! [`LogView`]: a lightweight window over one tag of the log.

use bytes::Bytes;

use super::{EntryStream, Log, Subscription};
use crate::error::Result;
use crate::kv::ViewKv;
use crate::model::{AppendRequest, AppendResult, LogEntry, LogTag, Position};

/// A tag-scoped view: reads see the entries carrying the view's tag, and
/// appends always carry it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> weft::Result<()> {
/// use weft::{Log, LogTag};
///
/// let log = Log::memory();
/// let orders = log.view(LogTag::new("orders")?);
/// orders.append("placed").await?;
/// let second = orders.append("confirmed").await?;
/// assert_eq!(orders.check_tail().await?, Some(second.seqnum));
/// let prev = orders.read_prev_before(second.seqnum).await?.unwrap();
/// assert_eq!(&prev.data[..], b"placed");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct LogView {
    log: Log,
    tag: LogTag,
}

impl LogView {
    pub(crate) fn new(log: Log, tag: LogTag) -> Self {
        LogView { log, tag }
    }

    /// The view's tag.
    pub fn tag(&self) -> &LogTag {
        &self.tag
    }

    /// The underlying log.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// Appends `data` with the view's tag as the primary tag.
    pub async fn append(&self, data: impl Into<Bytes>) -> Result<AppendResult> {
        self.log
            .append(AppendRequest::new(self.tag.clone(), data))
            .await
    }

    /// Appends `request`, adding the view's tag as a secondary tag if the
    /// request does not carry it (the request's primary tag stays primary).
    pub async fn append_request(&self, request: AppendRequest) -> Result<AppendResult> {
        self.log.append(self.with_view_tag(request)).await
    }

    /// Appends `data` only if the view's stream is at `expected_version`
    /// (see [`Log::append_if`]).
    pub async fn append_if(
        &self,
        data: impl Into<Bytes>,
        expected_version: u64,
    ) -> Result<AppendResult> {
        self.log
            .append_if(AppendRequest::new(self.tag.clone(), data), expected_version)
            .await
    }

    fn with_view_tag(&self, request: AppendRequest) -> AppendRequest {
        if request.tags().is_empty() {
            let (_, data) = request.into_parts();
            AppendRequest::new(self.tag.clone(), data)
        } else {
            request.with_tag(self.tag.clone())
        }
    }

    /// The view's entries from `position` to the end of the log, in pages
    /// (see [`Log::stream`]).
    pub fn stream(&self, position: Position) -> EntryStream {
        self.log.stream(&self.tag, position)
    }

    /// The view's own stream from version `from_version` to its end, in
    /// pages (see [`Log::stream_versions`]).
    pub fn stream_versions(&self, from_version: u64) -> EntryStream {
        self.log.stream_versions(&self.tag, from_version)
    }

    /// Every live entry of the view (see [`Log::read_all`]).
    pub async fn read_all(&self) -> Result<Vec<LogEntry>> {
        self.log.read_all(&self.tag).await
    }

    /// Up to `max` entries of the view from `position`.
    pub async fn read_from(&self, position: Position, max: usize) -> Result<Vec<LogEntry>> {
        self.log.read_from(&self.tag, position, max).await
    }

    /// Entries of the view with seqnum greater than `seqnum`.
    pub async fn read_after(&self, seqnum: u64) -> Result<Vec<LogEntry>> {
        self.log.read_after(&self.tag, seqnum).await
    }

    /// Entries of the view's own stream with version greater than `version`.
    pub async fn read_after_version(&self, version: u64) -> Result<Vec<LogEntry>> {
        self.log.read_after_version(&self.tag, version).await
    }

    /// The first entry of the view with seqnum greater than `seqnum`.
    pub async fn read_next_after(&self, seqnum: u64) -> Result<Option<LogEntry>> {
        let mut next = self
            .log
            .read_from(&self.tag, Position::At(seqnum.saturating_add(1)), 1)
            .await?;
        Ok(next.pop())
    }

    /// The last entry of the view with seqnum less than `seqnum`.
    pub async fn read_prev_before(&self, seqnum: u64) -> Result<Option<LogEntry>> {
        self.log.prev_visible(&self.tag, seqnum).await
    }

    /// The seqnum of the view's last entry, `None` if it has none.
    pub async fn check_tail(&self) -> Result<Option<u64>> {
        let last = self.log.prev_visible(&self.tag, u64::MAX).await?;
        Ok(last.map(|e| e.seqnum))
    }

    /// The latest version of the view's own stream (see
    /// [`Log::latest_version`]).
    pub async fn latest_version(&self) -> Result<Option<u64>> {
        self.log.latest_version(&self.tag).await
    }

    /// The version the view's next entry will get (see
    /// [`Log::next_version`]).
    pub async fn next_version(&self) -> Result<u64> {
        self.log.next_version(&self.tag).await
    }

    /// Backlog from `position`, then live entries.
    pub fn subscribe(&self, position: Position) -> Subscription {
        self.log.subscribe(&self.tag, position)
    }

    /// Only entries appended from now on.
    pub fn subscribe_tail(&self) -> Subscription {
        self.log.subscribe_tail(&self.tag)
    }

    /// The view's durable key-value store.
    ///
    /// Errors: `Unsupported` when the backend has no KV.
    pub fn kv(&self) -> Result<ViewKv> {
        self.log.kv(self.tag.clone())
    }
}
