//! `GET /v1/session`: the pipelined append session, a WebSocket.
//!
//! Each text message is an append body (as `POST /v1/append` takes); the
//! server starts each append as it arrives, without waiting for earlier
//! ones, and answers every message in the order received with one
//! `{"ok": ...}` or `{"error": ...}`. Appends from many sessions and
//! requests share the backend's group commit. At most
//! `Limits::session_window` appends of a session are in flight; past that
//! the server stops reading the socket (TCP backpressure), so a session's
//! memory is bounded. A connection that breaks leaves its unanswered
//! appends `indeterminate` to the client: retried with their ids, they are
//! written once.
//!
//! WebSocket rather than gRPC: browsers and every language speak it
//! without generated code, it rides the same port, TLS and tokens, and the
//! messages are the JSON bodies the rest of the API uses.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use weft::{Error, ErrorKind};
use weft_api::body::{AppendBody, SessionAnswer};
use weft_api::fault::ErrorBody;

use crate::reply::rejection;
use crate::routes::log::append_body;
use crate::state::Shared;

/// `GET /v1/session`: upgrades to the session.
pub async fn session(
    State(shared): State<Arc<Shared>>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => return rejection(e).into_response(),
    };
    let max = shared.options.limits.max_body_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| run(shared, socket))
}

struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.counters.sessions.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One message's append, under the request deadline.
async fn answer_one(
    shared: &Shared,
    body: serde_json::Result<AppendBody>,
) -> weft::Result<weft_api::body::AppendReply> {
    let body = body
        .map_err(|e| Error::invalid_input(format!("a session message is an append body: {e}")))?;
    let deadline = shared.options.limits.request_timeout;
    tokio::time::timeout(deadline, append_body(shared, body))
        .await
        .unwrap_or_else(|_| {
            Err(Error::new(
                ErrorKind::Indeterminate,
                "the append did not finish within the request deadline",
            ))
        })
}

async fn run(shared: Arc<Shared>, socket: WebSocket) {
    shared.counters.sessions.fetch_add(1, Ordering::Relaxed);
    let _open = Open(shared.clone());
    let (mut sink, mut source) = socket.split();
    let window = shared.options.limits.session_window.max(1);
    let (queue, mut answers) = mpsc::channel::<JoinHandle<SessionAnswer>>(window);
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
                let shared = shared.clone();
                let answer = tokio::spawn(async move {
                    match answer_one(&shared, body).await {
                        Ok(reply) => SessionAnswer::Ok(reply),
                        Err(e) => SessionAnswer::Error(ErrorBody::of(&e, None).error),
                    }
                });
                if queue.send(answer).await.is_err() {
                    break;
                }
            }
        }
    };
    let writer = async move {
        while let Some(answer) = answers.recv().await {
            let answer = answer.await.unwrap_or_else(|_| {
                // The task panicked or was cancelled: the append may or may
                // not have happened.
                let e = Error::new(ErrorKind::Indeterminate, "the append task failed");
                SessionAnswer::Error(ErrorBody::of(&e, None).error)
            });
            let text = serde_json::to_string(&answer).unwrap_or_default();
            if sink.send(Message::Text(text.into())).await.is_err() {
                return;
            }
        }
        let _ = sink.send(Message::Close(None)).await;
    };
    futures::join!(reader, writer);
}
