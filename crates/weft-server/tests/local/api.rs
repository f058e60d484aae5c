//! The HTTP API's behaviour: error kinds and statuses, limits, followers,
//! subscriptions resumed with Last-Event-ID, the pipelined session, TLS.

use crate::support;

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use weft::{AppendRequest, Log, LogTag};
use weft_server::{Role, TlsFiles};

fn tag(s: &str) -> LogTag {
    s.parse().unwrap()
}

async fn post(url: &str, body: Value) -> reqwest::Response {
    support::http().post(url).json(&body).send().await.unwrap()
}

fn one(tag: &str, data: &str) -> Value {
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD.encode(data);
    json!({"entries": [{"tags": [tag], "data": data}]})
}

/// Each error kind the API can produce comes with its status, a body that
/// names it, and the detail a client acts on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_their_kind_with_its_status() {
    let server = support::serve().await;
    let base = server.url();
    let append = format!("{base}/v1/append");
    let ok = post(&append, one("orders", "a")).await;
    assert_eq!(ok.status(), 200);
    let reply: Value = ok.json().await.unwrap();
    assert_eq!(reply["seqnum"], 0);
    assert_eq!(reply["count"], 1);

    // conflict: 409, with the stream's next version.
    let mut conditional = one("orders", "b");
    conditional["condition"] = json!({"tag": "orders", "next_version": 0});
    let conflict = post(&append, conditional).await;
    assert_eq!(conflict.status(), 409);
    let body: Value = conflict.json().await.unwrap();
    assert_eq!(body["error"]["kind"], "conflict");
    assert_eq!(body["error"]["detail"]["version_conflict"]["next"], 1);

    // invalid_input: 400 for bad JSON, bad base64, a bad tag, no entries.
    for bad in [
        json!({"entries": []}),
        json!({"entries": [{"tags": ["orders"], "data": "***"}]}),
        json!({"entries": [{"tags": [""], "data": "eA=="}]}),
        json!({"nothing": true}),
    ] {
        let r = post(&append, bad.clone()).await;
        assert_eq!(r.status(), 400, "{bad}");
        assert_eq!(support::kind_of(r).await, "invalid_input");
    }
    // not_found: 404 for an absent entry and an unknown route.
    let http = support::http();
    let r = http
        .get(format!("{base}/v1/entries/99"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(support::kind_of(r).await, "not_found");
    let r = http.get(format!("{base}/v2/nothing")).send().await.unwrap();
    assert_eq!(r.status(), 404);

    // trimmed: 416 with the first readable seqnum.
    post(&append, one("orders", "c")).await;
    let r = post(&format!("{base}/v1/trim"), json!({"through": 0})).await;
    assert_eq!(r.status(), 200);
    let r = http
        .get(format!("{base}/v1/entries?from=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 416);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["kind"], "trimmed");
    assert_eq!(body["error"]["detail"]["trimmed"]["first_available"], 1);

    // Reads: by seqnum, by version, the tip and the streams.
    let page: Value = http
        .get(format!("{base}/v1/streams/orders/entries?from_version=1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["entries"][0]["seqnum"], 1);
    assert_eq!(page["next_version"], 2);
    let tip: Value = http
        .get(format!("{base}/v1/tip"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tip, json!({"first": 1, "next": 2}));
    server.shutdown().await.unwrap();
}

/// A follower answers writes `read_only` (421) and serves reads; readyz
/// tells the roles apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_refuses_writes_and_says_so() {
    let log = Log::memory();
    log.append(AppendRequest::new(tag("t"), "x")).await.unwrap();
    let server = support::serve_with(log, Role::Follower, support::options()).await;
    let base = server.url();
    let r = post(&format!("{base}/v1/append"), one("t", "y")).await;
    assert_eq!(r.status(), 421);
    assert_eq!(support::kind_of(r).await, "read_only");
    let http = support::http();
    let r = http
        .get(format!("{base}/v1/entries/0"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let ready: Value = http
        .get(format!("{base}/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["role"], "follower");
    let leader_only = http
        .get(format!("{base}/readyz?role=leader"))
        .send()
        .await
        .unwrap();
    assert_eq!(leader_only.status(), 503);
    server.shutdown().await.unwrap();
}

/// Over the in-flight byte budget a request is shed with 503, kind
/// `unavailable` and a retry hint; over the body limit it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_shed_with_a_retry_hint() {
    let mut options = support::options();
    options.limits.max_in_flight_bytes = 64;
    options.limits.max_body_bytes = 1024;
    let server = support::serve_with(Log::memory(), Role::Leader, options).await;
    let base = server.url();
    let big = one("t", &"x".repeat(200));
    let r = post(&format!("{base}/v1/append"), big).await;
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["kind"], "unavailable");
    assert!(body["error"]["retry_after_ms"].as_u64().unwrap() > 0);
    // A small one fits.
    let r = post(&format!("{base}/v1/append"), one("t", "x")).await;
    assert_eq!(r.status(), 200);
    server.shutdown().await.unwrap();
}

/// The first `n` events of an SSE response that have an `id:` line (entry
/// events), as text. One chunk may carry many events: only the first `n`
/// are taken (the client stops there, as if it disconnected after the nth).
async fn sse_events(response: reqwest::Response, n: usize) -> Vec<String> {
    let mut events = Vec::new();
    let mut text = String::new();
    let mut stream = response.bytes_stream();
    while events.len() < n {
        let chunk = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
        while events.len() < n
            && let Some(end) = text.find("\n\n")
        {
            let event: String = text.drain(..end + 2).collect();
            if event.lines().any(|l| l.starts_with("id: ")) {
                events.push(event);
            }
        }
    }
    events
}

/// The seqnums (`id:` lines) of the first `n` entry events.
async fn sse_ids(response: reqwest::Response, n: usize) -> Vec<u64> {
    sse_events(response, n)
        .await
        .iter()
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("id: ")))
        .map(|id| id.trim().parse().unwrap())
        .collect()
}

/// GETs `url`, which must answer 200, as JSON.
async fn get_json(url: &str) -> Value {
    let r = support::http().get(url).send().await.unwrap();
    assert_eq!(r.status(), 200, "{url}");
    r.json().await.unwrap()
}

/// The seqnums of a page's entries.
fn seqnums_of(page: &Value) -> Vec<u64> {
    page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seqnum"].as_u64().unwrap())
        .collect()
}

/// A subscription delivers backlog then live entries; reconnecting with
/// Last-Event-ID resumes right after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_resume_after_last_event_id() {
    let log = Log::memory();
    for i in 0..5 {
        log.append(AppendRequest::new(tag("t"), format!("{i}")))
            .await
            .unwrap();
    }
    let server = support::serve_with(log.clone(), Role::Leader, support::options()).await;
    let url = format!("{}/v1/subscribe?from=0", server.url());
    let http = support::http();
    let first = http.get(&url).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(sse_ids(first, 3).await, vec![0, 1, 2]);
    // Reconnect after seqnum 2; one more entry arrives live.
    let resumed = http
        .get(&url)
        .header("last-event-id", "2")
        .send()
        .await
        .unwrap();
    let appender = tokio::spawn(async move {
        log.append(AppendRequest::new(tag("t"), "live"))
            .await
            .unwrap()
    });
    assert_eq!(sse_ids(resumed, 3).await, vec![3, 4, 5]);
    assert_eq!(appender.await.unwrap().seqnum, 5);
    server.shutdown().await.unwrap();
}

/// `since` starts a page or a subscription at the first entry whose time
/// is at or after it (the log's clock is a manual one, so every entry's
/// time is known); with `from` as well it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_subscriptions_start_at_a_time() {
    let clock = weft::clock::ManualClock::new(1_000);
    let log = Log::new(weft::MemoryStorage::with_clock(clock.clone()));
    for data in ["a", "b", "c"] {
        log.append(AppendRequest::new(tag("t"), data))
            .await
            .unwrap();
        clock.advance(1_000);
    }
    let server = support::serve_with(log.clone(), Role::Leader, support::options()).await;
    let base = server.url();
    let http = support::http();
    let page = |query: &str| {
        let url = format!("{base}/v1/entries?{query}");
        async move {
            let body = get_json(&url).await;
            (seqnums_of(&body), body["next"].as_u64().unwrap())
        }
    };
    // Entries were stamped 1000, 2000 and 3000.
    assert_eq!(page("since=0").await, (vec![0, 1, 2], 3));
    assert_eq!(page("since=1500").await, (vec![1, 2], 3));
    assert_eq!(page("since=2000&tag=t").await, (vec![1, 2], 3));
    assert_eq!(page("since=3001").await, (vec![], 3));
    for both in ["entries?from=0&since=1", "subscribe?from=0&since=1"] {
        let r = http.get(format!("{base}/v1/{both}")).send().await.unwrap();
        assert_eq!(r.status(), 400, "{both}");
        assert_eq!(support::kind_of(r).await, "invalid_input");
    }
    // A subscription from a time: the backlog from there, then live.
    let sub = http
        .get(format!("{base}/v1/subscribe?since=2500"))
        .send()
        .await
        .unwrap();
    assert_eq!(sub.status(), 200);
    let appender =
        tokio::spawn(async move { log.append(AppendRequest::new(tag("t"), "d")).await.unwrap() });
    assert_eq!(sse_ids(sub, 2).await, vec![2, 3]);
    assert_eq!(appender.await.unwrap().seqnum, 3);
    server.shutdown().await.unwrap();
}

/// A stream truncated or deleted through the API reads from its start on
/// every by-tag route; bad changes are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_and_deleted_streams_read_from_their_start() {
    let log = Log::memory();
    for i in 0..3 {
        log.append(AppendRequest::new(tag("t"), format!("{i}")))
            .await
            .unwrap();
    }
    log.append(AppendRequest::new(tag("u"), "other"))
        .await
        .unwrap();
    let server = support::serve_with(log.clone(), Role::Leader, support::options()).await;
    let base = server.url();
    let http = support::http();
    let get = |path: &str| {
        let url = format!("{base}{path}");
        async move { get_json(&url).await }
    };
    let lifecycle = format!("{base}/v1/streams/t/lifecycle");
    let shown = get("/v1/streams/t/lifecycle").await;
    assert_eq!(shown["start_version"], 0);
    assert_eq!(shown["next_version"], 3);
    let set = post(&lifecycle, json!({"truncate_before": 2})).await;
    assert_eq!(set.status(), 200);
    let set: Value = set.json().await.unwrap();
    assert_eq!(
        (set["start_version"].as_u64(), set["deleted"].as_bool()),
        (Some(2), Some(false))
    );

    let page = get("/v1/entries?tag=t&from=0").await;
    assert_eq!(seqnums_of(&page), [2]);
    // A read from below the start jumps to it.
    let page = get("/v1/entries?tag=t&from=0&limit=1").await;
    assert_eq!(
        (seqnums_of(&page), page["next"].as_u64()),
        (vec![2], Some(3))
    );
    let page = get("/v1/streams/t/entries?from_version=0").await;
    assert_eq!(seqnums_of(&page), [2]);
    let whole = get("/v1/entries?from=0").await;
    assert_eq!(seqnums_of(&whole), [0, 1, 2, 3], "the log keeps them");

    for bad in [
        json!({}),
        json!({"truncate_before": 1, "delete": true}),
        json!({"truncate_before": 9}),
        json!({"drop": 1}),
    ] {
        let r = post(&lifecycle, bad.clone()).await;
        assert_eq!(r.status(), 400, "{bad}");
        assert_eq!(support::kind_of(r).await, "invalid_input", "{bad}");
    }
    let deleted: Value = post(&lifecycle, json!({"delete": true}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            deleted["start_version"].as_u64(),
            deleted["start_seqnum"].as_u64(),
            deleted["deleted"].as_bool()
        ),
        (Some(3), Some(4), Some(true))
    );
    assert!(seqnums_of(&get("/v1/entries?tag=t").await).is_empty());
    // A subscription by tag from the start sees only the new life.
    let sub = http
        .get(format!("{base}/v1/subscribe?tag=t&from=0"))
        .send()
        .await
        .unwrap();
    let appender = tokio::spawn(async move {
        log.append(AppendRequest::new(tag("t"), "again"))
            .await
            .unwrap()
    });
    assert_eq!(sse_ids(sub, 1).await, vec![4]);
    assert_eq!(appender.await.unwrap().stream_version, 3);
    server.shutdown().await.unwrap();
}

/// The session takes many appends before any answer and answers them in
/// order; a bad message gets an error answer in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_pipelines_appends_and_answers_in_order() {
    let server = support::serve().await;
    let url = format!("ws://{}/v1/session", server.local_addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    use tokio_tungstenite::tungstenite::Message;
    let n = 200;
    for i in 0..n {
        let mut body = one("s", &format!("{i}"));
        body["id"] = json!(format!("id-{i}"));
        let text = if i == 100 {
            "not json".to_owned()
        } else {
            body.to_string()
        };
        ws.send(Message::Text(text.into())).await.unwrap();
    }
    let mut seqnums = Vec::new();
    for i in 0..n {
        let msg = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let answer: Value = serde_json::from_str(msg.to_text().unwrap()).unwrap();
        if i == 100 {
            assert_eq!(answer["error"]["kind"], "invalid_input");
        } else {
            seqnums.push(answer["ok"]["seqnum"].as_u64().unwrap());
        }
    }
    // In order, dense: the answers follow the messages.
    assert_eq!(seqnums, (0..n as u64 - 1).collect::<Vec<_>>());
    // A retry with a known id answers with the original.
    let mut retry = one("s", "again");
    retry["id"] = json!("id-7");
    ws.send(Message::Text(retry.to_string().into()))
        .await
        .unwrap();
    let msg = ws.next().await.unwrap().unwrap();
    let answer: Value = serde_json::from_str(msg.to_text().unwrap()).unwrap();
    assert_eq!(answer["ok"]["seqnum"], 7);
    server.shutdown().await.unwrap();
}

/// With PEM files the server speaks TLS, and a client that trusts the
/// certificate gets answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_from_pem_files() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert_path = dir.path().join("cert.pem");
    let key_path = dir.path().join("key.pem");
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let mut options = support::options();
    options.tls = Some(TlsFiles {
        cert: cert_path,
        key: key_path,
    });
    let server = support::serve_with(Log::memory(), Role::Leader, options).await;
    assert!(server.url().starts_with("https://"));
    let trusted = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .resolve("localhost", server.local_addr)
        .build()
        .unwrap();
    let url = format!("https://localhost:{}/healthz", server.local_addr.port());
    assert_eq!(trusted.get(&url).send().await.unwrap().status(), 200);
    // Plain HTTP to a TLS port gets no answer.
    let plain = format!("http://{}/healthz", server.local_addr);
    assert!(support::http().get(&plain).send().await.is_err());
    server.shutdown().await.unwrap();
}

/// `/` and `/console/...` serve the console crate's files with their
/// content types, and an unknown asset is `not_found` like any route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_from_the_binary() {
    let server = support::serve().await;
    let base = server.url();
    for path in weft_console::asset_paths().chain([""]) {
        let (content_type, bytes) = weft_console::asset(path).unwrap();
        let url = if path.is_empty() {
            format!("{base}/")
        } else {
            format!("{base}/console/{path}")
        };
        let resp = support::http().get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{url}");
        assert_eq!(resp.headers()["content-type"], content_type, "{url}");
        assert_eq!(resp.bytes().await.unwrap(), bytes, "{url}");
    }
    let missing = support::http()
        .get(format!("{base}/console/js/missing.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(support::kind_of(missing).await, "not_found");
}

/// The stream list covers the whole log, entries appended before the
/// server started included: each stream's next version and entry count
/// (as the primary tag and as a secondary one), paged in tag order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_list_covers_entries_from_before_the_server_started() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let log = Log::new(weft::DirStorage::open(tmp.path()).await.unwrap());
        for i in 0..3 {
            let req = AppendRequest::new(tag("orders"), format!("{i}"))
                .with_tag(tag(&format!("orders:o-{i}")));
            log.append(req).await.unwrap();
        }
        log.append(AppendRequest::new(tag("audit"), "a"))
            .await
            .unwrap();
        log.close().await.unwrap();
    }
    let log = Log::new(weft::DirStorage::open(tmp.path()).await.unwrap());
    let server = support::serve_with(log, Role::Leader, support::options()).await;
    let base = server.url();
    let r = post(&format!("{base}/v1/append"), one("orders", "live")).await;
    assert_eq!(r.status(), 200);
    let want = [
        ("audit", 1, 1),
        ("orders", 4, 4),
        ("orders:o-0", 0, 1),
        ("orders:o-1", 0, 1),
        ("orders:o-2", 0, 1),
    ];
    let want: Vec<(String, u64, u64)> = want
        .iter()
        .map(|(t, v, n)| ((*t).to_owned(), *v, *n))
        .collect();
    // The list may lag the log by a moment: ask again (bounded) until it
    // has caught up with the live append, then it must be exactly this.
    let mut got = Vec::new();
    for _ in 0..1_000 {
        got = stream_list(&base).await;
        if got.iter().any(|(t, v, _)| t == "orders" && *v == 4) {
            break;
        }
        weft::clock::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(got, want);
    server.shutdown().await.unwrap();
}

/// Every stream, two per page, following `next`.
async fn stream_list(base: &str) -> Vec<(String, u64, u64)> {
    let mut got = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..100 {
        let mut url = format!("{base}/v1/streams?limit=2");
        if let Some(a) = &after {
            url.push_str(&format!("&after={a}"));
        }
        let page: Value = support::http()
            .get(url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for s in page["streams"].as_array().unwrap() {
            got.push((
                s["tag"].as_str().unwrap().to_owned(),
                s["next_version"].as_u64().unwrap(),
                s["entries"].as_u64().unwrap(),
            ));
        }
        match page["next"].as_str() {
            Some(n) => after = Some(n.to_owned()),
            None => return got,
        }
    }
    panic!("the stream list did not end within 100 pages");
}

/// The `data:` JSON of the first `n` entry events of an SSE response.
async fn sse_data(response: reqwest::Response, n: usize) -> Vec<Value> {
    sse_events(response, n)
        .await
        .iter()
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// The server keeps the encoded events of recent entries for its
/// subscribers; an erase through it drops them, so a subscription that
/// starts after the erase sends the entries erased, not the cached bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_after_an_erase_sends_the_erased_entries() {
    let log = Log::memory();
    let t: weft::LogTag = "user:5".parse().unwrap();
    for data in ["secret-a", "secret-b"] {
        log.append(weft::AppendRequest::new(t.clone(), data))
            .await
            .unwrap();
    }
    let server = support::serve_with(log.clone(), Role::Leader, support::options()).await;
    let base = server.url().to_string();
    let http = support::http();
    let subscribe = || http.get(format!("{base}/v1/subscribe?from=0")).send();
    let before = sse_data(subscribe().await.unwrap(), 2).await;
    assert_eq!(before[0]["data"], "c2VjcmV0LWE=", "{before:?}");
    log.delete_stream(&t).await.unwrap();
    let erased: Value = http
        .post(format!("{base}/v1/streams/user:5/erase"))
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(erased["erased"], 2);
    let after = sse_data(subscribe().await.unwrap(), 2).await;
    for e in &after {
        assert_eq!(e["data"], "", "{after:?}");
    }
    server.shutdown().await.unwrap();
}
