//! The web console in a real headless Chromium, driven over WebDriver:
//! `weft serve` runs as an OS process, entries are appended through the
//! HTTP API, and the page must show them in the live tail, the stream list
//! and the entry view. Leaves a screenshot at `target/console.png`.
//!
//! Needs chromedriver from `scripts/chromium.sh` (env
//! `WEFT_TEST_WEBDRIVER_URL`, `WEFT_TEST_CHROMIUM`); without it this fails.

// Tests wait in real time.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use fantoccini::{Client, ClientBuilder, Locator};
use futures::FutureExt as _;
use serde_json::{Value, json};

use support::served::Served;

/// Upper bound for the page to show something (a failure bound, not a
/// speed claim: the page polls once a second).
const PAGE_WAIT: Duration = Duration::from_secs(30);

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run scripts/chromium.sh start and source its env file (scripts/test.sh does both)")
    })
}

async fn browser() -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": env("WEFT_TEST_CHROMIUM"),
            "args": [
                "--headless=new",
                // Tests run as root in a container, where the sandbox
                // cannot start.
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--window-size=1280,1400",
            ],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&env("WEFT_TEST_WEBDRIVER_URL"))
        .await
        .expect("open a WebDriver session (is chromedriver running?)")
}

/// The server's HTTP API, as a client outside the page uses it.
struct Api {
    http: reqwest::Client,
    url: String,
    token: Option<&'static str>,
}

impl Api {
    fn new(server: &Served, token: Option<&'static str>) -> Api {
        Api {
            http: reqwest::Client::new(),
            url: server.url.clone(),
            token,
        }
    }

    /// `(status, JSON body)` of a request.
    async fn call(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        let request = match self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let resp = request.send().await.expect("a request to weft serve");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        (status, body)
    }

    async fn append(&self, body: Value) -> Value {
        let request = self
            .http
            .post(format!("{}/v1/append", self.url))
            .header("content-type", "application/json")
            .body(body.to_string());
        let (status, body) = self.call(request).await;
        assert_eq!(status, 200, "append answered {status}: {body}");
        body
    }

    async fn get(&self, path: &str) -> Value {
        let (status, body) = self
            .call(self.http.get(format!("{}{path}", self.url)))
            .await;
        assert_eq!(status, 200, "GET {path} answered {status}: {body}");
        body
    }
}

fn entry(tags: &[&str], payload: &[u8]) -> Value {
    json!({"tags": tags, "data": base64::engine::general_purpose::STANDARD.encode(payload)})
}

/// Runs `steps` on a page of a fresh browser session; a failure still
/// closes the browser, and shows what the server logged.
async fn in_browser<F: Future<Output = ()>>(server: &Served, steps: impl FnOnce(Client) -> F) {
    let page = browser().await;
    let outcome = AssertUnwindSafe(steps(page.clone())).catch_unwind().await;
    page.close().await.expect("close the browser");
    if let Err(panic) = outcome {
        eprintln!("weft serve stderr:\n{}", server.stderr());
        std::panic::resume_unwind(panic);
    }
}

/// The text of the element `css` once it exists.
async fn text_of(page: &Client, css: &str) -> String {
    wait_for(page, css).await.text().await.unwrap()
}

async fn wait_for(page: &Client, css: &str) -> fantoccini::elements::Element {
    page.wait()
        .at_most(PAGE_WAIT)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("the page never showed {css}: {e}"))
}

async fn click(page: &Client, css: &str) {
    wait_for(page, css)
        .await
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

async fn type_into(page: &Client, css: &str, text: &str) {
    wait_for(page, css)
        .await
        .send_keys(text)
        .await
        .unwrap_or_else(|e| panic!("type into {css}: {e}"));
}

fn screenshot_path() -> PathBuf {
    // CARGO_TARGET_TMPDIR is <target>/tmp; the screenshot sits in <target>.
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("console.png")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_shows_appends_live_and_opens_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Served::start(&["memory:"], &[], Some(tmp.path()));
    let api = Api::new(&server, None);
    let url = server.url.clone();
    in_browser(
        &server,
        |page| async move { steps(&page, &api, &url).await },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_asks_for_a_token_and_sends_it() {
    const TOKEN: &str = "console-test-token";
    let tmp = tempfile::tempdir().unwrap();
    let tokens = format!("{TOKEN} read,append");
    let server = Served::start(&["memory:"], &[("WEFT_TOKENS", &tokens)], Some(tmp.path()));
    let api = Api::new(&server, Some(TOKEN));
    let anonymous = Api::new(&server, None);
    let url = server.url.clone();
    in_browser(&server, |page| async move {
        // What the server answers a request without a token ...
        let (status, refused) = anonymous
            .call(anonymous.http.get(format!("{url}/v1/status")))
            .await;
        assert_eq!(status, 401, "{refused}");
        let kind = refused["error"]["kind"].as_str().unwrap().to_owned();

        // ... is what the page shows: its own files need no token.
        page.goto(&url).await.expect("open the console");
        page.wait()
            .at_most(PAGE_WAIT)
            .for_element(Locator::XPath(&format!(
                "//div[@id='error' and contains(text(), '{kind}')]"
            )))
            .await
            .expect("the page names the refusal");

        // With the token typed in, status and the live tail work: the
        // tail's EventSource carries it as `access_token`.
        type_into(&page, "#token", TOKEN).await;
        click(&page, "#token-form button").await;
        let role = api.get("/v1/status").await["role"]
            .as_str()
            .unwrap()
            .to_owned();
        wait_for(&page, &format!("#summary [data-role=\"{role}\"]")).await;
        let ack = api
            .append(json!({"entries": [entry(&["audit"], b"with a token")]}))
            .await;
        let row = format!("#tail tr[data-seqnum=\"{}\"]", ack["seqnum"]);
        assert!(text_of(&page, &row).await.contains("with a token"));
        assert!(
            page.find(Locator::Css("#error"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

async fn steps(page: &Client, api: &Api, url: &str) {
    page.goto(url).await.expect("open the console");

    // The writer panel shows what /v1/status says.
    let status = api.get("/v1/status").await;
    let role = status["role"].as_str().unwrap();
    wait_for(page, &format!("#summary [data-role=\"{role}\"]")).await;
    assert_eq!(text_of(page, "#status [data-field=\"role\"]").await, role);
    assert_eq!(
        text_of(page, "#status [data-field=\"backend\"]").await,
        status["backend"].as_str().unwrap()
    );

    // An append made after the page opened appears in the live tail.
    let placed = br#"{"order":"o-7","event":"placed","total":42}"#;
    let ack = api
        .append(json!({"entries": [entry(&["orders", "orders:o-7"], placed)], "id": "o-7/placed"}))
        .await;
    let seqnum = ack["seqnum"].as_u64().unwrap();
    let row = text_of(page, &format!("#tail tr[data-seqnum=\"{seqnum}\"]")).await;
    assert!(row.contains("orders:o-7"), "tail row: {row}");
    assert!(
        row.contains(r#""event":"placed""#),
        "tail row shows the payload: {row}"
    );

    // ... and its streams in the stream list, as the API counts them (a
    // secondary tag's stream counts its entries; versions are the primary
    // tag's).
    for tag in ["orders", "orders:o-7"] {
        let want = api.get(&format!("/v1/streams/{tag}")).await;
        let stream_row = format!("#streams tr[data-tag=\"{tag}\"]");
        assert_eq!(
            text_of(page, &format!("{stream_row} [data-field=\"next_version\"]")).await,
            want["next_version"].to_string()
        );
        assert_eq!(
            text_of(page, &format!("{stream_row} [data-field=\"entries\"]")).await,
            want["entries"].to_string()
        );
    }
    assert_eq!(
        text_of(
            page,
            "#streams tr[data-tag=\"orders:o-7\"] [data-field=\"entries\"]"
        )
        .await,
        "1"
    );

    // Clicking the tail row opens the entry, its payload as JSON.
    click(page, &format!("#tail tr[data-seqnum=\"{seqnum}\"]")).await;
    wait_for(page, &format!("#entry[data-seqnum=\"{seqnum}\"]")).await;
    assert_eq!(
        text_of(page, "#entry [data-field=\"seqnum\"]").await,
        seqnum.to_string()
    );
    assert_eq!(
        text_of(page, "#entry [data-field=\"tags\"]").await,
        "orders, orders:o-7"
    );
    // The append id it was appended with.
    assert_eq!(
        text_of(page, "#entry [data-field=\"id\"]").await,
        "o-7/placed"
    );
    wait_for(page, "#payload[data-format=\"json\"]").await;
    let shown: Value = serde_json::from_str(&text_of(page, "#payload").await).unwrap();
    assert_eq!(shown, serde_json::from_slice::<Value>(placed).unwrap());

    // The hex view of the same payload.
    click(page, "input[name=\"format\"][value=\"hex\"]").await;
    wait_for(page, "#payload[data-format=\"hex\"]").await;
    let hex = text_of(page, "#payload").await;
    assert!(hex.starts_with("00000000  7b 22 6f 72"), "hex view: {hex}");

    // A binary payload, opened by jumping to its seqnum, shows as hex.
    let binary = [0u8, 159, 146, 150, 255, 1];
    let ack = api
        .append(json!({"entries": [entry(&["sensors", "sensors:s-1"], &binary)]}))
        .await;
    let binary_seqnum = ack["seqnum"].as_u64().unwrap();
    type_into(page, "#jump-seqnum-input", &binary_seqnum.to_string()).await;
    click(page, "#jump-seqnum button").await;
    wait_for(page, &format!("#entry[data-seqnum=\"{binary_seqnum}\"]")).await;
    // Appended without an id: the field says so.
    assert_eq!(text_of(page, "#entry [data-field=\"id\"]").await, "–");
    wait_for(page, "#payload[data-format=\"hex\"]").await;
    assert!(
        text_of(page, "#payload")
            .await
            .starts_with("00000000  00 9f 92 96 ff 01")
    );

    // A conditional batch makes `orders` reach version 3; jumping to
    // `orders` version 2 opens the batch's second entry.
    let batch = api
        .append(json!({
            "entries": [
                entry(&["orders", "orders:o-8"], br#"{"order":"o-8","event":"placed"}"#),
                entry(&["orders", "orders:o-8"], br#"{"order":"o-8","event":"paid"}"#),
            ],
            "condition": {"tag": "orders", "next_version": 1},
        }))
        .await;
    let second = batch["seqnum"].as_u64().unwrap() + 1;
    type_into(page, "#jump-tag-input", "orders").await;
    type_into(page, "#jump-version-input", "2").await;
    click(page, "#jump-version button").await;
    wait_for(page, &format!("#entry[data-seqnum=\"{second}\"]")).await;
    assert!(text_of(page, "#payload").await.contains("\"paid\""));
    wait_for(
        page,
        "#streams tr[data-tag=\"orders\"] [data-field=\"next_version\"]",
    )
    .await;

    // Some traffic for the throughput chart: appends spread over a few of
    // the page's status polls, until the chart has drawn a line.
    for i in 0..40u32 {
        let tag = format!("orders:o-{}", 100 + i % 7);
        let payload = format!(r#"{{"order":"o-{}","event":"step {i}"}}"#, 100 + i % 7);
        api.append(json!({"entries": [entry(&["orders", &tag], payload.as_bytes())]}))
            .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_for(page, "#chart polyline").await;
    let tip = api.get("/v1/status").await["tip"].as_u64().unwrap();
    wait_for(page, &format!("#tail tr[data-seqnum=\"{}\"]", tip - 1)).await;
    let orders = api.get("/v1/streams/orders").await;
    let want = orders["next_version"].as_u64().unwrap().to_string();
    page.wait()
        .at_most(PAGE_WAIT)
        .for_element(Locator::XPath(&format!(
            "//table[@id='streams']//tr[@data-tag='orders']/td[@data-field='next_version' and text()='{want}']"
        )))
        .await
        .expect("the stream list catches up with the log");

    // The newest entry open for the picture (the tail stays scrolled to
    // the top).
    click(page, &format!("#tail tr[data-seqnum=\"{}\"]", tip - 1)).await;
    wait_for(page, &format!("#entry[data-seqnum=\"{}\"]", tip - 1)).await;
    wait_for(page, "#payload[data-format=\"json\"]").await;
    let png = page.screenshot().await.expect("take a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    std::fs::write(screenshot_path(), &png).expect("write the screenshot");
}
