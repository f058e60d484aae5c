//! [`RemoteStorage`]: the storage seam over the server's API.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use reqwest::Method;
use weft::kv::KvStore;
use weft::storage::{Capabilities, CommitFeed, NewEntry, StreamInfo, kit};
use weft::{AppendResult, Error, Freshness, LogEntry, LogTag, Result, Storage, Tip};
use weft_api::body::{self, AppendBody, AppendReply, EntriesPage, PrevEntry, VersionsPage};

use crate::http::{Api, Effect};
use crate::kv::RemoteKv;
use crate::options::RemoteOptions;
use crate::shared::Shared;
use crate::tailer::Tailer;

/// A weft log served by `weft serve`, as a storage backend.
pub struct RemoteStorage {
    shared: Arc<Shared>,
    tailer: Tailer,
}

impl std::fmt::Debug for RemoteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStorage")
            .field("api", &self.shared.api)
            .finish()
    }
}

impl RemoteStorage {
    /// Connects to the server(s) at `url` (`http://host:port`, or several
    /// separated by commas): reads its status and starts following its
    /// log.
    ///
    /// Errors: `InvalidInput` for a bad address; `Unavailable` when no
    /// server answers within [`RemoteOptions::retry_for`];
    /// `PermissionDenied` for a missing or wrong token.
    pub async fn connect(url: &str, options: RemoteOptions) -> Result<RemoteStorage> {
        let api = Api::new(url, &options)?;
        let status: body::Status = api
            .call(
                Method::GET,
                &["v1", "status"],
                &[],
                None::<&()>,
                Effect::Read,
            )
            .await?;
        let caps = &status.capabilities;
        let capabilities = Capabilities {
            // A follower among several endpoints is not the end of the
            // story: writes go to whichever endpoint leads.
            read_only: false,
            durable: caps.durable,
            max_entry_bytes: caps.max_entry_bytes,
            freshness: Freshness::SharedDatabase,
        };
        let shared = Arc::new(Shared {
            api,
            feed: CommitFeed::new(status.tip),
            closed: AtomicBool::new(false),
            capabilities,
            append_ids: caps.append_ids,
            kv: caps.kv,
        });
        let tailer = Tailer::start(shared.clone(), status.tip);
        // Appends wait for the feed only while the tailer is connected:
        // wait for its stream to open, so the first append already does.
        if !tailer.connected(options.retry_for).await {
            tracing::warn!(
                "the tailer's subscription did not open; subscriptions will catch up by reading"
            );
        }
        Ok(RemoteStorage { shared, tailer })
    }

    async fn entries_page(
        &self,
        tag: Option<&LogTag>,
        from: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        let mut out: Vec<LogEntry> = Vec::new();
        let mut next = from;
        // The server may cut a page short (its page limits): ask again
        // until `max` entries or the end.
        while out.len() < max {
            let mut query = vec![
                ("from", next.to_string()),
                ("limit", (max - out.len()).to_string()),
            ];
            if let Some(t) = tag {
                query.push(("tag", t.to_string()));
            }
            let page: EntriesPage = self
                .shared
                .api
                .call(
                    Method::GET,
                    &["v1", "entries"],
                    &query,
                    None::<&()>,
                    Effect::Read,
                )
                .await?;
            let more = page.more;
            next = page.next;
            for e in page.entries {
                out.push(e.into_entry()?);
            }
            if !more {
                break;
            }
        }
        Ok(out)
    }
}

fn wire_entry(e: NewEntry) -> body::NewEntry {
    body::NewEntry {
        tags: e.tags.iter().map(|t| t.to_string()).collect(),
        data: e.data,
        id: e.append_id,
        expected_version: e.expected_version.map(Into::into),
    }
}

#[async_trait]
impl Storage for RemoteStorage {
    async fn append(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        // Refused here as the server's backend would refuse it, without
        // a round trip.
        kit::check_append(&batch, self.append_limits())?;
        self.shared.check_open()?;
        let body = AppendBody {
            entries: batch.into_iter().map(wire_entry).collect(),
            condition: None,
            id: None,
        };
        let reply: AppendReply = self
            .shared
            .api
            .call(
                Method::POST,
                &["v1", "append"],
                &[],
                Some(&body),
                Effect::Write,
            )
            .await?;
        let results = reply
            .results
            .into_iter()
            .map(|r| r.into_result())
            .collect::<Result<Vec<_>>>()?;
        if let Some(last) = results.iter().map(|r| r.seqnum).max() {
            self.tailer.wait_for(last + 1).await;
        }
        Ok(results)
    }

    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        self.shared.check_open()?;
        if max == 0 {
            return Ok(Vec::new());
        }
        self.entries_page(tag, from, max).await
    }

    async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        self.shared.check_open()?;
        let name = tag.to_string();
        let mut out: Vec<LogEntry> = Vec::new();
        let mut next = from_version;
        while out.len() < max {
            let query = [
                ("from_version", next.to_string()),
                ("limit", (max - out.len()).to_string()),
            ];
            let page: VersionsPage = self
                .shared
                .api
                .call(
                    Method::GET,
                    &["v1", "streams", &name, "entries"],
                    &query,
                    None::<&()>,
                    Effect::Read,
                )
                .await?;
            let more = page.more;
            next = page.next_version;
            for e in page.entries {
                out.push(e.into_entry()?);
            }
            if !more {
                break;
            }
        }
        Ok(out)
    }

    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        self.shared.check_open()?;
        let mut query = vec![("before", before.to_string())];
        if let Some(t) = tag {
            query.push(("tag", t.to_string()));
        }
        let prev: PrevEntry = self
            .shared
            .api
            .call(
                Method::GET,
                &["v1", "entries", "prev"],
                &query,
                None::<&()>,
                Effect::Read,
            )
            .await?;
        prev.entry.map(|e| e.into_entry()).transpose()
    }

    async fn tip(&self) -> Result<Tip> {
        self.shared.check_open()?;
        let tip: body::Tip = self
            .shared
            .api
            .call(Method::GET, &["v1", "tip"], &[], None::<&()>, Effect::Read)
            .await?;
        Ok(Tip {
            first: tip.first,
            next: tip.next,
        })
    }

    async fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.shared.check_open()?;
        let stream: body::Stream = self
            .shared
            .api
            .call(
                Method::GET,
                &["v1", "streams", &tag.to_string()],
                &[],
                None::<&()>,
                Effect::Read,
            )
            .await?;
        Ok(stream.next_version.checked_sub(1))
    }

    /// `GET /v1/streams` from `from`, following `next` until `max` rows
    /// (the server caps a page).
    async fn streams(&self, from: Option<&LogTag>, max: usize) -> Result<Vec<StreamInfo>> {
        self.shared.check_open()?;
        let mut out: Vec<StreamInfo> = Vec::new();
        let mut cursor: Option<(&str, String)> = from.map(|t| ("from", t.to_string()));
        while out.len() < max {
            let mut params = vec![("limit", (max - out.len()).to_string())];
            params.extend(cursor.clone());
            let page: body::StreamsPage = self
                .shared
                .api
                .call(
                    Method::GET,
                    &["v1", "streams"],
                    &params,
                    None::<&()>,
                    Effect::Read,
                )
                .await?;
            for s in page.streams {
                out.push(StreamInfo {
                    tag: s.tag.parse::<LogTag>()?,
                    next_version: s.next_version,
                    entries: s.entries,
                });
            }
            match page.next {
                Some(next) => cursor = Some(("after", next)),
                None => break,
            }
        }
        out.truncate(max);
        Ok(out)
    }

    async fn trim(&self, through: u64) -> Result<()> {
        self.shared.check_open()?;
        let _: body::Tip = self
            .shared
            .api
            .call(
                Method::POST,
                &["v1", "trim"],
                &[],
                Some(&body::Trim { through }),
                Effect::Write,
            )
            .await?;
        Ok(())
    }

    /// The server erases what the stream's start hides, as it stores it
    /// when the request arrives (a start only moves forward, so that is
    /// at least what `before_version` names). The request is safe to
    /// repeat: an erased entry is not erased again.
    async fn erase_below(
        &self,
        tag: &LogTag,
        _before_version: u64,
        _below_seqnum: u64,
    ) -> Result<u64> {
        self.shared.check_open()?;
        let name = tag.to_string();
        let answer: body::Erased = self
            .shared
            .api
            .call(
                Method::POST,
                &["v1", "streams", &name, "erase"],
                &[],
                Some(&serde_json::json!({})),
                Effect::Read,
            )
            .await?;
        Ok(answer.erased)
    }

    fn feed(&self) -> &CommitFeed {
        &self.shared.feed
    }

    fn kv(&self) -> Result<Arc<dyn KvStore>> {
        if !self.shared.kv {
            return Err(Error::unsupported(
                "the server's backend has no key-value store",
            ));
        }
        Ok(Arc::new(RemoteKv::new(self.shared.clone())))
    }

    fn capabilities(&self) -> Capabilities {
        self.shared.capabilities.clone()
    }

    fn supports_append_ids(&self) -> bool {
        self.shared.append_ids
    }

    async fn close(&self) -> Result<()> {
        self.shared.closed.store(true, Ordering::Release);
        self.tailer.stop();
        self.shared.feed.close();
        Ok(())
    }
}

impl Drop for RemoteStorage {
    fn drop(&mut self) {
        self.tailer.stop();
    }
}
