//! `GET /v1/subscribe`: server-sent events, the backlog then live entries.
//!
//! Each entry is one event (`id: SEQNUM`, `event: entry`, `data: ENTRY
//! JSON`). A client that reconnects with `Last-Event-ID` resumes right
//! after that seqnum; otherwise `from` (a seqnum) or `since` (a time, in
//! milliseconds since the Unix epoch) says where to start (default: the
//! live end). An error (a position below the trim point, the log closing)
//! is one `event: error` with the error body, and the stream ends.
//!
//! A slow client never holds anything up: the subscription behind the
//! stream reads the log when it falls behind the commit feed (the library's
//! bounded feed), and the socket's own buffer is the only one per client.
//!
//! Fan-out is cheap per subscriber: an entry's event is encoded once, kept
//! in a small shared cache by seqnum ([`EventCache`](crate::events::EventCache)), and every subscriber
//! that sends it clones the same bytes; the entries a subscription has
//! ready at once go out as one body chunk (one write), not one each. With
//! 64 subscribers the encoding per subscriber and entry (JSON, base64, the
//! event's framing) had been most of the server's work.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde::Deserialize;
use weft::{LogTag, Position};
use weft_api::fault::ErrorBody;

use crate::reply::{ApiResult, rejection};
use crate::routes::log::position;
use crate::state::Shared;

/// Query of `GET /v1/subscribe`.
#[derive(Debug, Deserialize)]
pub struct SubscribeQuery {
    from: Option<u64>,
    since: Option<u64>,
    tag: Option<String>,
}

/// Counts an open subscription while it lives.
struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.counters.subscribers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The most entries one body chunk carries.
const CHUNK_ENTRIES: usize = 256;

/// How often an idle stream sends a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What a subscription's stream yields before it ends.
enum Item {
    Events(Bytes),
    /// The error event; the stream ends after it.
    Failed(Bytes),
    KeepAlive,
}

/// `GET /v1/subscribe?from=&since=&tag=`.
pub async fn subscribe(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<SubscribeQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(rejection)?;
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .and_then(|id| id.checked_add(1));
    let start = match resume {
        Some(next) => Position::At(next),
        None => position(q.from, q.since, Position::End)?,
    };
    let tag = q.tag.as_deref().map(str::parse::<LogTag>).transpose()?;
    let log = shared.log();
    let sub = match &tag {
        Some(t) => log.subscribe(t, start),
        None => log.subscribe_log(start),
    };
    shared.counters.subscribers.fetch_add(1, Ordering::Relaxed);
    let open = Open(shared.clone());
    let events = sub.ready_chunks(CHUNK_ENTRIES).map(move |items| {
        let _keep = &open;
        let mut entries = Vec::with_capacity(items.len());
        let mut failure = None;
        for item in items {
            match item {
                Ok(entry) => entries.push(entry),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let mut out = BytesMut::new();
        if !entries.is_empty() {
            open.0
                .counters
                .delivered
                .fetch_add(entries.len() as u64, Ordering::Relaxed);
            out.extend_from_slice(&open.0.events.events_of(&entries));
        }
        match failure {
            None => Item::Events(out.freeze()),
            Some(e) => {
                let json = serde_json::to_string(&ErrorBody::of(&e, None)).unwrap_or_default();
                out.extend_from_slice(format!("event: error\ndata: {json}\n\n").as_bytes());
                Item::Failed(out.freeze())
            }
        }
    });
    let keep_alive = futures::stream::unfold((), |()| async {
        weft::clock::sleep(KEEP_ALIVE).await;
        Some((Item::KeepAlive, ()))
    });
    // The events, with a comment while idle; the stream ends with the
    // subscription (after its error event, if any) or at shutdown.
    let events = events
        .map(Some)
        .chain(futures::stream::once(async { None }));
    let merged = futures::stream::select(events, keep_alive.map(Some))
        .take_while(|item| futures::future::ready(item.is_some()))
        .filter_map(futures::future::ready)
        .scan(false, |ended, item| {
            let out = match item {
                _ if *ended => None,
                Item::Events(bytes) => Some(bytes),
                Item::Failed(bytes) => {
                    *ended = true;
                    Some(bytes)
                }
                Item::KeepAlive => Some(Bytes::from_static(b":\n\n")),
            };
            futures::future::ready(out)
        })
        .filter(|bytes| futures::future::ready(!bytes.is_empty()))
        .map(Ok::<_, Infallible>)
        .take_until(shared.shutting_down());
    let mut response = Body::from_stream(merged).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}
