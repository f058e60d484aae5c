//! A server under pressure and its operations endpoints: every limit
//! answers with a retryable status and a retry hint (or, for a body that
//! can never fit, a clear refusal); a request whose backend stalls gets
//! its documented status at its deadline while other requests are served;
//! a subscriber that stops reading holds up neither appends nor other
//! subscribers and catches up from the log; `/metrics` is Prometheus text
//! whose counters follow the traffic; readiness tells leader from follower
//! on a real bucket log.
//!
//! No assertion here is about time: deadlines are configured short so the
//! tests end quickly, but only statuses, kinds and counts are checked.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft::Log;
use weft::storage::bucket::{BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage};
use weft_server::Role;
use weft_testkit::hooked::{Before, HookedStore, Op, before};

fn one(tag: &str, data: &str) -> Value {
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD.encode(data);
    json!({"entries": [{"tags": [tag], "data": data}]})
}

async fn post(url: &str, body: Value) -> reqwest::Response {
    support::http().post(url).json(&body).send().await.unwrap()
}

/// Waits (bounded) until `probe` is true.
async fn until<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..2_000 {
        if probe().await {
            return;
        }
        weft::clock::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: not within the bound");
}

/// Checks a shed answer: 503, kind `unavailable`, a retry hint in the
/// header and the body.
async fn assert_shed(r: reqwest::Response, what: &str) {
    assert_eq!(r.status(), 503, "{what}");
    let header = r
        .headers()
        .get("retry-after")
        .unwrap_or_else(|| panic!("{what}: no Retry-After"))
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        header.parse::<u64>().is_ok(),
        "{what}: Retry-After {header}"
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["kind"], "unavailable", "{what}: {body}");
    assert!(
        body["error"]["retry_after_ms"].as_u64().unwrap_or(0) > 0,
        "{what}: {body}"
    );
}

/// One raw HTTP/1.1 request on its own connection; the status line and
/// headers, lowercased, and the body. The connection stays with the
/// caller (for keep-alive checks).
async fn raw_get(stream: &mut tokio::net::TcpStream, path: &str) -> (u16, String) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.unwrap();
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse::<usize>().unwrap())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text.to_lowercase())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Every limit, one case each: what goes over it and what the server
/// answers. The retryable ones answer 503 `unavailable` with a retry hint;
/// a body over the size limit is refused (400 `invalid_input`, no hint —
/// retrying the same body cannot help).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_limit_answers_with_its_status_and_hint() {
    // Request body size.
    let mut options = support::options();
    options.limits.max_body_bytes = 1024;
    let server = support::serve_with(Log::memory(), Role::Leader, options).await;
    let base = server.url();
    let r = post(&format!("{base}/v1/append"), one("t", &"x".repeat(4096))).await;
    assert_eq!(r.status(), 400, "an oversized body");
    assert!(r.headers().get("retry-after").is_none());
    assert_eq!(support::kind_of(r).await, "invalid_input");
    let tip: Value = support::http()
        .get(format!("{base}/v1/tip"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tip["next"], 0, "nothing was written");
    assert_eq!(
        post(&format!("{base}/v1/append"), one("t", "x"))
            .await
            .status(),
        200
    );
    server.shutdown().await.unwrap();

    // Request body bytes in flight.
    let mut options = support::options();
    options.limits.max_in_flight_bytes = 64;
    let server = support::serve_with(Log::memory(), Role::Leader, options).await;
    let base = server.url();
    assert_shed(
        post(&format!("{base}/v1/append"), one("t", &"x".repeat(200))).await,
        "bytes in flight",
    )
    .await;
    server.shutdown().await.unwrap();

    // Requests in flight: an open subscription holds the only slot.
    let mut options = support::options();
    options.limits.max_requests = 1;
    let server = support::serve_with(Log::memory(), Role::Leader, options).await;
    let base = server.url();
    let held = support::http()
        .get(format!("{base}/v1/subscribe?from=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(held.status(), 200);
    assert_shed(
        support::http()
            .get(format!("{base}/v1/tip"))
            .send()
            .await
            .unwrap(),
        "requests in flight",
    )
    .await;
    drop(held);
    until("the slot is free again", || async {
        support::http()
            .get(format!("{base}/v1/tip"))
            .send()
            .await
            .unwrap()
            .status()
            == 200
    })
    .await;
    // An open append session holds it too.
    let ws = base.replacen("http", "ws", 1);
    let (session, _) = tokio_tungstenite::connect_async(format!("{ws}/v1/session"))
        .await
        .unwrap();
    assert_shed(
        support::http()
            .get(format!("{base}/v1/tip"))
            .send()
            .await
            .unwrap(),
        "requests in flight, a session open",
    )
    .await;
    drop(session);
    until("the slot is free again", || async {
        support::http()
            .get(format!("{base}/v1/tip"))
            .send()
            .await
            .unwrap()
            .status()
            == 200
    })
    .await;
    server.shutdown().await.unwrap();

    // Open connections: with one allowed and held, another connection's
    // requests are shed and that connection is closed; once the first
    // closes, a new connection is served.
    let mut options = support::options();
    options.limits.max_connections = 1;
    let server = support::serve_with(Log::memory(), Role::Leader, options).await;
    let mut first = tokio::net::TcpStream::connect(server.local_addr)
        .await
        .unwrap();
    let (status, _) = raw_get(&mut first, "/v1/tip").await;
    assert_eq!(status, 200, "the first connection is served");
    let mut second = tokio::net::TcpStream::connect(server.local_addr)
        .await
        .unwrap();
    let (status, text) = raw_get(&mut second, "/v1/tip").await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("retry-after:"), "{text}");
    assert!(text.contains("connection: close"), "{text}");
    assert!(text.contains("\"unavailable\""), "{text}");
    let mut rest = Vec::new();
    let closed = second.read_to_end(&mut rest).await;
    assert!(
        closed.is_err() || rest.is_empty(),
        "the shed connection is closed"
    );
    // The first connection is still served, on the same socket.
    let (status, _) = raw_get(&mut first, "/v1/tip").await;
    assert_eq!(status, 200);
    drop(first);
    let addr = server.local_addr;
    until("a new connection is served", || async move {
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        raw_get(&mut c, "/v1/tip").await.0 == 200
    })
    .await;
    server.shutdown().await.unwrap();
}

/// A bucket log on a store whose uploads can be made to hang.
fn stalling_store() -> (Arc<dyn ObjectStore>, Arc<AtomicBool>) {
    let stall = Arc::new(AtomicBool::new(false));
    let hooked = HookedStore::new(Arc::new(InMemory::new())).with_hook(before({
        let stall = stall.clone();
        move |call, _| {
            let stall = stall.clone();
            async move {
                if call.op == Op::Put && stall.load(Ordering::SeqCst) {
                    // Never answers while stalled (checked again now and
                    // then, so the test can let it go).
                    while stall.load(Ordering::SeqCst) {
                        weft::clock::sleep(Duration::from_millis(20)).await;
                    }
                }
                Before::Proceed
            }
        }
    }));
    (Arc::new(hooked), stall)
}

/// A request whose backend call hangs is answered at its deadline with the
/// documented status (an append `504 indeterminate`: it may still land),
/// while reads and health checks go on being served; once the store
/// answers again, a retry with the append's id writes it exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_backend_call_ends_at_its_deadline_and_others_are_served() {
    let (store, stall) = stalling_store();
    let log = Log::new(
        BucketStorage::open(
            store,
            "log",
            BucketOptions::default()
                .with_take_over(true)
                .with_flush_interval(Duration::from_millis(2)),
        )
        .await
        .unwrap(),
    );
    let mut options = support::options();
    options.limits.request_timeout = Duration::from_millis(300);
    let server = support::serve_with(log, Role::Leader, options).await;
    let base = server.url();
    let append = format!("{base}/v1/append");
    assert_eq!(post(&append, one("t", "before")).await.status(), 200);

    stall.store(true, Ordering::SeqCst);
    let mut body = one("t", "stalled");
    body["id"] = json!("stalled-1");
    let stalled = tokio::spawn({
        let (append, body) = (append.clone(), body.clone());
        async move { post(&append, body).await }
    });
    // Meanwhile: reads, status and health answer.
    for path in ["/v1/entries/0", "/v1/tip", "/healthz", "/readyz"] {
        let r = support::http()
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path} while the store hangs");
    }
    let r = stalled.await.unwrap();
    assert_eq!(r.status(), 504);
    assert_eq!(support::kind_of(r).await, "indeterminate");

    // The store answers again: the retry with the id lands once.
    stall.store(false, Ordering::SeqCst);
    let r = post(&append, body.clone()).await;
    assert_eq!(r.status(), 200);
    let again: Value = post(&append, body).await.json().await.unwrap();
    let page: Value = support::http()
        .get(format!("{base}/v1/entries?from=0"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let stalled_entries: Vec<&Value> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["id"] == "stalled-1")
        .collect();
    assert_eq!(stalled_entries.len(), 1, "{page}");
    assert_eq!(stalled_entries[0]["seqnum"], again["seqnum"]);
    server.shutdown().await.unwrap();
}

/// The seqnums of the `id:` lines in SSE text.
fn sse_ids(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("id:"))
        .map(|v| v.trim().parse().unwrap())
        .collect()
}

/// A subscriber whose socket stops being read: appends go on, another
/// subscriber receives every entry, and when the stalled one reads again
/// it gets every entry from where it was, no gap, no duplicate (fed from
/// the log once it fell behind the commit feed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_subscriber_holds_up_neither_appends_nor_other_subscribers() {
    const APPENDS: u64 = 600;
    let server = support::serve().await;
    let base = server.url();
    let payload = "p".repeat(16 << 10);

    // The stalled subscriber: a raw socket with a small receive buffer,
    // which reads the response head and then nothing.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(server.local_addr).await.unwrap();
    stalled
        .write_all(b"GET /v1/subscribe?from=0 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    while find(&head, b"\r\n\r\n").is_none() {
        let mut byte = [0u8; 1];
        stalled.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    assert!(String::from_utf8_lossy(&head).starts_with("HTTP/1.1 200"));

    // The reading subscriber.
    let reader = support::http()
        .get(format!("{base}/v1/subscribe?from=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(reader.status(), 200);
    let reading = tokio::spawn(async move {
        let mut body = reader.bytes_stream();
        let mut text = String::new();
        while sse_ids(&text).len() < APPENDS as usize {
            let chunk = body.next().await.expect("open").expect("chunk");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        sse_ids(&text)
    });

    // ~10 MiB of entries: far more than the stalled socket's buffers.
    for _ in 0..APPENDS {
        let r = post(&format!("{base}/v1/append"), one("t", &payload)).await;
        assert_eq!(r.status(), 200);
    }
    let got = tokio::time::timeout(Duration::from_secs(120), reading)
        .await
        .expect("the reading subscriber got everything within the bound")
        .unwrap();
    assert_eq!(got, (0..APPENDS).collect::<Vec<_>>());
    // The stalled subscriber reads again: everything, in order.
    let mut text = String::new();
    let mut chunk = vec![0u8; 64 << 10];
    let caught_up = tokio::time::timeout(Duration::from_secs(120), async {
        while sse_ids(&text).len() < APPENDS as usize {
            let n = stalled.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the stalled subscriber's stream ended early");
            text.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    })
    .await;
    caught_up.expect("the stalled subscriber caught up within the bound");
    assert_eq!(sse_ids(&text), (0..APPENDS).collect::<Vec<_>>());
    drop(stalled);
    server.shutdown().await.unwrap();
}

/// Prometheus text exposition, parsed strictly: `# HELP`/`# TYPE` lines
/// and samples `name value`; every sample's family has a TYPE, names are
/// valid, values are numbers. Returns the samples.
fn parse_prometheus(text: &str) -> BTreeMap<String, f64> {
    let valid_name = |n: &str| {
        !n.is_empty()
            && n.chars().enumerate().all(|(i, c)| {
                c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
            })
    };
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (what, name) = (parts.next().unwrap(), parts.next().unwrap_or(""));
            assert!(valid_name(name), "bad metric name in {line:?}");
            if what == "TYPE" {
                let kind = parts.next().unwrap_or("");
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                    "{line:?}"
                );
                types.insert(name.to_owned(), kind.to_owned());
            } else {
                assert_eq!(what, "HELP", "{line:?}");
            }
            continue;
        }
        assert!(!line.starts_with('#'), "{line:?}");
        let (series, value) = line.rsplit_once(' ').expect("name and value");
        let name = series.split('{').next().unwrap();
        assert!(valid_name(name), "bad sample name in {line:?}");
        if let Some(labels) = series.strip_prefix(name) {
            assert!(
                labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')),
                "{line:?}"
            );
        }
        let family = ["_bucket", "_sum", "_count", "_total", "_created"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| types.contains_key(*f)))
            .unwrap_or(name);
        assert!(types.contains_key(family), "no TYPE for {line:?}");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line:?}"));
        samples.insert(series.to_owned(), value);
    }
    samples
}

fn sample(samples: &BTreeMap<String, f64>, name: &str) -> f64 {
    *samples
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {samples:?}"))
}

async fn metrics(base: &str) -> BTreeMap<String, f64> {
    let r = support::http()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let kind = r.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    parse_prometheus(&r.text().await.unwrap())
}

/// `/metrics` parses as Prometheus text and its counters follow appends
/// and reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_and_follow_appends_and_reads() {
    let server = support::serve().await;
    let base = server.url();
    let before = metrics(&base).await;
    for i in 0..3 {
        let r = post(&format!("{base}/v1/append"), one("t", &format!("{i}"))).await;
        assert_eq!(r.status(), 200);
    }
    let batch = json!({"entries": [
        {"tags": ["t"], "data": "YQ=="}, {"tags": ["t"], "data": "Yg=="}
    ]});
    assert_eq!(
        post(&format!("{base}/v1/append"), batch).await.status(),
        200
    );
    for path in ["/v1/entries?from=0", "/v1/entries/1", "/v1/tip"] {
        let r = support::http()
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    let after = metrics(&base).await;
    let moved = |name: &str| sample(&after, name) - sample(&before, name);
    assert_eq!(moved("weft_server_appended_entries_total"), 5.0);
    assert_eq!(moved("weft_server_append_requests_total"), 4.0);
    // 4 appends, 3 reads and the first /metrics itself.
    assert_eq!(moved("weft_server_requests_total"), 8.0);
    assert_eq!(sample(&after, "weft_server_log_tip"), 5.0);
    assert_eq!(sample(&after, "weft_server_leader"), 1.0);
    server.shutdown().await.unwrap();
}

/// Two servers on one bucket log — the lease holder and a follower:
/// health says both are up, readiness and the metrics say which leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_tells_the_leader_from_a_follower_on_a_bucket_log() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let writer = Log::new(
        BucketStorage::open(
            store.clone(),
            "log",
            BucketOptions::default()
                .with_take_over(true)
                .with_flush_interval(Duration::from_millis(2)),
        )
        .await
        .unwrap(),
    );
    let follower = Log::new(
        BucketFollower::open(
            store,
            "log",
            BucketFollowerOptions::default().with_poll_interval(Duration::from_millis(10)),
        )
        .await
        .unwrap(),
    );
    let leader = support::serve_with(writer, Role::Leader, support::options()).await;
    let standby = support::serve_with(follower, Role::Follower, support::options()).await;
    let r = post(&format!("{}/v1/append", leader.url()), one("t", "x")).await;
    assert_eq!(r.status(), 200);

    for (server, role, leads) in [(&leader, "leader", true), (&standby, "follower", false)] {
        let base = server.url();
        let get = |path: &str| support::http().get(format!("{base}{path}")).send();
        assert_eq!(get("/healthz").await.unwrap().status(), 200, "{role}");
        let ready = get("/readyz").await.unwrap();
        assert_eq!(ready.status(), 200, "{role}");
        let body: Value = ready.json().await.unwrap();
        assert_eq!(body["role"], role);
        assert_eq!(body["ready"], true);
        let for_writes = get("/readyz?role=leader").await.unwrap();
        assert_eq!(for_writes.status(), if leads { 200 } else { 503 }, "{role}");
        let for_reads = get("/readyz?role=follower").await.unwrap();
        assert_eq!(for_reads.status(), if leads { 503 } else { 200 }, "{role}");
        let m = metrics(&base).await;
        assert_eq!(sample(&m, "weft_server_leader"), f64::from(u8::from(leads)));
    }
    // The follower serves what the leader wrote.
    until("the follower sees the entry", || async {
        metrics(&standby.url())
            .await
            .get("weft_server_log_tip")
            .copied()
            == Some(1.0)
    })
    .await;
    leader.shutdown().await.unwrap();
    standby.shutdown().await.unwrap();
}
