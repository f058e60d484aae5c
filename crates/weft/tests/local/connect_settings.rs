//! Every value a user can hand to `weft::connect` is checked before it
//! reaches object_store, whose request signer panics on a malformed
//! endpoint or a header value with a line break: a table of the values
//! that used to panic (or to fail late as `Unavailable`) must each be
//! `InvalidInput`, as fields and as environment variables; and a property
//! test feeds arbitrary locations and environments through parsing,
//! building and one signed request on an offline HTTP client.

use crate::fuzz_bodies;

use std::collections::HashMap;

use proptest::prelude::*;
use weft::ErrorKind;
use weft::connect::{AzureSettings, EMULATOR_ACCOUNT_KEY, Location, S3Settings};

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

fn s3_ok() -> S3Settings {
    (S3Settings::new("logs", "team/orders"))
        .with_endpoint(Some("http://127.0.0.1:8333".into()))
        .with_allow_http(true)
        .with_region(Some("us-east-1".into()))
        .with_access_key_id(Some("key".into()))
        .with_secret_access_key(Some("secret".into()))
}

fn azure_ok() -> AzureSettings {
    (AzureSettings::new("logs", "team/orders"))
        .with_account(Some("acct".into()))
        .with_access_key(Some(EMULATOR_ACCOUNT_KEY.into()))
        .with_endpoint(Some("http://127.0.0.1:10000/acct".into()))
        .with_allow_http(true)
}

#[test]
fn bad_s3_settings_are_invalid_input() {
    s3_ok().build().expect("the baseline builds");
    let endpoints = [
        "",
        "garbage",
        "http://",
        "https://",
        "http://127.0.0.1:65536",
        "http://127.0.0.1:99999",
        "http://[::1",
        "localhost:9000",
        "127.0.0.1:8333",
        "ftp://host",
        "http://user:pw@host",
        "http://host/?q",
        "http://ho st",
        "http://host\n",
    ];
    let mut cases: Vec<(String, S3Settings)> = endpoints
        .iter()
        .map(|e| {
            let s = s3_ok().with_endpoint(Some(e.to_string()));
            (format!("endpoint {e:?}"), s)
        })
        .collect();
    let more = [
        (
            "http endpoint without allow_http",
            s3_ok().with_allow_http(false),
        ),
        (
            "region with a newline",
            s3_ok().with_region(Some("us-east-1\nx".into())),
        ),
        ("empty region", s3_ok().with_region(Some(String::new()))),
        (
            "region with a slash",
            s3_ok().with_region(Some("us/east".into())),
        ),
        (
            "session token with a newline",
            s3_ok().with_session_token(Some("tok\nen".into())),
        ),
        (
            "access key id with a space",
            s3_ok().with_access_key_id(Some("a key".into())),
        ),
        ("prefix with ..", s3_ok().with_prefix("a/../b".into())),
        ("prefix with .", s3_ok().with_prefix("./b".into())),
        ("bucket in upper case", s3_ok().with_bucket("Logs".into())),
    ];
    cases.extend(more.into_iter().map(|(what, s)| (what.to_string(), s)));
    for (what, s) in cases {
        let err = s.build().expect_err(&what);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {err}");
    }
}

#[test]
fn bad_s3_environment_is_invalid_input() {
    let base = [
        ("AWS_ACCESS_KEY_ID", "key"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_ALLOW_HTTP", "true"),
    ];
    let cases: [(&str, &str); 9] = [
        ("AWS_ENDPOINT_URL", "garbage"),
        ("AWS_ENDPOINT_URL", "http://"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:99999"),
        ("AWS_ENDPOINT_URL", "http://[::1"),
        ("AWS_ENDPOINT_URL", "localhost:9000"),
        ("AWS_ENDPOINT", "garbage"),
        ("AWS_REGION", "us-east-1\nx"),
        ("AWS_DEFAULT_REGION", "eu west"),
        ("AWS_SESSION_TOKEN", "a\r\nb"),
    ];
    for (key, value) in cases {
        let mut vars = base.to_vec();
        vars.push((key, value));
        let s = S3Settings::from_lookup("logs", "", env(&vars)).expect("reading only copies");
        let err = s.build().unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::InvalidInput,
            "{key}={value:?}: {err}"
        );
    }
    // Plain http needs the flag: without it, a configuration error, never
    // a store that fails every request as Unavailable.
    let s = S3Settings::from_lookup(
        "logs",
        "",
        env(&[("AWS_ENDPOINT_URL", "http://127.0.0.1:8333")]),
    )
    .unwrap();
    assert_eq!(s.build().unwrap_err().kind(), ErrorKind::InvalidInput);
}

#[test]
fn bad_azure_settings_are_invalid_input() {
    azure_ok().build().expect("the baseline builds");
    let cases = [
        (
            "endpoint garbage",
            azure_ok().with_endpoint(Some("garbage".into())),
        ),
        (
            "endpoint without a host",
            azure_ok().with_endpoint(Some("http://".into())),
        ),
        (
            "endpoint port out of range",
            azure_ok().with_endpoint(Some("http://127.0.0.1:70000/acct".into())),
        ),
        (
            "http endpoint without allow_http",
            azure_ok().with_allow_http(false),
        ),
        (
            "account with a newline",
            azure_ok().with_account(Some("ac\nct".into())),
        ),
        (
            "bearer token with a newline",
            azure_ok().with_bearer_token(Some("to\nken".into())),
        ),
        (
            "tenant with a slash",
            azure_ok()
                .with_tenant_id(Some("a/b".into()))
                .with_client_id(Some("c".into()))
                .with_client_secret(Some("s".into())),
        ),
        ("prefix with ..", azure_ok().with_prefix("../x".into())),
        (
            "managed identity endpoint that is not a URL",
            azure_ok().with_options([("azure_msi_endpoint".into(), "0".into())].into()),
        ),
        (
            "an option that bypasses a field",
            azure_ok().with_options([("azure_storage_endpoint".into(), "garbage".into())].into()),
        ),
    ];
    for (what, s) in cases {
        let err = s.build().expect_err(what);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {err}");
    }
    let s = AzureSettings::from_lookup(
        "logs",
        "",
        env(&[
            ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
            ("AZURE_STORAGE_ENDPOINT", "http://[::1"),
            ("AZURE_ALLOW_HTTP", "1"),
        ]),
    )
    .unwrap();
    assert_eq!(s.build().unwrap_err().kind(), ErrorKind::InvalidInput);
}

#[test]
fn locations_with_dot_segments_are_invalid_input() {
    for bad in [
        "s3://bucket/../x",
        "s3://bucket/a/./b",
        "s3://bucket/a/..",
        "az://logs/../x",
        "az://logs/a/./b",
        "file:///var/../etc",
    ] {
        let err = Location::parse(bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
    }
}

#[test]
fn accepted_settings_sign_a_request_without_panicking() {
    // The paths that panicked inside object_store's signer before the
    // checks: every accepted value must now get as far as a request.
    let good = [
        ("s3://logs/a", vec![]),
        (
            "s3://logs/a",
            vec![
                ("AWS_ENDPOINT_URL", "http://[::1]:9000/base/"),
                ("AWS_ALLOW_HTTP", "true"),
                ("AWS_REGION", "auto"),
                ("AWS_ACCESS_KEY_ID", "AKIA0123"),
                ("AWS_SECRET_ACCESS_KEY", "any secret\nat all é"),
                ("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEP//////////wEaD+/="),
            ],
        ),
        ("az://logs/b", vec![("AZURE_STORAGE_USE_EMULATOR", "true")]),
        (
            "az://logs",
            vec![
                ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
                ("AZURE_STORAGE_TOKEN", "eyJ0eXAi.eyJhdWQi.sig"),
            ],
        ),
    ];
    for (location, vars) in good {
        assert!(
            fuzz_bodies::check_settings(location, &vars),
            "{location} {vars:?} did not build"
        );
    }
}

/// Values of every shape: plausible ones (so that some inputs get as far
/// as a request), URL-ish fragments, and arbitrary text with control
/// characters, spaces and non-ASCII.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("true".to_string()),
        Just("acct".to_string()),
        Just(EMULATOR_ACCOUNT_KEY.to_string()),
        "(http|https|ftp|file)://[a-z0-9.\\[\\]:@/?#%-]{0,24}",
        "[a-zA-Z0-9._:/ -]{0,16}",
        "[\\x00-\\x7f]{0,16}",
        any::<String>(),
    ]
}

fn location() -> impl Strategy<Value = String> {
    prop_oneof![
        "(s3|az)://[a-z0-9-]{3,8}(/[a-z0-9.]{0,4}){0,3}",
        "(s3|az)://[a-z0-9-]{3,8}/[\\x00-\\x7f]{0,12}",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_location_or_environment_panics(
        location in location(),
        values in prop::collection::vec(prop::option::of(value()), fuzz_bodies::SETTINGS_ENV_KEYS.len()),
    ) {
        let env: Vec<(&str, &str)> = fuzz_bodies::SETTINGS_ENV_KEYS
            .iter()
            .copied()
            .zip(values.iter())
            .filter_map(|(k, v)| v.as_deref().map(|v| (k, v)))
            .collect();
        fuzz_bodies::check_settings(&location, &env);
    }
}

/// The `x-amz-content-sha256` header of the one PUT `settings` send,
/// captured by an HTTP client that then refuses the request.
fn content_sha256_of_a_put(settings: &S3Settings) -> String {
    use std::sync::{Arc, Mutex};

    use object_store::client::{
        HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
    };
    use object_store::{ClientOptions, ObjectStore, PutPayload};

    #[derive(Debug, Clone, Default)]
    struct Capture(Arc<Mutex<Vec<String>>>);
    impl HttpConnector for Capture {
        fn connect(&self, _: &ClientOptions) -> object_store::Result<HttpClient> {
            Ok(HttpClient::new(self.clone()))
        }
    }
    #[async_trait::async_trait]
    impl HttpService for Capture {
        async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
            let header = req
                .headers()
                .get("x-amz-content-sha256")
                .map(|v| v.to_str().unwrap_or("<not ascii>").to_string())
                .unwrap_or_default();
            self.0.lock().unwrap().push(header);
            Err(HttpError::new(
                HttpErrorKind::Connect,
                std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
            ))
        }
    }

    let capture = Capture::default();
    let mut quiet = settings.clone();
    quiet.http_retries = Some(0);
    let store = quiet
        .to_builder()
        .expect("settings are valid")
        .with_http_connector(capture.clone())
        .build()
        .expect("store builds");
    let runtime = fuzz_bodies::offline::runtime();
    let put = runtime.block_on(store.put(
        &object_store::path::Path::from("seg"),
        PutPayload::from_static(b"segment bytes"),
    ));
    assert!(put.is_err(), "the capturing client answered");
    let seen = capture.0.lock().unwrap();
    seen.first().cloned().expect("one request was sent")
}

#[test]
fn unsigned_payload_reaches_the_request() {
    // Signed (the default): the header is the body's SHA-256 in hex.
    let signed = content_sha256_of_a_put(&s3_ok());
    assert_eq!(signed.len(), 64, "{signed}");
    assert!(signed.bytes().all(|b| b.is_ascii_hexdigit()), "{signed}");
    // Unsigned: the signature does not cover the body.
    let unsigned = s3_ok().with_unsigned_payload(true);
    assert_eq!(content_sha256_of_a_put(&unsigned), "UNSIGNED-PAYLOAD");
    // And from the environment.
    let from_env = S3Settings::from_lookup(
        "logs",
        "",
        env(&[
            ("AWS_UNSIGNED_PAYLOAD", "true"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:8333"),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_ACCESS_KEY_ID", "key"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
        ]),
    )
    .unwrap();
    assert!(from_env.unsigned_payload);
    assert_eq!(content_sha256_of_a_put(&from_env), "UNSIGNED-PAYLOAD");
    let bad =
        S3Settings::from_lookup("logs", "", env(&[("AWS_UNSIGNED_PAYLOAD", "maybe")])).unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::InvalidInput);
}
