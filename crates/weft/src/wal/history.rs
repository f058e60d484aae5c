//! Reading and storing a v5 manifest's history pages.
//!
//! [`HistoryReader`] answers "which entries hold sequence `s` and after"
//! across the history tree and the manifest's recent entries: it reads the
//! frontier in the manifest, then one page per level down to the leaf,
//! through a byte-bounded cache of decoded pages (pages are immutable, so a
//! cached page is never stale). `store_page` creates a page once, and
//! resolves a create whose reply was lost by reading the object back.
//!
//! Page names are `<history prefix>/<level:02x>-<first:016x>-<end:016x>-
//! <run>-<plan:016x>`: the writer's run id makes them unique per writer, so
//! no two writers ever create the same object, and GC recognises them and
//! their writer by that shape. `plan` counts the writer's checkpoint plans:
//! a plan never reuses a page an earlier one stored (which may have waited
//! past the commit window, see [`super::window`], and be collected), so
//! every page a checkpoint's CAS names was stored after the manifest
//! version that CAS is conditioned on was learned.

use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use tracing::debug;
use ulid::Ulid;

use super::manifest::PageUpload;
use crate::error::{Error, ErrorKind, Result};
use crate::format::history::{History, HistoryPage, PageItems, PagePointer, decode_page};
use crate::format::manifest::ManifestEntry;
use crate::lru::ByteLru;
use crate::objects::{Outcome, RetryPolicy, StoreOp, read_whole, retry_store, to_error};

/// The default history prefix of the log whose manifest is at
/// `manifest_path`: `history` in the manifest's directory.
pub fn default_prefix(manifest_path: &str) -> String {
    let trimmed = manifest_path.trim_matches('/');
    match trimmed.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/history"),
        None => "history".to_owned(),
    }
}

/// What a page's name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageName {
    /// 0 for a leaf.
    pub level: u8,
    /// The first sequence it covers.
    pub first: u64,
    /// One past the last sequence it covers.
    pub end: u64,
    /// The run of the writer that stored it.
    pub run: Ulid,
    /// Which of that writer's checkpoint plans stored it.
    pub plan: u64,
}

/// The object path of the page `name` under `prefix`.
pub fn page_path(prefix: &str, name: &PageName) -> String {
    let prefix = prefix.trim_matches('/');
    let PageName {
        level,
        first,
        end,
        run,
        plan,
    } = name;
    let name = format!("{level:02x}-{first:016x}-{end:016x}-{run}-{plan:016x}");
    if prefix.is_empty() {
        name
    } else {
        format!("{prefix}/{name}")
    }
}

/// Parses the last part of a page's path; `None` for any other name.
pub fn parse_page_name(name: &str) -> Option<PageName> {
    let mut parts = name.splitn(5, '-');
    let level = parts.next()?;
    let first = parts.next()?;
    let end = parts.next()?;
    let run = parts.next()?;
    let plan = parts.next()?;
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(level, 2) || !hex(first, 16) || !hex(end, 16) || !hex(plan, 16) {
        return None;
    }
    Some(PageName {
        level: u8::from_str_radix(level, 16).ok()?,
        first: u64::from_str_radix(first, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        run: Ulid::from_string(run).ok()?,
        plan: u64::from_str_radix(plan, 16).ok()?,
    })
}

/// Default bytes of decoded pages a [`HistoryReader`] keeps.
pub const DEFAULT_PAGE_CACHE_BYTES: usize = 16 << 20;

/// Reads history pages through a bounded cache.
#[derive(Debug, Clone)]
pub struct HistoryReader {
    store: Arc<dyn ObjectStore>,
    cache: Arc<ByteLru<String, HistoryPage>>,
}

impl HistoryReader {
    /// A reader of `store` keeping up to `cache_bytes` of pages.
    pub fn new(store: Arc<dyn ObjectStore>, cache_bytes: usize) -> Self {
        HistoryReader {
            store,
            cache: Arc::new(ByteLru::new(cache_bytes)),
        }
    }

    /// Bytes of pages cached now.
    pub fn cached_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// The page at `location`.
    ///
    /// Errors: `NotFound` when it does not exist (a reader decides whether
    /// that means trimmed or corrupt), `Corrupt` for a damaged page, store
    /// errors.
    pub async fn page(&self, location: &str) -> Result<Arc<HistoryPage>> {
        let key = location.to_owned();
        if let Some(p) = self.cache.get(&key) {
            return Ok(p);
        }
        let bytes = read_whole(self.store.as_ref(), &Path::from(location)).await?;
        let page = Arc::new(
            decode_page(&bytes).map_err(|e| e.context(format!("history page {location}")))?,
        );
        self.cache.insert(key, page.clone(), bytes.len());
        Ok(page)
    }

    /// The leaf page holding the first entry that ends after `seq`, found
    /// by descending from the frontier; `None` when every page ends at or
    /// before `seq`.
    async fn leaf_after(
        &self,
        history: &History,
        seq: u64,
    ) -> Result<Option<(PagePointer, Arc<HistoryPage>)>> {
        let Some((mut level, mut pointer)) = history
            .pointers()
            .find(|(_, p)| p.end_seq > seq)
            .map(|(l, p)| (l, p.clone()))
        else {
            return Ok(None);
        };
        loop {
            let page = self.page(&pointer.location).await?;
            if usize::from(page.level) != level {
                return Err(Error::corrupt(format!(
                    "history page {} is level {}, its pointer says {level}",
                    pointer.location, page.level
                )));
            }
            match &page.items {
                PageItems::Entries(_) => return Ok(Some((pointer, page))),
                PageItems::Pointers(ps) => {
                    let Some(child) = ps.iter().find(|p| p.end_seq > seq) else {
                        return Err(Error::corrupt(format!(
                            "history page {} ends before its pointer's range",
                            pointer.location
                        )));
                    };
                    pointer = child.clone();
                    level -= 1;
                }
            }
        }
    }

    /// Up to `max` entries (at least one when there is any) that end after
    /// `seq`, in sequence order: from the history pages first, then from
    /// `recent` (the manifest's own entries). The first one contains `seq`
    /// unless `seq` falls in a gap.
    ///
    /// Errors: `NotFound` for a page that is gone, `Corrupt`, store errors.
    pub async fn entries_from(
        &self,
        history: Option<&History>,
        recent: &[ManifestEntry],
        seq: u64,
        max: usize,
    ) -> Result<Vec<ManifestEntry>> {
        let max = max.max(1);
        let mut out = Vec::new();
        let mut at = seq;
        if let Some(h) = history {
            while out.len() < max {
                let Some((_, leaf)) = self.leaf_after(h, at).await? else {
                    break;
                };
                let PageItems::Entries(es) = &leaf.items else {
                    unreachable!("leaf_after returns leaves");
                };
                let start = es.partition_point(|e| e.end_sequence() <= at);
                for e in &es[start..] {
                    if out.len() == max {
                        break;
                    }
                    out.push(e.clone());
                }
                match es.last() {
                    Some(last) => at = last.end_sequence(),
                    None => break,
                }
            }
        }
        if out.len() < max {
            let from = out.last().map_or(seq, |e: &ManifestEntry| e.end_sequence());
            let start = recent.partition_point(|e| e.end_sequence() <= from);
            out.extend(recent[start..].iter().take(max - out.len()).cloned());
        }
        Ok(out)
    }

    /// The entry containing `seq`, if any.
    ///
    /// Errors: as for [`entries_from`](Self::entries_from).
    pub async fn locate(
        &self,
        history: Option<&History>,
        recent: &[ManifestEntry],
        seq: u64,
    ) -> Result<Option<ManifestEntry>> {
        let found = self.entries_from(history, recent, seq, 1).await?;
        Ok(found.into_iter().next().filter(|e| e.contains(seq)))
    }

    /// The sequence of the first entry within the history that holds a
    /// sequence `>= seq` (after truncating through `seq - 1`, the first
    /// live entry): `None` when no page holds one.
    ///
    /// Errors: as for [`entries_from`](Self::entries_from).
    pub async fn first_entry_from(&self, history: &History, seq: u64) -> Result<Option<u64>> {
        let Some((_, leaf)) = self.leaf_after(history, seq).await? else {
            return Ok(None);
        };
        let PageItems::Entries(es) = &leaf.items else {
            unreachable!("leaf_after returns leaves");
        };
        Ok(es
            .iter()
            .find(|e| e.end_sequence() > seq)
            .map(|e| e.sequence))
    }
}

/// Creates `page` with `PutMode::Create`, retrying within `retry`. When the
/// store says it exists (an earlier attempt landed and object_store resent
/// the request, or an earlier commit attempt of this writer stored it), the
/// object is read back: the same bytes are this writer's page.
///
/// Errors: `Conflict` when the object exists with other bytes; store
/// errors (`Unavailable` after the retries, `PermissionDenied`, ...).
pub(crate) async fn store_page(
    store: &dyn ObjectStore,
    page: &PageUpload,
    retry: &RetryPolicy,
    seed: u64,
) -> Result<()> {
    let path = Path::from(page.location.as_str());
    let mut backoff = retry.backoff(seed);
    let result = retry_store(
        &mut backoff,
        StoreOp::CreateIfAbsent,
        true,
        |outcome, err| debug!(?outcome, error = %err, %path, "history page upload retry"),
        || {
            let opts = PutOptions::from(PutMode::Create);
            store.put_opts(&path, PutPayload::from(page.bytes.clone()), opts)
        },
    )
    .await;
    match result {
        Ok(_) => {
            metrics::counter!("weft_producer_history_pages_total").increment(1);
            Ok(())
        }
        Err(gave_up) if gave_up.outcome == Outcome::Conflict => {
            let existing = store
                .get(&path)
                .await
                .map_err(|e| to_error(StoreOp::Read, path.as_ref(), e))?
                .bytes()
                .await
                .map_err(|e| to_error(StoreOp::Read, path.as_ref(), e))?;
            if existing != page.bytes {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("history page {path} already exists with other contents"),
                ));
            }
            Ok(())
        }
        Err(gave_up) => Err(
            to_error(StoreOp::CreateIfAbsent, path.as_ref(), gave_up.error).context(format!(
                "storing history page ({} attempts)",
                gave_up.attempts
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let run = Ulid::from_parts(1_700_000_000_000, 9);
        let page = PageName {
            level: 1,
            first: 0x10,
            end: 0x2a0,
            run,
            plan: 0x1f,
        };
        let p = page_path("log/history/", &page);
        assert_eq!(
            p,
            format!("log/history/01-0000000000000010-00000000000002a0-{run}-000000000000001f")
        );
        let name = p.rsplit('/').next().unwrap();
        assert_eq!(parse_page_name(name), Some(page));
        let unplanned = format!("01-0000000000000010-00000000000002a0-{run}");
        for bad in [
            "",
            "01-x",
            "1-0000000000000010-00000000000002a0-x",
            unplanned.as_str(),
        ] {
            assert_eq!(parse_page_name(bad), None, "{bad:?}");
        }
        assert_eq!(default_prefix("wal/manifest"), "wal/history");
        assert_eq!(default_prefix("manifest"), "history");
    }
}
