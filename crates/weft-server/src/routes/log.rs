//! The log's routes: append, reads, tip, streams, trim.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use weft::{AppendRequest, Error, ErrorKind, Expected, Log, LogTag, Position};
use weft_api::body::{
    AppendBody, AppendReply, EntriesPage, Entry, PrevEntry, Stream, StreamsPage, Tip, Trim,
    VersionsPage,
};

use crate::reply::{ApiError, ApiResult, rejection};
use crate::state::{Role, Shared};

/// The most entries one page returns (the library's page size, so a
/// client's page of it takes one request).
pub const MAX_PAGE: usize = weft::log::PAGE_ENTRIES;
/// The payload bytes past which a page is cut short (at least one entry).
pub const MAX_PAGE_BYTES: usize = 8 << 20;
const DEFAULT_PAGE: usize = 100;

fn page_size(limit: Option<usize>) -> usize {
    limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE)
}

/// Cuts `page` at [`MAX_PAGE_BYTES`]; true when the page is short of what
/// was asked for only because of the server's limits.
fn cut(page: &mut Vec<weft::LogEntry>, asked: Option<usize>, max: usize) -> bool {
    let mut bytes = 0usize;
    let keep = page
        .iter()
        .position(|e| {
            bytes += e.data.len();
            bytes > MAX_PAGE_BYTES
        })
        .map_or(page.len(), |i| i.max(1));
    let cut_bytes = keep < page.len();
    page.truncate(keep);
    cut_bytes || (page.len() == max && asked.unwrap_or(DEFAULT_PAGE) > max)
}

pub(crate) fn tag(text: &str) -> ApiResult<LogTag> {
    text.parse::<LogTag>().map_err(ApiError::from)
}

/// The log to write to, or `read_only` naming the leader.
pub(crate) fn writable(shared: &Shared) -> ApiResult<Log> {
    let current = shared.current();
    if current.role == Role::Leader {
        return Ok(current.log);
    }
    let message = match &current.leader {
        Some(leader) => format!("this server is a follower; the leader is {leader}"),
        None => "this server is a follower; send writes to the leader".to_owned(),
    };
    Err(ApiError::new(Error::new(ErrorKind::ReadOnly, message)))
}

/// Turns an append body into requests for [`Log::append_batch_if`].
///
/// Errors: `InvalidInput` for no entry, a bad tag or payload, a top-level
/// id on a batch, or a condition on another stream than the first entry's.
pub fn requests(body: AppendBody) -> weft::Result<Vec<(AppendRequest, Option<Expected>)>> {
    let AppendBody {
        entries,
        condition,
        id,
    } = body;
    if entries.is_empty() {
        return Err(Error::invalid_input("an append needs at least one entry"));
    }
    if id.is_some() && entries.len() > 1 {
        return Err(Error::invalid_input(
            "a batch gives each entry its own `id`; the top-level `id` is for one entry",
        ));
    }
    let mut out = Vec::with_capacity(entries.len());
    for (i, e) in entries.into_iter().enumerate() {
        let tags = weft_api::body::tags(&e.tags)?;
        let mut request = AppendRequest::with_tags(tags, e.data);
        if let Some(entry_id) = e.id.or(if i == 0 { id.clone() } else { None }) {
            request = request.with_id(entry_id);
        }
        out.push((request, e.expected_version.map(Expected::from)));
    }
    if let Some(c) = condition {
        let want: LogTag = c.tag.parse()?;
        let first = &mut out[0];
        if first.0.primary_tag() != Some(&want) {
            return Err(Error::invalid_input(format!(
                "the condition is on {want}, but the first entry's primary tag is {}",
                first
                    .0
                    .primary_tag()
                    .map_or_else(|| "missing".to_owned(), |t| t.to_string())
            )));
        }
        first.1 = Some(Expected::Exact(c.next_version));
    }
    Ok(out)
}

/// Appends a body's entries and counts them.
pub(crate) async fn append_body(shared: &Shared, body: AppendBody) -> weft::Result<AppendReply> {
    shared
        .counters
        .append_requests
        .fetch_add(1, Ordering::Relaxed);
    let log = writable(shared).map_err(|_| {
        Error::new(
            ErrorKind::ReadOnly,
            "this server is a follower; send writes to the leader",
        )
    })?;
    let results = log.append_batch_if(requests(body)?).await?;
    shared
        .counters
        .appended_entries
        .fetch_add(results.len() as u64, Ordering::Relaxed);
    AppendReply::of(&results)
}

/// `POST /v1/append`.
pub async fn append(
    State(shared): State<Arc<Shared>>,
    body: Result<Json<AppendBody>, JsonRejection>,
) -> ApiResult<Json<AppendReply>> {
    let Json(body) = body.map_err(rejection)?;
    writable(&shared)?;
    Ok(Json(append_body(&shared, body).await?))
}

/// Query of `GET /v1/entries`.
#[derive(Debug, Deserialize)]
pub struct EntriesQuery {
    from: Option<u64>,
    since: Option<u64>,
    limit: Option<usize>,
    tag: Option<String>,
}

/// `GET /v1/entries?from=&since=&limit=&tag=`: a page from a seqnum, or
/// from the first entry at or after a time (`since`, milliseconds since
/// the Unix epoch, found in O(log n) reads); by default from the first
/// live entry.
pub async fn entries(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<EntriesQuery>, QueryRejection>,
) -> ApiResult<Json<EntriesPage>> {
    let Query(q) = query.map_err(rejection)?;
    let log = shared.log();
    let from = match position(q.from, q.since, Position::Beginning)? {
        Position::At(from) => from,
        Position::Since(ms) => log.storage().seek_time(ms).await?,
        _ => log.tip().await?.first,
    };
    let max = page_size(q.limit);
    let tag = q.tag.as_deref().map(tag).transpose()?;
    // A truncated stream is read from its start.
    let from = match &tag {
        Some(t) => from.max(log.stream_lifecycle(t).await?.start_seqnum),
        None => from,
    };
    let mut page = log.storage().read(tag.as_ref(), from, max).await?;
    let more = cut(&mut page, q.limit, max);
    let next = page.last().map_or(from, |last| last.seqnum + 1);
    Ok(Json(EntriesPage {
        entries: page.iter().map(Entry::from).collect(),
        next,
        more,
    }))
}

/// `GET /v1/entries/{seqnum}`.
pub async fn entry(
    State(shared): State<Arc<Shared>>,
    seqnum: Result<Path<u64>, PathRejection>,
) -> ApiResult<Json<Entry>> {
    let Path(seqnum) = seqnum.map_err(rejection)?;
    let log = shared.log();
    let found = match log.storage().read(None, seqnum, 1).await {
        Ok(page) => page.into_iter().next().filter(|e| e.seqnum == seqnum),
        // The contract: a trimmed entry is absent.
        Err(e) if e.kind() == ErrorKind::Trimmed => None,
        Err(e) => return Err(e.into()),
    };
    found.map(|e| Json(Entry::from(&e))).ok_or_else(|| {
        ApiError::new(Error::new(
            ErrorKind::NotFound,
            format!("no entry at seqnum {seqnum}"),
        ))
    })
}

/// Query of `GET /v1/entries/prev`.
#[derive(Debug, Deserialize)]
pub struct PrevQuery {
    before: u64,
    tag: Option<String>,
}

/// `GET /v1/entries/prev?before=&tag=`: the last entry below a seqnum.
pub async fn prev(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<PrevQuery>, QueryRejection>,
) -> ApiResult<Json<PrevEntry>> {
    let Query(q) = query.map_err(rejection)?;
    let tag = q.tag.as_deref().map(tag).transpose()?;
    let found = shared
        .log()
        .storage()
        .read_prev(tag.as_ref(), q.before)
        .await?;
    Ok(Json(PrevEntry {
        entry: found.as_ref().map(Entry::from),
    }))
}

/// `GET /v1/tip`.
pub async fn tip(State(shared): State<Arc<Shared>>) -> ApiResult<Json<Tip>> {
    let tip = shared.log().tip().await?;
    Ok(Json(Tip {
        first: tip.first,
        next: tip.next,
    }))
}

/// Query of `GET /v1/streams`.
#[derive(Debug, Deserialize)]
pub struct StreamsQuery {
    after: Option<String>,
    from: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/streams?after=&from=&limit=`: the log's streams in the storage
/// seam's stream order, from its index or tables
/// ([`Log::streams`](weft::Log::streams)); `after` starts after a tag,
/// `from` at one.
pub async fn streams(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<StreamsQuery>, QueryRejection>,
) -> ApiResult<Json<StreamsPage>> {
    let Query(q) = query.map_err(rejection)?;
    let limit = page_size(q.limit);
    let (start, skip) = match (&q.after, &q.from) {
        (Some(_), Some(_)) => {
            return Err(ApiError::new(Error::invalid_input(
                "give `after` or `from`, not both",
            )));
        }
        (Some(a), None) => (Some(tag(a)?), true),
        (None, Some(f)) => (Some(tag(f)?), false),
        (None, None) => (None, false),
    };
    // One more than the page, to tell whether there are more (and to drop
    // `after` itself).
    let mut rows = shared
        .log()
        .streams(start.as_ref(), limit.saturating_add(2))
        .await?;
    if skip && rows.first().map(|r| &r.tag) == start.as_ref() {
        rows.remove(0);
    }
    let next = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(|r| r.tag.to_string())
    } else {
        None
    };
    Ok(Json(StreamsPage {
        streams: rows
            .into_iter()
            .map(|r| Stream {
                tag: r.tag.to_string(),
                next_version: r.next_version,
                entries: r.entries,
            })
            .collect(),
        next,
    }))
}

/// `GET /v1/streams/{tag}`: the stream's next version (asked of the log)
/// and its live entries (from the log's stream list).
pub async fn stream(
    State(shared): State<Arc<Shared>>,
    name: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Stream>> {
    let Path(name) = name.map_err(rejection)?;
    let t = tag(&name)?;
    let log = shared.log();
    let next_version = log.next_version(&t).await?;
    let entries = log
        .streams(Some(&t), 1)
        .await?
        .into_iter()
        .find(|r| r.tag == t)
        .map_or(0, |r| r.entries);
    Ok(Json(Stream {
        tag: t.to_string(),
        next_version,
        entries,
    }))
}

/// Query of `GET /v1/streams/{tag}/entries`.
#[derive(Debug, Deserialize)]
pub struct VersionsQuery {
    from_version: Option<u64>,
    limit: Option<usize>,
}

/// `GET /v1/streams/{tag}/entries?from_version=&limit=`.
pub async fn stream_entries(
    State(shared): State<Arc<Shared>>,
    name: Result<Path<String>, PathRejection>,
    query: Result<Query<VersionsQuery>, QueryRejection>,
) -> ApiResult<Json<VersionsPage>> {
    let Path(name) = name.map_err(rejection)?;
    let Query(q) = query.map_err(rejection)?;
    let t = tag(&name)?;
    let log = shared.log();
    // A truncated stream's reads start at its start.
    let start = log.stream_lifecycle(&t).await?.start_version;
    let from = q.from_version.unwrap_or(0).max(start);
    let max = page_size(q.limit);
    let mut page = log.storage().read_versions(&t, from, max).await?;
    let more = cut(&mut page, q.limit, max);
    let next_version = page.last().map_or(from, |e| e.stream_version + 1);
    Ok(Json(VersionsPage {
        entries: page.iter().map(Entry::from).collect(),
        next_version,
        more,
    }))
}

/// `POST /v1/trim`.
pub async fn trim(
    State(shared): State<Arc<Shared>>,
    body: Result<Json<Trim>, JsonRejection>,
) -> ApiResult<Json<Tip>> {
    let Json(body) = body.map_err(rejection)?;
    let log = writable(&shared)?;
    log.trim(body.through).await?;
    let tip = log.tip().await?;
    Ok(Json(Tip {
        first: tip.first,
        next: tip.next,
    }))
}

/// Resolves an optional `from` seqnum: absent is the live end.
/// Where a read or subscription asked to start: a seqnum (`from`), a time
/// (`since`, milliseconds since the Unix epoch), or `default`.
///
/// Errors: `InvalidInput` when both are given.
pub(crate) fn position(
    from: Option<u64>,
    since: Option<u64>,
    default: Position,
) -> weft::Result<Position> {
    match (from, since) {
        (Some(_), Some(_)) => Err(Error::invalid_input(
            "give `from` (a seqnum) or `since` (a time), not both",
        )),
        (Some(from), None) => Ok(Position::At(from)),
        (None, Some(ms)) => Ok(Position::Since(ms)),
        (None, None) => Ok(default),
    }
}
