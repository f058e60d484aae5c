//! `GET /v1/subscribe`: server-sent events, the backlog then live entries.
//!
//! Each entry is one event (`id: SEQNUM`, `event: entry`, `data: ENTRY
//! JSON`). A client that reconnects with `Last-Event-ID` resumes right
//! after that seqnum; otherwise `from` says where to start (default: the
//! live end). An error (a position below the trim point, the log closing)
//! is one `event: error` with the error body, and the stream ends.
//!
//! A slow client never holds anything up: the subscription behind the
//! stream reads the log when it falls behind the commit feed (the library's
//! bounded feed), and the socket's own buffer is the only one per client.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use weft::{LogTag, Position};
use weft_api::body::Entry;
use weft_api::fault::ErrorBody;

use crate::reply::{ApiResult, rejection};
use crate::routes::log::position;
use crate::state::Shared;

/// Query of `GET /v1/subscribe`.
#[derive(Debug, Deserialize)]
pub struct SubscribeQuery {
    from: Option<u64>,
    tag: Option<String>,
}

/// Counts an open subscription while it lives.
struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.counters.subscribers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `GET /v1/subscribe?from=&tag=`.
pub async fn subscribe(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<SubscribeQuery>, QueryRejection>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let Query(q) = query.map_err(rejection)?;
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .and_then(|id| id.checked_add(1));
    let start = match resume {
        Some(next) => Position::At(next),
        None => position(q.from),
    };
    let tag = q.tag.as_deref().map(str::parse::<LogTag>).transpose()?;
    let log = shared.log();
    let sub = match &tag {
        Some(t) => log.subscribe(t, start),
        None => log.subscribe_log(start),
    };
    shared.counters.subscribers.fetch_add(1, Ordering::Relaxed);
    let open = Open(shared.clone());
    let events = sub
        .map(move |item| {
            let _keep = &open;
            match item {
                Ok(entry) => {
                    open.0.counters.delivered.fetch_add(1, Ordering::Relaxed);
                    let json = serde_json::to_string(&Entry::from(&entry)).unwrap_or_default();
                    (
                        false,
                        Event::default()
                            .id(entry.seqnum.to_string())
                            .event("entry")
                            .data(json),
                    )
                }
                Err(e) => {
                    let json = serde_json::to_string(&ErrorBody::of(&e, None)).unwrap_or_default();
                    (true, Event::default().event("error").data(json))
                }
            }
        })
        // Deliver the error event, then end.
        .scan(false, |ended, (last, event)| {
            let out = (!*ended).then_some(event);
            *ended |= last;
            futures::future::ready(out)
        })
        .map(Ok)
        .take_until(shared.shutting_down());
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
