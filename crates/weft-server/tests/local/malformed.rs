//! Bodies, headers and paths from proptest never panic the server and
//! never leave it wedged: every answer is a well-formed status with a JSON
//! error body for errors, and the server still answers afterwards.

use crate::support;

use proptest::prelude::*;
use weft_server::routes::ROUTES;

fn method() -> impl Strategy<Value = reqwest::Method> {
    prop_oneof![
        Just(reqwest::Method::GET),
        Just(reqwest::Method::POST),
        Just(reqwest::Method::PUT),
        Just(reqwest::Method::DELETE),
        Just(reqwest::Method::PATCH),
        Just(reqwest::Method::HEAD),
    ]
}

/// A route template with its parameters replaced by arbitrary (escaped)
/// text, or arbitrary path text.
fn path() -> impl Strategy<Value = String> {
    let templated = (0..ROUTES.len(), any::<String>(), any::<String>()).prop_map(|(i, a, b)| {
        let enc = |s: &str| s.bytes().map(|c| format!("%{c:02X}")).collect::<String>();
        ROUTES[i]
            .path
            .replace("{tag}", &enc(&a))
            .replace("{seqnum}", &enc(&a))
            .replace("{scope}", &enc(&a))
            .replace("{key}", &enc(&b))
            .replace("{*path}", &enc(&b))
    });
    let query = "[a-z_]{0,12}=[-0-9a-zA-Z%]{0,24}";
    prop_oneof![
        (templated.clone(), proptest::option::of(query)).prop_map(|(p, q)| match q {
            Some(q) => format!("{p}?{q}"),
            None => p,
        }),
        "/[-a-zA-Z0-9/%._~]{0,60}",
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        // Nearly right JSON: real field names, wrong types and values.
        (any::<i64>(), any::<String>(), any::<bool>()).prop_map(|(n, s, b)| {
            serde_json::json!({
                "entries": [{"tags": [s.clone()], "data": s, "expected_version": n}],
                "condition": if b { serde_json::json!({"tag": "t", "next_version": n}) } else { serde_json::Value::Null },
                "through": n, "delta": n, "expected": null, "id": b,
            })
            .to_string()
            .into_bytes()
        }),
    ]
}

fn headers() -> impl Strategy<Value = Vec<(String, String)>> {
    proptest::collection::vec(
        (
            prop_oneof![
                Just("content-type".to_owned()),
                Just("authorization".to_owned()),
                Just("last-event-id".to_owned()),
                Just("content-length".to_owned()),
                "x-[a-z]{1,8}",
            ],
            "[ -~]{0,40}",
        ),
        0..4,
    )
}

#[test]
fn malformed_requests_never_panic_or_wedge_the_server() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(support::serve());
    let base = server.url();
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(method(), path(), headers(), body()),
            |(method, path, headers, body)| {
                // Subscriptions stay open by design: ask for them with a
                // request that ends (HEAD is not routed there).
                let streaming = path.starts_with("/v1/subscribe") && method == reqwest::Method::GET;
                let method = if streaming {
                    reqwest::Method::HEAD
                } else {
                    method
                };
                rt.block_on(async {
                    let mut req = http.request(method, format!("{base}{path}")).body(body);
                    for (k, v) in &headers {
                        if k != "content-length" {
                            req = req.header(k, v);
                        }
                    }
                    let response = req.send().await.expect("the server answers");
                    let status = response.status().as_u16();
                    prop_assert!(status != 500, "{path}: {status}");
                    if status >= 400 {
                        let bytes = response.bytes().await.expect("a body");
                        if !bytes.is_empty() {
                            let v: serde_json::Value =
                                serde_json::from_slice(&bytes).expect("a JSON error body");
                            prop_assert!(v["error"]["kind"].is_string(), "{v}");
                        }
                    }
                    Ok(())
                })
            },
        )
        .unwrap();
    rt.block_on(async {
        let health = http.get(format!("{base}/healthz")).send().await.unwrap();
        assert_eq!(health.status(), 200);
        server.shutdown().await.unwrap();
    });
}
