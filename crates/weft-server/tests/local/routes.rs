//! The route table against the OpenAPI document, and tokens on every
//! route.

use crate::support;

use std::collections::BTreeSet;

use weft::Log;
use weft_server::routes::ROUTES;
use weft_server::{Role, Scope, Tokens};

/// openapi.yaml describes exactly the server's routes, with the scope each
/// needs.
#[test]
fn openapi_document_matches_the_routes() {
    let text = include_str!("../../openapi.yaml");
    let doc: serde_yaml::Value = serde_yaml::from_str(text).expect("openapi.yaml parses");
    let paths = doc["paths"].as_mapping().expect("paths");
    let mut documented = BTreeSet::new();
    for (path, item) in paths {
        let path = path.as_str().expect("path");
        for (method, op) in item.as_mapping().expect("path item") {
            let method = method.as_str().expect("method").to_uppercase();
            let scope = op["x-weft-scope"].as_str().map(str::to_owned);
            documented.insert((method, path.to_owned(), scope));
        }
    }
    let served: BTreeSet<_> = ROUTES
        .iter()
        .map(|r| {
            // axum's catch-all `{*path}` is OpenAPI's `{path}`.
            let path = r.path.replace("{*", "{");
            (
                r.method.to_owned(),
                path,
                r.scope.map(|s| s.as_str().to_owned()),
            )
        })
        .collect();
    assert_eq!(documented, served, "openapi.yaml and ROUTES differ");
}

fn concrete(path: &str) -> String {
    // The counter has a key of its own (`k` holds bytes).
    let path = &path.replace("{key}/increment", "n/increment");
    path.replace("{tag}", "orders")
        .replace("{seqnum}", "0")
        .replace("{scope}", "s")
        .replace("{key}", "k")
        .replace("{*path}", "app.js")
        + if path == "/v1/entries/prev" {
            "?before=1"
        } else {
            ""
        }
}

fn body_for(path: &str) -> serde_json::Value {
    match path {
        "/v1/append" => serde_json::json!({"entries": [{"tags": ["orders"], "data": "eA=="}]}),
        "/v1/trim" => serde_json::json!({"through": 0}),
        p if p.ends_with("/lifecycle") => serde_json::json!({"truncate_before": 0}),
        p if p.ends_with("/erase") => serde_json::json!({}),
        p if p.ends_with("/cas") => serde_json::json!({"expected": null, "data": "eA=="}),
        p if p.ends_with("/increment") => serde_json::json!({"delta": 1}),
        _ => serde_json::json!({"data": "eA=="}),
    }
}

/// With tokens configured, every route that needs a scope refuses a
/// request without a token (401), with an unknown token (401) and with a
/// token lacking the scope (403), and lets the right scope in; the open
/// routes need none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_checks_tokens_and_scopes() {
    let tokens = Tokens::parse("r0 read\na0 append\nadm admin").unwrap();
    let mut options = support::options();
    options.tokens = Some(tokens);
    let log = Log::memory();
    log.append(weft::AppendRequest::new("orders".parse().unwrap(), "x"))
        .await
        .unwrap();
    let server = support::serve_with(log, Role::Leader, options).await;
    let http = support::http();
    let token_for = |scope: Scope| match scope {
        Scope::Read => "r0",
        Scope::Append => "a0",
        Scope::Admin => "adm",
    };
    let lacking = |scope: Scope| match scope {
        Scope::Read | Scope::Admin => "a0",
        Scope::Append => "r0",
    };
    for route in ROUTES {
        let url = format!("{}{}", server.url(), concrete(route.path));
        let method: reqwest::Method = route.method.parse().unwrap();
        let send = |token: Option<&str>| {
            let mut req = http.request(method.clone(), &url);
            if route.method != "GET" && route.method != "DELETE" {
                req = req.json(&body_for(route.path));
            }
            if route.path == "/v1/session" {
                // A plain GET without the upgrade headers: refused
                // before or after the token check, never 2xx.
                req = req.header("connection", "close");
            }
            if let Some(t) = token {
                req = req.bearer_auth(t);
            }
            req.send()
        };
        let Some(scope) = route.scope else {
            let status = send(None).await.unwrap().status().as_u16();
            assert!(
                status != 401 && status != 403,
                "{route:?} is open: {status}"
            );
            continue;
        };
        let none = send(None).await.unwrap();
        assert_eq!(none.status().as_u16(), 401, "{route:?} without a token");
        assert_eq!(support::kind_of(none).await, "permission_denied");
        let unknown = send(Some("nope")).await.unwrap();
        assert_eq!(unknown.status().as_u16(), 401, "{route:?} unknown token");
        let wrong = send(Some(lacking(scope))).await.unwrap();
        assert_eq!(wrong.status().as_u16(), 403, "{route:?} wrong scope");
        let right = send(Some(token_for(scope))).await.unwrap();
        let status = right.status().as_u16();
        assert!(
            status != 401 && status != 403,
            "{route:?} right scope: {status}"
        );
        if route.path != "/v1/session" {
            assert!(right.status().is_success(), "{route:?}: {status}");
        }
    }
    // The query parameter works as the header does (EventSource).
    let url = format!("{}/v1/status?access_token=r0", server.url());
    assert!(http.get(&url).send().await.unwrap().status().is_success());
    server.shutdown().await.unwrap();
}

/// The KV scopes of settings that change what the log keeps or shows (the
/// retention policy, stream starts) take the admin scope to write, however
/// the scope is spelled in the path; consumer positions and the views' own
/// scopes take append; reading any of them takes read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_settings_in_the_kv_need_the_admin_scope_to_write() {
    let tokens = Tokens::parse("r0 read\na0 append\nadm admin").unwrap();
    let mut options = support::options();
    options.tokens = Some(tokens);
    let server = support::serve_with(Log::memory(), Role::Leader, options).await;
    let http = support::http();
    let put = |path: &str, token: &str| {
        http.put(format!("{}/v1/kv/{path}", server.url()))
            .json(&serde_json::json!({"data": "eA=="}))
            .bearer_auth(token)
            .send()
    };
    for path in [
        "_weft:retention/policy",
        "_weft%3Aretention/policy",
        "_weft:streams/orders",
        "_weft%3astreams/orders",
    ] {
        let refused = put(path, "a0").await.unwrap();
        assert_eq!(refused.status().as_u16(), 403, "{path}");
        assert_eq!(support::kind_of(refused).await, "permission_denied");
        let cas = http
            .post(format!("{}/v1/kv/{path}/cas", server.url()))
            .json(&serde_json::json!({"expected": null, "data": "eA=="}))
            .bearer_auth("a0")
            .send()
            .await
            .unwrap();
        assert_eq!(cas.status().as_u16(), 403, "{path} cas");
        let delete = http
            .delete(format!("{}/v1/kv/{path}", server.url()))
            .bearer_auth("a0")
            .send()
            .await
            .unwrap();
        assert_eq!(delete.status().as_u16(), 403, "{path} delete");
        assert!(
            put(path, "adm").await.unwrap().status().is_success(),
            "{path}"
        );
        let read = http
            .get(format!("{}/v1/kv/{path}", server.url()))
            .bearer_auth("r0")
            .send()
            .await
            .unwrap();
        assert!(read.status().is_success(), "{path} read");
    }
    for path in ["_weft:consumers/c", "s/k"] {
        assert!(
            put(path, "a0").await.unwrap().status().is_success(),
            "{path}"
        );
    }
    server.shutdown().await.unwrap();
}

/// `POST /v1/streams/{tag}/erase` erases what the stream's start hides and
/// answers how many; it takes no field (an erase of anything else is not
/// what it does) and is safe to repeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erase_takes_no_field_and_counts_what_it_erased() {
    let log = Log::memory();
    let t: weft::LogTag = "user:9".parse().unwrap();
    for data in ["a", "b"] {
        log.append(weft::AppendRequest::new(t.clone(), data))
            .await
            .unwrap();
    }
    log.delete_stream(&t).await.unwrap();
    let server = support::serve_with(log.clone(), Role::Leader, support::options()).await;
    let http = support::http();
    let erase = |body: serde_json::Value| {
        http.post(format!("{}/v1/streams/user:9/erase", server.url()))
            .json(&body)
            .send()
    };
    let refused = erase(serde_json::json!({"before_version": 1}))
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    assert_eq!(support::kind_of(refused).await, "invalid_input");
    assert_eq!(
        log.read_log(weft::Position::Beginning, 9).await.unwrap()[0].data,
        "a"
    );
    for want in [2, 0] {
        let done: serde_json::Value = erase(serde_json::json!({}))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(done, serde_json::json!({"tag": "user:9", "erased": want}));
    }
    let all = log.read_log(weft::Position::Beginning, 9).await.unwrap();
    assert!(all.iter().all(|e| e.data.is_empty()));
    server.shutdown().await.unwrap();
}
