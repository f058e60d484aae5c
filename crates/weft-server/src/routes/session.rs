//! `GET /v1/session`: the pipelined append session, a WebSocket.
//!
//! Each text (or binary) message is an append body, as `POST /v1/append`
//! takes. The client sends without waiting; the server answers every
//! message, in the order received, with one `{"ok": ...}` or
//! `{"error": ...}`, and **the log holds the messages' entries in the order
//! they were sent**, as a producer expects of one connection.
//!
//! How, without giving up throughput: messages that arrive while an
//! append is in flight are coalesced into the next one (one atomic batch
//! for the backend, so one group commit for many messages), and batches
//! are submitted one after another. Coalescing never changes what a
//! message means: every message is checked on its own first (a malformed
//! one is answered `invalid_input` in its place), a conditional message
//! goes in a batch of its own (its conflict must not fail its
//! neighbours), and a batch is cut before an append id it already holds.
//!
//! At most `Limits::session_window` messages wait; past that the server
//! stops reading the socket (TCP backpressure), so a session's memory is
//! bounded. A connection that breaks leaves its unanswered appends
//! `indeterminate` to the client: retried with their ids, they are written
//! once.
//!
//! WebSocket rather than gRPC: browsers and every language speak it
//! without generated code, it rides the same port, TLS and tokens, and the
//! messages are the JSON bodies the rest of the API uses.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use weft::{AppendRequest, Error, ErrorKind, Expected};
use weft_api::body::{AppendBody, AppendReply, SessionAnswer};
use weft_api::fault::ErrorBody;

use crate::reply::rejection;
use crate::routes::log::{requests, writable};
use crate::state::Shared;

/// The most entries one coalesced batch holds.
const MAX_BATCH_ENTRIES: usize = 4096;
/// The most payload bytes one coalesced batch holds (a single larger
/// message still goes alone).
const MAX_BATCH_BYTES: usize = 8 << 20;

/// `GET /v1/session`: upgrades to the session.
pub async fn session(
    State(shared): State<Arc<Shared>>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    slot: Option<axum::Extension<crate::limits::HeldSlot>>,
) -> Response {
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => return rejection(e).into_response(),
    };
    let max = shared.options.limits.max_body_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| async move {
            // The request slot stays taken while the session is open.
            let _slot = slot;
            run(shared, socket).await
        })
}

struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.counters.sessions.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One message, checked on its own.
type Checked = weft::Result<Vec<(AppendRequest, Option<Expected>)>>;

/// Parses and checks a message as `POST /v1/append` would.
fn check(shared: &Shared, body: serde_json::Result<AppendBody>) -> Checked {
    let body = body
        .map_err(|e| Error::invalid_input(format!("a session message is an append body: {e}")))?;
    let requests = requests(body)?;
    let max = shared.log().storage().capabilities().max_entry_bytes;
    for (r, _) in &requests {
        r.validate(max)?;
    }
    Ok(requests)
}

async fn run(shared: Arc<Shared>, socket: WebSocket) {
    shared.counters.sessions.fetch_add(1, Ordering::Relaxed);
    let _open = Open(shared.clone());
    let (mut sink, mut source) = socket.split();
    let window = shared.options.limits.session_window.max(1);
    let (checked_tx, checked_rx) = mpsc::channel::<Checked>(window);
    let (answer_tx, mut answer_rx) = mpsc::channel::<SessionAnswer>(window);
    let reader = {
        let shared = shared.clone();
        async move {
            let shutdown = shared.shutting_down();
            tokio::pin!(shutdown);
            loop {
                let message = tokio::select! {
                    m = source.next() => m,
                    () = &mut shutdown => None,
                };
                let body = match message {
                    Some(Ok(Message::Text(text))) => serde_json::from_str::<AppendBody>(&text),
                    Some(Ok(Message::Binary(bytes))) => {
                        serde_json::from_slice::<AppendBody>(&bytes)
                    }
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                    Some(Ok(_)) => continue,
                };
                if checked_tx.send(check(&shared, body)).await.is_err() {
                    break;
                }
            }
        }
    };
    let submitter = submit(shared.clone(), checked_rx, answer_tx);
    let writer = async move {
        while let Some(answer) = answer_rx.recv().await {
            let text = serde_json::to_string(&answer).unwrap_or_default();
            if sink.send(Message::Text(text.into())).await.is_err() {
                return;
            }
        }
        let _ = sink.send(Message::Close(None)).await;
    };
    futures::join!(reader, submitter, writer);
}

/// Takes checked messages in order, coalesces what is waiting into
/// batches, appends the batches one after another, and answers each
/// message in order.
async fn submit(
    shared: Arc<Shared>,
    mut checked: mpsc::Receiver<Checked>,
    answers: mpsc::Sender<SessionAnswer>,
) {
    let mut held: Option<Checked> = None;
    loop {
        let first = match held.take() {
            Some(m) => m,
            None => match checked.recv().await {
                Some(m) => m,
                None => return,
            },
        };
        let first = match first {
            Ok(entries) => entries,
            Err(e) => {
                if answers.send(error(&e)).await.is_err() {
                    return;
                }
                continue;
            }
        };
        // Gather what is already waiting, up to the batch's limits.
        let conditional =
            |m: &[(AppendRequest, Option<Expected>)]| m.iter().any(|(_, v)| v.is_some());
        let mut ids: HashSet<String> = HashSet::new();
        let note_ids = |m: &[(AppendRequest, Option<Expected>)], ids: &mut HashSet<String>| {
            m.iter()
                .filter_map(|(r, _)| r.append_id())
                .all(|id| ids.insert(id.to_owned()))
        };
        let mut bytes: usize = first.iter().map(|(r, _)| r.data().len()).sum();
        let mut entries = first.len();
        let alone = conditional(&first);
        note_ids(&first, &mut ids);
        let mut messages = vec![first];
        while !alone && entries < MAX_BATCH_ENTRIES && bytes < MAX_BATCH_BYTES {
            let Ok(next) = checked.try_recv() else { break };
            let fits = match &next {
                Ok(m) => {
                    let size: usize = m.iter().map(|(r, _)| r.data().len()).sum();
                    !conditional(m)
                        && entries + m.len() <= MAX_BATCH_ENTRIES
                        && bytes + size <= MAX_BATCH_BYTES
                        && {
                            let mut trial = ids.clone();
                            note_ids(m, &mut trial) && {
                                ids = trial;
                                true
                            }
                        }
                }
                Err(_) => false,
            };
            if !fits {
                held = Some(next);
                break;
            }
            if let Ok(m) = next {
                bytes += m.iter().map(|(r, _)| r.data().len()).sum::<usize>();
                entries += m.len();
                messages.push(m);
            }
        }
        for answer in append(&shared, messages).await {
            if answers.send(answer).await.is_err() {
                return;
            }
        }
    }
}

/// Appends the messages as one batch and splits the results per message.
async fn append(
    shared: &Shared,
    messages: Vec<Vec<(AppendRequest, Option<Expected>)>>,
) -> Vec<SessionAnswer> {
    let sizes: Vec<usize> = messages.iter().map(Vec::len).collect();
    shared
        .counters
        .append_requests
        .fetch_add(messages.len() as u64, Ordering::Relaxed);
    let outcome = match writable(shared) {
        Ok(log) => {
            let batch: Vec<_> = messages.into_iter().flatten().collect();
            let deadline = shared.options.limits.request_timeout;
            tokio::time::timeout(deadline, log.append_batch_if(batch))
                .await
                .unwrap_or_else(|_| {
                    Err(Error::new(
                        ErrorKind::Indeterminate,
                        "the append did not finish within the request deadline",
                    ))
                })
        }
        Err(_) => Err(Error::new(
            ErrorKind::ReadOnly,
            "this server is a follower; send writes to the leader",
        )),
    };
    match outcome {
        Ok(results) => {
            shared
                .counters
                .appended_entries
                .fetch_add(results.len() as u64, Ordering::Relaxed);
            let mut rest = results.as_slice();
            sizes
                .into_iter()
                .map(|n| {
                    let (mine, others) = rest.split_at(n.min(rest.len()));
                    rest = others;
                    match AppendReply::of(mine) {
                        Ok(reply) => SessionAnswer::Ok(reply),
                        Err(e) => error(&e),
                    }
                })
                .collect()
        }
        Err(e) => sizes.iter().map(|_| error(&e)).collect(),
    }
}

fn error(e: &Error) -> SessionAnswer {
    SessionAnswer::Error(ErrorBody::of(e, None).error)
}
