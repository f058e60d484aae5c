//! Paged reads as streams: a tag (or the whole log) read to its end in
//! bounded pages fetched lazily, so folding a long stream holds one page
//! at a time.
//!
//! An [`EntryStream`] fetches its first page when first polled and the next
//! one when the previous is used up. It ends after a page that comes back
//! short: the end of the log as of that read (unlike a
//! [`Subscription`](super::Subscription), it does not wait for new
//! entries). A read error (for example `Trimmed`, when a trim overtook the
//! stream) is delivered once, and then the stream ends.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;

use super::lifecycle::{StreamLifecycle, lifecycle_of};
use crate::error::Result;
use crate::model::{LogEntry, LogTag, Position};
use crate::storage::Storage;

/// How many entries one page of an [`EntryStream`] fetches.
pub const PAGE_ENTRIES: usize = 1024;

/// Which numbering a stream walks.
#[derive(Debug)]
pub(super) enum Walk {
    /// Seqnums from a position, over entries carrying the tag (any entry
    /// when `None`).
    Seqnums(Option<LogTag>, Position),
    /// The versions of the tag's own stream, from a version.
    Versions(LogTag, u64),
}

/// Entries read to the end of the log in pages of [`PAGE_ENTRIES`],
/// fetched as the stream is polled. It ends after a short page (the end of
/// the log as of that read); a read error (`Trimmed` when a trim overtook
/// it) is its last item.
pub struct EntryStream {
    inner: BoxStream<'static, Result<LogEntry>>,
}

impl std::fmt::Debug for EntryStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EntryStream")
    }
}

struct Pager {
    storage: Arc<dyn Storage>,
    walk: Walk,
    /// The next seqnum or version to read; `None` until a seqnum position
    /// is resolved (at the first poll).
    from: Option<u64>,
    /// The tag's stream lifecycle, read at the first fetch (a tag's walk
    /// starts no earlier than the stream's start).
    lifecycle: Option<StreamLifecycle>,
    page: VecDeque<LogEntry>,
    done: bool,
}

impl Pager {
    /// The next page, from the stream's start at the least; sets `done`
    /// after a short page.
    async fn fetch(&mut self) -> Result<Vec<LogEntry>> {
        let lifecycle = match (&self.walk, self.lifecycle) {
            (Walk::Seqnums(None, _), _) => StreamLifecycle::default(),
            (_, Some(known)) => known,
            (Walk::Seqnums(Some(tag), _) | Walk::Versions(tag, _), None) => {
                let known = lifecycle_of(self.storage.as_ref(), tag).await?;
                self.lifecycle = Some(known);
                known
            }
        };
        match &self.walk {
            Walk::Seqnums(tag, position) => {
                let from = match self.from {
                    Some(from) => from,
                    None => resolve(self.storage.as_ref(), *position).await?,
                }
                .max(lifecycle.start_seqnum);
                let page = self.storage.read(tag.as_ref(), from, PAGE_ENTRIES).await?;
                self.done = page.len() < PAGE_ENTRIES;
                self.from = Some(page.last().map_or(from, |e| e.seqnum + 1));
                Ok(page)
            }
            Walk::Versions(tag, first) => {
                let from = self.from.unwrap_or(*first).max(lifecycle.start_version);
                let page = self.storage.read_versions(tag, from, PAGE_ENTRIES).await?;
                self.done = page.len() < PAGE_ENTRIES;
                self.from = Some(page.last().map_or(from, |e| e.stream_version + 1));
                Ok(page)
            }
        }
    }

    async fn next(&mut self) -> Option<Result<LogEntry>> {
        loop {
            if let Some(entry) = self.page.pop_front() {
                return Some(Ok(entry));
            }
            if self.done {
                return None;
            }
            match self.fetch().await {
                Ok(page) => self.page.extend(page),
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// The seqnum `position` stands for now.
///
/// Errors: as [`Storage::tip`].
pub(super) async fn resolve(storage: &dyn Storage, position: Position) -> Result<u64> {
    Ok(match position {
        Position::Beginning => storage.tip().await?.first,
        Position::End => storage.tip().await?.next,
        Position::At(s) => s,
        Position::Since(t) => storage.seek_time(t).await?,
    })
}

impl EntryStream {
    pub(super) fn new(storage: Arc<dyn Storage>, walk: Walk) -> Self {
        let from = match walk {
            Walk::Seqnums(_, Position::At(s)) => Some(s),
            _ => None,
        };
        let pager = Pager {
            storage,
            walk,
            from,
            lifecycle: None,
            page: VecDeque::new(),
            done: false,
        };
        let inner = futures::stream::unfold(pager, |mut pager| async move {
            let item = pager.next().await?;
            Some((item, pager))
        });
        EntryStream {
            inner: Box::pin(inner),
        }
    }
}

impl Stream for EntryStream {
    type Item = Result<LogEntry>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
